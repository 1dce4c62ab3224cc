//! `cargo xtask lab | build | test | fuzz | fmt`: everything a fresh machine needs, idempotently.
//!
//! - `lab`:   set up, build, and serve the lab (`hotlab serve`, default 127.0.0.1:8080).
//! - `build`: set up and build: libtorch (PyTorch 2.11.0 wheel in `.venv`), the wasm32
//!   target, `wasm-bindgen-cli` at Cargo.lock's version, the web bundle into
//!   `static/pkg/`, and `target/release/hotlab` (runs directly: rpath to libtorch).
//! - `test`:  `build`, plus what the tests need (gymnasium, ray[default], Chromium, SWI-Prolog and Mesa's
//!   software Vulkan from Debian, playwright-core from npm), then every suite and a summary table.
//! - `fuzz`:  `build`, then every fuzz target at a budget of cases, with a seed, timed.
//!
//! Each step checks before it installs, so a second run installs nothing.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

const TORCH_VERSION: &str = "2.11.0";
const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// Chromium for the browser tests, SWI-Prolog as the reference Prolog, Mesa's software
/// Vulkan (lavapipe) for the WGSL kernel's native tests.
const APT_PACKAGES: &[&str] = &["chromium", "chromium-driver", "swi-prolog-nox", "mesa-vulkan-drivers", "libvulkan1"];

const HELP: &str = "\
cargo xtask <command>

Commands:
  lab [--host H] [--port P]   set up what is missing, build, and serve the lab (default 127.0.0.1:8080)
  build                       set up what is missing and build the worker and the web bundle
  test                        build, install the test tools, run every suite, print a summary
  fuzz [--cases N] [--seed S] [--target NAME]...
                              build, then run each fuzz target with N cases per loop (default 100000)
                              from seed S (default: drawn and printed); a table of targets and seconds.
                              Targets: spec, prolog, checkpoint, api-runs, api-routes, websocket.
                              CI runs the same tests at their own small budgets and fixed seeds
  fmt                         cargo fmt, and the workload folders the registry's macros declare (cargo fmt
                              does not reach them)

Set-up (each step is skipped when already done):
  .venv with torch==2.11.0 (unless a python3 on PATH already has it), the wasm32 target,
  wasm-bindgen-cli at Cargo.lock's version; for `test` also gymnasium, ray[default], Debian's chromium and
  chromium-driver, swi-prolog-nox (the reference Prolog), mesa-vulkan-drivers and libvulkan1
  (software Vulkan for the WGSL tests), and playwright-core in e2e/
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("lab") => lab(&args[1..]),
        Some("build") => build().map(|_| ()),
        Some("test") => test(),
        Some("fuzz") => fuzz(&args[1..]),
        Some("fmt") => fmt(false),
        Some("-h" | "--help" | "help") | None => {
            print!("{HELP}");
            return if args.is_empty() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
        Some(other) => {
            eprintln!(
                "error: unknown command '{other}'; allowed: lab, build, test, fuzz, fmt (see `cargo xtask --help`)"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

fn step(name: &str) {
    eprintln!("\n==> {name}");
}

/// Runs a command in the workspace root; fails with its exit status.
fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd.current_dir(root()).status().with_context(|| format!("cannot start {shown}"))?;
    if !status.success() {
        bail!("{shown} failed ({status})");
    }
    Ok(())
}

/// True when the command runs and exits 0 (output discarded).
fn succeeds(cmd: &mut Command) -> bool {
    cmd.current_dir(root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.current_dir(root()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The Python whose torch the worker links: `.venv`'s, or a python3 on PATH that
/// already has torch 2.11.0, or a new `.venv`.
fn ensure_torch() -> Result<PathBuf> {
    step(&format!("libtorch {TORCH_VERSION} (PyTorch wheel)"));
    let check =
        format!("import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '{TORCH_VERSION}' else 1)");
    let venv_python = root().join(".venv/bin/python");
    if venv_python.exists() && succeeds(Command::new(&venv_python).args(["-c", &check])) {
        eprintln!("    .venv already has torch {TORCH_VERSION}");
        return Ok(venv_python);
    }
    if !venv_python.exists() {
        if let Some(path) = output(Command::new("python3").args(["-c", "import sys; print(sys.executable)"])) {
            if succeeds(Command::new(&path).args(["-c", &check])) {
                eprintln!("    using {path}, which has torch {TORCH_VERSION}");
                return Ok(PathBuf::from(path));
            }
        }
        eprintln!("    creating .venv");
        run(Command::new("python3").args(["-m", "venv", ".venv"]))?;
    }
    eprintln!("    installing torch=={TORCH_VERSION} into .venv (about 4.6 GB with its CUDA libraries)");
    run(Command::new(&venv_python).args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--progress-bar",
        "on",
        &format!("torch=={TORCH_VERSION}"),
    ]))?;
    Ok(venv_python)
}

/// The CUDA compiler headers (`crt/`) that the torch wheel's CUDA runtime headers include:
/// the worker's small C++ file for libtorch's CUDA streams and graphs compiles against them
/// (a 134 kB wheel). Only for a torch built for CUDA 13; elsewhere the worker builds
/// without that file.
fn ensure_cuda_headers(python: &Path) -> Result<()> {
    step("CUDA compiler headers (nvidia-cuda-crt, for the worker's CUDA stream shim)");
    let cuda = output(Command::new(python).args(["-c", "import torch; print(torch.version.cuda or '')"]));
    if !cuda.as_deref().unwrap_or("").starts_with("13.") {
        eprintln!("    not needed: this torch is not built for CUDA 13");
        return Ok(());
    }
    let have = "import importlib.metadata as m; m.version('nvidia-cuda-crt')";
    if succeeds(Command::new(python).args(["-c", have])) {
        eprintln!("    already installed");
        return Ok(());
    }
    let wheel = "nvidia-cuda-crt==13.0.*";
    run(Command::new(python).args(["-m", "pip", "install", "--disable-pip-version-check", "--no-deps", wheel]))
}

/// Environment under which cargo builds tch against that Python's torch.
fn torch_env<'a>(cmd: &'a mut Command, python: &Path) -> &'a mut Command {
    let bin = python.parent().expect("python has a directory");
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("{}:{path}", bin.display())).env("LIBTORCH_USE_PYTORCH", "1");
    if bin.parent().is_some_and(|v| v.join("pyvenv.cfg").exists()) {
        cmd.env("VIRTUAL_ENV", bin.parent().unwrap());
    }
    cmd
}

fn ensure_wasm_target() -> Result<()> {
    step("wasm32 target");
    let installed = output(Command::new("rustup").args(["target", "list", "--installed"])).unwrap_or_default();
    if installed.lines().any(|l| l.trim() == WASM_TARGET) {
        eprintln!("    already installed");
        return Ok(());
    }
    run(Command::new("rustup").args(["target", "add", WASM_TARGET]))
}

/// The exact `wasm-bindgen` version in Cargo.lock.
fn locked_wasm_bindgen_version() -> Result<String> {
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).context("reading Cargo.lock")?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"wasm-bindgen\"" {
            if let Some(v) = lines.next().and_then(|l| l.trim().strip_prefix("version = ")) {
                return Ok(v.trim_matches('"').to_string());
            }
        }
    }
    bail!("Cargo.lock has no wasm-bindgen package")
}

fn ensure_wasm_bindgen() -> Result<PathBuf> {
    let version = locked_wasm_bindgen_version()?;
    step(&format!("wasm-bindgen-cli {version}"));
    let cargo_home = std::env::var("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into())).join(".cargo"));
    let bin = cargo_home.join("bin/wasm-bindgen");
    let have = output(Command::new(&bin).arg("--version")).unwrap_or_default();
    if have.split_whitespace().nth(1) == Some(version.as_str()) {
        eprintln!("    already installed");
        return Ok(bin);
    }
    run(Command::new("cargo").args(["install", "wasm-bindgen-cli", "--version", &version]))?;
    Ok(bin)
}

/// The web app for wasm32, then wasm-bindgen into static/pkg.
fn build_web(bindgen: &Path) -> Result<()> {
    step("web bundle (wasm32, release) → static/pkg");
    run(Command::new("cargo").args(["build", "--release", "--target", WASM_TARGET, "-p", "hotlab-web"]))?;
    let wasm = root().join("target").join(WASM_TARGET).join("release/hotlab-web.wasm");
    let wasm =
        if wasm.exists() { wasm } else { root().join("target").join(WASM_TARGET).join("release/hotlab_web.wasm") };
    run(Command::new(bindgen)
        .args(["--target", "web", "--no-typescript", "--out-name", "hotlab_web", "--out-dir", "static/pkg"])
        .arg(&wasm))
}

fn build_worker(python: &Path) -> Result<()> {
    step("worker (target/release/hotlab)");
    run(torch_env(Command::new("cargo").args(["build", "--release", "-p", "hotlab"]), python))
}

/// Everything `build` does; returns the Python with torch.
fn build() -> Result<PathBuf> {
    let python = ensure_torch()?;
    ensure_cuda_headers(&python)?;
    ensure_wasm_target()?;
    let bindgen = ensure_wasm_bindgen()?;
    build_web(&bindgen)?;
    build_worker(&python)?;
    eprintln!("\nbuilt: target/release/hotlab and static/pkg/ (run `target/release/hotlab --help`)");
    Ok(python)
}

fn lab(args: &[String]) -> Result<()> {
    let mut serve_args = vec!["serve".to_string()];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--host" | "--port" => {
                let v = it.next().with_context(|| format!("{a} needs a value"))?;
                serve_args.extend([a.clone(), v.clone()]);
            }
            other => bail!("unknown option '{other}' for `cargo xtask lab`; allowed: --host H, --port P"),
        }
    }
    build()?;
    step("serving the lab (Ctrl-C stops it)");
    run(Command::new(root().join("target/release/hotlab")).args(&serve_args))
}

fn ensure_test_tools(python: &Path) -> Result<()> {
    step("gymnasium (reference CartPole)");
    if succeeds(Command::new(python).args(["-c", "import gymnasium"])) {
        eprintln!("    already installed");
    } else {
        run(Command::new(python).args(["-m", "pip", "install", "--disable-pip-version-check", "gymnasium"]))?;
    }

    step("ray[default] (a real Ray head for the lab's Ray tests)");
    if succeeds(Command::new(python).args(["-c", "import ray, ray.dashboard, aiohttp"])) {
        eprintln!("    already installed");
    } else {
        run(Command::new(python).args(["-m", "pip", "install", "--disable-pip-version-check", "ray[default]"]))?;
    }

    step(&format!("Debian packages: {}", APT_PACKAGES.join(", ")));
    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            output(Command::new("dpkg-query").args(["-W", "-f=${Status}", p]))
                .is_none_or(|s| !s.contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        eprintln!("    already installed");
    } else {
        let sudo = output(Command::new("id").arg("-u")).as_deref() != Some("0");
        let apt = |args: &[&str]| {
            let mut c = if sudo { Command::new("sudo") } else { Command::new("apt-get") };
            if sudo {
                c.arg("apt-get");
            }
            c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
            c
        };
        run(&mut apt(&["update", "-q"]))?;
        let mut install = apt(&["install", "-y", "-q", "--no-install-recommends"]);
        run(install.args(&missing))?;
    }

    step("playwright-core (e2e/node_modules)");
    if root().join("e2e/node_modules/playwright-core/package.json").exists() {
        eprintln!("    already installed");
    } else {
        run(Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix", "e2e"])
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"))?;
    }
    Ok(())
}

struct Suite {
    name: &'static str,
    ok: bool,
    seconds: f64,
}

/// Each workload folder's roots: its native code (`mod.rs`, whose modules rustfmt
/// follows), its declarations (`spec.rs`) and its view (`web.rs`).
fn registry_files() -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for dir in std::fs::read_dir("workloads/src")? {
        let dir = dir?.path();
        files.extend(["mod.rs", "spec.rs", "web.rs"].map(|f| dir.join(f)).into_iter().filter(|f| f.is_file()));
    }
    files.sort();
    Ok(files)
}

/// `cargo fmt`, then the workload folders: the registry's macros declare their modules, and
/// `cargo fmt` does not follow a module a macro declares. With `check`, changes nothing
/// and fails on a difference.
fn fmt(check: bool) -> Result<()> {
    let flag: &[&str] = if check { &["--check"] } else { &[] };
    run(Command::new("cargo").args(["fmt", "--all"]).args(flag))?;
    run(Command::new("rustfmt").args(["--edition", "2021"]).args(flag).args(registry_files()?))
}

fn test() -> Result<()> {
    let started = Instant::now();
    let python = build()?;
    ensure_test_tools(&python)?;
    let bindgen = ensure_wasm_bindgen()?;

    let mut suites = Vec::new();
    let mut suite = |name: &'static str, f: &mut dyn FnMut() -> Result<()>| {
        step(&format!("suite: {name}"));
        let t = Instant::now();
        let ok = match f() {
            Ok(()) => true,
            Err(e) => {
                eprintln!("    FAILED: {e:#}");
                false
            }
        };
        suites.push(Suite { name, ok, seconds: t.elapsed().as_secs_f64() });
    };
    suite("fmt", &mut || fmt(true));
    suite("clippy", &mut || {
        run(torch_env(
            Command::new("cargo").args(["clippy", "--release", "--all-targets", "--", "-D", "warnings"]),
            &python,
        ))
    });
    suite("clippy (wasm32)", &mut || {
        run(Command::new("cargo").args([
            "clippy",
            "--release",
            "--target",
            WASM_TARGET,
            "-p",
            "hotlab-web",
            "--",
            "-D",
            "warnings",
        ]))
    });
    suite("wasm32 build", &mut || build_web(&bindgen));
    suite("workspace tests", &mut || {
        run(torch_env(Command::new("cargo").args(["test", "--release"]), &python).env("HOTLAB_PYTHON", &python))
    });
    // The web app's pure parts (routes, folding events, charts' data, the playground's
    // bookkeeping) compile natively too; the default members above do not include it.
    suite("web unit tests", &mut || run(Command::new("cargo").args(["test", "--release", "-p", "hotlab-web"])));
    suite("browser tests", &mut || {
        build_worker(&python)?;
        run(Command::new("node")
            .args(["--test", "--test-concurrency=1", "e2e/"])
            .env("HOTLAB_BIN", root().join("target/release/hotlab")))
    });

    eprintln!("\n{:<20} {:>8} {:>9}", "suite", "result", "seconds");
    for s in &suites {
        eprintln!("{:<20} {:>8} {:>9.1}", s.name, if s.ok { "ok" } else { "FAILED" }, s.seconds);
    }
    let failed = suites.iter().filter(|s| !s.ok).count();
    eprintln!("\n{:.0} s in all", started.elapsed().as_secs_f64());
    println!("suites: {} passed, {failed} failed", suites.len() - failed);
    if failed > 0 {
        bail!("{failed} suite(s) failed");
    }
    Ok(())
}

/// A fuzz target: its name, what it throws at what, and the `cargo test` arguments that
/// run it. Each reads its budget and seed from `HOTLAB_FUZZ_CASES` and `HOTLAB_FUZZ_SEED`.
struct FuzzTarget {
    name: &'static str,
    about: &'static str,
    args: &'static [&'static str],
}

const FUZZ_TARGETS: &[FuzzTarget] = &[
    FuzzTarget {
        name: "spec",
        about: "the spec parser: any JSON, and each workload's spec with one knob set to anything",
        args: &["-p", "hotlab-shared", "--test", "fuzz"],
    },
    FuzzTarget {
        name: "prolog",
        about: "the Prolog parser: random text and programs with a character changed",
        args: &["-p", "hotlab-workloads", "--test", "prolog_fuzz"],
    },
    FuzzTarget {
        name: "checkpoint",
        about: "four workloads' checkpoints damaged in their weights header and spec.json",
        args: &["-p", "hotlab-workloads", "--test", "checkpoint_fuzz"],
    },
    FuzzTarget {
        name: "api-runs",
        about: "POST /api/runs with mutated specs, and the run routes with random ids and queries",
        args: &["-p", "hotlab", "--test", "api_fuzz", "mutated_requests_get_4xx_json_never_5xx"],
    },
    FuzzTarget {
        name: "api-routes",
        about: "every REST route, GET and POST, with mutated paths, queries and bodies",
        args: &["-p", "hotlab", "--test", "api_fuzz", "every_route_answers_mutated_requests_with_json_never_5xx"],
    },
    FuzzTarget {
        name: "websocket",
        about: "WebSocket upgrades with random queries, random messages on an open stream",
        args: &["-p", "hotlab", "--test", "api_fuzz", "random_websocket_queries_and_messages_are_harmless"],
    },
];

/// `cargo xtask fuzz`: every target (or those named) at `--cases`, each timed.
fn fuzz(args: &[String]) -> Result<()> {
    let (mut cases, mut seed, mut names) = (100_000u32, None, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--cases" => {
                let v = value()?;
                cases = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .with_context(|| format!("--cases: a whole number of cases from 1 up, got '{v}'"))?;
            }
            "--seed" => {
                let v = value()?;
                seed = Some(v.parse::<u64>().with_context(|| format!("--seed: a whole number, got '{v}'"))?);
            }
            "--target" => {
                let v = value()?;
                if !FUZZ_TARGETS.iter().any(|t| t.name == v.as_str()) {
                    let all: Vec<&str> = FUZZ_TARGETS.iter().map(|t| t.name).collect();
                    bail!("--target: unknown target '{v}'; allowed: {}", all.join(", "));
                }
                names.push(v.clone());
            }
            other => {
                bail!("unknown option '{other}' for `cargo xtask fuzz`; allowed: --cases N, --seed S, --target NAME")
            }
        }
    }
    // A fresh seed per session unless one is given to replay.
    let seed = seed.unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        now.as_nanos() as u64 ^ u64::from(std::process::id())
    });
    let targets: Vec<&FuzzTarget> =
        FUZZ_TARGETS.iter().filter(|t| names.is_empty() || names.iter().any(|n| n == t.name)).collect();
    let python = build()?;
    step("building the fuzz targets");
    for package in ["hotlab-shared", "hotlab-workloads", "hotlab"] {
        run(torch_env(Command::new("cargo").args(["test", "--release", "--no-run", "-p", package]), &python))?;
    }
    let mut rows = Vec::new();
    for t in &targets {
        step(&format!("fuzz {}: {} ({cases} cases per loop, seed {seed})", t.name, t.about));
        let started = Instant::now();
        let ok = run(torch_env(
            Command::new("cargo")
                .args(["test", "--release"])
                .args(t.args)
                .args(["--", "--nocapture"])
                .env("HOTLAB_FUZZ_CASES", cases.to_string())
                .env("HOTLAB_FUZZ_SEED", seed.to_string())
                .env("HOTLAB_PYTHON", &python),
            &python,
        ))
        .is_ok();
        rows.push((t.name, ok, started.elapsed().as_secs_f64()));
    }
    eprintln!("\n{:<12} {:>10} {:>8} {:>9}", "target", "cases", "result", "seconds");
    for (name, ok, secs) in &rows {
        eprintln!("{name:<12} {cases:>10} {:>8} {secs:>9.1}", if *ok { "ok" } else { "FAILED" });
    }
    eprintln!("\nseed {seed}: a failure replays with `cargo xtask fuzz --seed {seed} --cases {cases} --target NAME`");
    let failed = rows.iter().filter(|r| !r.1).count();
    if failed > 0 {
        bail!("{failed} fuzz target(s) failed");
    }
    Ok(())
}

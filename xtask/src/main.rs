//! `cargo xtask lab | build | test | fuzz | fmt | layers | peers`: everything a fresh machine needs,
//! idempotently.
//!
//! - `lab`:   set up, build, and serve the lab (`hotlab serve`, default 127.0.0.1:8080).
//! - `build`: set up and build: libtorch (PyTorch 2.11.0 wheel in `.venv`), the wasm32
//!   target, `wasm-bindgen-cli` at Cargo.lock's version, the web bundle into
//!   `static/pkg/`, and `target/release/hotlab` (runs directly: rpath to libtorch).
//! - `test`:  the same set-up, plus what the tests need (gymnasium, `ray[default]`, EnvPool, Chromium, SWI-Prolog
//!   and Mesa's software Vulkan from Debian, playwright-core from npm), then every suite and a summary
//!   table. The worker is built with the tests, in one build (see [`TEST_BUILD`]).
//! - `fuzz`:  `build`, then every fuzz target at a budget of cases, with a seed, timed.
//! - `layers`: the import rules of docs/architecture.md, checked ([`layers`]).
//! - `peers`: EnvPool in `.venv-envpool`, the `envpool` peer of `hotlab bench envs`, and
//!   CleanRL's and Stable-Baselines3's dependencies in `.venv-peers`.
//!
//! Each step checks before it installs, so a second run installs nothing.

mod fuzz;
mod lanes;
mod layers;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

const TORCH_VERSION: &str = "2.11.0";
const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// Chromium for the browser tests, SWI-Prolog as the reference Prolog, Mesa's software
/// Vulkan (lavapipe) for the WGSL kernel's native tests, Mesa's offscreen GL (OSMesa) for
/// MuJoCo's pictures on a machine without a display.
const APT_PACKAGES: &[&str] =
    &["chromium", "chromium-driver", "swi-prolog-nox", "mesa-vulkan-drivers", "libvulkan1", "libosmesa6"];

const HELP: &str = "\
cargo xtask <command>

Commands:
  lab [--host H] [--port P] [--envpool]
                              set up what is missing, build, and serve the lab (default 127.0.0.1:8080);
                              --envpool also installs EnvPool in .venv-envpool (`--env envpool:ID`)
  build                       set up what is missing and build the worker and the web bundle
  test [SUITE]...             build, install the test tools, run every suite (or those named), print a
                              summary. Suites: fmt, layers (docs/architecture.md's import rules: no
                              upward import, no circle), clippy, doc (every crate's docs, their links
                              checked), clippy-wasm32, wasm32, workspace (the
                              web app's native unit tests too), browser. On request only (never in CI):
                              learning, the tests too long for CI (#[ignore]d: the dreamer actor's
                              learning, about 20 minutes of one core)
  fuzz [--cases N] [--seed S] [--target NAME]...
                              build, then run each fuzz target with N cases per loop (default 100000)
                              from seed S (default: drawn and printed); a table of targets and seconds.
                              Targets: spec, prolog, checkpoint, api-runs, api-routes, websocket.
                              CI runs the same tests at their own small budgets and fixed seeds
  fmt                         cargo fmt --all (the same as plain cargo fmt)
  layers                      the import rules of docs/architecture.md, checked (what `test`'s layers suite runs):
                              no file takes names from a higher layer of its crate, no files in a circle
  peers                       EnvPool 1.2.5 in .venv-envpool, for `hotlab bench envs --peer envpool` (`test`
                              installs it too), and CleanRL's and Stable-Baselines3's dependencies at their
                              own pins in .venv-peers (the continuous-control benchmarks, docs/benchmarks.md),
                              and CleanRL's ppo_atari_envpool.py's in .venv-peers-atari (Python 3.10)

Set-up (each step is skipped when already done; the Python side runs beside the wasm32 build, its
output in target/setup-python.log):
  .venv with torch==2.11.0 (unless a python3 on PATH already has it), the wasm32 target,
  wasm-bindgen-cli at Cargo.lock's version; for `test` also gymnasium[classic-control,mujoco,atari],
  stable-baselines3, ray[default], EnvPool (in .venv-envpool), Debian's chromium and chromium-driver, swi-prolog-nox
  (the reference Prolog), mesa-vulkan-drivers and libvulkan1 (software Vulkan for the WGSL tests),
  libosmesa6 (MuJoCo's pictures without a display), and playwright-core in e2e/
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("lab") => lab(&args[1..]),
        Some("build") => build().map(|_| ()),
        Some("test") => test(&args[1..]),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("fmt") => fmt(false),
        Some("layers") => layers::check(&root()),
        Some("peers") => ensure_envpool().and_then(|()| ensure_learning_peers()).and_then(|()| ensure_atari_peer()),
        // What `setup` runs beside the wasm32 build; not for a person to call.
        Some("python-setup") => python_setup(args.get(1).is_some_and(|a| a == "--test")).map(|_| ()),
        Some("-h" | "--help" | "help") | None => {
            print!("{HELP}");
            return if args.is_empty() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
        Some(other) => {
            eprintln!(
                "error: unknown command '{other}'; allowed: lab, build, test, fuzz, fmt, layers, peers (see `cargo xtask --help`)"
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

/// Environment under which cargo builds tch against that Python's torch (and the tests
/// find the venv's tools, `ray` among them, on PATH).
fn torch_vars(python: &Path) -> Vec<(String, String)> {
    let bin = python.parent().expect("python has a directory");
    let path = std::env::var("PATH").unwrap_or_default();
    let mut vars =
        vec![("PATH".into(), format!("{}:{path}", bin.display())), ("LIBTORCH_USE_PYTORCH".into(), "1".into())];
    if let Some(venv) = bin.parent().filter(|v| v.join("pyvenv.cfg").exists()) {
        vars.push(("VIRTUAL_ENV".into(), venv.display().to_string()));
    }
    vars
}

fn torch_env<'a>(cmd: &'a mut Command, python: &Path) -> &'a mut Command {
    cmd.envs(torch_vars(python))
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
    let (python, _) = setup(false)?;
    build_worker(&python)?;
    eprintln!("\nbuilt: target/release/hotlab and static/pkg/ (run `target/release/hotlab --help`)");
    Ok(python)
}

/// libtorch, the wasm32 target, wasm-bindgen-cli and the web bundle: what every command needs
/// before the worker (with `for_tests`, the tests' Python packages too). Returns the Python
/// with torch and the `wasm-bindgen` executable.
///
/// The Python side is mostly downloads (torch is about 4.6 GB; about 70 s on a fast link)
/// and the web bundle's build is all CPU, so they go side by side: the Python side in a child
/// `cargo xtask python-setup`, its output in a log so that the two do not interleave.
fn setup(for_tests: bool) -> Result<(PathBuf, PathBuf)> {
    let log = root().join("target/setup-python.log");
    std::fs::create_dir_all(root().join("target"))?;
    let tools = if for_tests {
        ", gymnasium[classic-control,mujoco,atari], stable-baselines3, ray[default], EnvPool"
    } else {
        ""
    };
    step(&format!("Python side (torch, CUDA headers{tools}), beside the wasm32 build"));
    eprintln!("    log: {}", log.display());
    let file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut python_side = Command::new(std::env::current_exe().context("xtask's own path")?)
        .arg("python-setup")
        .args(for_tests.then_some("--test"))
        .current_dir(root())
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .context("cannot start the Python side of the set-up")?;
    let web = (|| {
        ensure_wasm_target()?;
        let bindgen = ensure_wasm_bindgen()?;
        build_web(&bindgen)?;
        Ok::<_, anyhow::Error>(bindgen)
    })();
    let status = python_side.wait().context("waiting for the Python side of the set-up")?;
    if !status.success() {
        eprintln!("{}", std::fs::read_to_string(&log).unwrap_or_default());
        bail!("the Python side of the set-up failed ({status}); its log is above and in {}", log.display());
    }
    let bindgen = web?;
    // Done by now: these only check, and say what the Python side found.
    let python = python_setup(for_tests)?;
    Ok((python, bindgen))
}

/// torch and the CUDA headers (with `for_tests`, gymnasium and ray too); returns the Python.
fn python_setup(for_tests: bool) -> Result<PathBuf> {
    let python = ensure_torch()?;
    ensure_cuda_headers(&python)?;
    if for_tests {
        ensure_python_test_tools(&python)?;
        ensure_envpool()?;
    }
    Ok(python)
}

/// EnvPool's version for `hotlab bench envs --peer envpool`.
const ENVPOOL_VERSION: &str = "1.2.5";

/// EnvPool in a venv of its own, `.venv-envpool`: its dependencies (matplotlib, its envs'
/// assets: about 950 MB installed) stay out of the project's `.venv`.
fn ensure_envpool() -> Result<()> {
    step(&format!("EnvPool {ENVPOOL_VERSION} in .venv-envpool (`hotlab bench envs --peer envpool`)"));
    let venv = root().join(".venv-envpool");
    let python = venv.join("bin/python");
    let check = format!("import envpool; assert envpool.__version__ == '{ENVPOOL_VERSION}'");
    if succeeds(Command::new(&python).args(["-W", "ignore", "-c", &check])) {
        eprintln!("    already installed");
        return Ok(());
    }
    if !python.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    let spec = format!("envpool=={ENVPOOL_VERSION}");
    run(Command::new(&python).args(["-m", "pip", "install", "--disable-pip-version-check", "--quiet", &spec]))
}

/// The continuous-control peers' pins: CleanRL's own (its `pyproject.toml`: gymnasium
/// 0.29.1, torch 2.4.1, mujoco ≤ 2.3.3) and Stable-Baselines3 with rl-baselines3-zoo.
const LEARNING_PEERS: &[&str] = &[
    "torch==2.4.1",
    "gymnasium[mujoco]==0.29.1",
    "mujoco==2.3.3",
    "numpy<2",
    "tyro",
    "tensorboard",
    "stable-baselines3==2.3.2",
    "rl_zoo3==2.3.0",
];

/// CleanRL's and Stable-Baselines3's dependencies in `.venv-peers`, a venv of their own
/// (their pins are not the project's: CleanRL runs unmodified on gymnasium 0.29.1), for
/// the continuous-control benchmarks of docs/benchmarks.md. CleanRL's script itself is
/// fetched at its pinned commit by whoever runs the benchmark; nothing of it is in this tree.
fn ensure_learning_peers() -> Result<()> {
    step("CleanRL's and Stable-Baselines3's dependencies in .venv-peers (the continuous-control benchmarks)");
    let venv = root().join(".venv-peers");
    let python = venv.join("bin/python");
    let check =
        "import torch, gymnasium, mujoco, tyro, stable_baselines3, rl_zoo3; assert gymnasium.__version__ == '0.29.1'";
    if succeeds(Command::new(&python).args(["-W", "ignore", "-c", check])) {
        eprintln!("    already installed");
        return Ok(());
    }
    if !python.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    run(Command::new(&python)
        .args(["-m", "pip", "install", "--disable-pip-version-check", "--quiet"])
        .args(LEARNING_PEERS))
}

/// CleanRL's `ppo_atari_envpool.py`'s pins (its `envpool` extra: EnvPool 0.6, whose `gym`
/// env type its script steps with gym 0.23.1's API, and torch 2.4.1, PyPI's wheel, run on
/// the CPU). EnvPool
/// 0.6's wheels stop at Python 3.10.
const ATARI_PEER: &[&str] =
    &["envpool==0.6.6", "gym==0.23.1", "numpy<2", "opencv-python-headless<5", "tyro", "tensorboard", "torch==2.4.1"];

/// A Python 3.10 for [`ensure_atari_peer`]: `python3.10` on the `PATH`, or pyenv's.
fn python310() -> Option<PathBuf> {
    let on_path = Command::new("python3.10").args(["-c", "import sys; print(sys.executable)"]).output().ok();
    if let Some(out) = on_path.filter(|o| o.status.success()) {
        return Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    }
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")))?;
    let mut found: Vec<PathBuf> = std::fs::read_dir(pyenv.join("versions"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("3.10"))
        .map(|e| e.path().join("bin/python3"))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop()
}

/// CleanRL's `ppo_atari_envpool.py`'s dependencies in `.venv-peers-atari`, a Python 3.10
/// venv of their own: the pixel benchmark's peer (docs/benchmarks.md). Without a Python
/// 3.10 on this machine it says so and installs nothing.
fn ensure_atari_peer() -> Result<()> {
    step("CleanRL's ppo_atari_envpool.py dependencies in .venv-peers-atari (the Atari benchmark, Python 3.10)");
    let venv = root().join(".venv-peers-atari");
    let python = venv.join("bin/python");
    let check =
        "import envpool, gym, torch, tyro; assert envpool.__version__ == '0.6.6' and gym.__version__ == '0.23.1'";
    if succeeds(Command::new(&python).args(["-W", "ignore", "-c", check])) {
        eprintln!("    already installed");
        return Ok(());
    }
    let Some(base) = python310() else {
        eprintln!(
            "    skipped: no Python 3.10 here (python3.10 on PATH, or pyenv's), and EnvPool 0.6's wheels need it"
        );
        return Ok(());
    };
    if !python.exists() {
        run(Command::new(base).args(["-m", "venv"]).arg(&venv))?;
    }
    run(Command::new(&python).args(["-m", "pip", "install", "--disable-pip-version-check", "--quiet"]).args(ATARI_PEER))
}

/// `cargo test`'s build of the whole workspace, the web app's native unit tests and the worker
/// (`target/release/hotlab`, which the tests run) included, in one build. Cargo unifies a
/// crate's features over the packages it builds together: a separate `cargo build -p hotlab`
/// and `cargo test -p hotlab-web` resolve other features for half, smallvec, serde, syn and
/// others than this build does, so tch, axum, the workspace's own crates (and, for the web
/// app, 231 crates) compiled twice or three times.
const TEST_BUILD: &[&str] =
    &["test", "--release", "--workspace", "--no-run", "--message-format=json-render-diagnostics"];

/// Runs [`TEST_BUILD`] (nothing to do when it is up to date); returns the test binaries.
fn build_tests(vars: &[(String, String)]) -> Result<Vec<lanes::Binary>> {
    let out = Command::new("cargo")
        .args(TEST_BUILD)
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .current_dir(root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("cannot start cargo test --no-run")?;
    if !out.status.success() {
        bail!("building the tests failed ({})", out.status);
    }
    lanes::parse_artifacts(&String::from_utf8_lossy(&out.stdout))
}

fn lab(args: &[String]) -> Result<()> {
    let mut serve_args = vec!["serve".to_string()];
    let mut envpool = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--host" | "--port" => {
                let v = it.next().with_context(|| format!("{a} needs a value"))?;
                serve_args.extend([a.clone(), v.clone()]);
            }
            "--envpool" => envpool = true,
            other => bail!("unknown option '{other}' for `cargo xtask lab`; allowed: --host H, --port P, --envpool"),
        }
    }
    let python = build()?;
    if envpool {
        ensure_envpool()?;
    }
    say_what_gym_envs_need(&python);
    step("serving the lab (Ctrl-C stops it)");
    run(Command::new(root().join("target/release/hotlab")).args(&serve_args))
}

/// The lab runs users' Gymnasium envs with the interpreter a run names (the project's venv
/// by default) and installs none of them: it says what the venv lacks for the envs people
/// train most, and how to add it.
fn say_what_gym_envs_need(python: &Path) {
    step("Gymnasium envs for `--env gym:ID` (installed by you, into the interpreter a run uses)");
    let has = |module: &str| succeeds(Command::new(python).args(["-c", &format!("import {module}")]));
    let pip = format!("{} -m pip install", python.display());
    if !has("gymnasium") {
        eprintln!("    no gymnasium in {}: `{pip} \"gymnasium[classic-control,mujoco,atari]\"` adds it with CartPole's kin, MuJoCo's and Atari's envs", python.display());
        return;
    }
    if !has("mujoco") {
        eprintln!("    no MuJoCo: its envs (gym:HalfCheetah-v5, Hopper-v5, InvertedPendulum-v5, the mujoco preset) need `{pip} \"gymnasium[mujoco]\"`");
    } else if std::env::var_os("DISPLAY").is_none() && !has_osmesa(python) {
        eprintln!("    MuJoCo's envs step, but without a display they draw env 0 only with an offscreen GL: `apt-get install libosmesa6` (the run view says why there is no picture until then)");
    } else {
        eprintln!("    gymnasium and MuJoCo are there");
    }
    if !has("ale_py") || !has("cv2") {
        eprintln!("    no Atari: its envs (gym:ALE/Breakout-v5, ...) need `{pip} \"gymnasium[atari]\" opencv-python-headless` (ale-py, its ROMs included; OpenCV for the preprocessing)");
    }
}

/// Whether the gym worker finds Mesa's offscreen GL the way it looks for it.
fn has_osmesa(python: &Path) -> bool {
    let find = "import ctypes.util, sys; sys.exit(ctypes.util.find_library('OSMesa') is None)";
    succeeds(Command::new(python).args(["-c", find]))
}

/// The tests' Python packages: gymnasium with its classic-control extra (the reference
/// CartPole, and pygame, which draws the classic-control envs' pictures) and its mujoco
/// extra (MuJoCo's envs: the Box actions' learning test), its atari extra (ale-py, whose
/// wheel ships the ROMs: Atari's ids and their refusals) with OpenCV (which Atari's
/// preprocessing resizes frames with), Stable-Baselines3 (a user's script under the
/// probe), and a real Ray.
fn ensure_python_test_tools(python: &Path) -> Result<()> {
    step("gymnasium[classic-control,mujoco,atari] (reference CartPole; pygame draws env pictures; MuJoCo's and Atari's envs)");
    if succeeds(Command::new(python).args(["-c", "import gymnasium, pygame, mujoco, ale_py, cv2"])) {
        eprintln!("    already installed");
    } else {
        let pip = [
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "gymnasium[classic-control,mujoco,atari]",
            "opencv-python-headless",
        ];
        run(Command::new(python).args(pip))?;
    }

    step("stable-baselines3 2.9.2 (a user's SB3 script profiled under hotlab's probe)");
    if succeeds(
        Command::new(python).args(["-c", "import stable_baselines3; assert stable_baselines3.__version__ == '2.9.2'"]),
    ) {
        eprintln!("    already installed");
    } else {
        run(Command::new(python).args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "stable-baselines3==2.9.2",
        ]))?;
    }

    step("ray[default] (a real Ray head for the lab's Ray tests)");
    if succeeds(Command::new(python).args(["-c", "import ray, ray.dashboard, aiohttp"])) {
        eprintln!("    already installed");
    } else {
        run(Command::new(python).args(["-m", "pip", "install", "--disable-pip-version-check", "ray[default]"]))?;
    }

    Ok(())
}

/// The tests' system packages (Debian's) and playwright-core (npm).
fn ensure_system_test_tools() -> Result<()> {
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

/// `cargo fmt --all`: every module, the workload folders' too, is declared in plain text.
/// With `check`, changes nothing and fails on a difference.
fn fmt(check: bool) -> Result<()> {
    let flag: &[&str] = if check { &["--check"] } else { &[] };
    run(Command::new("cargo").args(["fmt", "--all"]).args(flag))
}

/// The suites of `cargo xtask test`, in the order they run.
const SUITES: &[&str] = &["fmt", "layers", "clippy", "doc", "clippy-wasm32", "wasm32", "workspace", "browser"];

/// Suites that run only when named: tests longer than CI's budget allows.
const ON_REQUEST: &[&str] = &["learning"];

/// The suites `cargo xtask test ARGS` runs: those named, or all but the ones on request; an
/// unknown name is refused, naming the ones allowed.
fn chosen_suites(args: &[String]) -> Result<Vec<&'static str>> {
    let known = || SUITES.iter().chain(ON_REQUEST).copied();
    if let Some(bad) = args.iter().find(|a| !known().any(|s| s == a.as_str())) {
        bail!("unknown suite '{bad}' for `cargo xtask test`; allowed: {}", known().collect::<Vec<_>>().join(", "));
    }
    Ok(match args.is_empty() {
        true => SUITES.to_vec(),
        false => known().filter(|s| args.iter().any(|a| a == s)).collect(),
    })
}

fn test(args: &[String]) -> Result<()> {
    let chosen = chosen_suites(args)?;
    let wanted = |key: &str| chosen.contains(&key);
    let started = Instant::now();
    // The worker is built with the tests (`TEST_BUILD`), not on its own.
    let (python, bindgen) = setup(true)?;
    ensure_system_test_tools()?;

    let mut suites = Vec::new();
    let mut suite = |name: &'static str, f: &mut dyn FnMut() -> Result<()>| {
        if !wanted(name) {
            return;
        }
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
    suite("layers", &mut || layers::check(&root()));
    suite("clippy", &mut || {
        run(torch_env(
            // The whole workspace, as the tests build it: its build scripts and proc macros
            // (torch-sys's C++ among them) are then the test build's own.
            Command::new("cargo").args(["clippy", "--release", "--workspace", "--all-targets", "--", "-D", "warnings"]),
            &python,
        ))
    });
    // Every crate's docs, their links checked (after clippy, whose metadata they reuse).
    suite("doc", &mut || {
        let mut doc = Command::new("cargo");
        doc.args(["doc", "--release", "--no-deps", "--workspace"]).env("RUSTDOCFLAGS", "-D warnings");
        run(torch_env(&mut doc, &python))
    });
    suite("clippy-wasm32", &mut || {
        run(Command::new("cargo").args([
            "clippy",
            "--release",
            "--target",
            WASM_TARGET,
            "-p",
            "hotlab-web",
            "-p",
            "hotlab-views",
            "--",
            "-D",
            "warnings",
        ]))
    });
    suite("wasm32", &mut || build_web(&bindgen));
    // The web app's pure parts (routes, folding events, charts' data, the playground's
    // bookkeeping) compile natively too: their unit tests are among the workspace's.
    suite("workspace", &mut || workspace_tests(&python));
    suite("browser", &mut || {
        build_tests(&test_vars(&python))?;
        run(Command::new("node")
            .args(["--test", "--test-concurrency=1", "e2e/"])
            .env("HOTLAB_BIN", root().join("target/release/hotlab")))
    });
    // The #[ignore]d tests: learning runs that prove what they claim only at budgets past CI's.
    suite("learning", &mut || {
        run(Command::new("cargo")
            .args(["test", "--release", "--workspace", "--", "--ignored"])
            .envs(test_vars(&python)))
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

/// The environment the tests run under, as `cargo test` gives it here: libtorch's variables,
/// the venv's Python on PATH and as `HOTLAB_PYTHON`.
fn test_vars(python: &Path) -> Vec<(String, String)> {
    let mut vars = torch_vars(python);
    vars.push(("HOTLAB_PYTHON".into(), python.display().to_string()));
    vars
}

/// The workspace's test binaries, built once and run in lanes, one per core ([`lanes`]).
fn workspace_tests(python: &Path) -> Result<()> {
    let vars = test_vars(python);
    let bins = build_tests(&vars)?;
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let outcomes = lanes::run(bins, cores, &root().join("target/test-logs"), &vars)?;
    eprintln!("\n    {} test binaries passed; the longest:", outcomes.len());
    for o in outcomes.iter().take(8) {
        eprintln!("    {:>8.1} s  {}", o.seconds, o.name);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No name: every suite in order but those on request; names pick suites (in the run's
    /// order); a typo is refused.
    #[test]
    fn test_runs_the_suites_named_or_all_and_refuses_an_unknown_one() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(chosen_suites(&[]).unwrap(), SUITES);
        assert_eq!(chosen_suites(&args(&["browser", "workspace"])).unwrap(), ["workspace", "browser"]);
        assert!(!chosen_suites(&[]).unwrap().contains(&"learning"), "the long learning tests run on request only");
        assert_eq!(chosen_suites(&args(&["learning", "fmt"])).unwrap(), ["fmt", "learning"]);
        let e = format!("{:#}", chosen_suites(&args(&["workspaces"])).unwrap_err());
        assert!(e.contains("unknown suite 'workspaces'") && e.contains("allowed: fmt, layers, clippy"), "{e}");
    }
}

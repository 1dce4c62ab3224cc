//! The workspace's test binaries, run side by side in lanes.
//!
//! `cargo test` runs one test binary after another, each with a thread per core: a binary
//! whose last test is long (the dreamer and morpho presets, single-threaded) leaves the
//! other cores idle for minutes. Here the binaries are built once, then each lane takes
//! the next binary, longest first, and runs it with one test thread: as many tests at a
//! time as there are cores, from start to end. A binary whose tests compare timings runs
//! alone, before the lanes start.
//!
//! In the lanes each process gets its share of the cores as libtorch's default intra-op
//! threads (`OMP_NUM_THREADS`, one each on 2 cores): OpenMP threads that outnumber the
//! cores wait on each other at every barrier (measured: two workload tests take 17 s on 2
//! threads alone, 55 s on 2 threads beside one busy process, 32 s on 1 thread beside it).
//! A run that asks for `--threads N` still gets N.

use anyhow::{bail, Context, Result};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

/// Test binaries by target name, the longest first (measured in the lanes on 2 cores, AMD
/// EPYC, 2026-12-02: dreamer 853 s and morpho 668 s before their cuts, gym 238, lab 195, cli
/// 188, hotlab_workloads 169, lessons about 140, pixels 156, profile 127, continuous 98,
/// workers 96, backends 85, solve 74); the others follow in build order.
const LONGEST_FIRST: &[&str] = &[
    "dreamer",
    "morpho",
    "gym",
    "lab",
    "cli",
    "hotlab_workloads",
    "pixels",
    "lessons",
    "profile",
    "continuous",
    "workers",
    "backends",
    "solve",
];

/// Binaries whose verdicts compare timings (the audit's, tune's): they run with the
/// machine to themselves.
const ALONE: &[&str] = &["verdicts"];

/// One test binary: its target's name, the executable, and the package folder it runs in
/// (as `cargo test` runs it).
#[derive(Debug, Clone, PartialEq)]
pub struct Binary {
    pub name: String,
    pub exe: PathBuf,
    pub dir: PathBuf,
}

/// The test binaries a `cargo test --no-run --message-format=json-render-diagnostics` run
/// printed, one per line of JSON.
pub fn parse_artifacts(stdout: &str) -> Result<Vec<Binary>> {
    let mut bins = Vec::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value = serde_json::from_str(line).with_context(|| format!("cargo's JSON: {line}"))?;
        let (Some(exe), true) = (v["executable"].as_str(), v["profile"]["test"] == true) else { continue };
        if v["reason"] != "compiler-artifact" {
            continue;
        }
        let manifest = PathBuf::from(v["manifest_path"].as_str().context("an artifact without manifest_path")?);
        let target = v["target"]["name"].as_str().context("an artifact without a target name")?;
        // A binary's unit tests share its package's name with the library's: say which.
        let kinds = v["target"]["kind"].as_array().cloned().unwrap_or_default();
        let name = if kinds.iter().any(|k| k == "bin") { format!("{target} (bin)") } else { target.to_string() };
        let dir = manifest.parent().context("a manifest path without a folder")?.to_path_buf();
        bins.push(Binary { name, exe: exe.into(), dir });
    }
    Ok(bins)
}

/// The order the lanes take binaries in: [`LONGEST_FIRST`]'s, then the rest as built.
pub fn order(mut bins: Vec<Binary>) -> Vec<Binary> {
    let rank = |b: &Binary| LONGEST_FIRST.iter().position(|n| *n == b.name).unwrap_or(LONGEST_FIRST.len());
    bins.sort_by_key(rank);
    bins
}

/// What one binary did.
#[derive(Debug)]
pub struct Outcome {
    pub name: String,
    pub ok: bool,
    pub seconds: f64,
    pub log: PathBuf,
}

/// Runs `bins` in `lanes` lanes (the [`ALONE`] ones first, by themselves), each binary's
/// output to `logs/NAME.log`, a line per binary as it ends, its log in full when it fails.
/// Every binary runs, failing or not; fails when any failed.
pub fn run(bins: Vec<Binary>, lanes: usize, logs: &Path, envs: &[(String, String)]) -> Result<Vec<Outcome>> {
    std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
    let total = bins.len();
    let (alone, shared): (Vec<Binary>, Vec<Binary>) = bins.into_iter().partition(|b| ALONE.contains(&b.name.as_str()));
    let done = Mutex::new(Vec::new());
    let report = |o: Outcome| {
        let mut done = done.lock().unwrap_or_else(|p| p.into_inner());
        eprintln!(
            "    [{}/{total}] {} {} ({:.1} s)",
            done.len() + 1,
            if o.ok { "ok    " } else { "FAILED" },
            o.name,
            o.seconds
        );
        if !o.ok {
            eprintln!("{}", std::fs::read_to_string(&o.log).unwrap_or_default());
        }
        done.push(o);
    };
    for b in &alone {
        eprintln!("    {} runs alone (its verdicts compare timings)", b.name);
        report(one(b, logs, envs, None));
    }
    let queue = Mutex::new(VecDeque::from(order(shared)));
    let lanes = lanes.max(1);
    let cores = std::thread::available_parallelism().map_or(lanes, |n| n.get());
    let mut shared_envs = envs.to_vec();
    shared_envs.push(("OMP_NUM_THREADS".into(), (cores / lanes).max(1).to_string()));
    let shared_envs = &shared_envs;
    eprintln!("    the rest in {lanes} lanes, one test thread and {} libtorch threads each", (cores / lanes).max(1));
    std::thread::scope(|s| {
        for _ in 0..lanes {
            s.spawn(|| loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                let Some(b) = next else { break };
                report(one(&b, logs, shared_envs, Some(1)));
            });
        }
    });
    let mut outcomes = done.into_inner().unwrap_or_else(|p| p.into_inner());
    outcomes.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    let failed: Vec<&str> = outcomes.iter().filter(|o| !o.ok).map(|o| o.name.as_str()).collect();
    if !failed.is_empty() {
        bail!("test binaries failed: {} (logs in {})", failed.join(", "), logs.display());
    }
    Ok(outcomes)
}

/// Runs one binary in its package's folder, as `cargo test` does, with `threads` test threads
/// (the harness's default when `None`).
fn one(b: &Binary, logs: &Path, envs: &[(String, String)], threads: Option<usize>) -> Outcome {
    let log = logs.join(format!("{}.log", b.name.replace([' ', '(', ')'], "")));
    let started = Instant::now();
    let ok = (|| -> Result<bool> {
        let file = std::fs::File::create(&log)?;
        let mut cmd = Command::new(&b.exe);
        if let Some(n) = threads {
            cmd.arg(format!("--test-threads={n}"));
        }
        let status = cmd
            .current_dir(&b.dir)
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .status()
            .with_context(|| format!("cannot start {}", b.exe.display()))?;
        Ok(status.success())
    })()
    .unwrap_or_else(|e| {
        let _ = std::fs::write(&log, format!("{e:#}"));
        false
    });
    Outcome { name: b.name.clone(), ok, seconds: started.elapsed().as_secs_f64(), log }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CARGO: &str = r#"{"reason":"compiler-artifact","manifest_path":"/w/cli/Cargo.toml","target":{"kind":["test"],"name":"morpho"},"profile":{"test":true},"executable":"/w/target/release/deps/morpho-1"}
{"reason":"compiler-artifact","manifest_path":"/w/cli/Cargo.toml","target":{"kind":["bin"],"name":"hotlab"},"profile":{"test":false},"executable":"/w/target/release/hotlab"}
{"reason":"compiler-artifact","manifest_path":"/w/cli/Cargo.toml","target":{"kind":["bin"],"name":"hotlab"},"profile":{"test":true},"executable":"/w/target/release/deps/hotlab-2"}
{"reason":"compiler-artifact","manifest_path":"/w/shared/Cargo.toml","target":{"kind":["lib"],"name":"hotlab_shared"},"profile":{"test":false},"executable":null}
{"reason":"compiler-artifact","manifest_path":"/w/xtask/Cargo.toml","target":{"kind":["test"],"name":"lessons"},"profile":{"test":true},"executable":"/w/target/release/deps/lessons-3"}
{"reason":"build-finished","success":true}"#;

    /// Only test executables are kept, named by target (a binary's unit tests marked), each
    /// to run in its package's folder; the longest known come first.
    #[test]
    fn cargos_artifacts_give_the_test_binaries_longest_first() {
        let bins = parse_artifacts(CARGO).unwrap();
        let names: Vec<&str> = bins.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["morpho", "hotlab (bin)", "lessons"]);
        assert_eq!(bins[0].dir, Path::new("/w/cli"));
        assert_eq!(bins[1].exe, Path::new("/w/target/release/deps/hotlab-2"));
        let mut shuffled = bins.clone();
        shuffled.reverse();
        let ordered: Vec<String> = order(shuffled).into_iter().map(|b| b.name).collect();
        assert_eq!(ordered, ["morpho", "lessons", "hotlab (bin)"]);
    }

    /// A line that is not JSON is an error naming it, not a silent skip.
    #[test]
    fn a_broken_line_is_refused() {
        let e = parse_artifacts("{not json").unwrap_err();
        assert!(format!("{e:#}").contains("cargo's JSON"), "{e:#}");
    }

    /// Every binary runs and is reported, a failing one too; the run fails naming it, and
    /// its log holds what it printed.
    #[test]
    fn every_binary_runs_and_a_failure_is_named_with_its_log() {
        let logs = std::env::temp_dir().join(format!("xtask-lanes-{}", std::process::id()));
        let sh = |name: &str, script: &str| {
            let exe = logs.join(format!("{name}.sh"));
            std::fs::create_dir_all(&logs).unwrap();
            std::fs::write(&exe, format!("#!/bin/sh\n{script}\n")).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
            Binary { name: name.into(), exe, dir: logs.clone() }
        };
        let bins = vec![
            sh("passes", "echo fine $1 $HOTLAB_X omp=$OMP_NUM_THREADS"),
            sh("fails", "echo broken; exit 1"),
            sh("verdicts", "echo alone $1 omp=$OMP_NUM_THREADS"),
        ];
        let e = run(bins, 2, &logs.join("logs"), &[("HOTLAB_X".into(), "y".into())]).unwrap_err();
        assert!(format!("{e:#}").contains("test binaries failed: fails"), "{e:#}");
        let read = |n: &str| std::fs::read_to_string(logs.join("logs").join(format!("{n}.log"))).unwrap();
        // A lane's share of the cores as libtorch threads; alone, the caller's environment
        // (this test may itself run in a lane).
        let share = (std::thread::available_parallelism().map_or(2, |n| n.get()) / 2).max(1);
        assert_eq!(read("passes").trim(), format!("fine --test-threads=1 y omp={share}"));
        assert_eq!(read("fails").trim(), "broken");
        let inherited = std::env::var("OMP_NUM_THREADS").unwrap_or_default();
        assert_eq!(read("verdicts").trim(), format!("alone omp={inherited}").trim(), "the harness's own threads");
        std::fs::remove_dir_all(&logs).unwrap();
    }
}

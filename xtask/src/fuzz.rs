//! `cargo xtask fuzz`: every fuzz target at a budget of cases, from a seed, timed.

use crate::{build, run, step, torch_env};
use anyhow::{bail, Context, Result};
use std::process::Command;
use std::time::Instant;

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
        args: &["-p", "hotlab-spec", "--test", "fuzz"],
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

/// What `cargo xtask fuzz` was asked for.
#[derive(Debug, PartialEq)]
struct Options {
    cases: u32,
    /// `None`: a fresh seed, drawn and printed.
    seed: Option<u64>,
    /// The targets by name; empty: all of them.
    targets: Vec<String>,
}

/// `--cases N`, `--seed S` and `--target NAME` (repeatable); a bad value is refused naming
/// its flag and what is allowed.
fn options(args: &[String]) -> Result<Options> {
    let mut o = Options { cases: 100_000, seed: None, targets: Vec::new() };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--cases" => {
                let v = value()?;
                o.cases = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .with_context(|| format!("--cases: a whole number of cases from 1 up, got '{v}'"))?;
            }
            "--seed" => {
                let v = value()?;
                o.seed = Some(v.parse::<u64>().with_context(|| format!("--seed: a whole number, got '{v}'"))?);
            }
            "--target" => {
                let v = value()?;
                if !FUZZ_TARGETS.iter().any(|t| t.name == v.as_str()) {
                    let all: Vec<&str> = FUZZ_TARGETS.iter().map(|t| t.name).collect();
                    bail!("--target: unknown target '{v}'; allowed: {}", all.join(", "));
                }
                o.targets.push(v.clone());
            }
            other => {
                bail!("unknown option '{other}' for `cargo xtask fuzz`; allowed: --cases N, --seed S, --target NAME")
            }
        }
    }
    Ok(o)
}

/// `cargo xtask fuzz`: every target (or those named) at `--cases`, each timed.
pub fn fuzz(args: &[String]) -> Result<()> {
    let Options { cases, seed, targets: names } = options(args)?;
    // A fresh seed per session unless one is given to replay.
    let seed = seed.unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        now.as_nanos() as u64 ^ u64::from(std::process::id())
    });
    let targets: Vec<&FuzzTarget> =
        FUZZ_TARGETS.iter().filter(|t| names.is_empty() || names.iter().any(|n| n == t.name)).collect();
    let python = build()?;
    step("building the fuzz targets");
    for package in ["hotlab-spec", "hotlab-workloads", "hotlab"] {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options> {
        options(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    /// The defaults, each flag, a repeated target; every refusal names its flag and what is
    /// allowed.
    #[test]
    fn options_are_read_and_bad_ones_refused_naming_the_flag() {
        assert_eq!(parse(&[]).unwrap(), Options { cases: 100_000, seed: None, targets: vec![] });
        let o = parse(&["--cases", "7", "--seed", "42", "--target", "spec", "--target", "websocket"]).unwrap();
        assert_eq!(o, Options { cases: 7, seed: Some(42), targets: vec!["spec".into(), "websocket".into()] });
        for (args, says) in [
            (&["--cases", "0"][..], "--cases: a whole number of cases from 1 up, got '0'"),
            (&["--cases", "many"], "--cases: a whole number of cases from 1 up, got 'many'"),
            (&["--cases"], "--cases needs a value"),
            (&["--seed", "-1"], "--seed: a whole number, got '-1'"),
            (&["--target", "gpu"], "--target: unknown target 'gpu'; allowed: spec, prolog, checkpoint, api-runs"),
            (&["--fast"], "unknown option '--fast' for `cargo xtask fuzz`; allowed: --cases N"),
        ] {
            let e = format!("{:#}", parse(args).unwrap_err());
            assert!(e.contains(says), "{args:?}: {e}");
        }
    }

    /// Each target's name is unique and runs one test binary of one package.
    #[test]
    fn each_target_names_one_package_and_one_test_binary() {
        let mut names: Vec<&str> = FUZZ_TARGETS.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FUZZ_TARGETS.len());
        for t in FUZZ_TARGETS {
            assert!(t.args.starts_with(&["-p"]) && t.args[2] == "--test", "{}: {:?}", t.name, t.args);
        }
    }
}

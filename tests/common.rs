//! Helpers shared by the worker's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `hotlab` binary cargo built for these tests.
pub fn hotlab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hotlab"))
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The Python with torch and gymnasium: `$HOTLAB_PYTHON` (set by `cargo xtask test`) or `.venv`.
pub fn python() -> PathBuf {
    std::env::var_os("HOTLAB_PYTHON").map(PathBuf::from).unwrap_or_else(|| repo().join(".venv/bin/python"))
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("the command starts")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The last line of stdout as JSON (`--json` contract).
pub fn last_json(out: &Output) -> serde_json::Value {
    let text = stdout(out);
    let line = text.lines().last().unwrap_or_else(|| panic!("no output; stderr: {}", stderr(out)));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {line}"))
}

/// Each change's verdict in an audit's report (its JSON) is the one its ratio's interval
/// and the noise's imply: what an audit that cannot know the outcome in advance checks of
/// its plumbing.
pub fn assert_verdicts_follow(report: &serde_json::Value) {
    let figure = |v: &serde_json::Value, key: &str| v[key].as_f64().unwrap_or_else(|| panic!("{key}: {v}"));
    let noise = &report["noise"];
    let (n_low, n_median, n_high) = (figure(noise, "low"), figure(noise, "median"), figure(noise, "high"));
    assert!(n_low <= n_median && n_median <= n_high, "{report}");
    for c in report["changes"].as_array().expect("changes") {
        let ratio = &c["ratio"];
        let (low, median, high) = (figure(ratio, "low"), figure(ratio, "median"), figure(ratio, "high"));
        assert!(low > 0.0 && low <= median && median <= high, "{c}");
        // The rule as the lab states it (docs/cli.md), written here apart from the lab's code:
        // beyond the noise only where the two intervals do not overlap, beyond the report's
        // bound only where the whole interval is.
        let implied = if low > n_high {
            if c["bound"].as_f64().is_some_and(|b| low > b) {
                "beyond_bound"
            } else {
                "confirmed"
            }
        } else if high < n_low {
            "regression"
        } else {
            "no_effect"
        };
        assert_eq!(c["verdict"], implied, "the verdict its interval and the noise imply: {c}");
    }
}

/// Two figures equal to rounding (a figure through JSON and back, computed twice).
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

/// The Python with envpool: the project's `.venv-envpool` (`cargo xtask test` makes it).
pub fn envpool_python() -> PathBuf {
    repo().join(".venv-envpool/bin/python")
}

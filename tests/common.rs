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
    use hotlab_shared::audit::{verdict, Interval};
    let noise: Interval = serde_json::from_value(report["noise"].clone()).expect("the noise's interval");
    assert!(noise.low <= noise.median && noise.median <= noise.high, "{report}");
    for c in report["changes"].as_array().expect("changes") {
        let ratio: Interval = serde_json::from_value(c["ratio"].clone()).expect("a ratio's interval");
        assert!(ratio.low > 0.0 && ratio.low <= ratio.median && ratio.median <= ratio.high, "{c}");
        let implied = serde_json::to_value(verdict(&ratio, &noise, c["bound"].as_f64())).unwrap();
        assert_eq!(c["verdict"], implied, "the verdict its interval and the noise imply: {c}");
    }
}

/// Two figures equal to rounding (a figure through JSON and back, computed twice).
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

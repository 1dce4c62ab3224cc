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

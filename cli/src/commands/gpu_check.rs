//! `hotlab gpu-check`: flags and the printout (the work is in `crate::bench::gpu_check`).

use crate::bench::gpu_check::{self, Options};
use crate::failure::{Outcome, UsageError};
use clap::Args;
use serde_json::Value;

#[derive(Args, Debug)]
pub struct GpuCheckArgs {
    /// Only compile every NVRTC kernel (needs no GPU: NVRTC comes with the torch wheel's
    /// CUDA libraries). This is what CI runs.
    #[arg(long)]
    pub compile_only: bool,
    /// Run the checks but not the benchmarks.
    #[arg(long)]
    pub no_bench: bool,
    /// Largest env count of the stepping benchmark, as a power of two (12 to 24).
    #[arg(long, default_value_t = 24)]
    pub max_log2_envs: u32,
    /// Print one JSON summary instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Exit 0 when everything that ran passed, 1 when a check failed.
pub fn gpu_check(a: GpuCheckArgs) -> Outcome<()> {
    if !(12..=24).contains(&a.max_log2_envs) {
        return Err(UsageError {
            flag: "--max-log2-envs",
            message: format!("must be 12 to 24 (got {})", a.max_log2_envs),
        }
        .into());
    }
    let opts = Options { compile_only: a.compile_only, no_bench: a.no_bench, max_log2_envs: a.max_log2_envs };
    let summary = gpu_check::run(&opts);
    if a.json {
        println!("{}", serde_json::to_string(&summary)?); // one line: the `--json` contract
    } else {
        print_table(&summary);
    }
    if summary["ok"] != Value::Bool(true) {
        return Err(anyhow::anyhow!("gpu-check failed (see the checks above)").into());
    }
    Ok(())
}

fn print_table(s: &Value) {
    println!("NVRTC {}", s["nvrtc"]["version"].as_str().unwrap_or("not found"));
    for c in s["nvrtc"]["compiled"].as_array().into_iter().flatten() {
        match c["ok"].as_bool() {
            Some(true) => println!(
                "  {:<12} ok   {:>8} bytes of PTX in {:.2} s",
                c["arch"].as_str().unwrap_or("?"),
                c["ptx_bytes"],
                c["seconds"].as_f64().unwrap_or(0.0)
            ),
            _ => println!("  {:<12} FAILED\n{}", c["arch"].as_str().unwrap_or("?"), c["error"].as_str().unwrap_or("")),
        }
    }
    match &s["gpu"] {
        Value::Null => println!("GPU: none checked ({})", s["support"].as_str().unwrap_or("?")),
        g => println!(
            "GPU: {} (compute capability {})",
            g["name"].as_str().unwrap_or("?"),
            g["capability"].as_str().unwrap_or("?")
        ),
    }
    for c in s["checks"].as_array().into_iter().flatten() {
        let mark = if c["ok"] == Value::Bool(true) { "ok  " } else { "FAIL" };
        println!(
            "  {mark} {:<44} {}  {}",
            c["name"].as_str().unwrap_or("?"),
            c["tolerance"].as_str().unwrap_or(""),
            c["detail"]
        );
    }
    for m in s["benchmarks"]["multistep"].as_array().into_iter().flatten() {
        println!("  stepping {:>9} envs: {:>10.3e} steps/s", m["envs"], m["steps_per_s"].as_f64().unwrap_or(0.0));
    }
    for r in s["benchmarks"]["ppo"].as_array().into_iter().flatten() {
        println!("  PPO {:<60} {:>10.0} steps/s", r["run"].as_str().unwrap_or("?"), r["sps"].as_f64().unwrap_or(0.0));
    }
    println!("{}", if s["ok"] == Value::Bool(true) { "gpu-check: ok" } else { "gpu-check: FAILED" });
}

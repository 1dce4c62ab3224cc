//! `hotlab lab-check`: flags and the printout (the work is in `hotlab_lab::bench::lab_check`).

use crate::failure::{Outcome, UsageError};
use clap::Args;
use hotlab_lab::bench::lab_check::{self, Options};

#[derive(Args, Debug)]
pub struct LabCheckArgs {
    /// Where the worker's runs train: `cuda` (a GPU box) or `cpu` (the same check, dry).
    #[arg(long, default_value = "cuda")]
    pub device: String,
    /// Print one JSON summary instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// Exit 0 when every part passed, 1 when one failed.
pub fn lab_check(a: LabCheckArgs) -> Outcome<()> {
    if !matches!(a.device.as_str(), "cuda" | "cpu") && !a.device.starts_with("cuda:") {
        return Err(UsageError {
            flag: "--device",
            message: format!("unknown device '{}'; allowed: cuda, cuda:N, cpu", a.device),
        }
        .into());
    }
    if a.device.starts_with("cuda") && !tch::Cuda::is_available() {
        return Err(UsageError {
            flag: "--device",
            message: format!(
                "'{}' was asked for but no CUDA device is available here; use --device cpu for the dry run",
                a.device
            ),
        }
        .into());
    }
    let summary = lab_check::run(&Options::for_device(std::env::current_exe()?, &a.device), &|what| {
        eprintln!("lab-check: {what}")
    })?;
    if a.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        for c in summary["checks"].as_array().into_iter().flatten() {
            let ok = if c["ok"] == true { "ok  " } else { "FAIL" };
            println!("{ok} {:<40} {}", c["name"].as_str().unwrap_or("?"), c["detail"]);
        }
        println!("figures: {}", summary["figures"]);
    }
    if summary["ok"] != true {
        return Err(anyhow::anyhow!("lab-check failed (see the checks above)").into());
    }
    Ok(())
}

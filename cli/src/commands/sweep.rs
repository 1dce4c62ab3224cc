//! `hotlab sweep`: a grid of settings, every combination trained once, and a table of
//! steps/s and return per cell with the best cell.

use crate::failure::{Outcome, UsageError};
use anyhow::{anyhow, Context};
use clap::Args;
use hotlab_lab::wire::http;
use hotlab_protocol::sweep::{Grid, SweepInfo};
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  hotlab sweep --grid \"envs=64,256,1024 backend=vectorized,threads\" --total-steps 200000\n  \
hotlab sweep --grid \"envs=256,1024\" --on ray --lab http://lab:8080 --token $HOTLAB_TOKEN --json"
)]
pub struct SweepArgs {
    /// The grid: KNOB=V1,V2 for each knob to vary (knobs by name, as `hotlab train`'s flags
    /// in snake_case), every combination a run (at most 64).
    #[arg(long)]
    pub grid: String,
    /// Where the runs go: `local` (here, one after another), or through a lab (`--lab`):
    /// `workers` (its workers in turn), `ray` (its Ray head), `any` (a free machine each).
    #[arg(long, default_value = "local", value_parser = ["local", "workers", "ray", "any"])]
    pub on: String,
    /// The lab to run the sweep on (with `--on workers|ray|any`), http://HOST:PORT.
    #[arg(long, value_name = "URL")]
    pub lab: Option<String>,
    /// The lab's operator token [$HOTLAB_TOKEN].
    #[arg(long, env = "HOTLAB_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The spec every cell starts from: the flags of `hotlab train`.
    #[command(flatten)]
    pub train: super::train::TrainArgs,
}

pub fn sweep(a: SweepArgs) -> Outcome<()> {
    let spec = a.train.spec()?;
    spec.validate()?;
    Grid::parse(&a.grid).and_then(|g| g.specs(&spec)).map_err(|e| UsageError { flag: "--grid", message: e.message })?;
    let bar = if a.train.json { ProgressBar::hidden() } else { ProgressBar::new(1) };
    bar.set_style(
        ProgressStyle::with_template("[{elapsed_precise}] {bar:30} cell {pos}/{len}: {msg}").expect("template"),
    );
    let info = match (a.on.as_str(), a.lab.as_deref()) {
        ("local", None) => crate::bench::sweep::sweep(&a.grid, &spec, &mut |label, i, n| {
            bar.set_length(n as u64);
            bar.set_position(i as u64);
            bar.set_message(label.to_string());
        })?,
        ("local", Some(_)) => {
            let message =
                "--on local trains here; to sweep on a lab's own machine, give --on any or name it with --on".into();
            return Err(UsageError { flag: "--lab", message }.into());
        }
        (on, Some(lab)) => on_lab(lab, a.token.as_deref(), on, &a.grid, &spec, &bar)?,
        (on, None) => {
            let message = format!("--on {on} runs the sweep on a lab: give its address (http://HOST:PORT)");
            return Err(UsageError { flag: "--lab", message }.into());
        }
    };
    bar.finish_and_clear();
    match a.train.json {
        true => println!("{}", serde_json::to_string(&info)?),
        false => print!("{}", table(&info)),
    }
    Ok(())
}

/// How often the lab is asked how the sweep goes.
const POLL: Duration = Duration::from_millis(500);

/// Starts the sweep on a lab and follows it to its end.
fn on_lab(
    lab: &str,
    token: Option<&str>,
    on: &str,
    grid: &str,
    spec: &hotlab_spec::RunSpec,
    bar: &ProgressBar,
) -> Outcome<SweepInfo> {
    let (host, port) = http::host_port(lab, 8080).map_err(|message| UsageError { flag: "--lab", message })?;
    let token = token
        .ok_or_else(|| UsageError { flag: "--token", message: "launching on a lab needs its operator token".into() })?;
    let auth = format!("Bearer {token}");
    let headers = [("Authorization", auth.as_str())];
    let body = serde_json::json!({"grid": grid, "spec": spec, "on": on});
    let (status, text) = http::request(&host, port, "POST", "/api/sweeps", &headers, Some(&body))
        .with_context(|| format!("the lab at {lab}"))?;
    if status != 201 {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let e = &v["error"];
        match (e["field"].as_str(), e["message"].as_str()) {
            (Some(field), Some(m)) => return Err(anyhow!("the lab refused the sweep ({status}): {field}: {m}").into()),
            _ => return Err(anyhow!("the lab refused the sweep ({status}): {text:.300}").into()),
        }
    }
    let mut info: SweepInfo = serde_json::from_str(&text).context("the lab's answer")?;
    bar.set_length(info.cells.len() as u64);
    while !info.status.is_final() {
        std::thread::sleep(POLL);
        let (status, text) = http::request(&host, port, "GET", &format!("/api/sweeps/{}", info.id), &[], None)?;
        if status != 200 {
            return Err(anyhow!("the lab lost sweep {} ({status}): {text:.300}", info.id).into());
        }
        info = serde_json::from_str(&text).context("the lab's answer")?;
        bar.set_position(info.cells.iter().filter(|c| c.status.is_some()).count() as u64);
        bar.set_message(format!("sweep {} on {lab}", info.id));
    }
    Ok(info)
}

/// The sweep as a table, the best cell marked.
pub fn table(s: &SweepInfo) -> String {
    let width = s.cells.iter().map(|c| c.label.len()).max().unwrap_or(4).max(4);
    let mut out = format!("{:<width$}  {:>12}  {:>10}  {:<10}  {}\n", "cell", "steps/s", "return", "status", "where");
    for (i, c) in s.cells.iter().enumerate() {
        let sps = c.sps.map_or("–".into(), |x| format!("{x:.0}"));
        let ret = c.mean_return.map_or("–".into(), |x| format!("{x:.1}"));
        let status = c.status.map_or("…", |s| s.as_str());
        let mark = match (s.best == Some(i), s.best_return == Some(i)) {
            (true, true) => "  ← fastest, best return",
            (true, false) => "  ← fastest",
            (false, true) => "  ← best return",
            _ => "",
        };
        let place = match (&c.machine, c.run) {
            (Some(m), Some(r)) => format!("{m} (run {r})"),
            (Some(m), None) => m.clone(),
            _ => String::new(),
        };
        out.push_str(&format!("{:<width$}  {sps:>12}  {ret:>10}  {status:<10}  {place}{mark}\n", c.label));
        if let Some(m) =
            c.message.as_deref().filter(|_| c.status.is_some_and(|s| s != hotlab_protocol::RunStatus::Finished))
        {
            out.push_str(&format!("{:<width$}  {m}\n", ""));
        }
    }
    match s.best {
        Some(b) => {
            out.push_str(&format!("best: {} ({:.0} steps/s)\n", s.cells[b].label, s.cells[b].sps.unwrap_or(0.0)))
        }
        None => out.push_str("no cell finished\n"),
    }
    out
}

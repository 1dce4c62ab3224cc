//! `hotlab train` and `hotlab profile`: the training flags (a preset, then every flag on
//! top of it), the progress bar, `--out` and the printed summary or report.

use super::knob_args::KnobArgs;
use crate::failure::{Outcome, UsageError};
use anyhow::Context;
use clap::Args;
use hotlab_spec::{knobs, presets, PresetSpec, RunSpec, SpecError};
use hotlab_specs::AnyPreset;
use hotlab_specs::EnvName;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Starting point: a whole spec, declared by the workload it runs; explicit flags
    /// override it.
    #[arg(long, default_value = "cleanrl", value_parser = preset_parser())]
    pub preset: &'static AnyPreset,
    /// Every setting of the run, one flag per knob of the spec.
    #[command(flatten)]
    pub knobs: KnobArgs,
    /// Write the checkpoint, metrics.jsonl and report.json here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print one JSON object (the run's summary) as the last line, no progress bar.
    #[arg(long)]
    pub json: bool,
    /// No evaluation at the run's end (morpho's yardstick and the proof env's held-out
    /// rate; at 12 host epochs morpho's takes about a minute); `hotlab eval` runs it later.
    #[arg(long)]
    pub no_eval: bool,
}

impl TrainArgs {
    /// The preset with every explicit flag applied on top; a workload's own flag on a run
    /// of another workload is refused.
    pub fn spec(&self) -> Result<RunSpec, SpecError> {
        self.knobs.apply(self.preset.spec())
    }
}

/// `--preset`: the presets' names, each with its line in `--help`.
pub(super) fn preset_parser() -> impl clap::builder::TypedValueParser<Value = &'static AnyPreset> {
    use clap::builder::TypedValueParser;
    let names = presets::all().map(|p| clap::builder::PossibleValue::new(p.name).help(p.about));
    clap::builder::PossibleValuesParser::new(names.collect::<Vec<_>>())
        .map(|name: String| AnyPreset::find(&name).expect("clap checked the name"))
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub train: TrainArgs,
    /// Report format: `md` (Markdown) or `json`.
    #[arg(long, default_value = "md", value_parser = ["md", "json"])]
    pub report: String,
    /// Also write Chrome trace-event JSON (opens in Perfetto and chrome://tracing) here.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Rollout steps to trace, `A..B` (a step = every env once).
    #[arg(long, default_value = "0..64")]
    pub trace_steps: hotlab_train::profiler::TraceWindow,
    /// Your own training script instead of one of hotlab's workloads: the command after
    /// `--`, run unmodified under hotlab's probe (`hotlab profile -- python ppo.py
    /// --num-envs 8`). Its output passes through on stderr. Placeholders make it a template
    /// that `--verify` can change: `{NAME=DEFAULT}` a value (`--num-envs {envs=8}`), `{NAME?TEXT}`
    /// TEXT when the switch NAME is on (`{async?--async}`); `--vars` sets them.
    #[arg(last = true, id = "script", value_name = "COMMAND")]
    pub script: Vec<String>,
    /// After the report, verify its advice by re-running the script: each change a
    /// placeholder of the command can make (`--vars async=on`) is audited, baseline and
    /// variant interleaved `--repeats` times with the baseline against itself for the noise
    /// (bound each run with `--seconds`).
    #[arg(long)]
    pub verify: bool,
    /// A variant of the command that makes the advice's code change (`python
    /// ppo_fixed.py …`), audited against the command as `--verify` audits a flag.
    #[arg(long, value_name = "COMMAND")]
    pub variant: Option<String>,
    /// Then run the script once more under a light probe (env steps and episodes only, no
    /// torch hook: its own speed within noise) and report both steps/s: what the full probe
    /// cost this script.
    #[arg(long)]
    pub probe_cost: bool,
    /// Pairs per audit of `--verify` and `--variant` (at least 2).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// A PyTorch Profiler trace you already have (`prof.export_chrome_trace(FILE)`): read
    /// into the same table, its ops, reads of tensor values, copies, backward and optimizer
    /// mapped to the catalogue, with the advice its counts argue for; nothing runs.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["script", "verify", "variant", "trace", "probe_cost"])]
    pub torch_trace: Option<PathBuf>,
}

impl ProfileArgs {
    /// Whether it profiles a user's own script (the command after `--`, or `--env` a
    /// workload that runs one).
    pub fn is_script(&self) -> bool {
        let runs_commands = |v: &serde_json::Value| {
            v.as_str().and_then(|e| e.parse::<EnvName>().ok()).is_some_and(|e| e.runs_commands())
        };
        !self.script.is_empty()
            || self.train.knobs.given.iter().any(|(k, v)| k.name == knobs::ENV.name && runs_commands(v))
    }
}

pub fn profile(a: ProfileArgs) -> Outcome<()> {
    if a.verify || a.variant.is_some() {
        let message =
            "verifies a script's advice: give the script after `--` (hotlab audit verifies a workload's)".into();
        return Err(UsageError { flag: if a.verify { "--verify" } else { "--variant" }, message }.into());
    }
    let trace = a.trace.as_ref().map(|_| a.trace_steps);
    let json = a.report == "json" || a.train.json;
    let trained = run_training(&a.train, trace, json)?;
    let report = hotlab_report::analyze(&trained.report.profile, &trained.report.config);
    if let (Some(path), Some(events)) = (&a.trace, &trained.trace) {
        std::fs::write(path, serde_json::to_string(events)?)
            .with_context(|| format!("--trace: cannot write {}", path.display()))?;
    }
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.markdown());
        if let Some(path) = &a.trace {
            println!(
                "
trace of steps {}..{} written to {}",
                a.trace_steps.first,
                a.trace_steps.end,
                path.display()
            );
        }
    }
    Ok(())
}

pub fn train(a: TrainArgs) -> Outcome<()> {
    let trained = run_training(&a, None, a.json)?;
    let report = &trained.report;
    if a.json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        let ret = report.mean_return_last_100.map_or("n/a".into(), |r| format!("{r:.1}"));
        println!(
            "{} on {} ({} backend): {} steps in {:.1} s = {:.0} steps/s (set-up {:.2} s before); {} episodes, mean return of the last 100: {ret}",
            report.env, report.device, report.backend, report.total_steps, report.wall_s, report.sps, report.setup_s, report.episodes
        );
        let k = &report.counters;
        println!(
            "counters: {} host syncs, {} h2d copies ({} B), {} d2h copies ({} B), {} IPC round-trips, {} spins, {:.2} s waiting on workers",
            k.host_syncs, k.h2d_copies, k.h2d_bytes, k.d2h_copies, k.d2h_bytes, k.ipc_round_trips, k.spin_iterations, k.worker_wait_s
        );
        if let Some(summary) = &report.evaluation_summary {
            println!("{summary}");
        }
        for note in &report.notes {
            println!("note: {note}");
        }
        if let Some(dir) = &a.out {
            println!("checkpoint and metrics written to {}", dir.display());
        }
    }
    Ok(())
}

/// Trains with a progress bar (unless `quiet`), writing `--out` if asked.
fn run_training(
    a: &TrainArgs,
    trace: Option<hotlab_train::profiler::TraceWindow>,
    quiet: bool,
) -> Outcome<hotlab_train::Trained> {
    run_spec(a, a.spec()?, trace, quiet)
}

/// [`run_training`] of `spec` (made from `a` and more).
pub(super) fn run_spec(
    a: &TrainArgs,
    spec: RunSpec,
    trace: Option<hotlab_train::profiler::TraceWindow>,
    quiet: bool,
) -> Outcome<hotlab_train::Trained> {
    spec.validate()?;
    let mut metrics = match &a.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("--out: cannot create {}", dir.display()))?;
            let path = dir.join("metrics.jsonl");
            let file =
                std::fs::File::create(&path).with_context(|| format!("--out: cannot write {}", path.display()))?;
            Some(std::io::BufWriter::new(file))
        }
        None => None,
    };
    let bar = match (quiet, spec.env().open_ended()) {
        (true, _) => ProgressBar::hidden(),
        // A script's length is its own: steps so far, no bar to fill.
        (false, true) => ProgressBar::new_spinner(),
        (false, false) => ProgressBar::new(spec.updates() * spec.batch_size() as u64),
    };
    let template = match spec.env().open_ended() {
        true => "{spinner} [{elapsed_precise}] {human_pos} steps  {msg}",
        false => "{spinner} [{elapsed_precise}] {bar:30} {human_pos}/{human_len} steps, {eta} left  {msg}",
    };
    bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
    if spec.env().open_ended() {
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
    }
    let sink: Option<hotlab_train::telemetry::Sink> = match (&a.out, spec.telemetry.every) {
        (Some(dir), k) if k > 0 => {
            let path = dir.join("telemetry.jsonl");
            let mut file = std::io::BufWriter::new(
                std::fs::File::create(&path).with_context(|| format!("--out: cannot create {}", path.display()))?,
            );
            Some(Box::new(move |e: &hotlab_train::telemetry::GradNorms| {
                if let Ok(line) = serde_json::to_string(e) {
                    let _ = writeln!(file, "{line}");
                    let _ = file.flush();
                }
            }))
        }
        _ => None,
    };
    let opts =
        hotlab_train::TrainOptions { trace, telemetry_sink: sink, skip_evaluation: a.no_eval, ..Default::default() };
    let trained = hotlab_workloads::train_with(&spec, opts, &mut |m| {
        bar.set_position(m.point.global_step);
        let ret = m.point.mean_return_last_100.map_or("-".into(), |r| format!("{r:.1}"));
        bar.set_message(format!("{:.0} SPS  return {ret}", m.point.sps));
        // On stderr, above the bar: `--json`'s last line on stdout stays the summary.
        for line in &m.lines {
            bar.suspend(|| eprintln!("{line}"));
        }
        if let Some(w) = metrics.as_mut() {
            let _ = writeln!(w, "{}", serde_json::to_string(m).unwrap_or_default());
        }
    })?;
    bar.finish_and_clear();
    if let Some(dir) = &a.out {
        if let Some(mut w) = metrics.take() {
            w.flush().context("writing metrics.jsonl")?;
        }
        trained.policy.save(dir, &spec)?;
        std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(&trained.report)?)?;
    }
    Ok(trained)
}

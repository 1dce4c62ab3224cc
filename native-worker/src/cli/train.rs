//! `hotlab train` and `hotlab profile`: the training flags (a preset, then every flag on
//! top of it), the progress bar, `--out` and the printed summary or report.

use anyhow::{Context, Result};
use clap::Args;
use hotlab::train;
use hotlab::workloads;
use hotlab_shared::spec::{
    ActionSync, Backend, EnvName, Inference, Precision, Preset, RolloutCopy, RunSpec, SpecError, Transfer, WaitMode,
    WorkloadSpec,
};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// Starting point: `cleanrl` (4 envs × 128 steps, 4 epochs, 4 minibatches, 500k steps),
    /// `wide` (1024 envs × 128 steps, 4 epochs, 32 minibatches, 5M steps) or `proof` (the
    /// proof env, 64 envs × 128 steps, lr 0.003, 1M steps); explicit flags override it.
    #[arg(long, default_value = "cleanrl")]
    pub preset: Preset,
    /// Workload [default: cartpole].
    #[arg(long)]
    pub env: Option<EnvName>,
    /// Parallel environments [cleanrl: 4].
    #[arg(long)]
    pub envs: Option<usize>,
    /// Steps per environment per rollout [cleanrl: 128].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Environment steps over the whole run [cleanrl: 500000].
    #[arg(long)]
    pub total_steps: Option<u64>,
    /// Most seconds of training (rollouts and updates): the run ends after the update in
    /// progress once they are spent; 0 = no limit [0].
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Passes over each rollout [4].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Minibatches per epoch; must divide envs × steps [cleanrl: 4].
    #[arg(long)]
    pub minibatches: Option<usize>,
    /// Adam learning rate [2.5e-4].
    #[arg(long)]
    pub lr: Option<f64>,
    /// Discount factor [0.99].
    #[arg(long)]
    pub gamma: Option<f64>,
    /// GAE lambda [0.95].
    #[arg(long)]
    pub gae_lambda: Option<f64>,
    /// PPO clip range [0.2].
    #[arg(long)]
    pub clip: Option<f64>,
    /// Entropy coefficient [0.01].
    #[arg(long)]
    pub ent_coef: Option<f64>,
    /// Value loss coefficient [0.5].
    #[arg(long)]
    pub vf_coef: Option<f64>,
    /// Gradient norm clip [0.5].
    #[arg(long)]
    pub max_grad_norm: Option<f64>,
    /// Anneal the learning rate linearly to 0 (the default).
    #[arg(long, overrides_with = "no_anneal_lr")]
    pub anneal_lr: bool,
    /// Keep the learning rate constant.
    #[arg(long)]
    pub no_anneal_lr: bool,
    /// Hidden layer widths of actor and critic, comma-separated [64,64].
    #[arg(long, value_delimiter = ',')]
    pub hidden: Option<Vec<usize>>,
    /// Seed of every random stream [1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// cpu, cuda, cuda:N or auto (a GPU if there is one) [auto].
    #[arg(long)]
    pub device: Option<String>,
    /// Rollout forward: `fused` (native, no per-op dispatch) or `eager` (libtorch ops) [fused].
    #[arg(long)]
    pub inference: Option<Inference>,
    /// Env backend: sequential, threads, subprocess, vectorized or device [vectorized].
    #[arg(long)]
    pub backend: Option<Backend>,
    /// Worker threads/processes for `threads` and `subprocess`; 0 = one per core [0].
    #[arg(long)]
    pub workers: Option<usize>,
    /// How to wait for `subprocess` workers: `spin` (busy-poll) or `block` (futex) [block].
    #[arg(long)]
    pub wait: Option<WaitMode>,
    /// Observations to the device for an eager forward: per_tensor, packed or pinned [packed].
    #[arg(long)]
    pub transfer: Option<Transfer>,
    /// Seconds a `subprocess` worker may stay silent in one step before the run fails
    /// naming it, its pid and how long it was silent [60].
    #[arg(long)]
    pub worker_timeout: Option<f64>,
    /// The rollout to the device for the update: whole (a copy per field) or per_step (a
    /// copy per step and field, concatenated there) [whole].
    #[arg(long)]
    pub rollout_copy: Option<RolloutCopy>,
    /// Actions back from an eager forward: per_item (a read per element) or stacked [stacked].
    #[arg(long)]
    pub action_sync: Option<ActionSync>,
    /// libtorch intra-op threads; 0 = automatic: 1 for minibatches under 1024 rows or beside env workers (threads, subprocess), else one per core [0].
    #[arg(long)]
    pub threads: Option<usize>,
    /// The update's matmul precision: fp32, fp16 (CUDA; dynamic loss scaling), bf16, or auto
    /// (bf16 where the device supports it, else fp32); master weights stay fp32 [fp32].
    #[arg(long)]
    pub precision: Option<Precision>,
    /// Global and per-layer gradient norms every K updates, published from a background
    /// thread (telemetry.jsonl with --out); with --env morpho also the seeds' gradient
    /// norms the agent observes, every K host epochs; 0 = off [0].
    #[arg(long)]
    pub telemetry_every: Option<u64>,
    #[command(flatten)]
    pub proof: super::ProofFlags,
    #[command(flatten)]
    pub morpho: super::MorphoFlags,
    #[command(flatten)]
    pub dreamer: super::DreamerFlags,
    /// Proof env: width of the policy's index embeddings [32].
    #[arg(long)]
    pub embed_dim: Option<usize>,
    /// Write the checkpoint, metrics.jsonl and report.json here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print one JSON object (the run's summary) as the last line, no progress bar.
    #[arg(long)]
    pub json: bool,
}

impl TrainArgs {
    /// The preset with every explicit flag applied on top; a workload's own flag on a run
    /// of another workload is refused.
    pub fn spec(&self) -> Result<RunSpec, SpecError> {
        let mut s = self.preset.spec();
        if let Some(env) = self.env.filter(|&e| e != s.env()) {
            s.workload = WorkloadSpec::default_for(env);
        }
        macro_rules! set {
            ($($($part:ident).+ = $flag:ident),* $(,)?) => { $( if let Some(v) = self.$flag.clone() { s.$($part).+ = v; } )* };
        }
        set!(envs = envs, steps = steps, total_steps = total_steps, seconds = seconds, seed = seed, device = device);
        set!(ppo.epochs = epochs, ppo.minibatches = minibatches, ppo.lr = lr, ppo.gamma = gamma);
        set!(ppo.gae_lambda = gae_lambda, ppo.clip = clip, ppo.ent_coef = ent_coef, ppo.vf_coef = vf_coef);
        set!(ppo.max_grad_norm = max_grad_norm, ppo.hidden = hidden);
        set!(exec.backend = backend, exec.workers = workers, exec.wait = wait, exec.transfer = transfer);
        set!(exec.action_sync = action_sync, exec.inference = inference, exec.threads = threads);
        set!(exec.rollout_copy = rollout_copy);
        set!(exec.precision = precision, exec.worker_timeout_s = worker_timeout, telemetry.every = telemetry_every);
        if self.no_anneal_lr {
            s.ppo.anneal_lr = false;
        } else if self.anneal_lr {
            s.ppo.anneal_lr = true;
        }
        super::with_own_settings(s, &self.own_settings())
    }

    /// The workloads' own flags, by knob.
    fn own_settings(&self) -> Vec<(&'static str, Option<Value>)> {
        let mut own = self.proof.given();
        own.push(("embed_dim", self.embed_dim.map(Value::from)));
        own.extend(self.morpho.given());
        own.extend(self.dreamer.given());
        own
    }
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
    pub trace_steps: hotlab::profiler::TraceWindow,
}

pub fn profile(a: ProfileArgs) -> Result<()> {
    let trace = a.trace.as_ref().map(|_| a.trace_steps);
    let json = a.report == "json" || a.train.json;
    let trained = run_training(&a.train, trace, json)?;
    let report = hotlab_shared::report::analyze(&trained.report.profile, &trained.report.config);
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

pub fn train(a: TrainArgs) -> Result<()> {
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
fn run_training(a: &TrainArgs, trace: Option<hotlab::profiler::TraceWindow>, quiet: bool) -> Result<train::Trained> {
    let spec = a.spec()?;
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
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(spec.updates() * spec.batch_size() as u64) };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {human_pos}/{human_len} steps  {msg}")
            .expect("valid template"),
    );
    let sink: Option<hotlab::train::telemetry::Sink> = match (&a.out, spec.telemetry.every) {
        (Some(dir), k) if k > 0 => {
            let path = dir.join("telemetry.jsonl");
            let mut file = std::io::BufWriter::new(
                std::fs::File::create(&path).with_context(|| format!("--out: cannot create {}", path.display()))?,
            );
            Some(Box::new(move |e: &hotlab::train::telemetry::GradNorms| {
                if let Ok(line) = serde_json::to_string(e) {
                    let _ = writeln!(file, "{line}");
                    let _ = file.flush();
                }
            }))
        }
        _ => None,
    };
    let opts = train::TrainOptions { trace, telemetry_sink: sink, ..Default::default() };
    let trained = workloads::train_with(&spec, opts, &mut |m| {
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

//! `hotlab bench`: its subcommands, `hotlab bench envs` (flags, the sweep, the peer
//! comparison and the printout) and `hotlab bench host`; the other benchmarks have files of
//! their own (`bench_batch.rs`, `bench_morpho.rs`, `bench_growth.rs`, `soak.rs`).

use crate::bench::envs::{self, EnvBench, EnvBenchSpec};
use crate::failure::{usage, Outcome};
use anyhow::Context;
use clap::{Args, Subcommand};
use hotlab_core::choices::{Backend, WaitMode};
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::{EnvName, WorkloadSpec};
use hotlab_workloads::gym::python::above_binary;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

/// `hotlab bench …`: one subcommand per benchmark.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Env stepping only, random actions: steps/s and counters per backend and env count.
    #[command(allow_negative_numbers = true)]
    Envs(BenchEnvsArgs),
    /// A lab under many viewers for minutes: the server's memory over time, steps/s and
    /// the trainer's publishing share with and without viewers, events stored and dropped.
    Soak(super::soak::BenchSoakArgs),
    /// The morpho env's host training alone, bare and with each blueprint grown in every
    /// slot: minibatches/s, samples/s and GFLOP/s against this machine's sgemm.
    Host(BenchHostArgs),
    /// The dreamer's train step at each batch size: samples/s, the data / forward /
    /// backward split, memory against the device's, GFLOP/s against sgemm, and where
    /// throughput stops growing.
    Batch(super::bench_batch::BenchBatchArgs),
    /// The morpho trainer at each env count: decisions/s, host samples/s and where the time
    /// went for its defaults, each knob flipped alone and every knob flipped, interleaved.
    Morpho(super::bench_morpho::BenchMorphoArgs),
    /// Does a morpho spec learn to grow? Trains it on each seed and plays every agent on
    /// held-out (or validation) tasks against waiting at the best tempo, random legal
    /// actions and a scripted grower, with paired 95 % intervals.
    Growth(super::bench_growth::BenchGrowthArgs),
}

/// Runs a benchmark.
pub fn bench(c: BenchCommand) -> Outcome<()> {
    match c {
        BenchCommand::Envs(a) => envs(a),
        BenchCommand::Soak(a) => super::soak::soak(a),
        BenchCommand::Host(a) => host(a),
        BenchCommand::Batch(a) => super::bench_batch::batch(a),
        BenchCommand::Morpho(a) => super::bench_morpho::morpho(a),
        BenchCommand::Growth(a) => super::bench_growth::growth(a),
    }
}

#[derive(Args, Debug)]
pub struct BenchEnvsArgs {
    /// Workload.
    #[arg(long, default_value = "cartpole")]
    pub env: EnvName,
    /// The workload's own settings.
    #[command(flatten)]
    pub settings: super::knob_args::KnobArgs<super::knob_args::WorkloadOnly>,
    /// Backends to measure, comma-separated [every one the workload runs on: all five for
    /// cartpole, the four host ones for the proof env].
    #[arg(long, value_delimiter = ',')]
    pub backends: Option<Vec<Backend>>,
    /// Env counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8,64,4096")]
    pub envs: Vec<usize>,
    /// Threads or processes for `threads` and `subprocess`; 0 = one per core.
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    /// How `subprocess` waits: spin or block.
    #[arg(long, default_value = "block")]
    pub wait: WaitMode,
    /// Seconds per measurement (0.05 to 600).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Device of the `device` backend: cpu, cuda, cuda:N or auto.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Also measure peers with the same env counts and seconds, comma-separated:
    /// `gymnasium` (from the project's .venv; with `--env gym`, its sync and async vector
    /// envs of the same id), `envpool` (EnvPool's own C++ env of the same id, where it has
    /// one; from .venv-envpool, which `cargo xtask peers` makes, or $HOTLAB_ENVPOOL_PYTHON).
    #[arg(long, value_delimiter = ',')]
    pub peer: Vec<String>,
    /// One JSON object per line, no progress bar.
    #[arg(long)]
    pub json: bool,
}

impl BenchEnvsArgs {
    /// The workload's part of a spec, from the flags.
    fn workload_spec(&self) -> Result<RunSpec, SpecError> {
        let spec = RunSpec { workload: WorkloadSpec::default_for(self.env), ..RunSpec::default() };
        self.settings.apply(spec)
    }
}

/// The peers `--peer` names.
const PEERS: [&str; 2] = ["gymnasium", "envpool"];

/// `scripts/NAME`, from here or from the project around the binary.
fn peer_script(name: &str) -> Outcome<PathBuf> {
    let rel = format!("scripts/{name}");
    here_or_above(&rel).ok_or_else(|| usage("--peer", format!("{rel} not found: run from the project's folder")))
}

/// `rel` from the working folder, else from the nearest folder above the binary that has it.
fn here_or_above(rel: &str) -> Option<PathBuf> {
    Some(PathBuf::from(rel)).filter(|p| p.exists()).or_else(|| above_binary(rel))
}

/// EnvPool's interpreter: `$HOTLAB_ENVPOOL_PYTHON`, or the project's `.venv-envpool` (its
/// dependencies, a few hundred MB, stay out of the project's .venv).
fn envpool_python() -> Outcome<PathBuf> {
    if let Some(p) = std::env::var_os("HOTLAB_ENVPOOL_PYTHON").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return p.exists().then_some(p.clone()).ok_or_else(|| {
            usage("--peer", format!("envpool: HOTLAB_ENVPOOL_PYTHON is {}, which does not exist", p.display()))
        });
    }
    here_or_above(".venv-envpool/bin/python").ok_or_else(|| {
        usage(
            "--peer",
            "envpool: no .venv-envpool here or above the binary: `cargo xtask peers` makes it (EnvPool 1.2.5), \
             or set HOTLAB_ENVPOOL_PYTHON to an interpreter that has envpool"
                .into(),
        )
    })
}

pub fn envs(a: BenchEnvsArgs) -> Outcome<()> {
    if !(0.05..=600.0).contains(&a.seconds) {
        return Err(usage("--seconds", format!("must be between 0.05 and 600 (got {})", a.seconds)));
    }
    if let Some(&bad) = a.envs.iter().find(|&&n| n == 0 || n > hotlab_core::run::MAX_ENVS) {
        return Err(usage(
            "--envs",
            format!("each count must be between 1 and {} (got {bad})", hotlab_core::run::MAX_ENVS),
        ));
    }
    if a.workers > 256 {
        return Err(usage("--workers", format!("must be between 0 and 256 (got {})", a.workers)));
    }
    if let Some(p) = a.peer.iter().find(|p| !PEERS.contains(&p.as_str())) {
        return Err(usage("--peer", format!("unknown peer '{p}'; allowed: {}", PEERS.join(", "))));
    }
    let peers = a.peer.iter().map(|p| peer(p, &a)).collect::<Outcome<Vec<_>>>()?;
    let device = hotlab_train::exec::device::resolve(&a.device).map_err(|e| usage("--device", e.message))?;
    let workload = hotlab_workloads::load(&a.workload_spec()?)?;
    let supported = a.env.backends();
    let backends = a.backends.clone().unwrap_or_else(|| supported.to_vec());
    if let Some(bad) = backends.iter().find(|b| !supported.contains(b)) {
        let allowed: Vec<&str> = supported.iter().map(|b| b.as_str()).collect();
        return Err(usage(
            "--backends",
            format!("the {} env cannot run on '{bad}'; allowed: {}", workload.name(), allowed.join(", ")),
        ));
    }

    let runs: Vec<(Backend, usize)> = backends.iter().flat_map(|&b| a.envs.iter().map(move |&n| (b, n))).collect();
    let bar = if a.json { ProgressBar::hidden() } else { ProgressBar::new(runs.len() as u64) };
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("valid template"));
    let mut results: Vec<EnvBench> = Vec::new();
    for (backend, n) in runs {
        bar.set_message(format!("{backend} × {n} envs"));
        let workers = if a.workers == 0 { 0 } else { a.workers.min(n) };
        let r = envs::run(&EnvBenchSpec {
            env: Arc::clone(&workload),
            backend,
            envs: n,
            workers,
            wait: a.wait,
            seconds: a.seconds,
            device,
            seed: 1,
        })
        .with_context(|| format!("{backend} with {n} envs"))?;
        if a.json {
            println!("{}", serde_json::to_string(&r)?);
        }
        results.push(r);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if !a.json {
        println!(
            "{:<12} {:>8} {:>8} {:>16} {:>12} {:>14}",
            "backend", "envs", "workers", "steps/s", "IPC/step", "wait s/step"
        );
        for r in &results {
            let batch_steps = (r.counters.env_steps / r.envs as u64).max(1) as f64;
            println!(
                "{:<12} {:>8} {:>8} {:>16.0} {:>12.2} {:>14.2e}",
                r.backend,
                r.envs,
                r.workers.map_or("-".into(), |w| w.to_string()),
                r.steps_per_s,
                r.counters.ipc_round_trips as f64 / batch_steps,
                r.counters.worker_wait_s / batch_steps
            );
        }
    }
    for peer in &peers {
        run_peer(peer, &a, &results)?;
    }
    Ok(())
}

/// A peer's command: its name, interpreter, script, the script's id arguments, and what
/// to do when the interpreter does not start.
struct Peer {
    name: String,
    python: PathBuf,
    script: PathBuf,
    id: Vec<String>,
    hint: &'static str,
}

/// The peer `name`'s command for this bench, or why it cannot run (before any measuring).
fn peer(name: &str, a: &BenchEnvsArgs) -> Outcome<Peer> {
    // A peer steps the same env: the workload's Gymnasium id.
    let workload = a.workload_spec()?.workload;
    let Some(id) = workload.gymnasium_id() else {
        let other = workload.name();
        return Err(usage("--peer", format!("{name} has no {other} env: {other} steps no Gymnasium env")));
    };
    let (python, script, id, hint) = if name == "envpool" {
        (envpool_python()?, peer_script("peer_envpool.py")?, vec![id], "`cargo xtask peers` makes .venv-envpool")
    } else {
        // The interpreter a gym workload's workers use: the peer runs beside them.
        let id = vec!["--id".to_string(), id];
        let python = hotlab_workloads::gym::python::default_python();
        (python, peer_script("peer_gymnasium.py")?, id, "`cargo xtask build` makes .venv, or set HOTLAB_PYTHON")
    };
    Ok(Peer { name: name.to_string(), python, script, id, hint })
}

/// Runs `peer` with the same env counts and seconds, and prints hotlab/peer ratios.
fn run_peer(peer: &Peer, a: &BenchEnvsArgs, ours: &[EnvBench]) -> Outcome<()> {
    let Peer { name, python, script, id, hint } = peer;
    let out = Command::new(python)
        .arg(script)
        .arg(a.seconds.to_string())
        .args(id)
        .args(a.envs.iter().map(|n| n.to_string()))
        .output()
        .with_context(|| format!("running {}: {hint}", python.display()))?;
    if !out.status.success() {
        return Err(anyhow::anyhow!(
            "{name} peer ({}) failed: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut peer: serde_json::Value = serde_json::from_str(line).context("peer output")?;
        if let Some(why) = peer["skipped"].as_str() {
            if a.json {
                println!("{peer}");
            } else {
                println!("{name}: skipped: {why}");
            }
            continue;
        }
        let (n, sps) = (peer["envs"].as_u64().unwrap_or(0) as usize, peer["steps_per_s"].as_f64().unwrap_or(0.0));
        let ratios: serde_json::Map<String, serde_json::Value> = ours
            .iter()
            .filter(|r| r.envs == n && sps > 0.0)
            .map(|r| (r.backend.clone(), serde_json::json!(r.steps_per_s / sps)))
            .collect();
        peer["hotlab_over_peer"] = serde_json::Value::Object(ratios.clone());
        if a.json {
            println!("{peer}");
        } else {
            let shown: Vec<String> =
                ratios.iter().map(|(b, x)| format!("{b} {:.2}×", x.as_f64().unwrap_or(0.0))).collect();
            println!(
                "{name} {:<18} {:>6} envs {:>14.0} steps/s   hotlab/peer: {}",
                peer["impl"].as_str().unwrap_or("?"),
                n,
                sps,
                shown.join(", ")
            );
        }
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct BenchHostArgs {
    /// The host's first-stage channels (2× and 4× in the next stages), 1 to 256.
    #[arg(long, default_value_t = 16)]
    pub width: i64,
    /// Images per host minibatch, 1 to 4096.
    #[arg(long, default_value_t = 64)]
    pub batch: i64,
    /// Seconds of training per host setup (0.05 to 600).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Hosts in the batch of the `--host-exec` comparison (one after another, then as one model), 1 to 256.
    #[arg(long, default_value_t = 16)]
    pub envs: usize,
    /// Where the `--host-exec` comparison's hosts train: cpu, cuda, cuda:N or auto (the other figures are the CPU's).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// One JSON object, no progress.
    #[arg(long)]
    pub json: bool,
}

pub fn host(a: BenchHostArgs) -> Outcome<()> {
    use hotlab_workloads::morpho::bench::{run, HostBench};
    if !(1..=256).contains(&a.width) {
        return Err(usage("--width", format!("must be 1 to 256 (got {})", a.width)));
    }
    if !(1..=4096).contains(&a.batch) {
        return Err(usage("--batch", format!("must be 1 to 4096 (got {})", a.batch)));
    }
    if !(0.05..=600.0).contains(&a.seconds) {
        return Err(usage("--seconds", format!("must be 0.05 to 600 (got {})", a.seconds)));
    }
    if !(1..=256).contains(&a.envs) {
        return Err(usage("--envs", format!("must be 1 to 256 (got {})", a.envs)));
    }
    let device = hotlab_train::exec::device::resolve(&a.device).map_err(|e| usage("--device", e.message))?;
    let spec = HostBench { width: a.width, batch: a.batch, seconds: a.seconds, envs: a.envs, device };
    let json = a.json;
    let r = run(&spec, |name| {
        if !json {
            eprintln!("measuring host: {name}");
        }
    })?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    println!(
        "sgemm 1024²: {:.1} GFLOP/s on 1 thread, {:.1} on {} threads; hosts train on 1 thread (width {}, batch {})",
        r.sgemm_gflops_1_thread, r.sgemm_gflops_all_threads, r.threads, r.width, r.batch
    );
    println!(
        "{:<10} {:>8} {:>14} {:>12} {:>10} {:>9}",
        "host", "params", "minibatches/s", "samples/s", "GFLOP/s", "of sgemm"
    );
    for h in &r.hosts {
        let g = h.gflops.map_or("–".into(), |g| format!("{g:.2}"));
        let share = h.share_of_sgemm.map_or("–".into(), |s| format!("{:.0} %", 100.0 * s));
        println!(
            "{:<10} {:>8} {:>14.1} {:>12.0} {:>10} {:>9}",
            h.host, h.params, h.minibatches_per_s, h.samples_per_s, g, share
        );
    }
    println!(
        "\n--host-exec: {} hosts, one minibatch each per step, one after another or as one model, on {}",
        a.envs, a.device
    );
    println!("{:<10} {:>9} {:>14} {:>10} {:>9}", "host", "exec", "minibatches/s", "GFLOP/s", "of sgemm");
    for e in &r.exec {
        println!(
            "{:<10} {:>9} {:>14.1} {:>10.2} {:>8.0} %",
            e.host,
            e.exec,
            e.minibatches_per_s,
            e.gflops,
            100.0 * e.share_of_sgemm
        );
    }
    println!("\nShapley credit of 3 live seeds (conv3x3, mlp, attention): --shapley-perms against exact");
    println!("{:<10} {:>12} {:>10} {:>18}", "orderings", "validations", "ms", "mean |error|");
    for s in &r.shapley {
        let perms = s.perms.map_or("exact".into(), |n| n.to_string());
        println!("{:<10} {:>12.1} {:>10.1} {:>18.4}", perms, s.validations, s.ms_per_credit, s.mean_abs_error);
    }
    Ok(())
}

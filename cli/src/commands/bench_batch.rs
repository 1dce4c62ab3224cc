//! `hotlab bench batch`: the dreamer's train step at each batch size, with its split, its
//! memory against the device's and where throughput stops growing.

use crate::failure::{usage, Failure, Outcome};
use clap::Args;
use hotlab_core::choices::{Precision, UpdateMode};
use hotlab_spec::SpecError;
use hotlab_specs::dreamer::{EncoderMode, LossRead, ReplayAt};
use hotlab_specs::DreamerSpec;
use hotlab_specs::WorkloadSpec;
use hotlab_workloads::dreamer::bench::{run, BatchBench, BatchReport};

#[derive(Args, Debug)]
pub struct BenchBatchArgs {
    /// Batch sizes (replayed sequences per train step) to measure, comma-separated, ascending.
    #[arg(long, value_delimiter = ',', default_value = "4,8,16,32,64")]
    pub sizes: Vec<usize>,
    /// Steps per replayed sequence.
    #[arg(long, default_value_t = 16)]
    pub seq_len: usize,
    /// Width multiplier of every network (1: a CPU's; 4–8 for a GPU).
    #[arg(long, default_value_t = 1)]
    pub size: usize,
    /// Steps of each imagined trajectory.
    #[arg(long, default_value_t = 15)]
    pub horizon: usize,
    /// The encoder once per timestep (`per_step`) or once on the batch (`batched`).
    #[arg(long, default_value = "batched")]
    pub encoder: EncoderMode,
    /// Loss terms read every train step (`per_item`) or once at the end (`deferred`).
    #[arg(long, default_value = "deferred")]
    pub loss_read: LossRead,
    /// Where the replay buffer lives: host, pinned (CUDA) or device.
    #[arg(long, default_value = "device")]
    pub replay: ReplayAt,
    /// Seconds of train steps per batch size (0.05 to 600; at least 3 steps each).
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// cpu, cuda, cuda:N or auto.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// What the products compute in: fp32, bf16 (fp32 master weights), fp16 (CUDA only,
    /// with dynamic loss scaling) or auto (bf16 where the device has it natively).
    #[arg(long, default_value = "fp32")]
    pub precision: Precision,
    /// Leave cuDNN's convolution algorithms to its heuristics (libtorch's default) instead
    /// of timing them on each new shape and keeping the fastest, as a dreamer run on CUDA
    /// does (PyTorch's `cudnn.benchmark`); CUDA only.
    #[arg(long)]
    pub cudnn_heuristics: bool,
    /// How each train step runs: op by op from the host (`eager`), or recorded once as a CUDA
    /// graph and replayed (`graph`, CUDA with `--replay device`; its launches per update
    /// are counted from the graph). Under graph the data / forward / backward split is not
    /// timed: one replay is one launch.
    #[arg(long, default_value = "eager")]
    pub update: UpdateMode,
    /// libtorch intra-op threads; 0 = one per core.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// One JSON object, no progress.
    #[arg(long)]
    pub json: bool,
}

pub fn batch(a: BenchBatchArgs) -> Outcome<()> {
    let json = a.json;
    let bench = checked(a)?;
    let r = run(&bench, |batch| {
        if !json {
            eprintln!("measuring batch {batch}");
        }
    })?;
    match json {
        true => println!("{}", serde_json::to_string(&r)?),
        false => print_table(&r),
    }
    Ok(())
}

/// The benchmark the flags ask for, each flag checked alone and against the others (a
/// refusal names the flag and what is allowed); sets libtorch's threads.
fn checked(a: BenchBatchArgs) -> Outcome<BatchBench> {
    if a.sizes.is_empty() || !a.sizes.windows(2).all(|w| w[0] < w[1]) {
        return Err(usage("--sizes", format!("must be ascending batch sizes (got {:?})", a.sizes)));
    }
    if !(0.05..=600.0).contains(&a.seconds) {
        return Err(usage("--seconds", format!("must be 0.05 to 600 (got {})", a.seconds)));
    }
    let settings = DreamerSpec {
        size: a.size,
        seq_len: a.seq_len,
        horizon: a.horizon,
        encoder: a.encoder,
        loss_read: a.loss_read,
        replay: a.replay,
        ..DreamerSpec::default()
    };
    for &batch in &a.sizes {
        WorkloadSpec::Dreamer(DreamerSpec { batch, ..settings.clone() }).validate().map_err(|e| match e.knob {
            "batch_size" => usage("--sizes", e.message),
            _ => Failure::from(SpecError::from(e)),
        })?;
    }
    let device = hotlab_train::exec::device::resolve(&a.device).map_err(|e| usage("--device", e.message))?;
    if a.replay == ReplayAt::Pinned && device == tch::Device::Cpu {
        return Err(usage("--replay", "pinned needs a CUDA device; allowed on the CPU: host, device".into()));
    }
    let kind = hotlab_train::precision::resolve(a.precision, device).map_err(|e| usage("--precision", e.message))?.kind;
    let threads = match a.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    tch::set_num_threads(threads as i32);
    if a.cudnn_heuristics && !device.is_cuda() {
        return Err(usage(
            "--cudnn-heuristics",
            "cuDNN runs on CUDA devices only; this run's device is the CPU".into(),
        ));
    }
    let cudnn_benchmark = !a.cudnn_heuristics;
    if a.update == UpdateMode::GraphFused {
        return Err(usage("--update", "graph_fused is PPO's update; the dreamer's allowed: eager, graph".into()));
    }
    let graph = a.update == UpdateMode::Graph;
    if graph && !device.is_cuda() {
        return Err(usage(
            "--update",
            "graph replays a captured CUDA graph, so it needs a CUDA device; allowed on the CPU: eager".into(),
        ));
    }
    if graph && a.replay != ReplayAt::Device {
        return Err(usage(
            "--update",
            format!(
                "graph gathers each batch from the replay on the device; allowed with --replay {}: eager",
                a.replay
            ),
        ));
    }
    if graph && kind == tch::Kind::Half {
        return Err(usage(
            "--update",
            "graph does not hold fp16's loss scalers; allowed with fp16: eager (or --precision bf16 with graph)".into(),
        ));
    }
    Ok(BatchBench { sizes: a.sizes, settings, seconds: a.seconds, device, kind, cudnn_benchmark, graph })
}

/// The figures per batch size as a table, under the run's set-up and over its verdict.
fn print_table(r: &BatchReport) {
    println!(
        "dreamer train step on {} ({} threads, {}), size {} ({} parameters), seq_len {}: {:.1} MFLOP per replayed step; sgemm {:.1} GFLOP/s",
        r.device,
        r.threads,
        r.precision,
        r.size,
        r.params,
        r.seq_len,
        r.flops_per_sample / 1e6,
        r.sgemm_gflops
    );
    println!(
        "{:>6} {:>10} {:>10} {:>11} {:>7} {:>7} {:>7} {:>9} {:>9} {:>18}",
        "batch", "steps/s", "ms/update", "samples/s", "data", "fwd", "bwd", "GFLOP/s", "of sgemm", "memory"
    );
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    for f in &r.figures {
        let memory = match (f.memory_bytes, f.memory_total_bytes) {
            (Some(u), Some(t)) => format!("{:.2}/{:.1} GiB", gib(u), gib(t)),
            _ => "–".into(),
        };
        println!(
            "{:>6} {:>10.2} {:>10.1} {:>11.0} {:>6.1}% {:>6.1}% {:>6.1}% {:>9.2} {:>8.0}% {:>18}",
            f.batch,
            f.train_steps_per_s,
            f.ms_per_update,
            f.samples_per_s,
            f.data_pct,
            f.fwd_pct,
            f.bwd_pct,
            f.gflops,
            100.0 * f.share_of_sgemm,
            memory
        );
    }
    println!("\n{}", r.verdict);
}

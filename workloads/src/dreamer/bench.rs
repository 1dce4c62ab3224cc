//! `hotlab bench batch`: the dreamer's train step at each batch size (catalogue row 10,
//! seed 004's "aim for 60–80 % of VRAM"): samples/s, the data / forward / backward split,
//! memory in use against the device's total, achieved GFLOP/s against this machine's
//! sgemm, and the batch where throughput stops growing.

use super::behavior::Behavior;
use super::captured::{self, CapturedStep};
use super::step::{Tally, Trainer};
use super::world::{Dims, WorldModel, ACTIONS};
use hotlab_core::counters::Counters;
use hotlab_env::rng::HostRng;
use hotlab_specs::DreamerSpec;
use hotlab_train::cuda::shim::Launches;
use hotlab_train::profiler::Profiler;
use serde::Serialize;
use std::time::Instant;
use tch::Device;

/// Throughput that grows less than this when the batch doubles has stopped growing.
const GROWTH: f64 = 1.10;

/// What to measure.
pub struct BatchBench {
    pub sizes: Vec<usize>,
    /// The rest of a train step's settings (`batch` is each size in turn).
    pub settings: DreamerSpec,
    pub seconds: f64,
    pub device: Device,
    /// What the products compute in (fp32, bf16, or fp16 with its loss scalers).
    pub kind: tch::Kind,
    /// Let cuDNN time its algorithms for each new shape and keep the fastest (CUDA).
    pub cudnn_benchmark: bool,
    /// Each train step replayed as one captured CUDA graph ([`CapturedStep`]; CUDA, with
    /// the replay on the device).
    pub graph: bool,
}

/// One batch size's figures.
#[derive(Clone, Debug, Serialize)]
pub struct BatchFigure {
    pub batch: usize,
    pub train_steps: u64,
    pub train_steps_per_s: f64,
    /// Wall milliseconds per train step (one update of the world model, the actor and the
    /// critic, imagination included): the figure DreamerV3's and TorchRL's learners report.
    pub ms_per_update: f64,
    /// Under a graph: what one update launches (the captured graph's nodes), and replays.
    pub launches_per_update: Option<Launches>,
    pub replays: u64,
    /// Replayed steps (batch × seq_len) per second.
    pub samples_per_s: f64,
    pub data_pct: f64,
    pub fwd_pct: f64,
    pub bwd_pct: f64,
    pub gflops: f64,
    pub share_of_sgemm: f64,
    /// Memory in use after the steps: the process's resident memory on the CPU, the
    /// driver's figure for the whole GPU on CUDA; and the device's total.
    pub memory_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct BatchReport {
    pub device: String,
    pub seq_len: usize,
    pub size: usize,
    /// Parameters of the world model, the actor and the critic together (`--size 1`:
    /// 704,822, within 10 % of DreamerV3's smallest preset, size1m, 640,867).
    pub params: i64,
    pub threads: usize,
    /// What the products computed in.
    pub precision: String,
    /// Whether cuDNN chose its algorithms by timing them.
    pub cudnn_benchmark: bool,
    /// Whether each train step was a captured graph's replay.
    pub graph: bool,
    /// Model FLOPs of one replayed step (forward and backward, imagination included).
    pub flops_per_sample: f64,
    pub sgemm_gflops: f64,
    pub figures: Vec<BatchFigure>,
    /// The first batch whose double did not raise samples/s by 10 % (None: still growing).
    pub plateau: Option<usize>,
    pub verdict: String,
}

/// Forward multiply-adds of a 4×4 stride-2 convolution producing `side`² × `cout` from `cin`.
fn conv(cin: i64, cout: i64, side: i64) -> f64 {
    (side * side * cin * cout * 16) as f64
}

/// Model FLOPs per replayed step: the world model's forward and backward (3× its forward's
/// multiply-adds, 2 FLOPs each), the imagination's forward from that step, and the actor's
/// and critic's forward and backward on the imagined states.
pub fn flops_per_sample(d: &Dims, horizon: usize) -> f64 {
    let (dd, h, s, f, e, a) = (d.depth, d.hidden, d.stoch(), d.feat(), d.embed(), ACTIONS);
    let lin = |i: i64, o: i64| (i * o) as f64;
    let encoder = conv(1, dd, 32) + conv(dd, 2 * dd, 16) + conv(2 * dd, 4 * dd, 8) + conv(4 * dd, 8 * dd, 4);
    // A transposed convolution scatters each input pixel through the kernel: its input side.
    let decoder =
        lin(f, e) + conv(8 * dd, 4 * dd, 4) + conv(4 * dd, 2 * dd, 8) + conv(2 * dd, dd, 16) + conv(dd, 1, 32);
    let advance = lin(s + a, h) + 3.0 * lin(h + d.deter, d.deter) + lin(d.deter, h) + lin(h, s);
    let rssm = advance + lin(d.deter + e, h) + lin(h, s);
    let heads = 2.0 * (lin(f, h) + lin(h, 1));
    let mlp = |o: i64| lin(f, h) + lin(h, h) + lin(h, o);
    let world = 3.0 * (encoder + decoder + rssm + heads);
    let dream = horizon as f64 * (mlp(a) + advance) + (horizon + 1) as f64 * (heads + mlp(1));
    let behavior = 3.0 * horizon as f64 * (mlp(a) + mlp(1));
    2.0 * (world + dream + behavior)
}

/// Parameters of the world model, the actor and the critic at `dims`.
pub fn parameters(dims: &Dims) -> i64 {
    let world = WorldModel::new(*dims, Device::Cpu, tch::Kind::Float);
    let behavior = Behavior::new(dims, Device::Cpu, tch::Kind::Float);
    super::joint_numel(&world, &behavior)
}

fn memory(device: Device) -> (Option<u64>, Option<u64>) {
    match device {
        Device::Cuda(i) => {
            hotlab_train::cuda::gpu::memory(i).map_or((None, None), |(used, total)| (Some(used), Some(total)))
        }
        _ => (hotlab_train::system::resident_bytes(), hotlab_train::system::total_memory()),
    }
}

/// Runs the sweep; `progress` is told each batch size as it starts.
pub fn run(b: &BatchBench, mut progress: impl FnMut(usize)) -> anyhow::Result<BatchReport> {
    if b.device.is_cuda() {
        tch::Cuda::cudnn_set_benchmark(b.cudnn_benchmark);
    }
    let sgemm = hotlab_train::system::sgemm_gflops(b.device);
    let dims = Dims::new(b.settings.size);
    let flops = flops_per_sample(&dims, b.settings.horizon);
    let replay = super::fill::filled(&b.settings, b.device);
    let params = parameters(&dims);
    let mut figures = Vec::new();
    for &batch in &b.sizes {
        progress(batch);
        tch::manual_seed(1);
        let settings = DreamerSpec { batch, ..b.settings.clone() };
        let world = WorldModel::new(dims, b.device, b.kind);
        let behavior = Behavior::new(&dims, b.device, b.kind);
        let scaler = (b.kind == tch::Kind::Half).then_some(hotlab_train::precision::INIT_SCALE);
        let mut trainer = Trainer::new(settings.clone(), world, behavior, scaler);
        let (mut rng, mut c, mut prof) = (HostRng::new(3), Counters::default(), Profiler::new(None));
        let mut captured = b.graph.then(|| CapturedStep::new(&trainer, b.device, true));
        let mut step =
            |trainer: &mut Trainer, rng: &mut HostRng, c: &mut Counters, tally: &mut Tally| match &mut captured {
                Some(graph) => graph.step(trainer, &replay, rng, &mut prof, c, tally),
                None => {
                    trainer.step(&replay, rng, &mut prof, c, tally);
                    Ok(())
                }
            };
        // Warm-up: allocations, kernels, cuDNN's timings; under a graph, its eager steps and
        // the capture.
        let warmup = if b.graph { captured::WARMUP + 1 } else { 1 };
        let mut tally = Tally::new(settings.loss_read);
        for _ in 0..warmup {
            step(&mut trainer, &mut rng, &mut c, &mut tally)?;
        }
        let _ = tally.read(warmup, &mut c);
        trainer.split = Default::default();
        let mut tally = Tally::new(settings.loss_read);
        let start = Instant::now();
        let mut steps = 0u64;
        while steps < 3 || start.elapsed().as_secs_f64() < b.seconds {
            step(&mut trainer, &mut rng, &mut c, &mut tally)?;
            steps += 1;
        }
        let _ = tally.read(steps, &mut c); // the last step's work is done once its losses are read
        let secs = start.elapsed().as_secs_f64();
        let samples = (batch * settings.seq_len) as f64 * steps as f64 / secs;
        let [data_pct, fwd_pct, bwd_pct] = trainer.split.percent();
        let (memory_bytes, memory_total_bytes) = memory(b.device);
        figures.push(BatchFigure {
            batch,
            train_steps: steps,
            train_steps_per_s: steps as f64 / secs,
            ms_per_update: 1e3 * secs / steps as f64,
            launches_per_update: captured.as_ref().and_then(|g| g.replayer.launches),
            replays: captured.as_ref().map_or(0, |g| g.replayer.replays),
            samples_per_s: samples,
            data_pct,
            fwd_pct,
            bwd_pct,
            gflops: samples * flops / 1e9,
            share_of_sgemm: samples * flops / 1e9 / sgemm,
            memory_bytes,
            memory_total_bytes,
        });
    }
    let plateau = figures.windows(2).find(|w| w[1].samples_per_s < GROWTH * w[0].samples_per_s).map(|w| w[0].batch);
    let verdict = verdict(&figures, plateau);
    Ok(BatchReport {
        device: hotlab_train::exec::device::label(b.device),
        seq_len: b.settings.seq_len,
        size: b.settings.size,
        params,
        threads: tch::get_num_threads().max(1) as usize,
        precision: hotlab_train::precision::Precision { kind: b.kind, scaler: None }.label().into(),
        cudnn_benchmark: b.cudnn_benchmark && b.device.is_cuda(),
        graph: b.graph,
        flops_per_sample: flops,
        sgemm_gflops: sgemm,
        figures,
        plateau,
        verdict,
    })
}

/// Where throughput stops growing, and the memory it takes there (seed 004: grow the
/// batch until 60–80 % of the device's memory is in use, while it still pays).
fn verdict(figures: &[BatchFigure], plateau: Option<usize>) -> String {
    let share = |f: &BatchFigure| match (f.memory_bytes, f.memory_total_bytes) {
        (Some(used), Some(total)) if total > 0 => {
            format!("{:.0} % of the device's memory", 100.0 * used as f64 / total as f64)
        }
        _ => "memory unknown".into(),
    };
    match (plateau, figures.last()) {
        (Some(batch), _) => {
            let f = figures.iter().find(|f| f.batch == batch).expect("a measured size");
            format!(
                "throughput stops growing at batch {batch} ({:.0} samples/s, {}): a larger batch buys memory, not speed",
                f.samples_per_s,
                share(f)
            )
        }
        (None, Some(f)) => format!(
            "throughput still grows at the largest batch, {} ({:.0} samples/s, {}): try larger, up to 60–80 % of the memory",
            f.batch,
            f.samples_per_s,
            share(f)
        ),
        (None, None) => "no batch size measured".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The FLOP count grows with the model and the horizon, and the world model's share
    /// is what a 64×64 conv autoencoder costs: millions of FLOPs per frame at size 1.
    #[test]
    fn flops_per_sample_scale_with_the_model_and_the_horizon() {
        let small = flops_per_sample(&Dims::new(1), 15);
        assert!((5e6..1e8).contains(&small), "{small}");
        assert!(flops_per_sample(&Dims::new(2), 15) > 3.0 * small);
        assert!(flops_per_sample(&Dims::new(1), 30) > small);
    }

    /// `--size 1` is DreamerV3's smallest preset in parameters: size1m has 640,867, and
    /// issue 37 asks for a size within 10 % of it; larger sizes grow about as k².
    #[test]
    fn size_1_is_within_ten_percent_of_dreamerv3s_size1m() {
        // Building the networks draws their weights from libtorch's global generator, which
        // other tests seed and draw from on parallel threads.
        let _seeded = hotlab_train::testing::torch_seed(1);
        let one = parameters(&Dims::new(1));
        assert_eq!(one, 704_822, "the world model 622,003, the actor 41,474, the critic 41,345");
        assert!((one as f64 / 640_867.0 - 1.0).abs() < 0.10, "{one}");
        assert!(parameters(&Dims::new(2)) > 4 * one);
    }
}

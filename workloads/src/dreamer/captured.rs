//! `--update graph` for the dreamer: the whole train step on static buffers, recorded once
//! as a CUDA graph and replayed per train step. The same ops as [`Trainer::step`], in the
//! same order ([`Trainer::learn`]): the batch gathered from the device replay, the world
//! model's loss, backward, clip and Adam, the imagination, the actor's and the critic's
//! losses, backward, clips and Adams. What changes between steps lives in tensors the graph
//! reads: the rows to gather (drawn on the host from the run's stream, as the eager step
//! draws them, and copied in), the learning rates, and each Adam's step count (on the
//! device). The step's loss figures land in a static row that `--loss-read` reads as before.
//! Each replay is counted with the kernels and copies it launched (the graph's nodes).
//!
//! On CUDA the first [`WARMUP`] steps run these ops eagerly (cuDNN times its convolutions,
//! libtorch's allocator settles, and Adam's step counts exist before the capture), then one
//! is captured on a side stream and replayed from then on. Made without capture (the tests
//! on the CPU), the same ops always run eagerly.

use super::behavior::Behavior;
use super::replay::Replay;
use super::step::{Tally, Trainer, FIGURES};
use super::world::{Dims, WorldModel};
use anyhow::{bail, Result};
use hotlab_core::counters::Counters;
use hotlab_core::profile::Phase;
use hotlab_env::rng::HostRng;
use hotlab_specs::dreamer::LossRead;
use hotlab_specs::DreamerSpec;
use hotlab_train::cuda::replayer::Replayer;
use hotlab_train::cuda::shim::Launches;
use hotlab_train::profiler::Profiler;
use tch::{Device, Kind, Tensor};

/// Eager steps before the capture.
pub const WARMUP: u64 = 2;

/// The static buffers of the dreamer's `--update graph` and, once captured, its graph.
pub struct CapturedStep {
    buffers: Buffers,
    /// Eager for the warm-up, then captured once and replayed.
    pub replayer: Replayer,
}

/// What the train step's ops read and write besides the networks and their optimizers.
struct Buffers {
    /// `[batch · seq_len]` i64: the replay's rows this step gathers.
    rows: Tensor,
    /// `[1]` f32 each: the world model's and the actor-critic's learning rates.
    lrs: [Tensor; 2],
    /// `[FIGURES]` f32: the last step's loss figures.
    figures: Tensor,
}

impl CapturedStep {
    /// `capture`: capture after the warm-up (CUDA only); false: always eager (the tests on
    /// the CPU).
    pub fn new(trainer: &Trainer, device: Device, capture: bool) -> Self {
        let d = &trainer.settings;
        let rate = |lr: f64| Tensor::from_slice(&[lr as f32]).to_device(device);
        let buffers = Buffers {
            rows: Tensor::zeros([(d.batch * d.seq_len) as i64], (Kind::Int64, device)),
            lrs: [rate(d.wm_lr), rate(d.ac_lr)],
            figures: Tensor::zeros([FIGURES as i64], (Kind::Float, device)),
        };
        Self { buffers, replayer: Replayer::new(device, capture, WARMUP) }
    }

    /// One train step of `trainer` on a batch from `replay` (which must keep its steps on
    /// the device); its loss figures go to `tally`. [`Trainer::step`]'s result to rounding,
    /// given the same `rng` and libtorch generator.
    pub fn step(
        &mut self,
        trainer: &mut Trainer,
        replay: &Replay,
        rng: &mut HostRng,
        prof: &mut Profiler,
        c: &mut Counters,
        tally: &mut Tally,
    ) -> Result<()> {
        let s = prof.start();
        let (b, t) = (trainer.settings.batch, trainer.settings.seq_len);
        let rows = Tensor::from_slice(&replay.draw(b, t, rng));
        let on = self.buffers.rows.device();
        if on.is_cuda() {
            c.h2d_copies += 1;
            c.h2d_bytes += (rows.numel() * 8) as u64;
        }
        self.buffers.rows.copy_(&rows);
        let s = prof.stop(Phase::OTHER, s);
        let buffers = &self.buffers;
        self.replayer.run("the train step", c, || buffers.body(trainer, replay))?;
        tally.add(&self.buffers.figures, c);
        prof.stop(Phase::UPDATE_GRAPH, s);
        Ok(())
    }
}

impl Buffers {
    /// The train step's ops on the static buffers: no host read, nothing timed.
    fn body(&self, trainer: &mut Trainer, replay: &Replay) -> Result<()> {
        let (b, t) = (trainer.settings.batch as i64, trainer.settings.seq_len as i64);
        let Some(batch) = replay.gather(&self.rows, b, t) else {
            bail!("--update: graph gathers each batch from the replay on the device; allowed with --replay host or pinned: eager (or --replay device with graph)");
        };
        // The phases inside are one replay's: a profiler that keeps them to itself.
        let (figures, _) = trainer.learn(&batch, Some(&self.lrs), &mut Profiler::new(None));
        self.figures.shallow_clone().copy_(&figures);
        Ok(())
    }
}

/// Which train step [`train_steps`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Today's step ([`Trainer::step`]).
    Eager,
    /// The captured step's ops on its static buffers, launched eagerly.
    Static,
    /// The captured step captured once after its warm-up and replayed (CUDA only; on the
    /// CPU it is [`Path::Static`]).
    Replayed,
}

/// What [`train_steps`] ends with.
pub struct Trained {
    /// The world model's, the actor's and the critic's parameters after the steps.
    pub params: Vec<Tensor>,
    /// The loss figures summed over the steps.
    pub figures: Vec<f64>,
    /// Host reads during the steps.
    pub host_syncs: u64,
    /// What one replay launched, and the replays ([`Path::Replayed`] on CUDA).
    pub launches: Option<Launches>,
    pub replays: u64,
}

/// `steps` train steps by `path` of a fresh trainer at `size` with fp32 products on
/// `device`, its weights and draws from libtorch's generator seeded with `seed`, on a
/// buffer of random episodes, the replay's rows from a stream seeded with `seed` too.
pub fn train_steps(
    settings: &DreamerSpec,
    size: usize,
    device: Device,
    seed: i64,
    steps: usize,
    path: Path,
) -> Trained {
    tch::manual_seed(seed);
    let replay = super::fill::filled(settings, device);
    let dims = Dims::new(size);
    let world = WorldModel::new(dims, device, Kind::Float);
    let behavior = Behavior::new(&dims, device, Kind::Float);
    let mut trainer = Trainer::new(settings.clone(), world, behavior, None);
    let mut rng = HostRng::new(seed as u64 + 7);
    let mut tally = Tally::new(LossRead::Deferred);
    let (mut prof, mut c) = (Profiler::new(None), Counters::default());
    let capture = path == Path::Replayed && device.is_cuda();
    let mut step = (path != Path::Eager).then(|| CapturedStep::new(&trainer, device, capture));
    for _ in 0..steps {
        match &mut step {
            Some(s) => s.step(&mut trainer, &replay, &mut rng, &mut prof, &mut c, &mut tally).expect("a device replay"),
            None => trainer.step(&replay, &mut rng, &mut prof, &mut c, &mut tally),
        }
    }
    let host_syncs = c.host_syncs;
    let figures = tally.read(steps as u64, &mut c).map_or_else(Vec::new, |f| f.to_vec());
    let params = [&trainer.world.p.flat, &trainer.behavior.actor.flat, &trainer.behavior.critic.flat]
        .iter()
        .map(|f| f.to_device(Device::Cpu))
        .collect();
    let (launches, replays) = step.map_or((None, 0), |s| (s.replayer.launches, s.replayer.replays));
    Trained { params, figures, host_syncs, launches, replays }
}

/// How far apart two runs' parameters ended: the share of elements more than 1e-6 apart, and
/// the largest difference. Adam divides each gradient by its own running size, so a
/// rounding apart in a near-zero gradient can move that weight by up to a learning rate.
pub fn agreement(a: &[Tensor], b: &[Tensor]) -> (f64, f64) {
    let diff = Tensor::cat(&a.iter().zip(b).map(|(x, y)| (x - y).abs()).collect::<Vec<_>>(), 0);
    let share = f64::try_from(diff.gt(1e-6).to_kind(Kind::Double).mean(Kind::Double)).unwrap_or(1.0);
    (share, f64::try_from(diff.max()).unwrap_or(f64::INFINITY))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_specs::dreamer::ReplayAt;

    /// The captured step's ops (static rows, the batch gathered on the device, device
    /// learning rates and step counts) are today's train step to rounding after several
    /// steps: every network's parameters and every loss figure, over seeds and shapes. The
    /// steps change the weights, so the comparison is not of an untrained network.
    #[test]
    fn the_captured_steps_ops_are_the_eager_train_step_over_seeds_and_shapes() {
        let shapes = [(2, 4, 3), (3, 5, 2), (1, 6, 4)];
        for (case, &(batch, seq_len, horizon)) in shapes.iter().enumerate() {
            let settings = DreamerSpec { batch, seq_len, horizon, replay: ReplayAt::Device, ..DreamerSpec::default() };
            for seed in [1, 2] {
                let seed = seed + 10 * case as i64;
                let steps = 4;
                let _seeded = hotlab_train::testing::torch_seed(seed);
                let before = train_steps(&settings, 1, Device::Cpu, seed, 0, Path::Eager);
                let eager = train_steps(&settings, 1, Device::Cpu, seed, steps, Path::Eager);
                let captured = train_steps(&settings, 1, Device::Cpu, seed, steps, Path::Static);
                assert_eq!((eager.host_syncs, captured.host_syncs), (0, 0), "a train step read the device");
                let (moved, _) = agreement(&before.params, &eager.params);
                assert!(moved > 0.5, "the steps moved only {moved} of the weights ({batch}×{seq_len}, seed {seed})");
                // Nearly every weight agrees to 1e-6 (measured: at most 4 in a million do not),
                // none by more than the smaller learning rate (measured: 1.5e-5 at most).
                let (share, largest) = agreement(&eager.params, &captured.params);
                let shape = format!("{batch}×{seq_len}, horizon {horizon}, seed {seed}");
                assert!(share < 1e-3, "{share} of the weights differ by more than 1e-6 ({shape})");
                assert!(largest < settings.ac_lr.min(settings.wm_lr), "a weight differs by {largest} ({shape})");
                let names = super::super::step::TERMS;
                for (name, (a, b)) in names.iter().zip(eager.figures.iter().zip(&captured.figures)) {
                    assert!((a - b).abs() <= 1e-4 * a.abs().max(1.0), "{name}: {a} against {b} ({shape})");
                }
                assert_eq!(captured.replays, 0, "nothing is captured on the CPU");
            }
        }
    }

    /// The captured step refuses a replay on the host, naming the knob.
    #[test]
    fn the_captured_step_needs_the_replay_on_the_device() {
        let settings =
            DreamerSpec { batch: 2, seq_len: 4, horizon: 2, replay: ReplayAt::Host, ..DreamerSpec::default() };
        let _seeded = hotlab_train::testing::torch_seed(3);
        let replay = super::super::fill::filled(&settings, Device::Cpu);
        let dims = Dims::new(1);
        let (world, behavior) =
            (WorldModel::new(dims, Device::Cpu, Kind::Float), Behavior::new(&dims, Device::Cpu, Kind::Float));
        let mut t = Trainer::new(settings, world, behavior, None);
        let mut step = CapturedStep::new(&t, Device::Cpu, false);
        let mut tally = Tally::new(LossRead::Deferred);
        let err = step
            .step(&mut t, &replay, &mut HostRng::new(1), &mut Profiler::new(None), &mut Counters::default(), &mut tally)
            .unwrap_err();
        assert!(format!("{err:#}").contains("--replay device"), "{err:#}");
    }
}

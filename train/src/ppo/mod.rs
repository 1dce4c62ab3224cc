//! PPO as a [`Learner`]: each iteration collects one rollout (`envs × steps`
//! transitions), computes GAE, and runs the update. CleanRL's `ppo.py`, with the network
//! left to the workload.
//!
//! A workload's network plugs in through two traits: [`PpoPolicy`] (its parameters and
//! the gradient of the loss on a minibatch, by autograd or by hand) and [`Actor`] (its
//! forward in the rollout: libtorch ops or a native one). Where the rollout happens is a
//! [`Collect`]: host envs on any backend ([`collect::HostCollector`]), or a workload's
//! own device rollout.
//!
//! - [`update`]: the epochs × minibatches loop, the clip and Adam;
//! - [`captured`]: the same update with static buffers, as one CUDA graph (`--update graph`);
//! - [`loss`]: the loss's definition;
//! - [`advantages`]: the per-minibatch advantage normalization (one rule, three forms);
//! - [`collect`]: the rollout from host envs.
//!
//! Reading one iteration top to bottom: [`PpoLearner`]'s `iterate` (below) asks its
//! [`Collect`] for a rollout ([`collect::HostCollector`] steps the envs and calls the
//! [`Actor`] each step, then GAE), then calls [`update::update`]: epochs × minibatches, each
//! minibatch a [`Pass`]'s `gradient` (the network's forward, [`loss`], backward), then the
//! clip and Adam. Each trait is where the pieces vary independently: where the envs step
//! (host or device), how the rollout's forward runs (libtorch ops or native), and how a
//! network computes its gradient (autograd or by hand).

pub mod advantages;
pub mod captured;
pub mod collect;
pub mod loss;
pub mod update;

use super::adam::FlatAdam;
use super::distribution::gaussian;
use super::normalize::ObsNorm;
use super::params::{Network, ParamSlot};
use super::precision::Precision;
use super::rollout::{Batch, Rollout};
use super::workload::{Iteration, Learner, Outcome, Setup, TrainedPolicy};
use crate::cuda::loss::PpoLossGrad;
use crate::exec::transfer::{read_into, Mover};
use crate::profiler::{Meters, Profiler};
use anyhow::Result;
use hotlab_core::choices::UpdateMode;
use hotlab_core::counters::Counters;
use hotlab_env::rng::HostRng;
use hotlab_env::Observations;
use hotlab_protocol::Losses;
use hotlab_spec::RunSpec;
use std::time::Instant;
use tch::Tensor;
use update::UpdateCtx;

/// A workload's network as PPO trains it.
pub trait PpoPolicy: Sized {
    /// One update's working state (buffers reused across its epochs).
    type Pass<'a>: Pass
    where
        Self: 'a;
    /// Its network.
    type Net: Network;
    fn net(&self) -> &Self::Net;
    /// The flat parameter vector (Adam's state is shaped after it).
    fn flat(&self) -> &Tensor {
        self.net().flat()
    }
    fn layout(&self) -> &[ParamSlot] {
        self.net().layout()
    }
    /// Starts an update over `batch`.
    fn begin<'a>(&'a mut self, batch: &'a Batch, spec: &RunSpec, precision: &Precision) -> Self::Pass<'a>;
    /// The trained network, for checkpoints and evaluation, with the statistics its
    /// observations were normalized by (`--obs-norm`), if they were.
    fn into_trained(self, obs_norm: Option<ObsNorm>) -> Box<dyn TrainedPolicy>;
    /// Figures of its own for the run's metrics (a Gaussian head's log-std), read with
    /// what it costs counted.
    fn figures(&self, _out: &mut Losses, _c: &mut Counters) {}
    /// Whether its passes have the capturable form ([`DevicePass`], from
    /// [`Pass::on_device`]) that `--update graph` records.
    fn capturable(&self) -> bool {
        false
    }
}

/// One update of a [`PpoPolicy`].
pub trait Pass {
    /// A new epoch over the rows in `order` (freshly shuffled; a pass may reorder rows
    /// inside each minibatch, which the next shuffle then starts from).
    fn epoch(&mut self, order: &mut [i64]);
    /// Minibatch `step.m`'s gradient into the flat gradient, and its loss statistics
    /// `[pg, v, entropy, approx_kl, clipfrac]` when `step.last`. Profiles from
    /// `step.start` and returns the end of its last span.
    fn gradient(&mut self, step: MinibatchStep<'_, '_>) -> (Option<Vec<f64>>, Instant);
    /// The flat parameters and their gradient, for the scaler, the clip and Adam.
    fn params(&mut self) -> (&mut Tensor, &mut Tensor);
    /// The capturable form of this pass, which `--update graph` records: None for a pass
    /// that has none (`--update graph` refuses its workload before the run starts).
    fn on_device(&mut self) -> Option<&mut dyn DevicePass> {
        None
    }
}

/// A [`Pass`] in the form `--update graph` records: libtorch ops only, no host read, no
/// profiling. Where a [`PpoPolicy`] is [`capturable`](PpoPolicy::capturable), its passes
/// give this form from [`Pass::on_device`].
pub trait DevicePass: Pass {
    /// [`Pass::epoch`] from rows `order` already on the device.
    fn epoch_on_device(&mut self, order: &Tensor);
    /// [`Pass::gradient`] with the statistics left on the device (`[5]` f32, when `last`);
    /// with `kernel`, ∂loss/∂outputs from it (`--update graph_fused`).
    fn gradient_on_device(
        &mut self,
        m: usize,
        last: bool,
        ctx: &UpdateCtx<'_>,
        kernel: Option<&PpoLossGrad>,
    ) -> Result<Option<Tensor>>;
}

/// One minibatch as a [`Pass`] takes it: the epoch's row order, which minibatch, whether
/// it is the update's last (its statistics are read), the update's context, and the
/// profiler with where its first span starts.
pub struct MinibatchStep<'a, 'c> {
    pub order: &'a [i64],
    pub m: usize,
    pub last: bool,
    pub ctx: &'a UpdateCtx<'c>,
    pub prof: &'a mut Profiler,
    pub start: Instant,
}

/// One step of a rollout as an [`Actor`] takes it: which step, the action heads, the
/// sampling stream, the counters and the profiler, and where its first span starts.
pub struct ActStep<'a> {
    pub t: usize,
    pub heads: &'a [usize],
    pub rng: &'a mut HostRng,
    pub counters: &'a mut Counters,
    pub prof: &'a mut Profiler,
    pub start: Instant,
}

/// A rollout forward of network `P` on host observations.
pub trait Actor<P> {
    /// Fills step `step.t` of `rollout` (its observations are already there): actions,
    /// log-probs, values. Profiles from `step.start` and returns the end of its last span.
    fn act(&mut self, net: &P, rollout: &mut Rollout, step: ActStep<'_>) -> Instant;
    /// Critic values of the observations `rows` asks for.
    fn values(&mut self, net: &P, rows: ValueRows<'_>, c: &mut Counters) -> Vec<f32>;
    /// Re-reads the weights after an update (a native forward keeps its own copy).
    fn sync_weights(&mut self, net: &P);
    /// The rollout's log-probs and values on the device, and the values on the host
    /// (after its last step, before the bootstrap's [`Actor::values`]; a recurrent actor
    /// leaves its [`crate::rollout::Memory`] in `rollout`).
    fn finish(&mut self, rollout: &mut Rollout, c: &mut Counters) -> Option<(Tensor, Tensor)>;
    /// Whether frames are taken (a lab watches the run): what an actor shows of itself
    /// ([`Actor::shown`]) is recorded only then, so an unwatched run pays nothing for it.
    fn watch(&mut self, _watched: bool) {}
    /// What the actor shows of itself in a frame (a recurrent one: env 0's state norm over
    /// its episode, [`hotlab_protocol::PolicyMemory`]), read once per frame.
    fn shown(&mut self, _c: &mut Counters) -> Option<hotlab_protocol::PolicyMemory> {
        None
    }
}

/// The observations whose critic values a rollout asks for ([`Actor::values`]): every
/// env's in `obs`, or env `row`'s only (a truncated episode's final observation).
#[derive(Clone, Copy)]
pub struct ValueRows<'a> {
    pub obs: &'a Observations,
    pub envs: usize,
    pub row: Option<usize>,
}

impl ValueRows<'_> {
    /// How many rows are asked for.
    pub fn count(&self) -> usize {
        if self.row.is_some() {
            1
        } else {
            self.envs
        }
    }

    /// The asked rows of one field's values `v` (`envs` rows of equal width), and that width.
    pub fn of<'v, T>(&self, v: &'v [T]) -> (&'v [T], usize) {
        let w = v.len() / self.envs.max(1);
        let first = self.row.unwrap_or(0);
        (&v[first * w..(first + self.count()) * w], w)
    }
}

/// An update's epochs for an autograd [`Pass`]: each epoch's rows gathered in their
/// shuffled order on the network's device, then cut into contiguous minibatches.
pub struct Epochs<'a> {
    batch: &'a Batch,
    shuffled: Option<Batch>,
    mb_size: i64,
}

impl<'a> Epochs<'a> {
    pub fn new(batch: &'a Batch, spec: &RunSpec) -> Self {
        Self { batch, shuffled: None, mb_size: spec.minibatch_size() as i64 }
    }

    /// A new epoch: the rows in `order`, gathered on `device`.
    pub fn shuffle(&mut self, order: &[i64], device: tch::Device) {
        self.shuffled = Some(self.batch.select(&Tensor::from_slice(order).to_device(device)));
    }

    /// Minibatch `m` of the epoch (a view).
    pub fn minibatch(&self, m: usize) -> Batch {
        self.shuffled.as_ref().expect("an epoch has begun").rows(m as i64 * self.mb_size, self.mb_size)
    }
}

/// The end of an autograd [`Pass::gradient`]: the forward's span closes, the loss's
/// backward fills the flat gradient as its own span, and the statistics are read (the last
/// minibatch's only).
pub fn backward(loss: &Tensor, stats: Option<Tensor>, prof: &mut Profiler, s: Instant) -> (Option<Vec<f64>>, Instant) {
    let s = prof.stop(hotlab_core::profile::Phase::UPDATE_FORWARD, s);
    backward_after(loss, stats, prof, s)
}

/// [`backward`] once the forward's span is closed (a workload that splits it).
pub fn backward_after(
    loss: &Tensor,
    stats: Option<Tensor>,
    prof: &mut Profiler,
    s: Instant,
) -> (Option<Vec<f64>>, Instant) {
    loss.backward();
    let stats = stats.map(|t| Vec::<f64>::try_from(t.to_kind(tch::Kind::Double)).unwrap_or_default());
    (stats, prof.stop(hotlab_core::profile::Phase::BACKWARD, s))
}

/// An eager actor's [`Actor::finish`]: its log-probs and values stayed on the device.
pub fn device_outputs(rollout: &mut Rollout, c: &mut Counters) -> Option<(Tensor, Tensor)> {
    let (lp, v) = rollout.device.as_ref().map(|(a, b)| (a.shallow_clone(), b.shallow_clone()))?;
    read_into(&v, &mut rollout.values, c);
    Some((lp.view([-1]), v.view([-1])))
}

/// What a rollout needs besides the network.
pub struct CollectCtx<'a, 'i> {
    pub spec: &'a RunSpec,
    pub heads: &'a [usize],
    pub rng: &'a mut HostRng,
    pub mover: &'a Mover,
    /// The global index of the rollout's first step (for the profiler and frames).
    pub first_step: u64,
    pub it: &'a mut Iteration<'i>,
}

/// Where a rollout happens.
pub trait Collect<P> {
    /// One rollout with `net`, with its advantages and returns, on the update's device;
    /// None when the run was asked to stop part-way (checked every step).
    fn collect(&mut self, net: &P, cx: &mut CollectCtx<'_, '_>) -> Result<Option<Batch>>;
    /// The observation normalizer's statistics, where it normalizes (`--obs-norm`): the
    /// trained policy reads its inputs through them.
    fn obs_norm(&self) -> Option<ObsNorm> {
        None
    }
    /// Figures of its own for the run's metrics (the normalizers' state).
    fn figures(&self, _out: &mut Losses) {}
}

/// The note a native (`fused`) rollout forward adds to a run.
pub const FUSED_NOTE: &str =
    "inference fused: the forward runs on the host, so --transfer and --action-sync have nothing to move per step";

/// What every PPO learner does once its network is initialized, in this order: the run's
/// libtorch threads, Adam, the precision's note, the mover for advantages and returns.
pub fn after_init(setup: &mut Setup<'_>, flat: &Tensor) -> (FlatAdam, Mover) {
    tch::set_num_threads(setup.threads as i32);
    let opt = FlatAdam::new(flat, 1e-5);
    let p = setup.precision.label();
    if setup.precision.kind != tch::Kind::Float {
        setup.notes.push(format!(
            "precision {p}: the update's matmuls run in {p}; the rollout's forward and the master weights stay fp32"
        ));
    }
    if setup.spec.exec.update.captured() {
        let spec = setup.spec;
        let steps = spec.ppo.epochs * spec.ppo.minibatches;
        let replays = spec.updates().saturating_sub(captured::WARMUP);
        setup.notes.push(format!(
            "update graph: the whole update (its epochs' shuffles drawn on the device, then {steps} minibatch steps of forward, backward, clip and Adam) captured after {} eager updates and replayed once per update ({replays} replays for a whole run), one launch from the host instead of each op's; its time is the update_graph phase",
            captured::WARMUP
        ));
        if spec.exec.update == UpdateMode::GraphFused {
            setup.notes.push("update graph_fused: in each minibatch step the loss's gradient is one kernel of hotlab's (ppo_loss_grad) and the clip and Adam three launches (the squared norm, the step count, clip_adam), where libtorch's ops are about 65".into());
        }
    }
    let mover = Mover::new(setup.spec.exec.transfer, setup.device);
    setup.notes.extend(mover.note());
    (opt, mover)
}

/// PPO over a workload's network `P`.
pub struct PpoLearner<P: PpoPolicy> {
    pub spec: RunSpec,
    pub net: P,
    pub opt: FlatAdam,
    pub rng: HostRng,
    pub heads: Vec<usize>,
    /// Moves the advantages and returns to the device.
    pub mover: Mover,
    pub collector: Box<dyn Collect<P>>,
    pub precision: Precision,
    /// `--update graph`: the update's static buffers and its graph.
    pub captured: Option<captured::CapturedUpdate>,
}

impl<P: PpoPolicy> PpoLearner<P> {
    pub fn new(
        setup: &Setup<'_>,
        net: P,
        opt: FlatAdam,
        mover: Mover,
        collector: Box<dyn Collect<P>>,
        heads: Vec<usize>,
    ) -> Self {
        let (spec, precision) = (setup.spec.clone(), setup.precision.clone());
        let captured = spec
            .exec
            .update
            .captured()
            .then(|| captured::CapturedUpdate::new(setup.device, true, spec.exec.update == UpdateMode::GraphFused));
        Self { rng: HostRng::new(spec.seed), spec, net, opt, heads, mover, collector, precision, captured }
    }
}

impl<P: PpoPolicy> Learner for PpoLearner<P> {
    fn iterations(&self) -> u64 {
        self.spec.updates()
    }

    fn layout(&self) -> &[ParamSlot] {
        self.net.layout()
    }

    fn warmup(&self) -> u64 {
        // A captured update's eager warm-up and its capture, then one replay.
        if self.captured.is_some() {
            captured::WARMUP + 2
        } else {
            2
        }
    }

    fn iterate(&mut self, it: &mut Iteration<'_>) -> Result<Option<Outcome>> {
        let spec = &self.spec;
        let updates = spec.updates();
        // CleanRL anneals from lr at the first update towards 0 after the last one.
        let lr = if spec.ppo.anneal_lr { spec.ppo.lr * (1.0 - it.index as f64 / updates as f64) } else { spec.ppo.lr };
        let rollout_start = Instant::now();
        let mut cx = CollectCtx {
            spec,
            heads: &self.heads,
            rng: &mut self.rng,
            mover: &self.mover,
            first_step: it.index * spec.steps as u64,
            it,
        };
        let Some(batch) = self.collector.collect(&self.net, &mut cx)? else { return Ok(None) };
        let learn_start = Instant::now();
        let rollout_s = (learn_start - rollout_start).as_secs_f64();
        let ctx = UpdateCtx {
            spec,
            heads: &self.heads,
            lr,
            precision: &mut self.precision,
            telemetry: it.telemetry,
            stop: it.stop,
        };
        let update = match self.captured.as_mut() {
            Some(graph) => {
                let shuffles = captured::Shuffles::Device;
                let meters = Meters { prof: &mut *it.prof, counters: &mut *it.counters };
                graph.update((&mut self.net, &mut self.opt), &batch, ctx, shuffles, meters)?
            }
            None => update::update(&mut self.net, &mut self.opt, &batch, ctx, &mut self.rng, it.prof, it.counters),
        };
        let Some((mut losses, norms)) = update else { return Ok(None) };
        let c = &mut *it.counters;
        c.host_syncs += 1; // the loss statistics, read once per update
        c.d2h_copies += 1;
        c.d2h_bytes += 5 * 4;
        // What a Gaussian head did and the normalizers know, beside the losses.
        if let Some(real) = &batch.real_actions {
            gaussian::rollout_figures(real, &mut losses, c);
        }
        self.net.figures(&mut losses, c);
        self.collector.figures(&mut losses);
        let env_steps = spec.batch_size() as u64;
        let scaler = self.precision.scaler.as_ref();
        Ok(Some(Outcome {
            env_steps,
            lr,
            losses,
            loss_scale: scaler.map(|s| s.scale),
            skipped_steps: scaler.map_or(0, |s| s.skipped),
            norms,
            learn_start,
            rollout_s,
            lines: Vec::new(),
        }))
    }

    fn finish(self: Box<Self>) -> Box<dyn TrainedPolicy> {
        let obs_norm = self.collector.obs_norm();
        self.net.into_trained(obs_norm)
    }
}

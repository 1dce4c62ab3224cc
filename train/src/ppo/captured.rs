//! `--update graph`: the PPO update with static buffers, recorded once as a CUDA graph and
//! replayed per iteration. The same ops as [`super::update`]'s device path, in the same
//! order: each epoch's gather of the rollout, the per-minibatch advantage normalization,
//! each minibatch's forward, hand-written backward, gradient clip and Adam step. What
//! changes between iterations lives in tensors the graph reads: the rollout (copied into
//! the static batch), the learning rate, and Adam's step count (on the device,
//! [`FlatAdam::step_device`]). The epochs' shuffles are drawn inside it on the device
//! ([`Shuffles::Device`]: uniform keys from libtorch's generator, sorted; a capture
//! replays the generator's next draws), or drawn on the host from the run's stream, as the
//! eager update draws them, and copied in ([`Shuffles::Host`]; or [`Shuffles::Given`]).
//! Nothing is read back inside it; the last minibatch's statistics are read once after
//! it, as in the eager update. Each replay is counted in the run's counters with the
//! kernels and copies it launched (the captured graph's nodes).
//!
//! On CUDA the first [`WARMUP`] updates run these ops eagerly (libtorch's allocator and
//! cuBLAS settle, and Adam's step count exists before the capture, which would otherwise
//! record its creation), then one is captured on a side stream and replayed from then on.
//! Made without capture (the tests on the CPU), the same ops always run eagerly.

use super::update::{clip_grad_norm, UpdateCtx, STATS};
use super::{Pass, PpoPolicy};
use crate::adam::FlatAdam;
use crate::cuda::fused::UpdateKernels;
use crate::cuda::replayer::Replayer;
use crate::profiler::Meters;
use crate::rollout::Batch;
use crate::workload::asked_to_stop;
use anyhow::{bail, Result};
use hotlab_core::profile::Phase;
use hotlab_env::rng::HostRng;
use hotlab_protocol::Losses;
use tch::{Device, Kind, Tensor};

/// Eager updates before the capture.
pub const WARMUP: u64 = 2;

/// Where an update's epoch shuffles come from.
pub enum Shuffles<'a> {
    /// Drawn on the device inside the update (a graph replays new draws): no host work and
    /// no upload per update. `--update graph` runs this.
    Device,
    /// Drawn on the host from the run's stream, as the eager update draws them, and copied in.
    Host(&'a mut HostRng),
    /// These `[epochs, rows]` orders (the tests' reference for [`Shuffles::Device`]).
    Given(&'a Tensor),
}

/// The static buffers of `--update graph` and, once captured, its graph.
pub struct CapturedUpdate {
    buffers: Buffers,
    /// Eager for the warm-up, then captured once and replayed.
    pub replayer: Replayer,
}

/// What the update's ops read and write besides the network and Adam.
struct Buffers {
    device: Device,
    /// The rollout the graph reads (copied in before each replay).
    batch: Option<Batch>,
    /// `[epochs, rows]` i64: each epoch's shuffle.
    orders: Option<Tensor>,
    /// Whether the body draws the shuffles ([`Shuffles::Device`]), fixed by the first update.
    draws: Option<bool>,
    /// `[1]` f32: this update's learning rate.
    lr: Tensor,
    /// `[5]` f32: the last minibatch's statistics ([`STATS`]).
    stats: Tensor,
    /// `--update graph_fused`: whether to use hotlab's kernels, and the kernels once loaded
    /// (at the first update, where an error can be returned).
    fused: bool,
    kernels: Option<UpdateKernels>,
}

impl CapturedUpdate {
    /// The last update's epoch shuffles, `[epochs, rows]` on the device (None before one).
    pub fn orders(&self) -> Option<&Tensor> {
        self.buffers.orders.as_ref()
    }

    /// `capture`: capture after the warm-up (CUDA only); false: always eager (the tests on
    /// the CPU). `fused`: the loss's gradient and the clipped Adam step in hotlab's kernels
    /// (CUDA only: the first update fails elsewhere, naming the device).
    pub fn new(device: Device, capture: bool, fused: bool) -> Self {
        let on = (Kind::Float, device);
        let buffers = Buffers {
            device,
            batch: None,
            orders: None,
            draws: None,
            lr: Tensor::zeros([1], on),
            stats: Tensor::zeros([STATS.len() as i64], on),
            fused,
            kernels: None,
        };
        Self { buffers, replayer: Replayer::new(device, capture, WARMUP) }
    }

    /// One update of `net` on `batch`: the eager update's result to rounding, given the same
    /// shuffles; None when the run was asked to stop before it.
    pub fn update<P: PpoPolicy>(
        &mut self,
        (net, opt): (&mut P, &mut FlatAdam),
        batch: &Batch,
        ctx: UpdateCtx<'_>,
        shuffles: Shuffles<'_>,
        meters: Meters<'_>,
    ) -> Result<Option<(Losses, Option<Tensor>)>> {
        let Meters { prof, counters: c } = meters;
        if !net.capturable() {
            bail!("--update: graph records the update's ops, and this workload's network has no capturable update yet; allowed: eager");
        }
        if asked_to_stop(ctx.stop) {
            return Ok(None);
        }
        let s = prof.start();
        let spec = ctx.spec;
        let b = &mut self.buffers;
        let draws = matches!(shuffles, Shuffles::Device);
        if *b.draws.get_or_insert(draws) != draws {
            bail!("an update's shuffles changed between the device and the host after its first update");
        }
        let shape = [spec.ppo.epochs as i64, spec.batch_size() as i64];
        let orders = b.orders.get_or_insert_with(|| Tensor::zeros(shape, (Kind::Int64, b.device)));
        match shuffles {
            Shuffles::Device => {}
            Shuffles::Host(rng) => {
                // The shuffles the eager update would draw, in its order.
                let mut order: Vec<i64> = (0..shape[1]).collect();
                let mut drawn = Vec::with_capacity(order.len() * spec.ppo.epochs);
                for _ in 0..spec.ppo.epochs {
                    rng.shuffle(&mut order);
                    drawn.extend_from_slice(&order);
                }
                orders.copy_(&Tensor::from_slice(&drawn).view(shape));
            }
            Shuffles::Given(given) => orders.copy_(given),
        }
        match &mut b.batch {
            Some(own) => own.copy_from(batch),
            None => {
                let mut own = batch.empty_like();
                own.copy_from(batch);
                b.batch = Some(own);
            }
        }
        let _ = b.lr.fill_(ctx.lr);
        if b.fused && b.kernels.is_none() {
            b.kernels = Some(UpdateKernels::open(b.device)?);
        }
        let s = prof.stop(Phase::OTHER, s);
        let buffers = &self.buffers;
        self.replayer.run("the update", c, || buffers.body(net, opt, &ctx))?;
        let stats = Vec::<f64>::try_from(self.buffers.stats.to_kind(Kind::Double)).unwrap_or_default();
        prof.stop(Phase::UPDATE_GRAPH, s);
        Ok(Some((STATS.into_iter().zip(stats).collect(), None)))
    }
}

impl Buffers {
    /// The update's ops on the static buffers: every epoch and minibatch, no host read.
    fn body<P: PpoPolicy>(&self, net: &mut P, opt: &mut FlatAdam, ctx: &UpdateCtx<'_>) -> Result<()> {
        let spec = ctx.spec;
        let (batch, orders) = (self.batch.as_ref().expect("filled"), self.orders.as_ref().expect("filled"));
        if self.draws == Some(true) {
            // A uniform key per row, sorted: a uniformly random order per epoch.
            let keys = Tensor::rand(orders.size(), (Kind::Float, self.device));
            orders.shallow_clone().copy_(&keys.argsort(1, false));
        }
        let mut pass = net.begin(batch, spec, &*ctx.precision);
        let Some(pass) = pass.on_device() else {
            bail!("--update: graph records the update's ops, and this workload's passes have no capturable form; allowed: eager");
        };
        for epoch in 0..spec.ppo.epochs {
            pass.epoch_on_device(&orders.get(epoch as i64));
            for m in 0..spec.ppo.minibatches {
                let last = epoch + 1 == spec.ppo.epochs && m + 1 == spec.ppo.minibatches;
                let kernels = self.kernels.as_ref();
                if let Some(stats) = pass.gradient_on_device(m, last, ctx, kernels.map(|k| &k.loss))? {
                    self.stats.shallow_clone().copy_(&stats.to_kind(Kind::Float));
                }
                let (flat, grad) = pass.params();
                match kernels {
                    Some(k) => opt.step_fused(flat, grad, &self.lr, spec.ppo.max_grad_norm, &k.adam)?,
                    None => {
                        clip_grad_norm(grad, spec.ppo.max_grad_norm);
                        opt.step_device(flat, grad, &self.lr);
                    }
                }
            }
        }
        Ok(())
    }
}

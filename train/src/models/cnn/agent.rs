//! The CNN as PPO trains it: the loss's gradient by autograd over an epoch's shuffled
//! batch (the images still bytes until the encoder), and the rollout's forward in
//! libtorch ops: a step's images to the device as bytes (`--transfer`), actions back
//! (`--action-sync`), log-probs and values kept there.

use super::{CnnNet, TrainedCnn};
use crate::distribution;
use crate::exec::transfer::{read_into, Eager};
use crate::exec::EnvMaker;
use crate::normalize::ObsNorm;
use crate::ppo::loss::loss_of_heads;
use crate::ppo::{self, device_outputs, ActStep, Actor, Epochs, MinibatchStep, Pass, PpoPolicy, ValueRows};
use crate::precision::Precision;
use crate::rollout::{Batch, OnDevice, Rollout};
use crate::workload::TrainedPolicy;
use hotlab_core::counters::Counters;
use hotlab_core::profile::Phase;
use hotlab_protocol::Losses;
use hotlab_spec::RunSpec;
use std::sync::Arc;
use std::time::Instant;
use tch::Tensor;

/// The network and the envs it plays (for evaluation).
pub struct CnnAgent {
    pub net: CnnNet,
    pub env: Arc<dyn EnvMaker>,
}

impl PpoPolicy for CnnAgent {
    type Pass<'a> = CnnPass<'a>;
    type Net = CnnNet;

    fn net(&self) -> &CnnNet {
        &self.net
    }

    fn begin<'a>(&'a mut self, batch: &'a Batch, spec: &RunSpec, _precision: &Precision) -> CnnPass<'a> {
        CnnPass { agent: self, epochs: Epochs::new(batch, spec) }
    }

    fn into_trained(self, _obs_norm: Option<ObsNorm>) -> Box<dyn TrainedPolicy> {
        Box::new(TrainedCnn { net: self.net, env: self.env })
    }

    fn figures(&self, out: &mut Losses, c: &mut Counters) {
        distribution::gaussian::read_log_std_figures(self.net.log_std(), out, c);
    }
}

/// One update: the epoch's shuffled batch, cut into minibatches.
pub struct CnnPass<'a> {
    agent: &'a mut CnnAgent,
    epochs: Epochs<'a>,
}

impl Pass for CnnPass<'_> {
    fn epoch(&mut self, order: &mut [i64]) {
        self.epochs.shuffle(order, self.agent.net.device());
    }

    fn gradient(&mut self, step: MinibatchStep<'_, '_>) -> (Option<Vec<f64>>, Instant) {
        let MinibatchStep { m, last, ctx, prof, start: s, .. } = step;
        let mb = self.epochs.minibatch(m);
        let net = &mut self.agent.net;
        net.zero_grad();
        let images = net.convert(&mb.obs);
        let s = prof.stop(Phase::OBS_CONVERT, s);
        let features = net.features(&images);
        let (outputs, value) = (net.outputs(&features), net.value(&features));
        let (loss, stats) = loss_of_heads(&outputs, net.log_std(), &value, &mb, ctx.heads, ctx.spec, last);
        ppo::backward(&loss, stats, prof, s)
    }

    fn params(&mut self) -> (&mut Tensor, &mut Tensor) {
        let p = &mut self.agent.net.params;
        (&mut p.flat, &mut p.grad)
    }
}

/// The rollout's forward in libtorch ops on the trainer's device.
impl Actor<CnnAgent> for Eager {
    fn act(&mut self, agent: &CnnAgent, rollout: &mut Rollout, step: ActStep<'_>) -> Instant {
        let ActStep { t, heads, rng: _, counters: c, prof, start } = step;
        let (envs, w) = (rollout.envs, rollout.bytes_width);
        tch::no_grad(|| {
            let net = &agent.net;
            // The step's images, as bytes (a quarter of what floats would move) unless
            // `--frames float`.
            let images = self.mover.frames_to_device(0, &rollout.bytes[t * envs * w..(t + 1) * envs * w], envs, w, c);
            let s = prof.stop(Phase::OBS_TRANSFER, start);
            let converted = net.convert(&images);
            let s = prof.stop(Phase::OBS_CONVERT, s);
            let features = net.features(&converted);
            let outputs = net.outputs(&features);
            let (actions, real, lp) = distribution::sample_outputs(&outputs, net.log_std(), heads);
            let values = net.value(&features);
            let step = OnDevice {
                inputs: &[&images],
                actions: &actions,
                real: real.as_ref(),
                log_probs: &lp,
                values: &values,
            };
            rollout.record_on_device(t, step);
            let s = prof.stop(Phase::POLICY_FORWARD, s);
            rollout.step_mut(t).read_sampled(self, (&actions, real.as_ref()), c);
            prof.stop(Phase::ACTION_READBACK, s)
        })
    }

    fn values(&mut self, agent: &CnnAgent, rows: ValueRows<'_>, c: &mut Counters) -> Vec<f32> {
        let (bytes, w) = rows.of(rows.obs.fields[0].as_bytes());
        let n = rows.count();
        tch::no_grad(|| {
            let net = &agent.net;
            let images = self.mover.upload_frames(bytes, &[n as i64, w as i64], c);
            let mut out = vec![0f32; n];
            read_into(&net.value(&net.features(&net.convert(&images))), &mut out, c);
            out
        })
    }

    fn sync_weights(&mut self, _agent: &CnnAgent) {}

    fn finish(&mut self, rollout: &mut Rollout, c: &mut Counters) -> Option<(Tensor, Tensor)> {
        device_outputs(rollout, c)
    }
}

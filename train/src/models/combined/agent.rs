//! The combined policy as PPO trains it: the loss's gradient by autograd over an epoch's
//! shuffled batch (the image leaves still bytes until their encoder), and the rollout's
//! forward in libtorch ops: each of a step's leaves to the device in its own form
//! (`--transfer`), actions back (`--action-sync`), log-probs and values kept there.

use super::{CombinedNet, Inputs, TrainedCombined};
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
use tch::{Kind, Tensor};

/// The network and the envs it plays (for evaluation).
pub struct CombinedAgent {
    pub net: CombinedNet,
    pub env: Arc<dyn EnvMaker>,
}

impl PpoPolicy for CombinedAgent {
    type Pass<'a> = CombinedPass<'a>;
    type Net = CombinedNet;

    fn net(&self) -> &CombinedNet {
        &self.net
    }

    fn begin<'a>(&'a mut self, batch: &'a Batch, spec: &RunSpec, _precision: &Precision) -> CombinedPass<'a> {
        CombinedPass { agent: self, epochs: Epochs::new(batch, spec) }
    }

    fn into_trained(self, obs_norm: Option<ObsNorm>) -> Box<dyn TrainedPolicy> {
        Box::new(TrainedCombined { net: self.net, obs_norm, env: self.env })
    }

    fn figures(&self, out: &mut Losses, c: &mut Counters) {
        distribution::gaussian::read_log_std_figures(self.net.log_std(), out, c);
    }
}

/// One update: the epoch's shuffled batch, cut into minibatches.
pub struct CombinedPass<'a> {
    agent: &'a mut CombinedAgent,
    epochs: Epochs<'a>,
}

impl Pass for CombinedPass<'_> {
    fn epoch(&mut self, order: &mut [i64]) {
        self.epochs.shuffle(order, self.agent.net.device());
    }

    fn gradient(&mut self, step: MinibatchStep<'_, '_>) -> (Option<Vec<f64>>, Instant) {
        let MinibatchStep { m, last, ctx, prof, start: s, .. } = step;
        let mb = self.epochs.minibatch(m);
        let net = &mut self.agent.net;
        net.params.zero_grad();
        let features = net.features(&Inputs::of(&mb, net.encoder.index));
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
impl Actor<CombinedAgent> for Eager {
    fn act(&mut self, agent: &CombinedAgent, rollout: &mut Rollout, step: ActStep<'_>) -> Instant {
        let ActStep { t, heads, rng: _, counters: c, prof, start } = step;
        let (n, d, w) = (rollout.envs, rollout.obs_dim, rollout.bytes_width);
        tch::no_grad(|| {
            let net = &agent.net;
            // Each leaf in its own form: the floats side by side, each index leaf, the
            // images' bytes side by side (a quarter of what floats would move).
            let features = match d {
                0 => Tensor::zeros([n as i64, 0], (Kind::Float, net.device())),
                _ => self.mover.obs_to_device(&rollout.obs[t * n * d..(t + 1) * n * d], n, d, c),
            };
            let fields = rollout.index_step(t);
            let index: Vec<Tensor> = fields
                .iter()
                .enumerate()
                .map(|(k, (v, k_w))| self.mover.field_to_device(1 + k, v, n, *k_w, c))
                .collect();
            let bytes = (w > 0).then(|| {
                let at = 1 + fields.len();
                self.mover.field_to_device(at, &rollout.bytes[t * n * w..(t + 1) * n * w], n, w, c)
            });
            let s = prof.stop(Phase::OBS_TRANSFER, start);
            let encoded = net.features(&Inputs { features: &features, index: &index, bytes: bytes.as_ref() });
            let outputs = net.outputs(&encoded);
            let (actions, real, lp) = distribution::sample_outputs(&outputs, net.log_std(), heads);
            let values = net.value(&encoded);
            // In the batch's order: the features, each index leaf, the images' bytes.
            let inputs: Vec<&Tensor> = std::iter::once(&features).chain(&index).chain(bytes.as_ref()).collect();
            let step =
                OnDevice { inputs: &inputs, actions: &actions, real: real.as_ref(), log_probs: &lp, values: &values };
            rollout.record_on_device(t, step);
            let s = prof.stop(Phase::POLICY_FORWARD, s);
            rollout.step_mut(t).read_sampled(self, (&actions, real.as_ref()), c);
            prof.stop(Phase::ACTION_READBACK, s)
        })
    }

    fn values(&mut self, agent: &CombinedAgent, rows: ValueRows<'_>, c: &mut Counters) -> Vec<f32> {
        let net = &agent.net;
        let host = net.host_rows(rows.obs, rows.envs, rows.row);
        tch::no_grad(|| {
            let (features, index, bytes) = host.upload(&self.mover, c);
            let x = Inputs { features: &features, index: &index, bytes: bytes.as_ref() };
            let mut out = vec![0f32; host.rows];
            read_into(&net.value(&net.features(&x)), &mut out, c);
            out
        })
    }

    fn sync_weights(&mut self, _agent: &CombinedAgent) {}

    fn finish(&mut self, rollout: &mut Rollout, c: &mut Counters) -> Option<(Tensor, Tensor)> {
        device_outputs(rollout, c)
    }
}

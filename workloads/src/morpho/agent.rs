//! The agent: the MLP actor-critic over an env's features, its eight heads sampled under
//! the mask table (the op first, then the other heads under the op's row), its rollout
//! forward in libtorch ops, and PPO's gradient of it by autograd. Its cost is small beside
//! a host epoch; what this workload teaches is in the env's step.

use super::{Morpho, TrainedMorpho};
use hotlab_core::counters::Counters;
use hotlab_core::profile::Phase;
use hotlab_spec::RunSpec;
use hotlab_train::distribution;
use hotlab_train::exec::transfer::Eager;
use hotlab_train::models::mlp::actor::{eager_values, value_rows};
use hotlab_train::models::mlp::policy::ActorCritic;

use hotlab_train::ppo::loss::{loss_from, Forward};
use hotlab_train::ppo::{device_outputs, ActStep, Actor, Epochs, MinibatchStep, Pass, PpoPolicy, ValueRows};
use hotlab_train::precision::Precision;
use hotlab_train::rollout::{Batch, OnDevice, Rollout};
use hotlab_train::workload::TrainedPolicy;
use std::sync::Arc;
use std::time::Instant;
use tch::Tensor;

/// The network as PPO trains it, and the workload it plays.
pub struct MorphoAgent {
    pub net: ActorCritic,
    pub workload: Arc<Morpho>,
}

impl PpoPolicy for MorphoAgent {
    type Pass<'a> = MorphoPass<'a>;

    type Net = ActorCritic;

    fn net(&self) -> &ActorCritic {
        &self.net
    }

    fn begin<'a>(&'a mut self, batch: &'a Batch, spec: &RunSpec, _precision: &Precision) -> MorphoPass<'a> {
        // Checked when the run's spec was validated.
        let head_ent = self.workload.settings.head_entropy(spec.ppo.ent_coef).ok().flatten();
        MorphoPass { agent: self, epochs: Epochs::new(batch, spec), head_ent }
    }

    fn into_trained(self, _obs_norm: Option<hotlab_train::normalize::ObsNorm>) -> Box<dyn TrainedPolicy> {
        Box::new(TrainedMorpho { net: self.net, workload: self.workload })
    }
}

/// One update: the epoch's shuffled batch.
pub struct MorphoPass<'a> {
    agent: &'a mut MorphoAgent,
    epochs: Epochs<'a>,
    /// `--head-ent-coef`'s coefficient per head, where given.
    head_ent: Option<[f64; 8]>,
}

impl Pass for MorphoPass<'_> {
    fn epoch(&mut self, order: &mut [i64]) {
        self.epochs.shuffle(order, self.agent.net.device());
    }

    fn gradient(&mut self, step: MinibatchStep<'_, '_>) -> (Option<Vec<f64>>, Instant) {
        let MinibatchStep { m, last, ctx, prof, start: s, .. } = step;
        let mb = self.epochs.minibatch(m);
        let net = &mut self.agent.net;
        net.zero_grad();
        let (logits, value) = (net.logits(&mb.obs), net.value(&mb.obs));
        // The mask each action was drawn under: its op's row of the table.
        let mask = distribution::resolve_rows(&mb.extra[0].ne(0), &mb.actions.select(1, 0), ctx.heads);
        let head_ent = self.head_ent.as_ref().map(|c| &c[..]);
        let (loss, stats) = loss_from(
            Forward { logits: &logits, mask: Some(&mask), value: &value },
            &mb,
            ctx.heads,
            ctx.spec,
            last,
            head_ent,
        );
        hotlab_train::ppo::backward(&loss, stats, prof, s)
    }

    fn params(&mut self) -> (&mut Tensor, &mut Tensor) {
        let net = &mut self.agent.net;
        (&mut net.flat, &mut net.flat_grad)
    }
}

/// The rollout's forward in libtorch ops: features and mask table to the device
/// (`--transfer`), actions back (`--action-sync`: 8 heads × envs reads, or one).
impl Actor<MorphoAgent> for Eager {
    fn act(&mut self, agent: &MorphoAgent, rollout: &mut Rollout, step: ActStep<'_>) -> Instant {
        let ActStep { t, heads, rng: _, counters: c, prof, start } = step;
        let (envs, obs_dim) = (rollout.envs, rollout.obs_dim);
        tch::no_grad(|| {
            let net = &agent.net;
            let width = rollout.index[0].width;
            let (fields, slot) = rollout.index_and_slot(t);
            let obs = self.mover.obs_to_device(slot.obs, envs, obs_dim, c);
            let rows = self.mover.field_to_device(1, fields[0], envs, width, c);
            let s = prof.stop(Phase::OBS_TRANSFER, start);
            let logits = net.logits(&obs);
            let (actions, mask) = distribution::sample_by_rows(&logits, &rows.ne(0), heads);
            let (lp, _) = distribution::log_prob_and_entropy(&logits, Some(&mask), heads, &actions);
            let values = net.value(&obs);
            let step =
                OnDevice { inputs: &[&obs, &rows], actions: &actions, real: None, log_probs: &lp, values: &values };
            rollout.record_on_device(t, step);
            let s = prof.stop(Phase::POLICY_FORWARD, s);
            self.read_actions(&actions, rollout.step_mut(t).actions, c);
            prof.stop(Phase::ACTION_READBACK, s)
        })
    }

    fn values(&mut self, agent: &MorphoAgent, rows: ValueRows<'_>, c: &mut Counters) -> Vec<f32> {
        let (x, w) = value_rows(rows);
        eager_values(&agent.net, &self.mover, &x, w, c)
    }

    fn sync_weights(&mut self, _agent: &MorphoAgent) {}

    fn finish(&mut self, rollout: &mut Rollout, c: &mut Counters) -> Option<(Tensor, Tensor)> {
        device_outputs(rollout, c)
    }
}

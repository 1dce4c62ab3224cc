//! PPO's minibatch gradient for the MLP. On the CPU in fp32 the host path: the loss heads
//! on the host, the actor and the critic on two threads ([`super::grad_host`]); elsewhere
//! the hand-written gradient on libtorch ops ([`super::grad`]), in the update's precision.

use super::grad;
use super::grad_host::{self, actor_step, critic_step};
use super::policy::ActorCritic;
use super::policy::Mlp;
use super::{MlpAgent, TrainedMlp};
use crate::cuda::loss::PpoLossGrad;
use crate::distribution::gaussian;
use crate::exec::helper::Helper;
use crate::normalize::ObsNorm;
use crate::ppo::advantages;
use crate::ppo::update::UpdateCtx;
use crate::ppo::{DevicePass, MinibatchStep, Pass, PpoPolicy};
use crate::precision::Precision;
use crate::rollout::Batch;
use crate::workload::TrainedPolicy;
use hotlab_core::counters::Counters;
use hotlab_core::profile::Phase;
use hotlab_protocol::Losses;
use hotlab_spec::RunSpec;
use std::time::Instant;
use tch::{Kind, Tensor};

impl PpoPolicy for MlpAgent {
    type Pass<'a> = MlpPass<'a>;

    type Net = ActorCritic;

    fn net(&self) -> &ActorCritic {
        &self.net
    }

    fn begin<'a>(&'a mut self, batch: &'a Batch, spec: &RunSpec, precision: &Precision) -> MlpPass<'a> {
        let kind = precision.kind;
        // The CPU in fp32 takes the host path: host loss heads, actor ∥ critic.
        let host = self.net.device() == tch::Device::Cpu && kind == Kind::Float && precision.scaler.is_none();
        MlpPass {
            actor: self.net.network(false),
            critic: Some(self.net.network(true)),
            host_epoch: host.then(|| batch.empty_like()),
            shuffled: None,
            advantages: None,
            host,
            kind,
            minibatches: spec.ppo.minibatches,
            batch,
            agent: self,
        }
    }

    fn into_trained(self, obs_norm: Option<ObsNorm>) -> Box<dyn TrainedPolicy> {
        Box::new(TrainedMlp { net: self.net, obs_norm, env: self.env })
    }

    fn capturable(&self) -> bool {
        true
    }

    fn figures(&self, out: &mut Losses, c: &mut Counters) {
        gaussian::read_log_std_figures(self.net.log_std(), out, c);
    }
}

/// One update of the MLP: the epoch's shuffled batch and normalized advantages.
pub struct MlpPass<'a> {
    agent: &'a mut MlpAgent,
    batch: &'a Batch,
    host: bool,
    kind: Kind,
    minibatches: usize,
    actor: Mlp,
    /// On the helper thread during a minibatch, back here between them.
    critic: Option<Mlp>,
    /// Where the host path gathers each epoch's rows (allocated once per update).
    host_epoch: Option<Batch>,
    shuffled: Option<Batch>,
    advantages: Option<Tensor>,
}

impl Pass for MlpPass<'_> {
    fn epoch(&mut self, order: &mut [i64]) {
        // One gather per field per epoch; minibatches are then contiguous views.
        let shuffled = match &self.host_epoch {
            Some(out) if self.batch.select_host(order, out) => out.shallow_clone(),
            _ => self.batch.select(&Tensor::from_slice(order).to_device(self.agent.net.device())),
        };
        self.advantages = Some(match self.host {
            true => advantages::normalize_per_minibatch_host(&shuffled.advantages, self.minibatches),
            false => advantages::normalize_per_minibatch(&shuffled.advantages, self.minibatches as i64),
        });
        self.shuffled = Some(shuffled);
    }

    fn gradient(&mut self, step: MinibatchStep<'_, '_>) -> (Option<Vec<f64>>, Instant) {
        let MinibatchStep { m, last, ctx, prof, start: s, .. } = step;
        let spec = ctx.spec;
        let shuffled = self.shuffled.as_ref().expect("an epoch has begun");
        let mb_size = spec.minibatch_size() as i64;
        let m = m as i64;
        let mb = shuffled.rows(m * mb_size, mb_size);
        let adv = self.advantages.as_ref().expect("normalized above").narrow(0, m * mb_size, mb_size);
        if self.host {
            let critic = self.critic.take().expect("the critic is back after each minibatch");
            let helper = self.agent.helper.as_deref();
            let (stats, forward_share, critic) =
                host_minibatch(&self.actor, critic, &mb, &adv, ctx.heads, spec, helper);
            self.critic = Some(critic);
            let wall = s.elapsed().as_secs_f64();
            (last.then_some(stats), prof.stop_split(Phase::BACKWARD, Phase::UPDATE_FORWARD, wall * forward_share, s))
        } else {
            let net = &self.agent.net;
            let scale = ctx.precision.scaler.as_ref().map_or(1.0, |s| s.scale);
            let x = grad::LossBatch { mb: &mb, adv: &adv, heads: ctx.heads, spec };
            let grad = grad::loss_grad(net, x, self.kind, scale, last);
            let s = prof.stop(Phase::UPDATE_FORWARD, s);
            grad.backward(net, self.kind);
            let stats = grad.stats.map(|t| Vec::<f64>::try_from(t.to_kind(Kind::Double)).unwrap_or_default());
            (stats, prof.stop(Phase::BACKWARD, s))
        }
    }

    fn params(&mut self) -> (&mut Tensor, &mut Tensor) {
        let net = &mut self.agent.net;
        (&mut net.flat, &mut net.flat_grad)
    }

    fn on_device(&mut self) -> Option<&mut dyn DevicePass> {
        Some(self)
    }
}

impl DevicePass for MlpPass<'_> {
    fn epoch_on_device(&mut self, order: &Tensor) {
        let shuffled = self.batch.select(order);
        self.advantages = Some(advantages::normalize_per_minibatch(&shuffled.advantages, self.minibatches as i64));
        self.shuffled = Some(shuffled);
    }

    fn gradient_on_device(
        &mut self,
        m: usize,
        last: bool,
        ctx: &UpdateCtx<'_>,
        kernel: Option<&PpoLossGrad>,
    ) -> anyhow::Result<Option<Tensor>> {
        let shuffled = self.shuffled.as_ref().expect("an epoch has begun");
        let mb_size = ctx.spec.minibatch_size() as i64;
        let mb = shuffled.rows(m as i64 * mb_size, mb_size);
        let adv = self.advantages.as_ref().expect("normalized above").narrow(0, m as i64 * mb_size, mb_size);
        let net = &self.agent.net;
        let x = grad::LossBatch { mb: &mb, adv: &adv, heads: ctx.heads, spec: ctx.spec };
        let grad = match kernel {
            Some(k) => grad::loss_grad_fused(net, x, self.kind, last, k)?,
            None => grad::loss_grad(net, x, self.kind, 1.0, last),
        };
        grad.backward(net, self.kind);
        Ok(grad.stats)
    }
}

/// One minibatch on the host path: the actor's and the critic's forward, head gradient
/// and backward, the critic's on the helper thread when there is one; returns the loss
/// statistics, the share of the time that went to the forward, and the critic back.
fn host_minibatch(
    actor: &Mlp,
    critic: Mlp,
    mb: &Batch,
    adv: &Tensor,
    heads: &[usize],
    spec: &RunSpec,
    helper: Option<&Helper>,
) -> (Vec<f64>, f64, Mlp) {
    let (p, v) = grad_host::split_inputs(mb, adv, spec);
    let ((ps, at), (vs, ct), critic) = match helper {
        Some(helper) => {
            let pending = helper.spawn(move || {
                let r = critic_step(&critic, v);
                (r, critic)
            });
            let a = actor_step(actor, p, heads, spec);
            let (c, critic) = pending.wait();
            (a, c, critic)
        }
        None => {
            let c = critic_step(&critic, v);
            (actor_step(actor, p, heads, spec), c, critic)
        }
    };
    let rows = mb.obs.size()[0] as f64;
    let stats = vec![ps.pg_loss / rows, 0.5 * vs / rows, ps.entropy / rows, ps.approx_kl / rows, ps.clipped / rows];
    let forward = (at.forward + ct.forward).as_secs_f64();
    let total = forward + (at.backward + ct.backward).as_secs_f64();
    (stats, if total > 0.0 { forward / total } else { 0.5 }, critic)
}

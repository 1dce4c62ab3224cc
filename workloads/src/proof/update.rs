//! PPO's minibatch gradient for the embedding policy: on the CPU the native forward and
//! hand-written backward of [`ProofGrad`], elsewhere libtorch ops and autograd. The
//! embedding lookups are timed as their own phase.

use super::grad::{ProofGrad, ProofRows};
use super::policy::ProofNet;
use super::{ProofAgent, TrainedProof};
use hotlab_core::profile::Phase;
use hotlab_spec::RunSpec;
use hotlab_specs::proof::EMBEDDING_LOOKUP;
use hotlab_train::kernels;
use hotlab_train::ppo::loss::{loss_from, Forward};
use hotlab_train::ppo::{MinibatchStep, Pass, PpoPolicy};
use hotlab_train::precision::Precision;
use hotlab_train::rollout::Batch;
use hotlab_train::workload::TrainedPolicy;
use std::time::Instant;
use tch::Tensor;

impl PpoPolicy for ProofAgent {
    type Pass<'a> = ProofPass<'a>;

    type Net = ProofNet;

    fn net(&self) -> &ProofNet {
        &self.net
    }

    fn begin<'a>(&'a mut self, batch: &'a Batch, spec: &RunSpec, _precision: &Precision) -> ProofPass<'a> {
        let host = self.net.device() == tch::Device::Cpu && kernels::is_host_f32(&self.net.flat);
        let grad = host.then(|| ProofGrad::new(self.net.arch.clone(), &self.net.host_params()));
        ProofPass {
            agent: self,
            batch,
            grad,
            gathered: Gathered::default(),
            shuffled: None,
            mb_size: spec.minibatch_size(),
            minibatches: spec.ppo.minibatches,
        }
    }

    fn into_trained(self, _obs_norm: Option<hotlab_train::normalize::ObsNorm>) -> Box<dyn TrainedPolicy> {
        Box::new(TrainedProof { net: self.net, task: self.task })
    }
}

/// One update of the embedding policy.
pub struct ProofPass<'a> {
    agent: &'a mut ProofAgent,
    batch: &'a Batch,
    /// The host path's forward and backward (None off the CPU).
    grad: Option<ProofGrad>,
    /// The host path's per-row scalars for this epoch.
    gathered: Gathered,
    /// Off the host path, the epoch's shuffled batch.
    shuffled: Option<Batch>,
    mb_size: usize,
    minibatches: usize,
}

impl Pass for ProofPass<'_> {
    fn epoch(&mut self, order: &mut [i64]) {
        if self.grad.is_some() {
            // On the host the three index fields are read in place at each minibatch's
            // rows (they are most of the batch's bytes); only the per-row scalars are
            // gathered. A minibatch's rows in memory order: the same minibatch (the loss
            // is a mean over its rows), read with far fewer cache misses.
            order.chunks_mut(self.mb_size).for_each(|mb| mb.sort_unstable());
            self.gathered.fill(self.batch, order, self.minibatches);
        } else {
            self.shuffled = Some(self.batch.select(&Tensor::from_slice(order).to_device(self.agent.net.device())));
        }
    }

    fn gradient(&mut self, step: MinibatchStep<'_, '_>) -> (Option<Vec<f64>>, Instant) {
        let MinibatchStep { order, m, last, ctx, prof, start: s } = step;
        let spec = ctx.spec;
        let net = &mut self.agent.net;
        if let Some(pg) = &mut self.grad {
            let (batch, g) = (self.batch, &self.gathered);
            let rows = m * self.mb_size..(m + 1) * self.mb_size;
            // SAFETY: the batch's tensors and the weights are only read here, and the
            // flat gradient is written by `backward` alone.
            let (rows, flat, grad) = unsafe {
                let rows = ProofRows {
                    state: kernels::host_i64(&batch.obs),
                    succ: kernels::host_i64(&batch.extra[0]),
                    mask: kernels::host_i64(&batch.extra[1]),
                    index: &order[rows.clone()],
                    actions: &g.actions[rows.clone()],
                    old_log_probs: &g.log_probs[rows.clone()],
                    advantages: &g.advantages[rows.clone()],
                    returns: &g.returns[rows.clone()],
                    old_values: &g.values[rows],
                };
                (rows, kernels::host(&net.flat), kernels::host_mut(&net.flat_grad))
            };
            let (stats, lookup_s) = pg.forward(flat, rows, spec);
            let s = prof.stop_split(Phase::UPDATE_FORWARD, EMBEDDING_LOOKUP, lookup_s, s);
            pg.backward(flat, rows, grad);
            (last.then(|| stats.to_vec()), prof.stop(Phase::BACKWARD, s))
        } else {
            let (mb_size, m) = (self.mb_size as i64, m as i64);
            let mb = self.shuffled.as_ref().expect("an epoch has begun").rows(m * mb_size, mb_size);
            net.zero_grad();
            let out = net.forward(&mb.obs, &mb.extra[0]);
            let mask = mb.extra[1].ne(0);
            let (loss, stats) = loss_from(
                Forward { logits: &out.logits, mask: Some(&mask), value: &out.value },
                &mb,
                ctx.heads,
                spec,
                last,
                None,
            );
            let s = prof.stop_split(Phase::UPDATE_FORWARD, EMBEDDING_LOOKUP, out.lookup_s, s);
            hotlab_train::ppo::backward_after(&loss, stats, prof, s)
        }
    }

    fn params(&mut self) -> (&mut Tensor, &mut Tensor) {
        let net = &mut self.agent.net;
        (&mut net.flat, &mut net.flat_grad)
    }
}

/// An epoch's per-row scalars in shuffled order, advantages normalized per minibatch.
#[derive(Default)]
pub struct Gathered {
    actions: Vec<i64>,
    log_probs: Vec<f32>,
    values: Vec<f32>,
    returns: Vec<f32>,
    advantages: Vec<f32>,
}

impl Gathered {
    fn fill(&mut self, batch: &Batch, order: &[i64], minibatches: usize) {
        // SAFETY: the batch's host tensors are only read while the update runs.
        let (a, lp, v, r, adv) = unsafe {
            (
                kernels::host_i64(&batch.actions),
                kernels::host(&batch.log_probs),
                kernels::host(&batch.values),
                kernels::host(&batch.returns),
                kernels::host(&batch.advantages),
            )
        };
        let pick = |src: &[f32], dst: &mut Vec<f32>| {
            dst.clear();
            dst.extend(order.iter().map(|&i| src[i as usize]));
        };
        self.actions.clear();
        self.actions.extend(order.iter().map(|&i| a[i as usize]));
        pick(lp, &mut self.log_probs);
        pick(v, &mut self.values);
        pick(r, &mut self.returns);
        let mut raw = Vec::new();
        pick(adv, &mut raw);
        self.advantages.resize(raw.len(), 0.0);
        hotlab_train::ppo::advantages::normalize_blocks(&raw, minibatches, &mut self.advantages);
    }
}

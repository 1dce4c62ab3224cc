//! The recurrent policy as PPO trains it. While acting, each env's state is carried from
//! step to step, zeroed where its observation starts an episode, and kept as it was at the
//! rollout's start ([`Memory`]). While learning, a minibatch is whole envs: each env's
//! segment re-run from that state as `--rnn-update` says ([`super::core::Core::sequence`]
//! or [`super::core::Core::stepped`]),
//! so the first epoch's log-probs are the rollout's.

use super::core::State;
use super::{Input, RnnNet, TrainedRnn};
use crate::distribution;
use crate::exec::transfer::{read_into, Eager};
use crate::exec::EnvMaker;
use crate::normalize::ObsNorm;
use crate::ppo::loss::loss_of_heads;
use crate::ppo::{self, device_outputs, ActStep, Actor, MinibatchStep, Pass, PpoPolicy, ValueRows};
use crate::precision::Precision;
use crate::rollout::{Batch, Memory, OnDevice, Rollout};
use crate::workload::TrainedPolicy;
use hotlab_core::choices::RnnUpdate;
use hotlab_core::counters::Counters;
use hotlab_core::profile::Phase;
use hotlab_protocol::{Losses, PolicyMemory};
use hotlab_spec::RunSpec;
use std::sync::Arc;
use std::time::Instant;
use tch::Tensor;

/// The network and the envs it plays (for evaluation).
pub struct RnnAgent {
    pub net: RnnNet,
    pub env: Arc<dyn EnvMaker>,
}

impl PpoPolicy for RnnAgent {
    type Pass<'a> = RnnPass<'a>;
    type Net = RnnNet;

    fn net(&self) -> &RnnNet {
        &self.net
    }

    fn begin<'a>(&'a mut self, batch: &'a Batch, spec: &RunSpec, _precision: &Precision) -> RnnPass<'a> {
        let memory = batch.memory.as_ref().expect("a recurrent actor's rollout keeps its memory");
        let envs = memory.state[0].size()[0] as usize;
        let per_minibatch = envs / spec.ppo.minibatches;
        let stepped = spec.exec.rnn_update == RnnUpdate::Stepped;
        RnnPass { agent: self, batch, memory, envs, per_minibatch, stepped, order: Vec::new() }
    }

    fn into_trained(self, obs_norm: Option<ObsNorm>) -> Box<dyn TrainedPolicy> {
        Box::new(TrainedRnn { net: self.net, obs_norm, env: self.env })
    }

    fn figures(&self, out: &mut Losses, c: &mut Counters) {
        distribution::gaussian::read_log_std_figures(self.net.log_std(), out, c);
    }
}

/// One update: each epoch's order of envs, cut into minibatches of whole envs.
pub struct RnnPass<'a> {
    agent: &'a mut RnnAgent,
    batch: &'a Batch,
    memory: &'a Memory,
    envs: usize,
    per_minibatch: usize,
    /// `--rnn-update stepped`: the cell called once per step.
    stepped: bool,
    order: Vec<usize>,
}

/// A minibatch's forward: the actor's outputs and the values, `[T·M, …]` time first, the
/// minibatch's rows in the same order, and the core's calls and seconds.
pub struct Forward {
    pub outputs: Tensor,
    pub value: Tensor,
    pub mb: Batch,
    pub core_calls: usize,
    pub core_s: f64,
}

impl RnnPass<'_> {
    /// The network's forward over envs `envs`' whole segments, the core run as
    /// `--rnn-update` says.
    pub fn forward(&self, envs: &[usize]) -> Forward {
        let (n, m) = (self.envs, envs.len());
        let steps = self.memory.starts.len() / n;
        let net = &self.agent.net;
        let rows: Vec<i64> = (0..steps).flat_map(|t| envs.iter().map(move |&e| (t * n + e) as i64)).collect();
        let mb = self.batch.select(&Tensor::from_slice(&rows).to_device(net.device()));
        let starts: Vec<bool> = rows.iter().map(|&r| self.memory.starts[r as usize]).collect();
        let picked = Tensor::from_slice(&envs.iter().map(|&e| e as i64).collect::<Vec<_>>()).to_device(net.device());
        let state: State = self.memory.state.iter().map(|s| s.index_select(0, &picked)).collect();
        let features = net.encode(&mb.obs);
        let x = features.view([steps as i64, m as i64, features.size()[1]]);
        let core = Instant::now();
        let (h, core_calls) = match self.stepped {
            true => net.core.stepped(&net.params, &x, &state, &starts),
            false => net.core.sequence(&net.params, &x, &state, &starts),
        };
        let core_s = core.elapsed().as_secs_f64();
        let h = h.view([(steps * m) as i64, -1]);
        Forward { outputs: net.outputs(&h), value: net.value(&h), mb, core_calls, core_s }
    }
}

impl Pass for RnnPass<'_> {
    fn epoch(&mut self, order: &mut [i64]) {
        // The rows' shuffle read as a shuffle of envs: the envs in the order their first
        // rows come (uniform, as the rows' order is; the run's stream draws it as usual).
        let mut seen = vec![false; self.envs];
        self.order.clear();
        for &r in order.iter() {
            let e = r as usize % self.envs;
            if !std::mem::replace(&mut seen[e], true) {
                self.order.push(e);
            }
        }
    }

    fn gradient(&mut self, step: MinibatchStep<'_, '_>) -> (Option<Vec<f64>>, Instant) {
        let MinibatchStep { m, last, ctx, prof, start: s, .. } = step;
        let envs = self.order[m * self.per_minibatch..(m + 1) * self.per_minibatch].to_vec();
        self.agent.net.params.zero_grad();
        let f = self.forward(&envs);
        let net = &self.agent.net;
        let (loss, stats) = loss_of_heads(&f.outputs, net.log_std(), &f.value, &f.mb, ctx.heads, ctx.spec, last);
        // The forward's span less its core's, which is a phase of its own.
        let now = Instant::now();
        prof.record(Phase::UPDATE_FORWARD, s, ((now - s).as_secs_f64() - f.core_s).max(0.0));
        prof.add(Phase::UPDATE_CORE, f.core_s, f.core_calls as u64);
        ppo::backward_after(&loss, stats, prof, now)
    }

    fn params(&mut self) -> (&mut Tensor, &mut Tensor) {
        let p = &mut self.agent.net.params;
        (&mut p.flat, &mut p.grad)
    }
}

/// The rollout's forward in libtorch ops, carrying each env's state.
pub struct RnnActor {
    pub io: Eager,
    /// Each env's state after the last step taken (None before the first).
    state: Option<State>,
    /// The state at this rollout's start.
    start: Option<State>,
    /// Which envs' next observation starts an episode (all, before the first step).
    next_starts: Vec<bool>,
    /// This rollout's starts, `[T·N]`.
    starts: Vec<bool>,
    /// Whether a lab watches ([`Actor::watch`]): then env 0's state norm after each step
    /// of its episode is kept (on the device, read once a frame).
    watched: bool,
    env0: Vec<Tensor>,
}

/// Most steps of env 0's episode whose state norm a frame shows (the newest).
const SHOWN_STEPS: usize = 1000;

impl RnnActor {
    pub fn new(io: Eager) -> Self {
        Self {
            io,
            state: None,
            start: None,
            next_starts: Vec::new(),
            starts: Vec::new(),
            watched: false,
            env0: Vec::new(),
        }
    }

    /// `[rows, 1]`: 0 where a row starts an episode (its state is zeroed), 1 elsewhere; None
    /// when none does.
    fn keep(&self, starts: &[bool], c: &mut Counters) -> Option<Tensor> {
        starts.contains(&true).then(|| {
            let keep: Vec<f32> = starts.iter().map(|&s| if s { 0.0 } else { 1.0 }).collect();
            self.io.mover.upload_f32(&keep, &[keep.len() as i64, 1], c)
        })
    }
}

/// Which of step `t`'s envs ended their episode (their next observation starts one).
fn ended(rollout: &Rollout, t: usize) -> Vec<bool> {
    let row = t * rollout.envs..(t + 1) * rollout.envs;
    rollout.terminated[row.clone()].iter().zip(&rollout.truncated[row]).map(|(a, b)| *a || *b).collect()
}

impl Actor<RnnAgent> for RnnActor {
    fn act(&mut self, agent: &RnnAgent, rollout: &mut Rollout, step: ActStep<'_>) -> Instant {
        let ActStep { t, heads, rng: _, counters: c, prof, start } = step;
        let (envs, net) = (rollout.envs, &agent.net);
        if self.next_starts.len() != envs {
            self.next_starts = vec![true; envs];
        }
        self.starts.resize(rollout.steps * envs, false);
        let starts = if t == 0 { self.next_starts.clone() } else { ended(rollout, t - 1) };
        self.starts[t * envs..(t + 1) * envs].copy_from_slice(&starts);
        tch::no_grad(|| {
            let state = self.state.take().unwrap_or_else(|| net.zeros(envs));
            if t == 0 {
                self.start = Some(state.iter().map(Tensor::shallow_clone).collect());
            }
            let x = match net.shape.input {
                Input::Features(d) => self.io.mover.obs_to_device(rollout.step_mut(t).obs, envs, d, c),
                Input::Image(_) => {
                    let w = rollout.bytes_width;
                    self.io.mover.frames_to_device(0, &rollout.bytes[t * envs * w..(t + 1) * envs * w], envs, w, c)
                }
            };
            let s = prof.stop(Phase::OBS_TRANSFER, start);
            let keep = self.keep(&starts, c);
            let (h, next) = net.step(&net.encode(&x), &state, keep.as_ref());
            if self.watched {
                if starts[0] || self.env0.len() >= SHOWN_STEPS {
                    self.env0.clear();
                }
                let squares: Vec<Tensor> = next.iter().map(|s| s.get(0).square().sum(tch::Kind::Float)).collect();
                self.env0.push(Tensor::stack(&squares, 0).sum(tch::Kind::Float).sqrt());
            }
            self.state = Some(next);
            let outputs = net.outputs(&h);
            let (actions, real, lp) = distribution::sample_outputs(&outputs, net.log_std(), heads);
            let values = net.value(&h);
            let step =
                OnDevice { inputs: &[&x], actions: &actions, real: real.as_ref(), log_probs: &lp, values: &values };
            rollout.record_on_device(t, step);
            let s = prof.stop(Phase::POLICY_FORWARD, s);
            rollout.step_mut(t).read_sampled(&self.io, (&actions, real.as_ref()), c);
            prof.stop(Phase::ACTION_READBACK, s)
        })
    }

    /// A truncated episode's final observation is read from its env's state now (the
    /// episode goes on there); the bootstrap's next observations from the state the next
    /// rollout starts from, reset where they start an episode.
    fn values(&mut self, agent: &RnnAgent, rows: ValueRows<'_>, c: &mut Counters) -> Vec<f32> {
        let net = &agent.net;
        let n = rows.count();
        tch::no_grad(|| {
            let x = match &net.shape.input {
                Input::Features(_) => {
                    let (x, w) = crate::models::mlp::actor::value_rows(rows);
                    self.io.mover.upload_f32(&x, &[n as i64, w as i64], c)
                }
                Input::Image(_) => {
                    let (bytes, w) = rows.of(rows.obs.fields[0].as_bytes());
                    self.io.mover.upload_frames(bytes, &[n as i64, w as i64], c)
                }
            };
            let state = self.state.take().unwrap_or_else(|| net.zeros(rows.envs));
            let h = match rows.row {
                Some(e) => {
                    let own: State = state.iter().map(|s| s.narrow(0, e as i64, 1)).collect();
                    net.step(&net.encode(&x), &own, None).0
                }
                None => {
                    let keep = self.keep(&self.next_starts, c);
                    net.step(&net.encode(&x), &state, keep.as_ref()).0
                }
            };
            self.state = Some(state);
            let mut out = vec![0f32; n];
            read_into(&net.value(&h), &mut out, c);
            out
        })
    }

    fn sync_weights(&mut self, _agent: &RnnAgent) {}

    fn watch(&mut self, watched: bool) {
        self.watched = watched;
    }

    fn shown(&mut self, c: &mut Counters) -> Option<PolicyMemory> {
        if self.env0.is_empty() {
            return None;
        }
        let mut state_norm = vec![0f32; self.env0.len()];
        read_into(&Tensor::stack(&self.env0, 0), &mut state_norm, c);
        let cell = if self.state.as_ref().is_some_and(|s| s.len() == 2) { "lstm" } else { "gru" };
        Some(PolicyMemory { cell: cell.into(), state_norm })
    }

    fn finish(&mut self, rollout: &mut Rollout, c: &mut Counters) -> Option<(Tensor, Tensor)> {
        self.next_starts = ended(rollout, rollout.steps - 1);
        let state = self.start.take().expect("a rollout of at least one step");
        rollout.memory = Some(Memory { starts: self.starts.clone(), state });
        device_outputs(rollout, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::gaussian;
    use crate::exec::transfer::Mover;
    use crate::models::cnn::Compute;
    use crate::models::rnn::RnnShape;
    use crate::profiler::Profiler;
    use hotlab_core::choices::{ActionSync, Rnn, RolloutCopy, Transfer};
    use hotlab_env::cartpole::{CartPoleBatch, CartPoleF32};
    use hotlab_env::rng::HostRng;
    use hotlab_env::{BatchEnv, EnvSpec, FieldKind, FieldSpec, HeadSpec, ScalarEnv};
    use tch::{Device, Kind};

    /// The agent's envs (its evaluation's; the test plays none).
    struct Cart;

    impl EnvMaker for Cart {
        fn name(&self) -> &'static str {
            "cartpole"
        }
        fn vector_env(&self, count: usize, seed: u64, first: u64) -> Box<dyn BatchEnv> {
            Box::new(CartPoleBatch::new(count, seed, first))
        }
        fn scalar_env(&self, seed: u64, index: u64) -> Box<dyn ScalarEnv> {
            Box::new(CartPoleF32::new(seed, index))
        }
        fn worker_flags(&self) -> (Vec<String>, Option<String>) {
            (Vec::new(), None)
        }
    }

    /// The log-probs the update computes of a rollout's actions: each minibatch of whole
    /// envs re-run in the update's form.
    fn update_log_probs(pass: &RnnPass<'_>, envs: &[usize], heads: &[usize], gaussian_n: usize) -> (Tensor, Batch) {
        let Forward { outputs, mb, .. } = pass.forward(envs);
        let width: i64 = heads.iter().map(|&n| n as i64).sum();
        let mut lp = Tensor::zeros([outputs.size()[0]], (Kind::Float, Device::Cpu));
        if !heads.is_empty() {
            lp += distribution::log_prob_and_entropy(&outputs.narrow(1, 0, width), None, heads, &mb.actions).0;
        }
        if gaussian_n > 0 {
            let mean = outputs.narrow(1, width, gaussian_n as i64);
            lp += gaussian::log_prob(&mean, pass.agent.net.log_std().unwrap(), mb.real_actions.as_ref().unwrap());
        }
        (lp, mb)
    }

    /// Over many seeds and shapes (LSTM and GRU, categorical heads and a Gaussian one,
    /// episodes ending inside segments, two rollouts in a row so that the second starts from
    /// a carried state), in both of the update's forms (`--rnn-update sequence` and
    /// `stepped`): at the first epoch the update's log-probs of every minibatch of whole envs
    /// are the rollout's (ratio 1, to float rounding).
    #[test]
    fn the_update_re_runs_each_envs_segment_to_the_rollouts_log_probs() {
        let cases = [
            (Rnn::Lstm, 4, 3, vec![2usize], 0usize, 0.15),
            (Rnn::Gru, 4, 3, vec![2], 0, 0.15),
            (Rnn::Lstm, 16, 6, vec![3, 2], 0, 0.1),
            (Rnn::Gru, 9, 4, vec![], 2, 0.2),
            (Rnn::Lstm, 1, 2, vec![4], 1, 0.5),
            (Rnn::Gru, 32, 8, vec![5], 0, 0.03),
        ];
        for seed in 0..4u64 {
            for (cell, steps, envs, heads, gaussian_n, p_end) in cases.clone() {
                let _seeded = crate::testing::torch_seed(seed as i64);
                let d = 5;
                let spec = EnvSpec {
                    name: "test".into(),
                    fields: vec![FieldSpec::new("obs", vec![d], FieldKind::F32)],
                    heads: heads.iter().map(|&n| HeadSpec { name: "a".into(), n }).collect(),
                    masked: false,
                    continuous: gaussian_n,
                };
                let shape = RnnShape::of(&spec, &[8], cell, 7).unwrap();
                let mut net = RnnNet::new(shape, Device::Cpu, Compute::fp32_on(Device::Cpu)).unwrap();
                // Weights far from their near-uniform start, so that every output depends on
                // the state: a wrong state shows in the log-probs.
                tch::no_grad(|| {
                    let noise = net.params.flat.randn_like() * 0.5;
                    let _ = net.params.flat.f_add_(&noise);
                });
                let env: Arc<dyn EnvMaker> = Arc::new(Cart);
                let mut agent = RnnAgent { net, env };
                let mover = Mover::new(Transfer::Packed, Device::Cpu);
                let mut actor = RnnActor::new(Eager {
                    mover: Mover::new(Transfer::Packed, Device::Cpu),
                    sync: ActionSync::Stacked,
                });
                let mut rng = HostRng::new(seed);
                let (mut prof, mut c) = (Profiler::new(None), Counters::default());
                for round in 0..2 {
                    let mut rollout = Rollout::new(steps, envs, (d, 0), &[], (heads.len(), gaussian_n));
                    for t in 0..steps {
                        for v in &mut rollout.obs[t * envs * d..(t + 1) * envs * d] {
                            *v = rng.next_f64() as f32 * 2.0 - 1.0;
                        }
                        let start = prof.start();
                        let step =
                            ActStep { t, heads: &heads, rng: &mut rng, counters: &mut c, prof: &mut prof, start };
                        actor.act(&agent, &mut rollout, step);
                        for e in 0..envs {
                            rollout.terminated[t * envs + e] = rng.next_f64() < p_end;
                            rollout.truncated[t * envs + e] = rng.next_f64() < p_end / 2.0;
                        }
                    }
                    let on_device = actor.finish(&mut rollout, &mut c);
                    let zeros = vec![0f32; steps * envs];
                    let mut batch = rollout.to_batch(&zeros, &zeros, on_device, (&mover, RolloutCopy::Whole), &mut c);
                    batch.memory = rollout.memory.take();
                    let memory = batch.memory.as_ref().unwrap();
                    assert!(round == 0 || memory.state[0].abs().sum(Kind::Float).double_value(&[]) > 0.0);
                    let mut order: Vec<usize> = (0..envs).collect();
                    order.rotate_left(round + seed as usize % envs);
                    for stepped in [false, true] {
                        let pass = RnnPass {
                            agent: &mut agent,
                            batch: &batch,
                            memory,
                            envs,
                            per_minibatch: 1,
                            stepped,
                            order: Vec::new(),
                        };
                        for chunk in order.chunks(envs.div_ceil(2)) {
                            let (lp, mb) = update_log_probs(&pass, chunk, &heads, gaussian_n);
                            let diff = (lp - &mb.log_probs).abs().max().double_value(&[]);
                            let how = if stepped { "stepped" } else { "sequence" };
                            assert!(
                                diff < 1e-5,
                                "{cell} {how} seed {seed} {steps}×{envs} round {round}: log-probs differ by {diff}"
                            );
                        }
                    }
                }
            }
        }
    }
}

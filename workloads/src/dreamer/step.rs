//! One train step, top to bottom: sample a batch (`replay`), observe it with the world
//! model (`encoder`, `rssm`), score its reconstruction, reward and continuation
//! (`decoder`), step the world model (`world_backward`, `optimizer`), imagine from every
//! observed state and score the actor and critic (`imagine`), step them
//! (`actor_critic_backward`, `optimizer`), and keep the loss figures as `--loss-read`
//! says. [`Split`] keeps seed 004's coarse data / forward / backward timing. Under
//! `--precision fp16` each backward runs on the loss times a dynamic scale, and a step
//! whose gradients overflowed is skipped (the world model and the actor-critic each have
//! their own scaler, as each has its own optimizer), all on the device: no host read per
//! train step, as `--loss-read deferred` has none.

use super::behavior::Behavior;
use super::replay::{Batch, Replay};
use super::world::{State, WorldModel};
use hotlab_core::counters::Counters;
use hotlab_core::profile::Phase;
use hotlab_env::rng::HostRng;
use hotlab_specs::dreamer::LossRead;
use hotlab_specs::dreamer::{ACTOR_CRITIC_BACKWARD, DECODER, IMAGINE, REPLAY, WORLD_BACKWARD};
use hotlab_specs::DreamerSpec;
use hotlab_train::adam::FlatAdam;
use hotlab_train::ppo::update::clip_grad_norm;
use hotlab_train::precision::DeviceScaler;
use hotlab_train::profiler::Profiler;
use std::time::{Duration, Instant};
use tch::{Device, Kind, Tensor};

/// Train steps per `[PROFILE]` line (seed 004's window).
pub const PROFILE_WINDOW: u64 = 50;
/// Gradient-norm clips: DreamerV3's for the world model, and for the actor and critic.
const WORLD_CLIP: f64 = 1000.0;
const BEHAVIOR_CLIP: f64 = 100.0;
/// Loss figures kept per train step: the world model's four terms (image, reward,
/// continue, KL), the actor's loss, the critic's and the actor's entropy, then the constant
/// predictors' image, reward and continue losses on the same batches.
pub const FIGURES: usize = 10;
/// The figures' names in an iteration's [`Losses`](hotlab_protocol::Losses): the
/// world model's terms (each before its weight: pixel squared error summed over a frame,
/// reward squared error in symlog space, continuation cross-entropy, KL in nats before free
/// bits), the actor's and critic's losses and the actor's entropy, then the floors a model
/// that learned nothing reaches (`floor.*`: the best constant predictor on the same batch).
pub const TERMS: [&str; FIGURES] = [
    "world.image",
    "world.reward",
    "world.cont",
    "world.kl",
    "actor_loss",
    "critic_loss",
    "entropy",
    "floor.image",
    "floor.reward",
    "floor.cont",
];

/// Seed 004's coarse split: replay, forward passes, backward passes and optimizers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Split {
    pub data: Duration,
    pub fwd: Duration,
    pub bwd: Duration,
    pub steps: u64,
}

impl Split {
    pub fn total(&self) -> Duration {
        self.data + self.fwd + self.bwd
    }

    /// The three shares in percent.
    pub fn percent(&self) -> [f64; 3] {
        let total = self.total().as_secs_f64().max(1e-12);
        [self.data, self.fwd, self.bwd].map(|d| 100.0 * d.as_secs_f64() / total)
    }

    /// Seed 004's line, once a window is full (and a fresh window).
    pub fn line(&mut self) -> Option<String> {
        if self.steps < PROFILE_WINDOW {
            return None;
        }
        let [d, f, b] = self.percent();
        let line = format!(
            "[PROFILE] data: {d:.1}% | fwd: {f:.1}% | bwd: {b:.1}% | total: {:.2}s/{} steps",
            self.total().as_secs_f64(),
            self.steps
        );
        *self = Split::default();
        Some(line)
    }
}

/// The loss figures of several train steps: summed as tensors and read once
/// (`deferred`), or read after every step (`per_item`, a host sync per figure).
pub enum Tally {
    Deferred(Option<Tensor>),
    PerItem([f64; FIGURES]),
}

impl Tally {
    pub fn new(read: LossRead) -> Self {
        match read {
            LossRead::Deferred => Tally::Deferred(None),
            LossRead::PerItem => Tally::PerItem([0.0; FIGURES]),
        }
    }

    /// One step's figures, `[FIGURES]` on the device.
    pub fn add(&mut self, row: &Tensor, c: &mut Counters) {
        match self {
            Tally::Deferred(sum) => {
                *sum = Some(match sum.take() {
                    Some(s) => s + row,
                    // A copy: the captured step rewrites its row in place.
                    None => row.copy(),
                });
            }
            Tally::PerItem(sum) => {
                for (i, acc) in sum.iter_mut().enumerate() {
                    *acc += row.double_value(&[i as i64]);
                    c.host_syncs += 1;
                }
            }
        }
    }

    /// The sums (one read for `deferred`), None when no step was tallied.
    pub fn read(self, steps: u64, c: &mut Counters) -> Option<[f64; FIGURES]> {
        match self {
            Tally::Deferred(None) => None,
            Tally::Deferred(Some(sum)) => {
                c.host_syncs += 1;
                let host = Vec::<f64>::try_from(sum.to_kind(Kind::Double).to_device(Device::Cpu)).ok()?;
                <[f64; FIGURES]>::try_from(host).ok()
            }
            Tally::PerItem(sum) => (steps > 0).then_some(sum),
        }
    }
}

/// The networks, their optimizers and what a train step needs of the settings.
pub struct Trainer {
    pub settings: DreamerSpec,
    pub world: WorldModel,
    pub behavior: Behavior,
    /// The world model's, the actor's and the critic's optimizers.
    adam: [FlatAdam; 3],
    /// fp16's loss scalers: the world model's, then the actor-critic's.
    pub scalers: Option<[DeviceScaler; 2]>,
    pub split: Split,
}

/// `loss` times the scaler's scale (fp16), or itself.
fn scaled(loss: &Tensor, scaler: Option<&DeviceScaler>) -> Tensor {
    match scaler {
        Some(s) => s.scale(loss),
        None => loss.shallow_clone(),
    }
}

/// Clips each network's gradient and steps its optimizer: plainly, or under fp16 after
/// unscaling, weighted by whether every gradient was finite (a skipped step changes nothing).
/// `device_lr`: the rate as a `[1]` tensor, with Adam's step count on the device too (the
/// captured step: a replay is the next step); the fp16 step keeps its count there already.
fn clip_and_step(
    scaler: Option<&mut DeviceScaler>,
    nets: &mut [(&mut Tensor, &mut Tensor, &mut FlatAdam)],
    clip: f64,
    lr: f64,
    device_lr: Option<&Tensor>,
) {
    let keep = scaler.map(|s| {
        let mut grads: Vec<&mut Tensor> = nets.iter_mut().map(|(_, g, _)| &mut **g).collect();
        s.unscale(&mut grads)
    });
    for (flat, grad, adam) in nets.iter_mut() {
        clip_grad_norm(grad, clip);
        match (&keep, device_lr) {
            (Some(keep), _) => adam.step_masked(flat, grad, lr, keep),
            (None, Some(rate)) => adam.step_device(flat, grad, rate),
            (None, None) => adam.step(flat, grad, lr),
        }
    }
}

impl Trainer {
    /// `fp16_scale`: the first loss scale where the products compute in fp16 (the networks'
    /// kind), None otherwise.
    pub fn new(settings: DreamerSpec, world: WorldModel, behavior: Behavior, fp16_scale: Option<f64>) -> Self {
        let adam = [&world.p.flat, &behavior.actor.flat, &behavior.critic.flat].map(|p| FlatAdam::new(p, 1e-8));
        let device = world.p.flat.device();
        let scalers = fp16_scale.map(|s| [DeviceScaler::starting_at(s, device), DeviceScaler::starting_at(s, device)]);
        Self { settings, world, behavior, adam, scalers, split: Split::default() }
    }

    /// The world model's loss scale and the steps both scalers skipped (fp16 only; one
    /// host read each).
    pub fn scaling(&self, c: &mut Counters) -> (Option<f64>, u64) {
        match &self.scalers {
            Some([w, b]) => {
                c.host_syncs += 2;
                let ((scale, skipped), (_, more)) = (w.read(), b.read());
                (Some(scale), skipped + more)
            }
            None => (None, 0),
        }
    }

    /// The three networks' gradients as one vector (telemetry's view).
    pub fn grads(&self) -> Tensor {
        Tensor::cat(&[&self.world.p.grad, &self.behavior.actor.grad, &self.behavior.critic.grad], 0)
    }

    /// One train step on a batch from `replay`; its loss figures go to `tally`.
    pub fn step(
        &mut self,
        replay: &Replay,
        rng: &mut HostRng,
        prof: &mut Profiler,
        c: &mut Counters,
        tally: &mut Tally,
    ) {
        let d = &self.settings;
        let t0 = prof.start();
        let batch = replay.sample(d.batch, d.seq_len, rng, c);
        let t1 = prof.stop(REPLAY, t0);
        let (figures, [t2, t3, t4, t5]) = self.learn(&batch, None, prof);
        tally.add(&figures, c);
        let t6 = prof.stop(DECODER, t5);
        // Seed 004's split; reading the losses counts as forward, where its loop has it.
        self.split.data += t1 - t0;
        self.split.fwd += (t2 - t1) + (t4 - t3) + (t6 - t5);
        self.split.bwd += (t3 - t2) + (t5 - t4);
        self.split.steps += 1;
    }

    /// A train step after its sampling, on `batch`: the world model's loss, backward and
    /// step, the imagination, the actor's and the critic's losses, backward and steps. Only
    /// device work, no host read: the captured step records exactly this. `device_lrs`: the
    /// world model's and the actor-critic's learning rates as `[1]` tensors (the captured
    /// step's; None: the settings' numbers). Returns the step's figures (`[FIGURES]` f32)
    /// and the instants that end the world model's forward, its backward and step, the
    /// imagination and the actor-critic's backward and steps.
    pub fn learn(
        &mut self,
        batch: &Batch,
        device_lrs: Option<&[Tensor; 2]>,
        prof: &mut Profiler,
    ) -> (Tensor, [Instant; 4]) {
        let d = &self.settings;
        let seen = self.world.observe(batch, d.encoder, prof);
        let s = prof.start();
        let (loss, terms) = self.world.loss(batch, &seen);
        let t2 = prof.stop(DECODER, s);
        let [world_scaler, behavior_scaler] = match &mut self.scalers {
            Some([w, b]) => [Some(w), Some(b)],
            None => [None, None],
        };
        let [world_lr, behavior_lr] = device_lrs.map_or([None, None], |[w, b]| [Some(w), Some(b)]);
        self.world.p.zero_grad();
        scaled(&loss, world_scaler.as_deref()).backward();
        let s = prof.stop(WORLD_BACKWARD, t2);
        let [world_adam, actor_adam, critic_adam] = &mut self.adam;
        let world = &mut self.world.p;
        let nets = &mut [(&mut world.flat, &mut world.grad, world_adam)];
        clip_and_step(world_scaler, nets, WORLD_CLIP, d.wm_lr, world_lr);
        let t3 = prof.stop(Phase::OPTIMIZER, s);
        let feat = seen.feat.view([batch.b * batch.t, -1]);
        let (deter, stoch) = (self.world.dims.deter, self.world.dims.stoch());
        let start = State { deter: feat.narrow(-1, 0, deter), stoch: feat.narrow(-1, deter, stoch) };
        let dream = self.behavior.imagine(&self.world, &start, d.horizon);
        let ac = self.behavior.losses(&self.world, &dream);
        let t4 = prof.stop(IMAGINE, t3);
        self.behavior.actor.zero_grad();
        self.behavior.critic.zero_grad();
        scaled(&(&ac.actor + &ac.critic), behavior_scaler.as_deref()).backward();
        let s = prof.stop(ACTOR_CRITIC_BACKWARD, t4);
        let (actor, critic) = (&mut self.behavior.actor, &mut self.behavior.critic);
        let nets =
            &mut [(&mut actor.flat, &mut actor.grad, actor_adam), (&mut critic.flat, &mut critic.grad, critic_adam)];
        clip_and_step(behavior_scaler, nets, BEHAVIOR_CLIP, d.ac_lr, behavior_lr);
        let t5 = prof.stop(Phase::OPTIMIZER, s);
        let [image, reward, cont, kl] = terms.all();
        let [f_image, f_reward, f_cont] = &terms.floor;
        let (actor, critic) = (ac.actor.detach(), ac.critic.detach());
        let figures = [image, reward, cont, kl, &actor, &critic, &ac.entropy, f_image, f_reward, f_cont];
        let row = Tensor::stack(&figures.map(|f| f.to_kind(Kind::Float)), 0);
        (row, [t2, t3, t4, t5])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dreamer::world::Dims;

    /// A small trainer with fp16 products and `scale`, and a buffer of random episodes.
    fn fp16(scale: f64) -> (Trainer, Replay) {
        let settings = DreamerSpec { batch: 2, seq_len: 4, horizon: 3, ..DreamerSpec::default() };
        let dims = Dims::new(1);
        let world = WorldModel::new(dims, Device::Cpu, Kind::Half);
        let behavior = Behavior::new(&dims, Device::Cpu, Kind::Half);
        let replay = super::super::fill::filled(&settings, Device::Cpu);
        (Trainer::new(settings, world, behavior, Some(scale)), replay)
    }

    fn flats(t: &Trainer) -> [Tensor; 3] {
        [&t.world.p.flat, &t.behavior.actor.flat, &t.behavior.critic.flat].map(|f| f.copy())
    }

    fn step(t: &mut Trainer, replay: &Replay, c: &mut Counters) {
        let mut tally = Tally::new(LossRead::Deferred);
        t.step(replay, &mut HostRng::new(1), &mut Profiler::new(None), c, &mut tally);
    }

    /// fp16 (libtorch computes it on the CPU too, slowly): a scale that overflows the
    /// half-precision backward skips both optimizer steps, leaves every weight as it was and
    /// halves both scales, without a host read; a small scale steps every network.
    #[test]
    fn an_overflowing_fp16_step_is_skipped_and_a_sane_one_is_taken() {
        let _seeded = hotlab_train::testing::torch_seed(5);
        let (mut t, replay) = fp16(2f64.powi(100));
        let before = flats(&t);
        let mut c = Counters::default();
        step(&mut t, &replay, &mut c);
        for (a, b) in before.iter().zip(flats(&t)) {
            assert!(a.equal(&b), "a skipped step changed a weight");
        }
        assert_eq!(c.host_syncs, 0, "no host read in a train step");
        assert_eq!(t.scaling(&mut c), (Some(2f64.powi(99)), 2), "both scalers skipped and halved");

        let (mut t, replay) = fp16(1.0);
        let before = flats(&t);
        step(&mut t, &replay, &mut Counters::default());
        for (a, b) in before.iter().zip(flats(&t)) {
            assert!(!a.equal(&b), "a network was not stepped");
        }
        assert_eq!(t.scaling(&mut Counters::default()), (Some(1.0), 0));
    }
}

//! Frames predicted from the prior alone: the world model observes the first frames of
//! held-out random-action episodes, then imagines the next ones from the actions taken
//! (no frame seen), and each imagined frame is decoded and compared with the true one. The
//! baseline repeats the last frame seen, which a model that learned only to reconstruct
//! (an autoencoder whose dynamics are broken) does not beat.

use super::render::{draw_all, PIXELS};
use super::world::{State, WorldModel, ACTIONS};
use hotlab_env::cartpole::CartPoleBatch;
use hotlab_env::rng::HostRng;
use hotlab_env::{BatchEnv, Observations, StepBatch};
use serde::Serialize;
use tch::{Kind, Tensor};

/// Index of the env seeds these episodes draw from (apart from training's and the
/// evaluation's).
const OPEN_LOOP_INDEX: u64 = 1 << 41;

/// The prior's frames against repeating the last frame seen, over the same steps.
#[derive(Clone, Debug, Serialize)]
pub struct OpenLoop {
    /// Frames observed (the posterior), then steps imagined (the prior).
    pub context: usize,
    pub horizon: usize,
    /// Imagined steps compared (an episode that ends inside the window stops counting).
    pub steps: usize,
    /// Mean squared error per frame (summed over its pixels, in the encoder's −0.5..0.5
    /// scale, as the frame loss is) of the decoded prior, and of the last frame seen.
    pub model: f64,
    pub repeat_last: f64,
    /// The prior's frames imagined from the opposite actions (the other push each step):
    /// a model whose dynamics ignore the actions predicts as well with them.
    pub wrong_actions: f64,
    /// The same, for each imagined step (1 to `horizon` after the last frame seen).
    pub model_by_step: Vec<f64>,
    pub repeat_by_step: Vec<f64>,
}

/// One random-action episode start per env of `envs`: `context` frames observed, `horizon`
/// imagined.
pub fn open_loop(world: &WorldModel, envs: usize, context: usize, horizon: usize, seed: u64) -> OpenLoop {
    let Episodes { frames, actions, alive } = episodes(envs, context + horizon, seed);
    let device = world.p.flat.device();
    let n = envs as i64;
    let bytes = |t: usize| Tensor::from_slice(&frames[t]).view([n, PIXELS]).to_device(device);
    let frame = |t: usize| bytes(t).to_kind(Kind::Float) / 255.0 - 0.5;
    // The action taken before step t (none before the first), or the other one.
    let action = |t: usize, wrong: bool| -> Tensor {
        let a: Vec<i64> = (0..envs)
            .map(|e| {
                if t == 0 {
                    0
                } else if wrong {
                    ACTIONS - 1 - actions[t - 1][e]
                } else {
                    actions[t - 1][e]
                }
            })
            .collect();
        Tensor::from_slice(&a).to_device(device).one_hot(ACTIONS).to_kind(Kind::Float)
    };
    let onehot = |t: usize| action(t, false);
    tch::no_grad(|| {
        let mut state: State = world.initial(n, device);
        for t in 0..context {
            let first = Tensor::from_slice(&vec![if t == 0 { 1.0f32 } else { 0.0 }; envs]).to_device(device);
            state = world.observe_step(&state, &onehot(t), &world.encode(&bytes(t)), &first).0;
        }
        let last = frame(context - 1);
        let mut other = State { deter: state.deter.copy(), stoch: state.stoch.copy() };
        let (mut model, mut repeat, mut wrong, mut steps) = (0.0, 0.0, 0.0, 0usize);
        let (mut model_by_step, mut repeat_by_step) = (Vec::new(), Vec::new());
        for (t, running) in alive.iter().enumerate().skip(context) {
            let before = (model, repeat, steps);
            state = world.imagine(&state, &onehot(t));
            other = world.imagine(&other, &action(t, true));
            let truth = frame(t);
            let error = |x: &Tensor| {
                Vec::<f64>::try_from((x - &truth).square().sum_dim_intlist([-1].as_slice(), false, Kind::Double))
            };
            let (m, r) = (error(&world.decode(&state.feat())), error(&last));
            let w = error(&world.decode(&other.feat())).unwrap_or_default();
            let (m, r) = (m.unwrap_or_default(), r.unwrap_or_default());
            for (((m, r), w), _) in m.into_iter().zip(r).zip(w).zip(running).filter(|(_, &alive)| alive) {
                (model, repeat, wrong, steps) = (model + m, repeat + r, wrong + w, steps + 1);
            }
            let counted = (steps - before.2).max(1) as f64;
            model_by_step.push((model - before.0) / counted);
            repeat_by_step.push((repeat - before.1) / counted);
        }
        let per = |x: f64| x / steps.max(1) as f64;
        OpenLoop {
            context,
            horizon,
            steps,
            model: per(model),
            repeat_last: per(repeat),
            wrong_actions: per(wrong),
            model_by_step,
            repeat_by_step,
        }
    })
}

/// Random-action episodes, step by step: every env's frame, the actions taken, and whether
/// each env's episode is still its first one.
struct Episodes {
    frames: Vec<Vec<u8>>,
    actions: Vec<Vec<i64>>,
    alive: Vec<Vec<bool>>,
}

/// `steps` steps of `envs` random-action episodes.
fn episodes(envs: usize, steps: usize, seed: u64) -> Episodes {
    let mut env = CartPoleBatch::new(envs, seed, OPEN_LOOP_INDEX);
    let mut obs = Observations::zeros(env.spec(), envs);
    let _ = env.reset(&mut obs);
    let mut out = StepBatch::new(env.spec(), envs);
    let mut rng = HostRng::new(seed ^ 0x0be1);
    let (mut frames, mut actions, mut alive) = (Vec::new(), Vec::new(), Vec::new());
    let mut running = vec![true; envs];
    for _ in 0..steps {
        let mut drawn = Vec::new();
        draw_all(obs.fields[0].as_f32().unwrap_or_default(), &mut drawn);
        frames.push(drawn);
        alive.push(running.clone());
        let a: Vec<i64> = (0..envs).map(|_| (rng.next_u64() % ACTIONS as u64) as i64).collect();
        if env.step(&a, &mut out).is_err() {
            break;
        }
        for end in &out.episodes {
            running[end.env] = false;
        }
        actions.push(a);
        std::mem::swap(&mut obs, &mut out.obs);
    }
    Episodes { frames, actions, alive }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dreamer::world::Dims;
    use tch::Device;

    /// An untrained model is compared over every step of episodes that last the window, and
    /// an episode that ends inside it stops counting there.
    #[test]
    fn the_window_counts_the_steps_of_running_episodes_only() {
        // The prior samples from libtorch's generator, which other tests seed and hold.
        let _seeded = hotlab_train::testing::torch_seed(5);
        let world = WorldModel::new(Dims::new(1), Device::Cpu, Kind::Float);
        let o = open_loop(&world, 16, 3, 40, 5);
        // CartPole's random episodes last 8 steps or more, rarely 43.
        assert!(o.steps > 16 * 5 && o.steps < 16 * 40, "{o:?}");
        assert!(o.model.is_finite() && o.repeat_last > 0.0, "{o:?}");
        let Episodes { frames, alive, .. } = episodes(4, 60, 5);
        assert_eq!((frames.len(), alive.len()), (60, 60));
        for e in 0..4 {
            let ended = alive.iter().position(|a| !a[e]).expect("a random episode ends within 60 steps");
            assert!(alive[ended..].iter().all(|a| !a[e]), "env {e} stays ended");
        }
    }
}

//! A trained dreamer against random actions on pixel CartPole: the same env seeds for
//! both (a paired comparison), one episode per env, up to CartPole-v1's 500 steps. The
//! actor sees only frames, through the world model's posterior state.

use super::behavior::Behavior;
use super::collect::act_on_frames;
use super::open_loop::{open_loop, OpenLoop};
use super::render::draw_all;
use super::world::{WorldModel, ACTIONS};
use hotlab_env::cartpole::CartPoleBatch;
use hotlab_env::rng::HostRng;
use hotlab_env::{BatchEnv, Observations, StepBatch};
use serde::Serialize;

/// Index of the env seeds evaluation draws from (apart from any training env's).
const EVAL_INDEX: u64 = 1 << 40;

#[derive(Clone, Debug, Serialize)]
pub struct DreamerEval {
    pub episodes: usize,
    /// Mean return of the trained actor (sampling its policy), and of random actions.
    pub agent_return: f64,
    pub random_return: f64,
    /// The world model's frames imagined from the prior against repeating the last frame.
    pub open_loop: OpenLoop,
}

/// Held-out sequences of the open-loop check, frames observed in each, steps imagined.
const OPEN_LOOP: (usize, usize, usize) = (32, 5, 15);

impl DreamerEval {
    pub fn summary(&self) -> String {
        let o = &self.open_loop;
        format!(
            "pixel CartPole over {} episodes: mean return {:.1} (random actions: {:.1}); frames imagined up to {} steps after {} seen: error {:.1} per frame (repeating the last frame seen: {:.1})",
            self.episodes, self.agent_return, self.random_return, o.horizon, o.context, o.model, o.repeat_last
        )
    }
}

/// Chooses every env's action from their frames and whether each frame starts its episode.
type Chooser<'a> = dyn FnMut(&[u8], &[bool]) -> Vec<i64> + 'a;

/// One episode per env of `episodes` envs; `act` chooses every running env's action from
/// their frames and whether each frame starts its episode.
fn mean_return(episodes: usize, seed: u64, act: &mut Chooser<'_>) -> f64 {
    let mut env = CartPoleBatch::new(episodes, seed, EVAL_INDEX);
    let mut obs = Observations::zeros(env.spec(), episodes);
    let _ = env.reset(&mut obs);
    let mut out = StepBatch::new(env.spec(), episodes);
    let (mut returns, mut done) = (vec![0.0; episodes], vec![false; episodes]);
    let mut first = vec![true; episodes];
    let mut frames = Vec::new();
    while done.iter().any(|d| !d) {
        draw_all(obs.fields[0].as_f32().unwrap_or_default(), &mut frames);
        let actions = act(&frames, &first);
        if env.step(&actions, &mut out).is_err() {
            break;
        }
        first.iter_mut().for_each(|f| *f = false);
        for e in (0..episodes).filter(|&e| !done[e]) {
            returns[e] += out.reward[e] as f64;
        }
        for end in &out.episodes {
            done[end.env] = true;
            first[end.env] = true;
        }
        std::mem::swap(&mut obs, &mut out.obs);
    }
    returns.iter().sum::<f64>() / episodes.max(1) as f64
}

/// The actor and random actions over `episodes` episodes from `seed`.
pub fn evaluate(world: &WorldModel, behavior: &Behavior, episodes: usize, seed: u64) -> DreamerEval {
    let device = world.p.flat.device();
    let n = episodes as i64;
    let mut state = world.initial(n, device);
    let mut prev = vec![0i64; episodes];
    let mut agent = |frames: &[u8], first: &[bool]| {
        let (next, actions) = act_on_frames(world, behavior, &state, frames, first, &prev);
        state = next;
        prev.clone_from(&actions);
        actions
    };
    let agent_return = mean_return(episodes, seed, &mut agent);
    let mut rng = HostRng::new(seed ^ 0x5eed);
    let mut random =
        |_: &[u8], first: &[bool]| first.iter().map(|_| (rng.next_u64() % ACTIONS as u64) as i64).collect();
    let random_return = mean_return(episodes, seed, &mut random);
    let (sequences, context, horizon) = OPEN_LOOP;
    let open_loop = open_loop(world, sequences, context, horizon, seed);
    DreamerEval { episodes, agent_return, random_return, open_loop }
}

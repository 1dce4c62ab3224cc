//! A replay buffer filled with random CartPole episodes, drawn as the dreamer sees them:
//! what the batch bench and the captured train step's checks train on, with no run.

use super::render::{draw_all, PIXELS};
use super::replay::{Replay, Step};
use super::world::ACTIONS;
use hotlab_core::counters::Counters;
use hotlab_env::cartpole::CartPoleBatch;
use hotlab_env::rng::HostRng;
use hotlab_env::{BatchEnv, Observations, StepBatch};
use hotlab_specs::DreamerSpec;
use tch::Device;

/// Envs whose random episodes fill the buffer.
const FILL_ENVS: usize = 8;

/// A replay buffer of random CartPole episodes, drawn, enough for `seq_len` sequences.
pub fn filled(settings: &DreamerSpec, device: Device) -> Replay {
    let steps = (4 * settings.seq_len).max(64);
    let mut replay = Replay::new(settings.replay, steps * FILL_ENVS, FILL_ENVS, device);
    let mut env = CartPoleBatch::new(FILL_ENVS, 1, 0);
    let mut obs = Observations::zeros(env.spec(), FILL_ENVS);
    let _ = env.reset(&mut obs);
    let mut out = StepBatch::new(env.spec(), FILL_ENVS);
    let (mut rng, mut c, mut frames) = (HostRng::new(7), Counters::default(), Vec::new());
    let envs: Vec<usize> = (0..FILL_ENVS).collect();
    let mut actions = vec![0i64; FILL_ENVS];
    for k in 0..steps {
        draw_all(obs.fields[0].as_f32().unwrap_or_default(), &mut frames);
        let px = PIXELS as usize;
        let batch: Vec<Step> = envs
            .iter()
            .map(|&e| Step {
                frame: &frames[e * px..(e + 1) * px],
                prev_action: actions[e],
                reward: 1.0,
                cont: true,
                first: k == 0,
            })
            .collect();
        replay.push(&envs, &batch, &mut c);
        actions = (0..FILL_ENVS).map(|_| (rng.next_u64() % ACTIONS as u64) as i64).collect();
        let _ = env.step(&actions, &mut out);
        std::mem::swap(&mut obs, &mut out.obs);
    }
    replay
}

//! The playground on the CPU: `hotlab_env`'s f32 batch env (the worker's own env)
//! with the policy evaluated per env, in wasm when the browser has no WebGPU.
//!
//! A trained actor at 2^20 envs costs seconds per batch step in wasm, so the work is
//! resumable: [`CpuCartPole::run`] stops when its caller's clock says so, between envs
//! of the policy pass or between steps, and the next call carries on where it stopped.

use crate::actor::{choose, Policy};
use crate::{action_rng, Setup, Tally};
use hotlab_env::cartpole::CartPoleBatch;
use hotlab_env::rng::EnvRng;
use hotlab_env::{BatchEnv, Observations, StepBatch};

/// Envs of the policy pass between two looks at the clock.
const CHUNK: usize = 1024;

pub struct CpuCartPole {
    env: CartPoleBatch,
    out: StepBatch,
    policy: Policy,
    action_rngs: Vec<EnvRng>,
    actions: Vec<i64>,
    /// Envs whose action for the next step is already chosen.
    chosen: usize,
}

impl CpuCartPole {
    pub fn new(setup: &Setup) -> Result<Self, String> {
        setup.check()?;
        let n = setup.envs;
        let mut env = CartPoleBatch::new(n, setup.seed, 0);
        let spec = env.spec().clone();
        env.reset(&mut Observations::zeros(&spec, n)).map_err(|e| e.0)?;
        Ok(Self {
            env,
            out: StepBatch::new(&spec, n),
            policy: setup.policy.clone(),
            action_rngs: (0..n as u64).map(|i| action_rng(setup.seed, i)).collect(),
            actions: vec![0; n],
            chosen: 0,
        })
    }

    pub fn envs(&self) -> usize {
        self.env.num_envs()
    }

    /// Takes up to `max_steps` batch steps; stops early once `out_of_time()` is true
    /// (asked after every chunk of the policy pass and after every step). The tally
    /// counts the steps completed.
    pub fn run(&mut self, max_steps: u32, out_of_time: &mut dyn FnMut() -> bool) -> Tally {
        let n = self.envs();
        let mut tally = Tally::default();
        for _ in 0..max_steps {
            while self.chosen < n {
                let end = (self.chosen + CHUNK).min(n);
                for i in self.chosen..end {
                    self.actions[i] = choose(&self.policy, self.env.state(i), &mut self.action_rngs[i]);
                }
                self.chosen = end;
                if self.chosen < n && out_of_time() {
                    return tally;
                }
            }
            self.env.step(&self.actions, &mut self.out).expect("one action per env");
            self.chosen = 0;
            tally.steps += n as u64;
            tally.episodes += self.out.episodes.len() as u64;
            tally.length_sum += self.out.episodes.iter().map(|e| e.length as u64).sum::<u64>();
            if out_of_time() {
                break;
            }
        }
        tally
    }

    /// The states of the first `count` envs (for drawing).
    pub fn sample(&self, count: usize) -> Vec<[f32; 4]> {
        (0..count.min(self.envs())).map(|i| self.env.state(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_episodes_last_about_22_steps_and_interrupted_work_resumes() {
        let setup = Setup { envs: 3000, seed: 4, policy: Policy::Random };
        let mut whole = CpuCartPole::new(&setup).unwrap();
        let t = whole.run(200, &mut || false);
        assert_eq!(t.steps, 600_000);
        let mean = t.mean_length().unwrap();
        assert!((19.0..26.0).contains(&mean), "mean random episode length {mean}");

        // Stopping after every chunk changes nothing but the number of calls.
        let mut pieces = CpuCartPole::new(&setup).unwrap();
        let mut sum = Tally::default();
        let mut calls = 0;
        while sum.steps < 600_000 {
            let mut first = true;
            sum.add(pieces.run(1, &mut || std::mem::replace(&mut first, false)));
            calls += 1;
        }
        assert!(calls > 200, "{calls}");
        assert_eq!(sum, t);
        assert_eq!(pieces.sample(5), whole.sample(5));
    }
}

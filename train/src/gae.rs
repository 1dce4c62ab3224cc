//! Generalized advantage estimation over a rollout, aware of truncation.
//!
//! Step `t` of env `e` ended its episode when `terminated` or `truncated`. A terminated
//! step bootstraps from nothing; a truncated one from the value of its final observation
//! (`final_values`), because the episode was cut, not finished; any other step from the
//! next state's value. The advantage recursion never crosses an episode boundary.
//!
//! Three forms of one recursion: [`gae`] on host slices, [`gae_tensors`] as tensor ops
//! on the rollout's device, and the CUDA kernel `gae` in `cuda/gae.cu`.

use tch::Tensor;

/// A rollout laid out `[T, N]`, time first.
pub struct GaeInput<'a> {
    pub envs: usize,
    pub rewards: &'a [f32],
    pub values: &'a [f32],
    pub terminated: &'a [bool],
    pub truncated: &'a [bool],
    /// Value of the final observation where `truncated`, unused elsewhere.
    pub final_values: &'a [f32],
    /// Value of the observation after the last step, per env.
    pub next_values: &'a [f32],
}

/// Returns `(advantages, returns)`, each `[T, N]`; `returns = advantages + values`.
#[allow(clippy::needless_range_loop)] // one index `t·N + e` into six parallel arrays reads best
pub fn gae(input: &GaeInput<'_>, gamma: f32, lambda: f32) -> (Vec<f32>, Vec<f32>) {
    let n = input.envs;
    let len = input.rewards.len();
    let steps = len / n;
    let mut adv = vec![0f32; len];
    let mut next_adv = vec![0f32; n];
    for t in (0..steps).rev() {
        for e in 0..n {
            let i = t * n + e;
            let ended = input.terminated[i] || input.truncated[i];
            let next_value = if input.terminated[i] {
                0.0
            } else if input.truncated[i] {
                input.final_values[i]
            } else if t + 1 == steps {
                input.next_values[e]
            } else {
                input.values[i + n]
            };
            let delta = input.rewards[i] + gamma * next_value - input.values[i];
            let carry = if ended { 0.0 } else { gamma * lambda * next_adv[e] };
            adv[i] = delta + carry;
            next_adv[e] = adv[i];
        }
    }
    let returns = adv.iter().zip(input.values).map(|(a, v)| a + v).collect();
    (adv, returns)
}

/// The rollout's `[T, N]` f32 tensors [`gae_tensors`] reads, on any device.
pub struct GaeTensors<'a> {
    pub rewards: &'a Tensor,
    pub values: &'a Tensor,
    /// 1 where the step terminated, else 0.
    pub terminated: &'a Tensor,
    /// 1 where the step was truncated, else 0.
    pub truncated: &'a Tensor,
    /// `[T, N]`: the value of each step's final observation.
    pub final_values: &'a Tensor,
    /// `[N]`: the value of the observation after the last step.
    pub next_values: &'a Tensor,
}

/// [`gae`] as tensor ops where the rollout lives (the `device` backend without the CUDA
/// kernel: the CPU, ROCm), with no read to the host: one step of the recursion per time
/// step, each op the host loop's in its order, so the results are the host's.
pub fn gae_tensors(x: &GaeTensors<'_>, gamma: f32, lambda: f32) -> (Tensor, Tensor) {
    let steps = x.rewards.size()[0];
    let advantages = x.rewards.zeros_like();
    let zero = x.next_values.zeros_like();
    let mut next_adv = zero.shallow_clone();
    for t in (0..steps).rev() {
        let term = x.terminated.get(t).ne(0.0);
        let trunc = x.truncated.get(t).ne(0.0);
        let after = if t + 1 == steps { x.next_values.shallow_clone() } else { x.values.get(t + 1) };
        let next_value = zero.where_self(&term, &x.final_values.get(t).where_self(&trunc, &after));
        let delta = (x.rewards.get(t) + next_value * gamma as f64) - x.values.get(t);
        // `gamma * lambda * next` on the host: the product of the two f32s first.
        let carry = zero.where_self(&term.logical_or(&trunc), &(&next_adv * (gamma * lambda) as f64));
        let adv = delta + carry;
        advantages.get(t).copy_(&adv);
        next_adv = adv;
    }
    let returns = &advantages + x.values;
    (advantages, returns)
}

/// A made-up rollout `[steps, envs]` with terminations and truncations, drawn from `rng`:
/// what the forms of GAE are checked on against each other (tests, `gpu-check`).
pub struct RandomRollout {
    pub steps: usize,
    pub envs: usize,
    pub rewards: Vec<f32>,
    pub values: Vec<f32>,
    pub terminated: Vec<bool>,
    pub truncated: Vec<bool>,
    pub final_values: Vec<f32>,
    pub next_values: Vec<f32>,
}

impl RandomRollout {
    pub fn draw(rng: &mut hotlab_env::rng::HostRng, steps: usize, envs: usize) -> Self {
        let len = steps * envs;
        let mut draw = |n: usize, scale: f32| -> Vec<f32> { (0..n).map(|_| (rng.next_f32() - 0.5) * scale).collect() };
        let (rewards, values, final_values, ends) = (draw(len, 2.0), draw(len, 10.0), draw(len, 10.0), draw(len, 1.0));
        let next_values = draw(envs, 10.0);
        let terminated = ends.iter().map(|&u| u > 0.4).collect();
        let truncated = ends.iter().map(|&u| u < -0.45).collect();
        Self { steps, envs, rewards, values, terminated, truncated, final_values, next_values }
    }

    /// The host form's input.
    pub fn input(&self) -> GaeInput<'_> {
        GaeInput {
            envs: self.envs,
            rewards: &self.rewards,
            values: &self.values,
            terminated: &self.terminated,
            truncated: &self.truncated,
            final_values: &self.final_values,
            next_values: &self.next_values,
        }
    }

    /// The tensors' form's input on `device`, owned: `[rewards, values, terminated,
    /// truncated, final_values, next_values]` (see [`GaeTensors`]).
    pub fn tensors(&self, device: tch::Device) -> [Tensor; 6] {
        let shape = [self.steps as i64, self.envs as i64];
        let t = |v: &[f32]| Tensor::from_slice(v).view(shape).to_device(device);
        let flag = |v: &[bool]| t(&v.iter().map(|&b| b as u8 as f32).collect::<Vec<_>>());
        let next = Tensor::from_slice(&self.next_values).to_device(device);
        [t(&self.rewards), t(&self.values), flag(&self.terminated), flag(&self.truncated), t(&self.final_values), next]
    }
}

impl<'a> GaeTensors<'a> {
    /// Borrows [`RandomRollout::tensors`]' six tensors.
    pub fn of(t: &'a [Tensor; 6]) -> Self {
        GaeTensors {
            rewards: &t[0],
            values: &t[1],
            terminated: &t[2],
            truncated: &t[3],
            final_values: &t[4],
            next_values: &t[5],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_env::rng::HostRng;

    #[test]
    fn the_tensor_form_equals_the_host_loop_over_seeds_and_shapes() {
        for seed in 1..=12u64 {
            let mut rng = HostRng::new(seed);
            let (steps, envs) = (1 + rng.below(24) as usize, 1 + rng.below(40) as usize);
            let r = RandomRollout::draw(&mut rng, steps, envs);
            let (gamma, lambda) = (0.99f32 - seed as f32 * 0.01, 0.95f32);
            let (adv, ret) = gae(&r.input(), gamma, lambda);
            let (a, b) = gae_tensors(&GaeTensors::of(&r.tensors(tch::Device::Cpu)), gamma, lambda);
            let got = |x: Tensor| Vec::<f32>::try_from(x.view([-1])).unwrap();
            assert_eq!(got(a), adv, "advantages, seed {seed}, {steps} steps × {envs} envs");
            assert_eq!(got(b), ret, "returns, seed {seed}, {steps} steps × {envs} envs");
        }
    }

    #[test]
    fn matches_a_hand_computed_example_with_boundaries_and_truncation() {
        // One env, 4 steps, γ = 0.5, λ = 0.5:
        //   t0: r=1, v=1; t1: r=1, v=2, terminated; t2: r=1, v=3, truncated (final value 4);
        //   t3: r=1, v=1; after the rollout, next value 2.
        let input = GaeInput {
            envs: 1,
            rewards: &[1.0, 1.0, 1.0, 1.0],
            values: &[1.0, 2.0, 3.0, 1.0],
            terminated: &[false, true, false, false],
            truncated: &[false, false, true, false],
            final_values: &[0.0, 0.0, 4.0, 0.0],
            next_values: &[2.0],
        };
        let (adv, ret) = gae(&input, 0.5, 0.5);
        // t3: δ = 1 + 0.5·2 − 1 = 1;               A3 = 1
        // t2: δ = 1 + 0.5·4 − 3 = 0 (truncated);    A2 = 0 (no carry)
        // t1: δ = 1 + 0 − 2 = −1 (terminated);      A1 = −1
        // t0: δ = 1 + 0.5·2 − 1 = 1;                A0 = 1 + 0.25·(−1) = 0.75
        assert_eq!(adv, vec![0.75, -1.0, 0.0, 1.0]);
        assert_eq!(ret, vec![1.75, 1.0, 3.0, 2.0]);
    }

    #[test]
    fn envs_are_independent_and_match_cleanrl_without_boundaries() {
        // Two envs interleaved [T, N]; env 1 never ends: plain GAE with bootstrap.
        let input = GaeInput {
            envs: 2,
            rewards: &[0.0, 1.0, 0.0, 1.0],
            values: &[0.0, 0.5, 0.0, 0.5],
            terminated: &[false, false, true, false],
            truncated: &[false; 4],
            final_values: &[0.0; 4],
            next_values: &[9.0, 1.0],
        };
        let (adv, _) = gae(&input, 0.9, 0.8);
        let d1 = 1.0 + 0.9 * 1.0 - 0.5; // env 1, t1
        let d0 = 1.0 + 0.9 * 0.5 - 0.5; // env 1, t0
        assert!((adv[3] - d1).abs() < 1e-6);
        assert!((adv[1] - (d0 + 0.9 * 0.8 * d1)).abs() < 1e-6);
        assert_eq!(adv[2], 0.0); // env 0 terminated at t1: r=0, no bootstrap, v=0
    }
}

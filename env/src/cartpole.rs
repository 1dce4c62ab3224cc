//! CartPole-v1 exactly as Gymnasium 1.x defines it.
//!
//! Constants, Euler integration, termination at |x| > 2.4 or |θ| > 12°, truncation at
//! 500 steps, reward 1 per step (the terminating step included), reset uniform in ±0.05.
//! [`CartPole`] is the scalar reference in f64 (tested transition for transition against
//! Gymnasium); [`CartPoleBatch`] is the f32 struct-of-arrays batch used for speed.

use crate::rng::EnvRng;
use crate::{
    BatchEnv, EnvError, EnvSpec, EpisodeEnd, FieldData, FieldKind, FieldSpec, HeadSpec, Observations, ScalarEnv,
    StepBatch,
};

pub const GRAVITY: f64 = 9.8;
pub const MASS_CART: f64 = 1.0;
pub const MASS_POLE: f64 = 0.1;
pub const TOTAL_MASS: f64 = MASS_POLE + MASS_CART;
/// Half the pole's length.
pub const LENGTH: f64 = 0.5;
pub const POLE_MASS_LENGTH: f64 = MASS_POLE * LENGTH;
pub const FORCE_MAG: f64 = 10.0;
/// Seconds between state updates.
pub const TAU: f64 = 0.02;
pub const THETA_THRESHOLD: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
pub const X_THRESHOLD: f64 = 2.4;
/// Gymnasium's `max_episode_steps` for CartPole-v1.
pub const MAX_STEPS: u32 = 500;
/// Reset draws every state component uniformly from ±this.
pub const RESET_BOUND: f64 = 0.05;

/// The observation and action layout of CartPole: one field of 4 reals, one head of 2.
pub fn spec() -> EnvSpec {
    EnvSpec {
        name: "cartpole".into(),
        fields: vec![FieldSpec::new("state", vec![4], FieldKind::F32)],
        heads: vec![HeadSpec { name: "push".into(), n: 2 }],
        masked: false,
        continuous: 0,
    }
}

/// One Euler step of the dynamics in f64: `[x, x_dot, theta, theta_dot]` → next state.
/// Action 1 pushes right, anything else pushes left (Gymnasium asserts 0 or 1).
pub fn dynamics(s: [f64; 4], action: i64) -> [f64; 4] {
    let [x, x_dot, theta, theta_dot] = s;
    let force = if action == 1 { FORCE_MAG } else { -FORCE_MAG };
    let (sintheta, costheta) = (theta.sin(), theta.cos());
    let temp = (force + POLE_MASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS;
    let thetaacc = (GRAVITY * sintheta - costheta * temp)
        / (LENGTH * (4.0 / 3.0 - MASS_POLE * (costheta * costheta) / TOTAL_MASS));
    let xacc = temp - POLE_MASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
    [x + TAU * x_dot, x_dot + TAU * xacc, theta + TAU * theta_dot, theta_dot + TAU * thetaacc]
}

/// Gymnasium's termination test.
pub fn terminated(s: [f64; 4]) -> bool {
    s[0] < -X_THRESHOLD || s[0] > X_THRESHOLD || s[2] < -THETA_THRESHOLD || s[2] > THETA_THRESHOLD
}

/// The scalar reference CartPole in f64.
#[derive(Clone, Debug)]
pub struct CartPole {
    spec: EnvSpec,
    pub state: [f64; 4],
    /// Steps taken in the current episode (Gymnasium's TimeLimit counter).
    pub elapsed: u32,
    rng: EnvRng,
}

impl CartPole {
    /// The env with stream `index` of a run seeded with `seed` (same stream as the batch's env `index`).
    pub fn new(seed: u64, index: u64) -> Self {
        Self { spec: spec(), state: [0.0; 4], elapsed: 0, rng: EnvRng::for_env(seed, index) }
    }

    /// One transition from the current state: (reward, terminated, truncated).
    pub fn step_state(&mut self, action: i64) -> (f64, bool, bool) {
        self.state = dynamics(self.state, action);
        self.elapsed += 1;
        (1.0, terminated(self.state), self.elapsed >= MAX_STEPS)
    }

    pub fn reset_state(&mut self) {
        self.elapsed = 0;
        for v in &mut self.state {
            *v = self.rng.uniform_f32(-RESET_BOUND as f32, RESET_BOUND as f32) as f64;
        }
    }

    fn write_obs(&self, obs: &mut [FieldData]) {
        if let Some(FieldData::F32(row)) = obs.first_mut() {
            for (o, s) in row.iter_mut().zip(self.state) {
                *o = s as f32;
            }
        }
    }
}

impl ScalarEnv for CartPole {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [FieldData]) {
        self.reset_state();
        self.write_obs(obs);
    }

    fn step(&mut self, action: &[i64], obs: &mut [FieldData]) -> (f64, bool, bool) {
        let out = self.step_state(action[0]);
        self.write_obs(obs);
        out
    }
}

/// One CartPole in f32 with its own random stream: the per-env object of the
/// `sequential` backend. Same arithmetic as [`CartPoleBatch`], so the same trajectories.
#[derive(Clone, Debug)]
pub struct CartPoleF32 {
    spec: EnvSpec,
    pub state: [f32; 4],
    pub elapsed: u32,
    rng: EnvRng,
}

impl CartPoleF32 {
    pub fn new(seed: u64, index: u64) -> Self {
        Self { spec: spec(), state: [0.0; 4], elapsed: 0, rng: EnvRng::for_env(seed, index) }
    }
}

impl ScalarEnv for CartPoleF32 {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [FieldData]) {
        let b = RESET_BOUND as f32;
        for v in &mut self.state {
            *v = self.rng.uniform_f32(-b, b);
        }
        self.elapsed = 0;
        if let Some(FieldData::F32(row)) = obs.first_mut() {
            row.copy_from_slice(&self.state);
        }
    }

    fn step(&mut self, action: &[i64], obs: &mut [FieldData]) -> (f64, bool, bool) {
        self.state = dynamics_f32(self.state, action[0]);
        self.elapsed += 1;
        if let Some(FieldData::F32(row)) = obs.first_mut() {
            row.copy_from_slice(&self.state);
        }
        (1.0, terminated_f32(self.state), self.elapsed >= MAX_STEPS)
    }
}

/// A batch of CartPoles in f32, struct of arrays, with same-step autoreset.
#[derive(Clone, Debug)]
pub struct CartPoleBatch {
    spec: EnvSpec,
    pub x: Vec<f32>,
    pub x_dot: Vec<f32>,
    pub theta: Vec<f32>,
    pub theta_dot: Vec<f32>,
    /// Steps in the current episode, per env.
    pub elapsed: Vec<u32>,
    /// Return of the current episode, per env.
    pub ret: Vec<f64>,
    rngs: Vec<EnvRng>,
    /// Scratch: the envs that finished in the current step.
    finished: Vec<u32>,
}

impl CartPoleBatch {
    /// `envs` CartPoles whose random streams are those of global indices
    /// `first_index .. first_index + envs`, so a partitioned batch draws the same numbers.
    pub fn new(envs: usize, seed: u64, first_index: u64) -> Self {
        Self {
            spec: spec(),
            x: vec![0.0; envs],
            x_dot: vec![0.0; envs],
            theta: vec![0.0; envs],
            theta_dot: vec![0.0; envs],
            elapsed: vec![0; envs],
            ret: vec![0.0; envs],
            rngs: (0..envs as u64).map(|i| EnvRng::for_env(seed, first_index + i)).collect(),
            finished: Vec::with_capacity(envs),
        }
    }

    /// The state of env `i` as `[x, x_dot, theta, theta_dot]`.
    pub fn state(&self, i: usize) -> [f32; 4] {
        [self.x[i], self.x_dot[i], self.theta[i], self.theta_dot[i]]
    }

    /// Env `i`'s reset stream, where its next reset draws from (for kernels that
    /// continue the batch on a GPU).
    pub fn rng(&self, i: usize) -> EnvRng {
        self.rngs[i]
    }

    pub fn set_state(&mut self, i: usize, s: [f32; 4]) {
        [self.x[i], self.x_dot[i], self.theta[i], self.theta_dot[i]] = s;
    }

    fn reset_env(&mut self, i: usize) {
        let b = RESET_BOUND as f32;
        let r = &mut self.rngs[i];
        // Same draw order as the reference: x, x_dot, theta, theta_dot.
        self.x[i] = r.uniform_f32(-b, b);
        self.x_dot[i] = r.uniform_f32(-b, b);
        self.theta[i] = r.uniform_f32(-b, b);
        self.theta_dot[i] = r.uniform_f32(-b, b);
        self.elapsed[i] = 0;
        self.ret[i] = 0.0;
    }

    fn write_obs(&self, obs: &mut Observations) {
        if let Some(FieldData::F32(buf)) = obs.fields.first_mut() {
            buf.resize(self.x.len() * 4, 0.0);
            for (i, row) in buf.chunks_exact_mut(4).enumerate() {
                row.copy_from_slice(&self.state(i));
            }
        }
    }
}

/// `(sin x, cos x)` in f32, branch-free so that a loop over envs vectorizes (libm's
/// `sinf`/`cosf` are calls the vectorizer cannot see through). Cody–Waite reduction by
/// π/2 and the Cephes minimax polynomials on [−π/4, π/4]; error below 2.5e-7 for
/// |x| < 1e4 (tested). It uses no fused multiply-add, so every CPU and SIMD width gives
/// the same bits, and every host backend the same trajectories.
#[inline(always)]
pub fn sin_cos_f32(x: f32) -> (f32, f32) {
    const TWO_OVER_PI: f32 = std::f32::consts::FRAC_2_PI;
    // 1.5 · 2^23: adding and subtracting it rounds to the nearest integer.
    const ROUNDER: f32 = 12_582_912.0;
    const DP1: f32 = 1.570_312_5;
    const DP2: f32 = 4.837_513e-4;
    const DP3: f32 = 7.549_79e-8;
    let j = (x * TWO_OVER_PI + ROUNDER) - ROUNDER;
    let q = j as i32;
    let r = ((x - j * DP1) - j * DP2) - j * DP3;
    let z = r * r;
    let sin_r = ((-1.951_529_6e-4 * z + 8.332_161e-3) * z - 1.666_665_5e-1) * z * r + r;
    let cos_r = ((2.443_315_7e-5 * z - 1.388_731_6e-3) * z + 4.166_664_6e-2) * z * z - 0.5 * z + 1.0;
    let swap = q & 1 != 0;
    let (s0, c0) = if swap { (cos_r, sin_r) } else { (sin_r, cos_r) };
    let s = if q & 2 != 0 { -s0 } else { s0 };
    let c = if (q + 1) & 2 != 0 { -c0 } else { c0 };
    (s, c)
}

/// One f32 Euler step; the same expression order as [`dynamics`].
#[inline(always)]
pub fn dynamics_f32(s: [f32; 4], action: i64) -> [f32; 4] {
    const G: f32 = GRAVITY as f32;
    const MP: f32 = MASS_POLE as f32;
    const TM: f32 = TOTAL_MASS as f32;
    const L: f32 = LENGTH as f32;
    const PML: f32 = POLE_MASS_LENGTH as f32;
    const T: f32 = TAU as f32;
    let [x, x_dot, theta, theta_dot] = s;
    let force = if action == 1 { FORCE_MAG as f32 } else { -FORCE_MAG as f32 };
    let (sintheta, costheta) = sin_cos_f32(theta);
    let temp = (force + PML * (theta_dot * theta_dot) * sintheta) / TM;
    let thetaacc = (G * sintheta - costheta * temp) / (L * (4.0 / 3.0 - MP * (costheta * costheta) / TM));
    let xacc = temp - PML * thetaacc * costheta / TM;
    [x + T * x_dot, x_dot + T * xacc, theta + T * theta_dot, theta_dot + T * thetaacc]
}

/// Termination test in f32 (non-short-circuit, so it vectorizes).
#[inline(always)]
pub fn terminated_f32(s: [f32; 4]) -> bool {
    let (xt, tt) = (X_THRESHOLD as f32, THETA_THRESHOLD as f32);
    (s[0] < -xt) | (s[0] > xt) | (s[2] < -tt) | (s[2] > tt)
}

/// The arrays the physics pass reads and writes, one element per env.
struct Lanes<'a> {
    x: &'a mut [f32],
    x_dot: &'a mut [f32],
    theta: &'a mut [f32],
    theta_dot: &'a mut [f32],
    actions: &'a [i64],
    elapsed: &'a mut [u32],
    ret: &'a mut [f64],
    term: &'a mut [bool],
    trunc: &'a mut [bool],
}

/// The physics of every env of a batch, in place: one Euler step, the step counters,
/// the termination and truncation flags. No branches, no calls: the loop vectorizes.
#[inline(always)]
fn physics_body(l: Lanes<'_>) {
    let n = l.x.len();
    let (x, x_dot, theta, theta_dot) = (l.x, &mut l.x_dot[..n], &mut l.theta[..n], &mut l.theta_dot[..n]);
    let (actions, elapsed, ret) = (&l.actions[..n], &mut l.elapsed[..n], &mut l.ret[..n]);
    let (term, trunc) = (&mut l.term[..n], &mut l.trunc[..n]);
    for i in 0..n {
        let s = dynamics_f32([x[i], x_dot[i], theta[i], theta_dot[i]], actions[i]);
        [x[i], x_dot[i], theta[i], theta_dot[i]] = s;
        elapsed[i] += 1;
        ret[i] += 1.0;
        term[i] = terminated_f32(s);
        trunc[i] = elapsed[i] >= MAX_STEPS;
    }
}

/// [`physics_body`] compiled for AVX-512 (the baseline x86-64 target has only SSE2).
/// Same bits as the baseline: the arithmetic has no FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
unsafe fn physics_avx512(l: Lanes<'_>) {
    physics_body(l)
}

/// [`physics_body`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn physics_avx2(l: Lanes<'_>) {
    physics_body(l)
}

/// Runs the physics pass with the widest vectors the CPU has (chosen at run time).
fn physics(l: Lanes<'_>) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq") {
            // SAFETY: the CPU has the features the function was compiled for.
            return unsafe { physics_avx512(l) };
        }
        if has!("avx2") {
            // SAFETY: as above.
            return unsafe { physics_avx2(l) };
        }
    }
    physics_body(l)
}

impl BatchEnv for CartPoleBatch {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn num_envs(&self) -> usize {
        self.x.len()
    }

    fn reset(&mut self, out: &mut Observations) -> Result<(), EnvError> {
        for i in 0..self.num_envs() {
            self.reset_env(i);
        }
        self.write_obs(out);
        Ok(())
    }

    fn step(&mut self, actions: &[i64], out: &mut StepBatch) -> Result<(), EnvError> {
        let n = self.num_envs();
        if actions.len() != n {
            return Err(EnvError(format!("cartpole: {} actions for {n} envs", actions.len())));
        }
        out.episodes.clear();
        out.reward.clear();
        out.reward.resize(n, 1.0);
        out.terminated.resize(n, false);
        out.truncated.resize(n, false);
        physics(Lanes {
            x: &mut self.x,
            x_dot: &mut self.x_dot,
            theta: &mut self.theta,
            theta_dot: &mut self.theta_dot,
            actions,
            elapsed: &mut self.elapsed,
            ret: &mut self.ret,
            term: &mut out.terminated,
            trunc: &mut out.truncated,
        });
        // Autoreset: find the finished envs with a tight scan, then handle each.
        self.finished.clear();
        for (i, (&te, &tr)) in out.terminated.iter().zip(&out.truncated).enumerate() {
            if te | tr {
                self.finished.push(i as u32);
            }
        }
        for k in 0..self.finished.len() {
            let i = self.finished[k] as usize;
            {
                out.episodes.push(EpisodeEnd {
                    env: i,
                    episode_return: self.ret[i],
                    length: self.elapsed[i],
                    terminated: out.terminated[i],
                });
                if let Some(FieldData::F32(f)) = out.final_obs.fields.first_mut() {
                    f[i * 4..i * 4 + 4].copy_from_slice(&self.state(i));
                }
                self.reset_env(i);
            }
        }
        self.write_obs(&mut out.obs);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_matches_reference_within_1e5_relative_on_single_transitions() {
        let mut batch = CartPoleBatch::new(64, 11, 0);
        let mut reference = CartPole::new(11, 0);
        let mut rng = crate::rng::HostRng::new(5);
        let mut out = StepBatch::new(batch.spec(), 64);
        let mut obs = Observations::zeros(batch.spec(), 64);
        batch.reset(&mut obs).unwrap();
        let mut checked = 0;
        for _ in 0..300 {
            let actions: Vec<i64> = (0..64).map(|_| rng.below(2) as i64).collect();
            let before: Vec<[f32; 4]> = (0..64).map(|i| batch.state(i)).collect();
            batch.step(&actions, &mut out).unwrap();
            for i in 0..64 {
                if out.terminated[i] || out.truncated[i] {
                    continue; // the state is already the next episode's
                }
                reference.state = before[i].map(f64::from);
                reference.step_state(actions[i]);
                let after = batch.state(i);
                for (k, (&a, &r)) in after.iter().zip(&reference.state).enumerate() {
                    let a = a as f64;
                    assert!((a - r).abs() <= 1e-5 * r.abs().max(1e-2), "env {i} component {k}: {a} vs {r}");
                }
                assert_eq!(terminated_f32(after), terminated(reference.state));
                checked += 1;
            }
        }
        assert!(checked > 10_000);
    }

    #[test]
    fn vectorizable_sin_cos_is_accurate() {
        let mut worst = 0f64;
        for i in -1_000_000..=1_000_000 {
            let x = i as f32 * 1e-5; // ±10 rad, far beyond CartPole's ±0.21
            let (s, c) = sin_cos_f32(x);
            let (ws, wc) = (x as f64).sin_cos();
            worst = worst.max((s as f64 - ws).abs()).max((c as f64 - wc).abs());
        }
        assert!(worst < 2.5e-7, "worst error {worst}");
        assert_eq!(sin_cos_f32(0.0), (0.0, 1.0));
    }

    #[test]
    fn autoreset_returns_next_episode_obs_and_reports_the_final_one() {
        let mut batch = CartPoleBatch::new(3, 2, 0);
        let mut obs = Observations::zeros(batch.spec(), 3);
        batch.reset(&mut obs).unwrap();
        // Put env 1 just past the edge so that any action terminates it.
        batch.set_state(1, [2.39, 5.0, 0.0, 0.0]);
        let mut out = StepBatch::new(batch.spec(), 3);
        batch.step(&[0, 1, 0], &mut out).unwrap();
        assert_eq!(out.terminated, vec![false, true, false]);
        assert_eq!(out.reward, vec![1.0, 1.0, 1.0]);
        assert_eq!(out.episodes.len(), 1);
        let end = &out.episodes[0];
        assert_eq!((end.env, end.length, end.episode_return, end.terminated), (1, 1, 1.0, true));
        assert!(out.final_row(0, 1)[0] > 2.4);
        let row = &out.obs.fields[0].as_f32().unwrap()[4..8];
        assert!(row.iter().all(|v| v.abs() < 0.05), "reset obs {row:?}");
        assert_eq!(batch.elapsed[1], 0);
    }

    #[test]
    fn truncates_at_500_steps_with_return_500() {
        let mut batch = CartPoleBatch::new(1, 0, 0);
        let mut obs = Observations::zeros(batch.spec(), 1);
        batch.reset(&mut obs).unwrap();
        let mut out = StepBatch::new(batch.spec(), 1);
        for step in 1..=500u32 {
            // Keep the pole upright by teleporting back to the start: only the clock runs.
            batch.set_state(0, [0.0; 4]);
            batch.step(&[(step % 2) as i64], &mut out).unwrap();
            if step < 500 {
                assert!(out.episodes.is_empty());
            }
        }
        assert!(out.truncated[0] && !out.terminated[0]);
        assert_eq!(out.episodes[0].length, 500);
        assert_eq!(out.episodes[0].episode_return, 500.0);
    }

    #[test]
    fn partitioned_batches_draw_the_same_streams() {
        let mut whole = CartPoleBatch::new(8, 9, 0);
        let mut left = CartPoleBatch::new(3, 9, 0);
        let mut right = CartPoleBatch::new(5, 9, 3);
        let spec = whole.spec().clone();
        whole.reset(&mut Observations::zeros(&spec, 8)).unwrap();
        left.reset(&mut Observations::zeros(&spec, 3)).unwrap();
        right.reset(&mut Observations::zeros(&spec, 5)).unwrap();
        for i in 0..8 {
            let s = if i < 3 { left.state(i) } else { right.state(i - 3) };
            assert_eq!(whole.state(i), s);
        }
        let mut reference = CartPole::new(9, 4);
        reference.reset_state();
        assert_eq!(reference.state.map(|v| v as f32), whole.state(4));
    }
}

//! Observation and reward normalization (`--obs-norm`, `--reward-norm`): Gymnasium's
//! `NormalizeObservation` and `NormalizeReward` in their vector forms (same-step
//! autoreset), then clipped at ±10 as CleanRL's `ppo_continuous_action.py` clips them.
//!
//! The trainer runs them on each step's whole batch, in one pass over `envs × dim` floats,
//! rather than one wrapper per env in each env's Python: the statistics are the vector
//! wrappers' (one running mean over every env's rows), and a step costs a loop of Rust
//! instead of a NumPy call per env.

use anyhow::Result;
use hotlab_core::choices::Norm;
use hotlab_env::{EnvSpec, FieldData, FieldKind, Observations, StepBatch};
use hotlab_protocol::Losses;
use hotlab_spec::{RunSpec, SpecError};
use serde::{Deserialize, Serialize};

/// Gymnasium's `epsilon` under the square root of both wrappers.
const EPSILON: f64 = Norm::EPSILON;

/// Where the normalized values are clipped (CleanRL's `TransformObservation` and
/// `TransformReward`).
pub const CLIP: f32 = 10.0;

/// A running mean and (population) variance per column, updated a batch of rows at a
/// time by Chan et al.'s parallel rule, in f64: Gymnasium's `RunningMeanStd`, whose count
/// starts at 1e-4 so that the first batch all but replaces the initial mean 0 and var 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunningMeanStd {
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
    pub count: f64,
}

impl RunningMeanStd {
    pub fn new(dim: usize) -> Self {
        Self { mean: vec![0.0; dim], var: vec![1.0; dim], count: 1e-4 }
    }

    /// Adds the rows of `x` (row-major, [`Self::mean`]'s width each).
    pub fn update<T: Copy + Into<f64>>(&mut self, x: &[T]) {
        let dim = self.mean.len().max(1);
        let rows = x.len() / dim;
        if rows == 0 {
            return;
        }
        let n = rows as f64;
        let mut batch_mean = vec![0f64; dim];
        for row in x.chunks_exact(dim) {
            batch_mean.iter_mut().zip(row).for_each(|(m, &v)| *m += v.into());
        }
        batch_mean.iter_mut().for_each(|m| *m /= n);
        let mut batch_var = vec![0f64; dim];
        for row in x.chunks_exact(dim) {
            for ((s, &v), m) in batch_var.iter_mut().zip(row).zip(&batch_mean) {
                let d = v.into() - m;
                *s += d * d;
            }
        }
        batch_var.iter_mut().for_each(|s| *s /= n);
        let total = self.count + n;
        for j in 0..dim {
            let delta = batch_mean[j] - self.mean[j];
            self.mean[j] += delta * n / total;
            let m2 = self.var[j] * self.count + batch_var[j] * n + delta * delta * self.count * n / total;
            self.var[j] = m2 / total;
        }
        self.count = total;
    }
}

/// The observation normalizer's state, as a checkpoint keeps it for evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObsNorm {
    pub rms: RunningMeanStd,
    pub clip: f32,
}

impl ObsNorm {
    pub fn new(dim: usize) -> Self {
        Self { rms: RunningMeanStd::new(dim), clip: CLIP }
    }

    /// Adds a step's rows to the statistics, then normalizes them in place.
    pub fn observe(&mut self, rows: &mut [f32]) {
        self.rms.update(rows);
        self.apply(rows);
    }

    /// Normalizes rows in place with the statistics as they are (a final observation,
    /// an evaluation): `(x − mean) / √(var + 1e-8)`, clipped at ±clip.
    pub fn apply(&self, rows: &mut [f32]) {
        let dim = self.rms.mean.len().max(1);
        let scale: Vec<f64> = self.rms.var.iter().map(|v| 1.0 / (v + EPSILON).sqrt()).collect();
        for row in rows.chunks_exact_mut(dim) {
            for ((x, m), s) in row.iter_mut().zip(&self.rms.mean).zip(&scale) {
                *x = (((*x as f64 - m) * s) as f32).clamp(-self.clip, self.clip);
            }
        }
    }
}

/// The reward normalizer: each env's discounted return so far, and the running variance
/// of those returns over every env and step.
#[derive(Clone, Debug, PartialEq)]
pub struct RewardNorm {
    pub rms: RunningMeanStd,
    returns: Vec<f64>,
    gamma: f64,
    pub clip: f32,
}

impl RewardNorm {
    pub fn new(envs: usize, gamma: f64) -> Self {
        Self { rms: RunningMeanStd::new(1), returns: vec![0.0; envs], gamma, clip: CLIP }
    }

    /// Normalizes a step's rewards in place: each env's return `G ← γ·G·(1 − terminated) + r`
    /// joins the statistics, every reward is divided by √(var + 1e-8) and clipped; an env
    /// whose episode ended (same-step autoreset) starts its next return at 0.
    pub fn step(&mut self, rewards: &mut [f32], terminated: &[bool], truncated: &[bool]) {
        for (e, g) in self.returns.iter_mut().enumerate() {
            let keep = if terminated[e] { 0.0 } else { self.gamma };
            *g = *g * keep + rewards[e] as f64;
        }
        self.rms.update(&self.returns);
        let scale = 1.0 / (self.rms.var[0] + EPSILON).sqrt();
        for r in rewards.iter_mut() {
            *r = ((*r as f64 * scale) as f32).clamp(-self.clip, self.clip);
        }
        for (e, g) in self.returns.iter_mut().enumerate() {
            if terminated[e] || truncated[e] {
                *g = 0.0;
            }
        }
    }
}

/// A run's normalizers, as its spec and its env's spaces resolve `--obs-norm` and
/// `--reward-norm`.
#[derive(Clone, Debug, Default)]
pub struct Normalizers {
    /// Over the observation's float fields side by side (one column each component: a Dict's
    /// float leaves each normalized as its own, per component).
    pub obs: Option<ObsNorm>,
    pub reward: Option<RewardNorm>,
    /// The float fields `obs` normalizes, and their widths.
    floats: Vec<(usize, usize)>,
}

impl Normalizers {
    /// For `spec`'s envs of `env`: `auto` is on where the env acts with a Box. Observation
    /// normalization needs floats (a vector, or a Dict's float leaves, each normalized per
    /// component while its images and indices stay as they are), and is refused, named,
    /// where the observation has none.
    pub fn for_run(spec: &RunSpec, env: &EnvSpec) -> Result<Self, SpecError> {
        let box_actions = env.continuous > 0;
        let floats: Vec<(usize, usize)> = (env.fields.iter().enumerate())
            .filter(|(_, f)| f.kind == FieldKind::F32)
            .map(|(i, f)| (i, f.numel()))
            .collect();
        // `auto` normalizes a Box-action env's floats when they are all it observes, never
        // pixels (CarRacing's) nor a Dict's images beside them.
        let only_floats = !floats.is_empty() && floats.len() == env.fields.len();
        let obs = match (spec.ppo.obs_norm.on(box_actions && only_floats), floats.is_empty()) {
            (false, _) => None,
            (true, false) => Some(ObsNorm::new(floats.iter().map(|&(_, w)| w).sum())),
            (true, true) => {
                let fields = env.fields.iter().map(|f| format!("{} {:?}", f.name, f.kind)).collect::<Vec<_>>();
                return Err(SpecError::obs_norm_without_floats(&env.name, Some(&fields.join(", "))));
            }
        };
        let reward = spec.ppo.reward_norm.on(box_actions).then(|| RewardNorm::new(spec.envs, spec.ppo.gamma));
        Ok(Self { obs, reward, floats })
    }

    pub fn any(&self) -> bool {
        self.obs.is_some() || self.reward.is_some()
    }

    /// Their state as figures: the observations' mean |mean| and mean standard deviation
    /// over the components (`norm.obs_mean`, `norm.obs_std`), and the standard deviation
    /// of the discounted return that rewards are divided by (`norm.return_std`).
    pub fn figures(&self, out: &mut Losses) {
        if let Some(norm) = &self.obs {
            let n = norm.rms.mean.len().max(1) as f64;
            out.push("norm.obs_mean", norm.rms.mean.iter().map(|m| m.abs()).sum::<f64>() / n);
            out.push("norm.obs_std", norm.rms.var.iter().map(|v| v.sqrt()).sum::<f64>() / n);
        }
        if let Some(norm) = &self.reward {
            out.push("norm.return_std", norm.rms.var[0].sqrt());
        }
    }

    /// The first observations of a batch just reset.
    pub fn reset(&mut self, obs: &mut Observations) {
        if let Some(norm) = &mut self.obs {
            with_floats(&self.floats, obs, |rows| norm.observe(rows));
        }
    }

    /// A step's observations (with the final ones of the episodes that ended, by the
    /// statistics as they are then) and rewards.
    pub fn step(&mut self, out: &mut StepBatch) {
        if let Some(norm) = &mut self.obs {
            with_floats(&self.floats, &mut out.obs, |rows| norm.observe(rows));
            let ends: Vec<usize> = out.ends().collect();
            let dim = norm.rms.mean.len();
            with_floats(&self.floats, &mut out.final_obs, |rows| {
                for e in ends {
                    norm.apply(&mut rows[e * dim..(e + 1) * dim]);
                }
            });
        }
        if let Some(norm) = &mut self.reward {
            norm.step(&mut out.reward, &out.terminated, &out.truncated);
        }
    }
}

/// The float fields' rows side by side (each env's row their components in order), given
/// to `change` in place: one field's own rows, or several gathered and put back.
fn with_floats(fields: &[(usize, usize)], obs: &mut Observations, change: impl FnOnce(&mut [f32])) {
    if let [(f, _)] = fields {
        if let Some(FieldData::F32(rows)) = obs.fields.get_mut(*f) {
            change(rows);
        }
        return;
    }
    let dim: usize = fields.iter().map(|&(_, w)| w).sum();
    let Some(&(first, w)) = fields.first() else { return };
    let n = obs.fields[first].len() / w.max(1);
    let mut side = vec![0f32; n * dim];
    let mut at = 0;
    for &(f, w) in fields {
        if let FieldData::F32(rows) = &obs.fields[f] {
            for e in 0..n {
                side[e * dim + at..e * dim + at + w].copy_from_slice(&rows[e * w..(e + 1) * w]);
            }
        }
        at += w;
    }
    change(&mut side);
    at = 0;
    for &(f, w) in fields {
        if let FieldData::F32(rows) = &mut obs.fields[f] {
            for e in 0..n {
                rows[e * w..(e + 1) * w].copy_from_slice(&side[e * dim + at..e * dim + at + w]);
            }
        }
        at += w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_env::rng::HostRng;

    /// Batches of any sizes give the mean and variance of all the rows at once, with
    /// Gymnasium's 1e-4 of prior weight on 0 and 1.
    #[test]
    fn batches_add_up_to_the_moments_of_all_rows() {
        let mut rng = HostRng::new(3);
        let rows: Vec<f32> = (0..3 * 97).map(|_| (rng.next_f64() * 20.0 - 5.0) as f32).collect();
        let mut rms = RunningMeanStd::new(3);
        for chunk in [0..3, 3..30, 30..33, 33..291] {
            rms.update(&rows[chunk]);
        }
        for j in 0..3 {
            let col: Vec<f64> = rows.iter().skip(j).step_by(3).map(|&v| v as f64).collect();
            let n = col.len() as f64;
            let mean = col.iter().sum::<f64>() / n;
            let var = col.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
            // The prior: count 1e-4 at mean 0 and var 1.
            let (total, prior) = (n + 1e-4, 1e-4);
            let want_mean = mean * n / total;
            let want_var = (var * n + prior + mean * mean * prior * n / total) / total;
            assert!((rms.mean[j] - want_mean).abs() < 1e-9, "column {j}");
            assert!((rms.var[j] - want_var).abs() < 1e-9 * want_var, "column {j}");
        }
        assert!((rms.count - (97.0 + 1e-4)).abs() < 1e-9);
    }

    /// A Dict's float leaves are normalized each as its own, per component (as one
    /// normalizer per leaf would: the same values, bit for bit), through resets, steps and
    /// final observations, its indices and images untouched; with no float leaf, `on` is
    /// refused naming the flag's value and what is allowed.
    #[test]
    fn a_dicts_float_leaves_are_normalized_each_as_its_own() {
        use hotlab_core::run::PpoSpec;
        use hotlab_env::FieldSpec;
        let leaf = |name: &str, shape: Vec<usize>, kind| FieldSpec::new(name, shape, kind);
        let fields = vec![
            FieldSpec { classes: vec![4], ..leaf("goal", vec![1], FieldKind::I64) },
            leaf("a", vec![2], FieldKind::F32),
            leaf("view", vec![2, 2], FieldKind::U8),
            leaf("b", vec![3], FieldKind::F32),
        ];
        let env = EnvSpec { name: "dict".into(), fields, heads: vec![], masked: false, continuous: 1 };
        let spec = RunSpec { envs: 4, ppo: PpoSpec { obs_norm: Norm::On, ..PpoSpec::default() }, ..RunSpec::default() };
        let mut norms = Normalizers::for_run(&spec, &env).unwrap();
        let (mut a, mut b) = (ObsNorm::new(2), ObsNorm::new(3));
        let mut rng = HostRng::new(9);
        let mut draw = |n: usize, scale: f64| -> Vec<f32> { (0..n).map(|_| (rng.next_f64() * scale) as f32).collect() };
        let mut obs = Observations::zeros(&env, 4);
        obs.fields[1] = FieldData::F32(draw(8, 50.0));
        obs.fields[3] = FieldData::F32(draw(12, -3.0));
        let (mut want_a, mut want_b) =
            (obs.fields[1].as_f32().unwrap().to_vec(), obs.fields[3].as_f32().unwrap().to_vec());
        norms.reset(&mut obs);
        a.observe(&mut want_a);
        b.observe(&mut want_b);
        assert_eq!((obs.fields[1].as_f32().unwrap(), obs.fields[3].as_f32().unwrap()), (&want_a[..], &want_b[..]));
        for step in 0..5 {
            let mut out = StepBatch::new(&env, 4);
            out.obs.fields[0] = FieldData::I64(vec![3, 1, 0, 2]);
            out.obs.fields[2] = FieldData::U8((0..16).collect());
            out.obs.fields[1] = FieldData::F32(draw(8, 10.0 + step as f64));
            out.obs.fields[3] = FieldData::F32(draw(12, 1.0));
            out.final_obs.fields[1] = FieldData::F32(draw(8, 10.0));
            out.final_obs.fields[3] = FieldData::F32(draw(12, 1.0));
            out.truncated[step % 4] = true;
            let e = step % 4;
            let mut want = [1, 3].map(|f| out.obs.fields[f].as_f32().unwrap().to_vec());
            let mut finals = [1, 3].map(|f| out.final_obs.fields[f].as_f32().unwrap().to_vec());
            norms.step(&mut out);
            a.observe(&mut want[0]);
            b.observe(&mut want[1]);
            a.apply(&mut finals[0][e * 2..(e + 1) * 2]);
            b.apply(&mut finals[1][e * 3..(e + 1) * 3]);
            assert_eq!(out.obs.fields[1].as_f32().unwrap(), &want[0][..], "step {step}");
            assert_eq!(out.obs.fields[3].as_f32().unwrap(), &want[1][..], "step {step}");
            assert_eq!(out.final_obs.fields[1].as_f32().unwrap(), &finals[0][..], "step {step}");
            assert_eq!(out.final_obs.fields[3].as_f32().unwrap(), &finals[1][..], "step {step}");
            assert_eq!(out.obs.fields[0], FieldData::I64(vec![3, 1, 0, 2]));
            assert_eq!(out.obs.fields[2], FieldData::U8((0..16).collect()));
        }
        let obs_norm = norms.obs.as_ref().unwrap();
        assert_eq!(obs_norm.rms.mean[..2], a.rms.mean[..]);
        assert_eq!(obs_norm.rms.mean[2..], b.rms.mean[..]);
        let indices =
            EnvSpec { fields: vec![FieldSpec { classes: vec![4], ..leaf("goal", vec![1], FieldKind::I64) }], ..env };
        let e = Normalizers::for_run(&spec, &indices).unwrap_err().to_string();
        assert!(e.contains("--obs-norm: on:") && e.contains("goal I64") && e.contains("allowed: auto, off"), "{e}");
    }

    #[test]
    fn normalized_values_are_clipped() {
        let mut norm = ObsNorm::new(1);
        let mut rows = vec![0.0f32; 100];
        norm.observe(&mut rows);
        let mut far = [1e6f32, -1e6];
        norm.apply(&mut far);
        assert_eq!(far, [CLIP, -CLIP]);
    }
}

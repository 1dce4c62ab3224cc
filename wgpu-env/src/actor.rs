//! The trained actor of a finished run, as the playground evaluates it: the worker's
//! `GET /api/runs/{id}/policy` JSON checked and cut down to the actor's layers.
//!
//! The worker stores both networks in one flat vector, actor first, each layer a weight
//! `[in, out]` then a bias `[out]` (`native-worker/src/policy.rs`). The actor's slots are
//! therefore a prefix of that vector, already in the order the WGSL kernel reads them.
//! A run trained with `--obs-norm on` carries its observation statistics in the shape
//! (`shape.obs_norm`): the actor reads its inputs through them, as `hotlab eval` does.

use hotlab_core::choices::Norm;
use hotlab_env::rng::EnvRng;
use serde::Deserialize;

/// The widest hidden layer the WGSL kernel evaluates (its per-env scratch is 2 × the
/// actor's widest layer).
pub const MAX_WIDTH: usize = 256;
/// The most hidden layers the WGSL kernel evaluates (its uniform holds 12 widths).
pub const MAX_HIDDEN_LAYERS: usize = 8;

/// Why a policy cannot run in the playground; the message names what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("policy: {0}")]
pub struct PolicyError(pub String);

#[derive(Deserialize)]
struct PolicyJson {
    env: String,
    shape: Shape,
    layout: Vec<Slot>,
    params: Vec<f32>,
}

#[derive(Deserialize)]
struct Shape {
    obs_dim: usize,
    hidden: Vec<usize>,
    logits: usize,
    /// The trainer's observation normalizer at the end of the run (`--obs-norm on`).
    #[serde(default)]
    obs_norm: Option<NormJson>,
}

#[derive(Deserialize)]
struct NormJson {
    rms: RmsJson,
    clip: f32,
}

#[derive(Deserialize)]
struct RmsJson {
    mean: Vec<f64>,
    var: Vec<f64>,
}

/// The run's observation normalizer, frozen: each input becomes `(x − mean) · scale`,
/// clipped at ±`clip`, where `scale = 1 / √(var + ε)` (Gymnasium's `NormalizeObservation`
/// as the trainer runs it), in f32 as the kernel computes it.
#[derive(Clone, Debug, PartialEq)]
pub struct InputNorm {
    pub mean: [f32; 4],
    pub scale: [f32; 4],
    pub clip: f32,
}

/// Floats the kernel reads at the head of its weights: the normalizer's mean, scale and
/// clip (unused by an actor without one).
pub const NORM_FLOATS: usize = 9;

impl InputNorm {
    fn from_json(n: &NormJson) -> Result<Self, PolicyError> {
        let fine = n.rms.mean.len() == 4
            && n.rms.var.len() == 4
            && n.rms.mean.iter().chain(&n.rms.var).all(|v| v.is_finite())
            && n.rms.var.iter().all(|&v| v >= 0.0)
            && n.clip.is_finite()
            && n.clip > 0.0;
        if !fine {
            return Err(PolicyError("shape.obs_norm: 4 finite means and variances ≥ 0 and a clip > 0 run here".into()));
        }
        let scale = |v: f64| (1.0 / (v + Norm::EPSILON).sqrt()) as f32;
        Ok(Self {
            mean: [0, 1, 2, 3].map(|i| n.rms.mean[i] as f32),
            scale: [0, 1, 2, 3].map(|i| scale(n.rms.var[i])),
            clip: n.clip,
        })
    }

    /// One observation as the actor's layers see it.
    pub fn apply(&self, obs: [f32; 4]) -> [f32; 4] {
        [0, 1, 2, 3].map(|i| ((obs[i] - self.mean[i]) * self.scale[i]).clamp(-self.clip, self.clip))
    }

    /// As the kernel reads it: the means, the scales, the clip.
    pub fn packed(&self) -> [f32; NORM_FLOATS] {
        let mut out = [0f32; NORM_FLOATS];
        out[..4].copy_from_slice(&self.mean);
        out[4..8].copy_from_slice(&self.scale);
        out[8] = self.clip;
        out
    }
}

#[derive(Deserialize)]
struct Slot {
    name: String,
    shape: Vec<usize>,
    offset: usize,
}

/// A CartPole actor: `widths[0] = 4` inputs, tanh hidden layers, `2` logits.
#[derive(Clone, Debug, PartialEq)]
pub struct Actor {
    /// Layer widths, input first, logits last.
    pub widths: Vec<usize>,
    /// Per layer the weight `[in, out]` (row-major) then the bias `[out]`.
    pub params: Vec<f32>,
    /// The run's observation normalizer, where it trained with one.
    pub norm: Option<InputNorm>,
}

impl Actor {
    /// Parses and checks the worker's policy JSON.
    pub fn from_policy_json(text: &str) -> Result<Self, PolicyError> {
        // A recurrent policy carries its state from step to step, which this kernel has no
        // room for: named, with where it plays, before its shape is read as an MLP's.
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
            if let Some(cell) = v["shape"]["cell"].as_str() {
                return Err(PolicyError(format!(
                    "shape: the playground runs an MLP actor; this policy is recurrent ({cell}): play it with `hotlab eval`"
                )));
            }
        }
        let p: PolicyJson = serde_json::from_str(text).map_err(|e| PolicyError(format!("not a policy file: {e}")))?;
        if p.env != "cartpole" {
            return Err(PolicyError(format!(
                "env: the playground runs cartpole; this policy was trained on {}",
                p.env
            )));
        }
        if p.shape.obs_dim != 4 || p.shape.logits != 2 {
            return Err(PolicyError(format!(
                "shape: a CartPole actor has 4 inputs and 2 logits (got {} and {})",
                p.shape.obs_dim, p.shape.logits
            )));
        }
        if p.shape.hidden.is_empty() || p.shape.hidden.len() > MAX_HIDDEN_LAYERS {
            return Err(PolicyError(format!(
                "shape.hidden: 1 to {MAX_HIDDEN_LAYERS} hidden layers run here (got {})",
                p.shape.hidden.len()
            )));
        }
        if let Some(&w) = p.shape.hidden.iter().find(|&&w| w == 0 || w > MAX_WIDTH) {
            return Err(PolicyError(format!("shape.hidden: widths 1 to {MAX_WIDTH} run here (got {w})")));
        }
        let norm = p.shape.obs_norm.as_ref().map(InputNorm::from_json).transpose()?;
        let mut widths = vec![4];
        widths.extend(&p.shape.hidden);
        widths.push(2);
        let mut params = Vec::new();
        for (l, io) in widths.windows(2).enumerate() {
            for (kind, shape) in [("w", vec![io[0], io[1]]), ("b", vec![io[1]])] {
                let name = format!("actor.{l}.{kind}");
                let slot = p
                    .layout
                    .iter()
                    .find(|s| s.name == name)
                    .ok_or_else(|| PolicyError(format!("layout: no slot {name}")))?;
                if slot.shape != shape {
                    return Err(PolicyError(format!("layout: {name} has shape {:?}, expected {shape:?}", slot.shape)));
                }
                let n: usize = shape.iter().product();
                let data = p.params.get(slot.offset..slot.offset + n).ok_or_else(|| {
                    PolicyError(format!(
                        "params: {name} needs {n} values at {}, there are {}",
                        slot.offset,
                        p.params.len()
                    ))
                })?;
                if let Some(bad) = data.iter().find(|v| !v.is_finite()) {
                    return Err(PolicyError(format!("params: {name} holds {bad}")));
                }
                params.extend_from_slice(data);
            }
        }
        Ok(Self { widths, params, norm })
    }

    /// Layers (hidden layers + the logits layer).
    pub fn depth(&self) -> usize {
        self.widths.len() - 1
    }

    /// The two logits for one observation (f32, the kernel's order of operations).
    pub fn logits(&self, obs: [f32; 4]) -> [f32; 2] {
        let mut h: Vec<f32> = self.norm.as_ref().map_or(obs, |n| n.apply(obs)).to_vec();
        let mut off = 0;
        for (l, io) in self.widths.windows(2).enumerate() {
            let (nin, nout) = (io[0], io[1]);
            let (w, b) = (&self.params[off..off + nin * nout], &self.params[off + nin * nout..off + nin * nout + nout]);
            let mut next = Vec::with_capacity(nout);
            for j in 0..nout {
                let mut z = b[j];
                for i in 0..nin {
                    z += h[i] * w[i * nout + j];
                }
                next.push(if l + 1 < self.depth() { z.clamp(-15.0, 15.0).tanh() } else { z });
            }
            off += nin * nout + nout;
            h = next;
        }
        [h[0], h[1]]
    }
}

/// How the playground picks each env's action.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Policy {
    /// Left or right with equal odds.
    #[default]
    Random,
    /// A trained actor: sampled from its softmax, or its most likely action (`greedy`).
    Actor { actor: std::sync::Arc<Actor>, greedy: bool },
}

/// The action for one env: the same rule as the WGSL kernel. `rng` is the env's action
/// stream (not its reset stream, so that the env's trajectory given its actions is the
/// batch env's).
pub fn choose(policy: &Policy, obs: [f32; 4], rng: &mut EnvRng) -> i64 {
    match policy {
        Policy::Random => (rng.next_u32() >> 31) as i64,
        Policy::Actor { actor, greedy } => {
            let [l0, l1] = actor.logits(obs);
            if *greedy {
                return (l1 > l0) as i64;
            }
            // P(right) = softmax(l)[1] = sigmoid(l1 − l0).
            let p_right = 1.0 / (1.0 + (l0 - l1).clamp(-80.0, 80.0).exp());
            (rng.next_unit_f32() < p_right) as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_json(hidden: &[usize], env: &str) -> String {
        let mut widths = vec![4];
        widths.extend(hidden);
        widths.push(2);
        let mut layout = Vec::new();
        let mut off = 0;
        for (net, out) in [("actor", 2), ("critic", 1)] {
            let mut w = widths.clone();
            *w.last_mut().unwrap() = out;
            for (l, io) in w.windows(2).enumerate() {
                for (kind, shape) in [("w", vec![io[0], io[1]]), ("b", vec![io[1]])] {
                    let n: usize = shape.iter().product();
                    layout
                        .push(serde_json::json!({"name": format!("{net}.{l}.{kind}"), "shape": shape, "offset": off}));
                    off += n;
                }
            }
        }
        let params: Vec<f32> = (0..off).map(|i| ((i % 7) as f32 - 3.0) * 0.1).collect();
        serde_json::json!({"env": env, "shape": {"obs_dim": 4, "hidden": hidden, "logits": 2}, "layout": layout, "params": params})
            .to_string()
    }

    #[test]
    fn the_actor_is_the_prefix_of_the_flat_vector() {
        let a = Actor::from_policy_json(&policy_json(&[8, 8], "cartpole")).unwrap();
        assert_eq!(a.widths, vec![4, 8, 8, 2]);
        assert_eq!(a.params.len(), 4 * 8 + 8 + 8 * 8 + 8 + 8 * 2 + 2);
        assert_eq!(a.params[..5], [-0.3, -0.2, -0.1, 0.0, 0.1]);
        let l = a.logits([0.01, -0.02, 0.03, 0.0]);
        assert!(l.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn bad_policies_are_refused_naming_what_is_wrong() {
        let err = |t: &str| Actor::from_policy_json(t).unwrap_err().0;
        assert!(err(&policy_json(&[8], "proof")).starts_with("env:"));
        assert!(err(&policy_json(&[512], "cartpole")).contains("widths 1 to 256"));
        assert!(err("{}").starts_with("not a policy file"));
        let recurrent = r#"{"env": "cartpole", "shape": {"input": {"features": 4}, "cell": "lstm", "width": 64}}"#;
        assert!(err(recurrent).contains("recurrent (lstm)"), "{}", err(recurrent));
        let mut v: serde_json::Value = serde_json::from_str(&policy_json(&[8], "cartpole")).unwrap();
        v["params"].as_array_mut().unwrap().truncate(10);
        assert!(err(&v.to_string()).starts_with("params:"));
    }

    fn with_norm(mean: [f64; 4], var: [f64; 4], clip: f32) -> String {
        let mut v: serde_json::Value = serde_json::from_str(&policy_json(&[8], "cartpole")).unwrap();
        v["shape"]["obs_norm"] = serde_json::json!({"rms": {"mean": mean, "var": var, "count": 20481.0}, "clip": clip});
        v.to_string()
    }

    #[test]
    fn a_normalized_run_s_actor_reads_its_inputs_through_the_statistics() {
        let plain = Actor::from_policy_json(&policy_json(&[8], "cartpole")).unwrap();
        assert_eq!(plain.norm, None);
        let (mean, var) = ([0.1, -0.5, 0.02, 0.3], [0.04, 1.0, 0.0025, 4.0]);
        let normed = Actor::from_policy_json(&with_norm(mean, var, 10.0)).unwrap();
        let norm = normed.norm.clone().unwrap();
        let scale = |v: f64| (1.0 / (v + 1e-8f64).sqrt()) as f32;
        assert_eq!(norm.scale, [scale(0.04), scale(1.0), scale(0.0025), scale(4.0)]);
        let mut rng = EnvRng::for_env(4, 0);
        for _ in 0..200 {
            let obs = [(); 4].map(|_| rng.uniform_f32(-0.3, 0.3));
            let by_hand = [0, 1, 2, 3].map(|i| ((obs[i] - mean[i] as f32) * norm.scale[i]).clamp(-10.0, 10.0));
            assert_eq!(normed.logits(obs), plain.logits(by_hand));
        }
        // The clip bites: past it, inputs read as ±clip.
        let tight = Actor::from_policy_json(&with_norm(mean, var, 0.5)).unwrap();
        let far = [5.0, -5.0, 1.0, -9.0];
        assert_eq!(tight.logits(far), plain.logits([0.5, -0.5, 0.5, -0.5]));
        assert_eq!(tight.norm.unwrap().packed()[8], 0.5);
    }

    #[test]
    fn bad_statistics_are_refused_naming_the_field() {
        let err = |t: &str| Actor::from_policy_json(t).unwrap_err().0;
        assert!(err(&with_norm([0.0; 4], [1.0, -1.0, 1.0, 1.0], 10.0)).starts_with("shape.obs_norm: 4 finite"));
        // JSON has no NaN: serde writes it as null, which is no number.
        assert!(err(&with_norm([f64::NAN, 0.0, 0.0, 0.0], [1.0; 4], 10.0)).starts_with("not a policy file"));
        assert!(err(&with_norm([0.0; 4], [1.0; 4], 0.0)).contains("shape.obs_norm"));
        let mut v: serde_json::Value = serde_json::from_str(&with_norm([0.0; 4], [1.0; 4], 10.0)).unwrap();
        v["shape"]["obs_norm"]["rms"]["mean"] = serde_json::json!([0.0, 0.0]);
        assert!(err(&v.to_string()).contains("4 finite means"));
    }

    #[test]
    fn greedy_follows_the_larger_logit_and_random_is_fair() {
        let actor = std::sync::Arc::new(Actor::from_policy_json(&policy_json(&[8], "cartpole")).unwrap());
        let obs = [0.01, 0.2, -0.03, 0.1];
        let [l0, l1] = actor.logits(obs);
        let greedy = Policy::Actor { actor, greedy: true };
        assert_eq!(choose(&greedy, obs, &mut EnvRng::for_env(0, 0)), (l1 > l0) as i64);
        let mut rng = EnvRng::for_env(1, 2);
        let rights: i64 = (0..10_000).map(|_| choose(&Policy::Random, obs, &mut rng)).sum();
        assert!((4_700..5_300).contains(&rights), "{rights}");
    }
}

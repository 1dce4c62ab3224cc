//! The trained actor of a finished run, as the playground evaluates it: the worker's
//! `GET /api/runs/{id}/policy` JSON checked and cut down to the actor's layers.
//!
//! The worker stores both networks in one flat vector, actor first, each layer a weight
//! `[in, out]` then a bias `[out]` (`native-worker/src/policy.rs`). The actor's slots are
//! therefore a prefix of that vector, already in the order the WGSL kernel reads them.

use hotlab_shared::rng::EnvRng;
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
}

impl Actor {
    /// Parses and checks the worker's policy JSON.
    pub fn from_policy_json(text: &str) -> Result<Self, PolicyError> {
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
        Ok(Self { widths, params })
    }

    /// Layers (hidden layers + the logits layer).
    pub fn depth(&self) -> usize {
        self.widths.len() - 1
    }

    /// The two logits for one observation (f32, the kernel's order of operations).
    pub fn logits(&self, obs: [f32; 4]) -> [f32; 2] {
        let mut h: Vec<f32> = obs.to_vec();
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
        let mut v: serde_json::Value = serde_json::from_str(&policy_json(&[8], "cartpole")).unwrap();
        v["params"].as_array_mut().unwrap().truncate(10);
        assert!(err(&v.to_string()).starts_with("params:"));
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

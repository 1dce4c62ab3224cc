//! Every [`RunSpec`](crate::spec::RunSpec) field as a form field: its group, its kind and
//! a one-line help, in the order the launch panel shows them. A test keeps this table
//! and the spec's fields the same set.

use crate::spec::{ActionSync, Backend, EnvName, Inference, Precision, Transfer, WaitMode};

/// What a knob's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobKind {
    /// A whole number.
    Int,
    /// A real number.
    Float,
    Bool,
    /// One of these strings.
    Choice(&'static [&'static str]),
    /// Free text.
    Text,
    /// Free text, `null` when empty.
    OptionalText,
    /// Whole numbers separated by commas (`64,64`).
    IntList,
}

/// One field of the launch form.
#[derive(Clone, Copy, Debug)]
pub struct Knob {
    /// The spec's field (the CLI flag in snake_case).
    pub name: &'static str,
    pub group: &'static str,
    pub kind: KnobKind,
    pub help: &'static str,
}

/// The groups, in order (the syllabus's knobs each have their own).
pub const GROUPS: &[&str] = &[
    "Scenario",
    "Envs and steps",
    "Backend, workers and wait",
    "Transfer",
    "Action read-back",
    "Inference",
    "Precision",
    "PPO hyperparameters",
];

const fn knob(name: &'static str, group: &'static str, kind: KnobKind, help: &'static str) -> Knob {
    Knob { name, group, kind, help }
}

use KnobKind::*;

pub const KNOBS: &[Knob] = &[
    knob("env", "Scenario", Choice(EnvName::ALL), "the workload: CartPole-v1, or seed 000's proof search"),
    knob("kb", "Scenario", Text, "proof: a generated world (family:people=N,seed=S) or a .pl file in the data dir"),
    knob("queries", "Scenario", OptionalText, "proof: a query file in the data dir (generated for a world when empty)"),
    knob("proof_depth", "Scenario", Int, "proof: most resolution steps per episode"),
    knob("embed_dim", "Scenario", Int, "proof: width of the policy's index embeddings"),
    knob("device", "Scenario", Text, "cpu, cuda, cuda:N or auto"),
    knob("seed", "Scenario", Int, "seed of every random stream"),
    knob("envs", "Envs and steps", Int, "parallel environments"),
    knob("steps", "Envs and steps", Int, "steps per env per rollout"),
    knob("total_steps", "Envs and steps", Int, "env steps over the whole run"),
    knob("backend", "Backend, workers and wait", Choice(Backend::ALL), "where and how the envs are stepped"),
    knob("workers", "Backend, workers and wait", Int, "threads or processes for threads/subprocess; 0 = one per core"),
    knob("wait", "Backend, workers and wait", Choice(WaitMode::ALL), "how the trainer waits for worker processes"),
    knob("threads", "Backend, workers and wait", Int, "libtorch intra-op threads; 0 = automatic"),
    knob("transfer", "Transfer", Choice(Transfer::ALL), "how observations reach the device for an eager forward"),
    knob("action_sync", "Action read-back", Choice(ActionSync::ALL), "how an eager forward's actions come back"),
    knob(
        "inference",
        "Inference",
        Choice(Inference::ALL),
        "the rollout's forward: libtorch ops, a native one, or a CUDA graph",
    ),
    knob("precision", "Precision", Choice(Precision::ALL), "the update's matmul precision"),
    knob("epochs", "PPO hyperparameters", Int, "passes over each rollout"),
    knob("minibatches", "PPO hyperparameters", Int, "minibatches per epoch; must divide envs × steps"),
    knob("lr", "PPO hyperparameters", Float, "Adam learning rate"),
    knob("anneal_lr", "PPO hyperparameters", Bool, "anneal the learning rate linearly to 0"),
    knob("gamma", "PPO hyperparameters", Float, "discount factor γ"),
    knob("gae_lambda", "PPO hyperparameters", Float, "GAE λ"),
    knob("clip", "PPO hyperparameters", Float, "PPO clip range"),
    knob("ent_coef", "PPO hyperparameters", Float, "entropy bonus coefficient"),
    knob("vf_coef", "PPO hyperparameters", Float, "value loss coefficient"),
    knob("max_grad_norm", "PPO hyperparameters", Float, "global gradient norm clip"),
    knob("hidden", "PPO hyperparameters", IntList, "hidden widths of actor and critic, e.g. 64,64"),
    knob("telemetry_every", "PPO hyperparameters", Int, "gradient norms every K updates; 0 = off"),
];

/// The knob of a spec field.
pub fn find(name: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::RunSpec;

    #[test]
    fn every_spec_field_has_one_knob_in_a_known_group() {
        let spec = serde_json::to_value(RunSpec::default()).unwrap();
        let mut fields: Vec<&str> = spec.as_object().unwrap().keys().map(String::as_str).collect();
        let mut knobs: Vec<&str> = KNOBS.iter().map(|k| k.name).collect();
        fields.sort();
        knobs.sort();
        assert_eq!(fields, knobs);
        assert!(KNOBS.iter().all(|k| GROUPS.contains(&k.group)));
        assert!(GROUPS.iter().all(|g| KNOBS.iter().any(|k| k.group == *g)), "no empty group");
    }
}

//! Every [`RunSpec`](crate::spec::RunSpec) field as a knob: its name (the CLI flag in
//! snake_case, the name of the flat form and of the launch form's field), its path in the
//! nested JSON, its group, its kind and a one-line help, in the order the launch panel
//! shows them. A workload's own settings name their workload: the form shows them only
//! for it. A test keeps this table and the spec's fields the same set.

use crate::spec::{ActionSync, Backend, EnvName, Inference, Precision, RolloutCopy, Transfer, WaitMode};
use serde_json::{Map, Value};

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

impl KnobKind {
    /// A typed value from text (a form's field, a `--change KEY=VALUE`). Text that does
    /// not parse is kept as it is, so that the spec's validation (the one judge) names the
    /// field and what it allows.
    pub fn value(self, text: &str) -> Value {
        let t = text.trim();
        let raw = || Value::String(text.to_string());
        match self {
            KnobKind::Int => t.parse::<u64>().map_or_else(|_| raw(), Value::from),
            KnobKind::Float => t
                .parse::<f64>()
                .ok()
                .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
                .unwrap_or_else(raw),
            KnobKind::Bool => match t {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => raw(),
            },
            KnobKind::Choice(_) | KnobKind::Text => Value::String(t.to_string()),
            KnobKind::OptionalText if t.is_empty() => Value::Null,
            KnobKind::OptionalText => Value::String(t.to_string()),
            KnobKind::IntList => {
                let items: Option<Vec<Value>> =
                    t.split(',').map(|i| i.trim().parse::<u64>().ok().map(Value::from)).collect();
                items.map_or_else(raw, Value::Array)
            }
        }
    }
}

/// One field of the launch form.
#[derive(Clone, Copy, Debug)]
pub struct Knob {
    /// The CLI flag in snake_case (`--total-steps` → `total_steps`).
    pub name: &'static str,
    /// Where it sits in the nested spec (`ppo.lr`, `workload.proof.depth`); `workload` for
    /// the workload's name itself.
    pub path: &'static str,
    /// The workload whose own setting this is (None: every workload's).
    pub workload: Option<EnvName>,
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

const fn knob(name: &'static str, path: &'static str, group: &'static str, kind: KnobKind, help: &'static str) -> Knob {
    Knob { name, path, workload: None, group, kind, help }
}

/// A setting of the proof env's own.
const fn proof(name: &'static str, path: &'static str, kind: KnobKind, help: &'static str) -> Knob {
    Knob { name, path, workload: Some(EnvName::Proof), group: "Scenario", kind, help }
}

/// A setting of the morphogenetic workload's own.
const fn morpho(name: &'static str, path: &'static str, kind: KnobKind, help: &'static str) -> Knob {
    Knob { name, path, workload: Some(EnvName::Morpho), group: "Scenario", kind, help }
}

/// A setting of the world-model workload's own.
const fn dreamer(name: &'static str, path: &'static str, kind: KnobKind, help: &'static str) -> Knob {
    Knob { name, path, workload: Some(EnvName::Dreamer), group: "Scenario", kind, help }
}

use KnobKind::*;

pub const KNOBS: &[Knob] = &[
    knob(
        "env",
        "workload",
        "Scenario",
        Choice(EnvName::ALL),
        "the workload: CartPole-v1, seed 000's proof search, seeds 001–003's growing hosts, or seed 004's world model on pixels",
    ),
    proof(
        "kb",
        "workload.proof.kb",
        Text,
        "proof: a generated world (family:people=N,seed=S) or a .pl file in the data dir",
    ),
    proof(
        "queries",
        "workload.proof.queries",
        OptionalText,
        "proof: a query file in the data dir (generated for a world when empty)",
    ),
    proof("proof_depth", "workload.proof.depth", Int, "proof: most resolution steps per episode"),
    proof("embed_dim", "workload.proof.embed_dim", Int, "proof: width of the policy's index embeddings"),
    morpho("task_seed", "workload.morpho.task_seed", Int, "morpho: the first training task's seed"),
    morpho("tasks", "workload.morpho.tasks", Int, "morpho: training tasks the envs cycle through"),
    morpho("task_images", "workload.morpho.images", Int, "morpho: training images per task (validation: a quarter)"),
    morpho("host_epochs", "workload.morpho.epochs", Int, "morpho: host epochs per episode, one decision each"),
    morpho("host_width", "workload.morpho.width", Int, "morpho: the host's first-stage channels"),
    morpho("rent", "workload.morpho.rent", Float, "morpho: reward lost per host's worth of added parameters"),
    morpho(
        "slots",
        "workload.morpho.slots",
        Choice(crate::spec::SlotPool::ALL),
        "morpho: seeds made and freed per graft (dynamic), or a fixed masked pool (sleeper)",
    ),
    morpho(
        "lifecycle",
        "workload.morpho.lifecycle",
        Choice(crate::spec::LifecycleMode::ALL),
        "morpho: lifecycles and rewards env after env (loop) or in one pass of tensor ops (batched)",
    ),
    morpho(
        "host_exec",
        "workload.morpho.host_exec",
        Choice(crate::spec::HostExec::ALL),
        "morpho: hosts trained one after another (per_env) or as one model with an env dimension (batched)",
    ),
    morpho(
        "host_precision",
        "workload.morpho.host_precision",
        Choice(crate::spec::Precision::ALL),
        "morpho: the hosts' convolutions and matmuls in fp32, bf16, fp16 (CUDA, loss-scaled) or auto",
    ),
    morpho(
        "stream_wait",
        "workload.morpho.stream_wait",
        Choice(crate::spec::StreamWait::ALL),
        "morpho, hosts on CUDA: each host's stream waits before every minibatch (every) or once per epoch (moved)",
    ),
    morpho(
        "shapley_perms",
        "workload.morpho.shapley_perms",
        Int,
        "morpho: orderings sampled for Shapley credit; 0 = exact",
    ),
    dreamer("size", "workload.dreamer.size", Int, "dreamer: width multiplier of every network (1 for a CPU)"),
    dreamer("batch_size", "workload.dreamer.batch", Int, "dreamer: replayed sequences per train step"),
    dreamer("seq_len", "workload.dreamer.seq_len", Int, "dreamer: steps per replayed sequence"),
    dreamer("train_ratio", "workload.dreamer.train_ratio", Float, "dreamer: replayed steps per env step"),
    dreamer("horizon", "workload.dreamer.horizon", Int, "dreamer: steps of each imagined trajectory"),
    dreamer("replay_capacity", "workload.dreamer.capacity", Int, "dreamer: env steps the replay buffer holds"),
    dreamer("prefill", "workload.dreamer.prefill", Int, "dreamer: random env steps before the first train step"),
    dreamer("wm_lr", "workload.dreamer.wm_lr", Float, "dreamer: the world model's learning rate"),
    dreamer("ac_lr", "workload.dreamer.ac_lr", Float, "dreamer: the actor's and critic's learning rate"),
    dreamer(
        "encoder",
        "workload.dreamer.encoder",
        Choice(crate::spec::EncoderMode::ALL),
        "dreamer: the encoder once per timestep (per_step) or once on the whole batch (batched)",
    ),
    dreamer(
        "loss_read",
        "workload.dreamer.loss_read",
        Choice(crate::spec::LossRead::ALL),
        "dreamer: loss terms read every train step (per_item) or once per iteration (deferred)",
    ),
    dreamer(
        "replay",
        "workload.dreamer.replay",
        Choice(crate::spec::ReplayAt::ALL),
        "dreamer: the replay buffer in host memory, pinned host memory (CUDA) or on the model's device",
    ),
    knob("device", "device", "Scenario", Text, "cpu, cuda, cuda:N or auto"),
    knob("seed", "seed", "Scenario", Int, "seed of every random stream"),
    knob("envs", "envs", "Envs and steps", Int, "parallel environments"),
    knob("steps", "steps", "Envs and steps", Int, "steps per env per rollout"),
    knob("total_steps", "total_steps", "Envs and steps", Int, "env steps over the whole run"),
    knob(
        "seconds",
        "seconds",
        "Envs and steps",
        Float,
        "most seconds of training; 0 = no limit (total_steps ends the run)",
    ),
    knob(
        "backend",
        "exec.backend",
        "Backend, workers and wait",
        Choice(Backend::ALL),
        "where and how the envs are stepped",
    ),
    knob(
        "workers",
        "exec.workers",
        "Backend, workers and wait",
        Int,
        "threads or processes for threads/subprocess; 0 = one per core",
    ),
    knob(
        "wait",
        "exec.wait",
        "Backend, workers and wait",
        Choice(WaitMode::ALL),
        "how the trainer waits for worker processes",
    ),
    knob(
        "worker_timeout",
        "exec.worker_timeout_s",
        "Backend, workers and wait",
        Float,
        "seconds a subprocess worker may stay silent before the run fails naming it",
    ),
    knob("threads", "exec.threads", "Backend, workers and wait", Int, "libtorch intra-op threads; 0 = automatic"),
    knob(
        "transfer",
        "exec.transfer",
        "Transfer",
        Choice(Transfer::ALL),
        "how observations reach the device for an eager forward",
    ),
    knob(
        "rollout_copy",
        "exec.rollout_copy",
        "Transfer",
        Choice(RolloutCopy::ALL),
        "how the rollout reaches the device for the update: a copy per field, or per step and field",
    ),
    knob(
        "action_sync",
        "exec.action_sync",
        "Action read-back",
        Choice(ActionSync::ALL),
        "how an eager forward's actions come back",
    ),
    knob(
        "inference",
        "exec.inference",
        "Inference",
        Choice(Inference::ALL),
        "the rollout's forward: libtorch ops, a native one, or a CUDA graph",
    ),
    knob("precision", "exec.precision", "Precision", Choice(Precision::ALL), "the update's matmul precision"),
    knob("epochs", "ppo.epochs", "PPO hyperparameters", Int, "passes over each rollout"),
    knob(
        "minibatches",
        "ppo.minibatches",
        "PPO hyperparameters",
        Int,
        "minibatches per epoch; must divide envs × steps",
    ),
    knob("lr", "ppo.lr", "PPO hyperparameters", Float, "Adam learning rate"),
    knob("anneal_lr", "ppo.anneal_lr", "PPO hyperparameters", Bool, "anneal the learning rate linearly to 0"),
    knob("gamma", "ppo.gamma", "PPO hyperparameters", Float, "discount factor γ"),
    knob("gae_lambda", "ppo.gae_lambda", "PPO hyperparameters", Float, "GAE λ"),
    knob("clip", "ppo.clip", "PPO hyperparameters", Float, "PPO clip range"),
    knob("ent_coef", "ppo.ent_coef", "PPO hyperparameters", Float, "entropy bonus coefficient"),
    knob("vf_coef", "ppo.vf_coef", "PPO hyperparameters", Float, "value loss coefficient"),
    knob("max_grad_norm", "ppo.max_grad_norm", "PPO hyperparameters", Float, "global gradient norm clip"),
    knob("hidden", "ppo.hidden", "PPO hyperparameters", IntList, "hidden widths of actor and critic, e.g. 64,64"),
    knob("telemetry_every", "telemetry.every", "PPO hyperparameters", Int, "gradient norms every K updates (morpho: seeds' norms every K host epochs); 0 = off"),
];

/// The knob of a spec field, by its name (the flag in snake_case).
pub fn find(name: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.name == name)
}

/// The knob at a JSON path of the nested spec.
pub fn at_path(path: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.path == path)
}

impl Knob {
    /// Whether a spec of workload `env` has this knob.
    pub fn applies_to(&self, env: EnvName) -> bool {
        self.workload.is_none_or(|w| w == env)
    }

    /// This knob's value in a nested spec as JSON (the workload's name for `env`).
    pub fn get(&self, spec: &Map<String, Value>) -> Option<Value> {
        if self.path == "workload" {
            return workload_name(spec).map(Value::from);
        }
        get_path(spec, self.path).cloned()
    }

    /// Sets this knob in a nested spec as JSON. Setting `env` to another workload replaces
    /// the workload's settings with that workload's defaults; a workload's own setting is
    /// ignored for another workload.
    pub fn set(&self, spec: &mut Map<String, Value>, value: Value) {
        if self.path == "workload" {
            let wanted = value.as_str().unwrap_or_default().to_string();
            if workload_name(spec).as_deref() != Some(wanted.as_str()) {
                let settings = wanted
                    .parse::<EnvName>()
                    .ok()
                    .and_then(|e| serde_json::to_value(crate::spec::WorkloadSpec::default_for(e)).ok())
                    .unwrap_or_else(|| serde_json::json!({ wanted: {} }));
                spec.insert("workload".into(), settings);
            }
            return;
        }
        if let Some(w) = self.workload {
            if workload_name(spec).as_deref() != Some(w.as_str()) {
                return;
            }
        }
        set_path(spec, self.path, value);
    }
}

/// The workload's name in a nested spec as JSON.
pub fn workload_name(spec: &Map<String, Value>) -> Option<String> {
    match spec.get("workload")? {
        Value::String(name) => Some(name.clone()),
        Value::Object(o) if o.len() == 1 => o.keys().next().cloned(),
        _ => None,
    }
}

/// The value at a dotted path (`ppo.lr`).
pub fn get_path<'a>(spec: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut at = spec.get(parts.next()?)?;
    for part in parts {
        at = at.as_object()?.get(part)?;
    }
    Some(at)
}

/// Sets the value at a dotted path, making the objects on the way.
pub fn set_path(spec: &mut Map<String, Value>, path: &str, value: Value) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap_or_default();
    let mut at = spec;
    for part in parts {
        let next = at.entry(part.to_string()).or_insert_with(|| Value::Object(Map::new()));
        if !next.is_object() {
            *next = Value::Object(Map::new());
        }
        at = next.as_object_mut().expect("made an object above");
    }
    at.insert(last.to_string(), value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::RunSpec;

    /// Every leaf's path of a nested spec as JSON, and `workload` (the workload's name).
    fn leaves(v: &Map<String, Value>, prefix: &str, out: &mut Vec<String>) {
        for (k, v) in v {
            let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            if path == "workload" {
                out.push(path.clone());
            }
            match v {
                Value::Object(o) => leaves(o, &path, out),
                _ => out.push(path),
            }
        }
    }

    #[test]
    fn every_spec_field_has_one_knob_in_a_known_group() {
        for env in EnvName::ALL {
            let env: EnvName = env.parse().unwrap();
            let spec = RunSpec { workload: crate::spec::WorkloadSpec::default_for(env), ..RunSpec::default() };
            let json = serde_json::to_value(spec).unwrap();
            let mut fields = Vec::new();
            leaves(json.as_object().unwrap(), "", &mut fields);
            let mut fields: Vec<&str> = fields.iter().map(String::as_str).collect();
            let mut knobs: Vec<&str> = KNOBS.iter().filter(|k| k.applies_to(env)).map(|k| k.path).collect();
            fields.sort();
            knobs.sort();
            assert_eq!(fields, knobs, "{env}");
        }
        let mut names: Vec<&str> = KNOBS.iter().map(|k| k.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KNOBS.len(), "one knob per name");
        assert!(KNOBS.iter().all(|k| GROUPS.contains(&k.group)));
        assert!(GROUPS.iter().all(|g| KNOBS.iter().any(|k| k.group == *g)), "no empty group");
    }

    #[test]
    fn knobs_read_and_write_the_nested_spec_by_path() {
        let mut spec = serde_json::to_value(RunSpec::default()).unwrap().as_object().unwrap().clone();
        find("lr").unwrap().set(&mut spec, Value::from(0.001));
        assert_eq!(spec["ppo"]["lr"], 0.001);
        find("kb").unwrap().set(&mut spec, Value::from("x.pl"));
        assert!(get_path(&spec, "workload.proof").is_none(), "a proof setting does not apply to cartpole");
        find("env").unwrap().set(&mut spec, Value::from("proof"));
        assert_eq!(find("env").unwrap().get(&spec), Some(Value::from("proof")));
        assert_eq!(find("proof_depth").unwrap().get(&spec), Some(Value::from(10)), "the proof env's defaults");
        find("kb").unwrap().set(&mut spec, Value::from("x.pl"));
        assert_eq!(spec["workload"]["proof"]["kb"], "x.pl");
        let back: RunSpec = serde_json::from_value(Value::Object(spec)).unwrap();
        assert_eq!((back.env(), back.ppo.lr, back.proof().unwrap().kb.as_str()), (EnvName::Proof, 0.001, "x.pl"));
    }
}

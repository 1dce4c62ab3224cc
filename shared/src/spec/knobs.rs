//! The table of knobs: every [`RunSpec`] field as a knob (what a
//! knob is: [`Knob`]): its name (the CLI flag in
//! snake_case, the name of the flat form and of the launch form's field), its path in the
//! nested JSON, its group, its kind, a one-line help and its whole story, in the order the
//! launch panel shows them. The CLI's flags are made from this table. A workload's own
//! settings are its module's knobs ([`crate::workloads`]) and name their workload: the
//! form shows them only for it. A test keeps this table and the spec's fields the same set.

pub use super::workloads::knob::{flag_of, get_path, set_path, workload_name, Knob, KnobKind, Range};
use crate::spec::{
    ActionSync, Backend, ConvLayout, EnvName, Frames, Inference, Norm, Precision, RolloutCopy, RunSpec, SpecError,
    Transfer, UpdateMode, WaitMode, MAX_ENVS, MAX_STEPS,
};
use serde_json::Value;
use std::sync::LazyLock;

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
    Knob { name, path, workload: None, group, kind, help, about: "", range: None }
}

use KnobKind::*;

/// The run's own knobs; `env` first, then (in [`KNOBS`]) the workloads' own settings.
const CORE: &[Knob] = &[
    knob(
        "env",
        "workload",
        "Scenario",
        Choice(EnvName::ALL),
        "the workload: CartPole-v1, seed 000's proof search, seeds 001–003's growing hosts, seed 004's world model on pixels, or any Gymnasium env (gym:ID, e.g. gym:Acrobot-v1)",
    ),
    knob("device", "device", "Scenario", Text, "cpu, cuda, cuda:N or auto")
    .about("cpu, cuda, cuda:N or auto (a GPU if there is one)"),
    knob("seed", "seed", "Scenario", Int, "seed of every random stream"),
    knob("envs", "envs", "Envs and steps", Int, "parallel environments")
    .range(1.0, MAX_ENVS as f64),
    knob("steps", "steps", "Envs and steps", Int, "steps per env per rollout")
    .range(1.0, MAX_STEPS as f64)
    .about("Steps per environment per rollout"),
    knob("total_steps", "total_steps", "Envs and steps", Int, "env steps over the whole run")
    .about("Environment steps over the whole run"),
    knob(
        "seconds",
        "seconds",
        "Envs and steps",
        Float,
        "most seconds of training; 0 = no limit (total_steps ends the run)",
    )
    .range(0.0, 30.0 * 86_400.0)
    .about("Most seconds of training (rollouts and updates): the run ends after the update in progress once they are spent; 0 = no limit"),
    knob(
        "backend",
        "exec.backend",
        "Backend, workers and wait",
        Choice(Backend::ALL),
        "where and how the envs are stepped",
    )
    .about("Env backend: sequential, threads, subprocess, vectorized or device"),
    knob(
        "workers",
        "exec.workers",
        "Backend, workers and wait",
        Int,
        "threads or processes for threads/subprocess; 0 = one per core",
    )
    .range(0.0, 256.0)
    .about("Worker threads/processes for `threads` and `subprocess`; 0 = one per core"),
    knob(
        "wait",
        "exec.wait",
        "Backend, workers and wait",
        Choice(WaitMode::ALL),
        "how the trainer waits for worker processes",
    )
    .about("How to wait for `subprocess` workers: `spin` (busy-poll) or `block` (futex)"),
    knob(
        "worker_timeout",
        "exec.worker_timeout_s",
        "Backend, workers and wait",
        Float,
        "seconds a subprocess worker may stay silent before the run fails naming it",
    )
    .above(0.0, 86_400.0)
    .about("Seconds a `subprocess` worker may stay silent in one step before the run fails naming it, its pid and how long it was silent"),
    knob("threads", "exec.threads", "Backend, workers and wait", Int, "libtorch intra-op threads; 0 = automatic")
    .range(0.0, 1024.0)
    .about("libtorch intra-op threads; 0 = automatic: for the MLP 1 for minibatches under 1024 rows or beside env workers (threads, subprocess), else one per core; for the CNN (an image) one per core; OMP_NUM_THREADS, where set, caps one per core"),
    knob(
        "transfer",
        "exec.transfer",
        "Transfer",
        Choice(Transfer::ALL),
        "how observations reach the device for an eager forward",
    )
    .about("Observations to the device for an eager forward: per_tensor, packed or pinned"),
    knob(
        "rollout_copy",
        "exec.rollout_copy",
        "Transfer",
        Choice(RolloutCopy::ALL),
        "how the rollout reaches the device for the update: a copy per field, or per step and field",
    )
    .about("The rollout to the device for the update: whole (a copy per field) or per_step (a copy per step and field, concatenated there)"),
    knob(
        "frames",
        "exec.frames",
        "Transfer",
        Choice(Frames::ALL),
        "how an image observation reaches the device: its bytes, or floats made on the host",
    )
    .about("An image observation (the CNN policy's) to the device: bytes (its bytes, converted to float and scaled by the encoder there, once per batch) or float (converted to float32 on the host first: 4× the bytes moved, and a host pass over every frame); no effect on other observations"),
    knob(
        "action_sync",
        "exec.action_sync",
        "Action read-back",
        Choice(ActionSync::ALL),
        "how an eager forward's actions come back",
    )
    .about("Actions back from an eager forward: per_item (a read per element) or stacked"),
    knob(
        "inference",
        "exec.inference",
        "Inference",
        Choice(Inference::ALL),
        "the rollout's forward: libtorch ops, a native one, or a CUDA graph",
    )
    .about("Rollout forward: `fused` (native, no per-op dispatch) or `eager` (libtorch ops)"),
    knob(
        "update",
        "exec.update",
        "Inference",
        Choice(UpdateMode::ALL),
        "the PPO update: op by op from the host, or one CUDA graph replayed per iteration (with hotlab's own loss and Adam kernels: graph_fused)",
    )
    .about("The PPO update: `eager` (each minibatch's ops dispatched from the host), `graph` (CUDA: the whole update captured once and replayed, its Adam step count and learning rate on the device) or `graph_fused` (graph, with the loss's gradient and the clipped Adam step in hotlab's own kernels; PPO's MLP only)"),
    knob("precision", "exec.precision", "Precision", Choice(Precision::ALL), "the update's matmul precision")
    .about("The update's matmul precision: fp32, fp16 (CUDA; dynamic loss scaling), bf16, or auto (bf16 where the device supports it, else fp32); master weights stay fp32"),
    knob(
        "conv_layout",
        "exec.conv_layout",
        "Precision",
        Choice(ConvLayout::ALL),
        "how the CNN's convolutions lay out images in memory: nchw, nhwc (channels last) or auto",
    )
    .about("How the CNN policy's convolutions lay out their images in memory: nchw (channels first, libtorch's default), nhwc (channels last: oneDNN's CPU convolutions run without reordering) or auto (nhwc on the CPU, nchw on a GPU); the same products, other kernels; no effect on the MLP"),
    knob("epochs", "ppo.epochs", "PPO hyperparameters", Int, "passes over each rollout")
    .range(1.0, 1000.0),
    knob(
        "minibatches",
        "ppo.minibatches",
        "PPO hyperparameters",
        Int,
        "minibatches per epoch; must divide envs × steps",
    ),
    knob("lr", "ppo.lr", "PPO hyperparameters", Float, "Adam learning rate")
    .above(0.0, 1.0),
    knob("anneal_lr", "ppo.anneal_lr", "PPO hyperparameters", Bool, "anneal the learning rate linearly to 0")
    .about("Anneal the learning rate linearly to 0 (`--no-anneal-lr` keeps it constant)"),
    knob("gamma", "ppo.gamma", "PPO hyperparameters", Float, "discount factor γ")
    .range(0.0, 1.0)
    .about("Discount factor"),
    knob("gae_lambda", "ppo.gae_lambda", "PPO hyperparameters", Float, "GAE λ")
    .range(0.0, 1.0)
    .about("GAE lambda"),
    knob("clip", "ppo.clip", "PPO hyperparameters", Float, "PPO clip range")
    .above(0.0, 10.0),
    knob("ent_coef", "ppo.ent_coef", "PPO hyperparameters", Float, "entropy bonus coefficient")
    .range(0.0, 10.0)
    .about("Entropy coefficient"),
    knob("vf_coef", "ppo.vf_coef", "PPO hyperparameters", Float, "value loss coefficient")
    .range(0.0, 100.0),
    knob("max_grad_norm", "ppo.max_grad_norm", "PPO hyperparameters", Float, "global gradient norm clip")
    .above(0.0, 1e6)
    .about("Gradient norm clip"),
    knob("hidden", "ppo.hidden", "PPO hyperparameters", IntList, "hidden widths of actor and critic, e.g. 64,64")
    .range(1.0, 4096.0)
    .about("Hidden layer widths of actor and critic, comma-separated"),
    knob("obs_norm", "ppo.obs_norm", "PPO hyperparameters", Choice(Norm::ALL), "normalize observations (auto: on for Box actions)")
    .about("Observations normalized by their running mean and variance (Gymnasium's NormalizeObservation, its update rule, run by the trainer on each step's whole batch), then clipped at ±10; the statistics go into the checkpoint and eval uses them. auto: on for an env with a Box action space and a vector of floats to observe (as CleanRL's ppo_continuous_action.py), off for the others (pixels among them)"),
    knob("reward_norm", "ppo.reward_norm", "PPO hyperparameters", Choice(Norm::ALL), "normalize rewards (auto: on for Box actions)")
    .about("Rewards divided by the running standard deviation of each env's discounted return (Gymnasium's NormalizeReward with --gamma, run by the trainer on each step's whole batch), then clipped at ±10; episode returns are reported unnormalized. auto: on for an env with a Box action space, off for the others"),
    knob("telemetry_every", "telemetry.every", "PPO hyperparameters", Int, "gradient norms every K updates; 0 = off")
    .range(0.0, 1_000_000.0)
    .about("Global and per-layer gradient norms every K updates, published from a background thread (telemetry.jsonl with --out); 0 = off. (The morpho env reads its seeds' gradient norms, which its agent observes, after every host epoch whatever this says)"),
];

/// Every knob: `env`, each workload's settings (their knobs are their modules', in
/// [`crate::workloads`]), then the run's own, in the order the launch panel shows them.
pub static KNOBS: LazyLock<Vec<Knob>> = LazyLock::new(|| {
    let (env, rest) = CORE.split_at(1);
    env.iter().chain(crate::workloads::knobs()).chain(rest).copied().collect()
});

/// Checks every run knob with a fixed range (PPO's where PPO trains the workload), in the
/// table's order; the first bad one is named. (A workload's own settings are checked by
/// [`WorkloadSpec::validate`](crate::spec::WorkloadSpec::validate).)
pub fn check_ranges(spec: &RunSpec) -> Result<(), SpecError> {
    let json = serde_json::to_value(spec).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default();
    let ppo = spec.env().uses_ppo();
    for knob in CORE.iter().filter(|k| k.range.is_some()) {
        if !ppo && knob.path.starts_with("ppo.") {
            continue;
        }
        if let Some(v) = knob.get(&json) {
            knob.check(&v)?;
        }
    }
    Ok(())
}

/// The knob of a spec field, by its name (the flag in snake_case).
pub fn find(name: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.name == name)
}

/// The knob at a JSON path of the nested spec.
pub fn at_path(path: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.path == path)
}

/// `spec` with knobs set (a knob and its typed value: the CLI's flags, a form's fields):
/// `env` first, so that a workload's settings land in the workload asked for wherever it
/// was named; a workload's own setting for another workload is refused, naming it.
pub fn apply(spec: RunSpec, given: &[(&Knob, Value)]) -> Result<RunSpec, SpecError> {
    if given.is_empty() {
        return Ok(spec);
    }
    let mut json = serde_json::to_value(&spec).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default();
    let (env, rest): (Vec<_>, Vec<_>) = given.iter().partition(|(k, _)| k.path == "workload");
    for (knob, v) in env {
        knob.set(&mut json, v.clone());
    }
    let name = workload_name(&json).unwrap_or_default();
    let env: EnvName = name.parse().map_err(|m| SpecError::new("env", m))?;
    for (knob, v) in rest {
        if !knob.applies_to(env) {
            let owner = knob.workload.map_or("another workload", |w| w.as_str());
            return Err(SpecError::new(
                knob.name,
                format!("is a setting of --env {owner}, and this run's env is {env}"),
            ));
        }
        if v.is_null() && knob.kind != KnobKind::OptionalText {
            // JSON has no NaN or infinity: `Value::from` made them null.
            return Err(SpecError::new(knob.name, "must be a finite number"));
        }
        knob.set(&mut json, v.clone());
    }
    serde_json::from_value(Value::Object(json)).map_err(|e| SpecError::new("env", e.to_string()))
}

/// `spec` with knobs set by name from text, as flags write them (a preset's list): each
/// name a knob (an unknown one is refused, naming it), each text its kind's value; then as
/// [`apply`].
pub fn apply_text(spec: RunSpec, pairs: &[(&str, &str)]) -> Result<RunSpec, SpecError> {
    let given = pairs
        .iter()
        .map(|(name, text)| {
            let knob = find(name).ok_or_else(|| SpecError::new(name, "is not a knob"))?;
            Ok((knob, knob.kind.value(text)))
        })
        .collect::<Result<Vec<_>, SpecError>>()?;
    apply(spec, &given)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    /// Every leaf's path of a nested spec as JSON, and `workload` (the workload's name).
    fn leaves(v: &Map<String, Value>, prefix: &str, out: &mut Vec<String>) {
        for (k, v) in v {
            let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            if path == "workload" {
                out.push(path.clone());
            }
            let object_knob = KNOBS.iter().any(|k| k.path == path && k.kind == KnobKind::Object);
            match v {
                Value::Object(o) if !object_knob => leaves(o, &path, out),
                _ => out.push(path),
            }
        }
    }

    /// `--env NAME:VALUE` names a workload that takes an argument (gym's id) and sets its
    /// argument's knob, keeping its other settings when it is already the workload; a
    /// workload without an argument is not named so.
    #[test]
    fn a_workload_named_with_an_argument_sets_its_knob() {
        let env = KNOBS.iter().find(|k| k.path == "workload").unwrap();
        let to_json = |spec: &RunSpec| serde_json::to_value(spec).unwrap().as_object().unwrap().clone();
        let mut spec = to_json(&RunSpec::default());
        env.set(&mut spec, Value::from("gym:Acrobot-v1"));
        assert_eq!(
            spec["workload"],
            serde_json::json!({"gym": {"id": "Acrobot-v1", "python": null, "kwargs": {}, "wrappers": "auto"}})
        );
        spec["workload"]["gym"]["python"] = Value::from("/opt/py");
        env.set(&mut spec, Value::from("gym:my_envs:make"));
        assert_eq!(spec["workload"]["gym"]["id"], "my_envs:make", "the id is all after the first ':'");
        assert_eq!(spec["workload"]["gym"]["python"], "/opt/py", "the gym workload's other settings kept");
        let (gym, knob, id) = EnvName::with_argument("gym:CartPole-v1").unwrap();
        assert_eq!((gym, knob.name, id), (EnvName::Gym, "gym_id", "CartPole-v1"));
        assert!(EnvName::with_argument("cartpole:x").is_none(), "cartpole takes no argument");
        assert!(EnvName::with_argument("gym").is_none() && EnvName::with_argument("nothing:x").is_none());
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
        assert_eq!(
            (back.env(), back.ppo.lr, back.settings::<crate::workloads::ProofSpec>().unwrap().kb.as_str()),
            (EnvName::Proof, 0.001, "x.pl")
        );
    }

    /// A spec of workload `env` with one knob set (by JSON), validated.
    fn with(env: EnvName, knob: &Knob, v: Value) -> Result<RunSpec, SpecError> {
        let base = RunSpec { workload: crate::spec::WorkloadSpec::default_for(env), ..RunSpec::default() };
        let mut json = serde_json::to_value(base).unwrap().as_object().unwrap().clone();
        let v = if knob.kind == KnobKind::IntList { Value::Array(vec![v]) } else { v };
        knob.set(&mut json, v);
        let spec: RunSpec =
            serde_json::from_value(Value::Object(json)).map_err(|e| SpecError::new(knob.name, e.to_string()))?;
        spec.validate().map(|_| spec)
    }

    /// The knobs that have a range, by name: a range deleted (or added) fails here, not
    /// silently in the count of ranges checked below.
    const RANGED: &[&str] = &[
        "proof_depth",
        "embed_dim",
        "tasks",
        "task_images",
        "host_epochs",
        "host_width",
        "rent",
        "shaping",
        "clone_grower",
        "shapley_perms",
        "curriculum_from",
        "curriculum_episodes",
        "size",
        "batch_size",
        "seq_len",
        "train_ratio",
        "horizon",
        "replay_capacity",
        "prefill",
        "wm_lr",
        "ac_lr",
        "envpool_threads",
        "envs",
        "steps",
        "seconds",
        "workers",
        "worker_timeout",
        "threads",
        "epochs",
        "lr",
        "gamma",
        "gae_lambda",
        "clip",
        "ent_coef",
        "vf_coef",
        "max_grad_norm",
        "hidden",
        "telemetry_every",
    ];

    /// A knob refused at a bound of its range by a rule with another knob (the message's
    /// start): the only refusals at a bound that name the knob itself.
    const HARDER: &[(&str, &str)] = &[
        ("envs", "envs × steps must be at most"),
        ("steps", "envs × steps must be at most"),
        ("workers", "must be at most envs ="),
    ];

    /// Each knob's range is what validation allows: its bounds pass (where another knob
    /// bounds it harder, the refusal names that other knob), just past them is refused
    /// naming the knob with its range's words, on every workload the knob applies to;
    /// every ranged knob is checked on at least one workload.
    #[test]
    fn every_range_is_enforced_at_its_bounds_naming_the_knob() {
        let ranged: Vec<&str> = KNOBS.iter().filter(|k| k.range.is_some()).map(|k| k.name).collect();
        assert_eq!(ranged, RANGED, "the ranged knobs");
        let mut checked = std::collections::BTreeSet::new();
        for env in EnvName::ALL.iter().map(|e| e.parse::<EnvName>().unwrap()) {
            let ppo = env.uses_ppo();
            for knob in KNOBS.iter().filter(|k| k.applies_to(env) && (ppo || !k.path.starts_with("ppo."))) {
                let Some(r) = knob.range else { continue };
                let int = matches!(knob.kind, KnobKind::Int | KnobKind::IntList);
                let step = if int { 1.0 } else { 1e-9 * r.hi.max(1.0) };
                let number = |x: f64| if int { Value::from(x as u64) } else { Value::from(x) };
                let words = |m: &str| m.starts_with("must be between") || m.starts_with("must be in ");
                let refused = |x: f64| {
                    let e = with(env, knob, number(x)).expect_err(&format!("{env}: {} = {x} is allowed", knob.name));
                    assert_eq!(e.field, knob.name, "{env}: {} = {x}: {}", knob.name, e.message);
                    assert!(
                        words(&e.message),
                        "{env}: {} = {x} refused, but not by its range: {}",
                        knob.name,
                        e.message
                    );
                };
                refused(r.hi + step);
                if r.lo_open || r.lo > 0.0 {
                    refused(if r.lo_open { r.lo } else { r.lo - step });
                }
                let lo = if r.lo_open { r.lo + step } else { r.lo };
                // The bounds themselves pass, unless another knob bounds this one harder
                // (workers ≤ envs, steps × envs ≤ the rollout's cap): then that one is named.
                for x in [lo, r.hi] {
                    if let Err(e) = with(env, knob, number(x)) {
                        let harder = HARDER.iter().any(|(k, m)| *k == knob.name && e.message.starts_with(m));
                        assert!(
                            e.field != knob.name || harder,
                            "{env}: {} = {x} is in its range, yet refused: {}",
                            knob.name,
                            e.message
                        );
                    }
                }
                checked.insert(knob.name);
            }
        }
        let unchecked: Vec<&&str> = RANGED.iter().filter(|k| !checked.contains(*k)).collect();
        assert!(unchecked.is_empty(), "ranged knobs no workload checks: {unchecked:?}");
    }
}

//! `hotlab-report`: what a run's profile says and how it is proved. This root is the
//! bottleneck report; [`audit`] is a change to a run and its verdicts against this
//! machine's noise and the report's bound; [`lessons`] is the catalogue's lessons, each a
//! baseline, its fixes, a signature and a budget, run through the audit.
//!
//! The bottleneck report: a pure function of a profile and its spec, so the worker's CLI
//! and the web UI show the same ranking, split and advice.
//!
//! - A ranked table like seed 000's: phase, time, % of wall, calls, time per call, diagnosis.
//! - The data / forward / backward split with seed 004's interpretation table.
//! - Recommendations: the knob to turn, the measured signature that triggered it, and the
//!   Amdahl bound on the gain (removing a phase of share p speeds the run up ≤ 1/(1−p)).

pub mod audit;
pub mod lessons;

use hotlab_core::advice::amdahl;
use hotlab_core::advice::Recommendation;
use hotlab_core::choices::{ActionSync, Backend, Inference, Rnn, RnnUpdate, RolloutCopy, Transfer, WaitMode};
use hotlab_core::profile::{Phase, PhaseKind, Profile};
use hotlab_spec::RunSpec;
use hotlab_specs::phase_info;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// One row of the ranked table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub phase: Phase,
    pub wall_s: f64,
    pub percent: f64,
    pub calls: u64,
    pub per_call_us: f64,
    pub diagnosis: String,
}

/// Seed 004's coarse split.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Env stepping, waiting, transfers, read-back, storage, GAE.
    pub data_pct: f64,
    /// Rollout forward and the update's forward.
    pub forward_pct: f64,
    /// Backward and optimizer.
    pub backward_pct: f64,
    pub verdict: String,
    pub next_action: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub wall_s: f64,
    pub env_steps: u64,
    pub steps_per_s: f64,
    pub rows: Vec<Row>,
    pub split: Split,
    pub recommendations: Vec<Recommendation>,
    /// The profiler's own cost, % of wall.
    pub profiler_overhead_pct: f64,
    /// Steps/s in the run's steady window (after its warm-up iterations: start-up,
    /// compilation, capture, prefill), where the run went past it: what audits compare.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_sps: Option<f64>,
    /// What the report could not see, and what measuring cost (a script's probe), in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A phase's line in the table: the workload's, where it knows more (its own phases, what
/// its settings make of them), else the report's own.
fn diagnosis(p: Phase, profile: &Profile, spec: &RunSpec) -> String {
    if let Some(line) = spec.workload.diagnosis(p, profile, &spec.context()) {
        return line;
    }
    let c = &profile.counters;
    let steps = (c.env_steps / spec.envs.max(1) as u64).max(1);
    match p {
        Phase::ENV_STEP => format!("{} backend, {} envs", spec.exec.backend, spec.envs),
        Phase::ENV_WAIT => format!(
            "waiting on {} workers: {} round trips, {} spin polls ({:.1} per step)",
            spec.exec.backend,
            c.ipc_round_trips,
            c.spin_iterations,
            c.spin_iterations as f64 / steps as f64
        ),
        Phase::OBS_TRANSFER => {
            format!(
                "{} host→device copies ({:.1} per step), {} bytes",
                c.h2d_copies,
                c.h2d_copies as f64 / steps as f64,
                c.h2d_bytes
            )
        }
        Phase::ACTION_READBACK => {
            format!(
                "{} host syncs ({:.1} per step), {} device→host copies",
                c.host_syncs,
                c.host_syncs as f64 / steps as f64,
                c.d2h_copies
            )
        }
        Phase::POLICY_FORWARD if cnn_ran(profile) => {
            format!("eager inference (the CNN's forward, which has no fused form), batch {}", spec.envs)
        }
        Phase::POLICY_FORWARD if profile.eager_only => {
            format!(
                "eager inference (a policy whose forward has no fused form: a Dict's or a recurrent one), batch {}",
                spec.envs
            )
        }
        Phase::POLICY_FORWARD => format!("{} inference, batch {}", spec.inference().as_str(), spec.envs),
        Phase::UPDATE_GRAPH => match c.update_replays {
            0 => "the captured update's ops launched eagerly (its warm-up: no replay yet)".into(),
            n => format!(
                "{n} replays of the captured update, each one host launch for {} kernels and copies ({} in all)",
                c.update_launches / n,
                c.update_launches
            ),
        },
        Phase::UPDATE_FORWARD | Phase::BACKWARD | Phase::OPTIMIZER => {
            format!(
                "minibatch {} × {} epochs × {} minibatches",
                spec.minibatch_size(),
                spec.ppo.epochs,
                spec.ppo.minibatches
            )
        }
        p => hotlab_specs::phase_info(p).map_or_else(|| p.name().replace('_', " "), |i| i.about.to_string()),
    }
}

fn split(profile: &Profile, spec: &RunSpec) -> Split {
    let sum = |kind: PhaseKind| {
        let of_kind = |p: Phase| phase_info(p).is_some_and(|i| i.kind == kind);
        profile.phases.iter().filter(|t| of_kind(t.phase)).map(|t| t.wall_s).sum::<f64>()
    };
    let own = sum(PhaseKind::EnvPart);
    let data = own + sum(PhaseKind::Data);
    let world = sum(PhaseKind::Model);
    let fwd = world + sum(PhaseKind::Forward);
    let bwd = sum(PhaseKind::Backward);
    let total = (data + fwd + bwd).max(1e-12);
    let (d, f, b) = (100.0 * data / total, 100.0 * fwd / total, 100.0 * bwd / total);
    let in_thread = matches!(spec.exec.backend, Backend::Sequential | Backend::Vectorized);
    // The backends that spread envs over the cores, of those this workload runs on.
    let spread: Vec<&str> = [Backend::Threads, Backend::Subprocess]
        .into_iter()
        .filter(|b| spec.workload.name().backends().contains(b))
        .map(|b| b.as_str())
        .collect();
    let spread_action = format!("spread the envs over the cores (--backend {})", spread.join(" or "));
    let (verdict, next_action) = if d > 50.0 && own > 0.5 * data {
        (
            "data > 50%: the envs' own compute (their own parts, rows above) is the bottleneck",
            if in_thread && !spread.is_empty() {
                spread_action.as_str()
            } else {
                "it is the envs' work itself: a cheaper env step (the env's own parts, rows above)"
            },
        )
    } else if d > 50.0 {
        (
            "data > 50%: collecting and moving data is the bottleneck",
            "look at env stepping, worker waits and transfers (rows above)",
        )
    } else if f > 50.0 && world > 0.5 * fwd {
        (
            "forward > 50%: the world model's forward passes are the bottleneck",
            "compare encoder, RSSM, decoder and imagination (rows above); batch the encoder over timesteps",
        )
    } else if f > 50.0 && profile.phase(Phase::POLICY_FORWARD) >= profile.phase(Phase::UPDATE_FORWARD) {
        (
            "forward > 50%: the rollout's forward passes are the bottleneck",
            match profile.eager_only || cnn_ran(profile) {
                // This policy has no fused forward: batching is the lever left.
                true => "batch more envs per forward",
                false => "fuse the rollout forward, or batch more envs per forward",
            },
        )
    } else if f > 50.0 {
        (
            "forward > 50%: the update's forward passes are the bottleneck",
            match profile.emulated {
                Some(_) => "at small minibatches that is per-op dispatch (larger minibatches, fewer ops); at large ones, arithmetic, which this device emulates in bf16 (fp32 is faster here)",
                None => "at small minibatches that is per-op dispatch (larger minibatches, fewer ops); at large ones, arithmetic (bf16 where the device has it natively: a GPU from Ampere, a CPU with AVX512-BF16)",
            },
        )
    } else if b > 50.0 {
        (
            "backward > 50%: the backward pass and optimizer are the bottleneck",
            "check the model size and the per-op cost of small minibatches",
        )
    } else {
        ("balanced: no phase dominates", "increase the batch (more envs, larger minibatches), then profile again")
    };
    Split { data_pct: d, forward_pct: f, backward_pct: b, verdict: verdict.into(), next_action: next_action.into() }
}

/// The recommendations the rules find, each with its ceiling from the share of the phase it
/// cuts (Amdahl's law).
struct Found<'a> {
    profile: &'a Profile,
    /// Env steps per env: each env's share of the run's steps.
    steps: f64,
    out: Vec<Recommendation>,
}

impl Found<'_> {
    fn add(&mut self, knob: &str, phase: Phase, signature: String) {
        let max_speedup = amdahl(self.profile.share(phase));
        self.out.push(Recommendation::bounded(knob, phase, max_speedup, signature));
    }

    /// A transfer made item by item (`per_item`: the knob is at that value): `knob` where
    /// its phase takes at least 3 % of wall and it happens `count` times, over 1.5 per step.
    fn per_item(&mut self, per_item: bool, knob: &str, phase: Phase, count: u64, what: &str) {
        let share = self.profile.share(phase);
        let per_step = count as f64 / self.steps;
        if per_item && share >= 0.03 && per_step > 1.5 {
            self.add(knob, phase, format!("{per_step:.1} {what} per step, {:.0}% of wall", 100.0 * share));
        }
    }
}

/// Every rule's recommendation for this profile, the workload's own among them, the largest
/// ceiling first.
fn recommend(profile: &Profile, spec: &RunSpec) -> Vec<Recommendation> {
    let steps = (profile.counters.env_steps / spec.envs.max(1) as u64).max(1) as f64;
    let mut found = Found { profile, steps, out: Vec::new() };
    env_rules(&mut found, spec);
    transfer_rules(&mut found, spec);
    forward_rules(&mut found, spec);
    recurrent_rules(&mut found, spec);
    precision_rules(&mut found);
    let mut out = found.out;
    spec.workload.recommend(profile, &spec.context(), &mut out);
    out.sort_by(|a, b| b.max_speedup.total_cmp(&a.max_speedup));
    out
}

/// Where envs step: waiting on workers, spinning while waiting, a per-env loop.
fn env_rules(found: &mut Found<'_>, spec: &RunSpec) {
    let (profile, c) = (found.profile, &found.profile.counters);
    let wait = profile.share(Phase::ENV_WAIT);
    if matches!(spec.exec.backend, Backend::Subprocess | Backend::Threads) && wait >= 0.10 {
        let spin = if spec.exec.backend == Backend::Subprocess && spec.exec.wait == WaitMode::Spin {
            format!(", {} spin polls", c.spin_iterations)
        } else {
            String::new()
        };
        found.add(
            "--backend vectorized",
            Phase::ENV_WAIT,
            format!(
                "{:.0}% of wall waiting on {} workers ({} round trips{spin})",
                100.0 * wait,
                spec.exec.backend,
                c.ipc_round_trips
            ),
        );
    }
    if spec.exec.backend == Backend::Subprocess && spec.exec.wait == WaitMode::Spin && wait >= 0.10 {
        found.add(
            "--wait block",
            Phase::ENV_WAIT,
            format!("{} spin polls while waiting ({:.0}% of wall)", c.spin_iterations, 100.0 * wait),
        );
    }
    let env = profile.share(Phase::ENV_STEP);
    if spec.exec.backend == Backend::Sequential && env >= 0.15 {
        found.add(
            "--backend vectorized",
            Phase::ENV_STEP,
            format!("{:.0}% of wall in a per-env loop over {} envs", 100.0 * env, spec.envs),
        );
    }
}

/// What crosses between host and device: actions read back one by one, observations copied
/// per tensor or per step.
fn transfer_rules(found: &mut Found<'_>, spec: &RunSpec) {
    let (profile, c) = (found.profile, &found.profile.counters);
    let exec = &spec.exec;
    let stacked = exec.action_sync == ActionSync::PerItem;
    found.per_item(stacked, "--action-sync stacked", Phase::ACTION_READBACK, c.host_syncs, "host syncs");
    let packed = exec.transfer == Transfer::PerTensor;
    found.per_item(packed, "--transfer packed", Phase::OBS_TRANSFER, c.h2d_copies, "host→device copies");
    let transfer = profile.share(Phase::OBS_TRANSFER);
    let updates = (c.env_steps / spec.batch_size().max(1) as u64).max(1) as f64;
    let copies_per_update = c.h2d_copies as f64 / updates;
    // An eager forward moved each observation to the device already: a rollout copied from
    // the host's buffer at update time moves it a second time.
    let eager = spec.exec.backend != Backend::Device
        && (cnn_ran(profile) || profile.eager_only || spec.inference() == Inference::Eager);
    if spec.exec.rollout_copy != RolloutCopy::Kept && eager && transfer >= 0.03 {
        let signature = format!(
            "{:.0} host→device bytes per env step with an eager forward, {:.0}% of wall: each observation crosses to the device for the forward and again, from the host's rollout buffer, for the update",
            c.h2d_bytes as f64 / c.env_steps.max(1) as f64,
            100.0 * transfer
        );
        let advice = Recommendation::bounded("--rollout-copy kept", Phase::OBS_TRANSFER, amdahl(transfer), signature);
        found.out.push(advice.teaching(11, "rollout-on-host"));
    } else if spec.exec.rollout_copy == RolloutCopy::PerStep
        && transfer >= 0.03
        && copies_per_update > 2.0 * spec.steps as f64
    {
        found.add(
            "--rollout-copy whole",
            Phase::OBS_TRANSFER,
            format!(
                "{copies_per_update:.0} host→device copies per update (a copy per step and field), {:.0}% of wall",
                100.0 * transfer
            ),
        );
    }
}

/// Whether the run's policy was the CNN, as measured: only its agent times `obs_convert`
/// (its images go to float on the device). It is chosen from the env's observation when
/// the run starts, so the spec cannot say; its forward runs eager whatever `--inference`
/// asks, having no fused form.
fn cnn_ran(profile: &Profile) -> bool {
    profile.phase(Phase::OBS_CONVERT) > 0.0
}

/// The rollout's forward: eager where a fused forward exists, per-step launches on a GPU
/// where a graph removes them.
fn forward_rules(found: &mut Found<'_>, spec: &RunSpec) {
    let profile = found.profile;
    let forward = profile.share(Phase::POLICY_FORWARD);
    // Neither the CNN, a Dict's combined policy nor a recurrent one has a fused forward
    // (their learners mark their profiles; a profile stored before that mark was kept shows
    // the CNN by its `obs_convert`, the recurrent policy by its spec).
    if spec.exec.inference == Inference::Eager
        && spec.env().fixed_inference().is_none()
        && !profile.eager_only
        && !cnn_ran(profile)
        && spec.ppo.rnn == Rnn::None
        && spec.exec.backend != Backend::Device
        && forward >= 0.10
    {
        found.add(
            "--inference fused",
            Phase::POLICY_FORWARD,
            format!("{:.0}% of wall in the eager rollout forward (batch {})", 100.0 * forward, spec.envs),
        );
    }
    // On a GPU the device rollout's per-step launches are the cost a graph removes.
    let step = forward + profile.share(Phase::ENV_STEP) + profile.share(Phase::ROLLOUT_STORE);
    if spec.exec.backend == Backend::Device
        && spec.device.starts_with("cuda")
        && spec.exec.inference != Inference::Graph
        && step >= 0.10
    {
        found.add(
            "--inference graph",
            Phase::POLICY_FORWARD,
            format!("{:.0}% of wall in the rollout's per-step launches (forward, env step, storage)", 100.0 * step),
        );
    }
}

/// A recurrent policy's update that calls its cell once per step (catalogue row 12): where
/// the core and the update's forward and backward around it take a tenth of the wall, one
/// call per stretch between episode starts cuts them (the bound: their whole share).
fn recurrent_rules(found: &mut Found<'_>, spec: &RunSpec) {
    let profile = found.profile;
    if spec.ppo.rnn == Rnn::None || spec.exec.rnn_update != RnnUpdate::Stepped {
        return;
    }
    let share: f64 =
        [Phase::UPDATE_CORE, Phase::UPDATE_FORWARD, Phase::BACKWARD].iter().map(|&p| profile.share(p)).sum();
    let calls = profile.calls(Phase::UPDATE_CORE) as f64 / found.steps.max(1.0);
    if share >= 0.10 && profile.calls(Phase::UPDATE_CORE) > 0 {
        found.out.push(
            Recommendation::bounded(
                "--rnn-update sequence",
                Phase::UPDATE_CORE,
                amdahl(share),
                format!(
                    "{:.0}% of wall in the update's forward and backward, its {} cell called once per step ({calls:.1} calls per env's step)",
                    100.0 * share,
                    spec.ppo.rnn
                ),
            )
            .teaching(12, "rnn-sequence"),
        );
    }
}

/// An update whose products the device emulates (bf16 on a CPU without AVX512-BF16, catalogue
/// row 6): where its forward and backward take a tenth of the wall, fp32 cuts them (the
/// bound: their whole share; emulated bf16 runs about 10× fp32's time there).
fn precision_rules(found: &mut Found<'_>) {
    let profile = found.profile;
    let Some(kind) = profile.emulated.as_deref() else { return };
    let share: f64 = [Phase::UPDATE_FORWARD, Phase::BACKWARD, Phase::OPTIMIZER].iter().map(|&p| profile.share(p)).sum();
    if share >= 0.10 {
        found.out.push(
            Recommendation::bounded(
                "--precision fp32",
                Phase::BACKWARD,
                amdahl(share),
                format!(
                    "{:.0}% of wall in an update whose {kind} products this device emulates (it has no {kind} instructions)",
                    100.0 * share
                ),
            )
            .teaching(6, "precision"),
        );
    }
}

/// The report of a profile.
pub fn analyze(profile: &Profile, spec: &RunSpec) -> Report {
    let wall = profile.wall_s.max(1e-12);
    let mut rows: Vec<Row> = profile
        .phases
        .iter()
        .filter(|t| t.wall_s > 0.0)
        .map(|t| Row {
            phase: t.phase,
            wall_s: t.wall_s,
            percent: 100.0 * t.wall_s / wall,
            calls: t.calls,
            per_call_us: if t.calls > 0 { 1e6 * t.wall_s / t.calls as f64 } else { 0.0 },
            diagnosis: diagnosis(t.phase, profile, spec),
        })
        .collect();
    rows.sort_by(|a, b| b.wall_s.total_cmp(&a.wall_s));
    Report {
        wall_s: profile.wall_s,
        env_steps: profile.counters.env_steps,
        steps_per_s: profile.counters.env_steps as f64 / wall,
        rows,
        split: split(profile, spec),
        recommendations: recommend(profile, spec),
        profiler_overhead_pct: 100.0 * profile.overhead_s / wall,
        steady_sps: None,
        notes: notes(profile),
    }
}

/// What a script's probe could not measure, and what it cost.
fn notes(profile: &Profile) -> Vec<String> {
    let Some(s) = &profile.script else { return Vec::new() };
    let mut out: Vec<String> =
        s.not_measured.iter().map(|(what, why)| format!("not measured: {what}: {why}")).collect();
    let wall = profile.wall_s.max(1e-12);
    let steps = profile.counters.env_steps as f64;
    let without = (wall - profile.overhead_s).max(1e-12);
    out.push(format!(
        "hotlab's probe cost at least {:.1}% of the wall ({} hook calls at their calibrated cost, and its bookkeeping): {:.0} steps/s measured, at most {:.0} without it (`hotlab profile --probe-cost` measures it: the script again under a light probe)",
        100.0 * profile.overhead_s / wall,
        s.hook_calls,
        steps / wall,
        steps / without
    ));
    out
}

impl Report {
    /// The report as Markdown (what `hotlab profile --report md` prints).
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# Bottleneck report\n");
        if self.env_steps > 0 {
            let _ = writeln!(
                s,
                "{} env steps in {:.2} s = {:.0} steps/s; profiler overhead {:.2}% of wall.\n",
                self.env_steps, self.wall_s, self.steps_per_s, self.profiler_overhead_pct
            );
        } else {
            let _ = writeln!(s, "{:.2} s, no env step seen.\n", self.wall_s);
        }
        let _ = writeln!(s, "| bottleneck | time (s) | % of wall | calls | time per call (µs) | diagnosis |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---|");
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} | {:.3} | {:.1} | {} | {:.2} | {} |",
                r.phase.name(),
                r.wall_s,
                r.percent,
                r.calls,
                r.per_call_us,
                r.diagnosis
            );
        }
        let sp = &self.split;
        let _ = writeln!(
            s,
            "\n**Split**: data {:.1}% · forward {:.1}% · backward {:.1}% — {}; next: {}.\n",
            sp.data_pct, sp.forward_pct, sp.backward_pct, sp.verdict, sp.next_action
        );
        if self.recommendations.is_empty() {
            let _ = writeln!(s, "No knob of the catalogue has its signature in this run.");
        } else {
            let _ = writeln!(s, "| recommendation | because | at most | lesson |");
            let _ = writeln!(s, "|---|---|---:|---|");
            for r in &self.recommendations {
                let change = match (r.auditable(), &r.fix) {
                    (true, _) => format!("`{}`", r.knob),
                    (false, Some(fix)) => format!("change the code: {fix}"),
                    (false, None) => "a change to the code".to_string(),
                };
                let at = r.site.as_ref().map_or(String::new(), |site| format!(" (at {site})"));
                let lesson = match (r.row, &r.lesson) {
                    (Some(row), Some(id)) => format!("row {row}: `hotlab lesson run {id}`"),
                    _ => String::new(),
                };
                let _ = writeln!(s, "| {change} | {}{at} | {:.2}× | {lesson} |", r.signature, r.max_speedup);
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(s);
            for note in &self.notes {
                let _ = writeln!(s, "- {note}");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_core::counters::{Count, Counters};
    use hotlab_spec::PresetSpec;
    use hotlab_specs::dreamer::{DECODER, ENCODER, REPLAY, RSSM, WORLD_BACKWARD};
    use hotlab_specs::morpho::{GRAPH_REPLAYS, HOST_BACKWARD, HOST_FORWARD, HOST_STEPS_SKIPPED, LIFECYCLE};
    use hotlab_specs::morpho::{LIFECYCLE_READS, REWARD};

    fn own(count: Count, n: u64) -> Counters {
        Counters { own: [(count, n)].into_iter().collect(), ..Counters::default() }
    }
    use hotlab_core::profile::PhaseTime;
    use hotlab_specs::morpho::{LifecycleMode, SlotPool};

    fn profile(shares: &[(Phase, f64)], counters: Counters) -> Profile {
        Profile {
            wall_s: 10.0,
            phases: hotlab_specs::PHASES
                .iter()
                .map(|i| PhaseTime {
                    phase: i.phase,
                    wall_s: shares.iter().find(|(q, _)| *q == i.phase).map_or(0.0, |(_, s)| s * 10.0),
                    calls: 100,
                    device_s: None,
                })
                .collect(),
            counters,
            overhead_s: 0.01,
            gpu_memory: None,
            script: None,
            emulated: None,
            eager_only: false,
        }
    }

    fn knobs(r: &Report) -> Vec<&str> {
        r.recommendations.iter().map(|x| x.knob.as_str()).collect()
    }

    /// An update whose bf16 products the device emulates is advised fp32 (row 6, the
    /// precision lesson) where its forward and backward take a tenth of the wall; the same
    /// profile with native products, or with the update a twentieth of the wall, is not.
    #[test]
    fn an_emulated_bf16_update_is_advised_fp32() {
        let spec = RunSpec::default();
        let update = [(Phase::BACKWARD, 0.5), (Phase::UPDATE_FORWARD, 0.2), (Phase::ENV_STEP, 0.3)];
        let emulated = Profile { emulated: Some("bf16".into()), ..profile(&update, Counters::default()) };
        let r = analyze(&emulated, &spec);
        let advice = r.recommendations.iter().find(|x| x.knob == "--precision fp32").expect("advised");
        assert_eq!((advice.row, advice.lesson.as_deref()), (Some(6), Some("precision")));
        assert!(advice.signature.contains("70% of wall") && advice.signature.contains("emulates"), "{advice:?}");
        assert!(!knobs(&analyze(&profile(&update, Counters::default()), &spec)).contains(&"--precision fp32"));
        let small = [(Phase::BACKWARD, 0.03), (Phase::UPDATE_FORWARD, 0.02), (Phase::ENV_STEP, 0.95)];
        let small = Profile { emulated: Some("bf16".into()), ..profile(&small, Counters::default()) };
        assert!(!knobs(&analyze(&small, &spec)).contains(&"--precision fp32"));
    }

    /// The split's next step names only what the run can do: no fused forward for a policy
    /// without one, and no bf16 for arithmetic where the device emulates it.
    #[test]
    fn the_splits_next_step_fits_the_policy_and_the_device() {
        let spec = RunSpec::default();
        let rollout = [(Phase::POLICY_FORWARD, 0.6), (Phase::ENV_STEP, 0.4)];
        assert_eq!(
            analyze(&profile(&rollout, Counters::default()), &spec).split.next_action,
            "fuse the rollout forward, or batch more envs per forward"
        );
        let marked = Profile { eager_only: true, ..profile(&rollout, Counters::default()) };
        assert_eq!(analyze(&marked, &spec).split.next_action, "batch more envs per forward");
        let update = [(Phase::UPDATE_FORWARD, 0.6), (Phase::ENV_STEP, 0.4)];
        assert!(analyze(&profile(&update, Counters::default()), &spec)
            .split
            .next_action
            .ends_with("a CPU with AVX512-BF16)"));
        let emulated = Profile { emulated: Some("bf16".into()), ..profile(&update, Counters::default()) };
        assert!(analyze(&emulated, &spec).split.next_action.ends_with("(fp32 is faster here)"));
    }

    #[test]
    fn ranks_phases_by_time_and_computes_the_split() {
        let p = profile(
            &[(Phase::BACKWARD, 0.2), (Phase::ENV_STEP, 0.5), (Phase::UPDATE_FORWARD, 0.3)],
            Counters::default(),
        );
        let r = analyze(&p, &RunSpec::default());
        let order: Vec<Phase> = r.rows.iter().map(|x| x.phase).collect();
        assert_eq!(order, vec![Phase::ENV_STEP, Phase::UPDATE_FORWARD, Phase::BACKWARD]);
        assert!((r.rows[0].percent - 50.0).abs() < 1e-9);
        assert!((r.rows[0].per_call_us - 50_000.0).abs() < 1e-6);
        assert!((r.split.data_pct - 50.0).abs() < 1e-9);
        assert!(r.split.verdict.starts_with("balanced"));
        let data_heavy = analyze(
            &profile(&[(Phase::ENV_WAIT, 0.7), (Phase::BACKWARD, 0.3)], Counters::default()),
            &RunSpec::default(),
        );
        assert!(data_heavy.split.verdict.starts_with("data > 50%"));
        assert!(data_heavy.split.next_action.contains("worker waits"));
        // The env's own parts (a host network training) are data, and named as its compute.
        let hosts = profile(&[(HOST_BACKWARD, 0.5), (HOST_FORWARD, 0.3), (Phase::BACKWARD, 0.1)], Counters::default());
        let r_hosts = analyze(&hosts, &RunSpec::default());
        assert!(r_hosts.split.verdict.contains("envs' own compute"), "{}", r_hosts.split.verdict);
        assert!(r_hosts.split.next_action.contains("--backend threads"), "{}", r_hosts.split.next_action);
        let threads = RunSpec {
            exec: hotlab_core::run::ExecSpec { backend: Backend::Threads, ..Default::default() },
            ..Default::default()
        };
        assert!(!analyze(&hosts, &threads).split.next_action.contains("--backend"));
        // A workload that cannot run on threads (a Python env) is told of the others only.
        let gym = RunSpec {
            workload: hotlab_specs::WorkloadSpec::default_for(hotlab_specs::EnvName::Gym),
            ..Default::default()
        };
        let python = profile(&[(hotlab_specs::gym::PYTHON_STEP, 0.7), (Phase::BACKWARD, 0.2)], Counters::default());
        assert_eq!(analyze(&python, &gym).split.next_action, "spread the envs over the cores (--backend subprocess)");
        // One env (CleanRL's MuJoCo setting): the same batch from 8 envs over worker
        // processes, the mujoco-fast preset; which gets no such advice itself.
        let preset = |name: &str| hotlab_specs::AnyPreset::find(name).unwrap().spec();
        let knobs =
            |spec: &RunSpec| analyze(&python, spec).recommendations.into_iter().map(|r| r.knob).collect::<Vec<_>>();
        assert_eq!(knobs(&preset("mujoco")), ["--envs 8 --steps 256 --backend subprocess"]);
        let fast = preset("mujoco-fast");
        assert_eq!((fast.envs * fast.steps, fast.exec.backend), (2048, Backend::Subprocess));
        assert!(knobs(&fast).is_empty(), "{:?}", knobs(&fast));
        let overrides = analyze(&python, &preset("mujoco")).recommendations[0].overrides();
        assert_eq!(overrides[0], ("envs".to_string(), "8".to_string()));
        let update_fwd = analyze(
            &profile(&[(Phase::UPDATE_FORWARD, 0.6), (Phase::BACKWARD, 0.3)], Counters::default()),
            &RunSpec::default(),
        );
        assert!(update_fwd.split.verdict.contains("update's forward"), "{}", update_fwd.split.verdict);
        let rollout_fwd = analyze(
            &profile(&[(Phase::POLICY_FORWARD, 0.6), (Phase::BACKWARD, 0.3)], Counters::default()),
            &RunSpec::default(),
        );
        assert!(rollout_fwd.split.verdict.contains("rollout's forward"), "{}", rollout_fwd.split.verdict);
        assert!((r.profiler_overhead_pct - 0.1).abs() < 1e-9);
        assert!(r.markdown().contains("| env_step | 5.000 | 50.0 |"));
    }

    /// The captured update's row says how many replays ran and what each one launched.
    #[test]
    fn the_update_graph_row_counts_replays_and_launches() {
        let replayed = Counters { update_replays: 10, update_launches: 4210, ..Counters::default() };
        let r = analyze(&profile(&[(Phase::UPDATE_GRAPH, 0.5)], replayed), &RunSpec::default());
        let row = r.rows.iter().find(|r| r.phase == Phase::UPDATE_GRAPH).expect("its row");
        assert_eq!(
            row.diagnosis,
            "10 replays of the captured update, each one host launch for 421 kernels and copies (4210 in all)"
        );
        let warm = analyze(&profile(&[(Phase::UPDATE_GRAPH, 0.5)], Counters::default()), &RunSpec::default());
        let row = warm.rows.iter().find(|r| r.phase == Phase::UPDATE_GRAPH).expect("its row");
        assert!(row.diagnosis.contains("no replay yet"), "{}", row.diagnosis);
    }

    #[test]
    fn a_gpu_update_dispatched_op_by_op_is_advised_captured() {
        use hotlab_core::choices::{Precision, UpdateMode};
        let busy = profile(
            &[(Phase::UPDATE_FORWARD, 0.3), (Phase::BACKWARD, 0.2), (Phase::OPTIMIZER, 0.1)],
            Counters::default(),
        );
        let on = |device: &str, update| RunSpec {
            device: device.into(),
            exec: hotlab_core::run::ExecSpec { update, ..Default::default() },
            ..Default::default()
        };
        let r = analyze(&busy, &on("cuda", UpdateMode::Eager));
        assert_eq!(knobs(&r), ["--update graph"]);
        assert!((r.recommendations[0].max_speedup - 2.5).abs() < 1e-9, "{:?}", r.recommendations);
        assert!(r.recommendations[0].signature.contains("60% of wall in the update's 16 minibatch steps"));
        // Not on the CPU, not once captured, not where the update is small, not with fp16's scaler.
        assert!(knobs(&analyze(&busy, &on("cpu", UpdateMode::Eager))).is_empty());
        assert!(knobs(&analyze(&busy, &on("cuda", UpdateMode::Graph))).is_empty());
        let light = profile(&[(Phase::BACKWARD, 0.1), (Phase::ENV_STEP, 0.8)], Counters::default());
        assert!(knobs(&analyze(&light, &on("cuda", UpdateMode::Eager))).is_empty());
        let mut fp16 = on("cuda", UpdateMode::Eager);
        fp16.exec.precision = Precision::Fp16;
        assert!(knobs(&analyze(&busy, &fp16)).is_empty());
        // The advice is an audit's change that the spec accepts.
        let change = crate::audit::Change::recommended(&r.recommendations[0]).unwrap();
        let changed = change.apply(&on("cuda", UpdateMode::Eager)).unwrap();
        assert_eq!(changed.exec.update, UpdateMode::Graph);
    }

    #[test]
    fn a_sleeper_pool_on_the_cpu_is_advised_against_when_hosts_dominate() {
        let hosts = profile(&[(HOST_BACKWARD, 0.4), (HOST_FORWARD, 0.2)], Counters::default());
        let morpho = |slots| RunSpec {
            workload: hotlab_specs::WorkloadSpec::Morpho(hotlab_specs::MorphoSpec { slots, ..Default::default() }),
            ..Default::default()
        };
        let r = analyze(&hosts, &morpho(SlotPool::Sleeper));
        assert_eq!(knobs(&r), ["--slots dynamic"]);
        // Its agent is eager whatever --inference says; CartPole follows the flag.
        assert_eq!(
            (morpho(SlotPool::Dynamic).inference(), RunSpec::default().inference()),
            (Inference::Eager, Inference::Fused)
        );
        assert!((r.recommendations[0].max_speedup - 2.5).abs() < 1e-9);
        assert!(knobs(&analyze(&hosts, &morpho(SlotPool::Dynamic))).is_empty());
        let light = profile(&[(HOST_BACKWARD, 0.05), (Phase::BACKWARD, 0.9)], Counters::default());
        assert!(knobs(&analyze(&light, &morpho(SlotPool::Sleeper))).is_empty());
        // On CUDA the advice turns round: a dynamic pool's steps cannot be captured.
        let cuda = |slots| RunSpec { device: "cuda:0".into(), ..morpho(slots) };
        let r = analyze(&hosts, &cuda(SlotPool::Dynamic));
        assert_eq!(knobs(&r), ["--slots sleeper"]);
        assert!(r.recommendations[0].signature.contains("no captured graph"), "{}", r.recommendations[0].signature);
        assert!(knobs(&analyze(&hosts, &cuda(SlotPool::Sleeper))).is_empty());
        let c = own(GRAPH_REPLAYS, 40);
        let captured = profile(&[(HOST_FORWARD, 0.6)], c);
        let r = analyze(&captured, &morpho(SlotPool::Sleeper));
        assert!(knobs(&r).is_empty(), "captured on CUDA (found by its replays under --device auto)");
        let row = r.rows.iter().find(|p| p.phase == HOST_FORWARD).unwrap();
        assert!(row.diagnosis.contains("40 steps replayed as captured CUDA graphs"), "{}", row.diagnosis);
    }

    #[test]
    fn fp16_hosts_say_how_many_steps_their_scalers_skipped() {
        let spec = |host_precision| RunSpec {
            device: "cuda:0".into(),
            workload: hotlab_specs::WorkloadSpec::Morpho(hotlab_specs::MorphoSpec {
                host_precision,
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = own(HOST_STEPS_SKIPPED, 3);
        let p = profile(&[(HOST_BACKWARD, 0.6)], c);
        let diagnosis = |precision| {
            let r = analyze(&p, &spec(precision));
            r.rows.iter().find(|row| row.phase == HOST_BACKWARD).unwrap().diagnosis.clone()
        };
        let fp16 = diagnosis(hotlab_core::choices::Precision::Fp16);
        assert!(fp16.contains("3 steps skipped on overflowing gradients"), "{fp16}");
        assert!(!diagnosis(hotlab_core::choices::Precision::Fp32).contains("skipped"));
    }

    #[test]
    fn a_looped_lifecycle_is_advised_batched_only_where_it_costs() {
        let morpho = |lifecycle| RunSpec {
            workload: hotlab_specs::WorkloadSpec::Morpho(hotlab_specs::MorphoSpec { lifecycle, ..Default::default() }),
            ..Default::default()
        };
        let c = Counters { env_steps: 10, ..own(LIFECYCLE_READS, 600) };
        let trench = profile(&[(LIFECYCLE, 0.15), (REWARD, 0.05), (HOST_BACKWARD, 0.5)], c);
        let r = analyze(&trench, &morpho(LifecycleMode::Loop));
        assert_eq!(knobs(&r), ["--lifecycle batched"]);
        assert!(r.recommendations[0].signature.contains("60 state reads per env step"), "{:?}", r.recommendations);
        assert!((r.recommendations[0].max_speedup - 1.25).abs() < 1e-9);
        assert!(knobs(&analyze(&trench, &morpho(LifecycleMode::Batched))).is_empty());
        let light = profile(&[(LIFECYCLE, 0.01), (HOST_BACKWARD, 0.9)], Counters::default());
        assert!(knobs(&analyze(&light, &morpho(LifecycleMode::Loop))).is_empty());
    }

    #[test]
    fn the_world_models_knobs_are_advised_on_their_signatures_and_its_split_is_read() {
        use hotlab_specs::dreamer::{EncoderMode, LossRead, ReplayAt};
        use hotlab_specs::DreamerSpec;
        use hotlab_specs::WorkloadSpec;
        let dreamer = |d: DreamerSpec| RunSpec { workload: WorkloadSpec::Dreamer(d), ..Default::default() };
        let slow = dreamer(DreamerSpec {
            encoder: EncoderMode::PerStep,
            loss_read: LossRead::PerItem,
            replay: ReplayAt::Host,
            ..Default::default()
        });
        let c = Counters { env_steps: 100, host_syncs: 700, ..Counters::default() };
        let p =
            profile(&[(ENCODER, 0.3), (RSSM, 0.2), (DECODER, 0.1), (REPLAY, 0.1), (WORLD_BACKWARD, 0.3)], c.clone());
        let r = analyze(&p, &slow);
        assert_eq!(knobs(&r), ["--encoder batched", "--loss-read deferred", "--replay device"]);
        assert!(
            r.recommendations[0].signature.contains("once per timestep (16 calls per batch)"),
            "{:?}",
            r.recommendations
        );
        assert!(r.recommendations[1].signature.contains("7.0 host syncs per env step"), "{:?}", r.recommendations);
        assert!(r.split.verdict.contains("the world model's forward passes"), "{}", r.split.verdict);
        assert!((r.split.forward_pct - 60.0).abs() < 1e-6 && (r.split.data_pct - 10.0).abs() < 1e-6);
        assert!(knobs(&analyze(&p, &dreamer(DreamerSpec::default()))).is_empty());
        let quiet = Counters { env_steps: 100, host_syncs: 4, ..Counters::default() };
        let light = profile(&[(ENCODER, 0.05), (DECODER, 0.1), (WORLD_BACKWARD, 0.8)], quiet);
        assert!(knobs(&analyze(&light, &slow)).is_empty());
        assert!(analyze(&light, &slow).split.verdict.starts_with("backward > 50%"));
    }

    #[test]
    fn each_recommendation_fires_on_its_signature_only() {
        let steps = Counters {
            env_steps: 800,
            host_syncs: 800,
            h2d_copies: 800,
            spin_iterations: 5000,
            ipc_round_trips: 800,
            ..Counters::default()
        };
        let spec = |f: fn(&mut RunSpec)| {
            let mut s = RunSpec { envs: 8, ..RunSpec::default() };
            f(&mut s);
            s
        };
        // Worker wait on subprocess + spin: an in-process backend and blocking waits.
        let sub = spec(|s| {
            s.exec.backend = Backend::Subprocess;
            s.exec.wait = WaitMode::Spin;
        });
        let r = analyze(&profile(&[(Phase::ENV_WAIT, 0.6)], steps.clone()), &sub);
        assert_eq!(knobs(&r), vec!["--backend vectorized", "--wait block"]);
        assert_eq!(r.recommendations[0].overrides(), vec![("backend".to_string(), "vectorized".to_string())]);
        assert!((r.recommendations[0].max_speedup - 2.5).abs() < 1e-9, "Amdahl: 1 / (1 - 0.6)");
        // The same wait share on an in-process backend recommends nothing.
        assert!(analyze(&profile(&[(Phase::ENV_WAIT, 0.6)], steps.clone()), &spec(|_| {})).recommendations.is_empty());
        // Read-back: only with per_item and more than one sync per step.
        let per_item = spec(|s| s.exec.action_sync = ActionSync::PerItem);
        assert_eq!(
            knobs(&analyze(&profile(&[(Phase::ACTION_READBACK, 0.2)], steps.clone()), &per_item)),
            vec!["--action-sync stacked"]
        );
        let rec = &analyze(&profile(&[(Phase::ACTION_READBACK, 0.2)], steps.clone()), &per_item).recommendations[0];
        assert_eq!(rec.overrides(), vec![("action_sync".to_string(), "stacked".to_string())], "a spec field");
        let one_sync = Counters { host_syncs: 100, ..steps.clone() };
        assert!(analyze(&profile(&[(Phase::ACTION_READBACK, 0.2)], one_sync), &per_item).recommendations.is_empty());
        assert!(analyze(&profile(&[(Phase::ACTION_READBACK, 0.2)], steps.clone()), &spec(|_| {}))
            .recommendations
            .is_empty());
        // Transfers: only per_tensor with several copies per step.
        let per_tensor = spec(|s| s.exec.transfer = Transfer::PerTensor);
        assert_eq!(
            knobs(&analyze(&profile(&[(Phase::OBS_TRANSFER, 0.2)], steps.clone()), &per_tensor)),
            vec!["--transfer packed"]
        );
        assert!(analyze(&profile(&[(Phase::OBS_TRANSFER, 0.01)], steps.clone()), &per_tensor)
            .recommendations
            .is_empty());
        // The rollout copied per step at update time (800 steps = one update of 8 × 100).
        let per_step = spec(|s| {
            s.steps = 100;
            s.exec.rollout_copy = RolloutCopy::PerStep;
        });
        assert_eq!(
            knobs(&analyze(&profile(&[(Phase::OBS_TRANSFER, 0.2)], steps.clone()), &per_step)),
            vec!["--rollout-copy whole"]
        );
        let whole = spec(|s| {
            s.steps = 100;
            s.exec.rollout_copy = RolloutCopy::Whole;
        });
        assert!(analyze(&profile(&[(Phase::OBS_TRANSFER, 0.2)], steps.clone()), &whole).recommendations.is_empty());
        // After an eager forward (asked for, or the CNN's), copied per step or whole, the
        // rollout's observations moved twice: kept on the device they move once.
        let cnn_transfer = profile(&[(Phase::OBS_TRANSFER, 0.2), (Phase::OBS_CONVERT, 0.05)], steps.clone());
        let eager_whole = RunSpec {
            exec: hotlab_core::run::ExecSpec { inference: Inference::Eager, ..whole.exec.clone() },
            ..whole.clone()
        };
        for (p, s) in [
            (&cnn_transfer, &whole),
            (&cnn_transfer, &per_step),
            (&profile(&[(Phase::OBS_TRANSFER, 0.2)], steps.clone()), &eager_whole),
        ] {
            let r = analyze(p, s);
            assert_eq!(knobs(&r), vec!["--rollout-copy kept"]);
            assert!(
                r.recommendations[0].signature.contains("again, from the host's rollout buffer"),
                "{:?}",
                r.recommendations
            );
            assert_eq!(r.recommendations[0].lesson.as_deref(), Some("rollout-on-host"));
        }
        let kept = spec(|s| s.exec.inference = Inference::Eager);
        assert!(analyze(&cnn_transfer, &kept).recommendations.is_empty(), "kept: nothing moves twice");
        let small = profile(&[(Phase::OBS_TRANSFER, 0.01), (Phase::OBS_CONVERT, 0.05)], steps.clone());
        assert!(analyze(&small, &whole).recommendations.is_empty(), "under 3% of wall");
        // Eager forward.
        let eager = spec(|s| s.exec.inference = Inference::Eager);
        assert_eq!(
            knobs(&analyze(&profile(&[(Phase::POLICY_FORWARD, 0.3)], steps.clone()), &eager)),
            vec!["--inference fused"]
        );
        assert!(analyze(&profile(&[(Phase::POLICY_FORWARD, 0.3)], steps.clone()), &spec(|_| {}))
            .recommendations
            .is_empty());
        // The CNN's forward (its images converted on the device, as only it does) has no
        // fused form: no advice to fuse it, and its row says it ran eager whatever was asked.
        let cnn = profile(&[(Phase::POLICY_FORWARD, 0.3), (Phase::OBS_CONVERT, 0.05)], steps.clone());
        assert!(analyze(&cnn, &eager).recommendations.is_empty());
        for asked in [eager.clone(), spec(|_| {})] {
            let r = analyze(&cnn, &asked);
            let row = r.rows.iter().find(|row| row.phase == Phase::POLICY_FORWARD).expect("its row");
            assert!(row.diagnosis.starts_with("eager inference (the CNN's forward"), "{}", row.diagnosis);
        }
        // Nor has a Dict's combined policy or a recurrent one: their learners mark the profile.
        let marked = Profile { eager_only: true, ..profile(&[(Phase::POLICY_FORWARD, 0.3)], steps.clone()) };
        assert!(
            analyze(&marked, &eager).recommendations.is_empty(),
            "no advice to fuse a forward that has no fused form"
        );
        for asked in [eager.clone(), spec(|_| {})] {
            let r = analyze(&marked, &asked);
            let row = r.rows.iter().find(|row| row.phase == Phase::POLICY_FORWARD).expect("its row");
            assert!(
                row.diagnosis.starts_with("eager inference (a policy whose forward has no fused form"),
                "{}",
                row.diagnosis
            );
        }
        // The device rollout on a GPU: a graph removes the per-step launches.
        let on_gpu = spec(|s| {
            s.exec.backend = Backend::Device;
            s.device = "cuda".into();
        });
        let launches = profile(&[(Phase::POLICY_FORWARD, 0.2), (Phase::ENV_STEP, 0.2)], steps.clone());
        assert_eq!(knobs(&analyze(&launches, &on_gpu)), vec!["--inference graph"]);
        let on_cpu = spec(|s| s.exec.backend = Backend::Device);
        assert!(analyze(&launches, &on_cpu).recommendations.is_empty(), "no graph without CUDA");
        let graph = spec(|s| {
            s.exec.backend = Backend::Device;
            s.device = "cuda".into();
            s.exec.inference = Inference::Graph;
        });
        assert!(analyze(&launches, &graph).recommendations.is_empty(), "already replaying");
        // The per-env loop.
        let seq = spec(|s| s.exec.backend = Backend::Sequential);
        assert_eq!(
            knobs(&analyze(&profile(&[(Phase::ENV_STEP, 0.4)], steps.clone()), &seq)),
            vec!["--backend vectorized"]
        );
        assert!(analyze(&profile(&[(Phase::ENV_STEP, 0.4)], steps), &spec(|_| {})).recommendations.is_empty());
    }
}

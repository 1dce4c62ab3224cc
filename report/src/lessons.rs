//! The lessons: one per catalogue row whose workload exists, each a baseline that shows the
//! bottleneck, variants that turn one knob each, the signature that must move, and a budget
//! under which the whole lesson runs in about a minute on a 2-core CPU box.
//!
//! A lesson is data: it runs through the audit ([`crate::audit::Plan`]), so that it ends
//! with a measured verdict per variant, not with a claim. The lab's `#/lesson/ID` page and
//! `hotlab lesson run ID` run the same plan. A lesson's parameters (any knob over its
//! baseline, the repeats, the seconds per run) can be changed; its signature test runs it
//! at a tiny budget and fails when the bottleneck stops showing.

use crate::audit::{AuditReport, Change, Measured, Plan, Slot};
use hotlab_core::choices::{
    ActionSync, Backend, ConvLayout, Frames, Inference, Precision, Rnn, RnnUpdate, RolloutCopy, Transfer, UpdateMode,
    WaitMode,
};
use hotlab_core::counters::{Count, Counters};
use hotlab_core::profile::{Phase, PhaseKind, Profile};
use hotlab_core::run_knobs;
use hotlab_spec::knobs;
use hotlab_spec::{json, RunSpec, SpecError};
use hotlab_specs::dreamer::{DreamerSpec, EncoderMode, LossRead, ReplayAt, ENCODER, REPLAY};
use hotlab_specs::envpool::EnvpoolSpec;
use hotlab_specs::gym::GymSpec;
use hotlab_specs::morpho::{
    HostExec, LifecycleMode, MorphoSpec, SlotPool, StreamWait, HOST_PASSES, LIFECYCLE_READS, STREAM_WAITS,
    TOPOLOGY_CHANGES,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One lesson. In JSON its fixes are `variants`, each the knob it turns as `KEY=VALUE`.
#[derive(Clone, Debug)]
pub struct Lesson {
    /// In URLs: `#/lesson/worker-waits`, `hotlab lesson run worker-waits`.
    pub id: &'static str,
    /// The catalogue row (DESIGN's table of bottlenecks).
    pub row: u8,
    pub title: &'static str,
    /// What the bottleneck is, why it happens and what the fix does, in a few plain sentences.
    pub phenomenon: &'static str,
    /// What to look at on the screen while it runs.
    pub look_at: &'static str,
    /// The slow setting: knobs (by name) over the default spec.
    pub baseline: Baseline,
    /// The fixes: typed edits of the slow setting, one knob each.
    pub variants: &'static [Fix],
    pub signature: Signature,
    pub budget: Budget,
    /// What a GPU measured, for a lesson that needs one (shown where CUDA is missing).
    pub on_gpu: Option<&'static str>,
    /// On which CPUs it shows, where that depends on the CPU's instructions (shown on its
    /// card beside this machine's check).
    pub on_cpu: Option<&'static str>,
}

/// A lesson's fix: a typed edit of its slow setting that turns one knob. It reads as that
/// knob, `KEY=VALUE` (what the JSON, `hotlab lesson list` and the audit show), found by
/// comparing the slow setting's spec before and after the edit.
pub type Fix = fn(&mut RunSpec);

impl Serialize for Lesson {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = s.serialize_struct("Lesson", 11)?;
        out.serialize_field("id", self.id)?;
        out.serialize_field("row", &self.row)?;
        out.serialize_field("title", self.title)?;
        out.serialize_field("phenomenon", self.phenomenon)?;
        out.serialize_field("look_at", self.look_at)?;
        out.serialize_field("baseline", &self.baseline)?;
        out.serialize_field("variants", &self.fixes())?;
        out.serialize_field("signature", &self.signature)?;
        out.serialize_field("budget", &self.budget)?;
        out.serialize_field("on_gpu", &self.on_gpu)?;
        match self.on_cpu {
            Some(cpus) => out.serialize_field("on_cpu", cpus)?,
            None => out.skip_field("on_cpu")?,
        }
        out.end()
    }
}

/// A lesson's slow setting: a typed edit of the default spec (the lesson's own), over the
/// small world it shares with its workload's other lessons, which its own edit overrides.
/// It serializes as the knobs it sets, each with its value as text (`[["env", "morpho"],
/// ["envs", "4"], …]`), in the knob table's order.
#[derive(Clone, Copy, Debug)]
pub struct Baseline {
    own: fn(&mut RunSpec),
    world: fn(&mut RunSpec),
}

impl Baseline {
    pub const fn new(own: fn(&mut RunSpec)) -> Self {
        Baseline { own, world: |_| {} }
    }

    /// The same edit over a shared small world.
    pub const fn over(self, world: fn(&mut RunSpec)) -> Self {
        Baseline { world, ..self }
    }

    /// The spec it makes: the world's edit, then the lesson's own.
    pub fn spec(&self) -> RunSpec {
        let mut spec = RunSpec::default();
        (self.world)(&mut spec);
        (self.own)(&mut spec);
        spec
    }

    /// Every knob it sets and its value as text.
    pub fn knobs(&self) -> Vec<(&'static str, String)> {
        knobs::changed(&RunSpec::default(), &self.spec()).into_iter().map(|(k, v)| (k.name, v)).collect()
    }

    /// The value it gives knob `name`.
    pub fn get(&self, name: &str) -> Option<String> {
        self.knobs().into_iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }
}

impl Serialize for Baseline {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.knobs())
    }
}

/// The morpho lessons' small world: two tasks of 64 images, hosts 4 wide trained 3 epochs.
const MORPHO_SMALL: fn(&mut RunSpec) = |s| {
    let w = s.settings_mut::<MorphoSpec>();
    w.tasks = 2;
    w.images = 64;
    w.width = 4;
    w.epochs = 3;
    s.ppo.minibatches = 2;
};

/// The dreamer lessons' small world: 4 envs, a short prefill, 8 sequences of 8 per train step.
const DREAMER_SMALL: fn(&mut RunSpec) = |s| {
    let w = s.settings_mut::<DreamerSpec>();
    w.prefill = 64;
    w.batch = 8;
    w.seq_len = 8;
    w.train_ratio = 16.0;
    s.envs = 4;
    s.steps = 16;
};

/// The Breakout lessons' small world: 8 envs in 2 worker processes, one epoch of 2 minibatches.
const BREAKOUT_SMALL: fn(&mut RunSpec) = |s| {
    let w = s.settings_mut::<GymSpec>();
    w.id = "ALE/Breakout-v5".into();
    s.exec.backend = Backend::Subprocess;
    s.exec.workers = 2;
    s.envs = 8;
    s.steps = 32;
    s.ppo.minibatches = 2;
    s.ppo.epochs = 1;
};

/// How long a lesson runs: `repeats` × (2 + 2 × variants) runs of `seconds` each.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub seconds: f64,
    pub repeats: usize,
}

/// The least a lesson's runs get on a CUDA device. On an H100, 1-second runs are mostly
/// warm-up and capture: their A/A noise spanned 0.19–6.52, where 4-second runs × 3 repeats
/// kept update-dispatch's within 0.87–1.11 (docs/gpu-results.md, 2026-11-27).
pub const GPU_FLOOR: Budget = Budget { seconds: 4.0, repeats: 3 };

impl Budget {
    /// This budget where the runs go to a CUDA device (`cuda`), else as it is: on CUDA at
    /// least [`GPU_FLOOR`].
    pub fn on(self, cuda: bool) -> Budget {
        match cuda {
            true => {
                Budget { seconds: self.seconds.max(GPU_FLOOR.seconds), repeats: self.repeats.max(GPU_FLOOR.repeats) }
            }
            false => self,
        }
    }
}

/// What must move between the slow setting and each fix.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Signature {
    pub measure: Measure,
    pub expect: Expect,
    /// The measure in words, with its unit.
    pub text: &'static str,
}

/// A figure of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// A counter per env step.
    PerStep(Counter),
    /// A phase's calls per env step.
    CallsPerStep(Phase),
    /// A phase's mean microseconds per call.
    MicrosPerCall(Phase),
    /// A phase's share of wall time (0..1).
    Share(Phase),
    /// Microseconds of the wall spent stepping envs per env step: the env step, the wait
    /// on workers and every part the envs time themselves (a Python env's, EnvPool's), so
    /// that two simulators with phases of their own compare.
    EnvMicrosPerStep,
}

/// The counters a signature can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    HostSyncs,
    H2dCopies,
    H2dBytes,
    IpcRoundTrips,
    SpinIterations,
    /// One of the envs' own counts (its workload's `COUNTS`).
    Own(Count),
}

impl Counter {
    fn of(self, c: &Counters) -> u64 {
        match self {
            Counter::HostSyncs => c.host_syncs,
            Counter::H2dCopies => c.h2d_copies,
            Counter::H2dBytes => c.h2d_bytes,
            Counter::IpcRoundTrips => c.ipc_round_trips,
            Counter::SpinIterations => c.spin_iterations,
            Counter::Own(count) => c.own.get(count),
        }
    }
}

/// How the slow setting's figure must compare with each fix's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// At least this many times the fix's (and above zero).
    Higher(f64),
    /// This many times higher or lower: the direction depends on the hardware.
    Moves(f64),
}

impl Measure {
    /// Whether it times (µs, a share of wall time) rather than counts: a timed figure of a
    /// short run on a loaded machine moves, so only a benchmark judges it.
    pub fn is_timed(self) -> bool {
        matches!(self, Measure::MicrosPerCall(_) | Measure::Share(_) | Measure::EnvMicrosPerStep)
    }

    /// This measure of a run's totals.
    pub fn of(self, p: &Profile) -> f64 {
        let steps = p.counters.env_steps.max(1) as f64;
        match self {
            Measure::PerStep(c) => c.of(&p.counters) as f64 / steps,
            Measure::CallsPerStep(ph) => p.calls(ph) as f64 / steps,
            Measure::MicrosPerCall(ph) => 1e6 * p.phase(ph) / p.calls(ph).max(1) as f64,
            Measure::Share(ph) => p.share(ph),
            Measure::EnvMicrosPerStep => {
                let env = |t: &&hotlab_core::profile::PhaseTime| {
                    t.phase == Phase::ENV_STEP
                        || t.phase == Phase::ENV_WAIT
                        || hotlab_specs::phase_info(t.phase).is_some_and(|i| i.kind == PhaseKind::EnvPart)
                };
                1e6 * p.phases.iter().filter(env).map(|t| t.wall_s).sum::<f64>() / steps
            }
        }
    }
}

impl Signature {
    /// Whether the slow setting's figure and a fix's differ as expected.
    pub fn shows(&self, slow: f64, fix: f64) -> bool {
        match self.expect {
            Expect::Higher(k) => slow > 0.0 && slow >= k * fix,
            Expect::Moves(k) => slow > 0.0 && fix > 0.0 && (slow / fix >= k || fix / slow >= k),
        }
    }
}

/// A lesson run: the audit, and the signature's figure per setting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub lesson: String,
    pub audit: AuditReport,
    /// The baseline's figure, then each variant's (medians over their runs).
    pub signature: Vec<Figure>,
    /// Whether the signature showed against every fix.
    pub shows: bool,
}

/// A setting's figure of the signature.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub setting: String,
    pub value: f64,
}

/// What a lesson's quick check found on one machine (`hotlab lesson check`): its slow
/// setting and each fix trained once, briefly, and whether the signature showed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub lesson: String,
    /// The signature in words.
    pub measure: String,
    /// The slow setting's figure, then each fix's.
    pub figures: Vec<Figure>,
    pub shows: bool,
    /// Why the lesson was not run here (it needs a GPU and this machine has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Why the check failed to measure, where it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a GPU measured for a lesson (`hotlab lesson check --record FILE` on a GPU box): where
/// there is no GPU, the lesson shows this beside its own run. The repository's record is
/// `docs/lessons-gpu.json` ([`gpu_result`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuResult {
    pub lesson: String,
    /// The device's name, as the driver gives it.
    pub device: String,
    /// The day it was measured, `YYYY-MM-DD` (UTC).
    pub date: String,
    /// The signature in words, its figures (the slow setting's first) and whether it showed.
    pub measure: String,
    pub figures: Vec<Figure>,
    pub shows: bool,
    /// The audit's verdict per fix, where the lesson was run (`--verdicts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<RecordedVerdict>,
}

/// One fix's verdict in a [`GpuResult`]: the steps/s ratio over the slow setting, with its
/// interval, against the baseline's own noise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedVerdict {
    pub change: String,
    pub verdict: crate::audit::Verdict,
    pub ratio: crate::audit::Interval,
    pub noise: crate::audit::Interval,
    /// The runs' length and the repeats it was measured with (a verdict depends on them: on
    /// a GPU, 1-second runs are mostly warm-up and their noise spans several times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

/// The repository's record of what GPUs measured, one entry per lesson measured.
const GPU_RECORD: &str = include_str!("../../docs/lessons-gpu.json");

/// Every recorded GPU result (the repository's record, or `text` in its format).
pub fn gpu_results(text: Option<&str>) -> Result<Vec<GpuResult>, String> {
    serde_json::from_str(text.unwrap_or(GPU_RECORD)).map_err(|e| format!("not a lesson record: {e}"))
}

/// What a GPU measured for lesson `id`, as the repository records it (None: not recorded).
pub fn gpu_result(id: &str) -> Option<GpuResult> {
    gpu_results(None).ok()?.into_iter().find(|r| r.lesson == id)
}

/// A figure with about three significant digits.
fn short(v: f64) -> String {
    match v.abs() {
        a if a >= 100.0 || a == 0.0 => format!("{v:.0}"),
        a if a >= 1.0 => format!("{v:.2}").trim_end_matches('0').trim_end_matches('.').to_string(),
        a => format!("{v:.*}", (1.0 - a.log10().floor()) as usize),
    }
}

impl GpuResult {
    /// One line: where and when, then the verdicts (`confirmed ×3.4 (3.1–3.7)`) or, for a
    /// quick check, the signature's figures.
    pub fn line(&self) -> String {
        let what = if self.verdicts.is_empty() {
            let figures: Vec<String> = self.figures.iter().map(|f| short(f.value)).collect();
            let shows = if self.shows { "the signature shows" } else { "the signature did not show" };
            format!("{shows}, {} {} (a quick check, no verdict yet)", self.measure, figures.join(" → "))
        } else {
            let v: Vec<String> = self
                .verdicts
                .iter()
                .map(|v| {
                    let verdict = serde_json::to_value(v.verdict).ok().and_then(|j| j.as_str().map(String::from));
                    let (r, n) = (&v.ratio, &v.noise);
                    let budget = v
                        .budget
                        .map_or(String::new(), |b| format!(", {} s runs × {} repeats", short(b.seconds), b.repeats));
                    format!(
                        "{} {} ×{:.2} ({:.2}–{:.2}; A/A noise {:.2}–{:.2}{budget})",
                        v.change,
                        verdict.unwrap_or_default(),
                        r.median,
                        r.low,
                        r.high,
                        n.low,
                        n.high
                    )
                })
                .collect();
            v.join("; ")
        };
        format!("measured on an {}, {}: {what}", self.device, self.date)
    }
}

/// Every lesson, in catalogue order.
pub const LESSONS: &[Lesson] = &[
    Lesson {
        id: "worker-waits",
        row: 1,
        title: "Waiting on env worker processes",
        phenomenon: "Stepping envs in worker processes means that every step is a round trip: the trainer writes \
            the actions, wakes each worker, and waits until all have answered. A spinning wait polls a ready flag \
            in a loop, and when there are no spare cores the spinner steals the very core a worker needs, so the \
            step waits longer still. Threads share the trainer's memory and skip the pipe; a vectorized env steps \
            every env in one loop over arrays and has nothing to wait for.",
        look_at: "The env_wait phase's share in the phase split, and the round trips and spin polls per step.",
        baseline: Baseline::new(|s| {
            s.exec.backend = Backend::Subprocess;
            s.exec.wait = WaitMode::Spin;
            s.envs = 8;
            s.exec.workers = 2;
        }),
        variants: &[|s| s.exec.backend = Backend::Threads, |s| s.exec.backend = Backend::Vectorized],
        signature: Signature {
            measure: Measure::PerStep(Counter::IpcRoundTrips),
            expect: Expect::Higher(4.0),
            text: "round trips to worker processes per env step",
        },
        budget: Budget { seconds: 1.5, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "observation-copies",
        row: 2,
        title: "One host→device copy per observation",
        phenomenon: "An eager forward needs the observations on the device. Copying each env's observation as its \
            own small tensor and stacking them there pays a copy call per env per step, and each call costs far \
            more than its few bytes. Packing the step's observations into one contiguous buffer makes it one copy \
            per step; pinned (page-locked) staging lets that copy run without blocking on a GPU.",
        look_at: "Host→device copies per step and the obs_transfer phase.",
        baseline: Baseline::new(|s| {
            s.exec.inference = Inference::Eager;
            s.exec.transfer = Transfer::PerTensor;
            s.envs = 16;
        }),
        variants: &[|s| s.exec.transfer = Transfer::Packed],
        signature: Signature {
            measure: Measure::PerStep(Counter::H2dCopies),
            expect: Expect::Higher(4.0),
            text: "host→device copies per env step",
        },
        budget: Budget { seconds: 1.5, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "env-on-device",
        row: 3,
        title: "Envs on the host, the model on the device",
        phenomenon: "When the envs step on the host and the policy runs on the device, every step moves the \
            observations over and the actions back. Keeping the env state in device tensors removes both copies: \
            the env becomes device work. On a GPU that is the fix; on a CPU the 'device' is the host, the copies \
            were cheap, and the env as tensor ops costs more than the loop it replaced, so the lesson measures \
            which effect wins on this machine.",
        look_at: "Copies per step dropping to zero, and where env time goes (env_step).",
        baseline: Baseline::new(|s| {
            s.exec.backend = Backend::Vectorized;
            s.exec.inference = Inference::Eager;
            s.envs = 64;
        }),
        variants: &[|s| s.exec.backend = Backend::Device],
        signature: Signature {
            measure: Measure::PerStep(Counter::H2dCopies),
            expect: Expect::Higher(4.0),
            text: "host→device copies per env step",
        },
        budget: Budget { seconds: 1.5, repeats: 3 },
        on_cpu: None,
        on_gpu: Some(
            "the bottleneck does not show at this lesson's 64 envs on a GPU: there the device env ran 0.32× as fast as \
            the host's (a regression). Each device step launches its kernels for only 64 tiny envs while the CPU \
            steps them in microseconds and copies once; the device env is what --preset gpu runs, at 4096 envs with \
            the rollout captured. The env count where it starts to pay is not measured yet",
        ),
    },
    Lesson {
        id: "per-item-sync",
        row: 4,
        title: "A device sync per action element",
        phenomenon: "Reading sampled actions back one scalar at a time (`.item()` per env per head) makes the host \
            wait for the device once per element, so a step pays as many synchronizations as it has envs. \
            Stacking every head into one tensor and copying it once makes it one sync per step. On a GPU each sync \
            also drains the launch queue, which is why this bottleneck grows with the device's speed.",
        look_at: "Host syncs per step and the action_readback phase.",
        baseline: Baseline::new(|s| {
            s.exec.inference = Inference::Eager;
            s.exec.action_sync = ActionSync::PerItem;
            s.envs = 16;
        }),
        variants: &[|s| s.exec.action_sync = ActionSync::Stacked],
        signature: Signature {
            measure: Measure::PerStep(Counter::HostSyncs),
            expect: Expect::Higher(4.0),
            text: "host syncs per env step",
        },
        budget: Budget { seconds: 1.5, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "op-dispatch",
        row: 5,
        title: "Op-by-op dispatch of a small forward",
        phenomenon: "An eager forward issues one framework op per layer, activation and sampling step, and each op \
            pays a fixed dispatch cost (on a GPU, a kernel launch) that dwarfs the arithmetic when the batch is \
            small. A fused forward computes the whole policy step in one native pass, so the cost per step is the \
            arithmetic alone. A captured CUDA graph replays the launches as one on a GPU.",
        look_at: "The policy_forward phase's time per call.",
        baseline: Baseline::new(|s| {
            s.exec.inference = Inference::Eager;
        }),
        variants: &[|s| s.exec.inference = Inference::Fused],
        signature: Signature {
            measure: Measure::MicrosPerCall(Phase::POLICY_FORWARD),
            expect: Expect::Higher(3.0),
            text: "µs per rollout forward",
        },
        budget: Budget { seconds: 1.5, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "update-dispatch",
        row: 5,
        title: "An update dispatched op by op",
        phenomenon: "PPO's update runs epochs × minibatches steps, and each step is dozens of small ops: the \
            forward of both networks, the loss's gradient, the backward, the clip and Adam. Eagerly, the host \
            launches every one of them and waits on none, so once the rollout is a captured graph the update's \
            launches are what the GPU waits for. Captured once as a CUDA graph, with the rollout and the \
            shuffles copied into static buffers and Adam's step count and learning rate on the device, the \
            whole update is one launch per iteration.",
        look_at: "The update's phases (update_forward, backward, optimizer) against update_graph, and steps/s.",
        baseline: Baseline::new(|s| {
            s.device = "cuda".into();
            s.exec.backend = Backend::Device;
            s.exec.inference = Inference::Graph;
            s.exec.update = UpdateMode::Eager;
            s.envs = 4096;
            s.steps = 16;
            s.ppo.minibatches = 2;
            s.ppo.lr = 0.0025;
        }),
        variants: &[|s| s.exec.update = UpdateMode::Graph],
        signature: Signature {
            measure: Measure::CallsPerStep(Phase::OPTIMIZER),
            expect: Expect::Higher(4.0),
            text: "minibatch steps dispatched from the host per env step",
        },
        budget: Budget { seconds: 4.0, repeats: 2 },
        on_cpu: None,
        on_gpu: Some(
            "at 1-second runs its A/A noise spanned 0.19–6.52 on the same card: a GPU run needs seconds past its \
            warm-up and capture before its rate means anything",
        ),
    },
    Lesson {
        id: "precision",
        row: 6,
        title: "The update's precision",
        phenomenon: "The update's matrix products can run in fp32, in fp16 with a loss scaler that skips steps \
            whose gradients overflow, or in bf16, which has fp32's range and needs no scaler. Where the hardware \
            computes bf16 natively (recent GPUs, CPUs with AVX512-BF16) the update gets faster; elsewhere bf16 \
            is emulated and slower. Master weights stay fp32 either way, so learning should not suffer.",
        look_at: "The backward and update_forward phases, and the returns of both settings.",
        // Products large enough that the precision decides their time: at 256 wide the
        // conversions cost as much as bf16 saves (an AMD EPYC with AVX512-BF16, 2026-11-26:
        // 1.04× slower at 256, 1.7× faster at 1024).
        baseline: Baseline::new(|s| {
            s.exec.precision = Precision::Fp32;
            s.ppo.hidden = vec![1024, 1024];
        }),
        variants: &[|s| s.exec.precision = Precision::Bf16],
        signature: Signature {
            measure: Measure::MicrosPerCall(Phase::BACKWARD),
            expect: Expect::Moves(1.2),
            text: "µs per backward pass",
        },
        budget: Budget { seconds: 1.5, repeats: 3 },
        on_cpu: Some(
            "bf16 is faster only on CPUs with AVX512-BF16 or AMX (1.7× at this width on an AMD EPYC with AVX512-BF16); \
            elsewhere it is emulated, about 10× slower than fp32, and a run in bf16 there is warned at its start and \
            advised fp32 by its report",
        ),
        on_gpu: Some(
            "the signature did not show on an H100 at this lesson's shape: the 1024-wide backward took 512 µs in fp32 \
            and 759 µs in bf16, and at 4-second runs × 3 the rate did not move (×1.03, 1.01–1.06, against an A/A \
            noise of 0.92–1.17). The likely reason, not measured: at this batch the backward is bound by its \
            launches and casts, not by the products the tensor cores speed up",
        ),
    },
    Lesson {
        id: "telemetry",
        row: 7,
        title: "Gradient telemetry on the hot path",
        phenomenon: "Computing gradient norms after every update, layer by layer, and publishing them synchronously \
            adds work and (on a GPU) a sync to every update. Taking them every k updates with one fused norm, and \
            handing them to a background thread through a bounded queue, keeps the figures and takes the cost off \
            the hot path; a full queue drops and counts, it never blocks. On a CPU the norms are cheap, so the \
            counts move more than the clock.",
        look_at: "The telemetry phase's calls and time.",
        baseline: Baseline::new(|s| {
            s.telemetry.every = 1;
        }),
        variants: &[|s| s.telemetry.every = 10],
        signature: Signature {
            measure: Measure::CallsPerStep(Phase::TELEMETRY),
            expect: Expect::Higher(5.0),
            text: "telemetry calls per env step",
        },
        budget: Budget { seconds: 1.5, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "cpu-trench",
        row: 8,
        title: "The trench after every decision",
        phenomenon: "Between two host epochs, seed 003's trainer walks its envs one after another: it reads each \
            env's slot state and metrics one value at a time, checks and applies the env's action, computes its \
            reward, and writes the state back with one small op. Each read is a device sync when that state lives \
            on a GPU, so the walk grows with the envs and nothing overlaps it. The batched lifecycle keeps every \
            env's slots in one struct-of-arrays tensor and computes masks, transitions and rewards for the whole \
            batch in a fixed handful of tensor ops, read back once per pass: the same slots, actions and rewards, \
            bit for bit. Here, on a CPU with native code, the walk is microseconds per env against milliseconds of \
            host training, so the reads fall by an order of magnitude while the wall clock barely moves: the \
            lesson shows both.",
        look_at: "Lifecycle reads per env step, and the lifecycle and reward phases' share of the wall.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<MorphoSpec>();
            w.lifecycle = LifecycleMode::Loop;
            s.exec.backend = Backend::Vectorized;
            s.envs = 4;
            s.steps = 4;
        })
        .over(MORPHO_SMALL),
        variants: &[|s| s.settings_mut::<MorphoSpec>().lifecycle = LifecycleMode::Batched],
        signature: Signature {
            measure: Measure::PerStep(Counter::Own(LIFECYCLE_READS)),
            expect: Expect::Higher(10.0),
            text: "reads of the envs' lifecycle state per env step",
        },
        budget: Budget { seconds: 3.0, repeats: 2 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "host-batching",
        row: 8,
        title: "Many small hosts, one model",
        phenomenon: "Each morpho env trains its own small host network: a minibatch is a few dozen small ops \
            (convolutions, the loss, Adam), issued host after host, each env its own control flow (on a GPU, seed \
            003 gives each env a CUDA stream and still launches every kernel per env). Batched host execution \
            trains the batch's hosts as one model with a leading env dimension: each stage one grouped \
            convolution over every host's weights, each blueprint one call over the hosts that run it, the head \
            one batched matmul; a host whose epoch is shorter leaves the batch after its last minibatch. The \
            same hosts to rounding. It pays where a host step is overhead: on a GPU (launches divided by the \
            envs), and on a CPU for hosts as tiny as this lesson's. At the default host width a CPU already runs \
            each host's convolutions about as well as the grouped one, the batch's gathers cost more, and \
            `hotlab bench host` measures batching slower: the lever depends on where the time goes.",
        look_at: "Host passes per env step, and the host_forward and host_backward phases.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<MorphoSpec>();
            w.host_exec = HostExec::PerEnv;
            s.exec.backend = Backend::Vectorized;
            s.envs = 8;
            s.steps = 2;
        })
        .over(MORPHO_SMALL),
        variants: &[|s| s.settings_mut::<MorphoSpec>().host_exec = HostExec::Batched],
        signature: Signature {
            measure: Measure::PerStep(Counter::Own(HOST_PASSES)),
            expect: Expect::Higher(2.0),
            text: "host training passes (sequences of small ops) per env step",
        },
        budget: Budget { seconds: 3.0, repeats: 2 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "model-surgery",
        row: 9,
        title: "Growing a network by surgery",
        phenomenon: "The morpho env's agent grafts modules into a host network while it trains. Made on each graft \
            and freed on each removal, a seed's tensors change the host's set of parameters, so a host step \
            captured as a CUDA graph (or compiled once) is invalid after every graft: that is what keeps seed \
            003's trainer launching kernels one by one. A sleeper pool makes one seed of every blueprint in every \
            slot up front, masks the sleeping ones (× 0, never stepped) and resets a seed in place when it is \
            grafted: the same tensors and the same ops every step, and the same results. On a GPU that buys the \
            capture; on a CPU nothing is captured, so the sleepers' masked compute is all the audit sees: a \
            regression here, which the lesson shows as honestly as the fix.",
        look_at: "Topology changes per env step, and the host_forward and host_backward phases.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<MorphoSpec>();
            w.slots = SlotPool::Dynamic;
            s.envs = 4;
            s.steps = 4;
        })
        .over(MORPHO_SMALL),
        variants: &[|s| s.settings_mut::<MorphoSpec>().slots = SlotPool::Sleeper],
        signature: Signature {
            measure: Measure::PerStep(Counter::Own(TOPOLOGY_CHANGES)),
            expect: Expect::Higher(4.0),
            text: "changes to a host's parameter set per env step",
        },
        budget: Budget { seconds: 3.0, repeats: 2 },
        on_cpu: None,
        on_gpu: Some(
            "on a GPU the sleeper pool is slower (0.42× here; `hotlab bench morpho --device cuda`: 0.38–0.84× over \
            4–64 envs, its replayed host step 45–67 % of the wall): a sleeper's static step runs every slot's seed, \
            the sleeping ones times 0, so it does more arithmetic than a dynamic pool's live seeds, and one replay \
            per minibatch does not pay that back on hosts this small. What shows on a GPU is the signature (no \
            changes to the parameter set), not speed",
        ),
    },
    Lesson {
        id: "batch-size",
        row: 10,
        title: "A batch too small for the device",
        phenomenon: "Every forward and every update pays fixed costs (dispatch, synchronization, bookkeeping) that \
            do not depend on the batch. With one env, each step pays them for a single row, and the phase split is \
            dominated by overhead rather than arithmetic. More envs share the same calls, so the cost per env step \
            falls until the device's arithmetic becomes the limit.",
        look_at: "The data / forward / backward split and the forward calls per env step.",
        baseline: Baseline::new(|s| {
            s.envs = 1;
        }),
        variants: &[|s| s.envs = 64],
        signature: Signature {
            measure: Measure::CallsPerStep(Phase::POLICY_FORWARD),
            expect: Expect::Higher(8.0),
            text: "rollout forwards per env step",
        },
        budget: Budget { seconds: 1.5, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "world-model-batch",
        row: 10,
        title: "A world model's batch too small",
        phenomenon: "A DreamerV3-style learner trains from its replay buffer at a fixed ratio of replayed steps to \
            env steps. Each train step pays the same number of calls whatever its batch: the encoder and decoder \
            once, the RSSM and the imagination once per step of a sequence or a dream, the backward passes, the \
            optimizers. With a small batch those fixed costs are paid again and again for a few sequences each, \
            and seed 004's split looks balanced while the device idles. A larger batch takes fewer train steps \
            for the same replayed steps, each one fuller, until the device's arithmetic (or its memory) is the \
            limit: `hotlab bench batch` finds where.",
        look_at: "The [PROFILE] split, and train steps (replay samples) per env step.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<DreamerSpec>();
            w.batch = 2;
        })
        .over(DREAMER_SMALL),
        variants: &[|s| s.settings_mut::<DreamerSpec>().batch = 16],
        signature: Signature {
            measure: Measure::CallsPerStep(REPLAY),
            expect: Expect::Higher(4.0),
            text: "train steps per env step",
        },
        budget: Budget { seconds: 3.0, repeats: 2 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "encoder-loop",
        row: 10,
        title: "An encoder called once per timestep",
        phenomenon: "Seed 004's world model encodes a replayed batch inside its RSSM loop: one encoder call per \
            timestep on the batch's frames of that step. The encoder does not depend on the recurrent state, so \
            every frame of every sequence can go through it in one call on [B·T, C, H, W], and only the RSSM \
            needs the loop. The same embeddings to rounding; T calls become one, each T times fuller.",
        look_at: "Encoder calls per env step, and the encoder's share of the forward.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<DreamerSpec>();
            w.encoder = EncoderMode::PerStep;
            w.seq_len = 16;
        })
        .over(DREAMER_SMALL),
        variants: &[|s| s.settings_mut::<DreamerSpec>().encoder = EncoderMode::Batched],
        signature: Signature {
            measure: Measure::CallsPerStep(ENCODER),
            expect: Expect::Higher(8.0),
            text: "encoder calls per env step",
        },
        budget: Budget { seconds: 3.0, repeats: 2 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "loss-item",
        row: 4,
        title: "A host sync per loss term",
        phenomenon: "Seed 004's trainer adds each loss term to its running totals with `.item()`, every train \
            step: each call copies one number to the host and waits for the device to finish everything queued \
            before it, so the host cannot run ahead of the GPU. Keeping the totals as tensors and reading them \
            once per logging window removes the waits; the numbers are the same. On a CPU there is no queue to \
            drain and a read is nearly free: the syncs fall sevenfold while the wall clock barely moves, which is \
            what the lesson shows here.",
        look_at: "Host syncs per env step.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<DreamerSpec>();
            w.loss_read = LossRead::PerItem;
        })
        .over(DREAMER_SMALL),
        variants: &[|s| s.settings_mut::<DreamerSpec>().loss_read = LossRead::Deferred],
        signature: Signature {
            measure: Measure::PerStep(Counter::HostSyncs),
            expect: Expect::Higher(4.0),
            text: "host syncs per env step",
        },
        budget: Budget { seconds: 3.0, repeats: 2 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "update-copies",
        row: 11,
        title: "Many small copies at update time",
        phenomenon: "The rollout is written on the host step by step, and the update needs it on the device. \
            Copying each step's rows of each field on their own (one small tensor per step, stacked there) pays \
            a copy call per step and field every update, and each call costs far more than its bytes. Copying \
            each field's whole rollout at once makes it a handful of copies per update, whatever the rollout's \
            length.",
        look_at: "Host→device copies per update and the obs_transfer phase.",
        baseline: Baseline::new(|s| {
            s.exec.rollout_copy = RolloutCopy::PerStep;
        }),
        variants: &[|s| s.exec.rollout_copy = RolloutCopy::Whole],
        signature: Signature {
            measure: Measure::PerStep(Counter::H2dCopies),
            expect: Expect::Higher(4.0),
            text: "host→device copies per env step",
        },
        budget: Budget { seconds: 1.5, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "rollout-on-host",
        row: 11,
        title: "The rollout kept on the host, each frame moved twice",
        phenomenon: "An eager rollout forward moves each step's observation to the device to act on it. A \
            rollout buffer kept on the host, as most PPO loops keep it, then moves the same observations \
            again at update time, with the actions the policy sampled there, so each frame crosses twice. \
            Keeping what the forward already moved in buffers on the device (one row per step) leaves the \
            update only the advantages and returns, which the host computed: each frame crosses once. On a \
            CPU device both are memory copies, so the bytes show it and the wall barely does; on a GPU with \
            Atari's 28 KB frames the second crossing is PCIe time every update.",
        look_at: "Host-to-device bytes per env step, and obs_transfer's share of the wall.",
        baseline: Baseline::new(|s| {
            s.settings_mut::<GymSpec>();
            s.exec.rollout_copy = RolloutCopy::Whole;
        })
        .over(BREAKOUT_SMALL),
        variants: &[|s| s.exec.rollout_copy = RolloutCopy::Kept],
        // A count: the frames (28,224 bytes an env) moved twice against once, the bootstrap's
        // and the few scalars beside them the same in both.
        signature: Signature {
            measure: Measure::PerStep(Counter::H2dBytes),
            expect: Expect::Higher(1.6),
            text: "bytes moved host to device per env step",
        },
        budget: Budget { seconds: 4.0, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "stream-waits",
        row: 4,
        title: "A stream that waits before every minibatch",
        phenomenon: "Seed 002's trainer trains each env's host network on a CUDA stream of its own, so that small \
            hosts overlap on the GPU, but it makes each stream wait for the default stream before every \
            minibatch as well as before the epoch. The data are already on the device, so the inner wait orders \
            nothing that needs ordering: it ties every host's minibatch to whatever the default stream holds and \
            adds an event per host per minibatch. Waiting only when something moved (once per epoch, after the \
            surgery and the indices' copy) gives the same results. Streams are a GPU's, so this lesson runs on a \
            CUDA GPU only.",
        look_at: "Stream waits per env step, and the host phases.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<MorphoSpec>();
            w.stream_wait = StreamWait::Every;
            w.images = 256;
            w.width = 8;
            s.device = "cuda".into();
            s.envs = 8;
            s.steps = 3;
        })
        .over(MORPHO_SMALL),
        variants: &[|s| s.settings_mut::<MorphoSpec>().stream_wait = StreamWait::Moved],
        signature: Signature {
            measure: Measure::PerStep(Counter::Own(STREAM_WAITS)),
            expect: Expect::Higher(3.0),
            text: "host stream waits per env step",
        },
        budget: Budget { seconds: 3.0, repeats: 2 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "replay-copies",
        row: 11,
        title: "A replay buffer on the host",
        phenomenon: "Seed 004's replay buffer keeps its frames in ordinary host memory: every train step gathers a \
            batch of sequences there and copies it to the GPU, thousands of bytes per replayed step, and the copy \
            from pageable memory blocks the host until it is done. Pinned (page-locked) staging lets the copy run \
            without blocking, but the bytes still cross the bus. A buffer kept on the device crosses it once per \
            env step, when the step is stored, and a batch is then one gather there plus the indices to gather. \
            A CPU has no bus to cross, so this lesson runs on a CUDA GPU only.",
        look_at: "Host→device bytes per env step and the replay phase.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<DreamerSpec>();
            w.replay = ReplayAt::Host;
            w.batch = 16;
            w.seq_len = 16;
            w.train_ratio = 64.0;
            s.device = "cuda".into();
        })
        .over(DREAMER_SMALL),
        variants: &[|s| s.settings_mut::<DreamerSpec>().replay = ReplayAt::Device],
        signature: Signature {
            measure: Measure::PerStep(Counter::H2dBytes),
            expect: Expect::Higher(4.0),
            text: "host→device bytes per env step",
        },
        budget: Budget { seconds: 3.0, repeats: 2 },
        on_cpu: None,
        on_gpu: Some(
            "the bytes fall 33×, and on an H100 the rate does not follow: at 4-second runs × 3, no effect (×1.01, \
            0.78–1.23, against an A/A noise of 0.84–1.23). The likely reason, not measured: 266 kB per env step \
            is about 10 µs on a PCIe 5 link, small beside the train step that follows it",
        ),
    },
    Lesson {
        id: "python-processes",
        row: 1,
        title: "Your env in one Python process or in worker processes",
        phenomenon: "A Gymnasium env is Python: one interpreter steps its envs one after another, under one GIL, \
            however many cores the machine has, and the trainer waits for the last of them. Worker processes each \
            hold a slice of the envs and step it at the same time as the others, and the trainer's round trip to \
            each one is a few microseconds through shared memory. Seed 000 met this with torchrl's ParallelEnv. \
            The lesson runs on Acrobot-v1; any id runs it (--set gym_id=ID), and the heavier the env's step the \
            more the split pays, up to as many processes as there are cores.",
        look_at: "The python_step phase: its time per env step and its share of the wall; and the round trips, \
            one per process each step: the processes that step their envs at the same time.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<GymSpec>();
            w.id = "Acrobot-v1".into();
            s.exec.backend = Backend::Vectorized;
            s.envs = 64;
            s.steps = 16;
        }),
        variants: &[|s| s.exec.backend = Backend::Subprocess],
        // A count, not a time, so that the check holds on a loaded machine: each process
        // answers each step, so the round trips count the processes that step at once (one
        // per core; the audit measures what that is worth).
        signature: Signature {
            measure: Measure::PerStep(Counter::IpcRoundTrips),
            expect: Expect::Moves(1.5),
            text: "round trips to Python processes per env step (one per process that steps at the same time)",
        },
        budget: Budget { seconds: 3.0, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "frames-as-floats",
        row: 2,
        title: "Frames as floats from the host, or bytes to the device",
        phenomenon: "An Atari observation is 4 stacked 84×84 frames of bytes: 28,224 bytes. Converted to float32 \
            on the host before it moves, as a loop that reads frames into a float tensor does, it is 112,896 bytes, \
            four times the copy each step to the rollout's forward (and again for the update where the rollout is \
            copied from the host: the rollout-on-host lesson), plus a host pass over every pixel. Kept as bytes to the device, the CNN's encoder converts and scales them there, once per \
            batch. On a CPU device both copies are memory copies, so the bytes moved show it and the wall barely \
            does; on a GPU they are PCIe transfers, where the four times is paid in time.",
        look_at: "Host-to-device bytes per env step, and obs_transfer's share of the wall.",
        baseline: Baseline::new(|s| {
            s.settings_mut::<GymSpec>();
            s.exec.frames = Frames::Float;
        })
        .over(BREAKOUT_SMALL),
        variants: &[|s| s.exec.frames = Frames::Bytes],
        // A count: floats are 4 bytes a pixel; the actions, advantages and returns that
        // move beside them are a few hundred bytes a step.
        signature: Signature {
            measure: Measure::PerStep(Counter::H2dBytes),
            expect: Expect::Higher(3.0),
            text: "bytes moved host to device per env step",
        },
        budget: Budget { seconds: 4.0, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "envpool-atari",
        row: 1,
        title: "Atari in Python workers, or EnvPool's C++ batch",
        phenomenon: "Atari's standard preprocessing in Python (Gymnasium's AtariPreprocessing and FrameStackObservation \
            in each worker: four emulator frames, a max-pool, a resize, a grayscale, a stack copied each step) runs \
            env by env under each worker's interpreter. EnvPool does the same preprocessing in C++ on its own thread \
            pool, the batch in one call, and its worker writes the same shared region, so nothing else in the run \
            changes. The emulator's own work is the same in both: what goes is the Python around it.",
        look_at: "Env time per env step (the workers' python_step against envpool_step, with the waits), and steps/s.",
        baseline: Baseline::new(|s| {
            s.settings_mut::<GymSpec>();
        })
        .over(BREAKOUT_SMALL),
        variants: &[|s| {
            s.settings_mut::<EnvpoolSpec>();
        }],
        // Timed: the Python around the emulator against EnvPool's C++, both on this box's cores.
        signature: Signature {
            measure: Measure::EnvMicrosPerStep,
            expect: Expect::Higher(1.2),
            text: "µs stepping envs per env step",
        },
        budget: Budget { seconds: 4.0, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "conv-layout",
        row: 6,
        title: "The CNN's memory layout: channels first or channels last",
        phenomenon: "PyTorch keeps images channels first (N, C, H, W), and a training loop that never says otherwise \
            convolves them that way. On a CPU, oneDNN's convolution kernels work channels last (N, H, W, C): handed \
            channels-first tensors they reorder each input, output and gradient into their own layout and back, on \
            every call of the forward and twice as many in the backward. Laying the batch out channels last once, \
            as it is converted to float, lets the kernels read it as it is and keeps their outputs that way through \
            the network. The arithmetic is the same; what goes is the reordering. On a GPU cuDNN's preference depends \
            on the card and the precision, so there `auto` keeps channels first until it is measured.",
        look_at: "The backward's µs per call, then update_forward and policy_forward.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<EnvpoolSpec>();
            w.id = "Breakout-v5".into();
            s.envs = 8;
            s.steps = 32;
            s.ppo.minibatches = 2;
            s.ppo.epochs = 1;
            s.exec.conv_layout = ConvLayout::Nchw;
        }),
        variants: &[|s| s.exec.conv_layout = ConvLayout::Nhwc],
        // Timed: the kernels' reorders against none, on this box's oneDNN.
        signature: Signature {
            measure: Measure::MicrosPerCall(Phase::BACKWARD),
            expect: Expect::Moves(1.3),
            text: "µs per backward pass",
        },
        budget: Budget { seconds: 4.0, repeats: 3 },
        on_cpu: Some(
            "it shows on CPUs with AVX-512, whose oneDNN kernels want channels last: the backward 1.39× faster on an \
            AMD EPYC with AVX-512 (docs/benchmarks.md, 2026-12-03); on a 2-core CPU without AVX-512 it did not show \
            (×1.00, 0.80–1.41)",
        ),
        on_gpu: None,
    },
    Lesson {
        id: "one-env",
        row: 1,
        title: "One MuJoCo env, one core, a round trip per step",
        phenomenon: "CleanRL's ppo_continuous_action.py collects its 2048-step batch from one env: each step is \
            one env.step in one Python process, and the trainer waits for it, so a 2-core machine steps the physics \
            on one core while the other idles, and every env step pays the trainer's round trip to the worker. \
            The same batch from 8 envs × 256 steps over one worker process per core steps the envs on every core \
            at once, and each round trip carries 4 envs' steps. The update is the same (the same batch, \
            minibatches and epochs); the trajectories differ, so the learning is compared at 1M steps \
            (docs/benchmarks.md), not here. It runs on InvertedPendulum-v5, MuJoCo's cheapest; any id runs it \
            (--set gym_id=HalfCheetah-v5), and the heavier the step the more the split pays.",
        look_at: "Round trips per env step, and python_step's and env_wait's shares of the wall.",
        baseline: Baseline::new(|s| {
            let w = s.settings_mut::<GymSpec>();
            w.id = "InvertedPendulum-v5".into();
            s.exec.backend = Backend::Subprocess;
            s.envs = 1;
            s.steps = 256;
            s.ppo.minibatches = 4;
            s.ppo.epochs = 4;
        }),
        variants: &[|s| s.envs = 8],
        // A count: with one env each env step is a round trip; with 8 over (up to) 2
        // processes, at most one per 4 env steps.
        signature: Signature {
            measure: Measure::PerStep(Counter::IpcRoundTrips),
            expect: Expect::Higher(3.0),
            text: "round trips to Python processes per env step",
        },
        budget: Budget { seconds: 3.0, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
    Lesson {
        id: "rnn-sequence",
        row: 12,
        title: "A recurrent policy's update: a cell per step, or a sequence per stretch",
        phenomenon: "A recurrent policy learns from whole segments: the update re-runs each env's rollout from the \
            state it started with, the state reset where an episode starts. Written as CleanRL's ppo_atari_lstm.py \
            writes it, a loop calls the cell once per step, T calls per minibatch, each a handful of small ops and \
            as many backward nodes. The same function as one call of the framework's whole-sequence RNN per \
            stretch between episode starts projects a stretch's inputs in one product and runs the recurrence in \
            its own fused loop (oneDNN's on a CPU, cuDNN's on a GPU), its backward too: fewer, larger calls, the \
            same outputs (the rollout's log-probs, to float rounding). Acting stays one cell call per step: there \
            the next input is not known before the env steps.",
        look_at: "update_core's calls per env step and its time per call, then update_forward and backward.",
        baseline: Baseline::new(|s| {
            s.ppo.rnn = Rnn::Lstm;
            s.ppo.rnn_width = 64;
            s.exec.rnn_update = RnnUpdate::Stepped;
        }),
        variants: &[|s| s.exec.rnn_update = RnnUpdate::Sequence],
        // A count: CartPole's default 4 envs × 128 steps, 4 minibatches of one env, 4 epochs:
        // 4 core calls per env step stepped; sequence, one per stretch between episode starts.
        signature: Signature {
            measure: Measure::CallsPerStep(Phase::UPDATE_CORE),
            expect: Expect::Higher(4.0),
            text: "core calls in the update per env step",
        },
        budget: Budget { seconds: 3.0, repeats: 3 },
        on_cpu: None,
        on_gpu: None,
    },
];

/// A lesson by id.
pub fn find(id: &str) -> Option<&'static Lesson> {
    LESSONS.iter().find(|l| l.id == id)
}

/// The ids, for an error that lists them.
pub fn ids() -> Vec<&'static str> {
    LESSONS.iter().map(|l| l.id).collect()
}

/// A lesson's parameters: knobs over its baseline, and its budget.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Params {
    /// Knob name → value as text (`envs` → `16`), applied over the baseline (so to every variant too).
    pub settings: std::collections::BTreeMap<String, String>,
    /// Pairs per variant [the lesson's budget].
    pub repeats: Option<usize>,
    /// Seconds of training per run [the lesson's budget].
    pub seconds: Option<f64>,
}

/// Env steps a lesson's run may take: its seconds end it.
const LESSON_STEPS: u64 = 100_000_000;

impl Lesson {
    /// Whether the lesson needs a CUDA GPU: its bottleneck does not exist on a CPU (its
    /// baseline names a CUDA device).
    pub fn needs_gpu(&self) -> bool {
        self.baseline.spec().device.starts_with("cuda")
    }

    /// The baseline spec with `params` over it.
    pub fn spec(&self, params: &Params) -> Result<RunSpec, SpecError> {
        let Ok(Value::Object(mut fields)) = serde_json::to_value(self.baseline.spec()) else {
            return Err(SpecError::new("lesson", "the baseline spec does not serialize"));
        };
        let seconds = params.seconds.unwrap_or(self.budget.seconds);
        let budget = [("total_steps", LESSON_STEPS.to_string()), ("seconds", seconds.to_string())];
        for (key, text) in budget.into_iter().map(|(k, v)| (k.to_string(), v)).chain(params.settings.clone()) {
            let knob = knobs::find(&key).ok_or_else(|| {
                SpecError::new("settings", format!("'{key}' is not a knob; the knobs: {}", knob_names()))
            })?;
            knob.set(&mut fields, knob.kind.value(&text));
        }
        let spec = json::parse(Value::Object(fields)).map_err(|r| r.error)?;
        spec.validate()?;
        Ok(spec)
    }

    /// Each fix as the knob it turns, `KEY=VALUE` (knobs joined by a space, should a fix
    /// turn several).
    pub fn fixes(&self) -> Vec<String> {
        self.changes().map(|c| c.map_or_else(|e| e.to_string(), |c| c.text)).collect()
    }

    /// Each fix as the audit's change: the knobs its edit changes in the slow setting, with
    /// their values; refused where an edit changes nothing.
    fn changes(&self) -> impl Iterator<Item = Result<Change, SpecError>> + '_ {
        let slow = self.baseline.spec();
        self.variants.iter().enumerate().map(move |(i, fix)| {
            let mut fixed = slow.clone();
            fix(&mut fixed);
            let turned = knobs::changed(&slow, &fixed);
            if turned.is_empty() {
                return Err(SpecError::new("variants", format!("{}: fix {} changes nothing", self.id, i + 1)));
            }
            let text = turned.iter().map(|(k, v)| format!("{}={v}", k.name)).collect::<Vec<_>>().join(" ");
            let settings = turned.into_iter().map(|(k, v)| (k, k.kind.value(&v))).collect();
            Ok(Change { settings, text, bound: None, target: None })
        })
    }

    /// The audit this lesson runs with `params`.
    pub fn plan(&self, params: &Params) -> Result<Plan, SpecError> {
        let changes = self.changes().collect::<Result<_, _>>()?;
        Plan::new(self.spec(params)?, changes, params.repeats.unwrap_or(self.budget.repeats))
    }

    /// The signature's figure per setting (medians over their runs) and whether it showed.
    pub fn figures(&self, plan: &Plan, measured: &[Measured]) -> (Vec<Figure>, bool) {
        let median_of = |want: Slot| {
            let mut v: Vec<f64> =
                plan.runs_of(want, measured).iter().map(|m| self.signature.measure.of(&m.profile)).collect();
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0)
        };
        let settings: Vec<Slot> =
            std::iter::once(Slot::Baseline).chain((0..plan.changes.len()).map(Slot::Variant)).collect();
        let figures: Vec<Figure> =
            settings.iter().map(|&s| Figure { setting: plan.label(s).to_string(), value: median_of(s) }).collect();
        let slow = figures[0].value;
        let shows = figures[1..].iter().all(|f| self.signature.shows(slow, f.value));
        (figures, shows)
    }

    /// The lesson's outcome from its runs' measurements, in the plan's order.
    pub fn conclude(&self, plan: &Plan, measured: &[Measured]) -> Result<Outcome, String> {
        let audit = plan.conclude(measured)?;
        let (signature, shows) = self.figures(plan, measured);
        Ok(Outcome { lesson: self.id.to_string(), audit, signature, shows })
    }

    /// Runs in the whole lesson.
    /// The device its runs ask for: `device` in the settings, else its baseline's, else auto.
    pub fn device(&self, params: &Params) -> String {
        params.settings.get(run_knobs::DEVICE.name).cloned().unwrap_or(self.baseline.spec().device)
    }

    /// `params` with the budget the lesson gets where its runs go to a CUDA device (`cuda`),
    /// or not, filled in where they leave it to the lesson; what was asked stays.
    pub fn params_on(&self, params: &Params, cuda: bool) -> Params {
        let budget = self.budget.on(cuda);
        Params {
            repeats: params.repeats.or(Some(budget.repeats)),
            seconds: params.seconds.or(Some(budget.seconds)),
            ..params.clone()
        }
    }

    pub fn runs(&self, params: &Params) -> usize {
        params.repeats.unwrap_or(self.budget.repeats) * (2 + 2 * self.variants.len())
    }
}

fn knob_names() -> String {
    knobs::KNOBS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fix is a typed edit that turns one knob of its slow setting, and reads as that
    /// knob as the audit writes a change: its `KEY=VALUE`, read back and applied to the
    /// slow setting, is the edit's spec exactly.
    #[test]
    fn each_fix_turns_one_knob_and_its_text_makes_the_same_spec() {
        for l in LESSONS {
            let slow = l.baseline.spec();
            for ((fix, text), change) in l.variants.iter().zip(l.fixes()).zip(l.changes()) {
                let change = change.unwrap_or_else(|e| panic!("{}: {e}", l.id));
                assert_eq!(change.settings.len(), 1, "{}: {text} turns one knob", l.id);
                let mut edited = slow.clone();
                fix(&mut edited);
                let read = Change::parse(&text).unwrap_or_else(|e| panic!("{}: {text}: {e}", l.id));
                assert_eq!(read.apply(&slow).unwrap_or_else(|e| panic!("{}: {text}: {e}", l.id)), edited, "{}", l.id);
            }
        }
    }

    #[test]
    fn every_lesson_builds_its_plan_within_a_minute_of_runs() {
        let mut ids = ids();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), LESSONS.len(), "one lesson per id");
        for l in LESSONS {
            let plan = l.plan(&Params::default()).unwrap_or_else(|e| panic!("{}: {e}", l.id));
            assert_eq!(plan.changes.len(), l.variants.len());
            assert!(!l.variants.is_empty(), "{}", l.id);
            let sentences = l.phenomenon.matches(". ").count() + 1;
            assert!((3..=6).contains(&sentences), "{}: {sentences} sentences", l.id);
            // Each run: its seconds and about half a second to start (a subprocess's workers more).
            let minute = l.runs(&Params::default()) as f64 * (l.budget.seconds + 0.5);
            assert!(minute <= 60.0, "{}: about {minute:.0} s", l.id);
        }
        let gpu: Vec<&str> = LESSONS.iter().filter(|l| l.needs_gpu()).map(|l| l.id).collect();
        assert_eq!(
            gpu,
            ["update-dispatch", "stream-waits", "replay-copies"],
            "the lessons whose bottleneck needs a GPU"
        );
    }

    #[test]
    fn a_baseline_is_its_world_then_its_own_edit_and_serializes_as_one_list() {
        let l = find("world-model-batch").unwrap();
        let text = |pairs: &[(&'static str, &str)]| pairs.iter().map(|(k, v)| (*k, v.to_string())).collect::<Vec<_>>();
        assert_eq!(
            l.baseline.knobs(),
            text(&[
                ("env", "dreamer"),
                ("batch_size", "2"),
                ("seq_len", "8"),
                ("train_ratio", "16.0"),
                ("prefill", "64"),
                ("steps", "16"),
            ]),
            "the lesson's batch over the world's, in the knob table's order; the world's 4 envs are the default's"
        );
        assert_eq!((l.baseline.get("batch_size"), l.baseline.get("lr")), (Some("2".into()), None));
        let json = serde_json::to_value(l).unwrap();
        assert_eq!(json["baseline"][1], serde_json::json!(["batch_size", "2"]));
        assert_eq!(json["baseline"].as_array().unwrap().len(), 6);
        for l in LESSONS {
            // What it serializes makes its spec: the settings the lab shows are what it runs.
            let pairs = l.baseline.knobs();
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            assert_eq!(knobs::apply_text(RunSpec::default(), &pairs).unwrap(), l.baseline.spec(), "{}", l.id);
        }
    }

    #[test]
    fn on_a_cuda_device_a_lessons_budget_is_at_least_the_gpus() {
        let quick = find("per-item-sync").unwrap();
        assert_eq!(quick.budget, Budget { seconds: 1.5, repeats: 3 });
        let on = |l: &Lesson, p: &Params, cuda| {
            let p = l.params_on(p, cuda);
            (p.seconds, p.repeats)
        };
        assert_eq!(on(quick, &Params::default(), false), (Some(1.5), Some(3)), "a CPU keeps the lesson's own");
        assert_eq!(on(quick, &Params::default(), true), (Some(4.0), Some(3)));
        let long = find("update-dispatch").unwrap();
        assert_eq!(on(long, &Params::default(), true), (Some(4.0), Some(3)), "{:?}", long.budget);
        let asked = Params { seconds: Some(0.5), repeats: Some(2), ..Params::default() };
        assert_eq!(on(quick, &asked, true), (Some(0.5), Some(2)), "what was asked stays");
        // The runs then last that long.
        let plan = quick.plan(&quick.params_on(&Params::default(), true)).unwrap();
        assert_eq!((plan.baseline.seconds, plan.repeats), (4.0, 3));
        // The device the runs ask for: the settings', the baseline's, else auto.
        assert_eq!(quick.device(&Params::default()), "auto");
        assert_eq!(long.device(&Params::default()), "cuda");
        let mut settings = std::collections::BTreeMap::new();
        settings.insert("device".to_string(), "cpu".to_string());
        assert_eq!(long.device(&Params { settings, ..Params::default() }), "cpu");
    }

    #[test]
    fn the_gpu_record_names_catalogue_lessons_and_reads_as_a_line() {
        let records = gpu_results(None).expect("the repository's record parses");
        assert!(!records.is_empty());
        for r in &records {
            let l = find(&r.lesson).unwrap_or_else(|| panic!("{} is not a lesson", r.lesson));
            assert_eq!(r.figures.len(), l.variants.len() + 1, "{}: the slow setting and each fix", r.lesson);
            assert_eq!(r.date.len(), 10, "{}", r.date);
        }
        let quick = GpuResult { verdicts: Vec::new(), ..gpu_result("replay-copies").expect("recorded") };
        let line = quick.line();
        assert!(line.starts_with("measured on an NVIDIA H100 80GB HBM3, 2026-11-28: the signature shows"), "{line}");
        assert!(line.contains("host→device bytes per env step 265606 → 8051"), "{line}");
        let line = gpu_result("update-dispatch").expect("recorded with its verdict").line();
        assert!(
            line.contains(": update=graph confirmed ×1.90 (1.39–2.50; A/A noise 0.87–1.11, 4 s runs × 3 repeats)"),
            "{line}"
        );
        let verdict = RecordedVerdict {
            change: "update=graph".into(),
            verdict: crate::audit::Verdict::Confirmed,
            ratio: crate::audit::Interval { median: 3.4, low: 3.1, high: 3.7 },
            noise: crate::audit::Interval { median: 1.0, low: 0.95, high: 1.05 },
            budget: Some(Budget { seconds: 4.0, repeats: 3 }),
        };
        let confirmed = GpuResult { verdicts: vec![verdict.clone()], ..records[0].clone() };
        let line = confirmed.line();
        assert!(
            line.ends_with(": update=graph confirmed ×3.40 (3.10–3.70; A/A noise 0.95–1.05, 4 s runs × 3 repeats)"),
            "{line}"
        );
        // A record made before budgets were kept reads as well, without one.
        let old = GpuResult { verdicts: vec![RecordedVerdict { budget: None, ..verdict }], ..records[0].clone() };
        assert!(old.line().ends_with("(3.10–3.70; A/A noise 0.95–1.05)"), "{}", old.line());
        assert!(gpu_results(Some("{}")).unwrap_err().contains("not a lesson record"));
        assert_eq!(
            (short(0.0039062), short(364.37), short(1.625), short(0.25)),
            ("0.0039".into(), "364".into(), "1.62".into(), "0.25".into())
        );
    }

    #[test]
    fn a_lesson_takes_knobs_over_its_baseline_and_refuses_bad_ones() {
        let l = find("per-item-sync").unwrap();
        let settings = [("envs".to_string(), "32".to_string())].into();
        let params = Params { settings, repeats: Some(2), seconds: Some(0.5) };
        let plan = l.plan(&params).unwrap();
        assert_eq!((plan.baseline.envs, plan.variants[0].envs, plan.repeats), (32, 32, 2));
        assert_eq!(plan.baseline.seconds, 0.5);
        assert_eq!(plan.variants[0].exec.action_sync.to_string(), "stacked");
        let bad = |settings: &[(&str, &str)], repeats| {
            let settings = settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            l.plan(&Params { settings, repeats, seconds: None }).unwrap_err().field
        };
        assert_eq!(bad(&[("speed", "1")], None), "settings");
        assert_eq!(bad(&[("envs", "0")], None), "envs");
        assert_eq!(bad(&[], Some(1)), "repeats");
        assert_eq!(bad(&[("action_sync", "stacked")], None), "action_sync", "the fix already in the baseline");
        assert_eq!(l.plan(&Params { seconds: Some(-1.0), ..Params::default() }).unwrap_err().field, "seconds");
    }

    #[test]
    fn signatures_compare_the_slow_setting_with_each_fix() {
        let higher = Signature { measure: Measure::Share(Phase::ENV_WAIT), expect: Expect::Higher(4.0), text: "" };
        assert!(higher.shows(1.0, 0.0) && higher.shows(1.0, 0.25) && !higher.shows(1.0, 0.3));
        assert!(!higher.shows(0.0, 0.0), "nothing to show");
        let moves = Signature { expect: Expect::Moves(1.2), ..higher };
        assert!(moves.shows(1.0, 2.0) && moves.shows(2.0, 1.0) && !moves.shows(1.0, 1.1));
        let mut p = Profile { wall_s: 2.0, ..Profile::default() };
        p.counters.env_steps = 100;
        p.counters.host_syncs = 50;
        p.phases.push(hotlab_core::profile::PhaseTime {
            phase: Phase::BACKWARD,
            wall_s: 0.5,
            calls: 10,
            device_s: None,
        });
        assert_eq!(Measure::PerStep(Counter::HostSyncs).of(&p), 0.5);
        assert_eq!(Measure::CallsPerStep(Phase::BACKWARD).of(&p), 0.1);
        assert_eq!(Measure::MicrosPerCall(Phase::BACKWARD).of(&p), 50_000.0);
        assert_eq!(Measure::Share(Phase::BACKWARD).of(&p), 0.25);
    }
}

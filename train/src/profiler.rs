//! The profiler: every phase of every step is a span; per phase, wall time and calls,
//! per window (one update) and in total; optionally Chrome trace events for a window of
//! steps. A span costs one clock read at each boundary (`stop` returns the time it read,
//! to start the next span); the profiler estimates its own cost from a calibration of
//! that clock read, and reports it.

use hotlab_core::counters::{Counters, ENV_PARTS};
use hotlab_core::profile::{GpuMemory, Phase, PhaseTime, Profile};
use hotlab_core::script::ScriptProfile;
use hotlab_specs::PHASES;
use serde_json::json;
use std::time::Instant;

#[derive(Clone, Copy, Default)]
struct Stat {
    wall_s: f64,
    calls: u64,
    device_s: f64,
}

/// Device time per phase: on a GPU, events recorded on the stream at span boundaries
/// (the GPU issue implements it with CUDA events). The profiler calls [`DeviceTimer::mark`]
/// at every boundary and [`DeviceTimer::drain`] once per window; without a timer (the CPU)
/// `device_s` stays empty.
pub trait DeviceTimer {
    /// A span boundary: the device work queued since the previous mark belongs to
    /// `phase` (`None`: to no phase, e.g. at a span's start).
    fn mark(&mut self, phase: Option<Phase>);
    /// Device seconds per phase since the last drain, as `(phase, seconds)` pairs (may wait
    /// for the device: it is called once per window).
    fn drain(&mut self) -> Vec<(Phase, f64)>;
    /// The device's memory at the last drain, where known.
    fn memory(&self) -> Option<GpuMemory> {
        None
    }
}

/// Which steps to trace: global rollout steps `first .. end` (one step = every env once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceWindow {
    pub first: u64,
    pub end: u64,
}

impl std::str::FromStr for TraceWindow {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("expected A..B with A < B, e.g. 0..256 (got '{s}')");
        let (a, b) = s.split_once("..").ok_or_else(bad)?;
        let (first, end) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
        if first < end {
            Ok(Self { first, end })
        } else {
            Err(bad())
        }
    }
}

/// Where a piece of work is accounted: the phase profiler and the run's counters.
pub struct Meters<'a> {
    pub prof: &'a mut Profiler,
    pub counters: &'a mut Counters,
}

pub struct Profiler {
    /// The phases it keeps, in the registry's order (a phase the registry lacks is added at
    /// its first span); `total` and `window` hold one stat per phase.
    phases: Vec<Phase>,
    total: Vec<Stat>,
    window: Vec<Stat>,
    /// The run's env parts, in the order its envs' part clock keeps them.
    env_parts: &'static [Phase],
    run_start: Instant,
    window_start: Instant,
    clock_reads: u64,
    clock_reads_window: u64,
    clock_cost_s: f64,
    total_wall_s: f64,
    trace_window: Option<TraceWindow>,
    step: u64,
    events: Vec<serde_json::Value>,
    /// Whether this window recorded trace spans (then its counters go in the trace too).
    traced_window: bool,
    device: Option<Box<dyn DeviceTimer>>,
    /// What a probe measured of a user's script, this window and in total.
    script: Option<Box<ScriptProfile>>,
    script_total: Option<Box<ScriptProfile>>,
    /// The update's products' kind where the device emulates it ([`Profile::emulated`]).
    emulated: Option<String>,
    /// Whether the policy has no fused rollout forward ([`Profile::eager_only`]).
    eager_only: bool,
    /// Seconds that measuring cost elsewhere (a script's probe), this window and in total.
    measured_cost_s: f64,
    measured_cost_total_s: f64,
}

/// The cost of one `Instant::now()`, measured.
fn calibrate() -> f64 {
    const N: u32 = 20_000;
    let start = Instant::now();
    let mut last = start;
    for _ in 0..N {
        last = std::hint::black_box(Instant::now());
    }
    (last - start).as_secs_f64() / N as f64
}

impl Profiler {
    pub fn new(trace_window: Option<TraceWindow>) -> Self {
        let now = Instant::now();
        let phases: Vec<Phase> = PHASES.iter().map(|i| i.phase).collect();
        Self {
            total: vec![Stat::default(); phases.len()],
            window: vec![Stat::default(); phases.len()],
            phases,
            env_parts: &[],
            run_start: now,
            window_start: now,
            clock_reads: 0,
            clock_reads_window: 0,
            clock_cost_s: calibrate(),
            total_wall_s: 0.0,
            trace_window,
            step: 0,
            events: Vec::new(),
            traced_window: false,
            device: None,
            script: None,
            emulated: None,
            eager_only: false,
            script_total: None,
            measured_cost_s: 0.0,
            measured_cost_total_s: 0.0,
        }
    }

    /// The phases the run's envs time themselves, in their part clock's order (its
    /// workload's `ENV_PARTS`): [`Profiler::stop_env`] carves an env step into them.
    pub fn set_env_parts(&mut self, parts: &'static [Phase]) {
        self.env_parts = parts;
    }

    /// Where `phase`'s stats are: a scan of a few dozen names, pointers first (a phase's
    /// constant is one string wherever it is named), added at the end when new.
    fn slot(&mut self, phase: Phase) -> usize {
        let name = phase.name();
        if let Some(i) = self.phases.iter().position(|p| std::ptr::eq(p.name(), name)) {
            return i;
        }
        if let Some(i) = self.phases.iter().position(|&p| p == phase) {
            return i;
        }
        self.phases.push(phase);
        self.total.push(Stat::default());
        self.window.push(Stat::default());
        self.phases.len() - 1
    }

    /// Times phases on the device too (a GPU run).
    pub fn set_device_timer(&mut self, timer: Box<dyn DeviceTimer>) {
        self.device = Some(timer);
    }

    /// The global rollout step now running (for the trace window).
    pub fn set_step(&mut self, step: u64) {
        self.step = step;
    }

    fn tracing(&self) -> bool {
        self.trace_window.is_some_and(|w| self.step >= w.first && self.step < w.end)
    }

    /// Starts a span.
    #[inline]
    pub fn start(&mut self) -> Instant {
        self.clock_reads_window += 1;
        if let Some(d) = self.device.as_mut() {
            d.mark(None);
        }
        Instant::now()
    }

    /// Ends a span of `phase` begun at `start`; returns the end time (the next span's start).
    #[inline]
    pub fn stop(&mut self, phase: Phase, start: Instant) -> Instant {
        let now = Instant::now();
        self.clock_reads_window += 1;
        if let Some(d) = self.device.as_mut() {
            d.mark(Some(phase));
        }
        self.record(phase, start, (now - start).as_secs_f64());
        now
    }

    /// Ends a span begun at `start` whose first `waited` seconds belong to `wait` and the
    /// rest to `phase` (an env step that includes waiting on workers).
    #[inline]
    pub fn stop_split(&mut self, phase: Phase, wait: Phase, waited: f64, start: Instant) -> Instant {
        let now = Instant::now();
        self.clock_reads_window += 1;
        if let Some(d) = self.device.as_mut() {
            d.mark(Some(phase)); // waiting is the host's; the device worked for `phase`
        }
        let total = (now - start).as_secs_f64();
        let waited = waited.clamp(0.0, total);
        if waited > 0.0 {
            self.record(wait, start, waited);
        }
        self.record(phase, start + std::time::Duration::from_secs_f64(waited), total - waited);
        now
    }

    /// Ends an env step's span begun at `start`: first the parts the envs timed themselves
    /// (`parts` seconds, in the order of [`Profiler::set_env_parts`]), then `waited` seconds of waiting
    /// on workers, the rest `env_step`. Envs stepped in parallel report more part-seconds
    /// than the span lasted: the parts then share the span in proportion to them.
    pub fn stop_env(&mut self, waited: f64, parts: &[f64; ENV_PARTS], start: Instant) -> Instant {
        let busy: f64 = parts.iter().map(|p| p.max(0.0)).sum();
        if busy <= 0.0 {
            return self.stop_split(Phase::ENV_STEP, Phase::ENV_WAIT, waited, start);
        }
        let now = Instant::now();
        self.clock_reads_window += 1;
        if let Some(d) = self.device.as_mut() {
            d.mark(Some(Phase::ENV_STEP));
        }
        let total = (now - start).as_secs_f64();
        let scale = (total / busy).min(1.0);
        let mut at = start;
        for (&phase, &secs) in self.env_parts.iter().zip(parts) {
            let secs = secs.max(0.0) * scale;
            if secs > 0.0 {
                self.record(phase, at, secs);
                at += std::time::Duration::from_secs_f64(secs);
            }
        }
        let rest = (total - busy * scale).max(0.0);
        let waited = waited.clamp(0.0, rest);
        if waited > 0.0 {
            self.record(Phase::ENV_WAIT, at, waited);
        }
        self.record(Phase::ENV_STEP, at + std::time::Duration::from_secs_f64(waited), rest - waited);
        now
    }

    /// Adds `secs` to `phase` as one call that began at `start` (for phases measured
    /// elsewhere, like the time an env backend spent waiting on its workers).
    pub fn record(&mut self, phase: Phase, start: Instant, secs: f64) {
        let i = self.slot(phase);
        let s = &mut self.window[i];
        s.wall_s += secs;
        s.calls += 1;
        if self.tracing() {
            self.traced_window = true;
            self.events.push(json!({
                "name": phase.name(), "cat": "phase", "ph": "X", "pid": 1, "tid": 1,
                "ts": (start - self.run_start).as_secs_f64() * 1e6, "dur": secs * 1e6,
                "args": { "step": self.step },
            }));
        }
    }

    /// Marks the run's products as emulated by the device (`bf16` on a CPU without
    /// AVX512-BF16): its profiles say so, for the report's precision rule.
    pub fn set_emulated(&mut self, kind: Option<&str>) {
        self.emulated = kind.map(str::to_string);
    }

    /// Marks the run's policy as having no fused rollout forward: its profiles say so, for
    /// the report's forward rule.
    pub fn set_eager_only(&mut self) {
        self.eager_only = true;
    }

    /// Adds `secs` in `calls` calls to `phase` at once (a phase measured elsewhere: a user's
    /// script, timed by its probe).
    pub fn add(&mut self, phase: Phase, secs: f64, calls: u64) {
        let i = self.slot(phase);
        self.window[i].wall_s += secs;
        self.window[i].calls += calls;
    }

    /// What a probe measured of a user's script in this window, and what measuring it
    /// cost (the profile's overhead).
    pub fn add_script(&mut self, facts: &ScriptProfile, cost_s: f64) {
        self.script.get_or_insert_with(Box::default).accumulate(facts);
        self.measured_cost_s += cost_s;
    }

    /// Closes the current window (one update): its profile, with `other` = wall − phases.
    pub fn take_window(&mut self, counters: &Counters) -> Profile {
        let now = Instant::now();
        let wall = (now - self.window_start).as_secs_f64();
        let other = self.slot(Phase::OTHER);
        let drained = self.device.as_mut().map(|d| d.drain()).unwrap_or_default();
        let at: Vec<usize> = drained.iter().map(|&(phase, _)| self.slot(phase)).collect();
        let mut window = std::mem::replace(&mut self.window, vec![Stat::default(); self.phases.len()]);
        let claimed: f64 = window.iter().map(|s| s.wall_s).sum();
        window[other] = Stat { wall_s: (wall - claimed).max(0.0), calls: 1, device_s: 0.0 };
        for (i, (_, secs)) in at.into_iter().zip(drained) {
            window[i].device_s += secs;
        }
        for (t, w) in self.total.iter_mut().zip(&window) {
            t.wall_s += w.wall_s;
            t.calls += w.calls;
            t.device_s += w.device_s;
        }
        if std::mem::take(&mut self.traced_window) {
            let c = serde_json::to_value(counters).unwrap_or_default();
            self.events.push(json!({
                "name": "counters", "ph": "C", "pid": 1, "tid": 1,
                "ts": (now - self.run_start).as_secs_f64() * 1e6, "args": c,
            }));
        }
        let reads = self.clock_reads_window;
        self.clock_reads += reads;
        self.clock_reads_window = 0;
        self.window_start = now;
        self.total_wall_s += wall;
        let cost = reads as f64 * self.clock_cost_s + std::mem::take(&mut self.measured_cost_s);
        self.measured_cost_total_s += cost - reads as f64 * self.clock_cost_s;
        let mut p = profile(&self.phases, &window, wall, counters, cost, self.device.is_some());
        p.gpu_memory = self.device.as_ref().and_then(|d| d.memory());
        p.emulated.clone_from(&self.emulated);
        p.eager_only = self.eager_only;
        p.script = self.script.take();
        if let Some(w) = &p.script {
            self.script_total.get_or_insert_with(Box::default).accumulate(w);
        }
        p
    }

    /// Every window so far.
    pub fn total(&self, counters: &Counters) -> Profile {
        let overhead = self.clock_reads as f64 * self.clock_cost_s + self.measured_cost_total_s;
        let mut p = profile(&self.phases, &self.total, self.total_wall_s, counters, overhead, self.device.is_some());
        p.gpu_memory = self.device.as_ref().and_then(|d| d.memory());
        p.emulated.clone_from(&self.emulated);
        p.eager_only = self.eager_only;
        p.script.clone_from(&self.script_total);
        p
    }

    /// The traced window as a Chrome trace-event document (Perfetto, chrome://tracing).
    pub fn trace_json(&self) -> serde_json::Value {
        let mut events = vec![
            json!({"name": "process_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "hotlab trainer"}}),
            json!({"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "trainer"}}),
        ];
        events.extend(self.events.iter().cloned());
        json!({ "traceEvents": events, "displayTimeUnit": "ms" })
    }
}

fn profile(
    phases: &[Phase],
    stats: &[Stat],
    wall_s: f64,
    counters: &Counters,
    overhead_s: f64,
    device: bool,
) -> Profile {
    Profile {
        wall_s,
        phases: phases
            .iter()
            .zip(stats)
            .map(|(&phase, s)| PhaseTime {
                phase,
                wall_s: s.wall_s,
                calls: s.calls,
                device_s: device.then_some(s.device_s),
            })
            .collect(),
        counters: counters.clone(),
        overhead_s,
        gpu_memory: None,
        script: None,
        emulated: None,
        eager_only: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_add_up_and_other_takes_the_rest() {
        let mut p = Profiler::new(Some(TraceWindow { first: 0, end: 10 }));
        let t = p.start();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let t = p.stop(Phase::ENV_STEP, t);
        std::thread::sleep(std::time::Duration::from_millis(2));
        p.stop(Phase::BACKWARD, t);
        std::thread::sleep(std::time::Duration::from_millis(3));
        let w = p.take_window(&Counters::default());
        assert!(w.phase(Phase::ENV_STEP) >= 0.005);
        assert!(w.phase(Phase::OTHER) >= 0.003);
        let sum: f64 = w.phases.iter().map(|t| t.wall_s).sum();
        assert!((sum - w.wall_s).abs() < 1e-9);
        assert_eq!(w.calls(Phase::BACKWARD), 1);
        let total = p.total(&Counters::default());
        assert_eq!(total.phase(Phase::ENV_STEP), w.phase(Phase::ENV_STEP));
        let trace = p.trace_json();
        let events = trace["traceEvents"].as_array().unwrap();
        assert!(events.iter().any(|e| e["ph"] == "X" && e["name"] == "env_step"));
        assert!(events.iter().any(|e| e["ph"] == "C"));
        assert_eq!("3..9".parse::<TraceWindow>(), Ok(TraceWindow { first: 3, end: 9 }));
        assert!("9..3".parse::<TraceWindow>().is_err());
        assert!(total.phases.iter().all(|t| t.device_s.is_none()), "no device timer, no device time");
    }

    /// An env step's span is carved into the parts the envs timed, then the wait, then the
    /// rest; parts timed in parallel (more seconds than the span) share it in proportion.
    /// Two of an env's own parts (any workload's: the profiler names none).
    const PARTS: [Phase; 2] = [Phase::new("part_a"), Phase::new("part_b")];

    #[test]
    fn an_env_span_is_carved_into_the_envs_parts() {
        let (part_a, part_b) = (PARTS[0], PARTS[1]);
        let mut p = Profiler::new(None);
        p.set_env_parts(&PARTS);
        let mut parts = [0.0; ENV_PARTS];
        (parts[0], parts[1]) = (0.004, 0.002);
        let t = p.start();
        std::thread::sleep(std::time::Duration::from_millis(10));
        p.stop_env(0.001, &parts, t);
        let w = p.take_window(&Counters::default());
        assert_eq!((w.phase(part_a), w.phase(part_b)), (0.004, 0.002));
        assert_eq!(w.phase(Phase::ENV_WAIT), 0.001);
        assert!(w.phase(Phase::ENV_STEP) >= 0.003 - 1e-9 && w.calls(Phase::BACKWARD) == 0);
        // Two workers' parts: 20 ms of work in a span of ~10 ms.
        (parts[0], parts[1]) = (0.015, 0.005);
        let t = p.start();
        std::thread::sleep(std::time::Duration::from_millis(10));
        p.stop_env(0.009, &parts, t);
        let w = p.take_window(&Counters::default());
        let (f, v) = (w.phase(part_a), w.phase(part_b));
        assert!((f / v - 3.0).abs() < 1e-6, "in proportion: {f} {v}");
        assert!(w.phase(Phase::ENV_WAIT) + w.phase(Phase::ENV_STEP) < 1e-12, "the parts fill the span");
    }

    /// The marks a timer receives, attributed as a stream of events would be: what was
    /// queued between a span's start and its stop belongs to that span's phase. (No CUDA
    /// here: this checks the profiler's side of the wiring.)
    struct Marks(Vec<Option<Phase>>);

    impl DeviceTimer for Marks {
        fn mark(&mut self, phase: Option<Phase>) {
            self.0.push(phase);
        }
        fn drain(&mut self) -> Vec<(Phase, f64)> {
            // One millisecond of device time per mark that closes a phase.
            std::mem::take(&mut self.0).into_iter().flatten().map(|p| (p, 1e-3)).collect()
        }
    }

    #[test]
    fn a_device_timer_gets_every_boundary_and_fills_device_time() {
        let mut p = Profiler::new(None);
        p.set_device_timer(Box::new(Marks(Vec::new())));
        let t = p.start();
        let t = p.stop(Phase::UPDATE_FORWARD, t);
        let t = p.stop(Phase::BACKWARD, t);
        p.stop(Phase::BACKWARD, t);
        let w = p.take_window(&Counters::default());
        let device = |ph: Phase| w.phases.iter().find(|t| t.phase == ph).unwrap().device_s;
        assert_eq!(device(Phase::UPDATE_FORWARD), Some(1e-3));
        assert_eq!(device(Phase::BACKWARD), Some(2e-3));
        assert_eq!(device(Phase::ENV_STEP), Some(0.0));
        let t = p.start();
        p.stop(Phase::OPTIMIZER, t);
        p.take_window(&Counters::default());
        let total = p.total(&Counters::default());
        assert_eq!(total.phases.iter().find(|t| t.phase == Phase::BACKWARD).unwrap().device_s, Some(2e-3));
    }
}

//! What the probe says (`probe/hotlab_probe.py`, one JSON line each) and how a window of it
//! is accounted: its phases into the profiler, its counts into the run's counters, its
//! facts ([`ScriptProfile`]) beside them, its episodes into the tally.

use hotlab_core::counters::Counters;
use hotlab_core::profile::Phase;
use hotlab_core::script::ScriptProfile;
use hotlab_specs::external::{HOST_READ, PROBE};
use hotlab_train::episodes::Episodes;
use hotlab_train::profiler::Profiler;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One line of the probe.
#[derive(Debug, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Message {
    /// The probe armed in the script's process.
    Hello(Hello),
    /// What a window measured.
    Window(Box<Window>),
    /// The script is exiting (its last window was sent).
    End,
}

#[derive(Debug, Deserialize)]
pub struct Hello {
    pub pid: u32,
    pub python: String,
    pub executable: String,
}

/// One window: about a rollout and its update (`setup`: from the probe's arming to the
/// first env step).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Window {
    #[serde(rename = "final")]
    pub last: bool,
    pub setup: bool,
    pub wall_s: f64,
    /// Exclusive seconds and calls per phase (`other`: outside every span).
    pub phases: BTreeMap<String, (f64, u64)>,
    pub probe_s: f64,
    pub hook_cost_s: f64,
    pub op_cost_s: f64,
    pub env_steps: u64,
    /// Each episode's return and length.
    pub episodes: Vec<(f64, u64)>,
    pub reads: u64,
    pub copies: u64,
    pub copy_bytes: u64,
    /// What it measured of the loop, as the profile carries it.
    pub facts: ScriptProfile,
}

/// The probe's phases that are the profile's (`other` is what no phase claims, which the
/// profiler works out itself).
const PHASES: &[Phase] = &[
    Phase::ENV_STEP,
    Phase::ENV_WAIT,
    Phase::POLICY_FORWARD,
    Phase::UPDATE_FORWARD,
    Phase::BACKWARD,
    Phase::OPTIMIZER,
    Phase::OBS_TRANSFER,
    HOST_READ,
];

impl Window {
    /// Seconds the probe cost: its bookkeeping (measured) and its hooks (calls × their
    /// calibrated cost).
    pub fn cost_s(&self) -> f64 {
        self.probe_s + self.hook_cost_s + self.op_cost_s
    }

    /// Accounts this window: phases into `prof` (with the facts and the probe's cost), counts
    /// into `counters`, episodes into `episodes`.
    pub fn account(&self, prof: &mut Profiler, counters: &mut Counters, episodes: &mut Episodes) {
        for phase in PHASES {
            if let Some(&(secs, calls)) = self.phases.get(phase.name()) {
                prof.add(*phase, secs.max(0.0), calls);
            }
        }
        prof.add(PROBE, self.probe_s.max(0.0), 0);
        counters.env_steps += self.env_steps;
        counters.host_syncs += self.reads;
        counters.h2d_copies += self.copies;
        counters.h2d_bytes += self.copy_bytes;
        counters.worker_wait_s += self.phases.get(Phase::ENV_WAIT.name()).map_or(0.0, |p| p.0);
        for &(ret, _) in &self.episodes {
            episodes.push(ret);
        }
        prof.add_script(&self.facts, self.cost_s());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_line_reads_back_and_adds_up() {
        let line = r#"{"t": "window", "final": false, "setup": false, "wall_s": 1.0,
            "phases": {"env_step": [0.5, 10], "host_read": [0.1, 40], "other": [0.3, 0]},
            "probe_s": 0.01, "hook_cost_s": 0.02, "op_cost_s": 0.0, "env_steps": 40,
            "episodes": [[12.0, 12], [3.0, 3]], "reads": 44, "copies": 10, "copy_bytes": 1600,
            "facts": {"vector_steps": 10, "num_envs": 4, "env_class": "SyncVectorEnv",
                "kinds": {"python_in_process": 10}, "reads_per_step": [[4, 9], [8, 1]], "hook_calls": 100,
                "sites": [{"kind": "host_read", "file": "/x/t.py", "line": 7, "function": "main", "count": 40}]},
            "a_key_of_a_later_probe": 1}"#;
        let Message::Window(w) = serde_json::from_str(line).unwrap() else { panic!("a window") };
        let mut prof = Profiler::new(None);
        let (mut c, mut e) = (Counters::default(), Episodes::default());
        w.account(&mut prof, &mut c, &mut e);
        assert_eq!((c.env_steps, c.host_syncs, c.h2d_copies, c.h2d_bytes), (40, 44, 10, 1600));
        assert_eq!((e.count, e.mean()), (2, Some(7.5)));
        let p = prof.take_window(&c);
        assert_eq!((p.phase(Phase::ENV_STEP), p.calls(HOST_READ)), (0.5, 40));
        let s = p.script.expect("the window's facts");
        assert_eq!((s.reads_per_step(), s.busiest("host_read").map(|x| x.line)), (Some(4), Some(7)));
        assert!((p.overhead_s - 0.03).abs() < 0.01, "the probe's cost is the overhead: {}", p.overhead_s);
        assert!(matches!(serde_json::from_str::<Message>(r#"{"t": "end"}"#).unwrap(), Message::End));
    }
}

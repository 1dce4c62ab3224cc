//! The user's script as the loop's learner: one iteration is one window of the probe
//! (about a rollout and its update), accounted as hotlab's own iterations are; the run ends
//! when the script does. Its "policy" is the script's own: hotlab keeps none.

use super::process::{Said, Script, ScriptCommand};
use super::window::{Message, Window};
use anyhow::{bail, Result};
use hotlab_protocol::Losses;
use hotlab_spec::RunSpec;
use hotlab_train::error::RunError;
use hotlab_train::params::{Network, ParamSlot};
use hotlab_train::workload::{Evaluation, Iteration, Learner, Outcome, TrainedPolicy, OPEN_ENDED};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// A script being measured.
pub struct ScriptLearner {
    script: Script,
    /// The command as shown.
    shown: String,
    ended: bool,
    /// A window that came before the set-up ended (a script that steps no env).
    pending: Option<Box<Window>>,
}

impl ScriptLearner {
    /// Starts the script and waits (looking at `stop`) for its set-up to end: the probe's
    /// first window, which closes at the first env step. Its imports and set-up so count
    /// as the run's set-up, as a script's own steps/s leaves them out.
    pub fn start(command: &ScriptCommand, stop: Option<&AtomicBool>) -> Result<Self, RunError> {
        let script = Script::start(command)?;
        let mut learner = ScriptLearner { script, shown: command.shown.clone(), ended: false, pending: None };
        match learner.next(stop)? {
            Next::Window(w) if w.setup => {}
            // Not the set-up's: a script that stepped no env; accounted at the first iteration.
            Next::Window(w) => learner.pending = Some(w),
            Next::Stopped => {}
            Next::Ended => learner.ended = true,
        }
        Ok(learner)
    }

    /// The next window (hello lines skipped), a stop, or the script's end (its failure
    /// an error).
    fn next(&mut self, stop: Option<&AtomicBool>) -> Result<Next> {
        loop {
            match self.script.next(stop)? {
                Said::Stopped => return Ok(Next::Stopped),
                Said::Closed => {
                    self.script.finish()?;
                    return Ok(Next::Ended);
                }
                Said::Line(line) => match serde_json::from_str::<Message>(&line) {
                    Ok(Message::Hello(_)) => {}
                    Ok(Message::Window(w)) => return Ok(Next::Window(w)),
                    Ok(Message::End) => {
                        self.script.finish()?;
                        return Ok(Next::Ended);
                    }
                    Err(e) => bail!("hotlab's probe in '{}' said something unreadable ({e}): {line}", self.shown),
                },
            }
        }
    }
}

enum Next {
    Window(Box<Window>),
    Stopped,
    Ended,
}

impl Learner for ScriptLearner {
    fn iterations(&self) -> u64 {
        OPEN_ENDED
    }

    fn layout(&self) -> &[ParamSlot] {
        &[]
    }

    fn ended(&self) -> bool {
        self.ended
    }

    fn iterate(&mut self, it: &mut Iteration<'_>) -> Result<Option<Outcome>> {
        let begun = Instant::now();
        let next = match self.pending.take() {
            Some(w) => Next::Window(w),
            None => self.next(it.stop)?,
        };
        let window = match next {
            Next::Window(w) => w,
            Next::Stopped => {
                self.script.kill();
                return Ok(None);
            }
            Next::Ended => {
                self.ended = true;
                return Ok(Some(outcome(0, begun, 0.0)));
            }
        };
        window.account(it.prof, it.counters, it.episodes);
        // The script is exiting: its exit (and whether it failed) is waited for at the
        // run's end, outside its timed wall, as the interpreter's teardown is no training.
        self.ended |= window.last;
        let rollout = ["env_step", "env_wait", "policy_forward", "obs_transfer", "host_read"];
        let rollout_s = rollout.iter().filter_map(|p| window.phases.get(*p)).map(|p| p.0).sum();
        Ok(Some(outcome(window.env_steps, begun, rollout_s)))
    }

    fn end(&mut self) -> Result<()> {
        if !self.ended {
            return Ok(()); // stopped, or out of budget: `finish` ends the script
        }
        while self.script.running() {
            if let Next::Stopped = self.next(None)? {
                break;
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Box<dyn TrainedPolicy> {
        // A run that ends before the script (a budget, a stop) ends the script with it.
        self.script.kill();
        Box::new(ScriptPolicy::new(&self.shown))
    }
}

fn outcome(env_steps: u64, begun: Instant, rollout_s: f64) -> Outcome {
    Outcome {
        env_steps,
        lr: 0.0,
        losses: Losses::default(),
        loss_scale: None,
        skipped_steps: 0,
        norms: None,
        learn_start: begun,
        rollout_s,
        lines: Vec::new(),
    }
}

/// The "policy" of a script's run: the script keeps its own, so hotlab holds no
/// parameters, and says so where one is asked for.
pub struct ScriptPolicy {
    flat: tch::Tensor,
    command: String,
}

impl ScriptPolicy {
    pub fn new(command: &str) -> Self {
        Self { flat: tch::Tensor::zeros([0], (tch::Kind::Float, tch::Device::Cpu)), command: command.into() }
    }
}

impl Network for ScriptPolicy {
    fn flat(&self) -> &tch::Tensor {
        &self.flat
    }

    fn layout(&self) -> &[ParamSlot] {
        &[]
    }

    fn shape(&self) -> serde_json::Value {
        serde_json::json!({ "script": self.command })
    }
}

impl TrainedPolicy for ScriptPolicy {
    fn network(&self) -> &dyn Network {
        self
    }

    fn checkpoint_key(&self) -> &'static str {
        "external"
    }

    fn evaluate(&self, _episodes: usize, _seed: u64) -> Result<Evaluation> {
        bail!(
            "a script's policy is its own ('{}'): hotlab measured its training and keeps no policy to evaluate",
            self.command
        )
    }
}

/// Refuses to load a script run's checkpoint as a policy.
pub fn no_policy(spec: &RunSpec) -> anyhow::Error {
    anyhow::anyhow!(
        "this checkpoint is of a script run (--env {}): the script keeps its own policy, hotlab has none to load",
        spec.env()
    )
}

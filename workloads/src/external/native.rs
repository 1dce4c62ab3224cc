//! `external`: a user's own training script, run unmodified under hotlab's probe
//! (`probe/`, Python injected through `PYTHONPATH`): its time mapped to the catalogue's
//! phases, its reads and copies counted with their call sites, and its run an ordinary
//! run (stored, streamed, reported, audited by re-running the command with a change).
//!
//! - [`process`](crate::external::process): the script as a process (started under the probe, ended whole);
//! - [`window`](crate::external::window): what the probe says, accounted into the profile and counters;
//! - [`learner`](crate::external::learner): the script as the loop's learner, one probe window an iteration;
//! - [`trace`](crate::external::trace): a PyTorch Profiler trace read into the same table (`--torch-trace`).

pub mod learner;
pub mod process;
pub mod trace;
pub mod window;

use anyhow::Result;
use hotlab_core::counters::EnvCounters;
use hotlab_env::{Actions, BatchEnv, EnvError, EnvSpec, FieldData, Observations, ScalarEnv, StepBatch};
use hotlab_protocol::Frame;
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::external::ProbeMode;
use hotlab_specs::{EnvName, ExternalSpec};
use hotlab_train::checkpoint::Stored;
use hotlab_train::error::RunError;
use hotlab_train::exec::EnvMaker;
use hotlab_train::workload::{Learner, Setup, TrainedPolicy, Workload};
use learner::ScriptLearner;
use process::ScriptCommand;
use std::sync::Arc;

/// The registry's entry: the command checked (its template expands); the script starts
/// when the run does.
impl crate::Native for ExternalSpec {
    fn load(settings: &Self, _spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError> {
        let argv = settings.argv().map_err(SpecError::from)?;
        let light = settings.probe == ProbeMode::Light;
        Ok(Arc::new(External(ScriptCommand { argv, cwd: settings.cwd.clone(), shown: settings.shown(), light })))
    }
}

/// A script to run.
pub struct External(ScriptCommand);

impl Workload for External {
    fn frame(&self, _step: u64, _obs: &Observations, _actions: Actions<'_>) -> Option<Frame> {
        None
    }

    fn learner(self: Arc<Self>, setup: &mut Setup<'_>) -> Result<Box<dyn Learner>, RunError> {
        Ok(Box::new(ScriptLearner::start(&self.0, setup.stop)?))
    }

    fn load_policy(self: Arc<Self>, stored: Stored) -> Result<Box<dyn TrainedPolicy>> {
        Err(learner::no_policy(&stored.spec))
    }
}

/// The script steps its own envs: hotlab makes none. A backend that asks for one gets an
/// env that says so (the spec refuses every backend but the default before a run starts).
impl EnvMaker for External {
    fn name(&self) -> &'static str {
        EnvName::External.as_str()
    }

    fn vector_env(&self, count: usize, _seed: u64, _first: u64) -> Box<dyn BatchEnv> {
        Box::new(NoEnvs { spec: no_spec(), envs: count })
    }

    fn scalar_env(&self, _seed: u64, _index: u64) -> Box<dyn ScalarEnv> {
        Box::new(NoEnvs { spec: no_spec(), envs: 1 })
    }

    fn worker_flags(&self) -> (Vec<String>, Option<String>) {
        (Vec::new(), None)
    }

    fn env_counters(&self) -> EnvCounters {
        EnvCounters::default()
    }
}

fn no_spec() -> EnvSpec {
    EnvSpec {
        name: EnvName::External.as_str().into(),
        fields: Vec::new(),
        heads: Vec::new(),
        masked: false,
        continuous: 0,
    }
}

/// No env: a script's envs are its own.
struct NoEnvs {
    spec: EnvSpec,
    envs: usize,
}

const NO_ENVS: &str = "a script steps its own envs: hotlab has none of them to step";

impl BatchEnv for NoEnvs {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }
    fn num_envs(&self) -> usize {
        self.envs
    }
    fn reset(&mut self, _out: &mut Observations) -> Result<(), EnvError> {
        Err(EnvError(NO_ENVS.into()))
    }
    fn step(&mut self, _actions: &[i64], _out: &mut StepBatch) -> Result<(), EnvError> {
        Err(EnvError(NO_ENVS.into()))
    }
}

/// Every call ends the episode at once, with nothing observed.
impl ScalarEnv for NoEnvs {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }
    fn reset(&mut self, _obs: &mut [FieldData]) {}
    fn step(&mut self, _action: &[i64], _obs: &mut [FieldData]) -> (f64, bool, bool) {
        (0.0, true, false)
    }
}

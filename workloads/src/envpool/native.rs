//! `envpool`: one of EnvPool's C++ envs (`--env envpool:Breakout-v5`). Its native side is
//! the `gym` workload's [`GymEnv`](crate::gym::GymEnv) with EnvPool as its engine: the worker process holds one
//! EnvPool batch (stepped by EnvPool's threads) and writes the same shared region, so the
//! rollout, the CNN or MLP policy, the counters and the frames are gym's, unchanged.

use crate::gym::python::{self, Engine};
use crate::gym::GymEnv;
use hotlab_protocol::suggestions::Suggestions;
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::EnvpoolSpec;
use hotlab_train::workload::Workload;
use std::path::PathBuf;
use std::sync::Arc;

/// The registry's entry: EnvPool's env probed (a Python without envpool, an id EnvPool
/// does not have, or keywords it refuses are named here).
impl crate::Native for EnvpoolSpec {
    fn load(settings: &Self, _spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError> {
        let python = settings.python.as_ref().map(PathBuf::from);
        let kwargs = serde_json::Value::Object(settings.kwargs.clone());
        let engine = Engine::EnvPool { threads: settings.threads };
        Ok(Arc::new(GymEnv::open_with(&settings.id, python, kwargs, engine)?))
    }

    /// EnvPool's ids by family, as its default Python has them.
    fn suggestions() -> Option<Suggestions> {
        Some(python::registered_ids(&python::envpool_python(), Engine::EnvPool { threads: 0 }))
    }
}

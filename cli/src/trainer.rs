//! What the lab asks of the trainer ([`hotlab_lab::trainer::Trainer`]), answered by the
//! trainer's crates, which the lab does not link.

use hotlab_shared::spec::{RunSpec, SpecError};
use hotlab_shared::system::SystemInfo;
use hotlab_shared::workloads::gym::GymEnvs;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a listing of Gymnasium's ids stands: a page load asks once, and an install
/// made while the lab runs shows within this.
const GYM_ENVS_FOR: Duration = Duration::from_secs(30);

/// This process's trainer.
pub struct Trainer;

impl hotlab_lab::trainer::Trainer for Trainer {
    fn system(&self) -> SystemInfo {
        hotlab_train::system::info()
    }

    fn load(&self, spec: &RunSpec) -> Result<(), SpecError> {
        hotlab_workloads::load(spec).map(|_| ())
    }

    fn fits(&self, spec: &RunSpec) -> Result<(), SpecError> {
        hotlab_train::system::check_memory(spec)
    }

    fn gym_envs(&self) -> GymEnvs {
        static LAST: Mutex<Option<(Instant, GymEnvs)>> = Mutex::new(None);
        // Held while listing: requests at once wait for the one listing, not one each.
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, envs)) = last.as_ref().filter(|(at, _)| at.elapsed() < GYM_ENVS_FOR) {
            return envs.clone();
        }
        let envs = hotlab_workloads::gym::python::registered_ids(&hotlab_workloads::gym::python::default_python());
        *last = Some((Instant::now(), envs.clone()));
        envs
    }
}

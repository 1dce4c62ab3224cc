//! What the lab asks of the trainer ([`hotlab_lab::trainer::Trainer`]), answered by the
//! trainer's crates, which the lab does not link.

use hotlab_shared::spec::{RunSpec, SpecError};
use hotlab_shared::system::SystemInfo;

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
}

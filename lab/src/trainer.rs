//! What the lab needs of the trainer, which it does not link: every run trains in a
//! process of the `hotlab` binary (`wire::process`), so the lab itself asks the trainer
//! only this machine's description and the checks a spec passes before it queues. The
//! binary implements it over `hotlab-train` and `hotlab-workloads`, and hands it to
//! [`crate::server::serve`].

use hotlab_protocol::suggestions::Suggestions;
use hotlab_protocol::system::SystemInfo;
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::EnvName;

pub trait Trainer: Send + Sync {
    /// This machine: versions, devices, cores.
    fn system(&self) -> SystemInfo;
    /// Whether the spec's workload loads here (a knowledge base that parses, tasks that
    /// can be drawn): a launch is refused at once, naming the field, as the CLI does.
    fn load(&self, spec: &RunSpec) -> Result<(), SpecError>;
    /// Whether the run fits this machine's memory now (an out-of-memory kill would take
    /// more than the run down): refused naming the fields behind the largest part.
    fn fits(&self, spec: &RunSpec) -> Result<(), SpecError>;
    /// What this machine offers for `env`'s suggested knob (the launch form's list: for
    /// gym, the ids its default Python can make); None where the workload lists nothing.
    /// Blocks while the list is made (a Python process, for gym).
    fn suggestions(&self, env: EnvName) -> Option<Suggestions>;
}

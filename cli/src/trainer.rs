//! What the lab asks of the trainer ([`hotlab_lab::trainer::Trainer`]), answered by the
//! trainer's crates, which the lab does not link.

use hotlab_protocol::suggestions::Suggestions;
use hotlab_protocol::system::SystemInfo;
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::EnvName;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a workload's list of suggestions stands (Gymnasium's ids: a Python process
/// each time): a page load asks once, and an install made while the lab runs shows within this.
const SUGGESTIONS_FOR: Duration = Duration::from_secs(30);

/// Each workload's last list of suggestions, by name, and when it was made.
type Listed = HashMap<String, (Instant, Option<Suggestions>)>;

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

    fn suggestions(&self, env: EnvName) -> Option<Suggestions> {
        static LAST: Mutex<Option<Listed>> = Mutex::new(None);
        // Held while listing: requests at once wait for the one listing, not one each.
        let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
        let last = last.get_or_insert_with(HashMap::new);
        if let Some((_, found)) = last.get(env.as_str()).filter(|(at, _)| at.elapsed() < SUGGESTIONS_FOR) {
            return found.clone();
        }
        let found = hotlab_workloads::suggestions(env);
        last.insert(env.as_str().to_string(), (Instant::now(), found.clone()));
        found
    }
}

//! What every handler shares: the lab's parts ([`Lab`], axum's state), and running
//! blocking work off the async runtime.

use super::error::{ApiError, ApiResult};
use super::runs::Manager;
use hotlab_protocol::system::SystemInfo;
use std::sync::Arc;
use std::time::Duration;

/// The longest a request waits for the store to commit (see [`Lab::durable`]).
pub const DURABLE_WAIT: Duration = Duration::from_secs(5);

/// What every handler shares.
#[derive(Clone)]
pub struct Lab {
    pub manager: Arc<Manager>,
    /// The lab's machines (the local one and connected workers).
    pub machines: Arc<super::machines::Machines>,
    pub token: Arc<String>,
    /// The token workers connect with (not the operator's).
    pub worker_token: Arc<String>,
    pub data_dir: std::path::PathBuf,
    pub system: Arc<SystemInfo>,
    pub limiter: Arc<super::limit::Limiter>,
    /// The audits and lessons, run one at a time.
    pub audits: Arc<super::audits::Audits>,
    /// This machine's lesson checks.
    pub checks: Arc<super::checks::Checks>,
    /// The sweeps.
    pub sweeps: Arc<super::sweeps::Sweeps>,
    /// Permits to read events from the store ([`super::api::STORE_READERS`]).
    pub store_readers: Arc<tokio::sync::Semaphore>,
    /// What the lab asks of the trainer: a spec's checks before it queues.
    pub trainer: Arc<dyn super::trainer::Trainer>,
    /// Whether runs may start the commands their specs name (`--allow-scripts`).
    pub allow_scripts: bool,
}

impl Lab {
    /// Refuses a spec that would start a command its settings name (a user's script)
    /// where the lab was not started allowing it: such a run is anyone-with-the-token's
    /// code on this machine and its workers.
    pub fn may_run(&self, spec: &hotlab_spec::RunSpec) -> ApiResult<()> {
        if spec.env().runs_commands() && !self.allow_scripts {
            let message = format!(
                "this lab runs no commands of its users, and --env {} runs one: start the lab with `hotlab serve \
                 --allow-scripts` to profile your own scripts",
                spec.env()
            );
            return Err(ApiError::new(axum::http::StatusCode::FORBIDDEN, "scripts_off", message).field("env"));
        }
        Ok(())
    }

    /// Waits until everything queued for the store is written: what a client was told
    /// exists survives a crash right after. A slow store is waited on for
    /// [`DURABLE_WAIT`] at most: the answer then goes (what it names is live in memory,
    /// and written when the store catches up) rather than a request hanging on a disk.
    pub async fn durable(&self) -> ApiResult<()> {
        let store = self.manager.store().clone();
        blocking(move || {
            if !store.flush_within(DURABLE_WAIT) {
                tracing::warn!("the run store is behind: an answer went before its writes were committed");
            }
            Ok(())
        })
        .await
    }
}

/// Runs `f` on the blocking pool (the store, the file system), off the async runtime.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> anyhow::Result<T> + Send + 'static) -> ApiResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(ApiError::internal)?.map_err(ApiError::internal)
}

//! Why a run did not come: refused before it started, or failed while it ran. Callers act
//! on the difference (the command line's exit code 2 against 1) without downcasts.

use hotlab_spec::SpecError;

/// Why a run (or a checkpoint's policy) did not come.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Refused before anything ran: a setting not allowed here (by its range, the workload
    /// or this machine), naming its field.
    #[error(transparent)]
    Refused(#[from] SpecError),
    /// Failed while it ran (or while reading what it needs).
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

impl From<std::io::Error> for RunError {
    fn from(e: std::io::Error) -> Self {
        RunError::Failed(e.into())
    }
}

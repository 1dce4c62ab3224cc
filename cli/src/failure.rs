//! Why a command failed, and so its exit code: a value the user gave that is not allowed
//! (a flag's, [`UsageError`], or a spec field's, [`SpecError`]) exits with 2, anything else
//! with 1. Commands return [`Failure`]; `main` prints it as one line and exits with its
//! code, no downcast.

use hotlab_spec::SpecError;
use hotlab_train::error::RunError;
use std::fmt;

/// A flag value that is not allowed (exit code 2). Not a `std::error::Error` on purpose: it
/// cannot be folded into an `anyhow::Error` (where its exit code would be lost), only into
/// a [`Failure`].
#[derive(Debug)]
pub struct UsageError {
    pub flag: &'static str,
    pub message: String,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.flag, self.message)
    }
}

/// A flag's value that is not allowed, as a command's failure.
pub fn usage(flag: &'static str, message: String) -> Failure {
    Failure::Usage(UsageError { flag, message })
}

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    /// A flag's value that is not allowed.
    Usage(UsageError),
    /// A spec's field that is not allowed (from a flag, a preset with flags on top, a
    /// checkpoint's spec, a change or a grid).
    Refused(SpecError),
    /// Anything else: the run failed, a file could not be read, a peer did not answer.
    Failed(anyhow::Error),
}

impl Failure {
    /// 2 for a value the user gave, 1 for anything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) | Failure::Refused(_) => 2,
            Failure::Failed(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(e) => write!(f, "{e}"),
            Failure::Refused(e) => write!(f, "{e}"),
            // The whole chain of context, outermost first.
            Failure::Failed(e) => write!(f, "{e:#}"),
        }
    }
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Failure::Usage(e)
    }
}

impl From<SpecError> for Failure {
    fn from(e: SpecError) -> Self {
        Failure::Refused(e)
    }
}

impl From<RunError> for Failure {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Refused(e) => Failure::Refused(e),
            RunError::Failed(e) => Failure::Failed(e),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Failed(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Failed(e.into())
    }
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Self {
        Failure::Failed(e.into())
    }
}

/// What a command returns.
pub type Outcome<T = ()> = Result<T, Failure>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A value the user gave exits with 2 whether a flag or a spec field refused it, or a
    /// run refused its spec before starting; a failure while running exits with 1 and says
    /// its whole chain.
    #[test]
    fn refusals_exit_2_and_failures_1() {
        let usage = Failure::from(UsageError { flag: "--episodes", message: "must be at least 1".into() });
        assert_eq!((usage.exit_code(), usage.to_string().as_str()), (2, "--episodes: must be at least 1"));
        let spec = Failure::from(SpecError::new("lr", "must be above 0"));
        assert_eq!(spec.exit_code(), 2);
        assert!(spec.to_string().contains("must be above 0"), "{spec}");
        let refused = Failure::from(RunError::Refused(SpecError::new("device", "no CUDA here")));
        assert!(matches!(refused, Failure::Refused(_)) && refused.exit_code() == 2);
        let failed = Failure::from(RunError::Failed(anyhow::anyhow!("disk full").context("writing metrics.jsonl")));
        assert_eq!((failed.exit_code(), failed.to_string().as_str()), (1, "writing metrics.jsonl: disk full"));
    }
}

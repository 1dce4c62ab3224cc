//! The error of a flag value that is not allowed: the commands and their runs return it,
//! and `main` prints it as one line and exits with code 2.

/// A flag value that is not allowed (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct UsageError {
    pub flag: &'static str,
    pub message: String,
}

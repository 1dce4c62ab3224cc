//! The API's one error type: every refusal renders itself as
//! `{"error": {"code", "message", "field", "path"}}` with its 4xx/5xx status.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::time::Duration;

/// An API error that renders itself.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
    /// The field's JSON path in the nested spec, where it is one.
    pub path: Option<String>,
    /// Seconds to wait before asking again (429).
    pub retry_after: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), field: None, path: None, retry_after: None }
    }

    pub fn field(mut self, field: &str) -> Self {
        self.field = Some(field.to_string());
        self
    }

    pub fn path(mut self, path: &str) -> Self {
        self.path = Some(path.to_string());
        self
    }

    /// 400: a value that is not allowed, naming its field.
    pub fn bad(code: &'static str, field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message).field(field)
    }

    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
    }

    /// 404: no run with this id.
    pub fn no_run(id: u64) -> Self {
        Self::new(StatusCode::NOT_FOUND, "no_such_run", format!("no run {id}")).field("id")
    }

    /// 401: a change without the operator token.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "launching and stopping runs needs the operator token (Authorization: Bearer TOKEN; printed at start)",
        )
    }

    /// 429: too many token checks from one address.
    pub fn too_many(wait: Duration) -> Self {
        let too_many = "too many token checks from this address";
        if wait == Duration::MAX {
            let message = format!("{too_many}; this lab gives none back (--auth-checks-per-second 0)");
            return Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message);
        }
        let secs = wait.as_secs_f64().ceil().max(1.0);
        let message = format!("{too_many}; try again in {secs} s");
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message);
        e.retry_after = Some(secs as u64);
        e
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": { "code": self.code, "message": self.message, "field": self.field, "path": self.path }
        });
        let mut res = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            res.headers_mut().insert(header::RETRY_AFTER, secs.into());
        }
        res
    }
}

/// A refused spec value, naming its knob and its JSON path.
impl From<hotlab_spec::SpecError> for ApiError {
    fn from(e: hotlab_spec::SpecError) -> Self {
        ApiError::bad("invalid_value", &e.field, e.message).path(&e.path)
    }
}

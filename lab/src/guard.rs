//! What every request passes before a handler sees it.
//!
//! - **Host**: a page on another site can make a browser resolve its own name to 127.0.0.1
//!   (DNS rebinding) and then talk to a lab on this machine as if it were that site. The
//!   browser still sends that site's name as `Host`, so only IP literals, `localhost`, the
//!   name the server was bound to and `--allow-host` names get through (Jupyter's rule).
//! - **Requests that change state** (`POST` and the like) must carry a JSON body
//!   (`Content-Type: application/json`, which a plain HTML form cannot send) and, when a
//!   browser sends an `Origin`, it must be this server.
//!
//! A refusal is the API's JSON error, like every other one.

use super::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// The names a request's `Host` may carry besides IP literals and `localhost`.
#[derive(Clone, Debug, Default)]
pub struct Hosts {
    names: Vec<String>,
}

impl Hosts {
    /// `bound` (the `--host` the server listens on) and the `--allow-host` names.
    pub fn new(bound: &str, allowed: &[String]) -> Self {
        let names =
            std::iter::once(bound).chain(allowed.iter().map(String::as_str)).map(str::to_ascii_lowercase).collect();
        Self { names }
    }

    /// Whether a `Host` header's value (with or without a port) may reach the lab.
    pub fn allows(&self, host: &str) -> bool {
        let name = host_name(host);
        let literal = name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().is_ok();
        literal || name.eq_ignore_ascii_case("localhost") || self.names.iter().any(|n| n.eq_ignore_ascii_case(name))
    }
}

/// The name part of a `Host` value: `[::1]:8080` → `[::1]`, `lab.example:80` → `lab.example`.
fn host_name(host: &str) -> &str {
    match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => &host[..i],
        _ => host,
    }
}

/// Whether `Origin` names this server (the `Host` the request was sent to).
pub fn same_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN) else { return Ok(()) };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let origin = origin.to_str().unwrap_or("");
    match origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) == Some(host) {
        true => Ok(()),
        false => {
            Err(ApiError::new(StatusCode::FORBIDDEN, "bad_origin", format!("origin '{origin}' is not this server"))
                .field("origin"))
        }
    }
}

fn changes_state(method: &Method) -> bool {
    ![Method::GET, Method::HEAD, Method::OPTIONS].contains(method)
}

/// The middleware: the Host check for every request, the body and origin checks for
/// requests that change state.
pub async fn guard(State(hosts): State<Arc<Hosts>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    if let Some(host) = headers.get(header::HOST) {
        let host = host.to_str().unwrap_or("");
        if !hosts.allows(host) {
            let message = format!(
                "host '{host}' is not allowed: this lab answers to its address, localhost and the names given with --allow-host (a guard against DNS rebinding)"
            );
            return ApiError::new(StatusCode::FORBIDDEN, "bad_host", message).field("host").into_response();
        }
    }
    if changes_state(req.method()) {
        if let Err(e) = same_origin(headers) {
            return e.into_response();
        }
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json")));
        if !json {
            let message = "a request that changes something must send Content-Type: application/json";
            return ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", message)
                .field("content-type")
                .into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_literals_localhost_and_allowed_names_pass_other_names_do_not() {
        let h = Hosts::new("0.0.0.0", &["lab.example".into()]);
        for ok in ["127.0.0.1:8080", "10.1.2.3", "[::1]:80", "[::1]", "localhost:9000", "LOCALHOST", "lab.example:8080"]
        {
            assert!(h.allows(ok), "{ok}");
        }
        for bad in ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example", ""] {
            assert!(!h.allows(bad), "{bad}");
        }
        assert!(Hosts::new("myhost", &[]).allows("myhost:8080"), "the name the server was bound to");
    }
}

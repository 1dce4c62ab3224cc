//! What handlers take from a request, each refusing with the API's JSON error: path
//! parameters, query strings, JSON bodies, and the operator's token.

use super::auth;
use super::error::{ApiError, ApiResult};
use super::state::Lab;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The client's address, as the connection gives it.
pub type Client = ConnectInfo<SocketAddr>;

/// A path parameter (`/api/runs/{id}`) whose rejection is the API's JSON error.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Path(v)),
            Err(e) => Err(ApiError::bad("invalid_path", "path", e.body_text())),
        }
    }
}

/// A query string whose rejection (a wrong type, an unknown field) is the API's JSON error.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned + Send> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Query(v)),
            Err(e) => Err(ApiError::bad("invalid_query", "query", e.body_text())),
        }
    }
}

/// A request that carries the operator token (`Authorization: Bearer`, the cookie, or
/// `?token=`): what every handler that changes something takes first. A wrong or missing
/// token spends from the client's allowance of checks ([`super::limit`]).
pub struct Operator;

impl FromRequestParts<Lab> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, lab: &Lab) -> Result<Self, ApiError> {
        if auth::authorized(&lab.token, &parts.headers, parts.uri.query()) {
            return Ok(Operator);
        }
        lab.limiter.take(client_ip(parts)).map_err(ApiError::too_many)?;
        Err(ApiError::unauthorized())
    }
}

/// The client's IP (one allowance for every client a connection does not name).
pub fn client_ip(parts: &Parts) -> IpAddr {
    parts.extensions.get::<Client>().map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// A request's JSON body as `T`; refused naming the field `body`.
pub fn json_body<T: serde::de::DeserializeOwned>(body: &Bytes) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad("invalid_value", "body", e.to_string()))
}

/// A body that may be empty: `T`'s defaults then.
pub fn json_body_or_default<T: serde::de::DeserializeOwned + Default>(body: &Bytes) -> ApiResult<T> {
    if body.is_empty() {
        Ok(T::default())
    } else {
        json_body(body)
    }
}

/// A page's `limit`: `default` when absent, else 1 to `max`; refused naming the field.
pub fn page_limit(limit: Option<usize>, default: usize, max: usize) -> ApiResult<usize> {
    match limit.unwrap_or(default) {
        n if (1..=max).contains(&n) => Ok(n),
        n => Err(ApiError::bad("invalid_value", "limit", format!("{n}: allowed 1 to {max}"))),
    }
}

//! The operator token: needed to launch and stop runs, not to watch them.
//!
//! Given as `Authorization: Bearer TOKEN`, as the `hotlab_token` cookie, or once as
//! `?token=TOKEN` in a URL (the response then sets the cookie, as Jupyter does).

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

pub const COOKIE: &str = "hotlab_token";

/// A fresh random token (32 hex digits from the OS's generator).
pub fn generate() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

/// Whether a request carries the token (header, cookie or query).
pub fn authorized(token: &str, headers: &HeaderMap, query: Option<&str>) -> bool {
    let bearer = bearer_is(token, headers);
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().strip_prefix(COOKIE).and_then(|r| r.strip_prefix('=')))
        .any(|t| same(t, token));
    bearer || cookie || query_token(query).is_some_and(|t| same(t, token))
}

/// Whether a request carries `token` as `Authorization: Bearer` (the worker token: never
/// a cookie or a query, since no browser holds it).
pub fn bearer_is(token: &str, headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| same(t.trim(), token))
}

/// Sets the cookie on responses to requests that brought the right `?token=`.
pub async fn cookie_from_query(State(token): State<Arc<String>>, req: Request, next: Next) -> Response {
    let hit = query_token(req.uri().query()).is_some_and(|t| same(t, &token));
    let mut res = next.run(req).await;
    if hit {
        let value = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
        if let Ok(v) = HeaderValue::from_str(&value) {
            res.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_accepted_from_a_header_a_cookie_or_the_query() {
        let t = generate().unwrap();
        assert_eq!(t.len(), 32);
        let mut h = HeaderMap::new();
        assert!(!authorized(&t, &h, None));
        assert!(authorized(&t, &h, Some(&format!("a=1&token={t}"))));
        assert!(!authorized(&t, &h, Some("token=nope")));
        h.insert(header::AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
        assert!(authorized(&t, &h, None));
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("x=1; {COOKIE}={t}").parse().unwrap());
        assert!(authorized(&t, &h, None));
        h.insert(header::COOKIE, format!("{COOKIE}={t}x").parse().unwrap());
        assert!(!authorized(&t, &h, None));
    }
}

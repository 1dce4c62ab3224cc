//! The worker's REST API from the browser: JSON in, JSON out, and its errors as values
//! that name the field.

use serde::de::DeserializeOwned;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// What the server said when it refused (`{"error": {"code", "message", "field"}}`), or
/// what went wrong on the way.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: String,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    fn local(message: String) -> Self {
        Self { code: "network".into(), message, field: None }
    }

    /// From an error body; a body that is not one keeps the HTTP status in the message.
    pub fn from_body(status: u16, body: &str) -> Self {
        let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let e = &v["error"];
        match e["message"].as_str() {
            Some(message) => Self {
                code: e["code"].as_str().unwrap_or("error").into(),
                message: message.into(),
                field: e["field"].as_str().map(str::to_string),
            },
            None => Self::local(format!("HTTP {status}: {body}")),
        }
    }
}

async fn request(method: &str, path: &str, body: Option<&str>) -> Result<String, ApiError> {
    let window = web_sys::window().ok_or_else(|| ApiError::local("no window".into()))?;
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    if let Some(body) = body {
        init.set_body(&JsValue::from_str(body));
        let headers = web_sys::Headers::new().map_err(|e| ApiError::local(format!("{e:?}")))?;
        let _ = headers.set("Content-Type", "application/json");
        init.set_headers(&headers);
    }
    let failed = |e: JsValue| ApiError::local(format!("{path}: {}", e.as_string().unwrap_or_else(|| format!("{e:?}"))));
    let response = JsFuture::from(window.fetch_with_str_and_init(path, &init)).await.map_err(failed)?;
    let response: web_sys::Response =
        response.dyn_into().map_err(|_| ApiError::local(format!("{path}: no response")))?;
    let text = JsFuture::from(response.text().map_err(failed)?).await.map_err(failed)?.as_string().unwrap_or_default();
    match response.ok() {
        true => Ok(text),
        false => Err(ApiError::from_body(response.status(), &text)),
    }
}

pub async fn get<T: DeserializeOwned>(path: &str) -> Result<T, ApiError> {
    let text = request("GET", path, None).await?;
    serde_json::from_str(&text).map_err(|e| ApiError::local(format!("{path}: {e}")))
}

/// A body as text (for files the caller parses itself, like a run's policy).
pub async fn get_text(path: &str) -> Result<String, ApiError> {
    request("GET", path, None).await
}

pub async fn post<T: DeserializeOwned>(path: &str, body: &str) -> Result<T, ApiError> {
    let text = request("POST", path, Some(body)).await?;
    serde_json::from_str(&text).map_err(|e| ApiError::local(format!("{path}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_keep_their_field() {
        let e = ApiError::from_body(
            400,
            r#"{"error":{"code":"invalid_value","message":"envs: must be between 1 and 1048576","field":"envs"}}"#,
        );
        assert_eq!(e.field.as_deref(), Some("envs"));
        assert_eq!(e.code, "invalid_value");
        let e = ApiError::from_body(502, "bad gateway");
        assert_eq!(e.field, None);
        assert!(e.message.contains("502"));
    }
}

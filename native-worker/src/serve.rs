//! The lab's HTTP server: `/api/system` and the web app's static files.
//! (Runs, streaming and the store come with the lab-server issue.)

use crate::system;
use anyhow::{Context, Result};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use hotlab_shared::system::SystemInfo;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower_http::services::{ServeDir, ServeFile};

/// An API error that renders itself as `{"error": {"code", "message", "field"}}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": { "code": self.code, "message": self.message, "field": self.field }
        });
        (self.status, Json(body)).into_response()
    }
}

async fn system_info(state: axum::extract::State<Arc<SystemInfo>>) -> Json<SystemInfo> {
    Json((*state.0).clone())
}

async fn api_not_found(uri: axum::http::Uri) -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        code: "not_found",
        message: format!("no API endpoint at {}", uri.path()),
        field: None,
    }
}

/// The router: API routes, then the single-page app (unknown paths get index.html).
pub fn router(static_dir: &Path) -> Router {
    let info = Arc::new(system::info());
    let index = ServeFile::new(static_dir.join("index.html"));
    Router::new()
        .route("/api/system", get(system_info))
        .route("/api/{*rest}", get(api_not_found).post(api_not_found))
        .with_state(info)
        .fallback_service(ServeDir::new(static_dir).fallback(index))
}

/// Where the web app's files are: `--static-dir`, else `./static`, else next to the
/// repository the binary was built in (`target/release/hotlab` → `static/`).
pub fn find_static_dir(explicit: Option<PathBuf>) -> PathBuf {
    if let Some(dir) = explicit {
        return dir;
    }
    let cwd = PathBuf::from("static");
    if cwd.join("index.html").exists() {
        return cwd;
    }
    let from_exe =
        std::env::current_exe().ok().and_then(|exe| exe.parent()?.parent()?.parent().map(|root| root.join("static")));
    match from_exe {
        Some(dir) if dir.join("index.html").exists() => dir,
        _ => cwd,
    }
}

/// Serves until Ctrl-C. Prints the URL (with the real port when `port` is 0) first.
pub async fn serve(host: &str, port: u16, static_dir: PathBuf) -> Result<()> {
    if !static_dir.join("index.html").exists() {
        tracing::warn!(
            "{} has no index.html: the API works, the page does not (build it with `cargo xtask build`)",
            static_dir.display()
        );
    } else if !static_dir.join("pkg").exists() {
        tracing::warn!("{}/pkg is missing: build the web app with `cargo xtask build`", static_dir.display());
    }
    let listener = tokio::net::TcpListener::bind((host, port))
        .await
        .with_context(|| format!("cannot listen on {host}:{port} (--host/--port)"))?;
    let addr = listener.local_addr()?;
    println!("hotlab lab serving on http://{addr}/ (static files from {})", static_dir.display());
    axum::serve(listener, router(&static_dir))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("server error")
}

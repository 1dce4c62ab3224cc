//! The sweep handlers ([`super::sweeps`]).
//!
//! | route | what |
//! |---|---|
//! | `POST /api/sweeps` (token) | `{"grid": "envs=64,256 backend=vectorized,threads", "spec": {…}, "on": "any\|local\|workers\|ray"}` → 201 the sweep |
//! | `GET /api/sweeps?limit=N`, `GET /api/sweeps/{id}` | sweeps newest first; one sweep: its cells, their runs and figures, the best cell |

use super::api::parse_spec;
use super::error::{ApiError, ApiResult};
use super::extract::{json_body, page_limit, Operator, Path, Query};
use super::state::{blocking, Lab};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hotlab_protocol::sweep::SweepInfo;
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepAsk {
    grid: String,
    /// The spec every cell starts from (its defaults where left out).
    #[serde(default)]
    spec: Option<serde_json::Value>,
    /// Where the runs go [any: a free machine each].
    #[serde(default)]
    on: Option<String>,
}

/// `POST /api/sweeps`: launches every cell; durable before the answer.
pub async fn start_sweep(State(lab): State<Lab>, _: Operator, body: Bytes) -> ApiResult<Response> {
    let ask: SweepAsk = json_body(&body)?;
    let spec_body = ask.spec.unwrap_or_else(|| serde_json::json!({})).to_string().into_bytes();
    let (data_dir, trainer) = (lab.data_dir.clone(), Arc::clone(&lab.trainer));
    let (spec, _) = tokio::task::spawn_blocking(move || parse_spec(&spec_body, &data_dir, &*trainer))
        .await
        .map_err(ApiError::internal)??;
    lab.may_run(&spec)?;
    let on = ask.on.unwrap_or_else(|| "any".into());
    let sweeps = Arc::clone(&lab.sweeps);
    let info =
        tokio::task::spawn_blocking(move || sweeps.start(&ask.grid, spec, &on)).await.map_err(ApiError::internal)??;
    lab.durable().await?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

const PAGE: usize = 20;
const PAGE_MAX: usize = 200;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepQuery {
    limit: Option<usize>,
}

/// `GET /api/sweeps?limit=N`: newest first.
pub async fn list_sweeps(State(lab): State<Lab>, Query(q): Query<SweepQuery>) -> ApiResult<Json<Vec<SweepInfo>>> {
    let limit = page_limit(q.limit, PAGE, PAGE_MAX)?;
    let (store, sweeps) = (lab.manager.store().clone(), Arc::clone(&lab.sweeps));
    let list = blocking(move || store.sweeps(limit)).await?;
    // A live sweep's newest state is in memory.
    Ok(Json(list.into_iter().map(|s| sweeps.live(s.id).unwrap_or(s)).collect()))
}

/// `GET /api/sweeps/{id}`.
pub async fn get_sweep(State(lab): State<Lab>, Path(id): Path<u64>) -> ApiResult<Json<SweepInfo>> {
    if let Some(live) = lab.sweeps.live(id) {
        return Ok(Json(live));
    }
    let store = lab.manager.store().clone();
    let stored = blocking(move || store.sweep(id)).await?;
    let none = || ApiError::new(StatusCode::NOT_FOUND, "no_such_sweep", format!("no sweep {id}")).field("id");
    Ok(Json(stored.ok_or_else(none)?))
}

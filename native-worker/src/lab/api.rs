//! The REST handlers and the WebSocket stream. Every error renders itself as
//! `{"error": {"code", "message", "field"}}` with a 4xx/5xx status.

use super::auth;
use super::runs::Manager;
use super::store::Logged;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hotlab_shared::protocol::{EventBody, MetricsPoint, RunInfo};
use hotlab_shared::spec::{json, RunSpec};
use hotlab_shared::system::SystemInfo;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// What every handler shares.
#[derive(Clone)]
pub struct Lab {
    pub manager: Arc<Manager>,
    pub token: Arc<String>,
    pub data_dir: std::path::PathBuf,
    pub system: Arc<SystemInfo>,
}

/// An API error that renders itself.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
    /// The field's JSON path in the nested spec, where it is one.
    pub path: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), field: None, path: None }
    }

    pub(crate) fn field(mut self, field: &str) -> Self {
        self.field = Some(field.to_string());
        self
    }

    fn path(mut self, path: &str) -> Self {
        self.path = Some(path.to_string());
        self
    }

    fn bad(code: &'static str, field: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message).field(field)
    }

    fn internal(e: impl std::fmt::Display) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": { "code": self.code, "message": self.message, "field": self.field, "path": self.path }
        });
        (self.status, Json(body)).into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

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

pub async fn system(State(lab): State<Lab>) -> Json<SystemInfo> {
    Json((*lab.system).clone())
}

/// `GET /api/auth`: whether this request carries the operator token (the page enables
/// its launch and stop buttons by it; the cookie itself is HttpOnly).
pub async fn auth(State(lab): State<Lab>, headers: HeaderMap, uri: Uri) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "operator": auth::authorized(&lab.token, &headers, uri.query()) }))
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no API endpoint at {}", uri.path()))
}

/// Reads run by id: this server's runs from memory, earlier ones from the store.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> anyhow::Result<T> + Send + 'static) -> ApiResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(ApiError::internal)?.map_err(ApiError::internal)
}

fn no_run(id: u64) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no_such_run", format!("no run {id}")).field("id")
}

async fn run_info(lab: &Lab, id: u64) -> ApiResult<RunInfo> {
    if let Some(run) = lab.manager.get(id) {
        return Ok(run.info());
    }
    let store = lab.manager.store().clone();
    blocking(move || store.run(id)).await?.ok_or_else(|| no_run(id))
}

/// The run's events after `since`.
async fn events(lab: &Lab, id: u64, since: u64) -> ApiResult<Vec<Arc<Logged>>> {
    if let Some(run) = lab.manager.get(id) {
        return Ok(run.follow(since).0);
    }
    run_info(lab, id).await?;
    let store = lab.manager.store().clone();
    blocking(move || store.events(id, since)).await
}

pub async fn list_runs(State(lab): State<Lab>) -> ApiResult<Json<Vec<RunInfo>>> {
    // Memory first: a run that ends meanwhile is in the store before it leaves memory.
    let live = lab.manager.infos();
    let store = lab.manager.store().clone();
    let mut runs: std::collections::BTreeMap<u64, RunInfo> =
        blocking(move || store.runs()).await?.into_iter().map(|r| (r.id, r)).collect();
    runs.extend(live.into_iter().map(|r| (r.id, r)));
    Ok(Json(runs.into_values().collect()))
}

pub async fn get_run(State(lab): State<Lab>, Path(id): Path<u64>) -> ApiResult<Json<RunInfo>> {
    Ok(Json(run_info(&lab, id).await?))
}

pub async fn create_run(
    State(lab): State<Lab>,
    headers: HeaderMap,
    uri: Uri,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    if !auth::authorized(&lab.token, &headers, uri.query()) {
        return Err(unauthorized());
    }
    let body = body.map_err(|e| match e {
        BytesRejection::FailedToBufferBody(_) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is over the limit of {} bytes", super::BODY_LIMIT),
        )
        .field("body"),
        other => ApiError::bad("bad_body", "body", other.to_string()),
    })?;
    let data_dir = lab.data_dir.clone();
    let spec =
        tokio::task::spawn_blocking(move || parse_spec(&body, &data_dir)).await.map_err(ApiError::internal)??;
    let id = lab.manager.launch(spec);
    // Durable before the answer: a run whose 201 a client saw survives a crash right after.
    let store = lab.manager.store().clone();
    tokio::task::spawn_blocking(move || store.flush()).await.map_err(ApiError::internal)?;
    Ok((StatusCode::CREATED, Json(serde_json::json!({ "id": id }))).into_response())
}

fn unauthorized() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "launching and stopping runs needs the operator token (Authorization: Bearer TOKEN; printed at start)",
    )
}

pub async fn stop_run(
    State(lab): State<Lab>,
    Path(id): Path<u64>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Json<RunInfo>> {
    if !auth::authorized(&lab.token, &headers, uri.query()) {
        return Err(unauthorized());
    }
    let info = run_info(&lab, id).await?;
    if !lab.manager.stop(id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_live",
            format!("run {id} is {}; only queued or running runs can be stopped", info.status.as_str()),
        ));
    }
    Ok(Json(run_info(&lab, id).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Since {
    #[serde(default)]
    since: u64,
}

/// A JSON array of events, from the text each was serialized to once.
fn json_array<'a>(events: impl Iterator<Item = &'a Arc<Logged>>) -> Response {
    let mut body = String::from("[");
    for (i, e) in events.enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&e.json);
    }
    body.push(']');
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub async fn run_events(State(lab): State<Lab>, Path(id): Path<u64>, Query(q): Query<Since>) -> ApiResult<Response> {
    Ok(json_array(events(&lab, id, q.since).await?.iter()))
}

pub async fn metrics(State(lab): State<Lab>, Path(id): Path<u64>, Query(q): Query<Since>) -> ApiResult<Response> {
    let all = events(&lab, id, q.since).await?;
    Ok(json_array(all.iter().filter(|e| matches!(e.event.body, EventBody::Metrics { .. }))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Format {
    #[serde(default)]
    format: Option<String>,
}

pub async fn report(State(lab): State<Lab>, Path(id): Path<u64>, Query(q): Query<Format>) -> ApiResult<Response> {
    let all = events(&lab, id, 0).await?;
    let report = all.iter().rev().find_map(|e| match &e.event.body {
        EventBody::Report { report } => Some(report.clone()),
        _ => None,
    });
    let Some(report) = report else {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "no_report", format!("run {id} has no report (yet)")));
    };
    match q.format.as_deref() {
        None | Some("json") => Ok(Json(report).into_response()),
        Some("md") => Ok(([(header::CONTENT_TYPE, "text/markdown; charset=utf-8")], report.markdown()).into_response()),
        Some(other) => {
            Err(ApiError::bad("invalid_value", "format", format!("unknown format '{other}'; allowed: json, md")))
        }
    }
}

pub async fn export_csv(State(lab): State<Lab>, Path(id): Path<u64>) -> ApiResult<Response> {
    let all = events(&lab, id, 0).await?;
    let mut csv = String::from(MetricsPoint::CSV_HEADER);
    csv.push('\n');
    for e in &all {
        if let EventBody::Metrics { metrics } = &e.event.body {
            csv.push_str(&metrics.csv_row());
            csv.push('\n');
        }
    }
    let disposition = format!("attachment; filename=\"run-{id}.csv\"");
    Ok((
        [(header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()), (header::CONTENT_DISPOSITION, disposition)],
        csv,
    )
        .into_response())
}

/// A blob written at the end of a run (`trace`, `policy`).
async fn blob(lab: &Lab, id: u64, name: &'static str) -> ApiResult<Response> {
    let info = run_info(lab, id).await?;
    let store = lab.manager.store().clone();
    let body = blocking(move || {
        store.flush();
        store.blob(id, name)
    })
    .await?;
    match body {
        Some(b) => Ok(([(header::CONTENT_TYPE, "application/json")], b).into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_yet",
            format!("run {id} is {} and has no {name}: it is written when a run ends", info.status.as_str()),
        )),
    }
}

pub async fn trace(State(lab): State<Lab>, Path(id): Path<u64>) -> ApiResult<Response> {
    blob(&lab, id, "trace").await
}

pub async fn policy(State(lab): State<Lab>, Path(id): Path<u64>) -> ApiResult<Response> {
    blob(&lab, id, "policy").await
}

/// A spec from a request body (the nested form, or the flat one of earlier versions):
/// JSON, an object, known fields of the right types, values in range, files inside the
/// data dir, and a workload that loads.
pub fn parse_spec(body: &[u8], data_dir: &std::path::Path) -> ApiResult<RunSpec> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad("malformed_json", "body", format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad("malformed_json", "body", "the body must be a JSON object: a run spec"));
    }
    let mut spec = json::parse(value).map_err(|r| {
        let code = if r.unknown { "unknown_field" } else { "invalid_value" };
        ApiError::bad(code, &r.error.field, r.error.message).path(&r.error.path)
    })?;
    crate::system::check_memory(&spec)
        .map_err(|e| ApiError::bad("invalid_value", &e.field, e.message).path(&e.path))?;
    for (field, file) in spec.workload.files() {
        *file = inside_data_dir(file, data_dir, field)?;
    }
    // Loading now reports a bad knowledge base at once, as the CLI does.
    crate::workloads::load(&spec).map_err(|e| ApiError::bad("invalid_value", &e.field, e.message).path(&e.path))?;
    Ok(spec)
}

/// A file only inside the data dir (as an absolute path).
fn inside_data_dir(name: &str, data_dir: &std::path::Path, field: &str) -> ApiResult<String> {
    let outside = || {
        ApiError::bad(
            "outside_data_dir",
            field,
            format!("'{name}': files must be inside the data dir {} (give a path relative to it)", data_dir.display()),
        )
    };
    let path = std::path::Path::new(name);
    if path.is_absolute() || path.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(outside());
    }
    let root = data_dir.canonicalize().map_err(ApiError::internal)?;
    let full =
        root.join(path).canonicalize().map_err(|e| ApiError::bad("invalid_value", field, format!("'{name}': {e}")))?;
    match full.starts_with(&root) {
        true => Ok(full.to_string_lossy().into_owned()),
        false => Err(outside()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Follow {
    run: u64,
    #[serde(default)]
    since: u64,
}

/// How long one message may take to go out before the client is dropped.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// `GET /api/ws?run=ID&since=SEQ`: what the client missed, then live events.
pub async fn ws(
    State(lab): State<Lab>,
    headers: HeaderMap,
    Query(q): Query<Follow>,
    upgrade: WebSocketUpgrade,
) -> ApiResult<Response> {
    // Browsers send Origin; it must be this server (a page elsewhere may not read runs
    // through the visitor's browser). Clients that are not browsers send none.
    super::guard::same_origin(&headers)?;
    run_info(&lab, q.run).await?;
    Ok(upgrade.on_upgrade(move |socket| stream(lab, q.run, q.since, socket)))
}

/// Events per flush of a catch-up; each flush has [`SEND_TIMEOUT`] to go out.
const SEND_CHUNK: usize = 256;

/// While a stream keeps up, events that arrive within this window go out in one write.
const BATCH_WINDOW: Duration = Duration::from_millis(20);

/// Sends events with one flush per chunk; false when the client is gone or too slow.
async fn send_all(socket: &mut WebSocket, events: &[Arc<Logged>]) -> bool {
    use futures_util::SinkExt;
    for chunk in events.chunks(SEND_CHUNK) {
        let write = async {
            for e in chunk {
                socket.feed(Message::Text(e.json.clone())).await?;
            }
            socket.flush().await
        };
        if !matches!(tokio::time::timeout(SEND_TIMEOUT, write).await, Ok(Ok(()))) {
            return false;
        }
    }
    true
}

fn is_final(e: &Logged) -> bool {
    matches!(e.event.body, EventBody::Status { status, .. } if status.is_final())
}

/// Keeps only the newest rollout frame of a batch: a client that is behind sees the
/// run as it is now rather than a backlog of frames (every other event is kept).
fn coalesce(batch: &mut Vec<Arc<Logged>>) {
    let is_frame = |e: &Logged| matches!(e.event.body, EventBody::Rollout { .. });
    let Some(newest) = batch.iter().rposition(|e| is_frame(e)) else { return };
    let mut i = 0;
    batch.retain(|e| {
        i += 1;
        i - 1 == newest || !is_frame(e)
    });
}

async fn stream(lab: Lab, id: u64, since: u64, mut socket: WebSocket) {
    let Some(run) = lab.manager.get(id) else {
        // A run that is over: its history from the store, then the socket closes.
        if let Ok(past) = events(&lab, id, since).await {
            if !send_all(&mut socket, &past).await {
                return;
            }
        }
        let _ = socket.send(Message::Close(None)).await;
        return;
    };
    let (past, mut live) = run.follow(since);
    if !send_all(&mut socket, &past).await {
        return;
    }
    let mut last = past.last().map_or(since, |e| e.event.seq);
    let Some(rx) = live.as_mut() else {
        let _ = socket.send(Message::Close(None)).await;
        return;
    };
    loop {
        use tokio::sync::broadcast::error::{RecvError, TryRecvError};
        let mut batch = match rx.recv().await {
            Ok(e) => vec![e],
            // Fell behind the live buffer: catch up from the log, never slowing the run.
            Err(RecvError::Lagged(_)) => run.follow(last).0,
            Err(RecvError::Closed) => break,
        };
        // Whatever else arrives soon goes in the same write, and frames coalesce.
        if !batch.iter().any(|e| is_final(e)) {
            tokio::time::sleep(BATCH_WINDOW).await;
        }
        loop {
            match rx.try_recv() {
                Ok(e) => batch.push(e),
                Err(TryRecvError::Lagged(_)) => batch = run.follow(last).0,
                Err(_) => break,
            }
        }
        batch.retain(|e| e.event.seq > last);
        batch.sort_by_key(|e| e.event.seq);
        batch.dedup_by_key(|e| e.event.seq);
        coalesce(&mut batch);
        if !send_all(&mut socket, &batch).await {
            return;
        }
        last = batch.last().map_or(last, |e| e.event.seq);
        if batch.iter().any(|e| is_final(e)) {
            break;
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}

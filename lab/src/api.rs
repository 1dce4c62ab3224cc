//! The REST handlers of runs and the WebSocket stream. Every error is an [`ApiError`],
//! which renders itself; what handlers take from a request is in [`super::extract`].

use super::auth;
use super::error::{ApiError, ApiResult};
use super::extract::{json_body, page_limit, Client, Operator, Path, Query};
use super::runs::Run;
use super::state::{blocking, Lab};
use super::store::Logged;
use super::trainer::Trainer;
use crate::clock::now_ms;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hotlab_protocol::suggestions::Suggestions;
use hotlab_protocol::system::SystemInfo;
use hotlab_protocol::{Event, EventBody, MetricsPoint, RunInfo, RunSummary};
use hotlab_spec::{json, RunSpec};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// `GET /api/system`: the machine, and the store's size now.
pub async fn system(State(lab): State<Lab>) -> Json<SystemInfo> {
    let store = lab.manager.store();
    let (store_bytes, health) = (Some(store.size_bytes()), Some(store.health()));
    let scripts = Some(lab.allow_scripts);
    Json(SystemInfo { store_bytes, store: health, scripts, ..(*lab.system).clone() })
}

/// `GET /api/knobs/{knob}/suggestions`: what this lab's machine offers for a workload's
/// suggested knob (for `gym_id`, the Gymnasium ids its Python can make, by family, and
/// what installs a missing family). Runs on another machine use that machine's Python:
/// its list may differ.
pub async fn suggestions(State(lab): State<Lab>, Path(knob): Path<String>) -> ApiResult<Json<Suggestions>> {
    let Some((env, _)) = hotlab_specs::suggested_knobs().find(|(_, k)| k.name == knob) else {
        let offered: Vec<&str> = hotlab_specs::suggested_knobs().map(|(_, k)| k.name).collect();
        let message = format!("knob '{knob}' has no suggestions; allowed: {}", offered.join(", "));
        return Err(ApiError::new(StatusCode::NOT_FOUND, "no_suggestions", message));
    };
    let trainer = lab.trainer.clone();
    let found = blocking(move || Ok(trainer.suggestions(env))).await?;
    found.map(Json).ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "no_suggestions", format!("this machine lists nothing for '{knob}'"))
    })
}

/// `GET /api/auth`: whether this request carries the operator token (the page enables
/// its launch and stop buttons by it; the cookie itself is HttpOnly). Rate-limited per
/// client: it answers whether a token is right.
pub async fn auth(
    State(lab): State<Lab>,
    ConnectInfo(client): Client,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Json<serde_json::Value>> {
    lab.limiter.take(client.ip()).map_err(ApiError::too_many)?;
    Ok(Json(serde_json::json!({ "operator": auth::authorized(&lab.token, &headers, uri.query()) })))
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", format!("no API endpoint at {}", uri.path()))
}

/// Reads run by id: this server's runs from memory, earlier ones from the store.
async fn run_info(lab: &Lab, id: u64) -> ApiResult<RunInfo> {
    if let Some(run) = lab.manager.get(id) {
        return Ok(lab.manager.info(&run));
    }
    let store = lab.manager.store().clone();
    blocking(move || store.run(id)).await?.ok_or_else(|| ApiError::no_run(id))
}

/// Events of one kind, or of every kind.
type Kind = Option<&'static str>;

/// At most `limit` of the run's events after `since` (of `kind`, when given), in order: a
/// live run's from memory when they are still there, the rest from the store. Reads of
/// the store take a permit, so that however many clients read at once, at most
/// [`STORE_READERS`] pages are in memory.
async fn events(lab: &Lab, id: u64, since: u64, kind: Kind, limit: usize) -> ApiResult<Vec<Arc<Logged>>> {
    let run = lab.manager.get(id);
    let (to, recent) = match &run {
        Some(run) => {
            let f = run.follow(since);
            (f.stored.map(|(_, to)| to), Some(f.recent))
        }
        None => {
            run_info(lab, id).await?;
            (Some(u64::MAX), None)
        }
    };
    let mut out = Vec::new();
    if let Some(to) = to {
        let _permit = lab.store_readers.acquire().await.map_err(ApiError::internal)?;
        let store = lab.manager.store().clone();
        let live = run.is_some();
        out = blocking(move || {
            if live {
                // What left the window may still be in the writer's queue (a store that
                // is behind is not waited on for long: the page reads what is stored).
                store.flush_within(super::state::DURABLE_WAIT);
            }
            store.events(id, since, to, kind, limit)
        })
        .await?;
    }
    let matches = |e: &&Arc<Logged>| kind.is_none_or(|k| e.kind == k);
    let room = limit - out.len();
    out.extend(recent.unwrap_or_default().iter().filter(matches).take(room).cloned());
    Ok(out)
}

/// Store reads at once (each holds a page of events in memory).
pub const STORE_READERS: usize = 4;

/// Runs per page of `GET /api/runs` unless `limit` says otherwise, and the most it may say.
const PAGE: usize = 100;
const PAGE_MAX: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Page {
    /// Only runs with smaller ids (the smallest id of the page before).
    before: Option<u64>,
    limit: Option<usize>,
}

/// `GET /api/runs?before=ID&limit=N`: a page of runs, newest first.
pub async fn list_runs(State(lab): State<Lab>, Query(page): Query<Page>) -> ApiResult<Json<Vec<RunInfo>>> {
    let limit = page_limit(page.limit, PAGE, PAGE_MAX)?;
    let before = page.before;
    // Memory first: a run that ends meanwhile is in the store before it leaves memory.
    let live = lab.manager.infos();
    let store = lab.manager.store().clone();
    let mut runs: std::collections::BTreeMap<u64, RunInfo> =
        blocking(move || store.runs(before, limit)).await?.into_iter().map(|r| (r.id, r)).collect();
    runs.extend(live.into_iter().filter(|r| before.is_none_or(|b| r.id < b)).map(|r| (r.id, r)));
    Ok(Json(runs.into_values().rev().take(limit).collect()))
}

/// `GET /api/runs/{id}/summary`: the run's totals (what the compare view reads).
pub async fn summary(State(lab): State<Lab>, Path(id): Path<u64>) -> ApiResult<Json<RunSummary>> {
    let manager = Arc::clone(&lab.manager);
    let summary = blocking(move || manager.summary(id)).await?.ok_or_else(|| ApiError::no_run(id))?;
    Ok(Json((*summary).clone()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prune {
    /// Runs created more than this many days ago (and over) are deleted.
    older_than_days: f64,
}

/// `POST /api/prune {"older_than_days": N}` (token): deletes old runs, never a live one.
pub async fn prune(State(lab): State<Lab>, _: Operator, body: Bytes) -> ApiResult<Response> {
    let req: Prune = json_body(&body)?;
    let days = req.older_than_days;
    if !(days.is_finite() && days >= 0.0) {
        return Err(ApiError::bad("invalid_value", "older_than_days", format!("{days}: allowed a number ≥ 0")));
    }
    let before_ms = now_ms().saturating_sub((days * 86_400_000.0) as u64);
    let manager = Arc::clone(&lab.manager);
    let (pruned, store_bytes) = blocking(move || {
        let pruned = manager.prune(before_ms);
        Ok((pruned, manager.store().size_bytes()))
    })
    .await?;
    tracing::info!("pruned {} runs created over {days} days ago: {pruned:?}", pruned.len());
    Ok(Json(serde_json::json!({ "pruned": pruned, "store_bytes": store_bytes })).into_response())
}

pub async fn get_run(State(lab): State<Lab>, Path(id): Path<u64>) -> ApiResult<Json<RunInfo>> {
    Ok(Json(run_info(&lab, id).await?))
}

pub async fn create_run(
    State(lab): State<Lab>,
    _: Operator,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let body = body.map_err(|e| match e {
        BytesRejection::FailedToBufferBody(_) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body is over the limit of {} bytes", super::BODY_LIMIT),
        )
        .field("body"),
        other => ApiError::bad("bad_body", "body", other.to_string()),
    })?;
    let (data_dir, trainer) = (lab.data_dir.clone(), Arc::clone(&lab.trainer));
    let machines = Arc::clone(&lab.machines);
    let queued = lab.manager.queued_per_machine();
    let lab_gate = lab.clone();
    let (spec, machine, pinned) = tokio::task::spawn_blocking(move || {
        let (spec, wanted) = parse_spec(&body, &data_dir, &*trainer)?;
        lab_gate.may_run(&spec)?;
        let machine = machines
            .choose(wanted.as_deref(), &spec.device, &queued)
            .map_err(|(field, message)| ApiError::bad("invalid_value", field, message))?;
        // A worker checks its own memory; this machine's is checked here, before the run queues.
        if machines.is_local(&machine) {
            trainer.fits(&spec)?;
        }
        Ok::<_, ApiError>((spec, machine, wanted.is_some()))
    })
    .await
    .map_err(ApiError::internal)??;
    if let Some(why) = lab.manager.store().failure() {
        let message = format!("the lab's run store cannot write, so it takes no runs until it can: {why}");
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_failing", message));
    }
    let id = lab.manager.launch(spec, machine, pinned);
    lab.durable().await?;
    Ok((StatusCode::CREATED, Json(serde_json::json!({ "id": id }))).into_response())
}

pub async fn stop_run(State(lab): State<Lab>, Path(id): Path<u64>, _: Operator) -> ApiResult<Json<RunInfo>> {
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

/// Events per answer of `/events` and `/metrics` unless `limit` says otherwise, and the
/// most it may say: a long run's history is read a page at a time.
const EVENTS_PAGE: usize = 10_000;
const EVENTS_PAGE_MAX: usize = 100_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Since {
    #[serde(default)]
    since: u64,
    limit: Option<usize>,
}

impl Since {
    fn limit(&self) -> ApiResult<usize> {
        page_limit(self.limit, EVENTS_PAGE, EVENTS_PAGE_MAX)
    }
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

/// `GET /api/runs/{id}/events?since=SEQ&limit=N`: up to N events after SEQ; ask again
/// from the last one's `seq` for more.
pub async fn run_events(State(lab): State<Lab>, Path(id): Path<u64>, Query(q): Query<Since>) -> ApiResult<Response> {
    Ok(json_array(events(&lab, id, q.since, None, q.limit()?).await?.iter()))
}

pub async fn metrics(State(lab): State<Lab>, Path(id): Path<u64>, Query(q): Query<Since>) -> ApiResult<Response> {
    Ok(json_array(events(&lab, id, q.since, Some("metrics"), q.limit()?).await?.iter()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Format {
    #[serde(default)]
    format: Option<String>,
}

pub async fn report(State(lab): State<Lab>, Path(id): Path<u64>, Query(q): Query<Format>) -> ApiResult<Response> {
    let manager = Arc::clone(&lab.manager);
    let summary = blocking(move || manager.summary(id)).await?.ok_or_else(|| ApiError::no_run(id))?;
    let Some(report) = summary.report.clone() else {
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
    let all = events(&lab, id, 0, Some("metrics"), usize::MAX).await?;
    let points: Vec<MetricsPoint> = all
        .iter()
        .filter_map(|e| match serde_json::from_str::<Event>(&e.json) {
            Ok(Event { body: EventBody::Metrics { metrics }, .. }) => Some(metrics),
            _ => None,
        })
        .collect();
    let csv = MetricsPoint::csv(&points);
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
        store.flush_within(super::state::DURABLE_WAIT);
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
/// A launch's body: a run spec, and beside its fields `"machine": NAME` where the run is
/// to go (left out: a free machine with the device the spec asks for).
pub fn parse_spec(
    body: &[u8],
    data_dir: &std::path::Path,
    trainer: &dyn Trainer,
) -> ApiResult<(RunSpec, Option<String>)> {
    let mut value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad("malformed_json", "body", format!("the body is not valid JSON: {e}")))?;
    let Some(object) = value.as_object_mut() else {
        return Err(ApiError::bad("malformed_json", "body", "the body must be a JSON object: a run spec"));
    };
    let machine = match object.remove("machine") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(name)) => Some(name),
        Some(other) => {
            return Err(ApiError::bad("invalid_value", "machine", format!("{other}: a machine's name, as a string")))
        }
    };
    let mut spec = json::parse(value).map_err(|r| {
        let code = if r.unknown { "unknown_field" } else { "invalid_value" };
        ApiError::bad(code, &r.error.field, r.error.message).path(&r.error.path)
    })?;
    for (field, file) in spec.workload.files() {
        *file = inside_data_dir(file, data_dir, field)?;
    }
    // Loading now reports a bad knowledge base at once, as the CLI does.
    trainer.load(&spec)?;
    Ok((spec, machine))
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
    /// Live rollout frames per second this viewer wants (0: none).
    #[serde(default = "default_fps")]
    fps: u32,
}

fn default_fps() -> u32 {
    30
}

/// The most live frames per second a viewer may ask for.
const FPS_MAX: u32 = 60;

/// How long one message may take to go out before the client is dropped.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// `GET /api/ws?run=ID&since=SEQ&fps=N`: what the client missed, then live events, and
/// the newest rollout frame up to `fps` times a second.
pub async fn ws(
    State(lab): State<Lab>,
    headers: HeaderMap,
    Query(q): Query<Follow>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let upgrade = upgrade.map_err(|e| ApiError::new(e.status(), "not_websocket", e.body_text()))?;
    // Browsers send Origin; it must be this server (a page elsewhere may not read runs
    // through the visitor's browser). Clients that are not browsers send none.
    super::guard::same_origin(&headers)?;
    if q.fps > FPS_MAX {
        return Err(ApiError::bad("invalid_value", "fps", format!("{}: allowed 0 to {FPS_MAX}", q.fps)));
    }
    run_info(&lab, q.run).await?;
    // A small write buffer per viewer: with hundreds of them, the default (128 KiB and
    // more, kept once grown) is most of the server's memory.
    Ok(upgrade.write_buffer_size(WRITE_BUFFER).on_upgrade(move |socket| stream(lab, q, socket)))
}

/// Events per flush of a catch-up; each flush has [`SEND_TIMEOUT`] to go out.
const SEND_CHUNK: usize = 64;

/// Bytes a viewer's socket gathers before writing to the connection.
const WRITE_BUFFER: usize = 16 * 1024;

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

/// Waits for the next frame tick (forever for a viewer that wants none).
async fn tick(ticker: &mut Option<tokio::time::Interval>) {
    match ticker {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Events per page of a viewer's catch-up.
const CATCH_UP_PAGE: usize = 1024;

/// How often a live viewer looks for new events (the trainer wakes no one).
const EVENT_GAP: Duration = Duration::from_millis(50);

/// Sends the events after `since`, a page at a time (a viewer of a long run never holds
/// its whole history); returns the last `seq` sent and the run while it is live. None
/// when the client is gone.
/// Sends the events after `since`, up to the newest; frames only once the run is over, and
/// then only those after `shown` (the log's seq when the viewer was last shown a frame: what
/// came before is as old as that frame or older).
async fn catch_up(
    lab: &Lab,
    id: u64,
    mut since: u64,
    shown: u64,
    socket: &mut WebSocket,
) -> Option<(u64, Option<Arc<Run>>)> {
    let new_frame = |e: &Logged| e.is_frame() && e.seq > shown;
    loop {
        if let Some(run) = lab.manager.get(id) {
            let f = run.follow(since);
            if f.stored.is_none() {
                // While the run is live its viewers get frames as the newest one, at their rate.
                let sent: Vec<Arc<Logged>> =
                    f.recent.iter().filter(|e| !e.is_frame() || (f.over && new_frame(e))).cloned().collect();
                if !send_all(socket, &sent).await {
                    return None;
                }
                let last = f.recent.last().map_or(since, |e| e.seq);
                // Once the run is over, its final status is the last event, and it was just sent.
                return Some((last, (!f.over).then_some(run)));
            }
        }
        let page = events(lab, id, since, None, CATCH_UP_PAGE).await.ok()?;
        let sent: Vec<Arc<Logged>> = page.iter().filter(|e| !e.is_frame() || new_frame(e)).cloned().collect();
        if !send_all(socket, &sent).await {
            return None;
        }
        since = page.last().map_or(since, |e| e.seq);
        if page.len() < CATCH_UP_PAGE && lab.manager.get(id).is_none() {
            return Some((since, None));
        }
    }
}

async fn stream(lab: Lab, q: Follow, mut socket: WebSocket) {
    let Some((mut last, live)) = catch_up(&lab, q.run, q.since, 0, &mut socket).await else { return };
    let Some(run) = live else {
        let _ = socket.send(Message::Close(None)).await;
        return;
    };
    let _watching = run.watch();
    let mut poll = tokio::time::interval(EVENT_GAP);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // Frames come from the run's newest one at this viewer's rate, not from the log.
    let mut ticker = (q.fps > 0).then(|| {
        let mut t = tokio::time::interval(Duration::from_secs(1) / q.fps);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        t
    });
    // The frame last shown, and the log's seq when it came.
    let mut shown: Option<(Arc<Logged>, u64)> = None;
    loop {
        tokio::select! {
            _ = poll.tick() => {
                let upto = shown.as_ref().map_or(0, |s| s.1);
                let Some((caught, live)) = catch_up(&lab, q.run, last, upto, &mut socket).await else { return };
                last = caught;
                if live.is_none() {
                    break;
                }
            }
            _ = tick(&mut ticker) => {
                let newest = run.frame().filter(|f| !shown.as_ref().is_some_and(|s| Arc::ptr_eq(&s.0, &f.0)));
                if let Some(frame) = newest {
                    if !send_all(&mut socket, std::slice::from_ref(&frame.0)).await {
                        return;
                    }
                    shown = Some(frame);
                }
            }
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}

//! The lab's side of its machines: `GET /api/machines`, and `GET /api/worker`, where a
//! worker's connection lives ([`crate::wire::link`]).

use super::error::{ApiError, ApiResult};
use super::state::Lab;
use crate::wire::link::{self, ToLab, ToWorker};
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use futures_util::SinkExt;
use hotlab_protocol::MachineInfo;
use std::time::Duration;

/// The most store writes one message of a worker's run makes: an update's metrics, its
/// profile and its publishing time, and the worker's mark after them.
const WRITES_PER_MESSAGE: usize = 4;

/// `GET /api/machines`: every machine, the local one too, with its devices and load.
pub async fn machines(State(lab): State<Lab>) -> Json<Vec<MachineInfo>> {
    let queued = lab.manager.queued_per_machine();
    Json(lab.machines.list(&queued))
}

/// The longest a worker may take to say hello after connecting.
const HELLO_WAIT: Duration = Duration::from_secs(15);
/// How often the lab acknowledges what the store has committed.
const ACK_GAP: Duration = Duration::from_millis(500);
/// A worker silent this long (no heartbeat, no message) is taken for gone.
const SILENCE: Duration = Duration::from_secs(10);
/// How often a connection waiting on a store that is behind looks again.
const STORE_WAIT: Duration = Duration::from_millis(5);

fn header<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// `GET /api/worker`: a worker connects. Refused before the upgrade, with a message, for
/// a wrong worker token (401), a bad name (400) or other versions (409).
pub async fn connect(
    State(lab): State<Lab>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    if !super::auth::bearer_is(&lab.worker_token, &headers) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a worker needs the lab's worker token (--worker-token; printed by `hotlab serve` at start), not the operator token",
        ));
    }
    let name = header(&headers, link::HEADER_NAME).to_string();
    link::check_name(&name).map_err(|m| ApiError::bad("invalid_value", "name", m))?;
    if let Some(message) = link::mismatch(header(&headers, link::HEADER_VERSION), header(&headers, link::HEADER_LINK)) {
        return Err(ApiError::new(StatusCode::CONFLICT, "version_mismatch", message));
    }
    if lab.machines.is_local(&name) || lab.machines.is_ray(&name) {
        let message =
            format!("'{name}' is the name of one of the lab's own machines: start the worker with another --name");
        return Err(ApiError::new(StatusCode::CONFLICT, "name_taken", message).field("name"));
    }
    let upgrade = upgrade.map_err(|e| ApiError::new(e.status(), "not_websocket", e.body_text()))?;
    Ok(upgrade.on_upgrade(move |socket| session(lab, name, socket)))
}

/// A worker's connection, from hello to close.
async fn session(lab: Lab, name: String, mut socket: WebSocket) {
    let hello = tokio::time::timeout(HELLO_WAIT, async {
        while let Some(Ok(m)) = socket.recv().await {
            if let Message::Text(t) = m {
                return serde_json::from_str::<ToLab>(&t).ok();
            }
        }
        None
    })
    .await;
    let Ok(Some(ToLab::Hello { system, max_runs, held, once })) = hello else {
        tracing::warn!("worker '{name}' connected without a hello; closed");
        return;
    };
    let (tx, mut commands) = tokio::sync::mpsc::unbounded_channel::<ToWorker>();
    let hello = super::machines::Hello { system, max_runs, once };
    let (link_id, welcome) = match lab.machines.connect(&name, hello, &held, tx) {
        Ok(answer) => answer,
        Err(why) => {
            tracing::warn!("worker refused: {why}");
            let frame = axum::extract::ws::CloseFrame { code: 4000, reason: why.into() };
            let _ = socket.send(Message::Close(Some(frame))).await;
            return;
        }
    };
    let text = |m: &ToWorker| Message::text(serde_json::to_string(m).unwrap_or_default());
    let hello_back = ToWorker::Welcome { resume: welcome.resume, forget: welcome.forget };
    let mut ok = socket.send(text(&hello_back)).await.is_ok();
    for m in &welcome.then {
        ok = ok && socket.send(text(m)).await.is_ok();
    }
    tracing::info!("worker '{name}' connected (runs held: {})", held.len());
    // Runs waiting for this machine can start now.
    lab.manager.kick();
    let mut acks = tokio::time::interval(ACK_GAP);
    let mut heard = tokio::time::Instant::now();
    while ok {
        tokio::select! {
            m = socket.recv() => match m {
                Some(Ok(Message::Text(t))) => {
                    heard = tokio::time::Instant::now();
                    ok = receive(&lab, &name, &t);
                    // A backlog (after an outage) comes faster than the store writes: read
                    // no more until it catches up, counting what is on its way to its queue;
                    // the worker keeps the rest meanwhile.
                    while ok && lab.manager.store().behind(WRITES_PER_MESSAGE * lab.machines.in_flight(&name)) {
                        tokio::time::sleep(STORE_WAIT).await;
                        heard = tokio::time::Instant::now();
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => ok = false,
                Some(Ok(_)) => heard = tokio::time::Instant::now(),
            },
            m = commands.recv() => match m {
                Some(m) => ok = socket.send(text(&m)).await.is_ok(),
                // A newer connection of this worker took over.
                None => ok = false,
            },
            _ = acks.tick() => {
                ok = heard.elapsed() < SILENCE && lab.machines.is_current(&name, link_id);
                let due = lab.machines.to_ack(&name);
                if ok && !due.is_empty() {
                    // Acknowledged only once stored: a store that is behind is waited on
                    // briefly, and what it has not committed is acknowledged later.
                    let store = lab.manager.store().clone();
                    let stored = tokio::task::spawn_blocking(move || store.flush_within(ACK_GAP)).await;
                    if stored.unwrap_or(false) {
                        for &(run, n) in &due {
                            ok = ok && socket.send(text(&ToWorker::Ack { run, n })).await.is_ok();
                        }
                        lab.machines.acked(&due);
                    }
                }
            }
        }
    }
    let _ = socket.close().await;
    lab.machines.disconnect(&name, link_id);
    lab.machines.forget_ephemeral(&name);
    tracing::warn!("worker '{name}' disconnected");
}

/// One message from a worker; false ends the connection (it broke the protocol).
fn receive(lab: &Lab, name: &str, text: &str) -> bool {
    match serde_json::from_str::<ToLab>(text) {
        Ok(ToLab::Run { run, n, msg }) => match lab.machines.deliver(name, run, n, *msg) {
            Ok(()) => true,
            Err(why) => {
                tracing::warn!("worker '{name}': {why}; connection closed (it will resend)");
                false
            }
        },
        Ok(ToLab::Heartbeat { load }) => {
            lab.machines.heartbeat(name, Some(load));
            true
        }
        Ok(ToLab::Hello { .. }) => true,
        Err(e) => {
            tracing::warn!("worker '{name}' said something this lab does not understand ({e}): {text:.200}");
            true
        }
    }
}

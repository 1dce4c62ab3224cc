//! One connection to the lab at a time: connect (with backoff), hello, welcome, then
//! messages both ways until the connection drops.

use super::{hello, Shared};
use crate::wire::link::{self, ToLab, ToWorker};
use anyhow::{bail, Result};
use futures_util::{SinkExt, StreamExt};
use hotlab_protocol::Load;
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::{self, Message};

/// The first wait before reconnecting, and the longest.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(10));
/// How often the worker tells the lab its load (the lab's last-seen time moves with it).
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// The longest the lab may take to welcome a worker.
const WELCOME_WAIT: Duration = Duration::from_secs(15);
/// Messages sent before the socket is flushed.
const BATCH: usize = 256;

/// `ws://HOST:PORT/api/worker` from the lab's `http://HOST:PORT` (`wss` from `https`).
pub fn ws_url(lab: &str) -> Result<String> {
    let lab = lab.trim_end_matches('/');
    let rest = match lab.split_once("://") {
        Some(("http", rest)) => format!("ws://{rest}"),
        Some(("https", rest)) => format!("wss://{rest}"),
        Some(("ws" | "wss", _)) => lab.to_string(),
        _ => bail!("--lab: '{lab}': give the lab's address as http://HOST:PORT (or https:// behind a TLS proxy)"),
    };
    Ok(format!("{rest}{}", link::PATH))
}

/// Why a connection ended.
enum Ended {
    /// A `--once` worker's run is over and the lab has all of it.
    Done,
    /// The lab refused the worker: its message.
    Refused(String),
    /// The connection failed or dropped (after the worker was welcomed, when `welcomed`).
    Lost { why: String, welcomed: bool },
}

/// Connects, and reconnects whenever the connection drops, until the lab refuses.
pub async fn connect_loop(url: String, shared: Arc<Shared>) -> Result<()> {
    let mut backoff = BACKOFF.0;
    loop {
        match session(&url, &shared).await {
            Ended::Done => return Ok(()),
            Ended::Refused(message) => bail!("{message}"),
            Ended::Lost { why, welcomed } => {
                if welcomed {
                    backoff = BACKOFF.0;
                }
                let (bytes, spilled) = shared.outbox().size();
                tracing::warn!(
                    "the lab at {url} is unreachable ({why}); retrying in {:.1} s ({bytes} bytes waiting, {spilled} spilled)",
                    backoff.as_secs_f64()
                );
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF.1);
    }
}

fn lost(why: impl std::fmt::Display, welcomed: bool) -> Ended {
    Ended::Lost { why: why.to_string(), welcomed }
}

/// The lab's message in a refusal's JSON body (`{"error": {"message"}}`), else the body.
fn refusal(status: u16, body: Option<&[u8]>) -> String {
    let text = body.map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or(text);
    format!("the lab refused this worker (HTTP {status}): {message}")
}

async fn session(url: &str, shared: &Arc<Shared>) -> Ended {
    let cfg = &shared.cfg;
    let mut request = match url.into_client_request() {
        Ok(r) => r,
        Err(e) => return Ended::Refused(format!("--lab: {e}")),
    };
    let headers = request.headers_mut();
    let pairs = [
        ("authorization", format!("Bearer {}", cfg.token)),
        (link::HEADER_NAME, cfg.name.clone()),
        (link::HEADER_VERSION, link::VERSION.to_string()),
        (link::HEADER_LINK, link::LINK_PROTOCOL.to_string()),
    ];
    for (name, value) in pairs {
        match HeaderValue::from_str(&value) {
            Ok(v) => {
                headers.insert(name, v);
            }
            Err(_) => return Ended::Refused(format!("{name}: not a valid header value")),
        }
    }
    let ws = match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => ws,
        Err(tungstenite::Error::Http(res)) if res.status().is_client_error() => {
            return Ended::Refused(refusal(res.status().as_u16(), res.body().as_deref()))
        }
        Err(e) => return lost(e, false),
    };
    let (mut tx, mut rx) = ws.split();
    let text = |m: &ToLab| Message::text(serde_json::to_string(m).unwrap_or_default());
    if let Err(e) = tx.send(text(&hello(shared))).await {
        return lost(e, false);
    }
    let welcome = tokio::time::timeout(WELCOME_WAIT, async {
        while let Some(m) = rx.next().await {
            match m {
                Ok(Message::Text(t)) => return serde_json::from_str::<ToWorker>(&t).map_err(|e| e.to_string()),
                Ok(Message::Close(frame)) => {
                    return Err(frame.map_or("the lab closed the connection".into(), |f| f.reason.to_string()))
                }
                Ok(_) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        Err("the lab closed the connection".into())
    })
    .await;
    match welcome {
        Ok(Ok(ToWorker::Welcome { resume, forget })) => {
            if let Err(e) = shared.welcome(&resume, &forget) {
                return lost(format!("{e:#}"), false);
            }
        }
        Ok(Ok(other)) => return lost(format!("the lab answered the hello with {other:?}"), false),
        Ok(Err(why)) => return lost(why, false),
        Err(_) => return lost("no welcome from the lab", false),
    }
    tracing::info!("connected to the lab at {url} as {}", cfg.name);
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    loop {
        if shared.done() {
            let _ = tx.send(Message::Close(None)).await;
            tracing::info!("run {:?} is over and the lab has all of it: done", shared.cfg.once);
            return Ended::Done;
        }
        // Everything waiting goes first, in order.
        loop {
            let batch = shared.outbox().take_unsent(BATCH);
            if batch.is_empty() {
                break;
            }
            for t in batch {
                if let Err(e) = tx.feed(Message::text(t)).await {
                    return lost(e, true);
                }
            }
            if let Err(e) = tx.flush().await {
                return lost(e, true);
            }
        }
        tokio::select! {
            m = rx.next() => match m {
                Some(Ok(Message::Text(t))) => match serde_json::from_str::<ToWorker>(&t) {
                    Ok(m) => handle(shared, m),
                    Err(e) => tracing::warn!("the lab said something this worker does not understand ({e}): {t:.200}"),
                },
                Some(Ok(Message::Close(_))) | None => return lost("the lab closed the connection", true),
                Some(Ok(_)) => {}
                Some(Err(e)) => return lost(e, true),
            },
            _ = shared.wake.notified() => {}
            _ = heartbeat.tick() => {
                let load = load(shared);
                if let Err(e) = tx.send(text(&ToLab::Heartbeat { load })).await {
                    return lost(e, true);
                }
            }
        }
    }
}

fn handle(shared: &Arc<Shared>, m: ToWorker) {
    match m {
        ToWorker::Start { run, spec, files } => shared.start(run, *spec, files),
        ToWorker::Stop { run } => shared.set_flag(run, |l| &l.stop, true),
        ToWorker::Watched { run, watched } => shared.set_flag(run, |l| &l.watched, watched),
        ToWorker::Ack { run, n } => {
            if let Err(e) = shared.outbox().ack(run, n) {
                tracing::error!("reading back spilled messages: {e:#}");
            }
        }
        ToWorker::Welcome { .. } => {}
    }
}

fn load(shared: &Shared) -> Load {
    let runs = super::lock(&shared.runs).len();
    let gpu = shared.system.cuda_available.then(super::gpu::load).flatten();
    Load { runs, gpu_memory_used_bytes: gpu.map(|g| g.0), gpu_utilization: gpu.map(|g| g.1) }
}

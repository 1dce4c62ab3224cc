//! Fuzzing the lab's API (issue 41): random and mutated requests at every REST route and
//! at the WebSocket, against a real `hotlab serve` with a real SQLite file. Every answer
//! has a status below 500, every error is JSON with a code, no handler drops the
//! connection (a panic), and the server still answers afterwards.
//!
//! Each loop tries its CI budget (`cargo xtask fuzz --cases N` sets N) from a seed each
//! target prints. A request that fails is kept in `tests/fixtures/fuzz-regressions/api.jsonl`
//! and sent first by every later run of the REST targets.

mod common;
mod lab_client;
use hotlab_core::fuzz;
use hotlab_env::rng::HostRng;
use lab_client::*;
use serde_json::{json, Value};
use std::io::Write;
use std::time::Duration;

/// Requests that once failed: a JSON line each, `{"method", "path", "body"}`.
const REGRESSIONS: &str = "tests/fixtures/fuzz-regressions/api.jsonl";

/// Sends a request and judges the answer; a bad one is kept in [`REGRESSIONS`], then fails
/// the test naming the seed. Returns the status and body.
fn send(addr: &str, seed: u64, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    let headers: &[(&str, &str)] = if method == "GET" { &[] } else { &[AUTH] };
    let answer = try_http(addr, method, path, headers, body);
    let shown = String::from_utf8_lossy(body);
    let wrong = match &answer {
        None => Some("no HTTP answer: the connection was closed, a handler panicked".to_string()),
        Some((status, _)) if *status >= 500 => Some(format!("status {status}")),
        Some((status, text)) if *status >= 400 => match serde_json::from_str::<Value>(text) {
            Ok(v) if v["error"]["code"].is_string() => None,
            Ok(_) => Some(format!("{status} without an error code")),
            Err(e) => Some(format!("{status} not JSON ({e})")),
        },
        Some(_) => None,
    };
    if let Some(wrong) = wrong {
        keep(method, path, body);
        let text = answer.map(|a| a.1).unwrap_or_default();
        panic!("seed {seed}: {method} {path} {shown}: {wrong}: {text} (kept in {REGRESSIONS})");
    }
    answer.expect("judged above")
}

/// Adds a failing request to [`REGRESSIONS`] (once).
fn keep(method: &str, path: &str, body: &[u8]) {
    let file = common::repo().join(REGRESSIONS);
    let line = json!({"method": method, "path": path, "body": String::from_utf8_lossy(body)}).to_string();
    if std::fs::read_to_string(&file).is_ok_and(|t| t.lines().any(|l| l == line)) {
        return;
    }
    let _ = std::fs::create_dir_all(file.parent().expect("a folder"));
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&file) {
        let _ = writeln!(f, "{line}");
    }
}

/// Sends every kept request, judged as the fuzzing judges it.
fn replay_regressions(addr: &str, seed: u64) {
    let text = std::fs::read_to_string(common::repo().join(REGRESSIONS)).unwrap_or_default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{REGRESSIONS}: {e}: {line}"));
        let field = |k: &str| case[k].as_str().unwrap_or_else(|| panic!("{REGRESSIONS}: no {k} in {line}"));
        send(addr, seed, field("method"), field("path"), field("body").as_bytes());
    }
}

fn pick<'a>(rng: &mut HostRng, from: &[&'a str]) -> &'a str {
    from[rng.below(from.len() as u64) as usize]
}

/// `body` with one to four bytes changed, removed or inserted.
fn mutate(rng: &mut HostRng, base: &[u8]) -> Vec<u8> {
    let noise = b"{}[]\":,0123456789.-eE truefalsnul\\xyz";
    let mut body = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(body.len().max(1) as u64) as usize;
        let byte = noise[rng.below(noise.len() as u64) as usize];
        match (rng.below(3), body.is_empty()) {
            (0, false) => body[at] = byte,
            (1, false) => {
                body.remove(at);
            }
            _ => body.insert(at.min(body.len()), byte),
        }
    }
    body
}

/// `value` with one of its parts (or itself) replaced by a value of another kind or range.
fn twist(rng: &mut HostRng, value: &Value) -> Value {
    fn at(rng: &mut HostRng, v: &mut Value) {
        let odd =
            [json!(null), json!(-1), json!(0), json!(1e308), json!("x"), json!([]), json!({}), json!(true), json!(2)];
        let deeper = rng.below(4) != 0;
        match v {
            Value::Object(m) if deeper && !m.is_empty() => {
                let k = m.keys().nth(rng.below(m.len() as u64) as usize).cloned().unwrap_or_default();
                if let Some(inner) = m.get_mut(&k) {
                    at(rng, inner);
                }
            }
            Value::Array(a) if deeper && !a.is_empty() => {
                let i = rng.below(a.len() as u64) as usize;
                at(rng, &mut a[i]);
            }
            _ => *v = odd[rng.below(odd.len() as u64) as usize].clone(),
        }
    }
    let mut out = value.clone();
    at(rng, &mut out);
    out
}

/// Spec bodies (a valid tiny spec with bytes flipped, dropped or inserted) and run paths
/// with random ids and query strings: 400 and 200 in CI. A body is created (201) or
/// refused (4xx), never anything else.
#[test]
fn mutated_requests_get_4xx_json_never_5xx() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let seed = fuzz::seed(7);
    replay_regressions(&server.addr, seed);
    let mut rng = HostRng::new(seed);
    let base = br#"{"envs": 1, "steps": 8, "total_steps": 8, "device": "cpu", "ppo": {"minibatches": 1}}"#;
    let mut tried = (0, 0);
    for _ in 0..fuzz::cases(400) {
        let body = mutate(&mut rng, base);
        let (status, text) = send(&server.addr, seed, "POST", "/api/runs", &body);
        assert!(
            status == 201 || (400..500).contains(&status),
            "seed {seed}: {status} for {}: {text}",
            String::from_utf8_lossy(&body)
        );
        tried.0 += 1;
    }
    let routes = [
        "runs/{}",
        "runs/{}/events",
        "runs/{}/metrics",
        "runs/{}/report",
        "runs/{}/trace",
        "runs/{}/policy",
        "runs/{}/summary",
    ];
    let ids = ["1", "0", "-1", "99999999999999999999", "x", "%00", "1%2F2"];
    let queries = ["", "?since=2", "?since=-1", "?since=x", "?format=md", "?format=zip", "?a=b", "?since"];
    for _ in 0..fuzz::cases(200) {
        let route = pick(&mut rng, &routes);
        let id = pick(&mut rng, &ids);
        let query = pick(&mut rng, &queries);
        send(&server.addr, seed, "GET", &format!("/api/{}{query}", route.replace("{}", id)), b"");
        tried.1 += 1;
    }
    assert_eq!(get(&server.addr, "/api/system").0, 200, "the server answers after {tried:?} requests");
}

/// Every route of the API, GET and POST, with mutated paths, queries and bodies: 300 of
/// each in CI. Bodies that stay valid start small things (budgets of a fraction of a second).
#[test]
fn every_route_answers_mutated_requests_with_json_never_5xx() {
    let seed = fuzz::seed(11);
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let addr = server.addr.clone();
    replay_regressions(&addr, seed);
    let tiny = json!({"envs": 2, "steps": 8, "total_steps": 32, "device": "cpu", "ppo": {"minibatches": 1}});
    let run = launch(&addr, tiny.clone());
    wait_for(&addr, run, &["finished"]);
    let mut rng = HostRng::new(seed);
    let gets = [
        "/api/system",
        "/api/auth",
        "/api/runs?before={}&limit={}",
        "/api/runs/{}/export.csv",
        "/api/runs/{}/summary",
        "/api/lessons",
        "/api/lessons/checks",
        "/api/audits?run={}&lesson={}&limit={}",
        "/api/audits/{}",
        "/api/machines",
        "/api/sweeps?limit={}",
        "/api/sweeps/{}",
        "/api/ws?run={}&since={}&fps={}",
        "/api/{}",
    ];
    let values = ["1", "0", "-1", "99999999999999999999", "x", "%00", "1%2F2", "", "batch-size", "nan", "1e3"];
    let mut run_id = run.to_string();
    for _ in 0..fuzz::cases(300) {
        let mut path = pick(&mut rng, &gets).to_string();
        while path.contains("{}") {
            let v = if rng.below(3) == 0 { run_id.as_str() } else { pick(&mut rng, &values) };
            path = path.replacen("{}", v, 1);
        }
        send(&addr, seed, "GET", &path, b"");
    }
    let posts: [(&str, Value); 9] = [
        ("/api/runs/{}/audit", json!({"changes": ["lr=0.001"], "repeats": 2, "seconds": 0.05})),
        ("/api/runs/{}/tune", json!({"repeats": 2, "seconds": 0.05, "max_steps": 1})),
        ("/api/lessons/{}", json!({"settings": {"envs": "2"}, "repeats": 2, "seconds": 0.05})),
        ("/api/lessons/checks", json!({"lessons": ["per-item-sync"], "seconds": 0.05})),
        ("/api/sweeps", json!({"grid": "envs=2,4", "spec": {"total_steps": 32, "steps": 8, "device": "cpu"}})),
        ("/api/prune", json!({"older_than_days": 30})),
        ("/api/runs/{}/stop", json!({})),
        ("/api/audits/{}/stop", json!({})),
        ("/api/runs", json!({"envs": 1, "steps": 8, "total_steps": 8, "device": "cpu", "ppo": {"minibatches": 1}})),
    ];
    let mut answers = std::collections::BTreeMap::<(&str, u16), usize>::new();
    for _ in 0..fuzz::cases(300) {
        let (route, base) = &posts[rng.below(posts.len() as u64) as usize];
        // The run's id half the time: an id for the lessons' and audits' routes, or nonsense.
        let ids = ["0", "x", "batch-size", "worker-waits", "99999999999999999999", "%00"];
        let id = if rng.below(2) == 0 { run_id.as_str() } else { pick(&mut rng, &ids) };
        let path = route.replace("{}", id);
        // Bytes mutated (broken JSON, mostly), a value swapped for one of another kind or
        // range (well-formed and wrong), or the body as it is (accepted).
        let body = match rng.below(3) {
            0 => mutate(&mut rng, base.to_string().as_bytes()),
            1 => twist(&mut rng, base).to_string().into_bytes(),
            _ => base.to_string().into_bytes(),
        };
        let (status, _) = send(&addr, seed, "POST", &path, &body);
        *answers.entry((*route, status)).or_insert(0) += 1;
        if *route == "/api/prune" && status == 200 {
            // The prune may have taken the run the other routes aim at (a body twisted to
            // 0 days): a new one takes its place, so that valid audits keep being tried.
            run_id = launch(&addr, tiny.clone()).to_string();
        }
    }
    // Each route was reached, and some bodies stayed valid (a mutation is not always fatal):
    // an audit of the run among them.
    for (route, _) in &posts {
        assert!(answers.keys().any(|(r, _)| r == route), "seed {seed}: {route} never tried: {answers:?}");
    }
    assert!(answers.contains_key(&("/api/runs/{}/audit", 201)), "seed {seed}: no audit accepted: {answers:?}");
    assert!(answers.keys().any(|(_, s)| (200..300).contains(s)), "seed {seed}: none accepted: {answers:?}");
    eprintln!("seed {seed}: POST answers by route and status: {answers:?}");
    assert_eq!(get(&addr, "/api/system").0, 200, "seed {seed}: the server answers after it all");
}

/// Random WebSocket upgrades and messages: 200 upgrades with random query strings (each
/// opens or gets a 4xx, never a 5xx) and 300 random client messages on an open stream in
/// CI (viewers are read-only: the server ignores them and keeps streaming); the run ends
/// well and the server answers afterwards.
#[test]
fn random_websocket_queries_and_messages_are_harmless() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::{Error, Message};
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let id = launch(&server.addr, json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"}));
    wait_for(&server.addr, id, &["running"]);
    let seed = fuzz::seed(11);
    let mut rng = HostRng::new(seed);
    let rt = runtime();
    let parts = [
        format!("run={id}"),
        "run=0".into(),
        "run=x".into(),
        "since=3".into(),
        "since=-1".into(),
        "fps=0".into(),
        "fps=60".into(),
        "fps=1000".into(),
        "fps=".into(),
        "token=x".into(),
        "run".into(),
        "%zz".into(),
    ];
    let mut opened = 0;
    for _ in 0..fuzz::cases(200) {
        let query: Vec<&str> =
            (0..rng.below(4)).map(|_| parts[rng.below(parts.len() as u64) as usize].as_str()).collect();
        let url = format!("ws://{}/api/ws?{}", server.addr, query.join("&"));
        match rt.block_on(tokio_tungstenite::connect_async(&url)) {
            Ok(_) => opened += 1,
            Err(Error::Http(res)) => {
                assert!(res.status().is_client_error(), "seed {seed}: {} for {url}", res.status())
            }
            Err(e) => panic!("seed {seed}: {url}: {e}"),
        }
    }
    assert!(opened > 0, "seed {seed}: some random queries were valid");
    let messages = fuzz::cases(300);
    // The newest event's seq among the text messages that arrive before `until`.
    async fn newest(ws: &mut Ws, until: tokio::time::Instant, above: u64) -> u64 {
        let mut seq = above;
        while let Ok(Some(Ok(m))) = tokio::time::timeout_at(until, futures_util::StreamExt::next(ws)).await {
            if let Message::Text(t) = m {
                let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                seq = seq.max(v["seq"].as_u64().unwrap_or(0));
                if above > 0 && seq > above {
                    break;
                }
            }
        }
        seq
    }
    type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;
    let (before, after) = rt.block_on(async {
        let url = format!("ws://{}/api/ws?run={id}&fps=10", server.addr);
        let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        // The history and the first live events, before any random message.
        let before = newest(&mut ws, tokio::time::Instant::now() + Duration::from_secs(2), 0).await;
        for i in 0..messages {
            let len = rng.below(64) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            let msg = match rng.below(4) {
                0 => Message::Text(String::from_utf8_lossy(&bytes).into_owned().into()),
                1 => Message::Binary(bytes.into()),
                2 => Message::Text(r#"{"stop": true, "run": 1}"#.into()),
                _ => Message::Ping(bytes.into()),
            };
            // Every message goes out: a server that closed the socket fails a send.
            ws.send(msg).await.unwrap_or_else(|e| panic!("seed {seed}: message {i} of {messages}: {e}"));
        }
        // An event newer than any before the messages: the stream went on past them.
        let after = newest(&mut ws, tokio::time::Instant::now() + Duration::from_secs(30), before.max(1)).await;
        (before, after)
    });
    assert!(before > 0, "seed {seed}: events before the messages");
    assert!(after > before, "seed {seed}: no event newer than {before} after {messages} random messages");
    assert_eq!(get_json(&server.addr, &format!("/api/runs/{id}"))["status"], "running", "no message stops a run");
    assert_eq!(http(&server.addr, "POST", &format!("/api/runs/{id}/stop"), &[AUTH], b"").0, 200);
    wait_for(&server.addr, id, &["stopped"]);
    assert_eq!(get(&server.addr, "/api/system").0, 200);
}

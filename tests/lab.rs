//! The lab server (issue 6): a real `hotlab serve` on a loopback port with a real SQLite
//! file, plain HTTP/1.1 for REST and tokio-tungstenite for the WebSocket.

mod common;
mod faults;
mod lab_client;
use common::*;
use futures_util::StreamExt;
use lab_client::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
fn a_run_streams_every_kind_in_order_and_the_history_equals_the_stream() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let id = launch(&server.addr, small_run());
    let rt = runtime();
    let streamed = rt.block_on(follow(&server.addr, &format!("run={id}&since=0")));
    let kinds: Vec<&str> = streamed.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    for kind in ["status", "metrics", "profile", "report", "rollout"] {
        assert!(kinds.contains(&kind), "a {kind} event: {kinds:?}");
    }
    let statuses: Vec<&str> = streamed.iter().filter_map(|e| e["status"].as_str()).collect();
    assert_eq!(statuses, ["queued", "running", "finished"]);
    assert_eq!(streamed.iter().filter(|e| e["kind"] == "metrics").count(), 20, "20480 / (8 × 128) updates");
    assert!(streamed.iter().all(|e| e["v"] == 1 && e["run"] == id));
    for frame in streamed.iter().filter(|e| e["kind"] == "rollout").map(|e| &e["frame"]) {
        assert_eq!(frame["env"], "cartpole");
        let states = frame["states"].as_array().unwrap();
        assert!((1..=4).contains(&states.len()) && states.iter().all(|s| s.as_array().unwrap().len() == 4));
        assert_eq!(frame["actions"].as_array().unwrap().len(), states.len(), "an action per env shown");
    }

    // The history over REST is what was streamed: the same events in sequence order;
    // only rollout frames may have been coalesced away for a client that fell behind.
    let history = get_json(&server.addr, &format!("/api/runs/{id}/events"));
    let history = history.as_array().unwrap();
    let listed = get_json(&server.addr, "/api/runs");
    let listed = listed.as_array().unwrap().iter().find(|r| r["id"] == id).unwrap().clone();
    assert!(listed["sps"].as_f64().unwrap() > 0.0, "the list carries the last steps/s: {listed}");
    let seqs: Vec<u64> = history.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "every event once, in order: {seqs:?}");
    // Live, the viewer got every event but frames, and frames at its own rate (seq 0);
    // the history keeps every event but the frames an ended run thins out.
    let not_frames = |v: &[Value]| v.iter().filter(|e| e["kind"] != "rollout").cloned().collect::<Vec<_>>();
    assert_eq!(not_frames(&streamed), not_frames(history), "every other event as streamed, in order");
    let metrics = get_json(&server.addr, &format!("/api/runs/{id}/metrics?since=10"));
    assert!(metrics.as_array().unwrap().iter().all(|e| e["kind"] == "metrics" && e["seq"].as_u64().unwrap() > 10));

    // The run's outputs.
    let report = get_json(&server.addr, &format!("/api/runs/{id}/report"));
    assert!(report["rows"].as_array().unwrap().iter().any(|r| r["phase"] == "env_step"));
    let (status, md) = get(&server.addr, &format!("/api/runs/{id}/report?format=md"));
    assert!(status == 200 && md.contains("# Bottleneck report"));
    let trace = get_json(&server.addr, &format!("/api/runs/{id}/trace"));
    assert!(!trace["traceEvents"].as_array().unwrap().is_empty());
    let policy = get_json(&server.addr, &format!("/api/runs/{id}/policy"));
    let n: i64 = policy["layout"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["shape"].as_array().unwrap().iter().map(|d| d.as_i64().unwrap()).product::<i64>())
        .sum();
    assert_eq!(policy["params"].as_array().unwrap().len() as i64, n, "the weights match their layout");
    let (status, csv) = get(&server.addr, &format!("/api/runs/{id}/export.csv"));
    assert_eq!(status, 200);
    assert_eq!(csv.lines().count(), 21, "a header and 20 updates");
    assert!(csv.starts_with("update,updates,global_step"));

    // Reconnecting with `since` gets exactly what came after.
    let again = rt.block_on(follow(&server.addr, &format!("run={id}&since=5")));
    let after: Vec<Value> = history.iter().filter(|e| e["seq"].as_u64().unwrap() > 5).cloned().collect();
    assert_eq!(again, after);
}

#[test]
fn a_proof_run_streams_goal_lists_successors_and_choices() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let spec =
        json!({"env": "proof", "kb": "family:people=30,seed=3", "envs": 8, "total_steps": 163840, "device": "cpu"});
    let id = launch(&server.addr, spec);
    let streamed = runtime().block_on(follow(&server.addr, &format!("run={id}")));
    assert_eq!(streamed.last().unwrap()["status"], "finished", "{:?}", streamed.last());
    let frames: Vec<&Value> = streamed.iter().filter(|e| e["kind"] == "rollout").map(|e| &e["frame"]).collect();
    assert!(!frames.is_empty(), "frames while someone watches");
    for f in &frames {
        assert_eq!(f["env"], "proof");
        let goals = f["goals"].as_str().unwrap();
        assert!(goals.starts_with('[') && goals.ends_with(']') && !goals.contains('?'), "Prolog text: {goals}");
        let successors = f["successors"].as_array().unwrap();
        let allowed: Vec<bool> = f["allowed"].as_array().unwrap().iter().map(|a| a.as_bool().unwrap()).collect();
        assert_eq!(successors.len(), allowed.len());
        assert!(successors.len() <= 20);
        // The masked policy picks an allowed successor whenever there is one.
        let choice = f["choice"].as_i64().unwrap() as usize;
        if allowed.contains(&true) {
            assert!(allowed.get(choice) == Some(&true), "choice {choice} among {allowed:?} for {goals}");
        }
    }
    assert!(frames.iter().any(|f| !f["successors"].as_array().unwrap().is_empty()), "some frames offer moves");
    let steps: Vec<u64> = frames.iter().map(|f| f["step"].as_u64().unwrap()).collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "frames in rollout order: {steps:?}");
}

#[test]
fn many_viewers_and_one_that_never_reads_all_end_well() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let spec = json!({"envs": 8, "total_steps": 102400, "device": "cpu"});
    let id = launch(&server.addr, spec);
    let rt = runtime();
    // A client that connects and never reads.
    let stuck = rt.block_on(tokio_tungstenite::connect_async(format!("ws://{}/api/ws?run={id}", server.addr))).unwrap();
    let viewers: Vec<_> = (0..200)
        .map(|_| {
            rt.spawn({
                let a = server.addr.clone();
                async move { follow(&a, &format!("run={id}")).await }
            })
        })
        .collect();
    let results = rt.block_on(async {
        let mut out = Vec::new();
        for v in viewers {
            out.push(v.await.unwrap());
        }
        out
    });
    for got in &results {
        assert_eq!(got.last().unwrap()["status"], "finished", "every viewer gets the final status");
    }
    let run = wait_for(&server.addr, id, &["finished"]);
    assert!(run["events"].as_u64().unwrap() > 100);
    drop(stuck);
}

#[test]
fn a_client_that_falls_behind_gets_newer_frames_and_every_other_event() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let spec =
        json!({"env": "proof", "kb": "family:people=30,seed=3", "envs": 8, "total_steps": 600_000, "device": "cpu"});
    let id = launch(&server.addr, spec);
    let got = runtime().block_on(async {
        // A small receive window, and no reading for a while: the server's sends back up.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let tcp = socket.connect(server.addr.parse().unwrap()).await.unwrap();
        let url = format!("ws://{}/api/ws?run={id}", server.addr);
        let (mut ws, _) = tokio_tungstenite::client_async(url, tcp).await.unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mut got = Vec::new();
        while let Some(Ok(msg)) = ws.next().await {
            let tokio_tungstenite::tungstenite::Message::Text(text) = msg else { continue };
            got.push(serde_json::from_str::<Value>(&text).unwrap());
        }
        got
    });
    let history = get_json(&server.addr, &format!("/api/runs/{id}/events"));
    let history = history.as_array().unwrap();
    assert_eq!(got.last().unwrap()["status"], "finished");
    let not_frames = |v: &[Value]| v.iter().filter(|e| e["kind"] != "rollout").cloned().collect::<Vec<_>>();
    assert_eq!(not_frames(&got), not_frames(history), "every other event, in order");
    // Frames come as the newest one whenever the client can take one: never a backlog.
    let steps: Vec<u64> =
        got.iter().filter(|e| e["kind"] == "rollout").map(|e| e["frame"]["step"].as_u64().unwrap()).collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "each frame newer than the last: {steps:?}");
}

#[test]
fn a_killed_server_lists_its_live_run_as_interrupted_with_its_metrics() {
    let data = tempfile::tempdir().unwrap();
    let mut server = start(data.path(), &[]);
    let id = launch(&server.addr, json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"}));
    let start_t = Instant::now();
    while get_json(&server.addr, &format!("/api/runs/{id}/metrics")).as_array().unwrap().len() < 20 {
        assert!(start_t.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(50));
    }
    // Past the store's flush interval, so what was streamed is on disk.
    std::thread::sleep(Duration::from_millis(600));
    let last_wall = |m: &Value| m.as_array().unwrap().last().unwrap()["metrics"]["wall_s"].as_f64().unwrap();
    let seen = last_wall(&get_json(&server.addr, &format!("/api/runs/{id}/metrics")));
    unsafe { libc::kill(server.child.id() as i32, libc::SIGKILL) };
    let _ = server.child.wait();

    let again = start(data.path(), &[]);
    let runs = get_json(&again.addr, "/api/runs");
    let run = runs.as_array().unwrap().iter().find(|r| r["id"] == id).expect("listed after the restart");
    assert_eq!(run["status"], "interrupted", "{run}");
    let kept = last_wall(&get_json(&again.addr, &format!("/api/runs/{id}/metrics")));
    assert!(kept >= seen - 1.0, "metrics kept up to {kept:.2} s of the run; {seen:.2} s were streamed before the kill");
    // The replay ends with the interrupted status; new runs get new ids.
    let events = get_json(&again.addr, &format!("/api/runs/{id}/events"));
    assert_eq!(events.as_array().unwrap().last().unwrap()["status"], "interrupted");
    let next = launch(&again.addr, small_run());
    assert!(next > id);
    let stopped = http(&again.addr, "POST", &format!("/api/runs/{id}/stop"), &[AUTH], b"");
    assert_eq!(stopped.0, 409, "an interrupted run cannot be stopped: {}", stopped.1);
}

#[test]
fn stop_and_the_queue() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &["--max-runs", "1"]);
    let long = json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"});
    let first = launch(&server.addr, long.clone());
    let second = launch(&server.addr, long);
    wait_for(&server.addr, first, &["running"]);
    assert_eq!(get_json(&server.addr, &format!("/api/runs/{second}"))["status"], "queued", "one run at a time");
    let (status, body) = http(&server.addr, "POST", &format!("/api/runs/{second}/stop"), &[AUTH], b"");
    assert_eq!(status, 200, "{body}");
    assert_eq!(wait_for(&server.addr, second, &["stopped"])["status"], "stopped");
    let (status, _) = http(&server.addr, "POST", &format!("/api/runs/{first}/stop"), &[AUTH], b"");
    assert_eq!(status, 200);
    wait_for(&server.addr, first, &["stopped"]);
    // A device the machine lacks is refused at launch, naming the field; the server keeps serving.
    let bad = json!({"envs": 8, "total_steps": 20480, "device": "cuda:7"});
    let (status, body) = http(&server.addr, "POST", "/api/runs", &[AUTH], bad.to_string().as_bytes());
    assert_eq!(status, 400, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["field"], "device", "{body}");
    let ok = launch(&server.addr, small_run());
    assert_eq!(wait_for(&server.addr, ok, &["finished", "failed"])["status"], "finished");
}

#[test]
fn bad_requests_are_refused_naming_the_field() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let post = |body: &[u8], headers: &[(&str, &str)]| {
        let (status, text) = http(&server.addr, "POST", "/api/runs", headers, body);
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        (
            status,
            v["error"]["code"].as_str().unwrap_or("").to_string(),
            v["error"]["field"].as_str().unwrap_or("").to_string(),
            v["error"]["message"].as_str().unwrap_or("").to_string(),
        )
    };
    // No token: 401 on POST, 200 on GET; a wrong token is no token.
    assert_eq!(post(small_run().to_string().as_bytes(), &[]).0, 401);
    assert_eq!(post(small_run().to_string().as_bytes(), &[("Authorization", "Bearer nope")]).0, 401);
    assert_eq!(get(&server.addr, "/api/runs").0, 200);
    assert_eq!(get_json(&server.addr, "/api/auth")["operator"], false);
    assert_eq!(
        serde_json::from_str::<Value>(&http(&server.addr, "GET", "/api/auth", &[AUTH], b"").1).unwrap()["operator"],
        true
    );
    assert_eq!(http(&server.addr, "POST", "/api/runs/1/stop", &[], b"").0, 401);
    // The token once in the URL sets a cookie that then works on its own.
    let mut s = TcpStream::connect(&server.addr).unwrap();
    write!(s, "GET /?token={TOKEN} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", server.addr).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.contains(&format!("hotlab_token={TOKEN}")), "a cookie is set: {raw}");
    let cookie = format!("hotlab_token={TOKEN}");
    assert_eq!(post(small_run().to_string().as_bytes(), &[("Cookie", &cookie)]).0, 201);

    let cases: &[(&[u8], u16, &str, &str)] = &[
        (b"{\"envs\": 8", 400, "malformed_json", "body"),
        (b"[1, 2]", 400, "malformed_json", "body"),
        (b"{\"envz\": 8}", 400, "unknown_field", "envz"),
        (b"{\"envs\": \"eight\"}", 400, "invalid_value", "envs"),
        (b"{\"envs\": 0}", 400, "invalid_value", "envs"),
        (b"{\"lr\": -1}", 400, "invalid_value", "lr"),
        (b"{\"backend\": \"gpu\"}", 400, "invalid_value", "backend"),
        (b"{\"minibatches\": 3}", 400, "invalid_value", "minibatches"),
        (b"{\"env\": \"proof\", \"kb\": \"/etc/passwd\", \"queries\": \"q.pl\"}", 400, "outside_data_dir", "kb"),
        (b"{\"env\": \"proof\", \"kb\": \"../x.pl\", \"queries\": \"q.pl\"}", 400, "outside_data_dir", "kb"),
        (b"{\"env\": \"proof\", \"kb\": \"family:people=2\"}", 400, "invalid_value", "kb"),
        // ~1 TB of rollout: refused with the figure before it can take the lab down.
        (
            br#"{"workload": "proof", "envs": 1024, "steps": 65536, "total_steps": 67108864}"#,
            400,
            "invalid_value",
            "envs",
        ),
    ];
    for (body, status, code, field) in cases {
        let (s, c, f, m) = post(body, &[AUTH]);
        assert_eq!((s, c.as_str(), f.as_str()), (*status, *code, *field), "{}: {m}", String::from_utf8_lossy(body));
        assert!(!m.is_empty());
    }
    let (s, _, f, m) = post(b"{\"envs\": 0}", &[AUTH]);
    assert!(s == 400 && f == "envs" && m.contains("between 1 and"), "the allowed range is named: {m}");
    let big = format!("{{\"kb\": \"{}\"}}", "x".repeat(100_000));
    let (s, code, field, _) = post(big.as_bytes(), &[AUTH]);
    assert_eq!((s, code.as_str(), field.as_str()), (413, "body_too_large", "body"));
    assert_eq!(get(&server.addr, "/api/runs/999").0, 404);
    assert_eq!(get(&server.addr, "/api/runs/1/metrics?sinse=2").0, 400, "unknown query fields are refused");

    // The WebSocket refuses a page from another origin.
    let rt = runtime();
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!(
        "ws://{}/api/ws?run=1",
        server.addr
    ))
    .unwrap();
    req.headers_mut().insert("Origin", "http://evil.example".parse().unwrap());
    assert!(rt.block_on(tokio_tungstenite::connect_async(req)).is_err(), "a foreign Origin is refused");
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!(
        "ws://{}/api/ws?run=1",
        server.addr
    ))
    .unwrap();
    req.headers_mut().insert("Origin", format!("http://{}", server.addr).parse().unwrap());
    assert!(rt.block_on(tokio_tungstenite::connect_async(req)).is_ok(), "the server's own origin is accepted");
}

/// A store written by the version before the spec was nested (flat specs in SQLite) opens,
/// lists its runs with their specs migrated, and serves their history; a spec posted in
/// the nested form launches, as one in the flat form does.
#[test]
fn runs_stored_in_the_flat_form_load_and_both_forms_launch() {
    let data = tempfile::tempdir().unwrap();
    std::fs::copy(repo().join("tests/fixtures/flat-store/hotlab.sqlite"), data.path().join("hotlab.sqlite")).unwrap();
    let server = start(data.path(), &[]);
    let runs = get_json(&server.addr, "/api/runs");
    let runs: Vec<&Value> = runs.as_array().unwrap().iter().rev().collect(); // listed newest first
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0]["spec"]["workload"], json!({"cartpole": {}}), "a flat CartPole spec keeps no proof settings");
    assert_eq!((runs[0]["spec"]["seed"].as_u64(), runs[0]["status"].as_str()), (Some(3), Some("finished")));
    let proof = &runs[1]["spec"]["workload"]["proof"];
    assert_eq!((proof["kb"].as_str(), proof["depth"].as_u64()), (Some("family:people=30,seed=3"), Some(10)));
    assert_eq!(runs[1]["spec"]["ppo"]["lr"], 0.00025);
    let metrics = get_json(&server.addr, "/api/runs/1/metrics");
    assert_eq!(metrics.as_array().map(Vec::len), Some(4), "the stored history: {metrics}");

    let nested = json!({"workload": {"proof": {"kb": "family:people=30,seed=3", "depth": 6}}, "envs": 8, "steps": 16,
        "total_steps": 1024, "device": "cpu", "exec": {"backend": "threads", "workers": 2}, "ppo": {"lr": 0.003}});
    let id = launch(&server.addr, nested);
    let run = wait_for(&server.addr, id, &["finished"]);
    assert_eq!(run["spec"]["workload"]["proof"]["depth"], 6);
    assert_eq!(
        (run["spec"]["exec"]["backend"].as_str(), run["spec"]["ppo"]["lr"].as_f64()),
        (Some("threads"), Some(0.003))
    );
    let (status, body) = http(&server.addr, "POST", "/api/runs", &[AUTH], br#"{"ppo": {"lr": "fast"}}"#);
    let e: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, e["error"]["field"].as_str(), e["error"]["path"].as_str()), (400, Some("lr"), Some("ppo.lr")));
    let (status, body) = http(&server.addr, "POST", "/api/runs", &[AUTH], br#"{"lr": 0.1, "ppo": {"epochs": 2}}"#);
    assert_eq!(status, 400, "two forms at once are refused: {body}");
}

/// Requests a page elsewhere could make through a visitor's browser are refused, each with
/// the API's JSON error: another host name (DNS rebinding), a form's body, another origin;
/// and a bad path or query answers JSON too.
#[test]
fn requests_from_elsewhere_are_refused_as_json_errors() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &["--allow-host", "lab.example"]);
    let error = |status: u16, body: &str| {
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
        (status, v["error"]["code"].as_str().unwrap_or("").to_string())
    };
    let (s, b) = http(&server.addr, "GET", "/api/system", &[("Host", "evil.example")], b"");
    assert_eq!(error(s, &b), (403, "bad_host".into()));
    let (s, b) = http(&server.addr, "GET", "/", &[("Host", "evil.example:8080")], b"");
    assert_eq!(error(s, &b), (403, "bad_host".into()), "the page too");
    for host in ["localhost", "lab.example:80"] {
        assert_eq!(http(&server.addr, "GET", "/api/system", &[("Host", host)], b"").0, 200, "{host}");
    }
    let spec = small_run().to_string();
    let form = [AUTH, ("Content-Type", "application/x-www-form-urlencoded")];
    let (s, b) = http(&server.addr, "POST", "/api/runs", &form, spec.as_bytes());
    assert_eq!(error(s, &b), (415, "unsupported_media_type".into()));
    let (s, b) = http(&server.addr, "POST", "/api/runs", &[AUTH, ("Origin", "http://evil.example")], spec.as_bytes());
    assert_eq!(error(s, &b), (403, "bad_origin".into()));
    let own = format!("http://{}", server.addr);
    assert_eq!(http(&server.addr, "POST", "/api/runs", &[AUTH, ("Origin", &own)], spec.as_bytes()).0, 201);
    let (s, b) = get(&server.addr, "/api/runs/abc");
    assert_eq!(error(s, &b), (400, "invalid_path".into()));
    let (s, b) = get(&server.addr, "/api/runs/1/metrics?sinse=2");
    assert_eq!(error(s, &b), (400, "invalid_query".into()));
    assert_eq!(get_json(&server.addr, "/api/runs").as_array().map(Vec::len), Some(1), "only the JSON one ran");
}

/// Stop is honoured within one rollout step: a run whose first rollout is long (64 envs ×
/// 65,536 steps) and is stopped while it runs (its first rollout frame stored, no update
/// yet) ends `stopped` before that rollout's update, so no update is ever reported
/// (checked between updates, it would report one).
#[test]
fn stop_ends_a_run_inside_a_long_rollout() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let spec = json!({"envs": 64, "steps": 65536, "total_steps": 4194304, "device": "cpu", "ppo": {"minibatches": 64}});
    let id = launch(&server.addr, spec);
    wait_for(&server.addr, id, &["running"]);
    // Into the rollout: a frame of it is stored (frames come from inside the rollout).
    let start = Instant::now();
    loop {
        let events = get_json(&server.addr, &format!("/api/runs/{id}/events?limit=1000"));
        let kinds: Vec<&str> = events.as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
        assert!(!kinds.contains(&"metrics"), "an update before the stop: {kinds:?}");
        if kinds.contains(&"rollout") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no rollout frame: {kinds:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, body) = http(&server.addr, "POST", &format!("/api/runs/{id}/stop"), &[AUTH], b"");
    assert_eq!(status, 200, "{body}");
    wait_for(&server.addr, id, &["stopped"]);
    let metrics = get_json(&server.addr, &format!("/api/runs/{id}/metrics"));
    assert_eq!(metrics.as_array().map(Vec::len), Some(0), "stopped before the rollout's update: {metrics}");
}

/// A run is in the store before its `201 Created`: killed at once after the answer, the
/// server lists it after a restart (the store's writer commits every 250 ms otherwise).
#[test]
fn a_launched_run_is_stored_before_the_answer() {
    let data = tempfile::tempdir().unwrap();
    let mut server = start(data.path(), &[]);
    let id = launch(&server.addr, json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"}));
    unsafe { libc::kill(server.child.id() as i32, libc::SIGKILL) };
    let _ = server.child.wait();
    let again = start(data.path(), &[]);
    let runs = get_json(&again.addr, "/api/runs");
    let run = runs.as_array().unwrap().iter().find(|r| r["id"] == id);
    assert!(run.is_some_and(|r| r["spec"]["envs"] == 8), "run {id} is listed after the crash: {runs}");
}

/// Reads a run's WebSocket for `secs` seconds (or until its final status); returns what came.
async fn watch(addr: &str, query: &str, secs: f64) -> Vec<Value> {
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/api/ws?{query}")).await.unwrap();
    let mut got = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs_f64(secs);
    while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(until, ws.next()).await {
        if let tokio_tungstenite::tungstenite::Message::Text(text) = msg {
            got.push(serde_json::from_str::<Value>(&text).unwrap());
        }
    }
    got
}

fn frames_stored(addr: &str, id: u64) -> usize {
    let history = get_json(addr, &format!("/api/runs/{id}/events"));
    history.as_array().unwrap().iter().filter(|e| e["kind"] == "rollout").count()
}

/// What is stored does not depend on who watches: a viewer at 30 frames a second gets
/// them live (not numbered), while the history keeps one a second, as without a viewer.
#[test]
fn a_viewer_does_not_change_what_is_stored() {
    let data = tempfile::tempdir().unwrap();
    // Finished runs keep every stored frame here (at most one a second anyway).
    let server = start(data.path(), &["--finished-frames-per-minute", "60"]);
    let id = launch(&server.addr, json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"}));
    wait_for(&server.addr, id, &["running"]);
    let got = runtime().block_on(watch(&server.addr, &format!("run={id}&fps=30"), 3.0));
    let (status, body) = http(&server.addr, "POST", &format!("/api/runs/{id}/stop"), &[AUTH], b"");
    assert_eq!(status, 200, "{body}");
    wait_for(&server.addr, id, &["stopped"]);
    let live: Vec<&Value> = got.iter().filter(|e| e["kind"] == "rollout").collect();
    assert!(live.iter().any(|e| e["seq"] == 0), "frames the history does not keep are not numbered");
    let metrics = get_json(&server.addr, &format!("/api/runs/{id}/metrics"));
    let wall_s = metrics.as_array().unwrap().last().unwrap()["metrics"]["wall_s"].as_f64().unwrap();
    let stored = frames_stored(&server.addr, id);
    eprintln!("{} frames live in 3 s; {stored} stored over {wall_s:.1} s", live.len());
    assert!(stored as f64 <= wall_s + 2.0, "one a second at most: {stored} over {wall_s:.1} s");
    assert!(live.len() > stored, "the viewer had frames at its own rate: {} live, {stored} stored", live.len());
    let too_fast =
        runtime().block_on(tokio_tungstenite::connect_async(format!("ws://{}/api/ws?run={id}&fps=61", server.addr)));
    match too_fast {
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => assert_eq!(res.status(), 400),
        other => panic!("fps over 60 is refused: {other:?}"),
    }
    let (s, b) = get(&server.addr, &format!("/api/ws?run={id}"));
    assert!(s == 400 && b.contains("not_websocket"), "a plain GET gets the JSON error: {s} {b}");
}

/// A live run keeps a bounded window of events in memory; older ones come from the store.
/// Clients reading the whole history in a loop while it runs get every event, in order,
/// and the run ends well.
#[test]
fn the_history_of_a_live_run_is_whole_while_clients_hammer_it() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &["--finished-frames-per-minute", "0"]);
    // 2,100 updates of 8 × 16 steps: over 4,200 events, more than a live run keeps in memory.
    let id = launch(&server.addr, json!({"envs": 8, "steps": 16, "total_steps": 268_800, "device": "cpu"}));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (addr, done) = (server.addr.clone(), std::sync::Arc::clone(&done));
            std::thread::spawn(move || {
                let mut longest = 0;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    let events = get_json(&addr, &format!("/api/runs/{id}/events"));
                    let events = events.as_array().unwrap();
                    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
                    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in order, once each");
                    // Every update's metrics, none missing (frames may be thinned once it ends).
                    let updates: Vec<u64> = events
                        .iter()
                        .filter(|e| e["kind"] == "metrics")
                        .map(|e| e["metrics"]["update"].as_u64().unwrap())
                        .collect();
                    let whole = updates.iter().enumerate().all(|(i, &u)| u == i as u64 + 1);
                    assert!(whole, "metrics of updates 1 to {} with none missing", updates.len());
                    longest = longest.max(seqs.len());
                }
                longest
            })
        })
        .collect();
    let run = wait_for(&server.addr, id, &["finished"]);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let longest = readers.into_iter().map(|r| r.join().unwrap()).max().unwrap();
    assert!(run["events"].as_u64().unwrap() > 4200, "{run}");
    eprintln!("the readers saw up to {longest} events while the run was live");
    let history = get_json(&server.addr, &format!("/api/runs/{id}/events"));
    let history = history.as_array().unwrap();
    assert_eq!(history.iter().filter(|e| e["kind"] == "metrics").count(), 2100, "every metric stored");
    assert_eq!(history.iter().filter(|e| e["kind"] == "rollout").count(), 0, "frames thinned to none (rate 0)");
    assert_eq!(run["dropped"].as_u64().unwrap_or(0), 0, "nothing dropped at this pace: {run}");
}

/// The history pages, the compare view's summary, pruning on request and the store's size.
#[test]
fn pages_summaries_and_pruning() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let ids: Vec<u64> = (0..3).map(|_| launch(&server.addr, small_run())).collect();
    for &id in &ids {
        wait_for(&server.addr, id, &["finished"]);
    }
    let page = get_json(&server.addr, "/api/runs?limit=2");
    let page_ids: Vec<u64> = page.as_array().unwrap().iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(page_ids, [ids[2], ids[1]], "the newest first");
    let rest = get_json(&server.addr, &format!("/api/runs?before={}&limit=2", ids[1]));
    assert_eq!(rest.as_array().unwrap().iter().map(|r| r["id"].as_u64().unwrap()).collect::<Vec<_>>(), [ids[0]]);
    let (s, b) = get(&server.addr, "/api/runs?limit=0");
    assert!(s == 400 && b.contains("\"limit\""), "{s} {b}");

    let summary = get_json(&server.addr, &format!("/api/runs/{}/summary", ids[0]));
    let metrics = get_json(&server.addr, &format!("/api/runs/{}/metrics", ids[0]));
    assert_eq!(summary["last"], metrics.as_array().unwrap().last().unwrap()["metrics"], "the last update");
    assert_eq!(summary["info"]["status"], "finished");
    assert!(summary["total"]["wall_s"].as_f64().unwrap() > 0.0 && summary["report"]["rows"].is_array());
    assert_eq!(get_json(&server.addr, &format!("/api/runs/{}/summary", ids[0])), summary, "the same when cached");
    assert_eq!(get(&server.addr, "/api/runs/999/summary").0, 404);

    let size = get_json(&server.addr, "/api/system")["store_bytes"].as_u64().unwrap();
    assert!(size > 0);
    let live = launch(&server.addr, json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"}));
    wait_for(&server.addr, live, &["running"]);
    let prune = |token: &[(&str, &str)], body: &str| http(&server.addr, "POST", "/api/prune", token, body.as_bytes());
    assert_eq!(prune(&[], r#"{"older_than_days": 0}"#).0, 401, "pruning needs the token");
    let (s, b) = prune(&[AUTH], r#"{"older_than_days": -1}"#);
    assert!(s == 400 && b.contains("older_than_days"), "{s} {b}");
    let (s, b) = prune(&[AUTH], r#"{"older_than_days": 30}"#);
    assert_eq!((s, serde_json::from_str::<Value>(&b).unwrap()["pruned"].clone()), (200, json!([])), "none that old");
    let (s, b) = prune(&[AUTH], r#"{"older_than_days": 0}"#);
    assert_eq!(s, 200, "{b}");
    let pruned: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(pruned["pruned"], json!(ids), "the ended runs, never the live one");
    let left: Vec<u64> =
        get_json(&server.addr, "/api/runs").as_array().unwrap().iter().map(|r| r["id"].as_u64().unwrap()).collect();
    assert_eq!(left, [live]);
    assert_eq!(get(&server.addr, &format!("/api/runs/{}/events", ids[0])).0, 404);
    http(&server.addr, "POST", &format!("/api/runs/{live}/stop"), &[AUTH], b"");
    wait_for(&server.addr, live, &["stopped"]);

    // The command line prunes beside a serving lab.
    let out = run(hotlab().args(["prune", "--older-than-days", "0", "--json", "--data-dir"]).arg(data.path()));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(last_json(&out)["pruned"], json!([live]));
    let out = run(hotlab().args(["prune", "--older-than-days", "x", "--data-dir"]).arg(data.path()));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// `/api/auth` answers whether a token is right, so it is rate-limited per client: a burst
/// is answered, then 429 with Retry-After, while another address is still answered.
#[test]
fn token_checks_are_rate_limited_per_client() {
    let data = tempfile::tempdir().unwrap();
    // No check comes back during the test, however slow the machine (at the default rate
    // one a second would, between the burst's end and the wrong-token POST below).
    let server = start(data.path(), &["--auth-checks-per-second", "0"]);
    let mut limited = None;
    for i in 0..200 {
        let (status, body) = get(&server.addr, &format!("/api/auth?token=guess{i:012}"));
        if status == 429 {
            limited = Some((i, body));
            break;
        }
        assert_eq!(status, 200, "{body}");
    }
    let (after, body) = limited.expect("a client is limited within 200 checks");
    assert_eq!(after, 60, "the burst, then none");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "rate_limited");
    assert!(v["error"]["message"].as_str().unwrap().contains("gives none back"), "{v}");
    // A wrong token on a change spends from the same allowance.
    let wrong = [("Authorization", "Bearer wrong-token-0000000000")];
    assert_eq!(http(&server.addr, "POST", "/api/runs", &wrong, small_run().to_string().as_bytes()).0, 429);
    // Another client (a second loopback address) is not affected.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&"127.0.0.2:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    socket.connect(&server.addr.parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    let mut s: TcpStream = socket.into();
    write!(s, "GET /api/auth HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", server.addr).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
}

/// The processes whose parent is `parent` and whose command line has `word`.
fn children(parent: u32, word: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // The fields after the command's closing parenthesis: state, then the parent's pid.
            let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains(word)
        })
        .collect()
}

fn run_process_of(server: &Server) -> u32 {
    let start = Instant::now();
    loop {
        if let [pid] = children(server.child.id(), "run-worker")[..] {
            return pid;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the run has a process of its own");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A run trains in a process of its own, which the kernel is told to pick first when
/// memory runs out: killed as the out-of-memory killer would, the run ends `failed`
/// saying so, and the lab stays up and runs the next one. A lab killed takes its runs'
/// processes with it.
#[test]
fn a_run_whose_process_is_killed_fails_and_the_lab_stays_up() {
    let data = tempfile::tempdir().unwrap();
    let mut server = start(data.path(), &[]);
    let id = launch(&server.addr, json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"}));
    wait_for(&server.addr, id, &["running"]);
    let pid = run_process_of(&server);
    let adj = std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).unwrap();
    assert_eq!(adj.trim(), "1000", "the kernel's first pick when memory runs out");
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let run = wait_for(&server.addr, id, &["failed"]);
    let message = run["message"].as_str().unwrap();
    assert!(message.contains("SIGKILL") && message.contains("out-of-memory"), "{message}");
    let next = launch(&server.addr, small_run());
    assert_eq!(wait_for(&server.addr, next, &["finished", "failed"])["status"], "finished");

    let last = launch(&server.addr, json!({"envs": 8, "total_steps": 50_000_000, "device": "cpu"}));
    wait_for(&server.addr, last, &["running"]);
    let pid = run_process_of(&server);
    unsafe { libc::kill(server.child.id() as i32, libc::SIGKILL) };
    let _ = server.child.wait();
    let start = Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z"));
        if zombie {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the run's process ends with the lab");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `--run-memory`: each run's process has a memory limit of its own (a memory cgroup). A
/// run whose rollout alone is past it is killed by the kernel's out-of-memory killer, not
/// by the lab, and fails naming the signal and the limit; the lab stays up, a run within
/// the limit finishes, and the runs' cgroups go with them. A limit of 0 is refused.
#[test]
fn a_run_past_its_memory_limit_is_killed_by_the_kernel_alone_and_fails_saying_so() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &["--run-memory", "1024"]);
    // 8,192 envs × 4,096 steps: the rollout's buffers are over 1.5 GB.
    let big = json!({"envs": 8192, "steps": 4096, "total_steps": 50_000_000, "device": "cpu"});
    let id = launch(&server.addr, big);
    let ended = wait_for(&server.addr, id, &["failed", "finished"]);
    let message = ended["message"].as_str().unwrap();
    assert!(
        message.contains("SIGKILL") && message.contains("out-of-memory killer at its memory limit of 1024 MiB"),
        "{message}"
    );
    let next = launch(&server.addr, small_run());
    assert_eq!(wait_for(&server.addr, next, &["finished", "failed"])["status"], "finished");
    // The lab's own cgroup is left, empty of runs (v1's memory hierarchy, or v2's).
    let pid = server.child.id();
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let dir = match own.lines().find_map(|l| l.split_once(":memory:")) {
        Some((_, path)) => std::path::Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/')),
        None => std::path::Path::new("/sys/fs/cgroup")
            .join(own.lines().find_map(|l| l.strip_prefix("0::")).unwrap().trim_start_matches('/')),
    }
    .join(format!("hotlab-{pid}"));
    let runs = || std::fs::read_dir(&dir).unwrap().flatten().filter(|e| e.path().is_dir()).count();
    let start = Instant::now();
    while runs() > 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the runs' cgroups stay in {}", dir.display());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);
    let _ = std::fs::remove_dir(&dir);

    let out = run(hotlab().args(["serve", "--run-memory", "0", "--port", "0"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--run-memory"), "{}", stderr(&out));
}

/// `hotlab bench soak` at the smallest budget: a real lab, a run, viewers and a reader;
/// its report has both phases, memory samples, stored events and a stop time (the figures
/// themselves are a benchmark's, not asserted).
#[test]
fn the_soak_benchmark_reports_both_phases() {
    let out = run(hotlab().args([
        "bench",
        "soak",
        "--viewers",
        "3",
        "--readers",
        "1",
        "--baseline-s",
        "1",
        "--minutes",
        "0.03",
        "--sample-s",
        "0.5",
        "--json",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let r = last_json(&out);
    let phases: Vec<&str> = r["phases"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(phases, ["unwatched", "watched"]);
    assert!(r["phases"].as_array().unwrap().iter().all(|p| p["rss_mib_max"].as_f64().unwrap() > 0.0));
    // The memory slope is reported per phase (its value is the benchmark's, never asserted).
    // Each phase has a sample at its start and its end, so the whole phase always has one.
    for p in r["phases"].as_array().unwrap() {
        assert!(p["rss_mib_per_min"].is_f64(), "{r}");
        assert!(p["rss_mib_per_min_second_half"].is_f64() || p["rss_mib_per_min_second_half"].is_null(), "{r}");
    }
    assert!(r["rss_mib"].as_array().unwrap().len() >= 3);
    assert!(r["events_stored"].as_u64().unwrap() > 0 && r["events_dropped"].is_u64());
    assert!(r["viewer_messages"].as_u64().unwrap() > 0, "the viewers were sent the history: {r}");
    assert!(r["stop_s"].as_f64().unwrap() >= 0.0);
    assert_eq!(r["place"], "local");
    // On a worker: relayed through the lab, and the lab killed and restarted once.
    let out = run(hotlab().args(["bench", "soak", "--on-worker", "--viewers", "3", "--readers", "0"]).args([
        "--baseline-s",
        "1",
        "--minutes",
        "0.02",
        "--json",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let r = last_json(&out);
    assert_eq!(r["place"], "worker");
    assert!(r["first_update_s"].as_f64().unwrap() > 0.0 && r["viewer_messages_per_s"].as_f64().unwrap() > 0.0, "{r}");
    let (back, next) = (r["reconnect_s"].as_f64().unwrap(), r["resumed_update_s"].as_f64().unwrap());
    assert!(back > 0.0 && next >= back, "{r}");
    let bad = run(hotlab().args(["bench", "soak", "--minutes", "0"]));
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("--minutes"));
    let bad = run(hotlab().args(["serve", "--finished-frames-per-minute", "nan"]));
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("--finished-frames-per-minute"));
    for value in ["-1", "nan", "1001"] {
        let bad = run(hotlab().args(["serve", &format!("--auth-checks-per-second={value}")]));
        assert_eq!(bad.status.code(), Some(2), "{value}: {}", stderr(&bad));
        assert!(stderr(&bad).contains("--auth-checks-per-second") && stderr(&bad).contains("0 to 1000"), "{value}");
    }
}

fn wait_for_audit(addr: &str, id: u64, statuses: &[&str]) -> Value {
    let start = Instant::now();
    loop {
        let a = get_json(addr, &format!("/api/audits/{id}"));
        if statuses.contains(&a["status"].as_str().unwrap()) {
            return a;
        }
        assert!(start.elapsed() < Duration::from_secs(180), "audit {id} still {}: {a}", a["status"]);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue 23: an audit launched on a run and a lesson run through the lab as ordinary runs,
/// in the plan's order; their verdicts are stored and survive a restart, and one that was
/// live when the server died is marked interrupted. Bad requests name the field.
#[test]
fn audits_and_lessons_run_in_the_lab_and_are_kept() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let addr = server.addr.clone();
    let run = launch(&addr, small_run());
    wait_for(&addr, run, &["finished"]);
    let audit_of = format!("/api/runs/{run}/audit");

    let (status, _) = http(&addr, "POST", &audit_of, &[], br#"{"changes": ["lr=0.001"]}"#);
    assert_eq!(status, 401, "the token is needed");
    for (body, field) in [
        (json!({"changes": ["speed=1"]}), "change"),
        (json!({"changes": ["backend"]}), "change"),
        (json!({"changes": ["envs=8"]}), "envs"),
        (json!({"changes": ["envs=0"]}), "envs"),
        (json!({"changes": ["lr=0.001"], "repeats": 1}), "repeats"),
        (json!({"changes": []}), "change"),
        (json!({"changes": ["lr=0.001"], "seconds": -1}), "seconds"),
        (json!({"changes": ["lr=0.001"], "colour": "red"}), "body"),
    ] {
        let (status, e) = post_json(&addr, &audit_of, body.clone());
        assert_eq!((status, e["error"]["field"].as_str()), (400, Some(field)), "{body}: {e}");
    }
    assert_eq!(post_json(&addr, "/api/runs/999/audit", json!({"changes": ["lr=0.001"]})).0, 404);
    assert_eq!(post_json(&addr, "/api/lessons/nope", json!({})).0, 404);
    let (status, e) = post_json(&addr, "/api/lessons/batch-size", json!({"settings": {"envs": "0"}}));
    assert_eq!((status, e["error"]["field"].as_str()), (400, Some("envs")), "{e}");

    let ask = json!({"changes": ["backend=threads"], "repeats": 2, "seconds": 0.3});
    let (status, audit) = post_json(&addr, &audit_of, ask);
    assert_eq!(status, 201, "{audit}");
    let id = audit["id"].as_u64().unwrap();
    let (status, lesson) =
        post_json(&addr, "/api/lessons/batch-size", json!({"repeats": 2, "seconds": 0.3, "settings": {"envs": "2"}}));
    assert_eq!(status, 201, "{lesson}");
    let lesson_id = lesson["id"].as_u64().unwrap();

    let audit = wait_for_audit(&addr, id, &["finished", "failed"]);
    assert_eq!(audit["status"], "finished", "{audit}");
    let runs = audit["runs"].as_array().unwrap();
    let settings: Vec<&str> = runs.iter().map(|r| r["setting"].as_str().unwrap()).collect();
    assert_eq!(settings, ["baseline", "baseline", "backend=threads", "baseline"].repeat(2));
    for r in runs {
        assert!(r["measured"]["sps"].as_f64().unwrap() > 0.0, "{r}");
        let lab_run = get_json(&addr, &format!("/api/runs/{}", r["run"]));
        assert_eq!((lab_run["status"].as_str(), lab_run["spec"]["seconds"].as_f64()), (Some("finished"), Some(0.3)));
    }
    let change = &audit["report"]["changes"][0];
    assert_eq!(change["change"], "backend=threads", "{audit}");
    // Which verdict comes out is this machine's noise's to say; that the report is made of
    // these runs, in the schedule's pairs, and its verdict of its intervals, is the lab's.
    let sps: Vec<f64> = runs.iter().map(|r| r["measured"]["sps"].as_f64().unwrap()).collect();
    let noise = hotlab_report::audit::interval(&sps.chunks(4).map(|r| r[1] / r[0]).collect::<Vec<_>>()).unwrap();
    let ratio = hotlab_report::audit::interval(&sps.chunks(4).map(|r| r[2] / r[1]).collect::<Vec<_>>()).unwrap();
    let stored = |v: &Value| serde_json::from_value::<hotlab_report::audit::Interval>(v.clone()).unwrap();
    for (mine, theirs) in [(noise, stored(&audit["report"]["noise"])), (ratio, stored(&change["ratio"]))] {
        assert!(close(mine.low, theirs.low) && close(mine.high, theirs.high), "{mine:?} vs {theirs:?}: {audit}");
    }
    assert_verdicts_follow(&audit["report"]);
    assert_eq!(get_json(&addr, &format!("/api/audits?run={run}"))[0]["id"], id);

    let lesson = wait_for_audit(&addr, lesson_id, &["finished", "failed"]);
    assert_eq!(
        (lesson["status"].as_str(), lesson["lesson"].as_str()),
        (Some("finished"), Some("batch-size")),
        "{lesson}"
    );
    assert_eq!(lesson["params"]["settings"]["envs"], "2");
    assert_eq!(lesson["signature"][0]["value"], 0.5, "two envs: half a forward per env step: {lesson}");
    assert_eq!(lesson["shows"], true, "{lesson}");
    assert_eq!(get_json(&addr, "/api/audits?lesson=batch-size")[0]["id"], lesson_id);
    assert_eq!(get(&addr, "/api/audits?lesson=nope").0, 404);
    assert!(get_json(&addr, "/api/lessons").as_array().unwrap().iter().any(|l| l["id"] == "op-dispatch"));

    // A long audit, live when the server dies.
    let (status, live) = post_json(&addr, &audit_of, json!({"changes": ["lr=0.001"], "seconds": 30}));
    assert_eq!(status, 201, "{live}");
    let live = live["id"].as_u64().unwrap();
    wait_for_audit(&addr, live, &["running"]);
    drop(server);

    let server = start(data.path(), &[]);
    let addr = server.addr.clone();
    let kept = get_json(&addr, &format!("/api/audits/{id}"));
    assert_eq!(kept, audit, "stored as it ended");
    assert_eq!(get_json(&addr, &format!("/api/audits/{lesson_id}"))["shows"], true);
    let interrupted = get_json(&addr, &format!("/api/audits/{live}"));
    assert_eq!(interrupted["status"], "interrupted", "{interrupted}");
    assert_eq!(post_json(&addr, &format!("/api/audits/{live}/stop"), json!({})).0, 409);
}

/// Issue 43: the lab checks its lessons on its machine (`hotlab lesson check`, a process per
/// lesson), one check at a time, and keeps what they found across a restart; a lesson that
/// needs a GPU is skipped saying so; bad requests name the field.
#[test]
fn lesson_checks_run_on_the_lab_machine_and_are_kept() {
    let data = tempfile::tempdir().unwrap();
    let server = start(data.path(), &[]);
    let addr = server.addr.clone();
    let empty = get_json(&addr, "/api/lessons/checks");
    assert_eq!((empty["checks"].as_array().unwrap().len(), &empty["checked_ms"]), (0, &Value::Null), "{empty}");
    assert!(!empty["machine"].as_str().unwrap().is_empty(), "{empty}");

    let (status, _) = http(&addr, "POST", "/api/lessons/checks", &[], b"{}");
    assert_eq!(status, 401, "a viewer cannot start a check");
    for (body, field) in [
        (json!({"lessons": ["no-such"]}), "lessons"),
        (json!({"lessons": []}), "lessons"),
        (json!({"seconds": 0}), "seconds"),
        (json!({"seconds": 61}), "seconds"),
        (json!({"secs": 1}), "body"),
    ] {
        let (status, e) = post_json(&addr, "/api/lessons/checks", body.clone());
        assert_eq!((status, e["error"]["field"].as_str()), (400, Some(field)), "{body}: {e}");
    }

    let ask = json!({"lessons": ["per-item-sync", "replay-copies"], "seconds": 0.2});
    let (status, started) = post_json(&addr, "/api/lessons/checks", ask.clone());
    assert_eq!((status, started["running"].as_str(), started["left"].as_u64()), (202, Some("per-item-sync"), Some(1)));
    let (status, busy) = post_json(&addr, "/api/lessons/checks", ask);
    assert_eq!((status, busy["error"]["code"].as_str()), (409, Some("check_running")), "one at a time: {busy}");
    let began = Instant::now();
    let done = loop {
        let c = get_json(&addr, "/api/lessons/checks");
        if c["running"].is_null() {
            break c;
        }
        assert!(began.elapsed() < Duration::from_secs(120), "still checking: {c}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let checks = done["checks"].as_array().unwrap();
    let lessons: Vec<&str> = checks.iter().map(|c| c["lesson"].as_str().unwrap()).collect();
    assert_eq!(lessons, ["per-item-sync", "replay-copies"], "in catalogue order: {done}");
    let sync = &checks[0];
    assert!(sync.get("error").is_none() && sync.get("skipped").is_none(), "{sync}");
    assert_eq!(sync["figures"].as_array().unwrap().len(), 2, "the slow setting and its fix: {sync}");
    // A sync per action element on the slow setting, none of them on the fix: it shows anywhere.
    assert_eq!(sync["shows"], true, "{sync}");
    if !get_json(&addr, "/api/system")["cuda_available"].as_bool().unwrap() {
        let gpu = &checks[1];
        assert!(gpu["skipped"].as_str().unwrap().contains("needs a CUDA GPU"), "{gpu}");
    }
    assert!(done["checked_ms"].as_u64().is_some());
    drop(server);

    // The file keeps them: a new server on the same data dir shows the same checks.
    assert!(data.path().join("lesson-checks.json").exists());
    let again = start(data.path(), &[]);
    let kept = get_json(&again.addr, "/api/lessons/checks");
    assert_eq!(kept["checks"], done["checks"]);
    drop(again);
    // A damaged file is set aside, not read as checks nor lost.
    std::fs::write(data.path().join("lesson-checks.json"), b"{not json").unwrap();
    let third = start(data.path(), &[]);
    assert_eq!(get_json(&third.addr, "/api/lessons/checks")["checks"], json!([]));
    assert!(data.path().join("lesson-checks.json.bad").exists());
}

/// `GET /api/knobs/gym_id/suggestions`: Gymnasium's ids by family as the lab's Python
/// sees them (the launch form's suggestions): MuJoCo's and Atari's installed by the test set-up,
/// Box2D's missing and named with the command that adds it. A lab whose Python cannot run
/// says so, naming it; a knob without suggestions is refused, naming the ones with them.
#[test]
fn the_lab_lists_the_gymnasium_ids_its_python_can_make() {
    let data = tempfile::tempdir().unwrap();
    let py = python();
    let server = start_with_env(data.path(), 0, &[], &[("HOTLAB_PYTHON", py.to_str().unwrap())]);
    let envs = get_json(&server.addr, "/api/knobs/gym_id/suggestions");
    assert_eq!(envs["error"], Value::Null, "{envs}");
    assert_eq!((&envs["knob"], &envs["unit"]), (&json!("gym_id"), &json!("ids")), "{envs}");
    assert!(envs["source"].as_str().unwrap().starts_with("Gymnasium 1."), "{envs}");
    let family = |name: &str| {
        envs["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["group"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name}: {envs}"))
    };
    let ids =
        |f: &Value| f["values"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_string()).collect::<Vec<_>>();
    let mujoco = family("mujoco");
    assert_eq!(mujoco["missing"], Value::Null, "{mujoco}");
    assert!(
        ids(&mujoco).iter().any(|i| i == "HalfCheetah-v5") && ids(&mujoco).iter().any(|i| i == "Hopper-v4"),
        "{mujoco}"
    );
    assert!(!ids(&mujoco).iter().any(|i| i.ends_with("-v2")), "mujoco-py's placeholders are left out: {mujoco}");
    assert!(ids(&family("classic_control")).iter().any(|i| i == "CartPole-v1"));
    // Atari's, registered by ale-py (installed by the test set-up).
    let atari = family("ale_py");
    assert_eq!(atari["missing"], Value::Null, "{atari}");
    assert!(ids(&atari).iter().any(|i| i == "ALE/Breakout-v5"), "{atari}");
    let box2d = family("box2d");
    if box2d["missing"] != Value::Null {
        assert!(box2d["install"].as_str().unwrap().contains("gymnasium[box2d]"), "{box2d}");
    }
    let (status, body) = get(&server.addr, "/api/knobs/hidden/suggestions");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("'hidden' has no suggestions; allowed: gym_id, envpool_id"), "{body}");
    drop(server);

    // EnvPool's ids, by the module that makes them, from the EnvPool venv's Python.
    let data = tempfile::tempdir().unwrap();
    let pool = envpool_python();
    let server = start_with_env(data.path(), 0, &[], &[("HOTLAB_ENVPOOL_PYTHON", pool.to_str().unwrap())]);
    let envs = get_json(&server.addr, "/api/knobs/envpool_id/suggestions");
    assert_eq!(envs["error"], Value::Null, "{envs}");
    assert!(envs["source"].as_str().unwrap().starts_with("EnvPool 1.2.5 in"), "{envs}");
    let atari = envs["groups"].as_array().unwrap().iter().find(|g| g["group"] == "atari").cloned();
    let atari = atari.unwrap_or_else(|| panic!("{envs}"));
    assert!(atari["values"].as_array().unwrap().contains(&json!("Breakout-v5")), "{atari}");
    drop(server);

    let data = tempfile::tempdir().unwrap();
    let server = start_with_env(data.path(), 0, &[], &[("HOTLAB_PYTHON", "/nonexistent/python")]);
    let envs = get_json(&server.addr, "/api/knobs/gym_id/suggestions");
    assert!(envs["error"].as_str().unwrap().contains("/nonexistent/python"), "{envs}");
    assert_eq!(envs["groups"], json!([]));
}

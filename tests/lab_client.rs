//! A client of a real `hotlab serve` for the integration tests: the server as a child
//! process, plain HTTP/1.1 for REST, tokio-tungstenite for the WebSocket.
#![allow(dead_code)]

use crate::common::hotlab;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub const TOKEN: &str = "test-token-12345678";

pub struct Server {
    pub child: Child,
    pub addr: String,
    /// What the lab wrote to stderr so far (kept for a failure's message).
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
    /// The URL it printed.
    pub url: String,
}

impl Server {
    /// The lab's stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start(data: &std::path::Path, extra: &[&str]) -> Server {
    start_on(data, 0, extra)
}

/// [`start`] on a given port (0: a free one).
pub fn start_on(data: &std::path::Path, port: u16, extra: &[&str]) -> Server {
    start_with_env(data, port, extra, &[])
}

/// [`start_on`] with environment variables of its own.
pub fn start_with_env(data: &std::path::Path, port: u16, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let mut cmd = hotlab();
    cmd.args(serve_args(data, port)).args(extra).envs(env.iter().copied());
    let server = serve_from(cmd);
    assert!(server.url.contains(&format!("token={TOKEN}")), "the URL carries the token: {}", server.url);
    server
}

/// `hotlab serve`'s arguments for a test's lab on 127.0.0.1 with [`TOKEN`].
pub fn serve_args(data: &std::path::Path, port: u16) -> Vec<String> {
    let port = port.to_string();
    let args = ["serve", "--host", "127.0.0.1", "--port", &port, "--token", TOKEN, "--data-dir"];
    args.into_iter().map(String::from).chain([data.display().to_string()]).collect()
}

/// A lab started by `cmd` (which ends in `hotlab serve`, the same process: its pid is the
/// lab's), once it has printed its URL.
pub fn serve_from(mut cmd: std::process::Command) -> Server {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    // Its stderr kept as it comes, so that a lab that refuses to start says why.
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (mut err, kept) = (BufReader::new(child.stderr.take().unwrap()), std::sync::Arc::clone(&stderr));
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        while err.read_line(&mut line).is_ok_and(|n| n > 0) {
            if let Ok(mut all) = kept.lock() {
                all.push_str(&line);
            }
            line.clear();
        }
    });
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    // Keep reading, so that the server's later output never meets a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let Some(addr) = line.split("http://").nth(1).and_then(|r| r.split('/').next()).map(str::to_string) else {
        // No URL: the lab ended (or printed something else); its stderr says why.
        let status = child.wait().ok();
        let _ = reader.join();
        let err = stderr.lock().map(|s| s.clone()).unwrap_or_default();
        panic!("hotlab serve printed no URL (its first line: {line:?}, exit {status:?}); its stderr:\n{err}");
    };
    Server { child, addr, stderr, url: line.trim().to_string() }
}

/// One HTTP/1.1 request: (status, body).
pub fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    try_http(addr, method, path, headers, body).unwrap_or_else(|| {
        // A connection closed with no answer is a handler that panicked (axum drops it): a
        // failure, never a status a caller could take for "below 500".
        panic!(
            "{method} {path} on {addr}: no HTTP answer (refused, closed by a panicking handler, or none within 60 s)"
        )
    })
}

/// One HTTP/1.1 request: (status, body), or None when nothing answered (the connection
/// refused, or closed with no status line).
pub fn try_http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    // A handler that never answers fails the test (as no answer) instead of hanging it.
    s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
    // Host and Content-Type as a client of this lab sends them, unless the test gives its own.
    let given = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !given("host") {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    if !given("content-type") {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let status = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok())?;
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

pub fn get(addr: &str, path: &str) -> (u16, String) {
    http(addr, "GET", path, &[], b"")
}

pub fn get_json(addr: &str, path: &str) -> Value {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

pub const AUTH: (&str, &str) = ("Authorization", "Bearer test-token-12345678");

/// A POST with the operator's token, its answer as JSON.
pub fn post_json(addr: &str, path: &str, body: Value) -> (u16, Value) {
    let (status, text) = http(addr, "POST", path, &[AUTH], body.to_string().as_bytes());
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {path}: {e}: {text}")))
}

pub fn launch(addr: &str, spec: Value) -> u64 {
    let (status, body) = http(addr, "POST", "/api/runs", &[AUTH], spec.to_string().as_bytes());
    assert_eq!(status, 201, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["id"].as_u64().unwrap()
}

pub fn wait_for(addr: &str, id: u64, statuses: &[&str]) -> Value {
    let start = Instant::now();
    loop {
        let run = get_json(addr, &format!("/api/runs/{id}"));
        if statuses.contains(&run["status"].as_str().unwrap()) {
            return run;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "run {id} still {}", run["status"]);
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn small_run() -> Value {
    json!({"env": "cartpole", "envs": 8, "steps": 128, "total_steps": 20480, "device": "cpu", "backend": "vectorized"})
}

/// Reads a WebSocket until the run's final status (or the socket closes).
pub async fn follow(addr: &str, query: &str) -> Vec<Value> {
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/api/ws?{query}")).await.unwrap();
    let mut got = Vec::new();
    while let Some(Ok(msg)) = ws.next().await {
        let tokio_tungstenite::tungstenite::Message::Text(text) = msg else { continue };
        let e: Value = serde_json::from_str(&text).unwrap();
        let done = e["kind"] == "status" && !matches!(e["status"].as_str(), Some("queued" | "running"));
        got.push(e);
        if done {
            break;
        }
    }
    got
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

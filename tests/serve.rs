//! `hotlab serve` answers `/api/system` and serves the page.

mod common;
mod lab_client;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;

/// The lab, and its data dir (removed after it).
struct Server {
    lab: lab_client::Server,
    _data: tempfile::TempDir,
}

impl std::ops::Deref for Server {
    type Target = lab_client::Server;
    fn deref(&self) -> &lab_client::Server {
        &self.lab
    }
}

fn start(static_dir: &std::path::Path) -> Server {
    let data = tempfile::tempdir().unwrap();
    let mut cmd = hotlab();
    cmd.args(["serve", "--host", "127.0.0.1", "--port", "0", "--static-dir"])
        .arg(static_dir)
        .arg("--data-dir")
        .arg(data.path());
    Server { lab: lab_client::serve_from(cmd), _data: data }
}

/// A plain HTTP/1.1 GET: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

#[test]
fn serves_system_info_and_the_page() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.html"), "<html>hotlab test page</html>").unwrap();
    let server = start(dir.path());

    let (status, body) = get(&server.addr, "/api/system");
    assert_eq!(status, 200);
    let info: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(info["name"], "hotlab");
    assert!(info["torch_version"].as_str().unwrap().starts_with("2.11.0"));

    let (status, body) = get(&server.addr, "/");
    assert_eq!(status, 200);
    assert!(body.contains("hotlab test page"));
    // Client-side routes fall back to the app.
    assert!(get(&server.addr, "/runs/42").1.contains("hotlab test page"));

    let (status, body) = get(&server.addr, "/api/unknown");
    assert_eq!(status, 404);
    let err: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["error"]["code"], "not_found");
}

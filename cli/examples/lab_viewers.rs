//! What watching costs a run: the same run on a real `hotlab serve`, once with no
//! WebSocket viewer and once with N of them, compared by the run's own steps/s (its last
//! metrics point).
//!
//! ```text
//! cargo build --release && cargo run --release --example lab_viewers -- --viewers 200 --repeats 3 --json
//! ```
//!
//! Options: `--viewers N` (200), `--repeats R` (3), `--spec JSON` (a CartPole run of
//! 1M steps on 8 envs), `--hotlab PATH` (the `hotlab` beside this example), `--json`.

use futures_util::StreamExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "lab-viewers-bench";

struct Args {
    viewers: usize,
    repeats: usize,
    spec: Value,
    hotlab: std::path::PathBuf,
    json: bool,
}

fn args() -> Result<Args, String> {
    let beside = std::env::current_exe().ok().and_then(|e| Some(e.parent()?.parent()?.join("hotlab")));
    let mut a = Args {
        viewers: 200,
        repeats: 3,
        spec: json!({"env": "cartpole", "envs": 8, "total_steps": 1_000_000, "device": "cpu"}),
        hotlab: beside.unwrap_or_else(|| "hotlab".into()),
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--viewers" => a.viewers = value()?.parse().map_err(|e| format!("--viewers: {e}"))?,
            "--repeats" => a.repeats = value()?.parse().map_err(|e| format!("--repeats: {e}"))?,
            "--spec" => a.spec = serde_json::from_str(&value()?).map_err(|e| format!("--spec: {e}"))?,
            "--hotlab" => a.hotlab = value()?.into(),
            "--json" => a.json = true,
            other => return Err(format!("unknown option {other}; see the example's doc comment")),
        }
    }
    if a.repeats == 0 {
        return Err("--repeats must be at least 1".into());
    }
    Ok(a)
}

/// One HTTP/1.1 request on a fresh connection; the body of the answer.
async fn http(addr: &str, method: &str, path: &str, body: &str) -> Result<String, String> {
    let mut s = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.map_err(|e| e.to_string())?;
    Ok(raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

async fn watch(addr: String, id: u64) -> usize {
    let Ok((mut ws, _)) = tokio_tungstenite::connect_async(format!("ws://{addr}/api/ws?run={id}")).await else {
        return 0;
    };
    let mut n = 0;
    while let Some(Ok(_)) = ws.next().await {
        n += 1;
    }
    n
}

/// One run with `viewers` watching: (steps/s, events the viewers received in all).
async fn one(addr: &str, spec: &Value, viewers: usize) -> Result<(f64, usize), String> {
    let created: Value =
        serde_json::from_str(&http(addr, "POST", "/api/runs", &spec.to_string()).await?).map_err(|e| e.to_string())?;
    let id = created["id"].as_u64().ok_or(format!("the run was refused: {created}"))?;
    let tasks: Vec<_> = (0..viewers).map(|_| tokio::spawn(watch(addr.to_string(), id))).collect();
    let mut received = 0;
    for t in tasks {
        received += t.await.unwrap_or(0);
    }
    loop {
        let run: Value = serde_json::from_str(&http(addr, "GET", &format!("/api/runs/{id}"), "").await?)
            .map_err(|e| e.to_string())?;
        match run["status"].as_str() {
            Some("finished") => break,
            Some("queued" | "running") => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            other => return Err(format!("run {id} ended {other:?}: {}", run["message"])),
        }
    }
    let metrics: Value = serde_json::from_str(&http(addr, "GET", &format!("/api/runs/{id}/metrics"), "").await?)
        .map_err(|e| e.to_string())?;
    let sps = metrics.as_array().and_then(|m| m.last()).and_then(|e| e["metrics"]["sps"].as_f64());
    Ok((sps.ok_or("the run has no metrics")?, received))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let a = args().unwrap_or_else(|e| {
        eprintln!("lab_viewers: {e}");
        std::process::exit(2)
    });
    let data = std::env::temp_dir().join(format!("hotlab-lab-viewers-{}", std::process::id()));
    let mut server: Child = Command::new(&a.hotlab)
        .args(["serve", "--host", "127.0.0.1", "--port", "0", "--max-runs", "1", "--token", TOKEN, "--data-dir"])
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            eprintln!("lab_viewers: cannot start {} ({e}); build it with `cargo build --release`", a.hotlab.display());
            std::process::exit(2)
        });
    let mut out = BufReader::new(server.stdout.take().expect("piped"));
    let mut line = String::new();
    let _ = out.read_line(&mut line);
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let addr = line.split("http://").nth(1).and_then(|r| r.split('/').next()).unwrap_or("").to_string();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let began = Instant::now();
    let result = rt.block_on(async {
        let (mut alone, mut watched, mut received) = (Vec::new(), Vec::new(), 0);
        for r in 0..a.repeats {
            eprintln!("repeat {}/{}: no viewer, then {} viewers", r + 1, a.repeats, a.viewers);
            alone.push(one(&addr, &a.spec, 0).await?.0);
            let (sps, got) = one(&addr, &a.spec, a.viewers).await?;
            watched.push(sps);
            received += got;
        }
        Ok::<_, String>((alone, watched, received))
    });
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&data);
    let (alone, watched, received) = result.unwrap_or_else(|e| {
        eprintln!("lab_viewers: {e}");
        std::process::exit(1)
    });
    let (m0, m1) = (median(alone.clone()), median(watched.clone()));
    let report = json!({
        "spec": a.spec, "viewers": a.viewers, "repeats": a.repeats,
        "sps_no_viewer": alone, "sps_with_viewers": watched,
        "median_no_viewer": m0, "median_with_viewers": m1, "ratio": m1 / m0,
        "events_received": received, "wall_s": began.elapsed().as_secs_f64(),
    });
    match a.json {
        true => println!("{report}"),
        false => println!(
            "steps/s, median of {}: {m0:.0} with no viewer, {m1:.0} with {} viewers ({:.1} %)",
            a.repeats,
            a.viewers,
            100.0 * m1 / m0
        ),
    }
}

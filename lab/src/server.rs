//! `hotlab serve`: the lab's API ([`crate`]) and the web app's static files.

use anyhow::{Context, Result};
use axum::Router;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower_http::services::{ServeDir, ServeFile};

/// The kernel's send buffer per connection. Linux lets one grow to megabytes, which a
/// viewer on a slow link would see as seconds of stale rollout frames; at this size its
/// stream backs up soon and it gets the newest frame instead (and loopback or a LAN
/// still carries tens of MB/s).
const SEND_BUFFER: usize = 64 * 1024;

/// How the server is set up.
pub struct ServeConfig {
    pub host: String,
    pub port: u16,
    pub static_dir: PathBuf,
    pub data_dir: PathBuf,
    /// The operator token (generated when absent).
    pub token: Option<String>,
    /// Host names besides IP literals and `localhost` that requests may be sent to.
    pub allow_hosts: Vec<String>,
    /// Runs at once on the local machine; 0 = one per GPU, one on a CPU-only machine.
    pub max_runs: usize,
    /// The local machine's name, or None for no local worker (runs go to workers only).
    pub local_worker: Option<String>,
    /// The token workers connect with (generated when absent).
    pub worker_token: Option<String>,
    /// How long a worker may be away before its runs are `interrupted`.
    pub worker_grace: std::time::Duration,
    /// A Ray head's job API (`--ray`): runs placed on the machine `ray` become Ray jobs.
    pub ray: Option<crate::ray::Head>,
    /// Where a Ray job's worker finds this lab (else the address it listens on).
    pub ray_lab_url: Option<String>,
    /// The `hotlab` a Ray job runs (else this binary).
    pub ray_hotlab: Option<String>,
    /// Rollout frames an ended run keeps per minute of its wall time.
    pub finished_frames_per_minute: f64,
    /// Token checks a second a client's allowance comes back at, once its burst is spent.
    pub auth_checks_per_second: f64,
    /// Each local run's process's memory limit in MiB (`--run-memory`), if any.
    pub run_memory: Option<u64>,
    /// What the lab asks of the trainer (the binary's).
    pub trainer: Arc<dyn crate::trainer::Trainer>,
    /// Whether runs may start the commands their specs name (a user's script,
    /// `--env external`): `hotlab serve --allow-scripts`. Off, such runs are refused.
    pub allow_scripts: bool,
}

/// The router: the API, then the single-page app (unknown paths get index.html).
pub fn router(lab: crate::state::Lab, static_dir: &Path, hosts: crate::guard::Hosts) -> Router {
    let index = ServeFile::new(static_dir.join("index.html"));
    let token = Arc::clone(&lab.token);
    crate::router(lab)
        .fallback_service(ServeDir::new(static_dir).fallback(index))
        .layer(axum::middleware::from_fn_with_state(token, crate::auth::cookie_from_query))
        .layer(axum::middleware::from_fn_with_state(Arc::new(hosts), crate::guard::guard))
}

/// Where the web app's files are: `--static-dir`, else `./static`, else next to the
/// repository the binary was built in (`target/release/hotlab` → `static/`).
pub fn find_static_dir(explicit: Option<PathBuf>) -> PathBuf {
    if let Some(dir) = explicit {
        return dir;
    }
    let cwd = PathBuf::from("static");
    if cwd.join("index.html").exists() {
        return cwd;
    }
    let from_exe =
        std::env::current_exe().ok().and_then(|exe| exe.parent()?.parent()?.parent().map(|root| root.join("static")));
    match from_exe {
        Some(dir) if dir.join("index.html").exists() => dir,
        _ => cwd,
    }
}

/// Serves until Ctrl-C. Prints the URL (with the real port when `port` is 0, and the
/// token) first.
pub async fn serve(cfg: ServeConfig) -> Result<()> {
    let static_dir = cfg.static_dir;
    if !static_dir.join("index.html").exists() {
        tracing::warn!(
            "{} has no index.html: the API works, the page does not (build it with `cargo xtask build`)",
            static_dir.display()
        );
    } else if !static_dir.join("pkg").exists() {
        tracing::warn!("{}/pkg is missing: build the web app with `cargo xtask build`", static_dir.display());
    }
    let store = crate::store::Store::open_from_env(&cfg.data_dir)?;
    let system = Arc::new(cfg.trainer.system());
    let max_runs = match cfg.max_runs {
        0 => system.devices.iter().filter(|d| d.id.starts_with("cuda")).count().max(1),
        n => n,
    };
    let token = match cfg.token {
        Some(t) if !t.is_empty() => t,
        _ => crate::auth::generate().context("generating the operator token")?,
    };
    let worker_token = match cfg.worker_token {
        Some(t) if !t.is_empty() => t,
        _ => crate::auth::generate().context("generating the worker token")?,
    };
    // Bound first: a Ray job's worker is told the address.
    let listener = tokio::net::TcpListener::bind((cfg.host.as_str(), cfg.port))
        .await
        .with_context(|| format!("cannot listen on {}:{} (--host/--port)", cfg.host, cfg.port))?;
    let addr = listener.local_addr()?;
    let exe = std::env::current_exe().context("finding the hotlab binary (each run is a process of it)")?;
    let machines = Arc::new(crate::machines::Machines::new(cfg.worker_grace));
    if let Some(name) = &cfg.local_worker {
        machines.add_local(name, (*system).clone(), max_runs);
    }
    let ray = cfg.ray.map(|head| {
        machines.add_ray();
        crate::ray::RayConfig {
            head,
            lab_url: cfg.ray_lab_url.clone().unwrap_or_else(|| format!("http://{addr}")),
            exe: cfg.ray_hotlab.clone().unwrap_or_else(|| exe.to_string_lossy().into_owned()),
            worker_token: worker_token.clone(),
        }
    });
    let ray_line = ray.as_ref().map_or(String::new(), |r| format!(", Ray jobs on {}", r.head.url()));
    let memory = cfg.run_memory.map(crate::wire::memory::RunMemory::new).transpose().map_err(anyhow::Error::msg)?;
    let memory_line =
        memory.as_ref().map_or(String::new(), |m| format!(", each run's memory limited to {} MiB", m.mb()));
    let processes = crate::wire::process::RunProcesses { exe: exe.clone(), memory };
    let manager =
        crate::runs::Manager::new(store, Arc::clone(&machines), ray, cfg.finished_frames_per_minute, processes)?;
    let data_dir = cfg.data_dir.canonicalize().unwrap_or(cfg.data_dir);
    let audits = crate::audits::Audits::new(std::sync::Arc::clone(&manager))?;
    let sweeps = crate::sweeps::Sweeps::new(Arc::clone(&manager))?;
    let device = system.devices.first().map_or_else(|| "this machine".to_string(), |d| d.name.clone());
    let checks = crate::checks::Checks::new(exe.clone(), &data_dir, device);
    let state = crate::state::Lab {
        sweeps,
        checks,
        manager,
        machines,
        audits,
        token: Arc::new(token.clone()),
        worker_token: Arc::new(worker_token.clone()),
        data_dir: data_dir.clone(),
        system,
        limiter: Arc::new(crate::limit::Limiter::new(cfg.auth_checks_per_second)),
        store_readers: Arc::new(tokio::sync::Semaphore::new(crate::api::STORE_READERS)),
        trainer: cfg.trainer,
        allow_scripts: cfg.allow_scripts,
    };
    // One write, whose failure (stdout closed by whoever started us) is not fatal.
    let local = match &cfg.local_worker {
        Some(name) => format!("local machine '{name}' takes {max_runs} run(s) at once"),
        None => "no local machine (runs go to workers)".into(),
    };
    let local = local + &memory_line;
    let banner = format!(
        "hotlab lab serving on http://{addr}/?token={token}\n  the token launches and stops runs; anyone who can reach the port can watch; data in {}, {local}{ray_line}, static files from {}\n  workers: hotlab worker --lab http://{addr} --worker-token {worker_token}\n",
        data_dir.display(),
        static_dir.display()
    );
    let _ = std::io::Write::write_all(&mut std::io::stdout(), banner.as_bytes());
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        // Best effort: the default buffers only make a slow viewer's frames older.
        let _ = socket2::SockRef::from(&*tcp).set_send_buffer_size(SEND_BUFFER);
    });
    let hosts = crate::guard::Hosts::new(&cfg.host, &cfg.allow_hosts);
    let app = router(state, &static_dir, hosts).into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("server error")
}

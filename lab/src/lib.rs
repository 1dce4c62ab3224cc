//! The hotlab lab: its server, its workers and Ray jobs. It does not link libtorch: every
//! run trains in a process of the `hotlab` binary ([`wire::process`]), and what the lab
//! asks of the trainer (this machine's description, a spec's checks) the binary hands it
//! ([`trainer`]).
//!
//! The server's parts: the run manager ([`runs`]), its machines ([`machines`]: the local
//! one and the workers connected over [`wire::link`], served by [`worker_api`]), each run's
//! process ([`wire::process`], or [`remote`] on a worker), the audits and lessons that run
//! through it ([`audits`]; [`tune`]: the search for the fastest setup), the sweeps
//! ([`sweeps`]), the SQLite history ([`store`]), the operator token ([`auth`]) and the
//! limit on guessing it ([`limit`]), the checks every request passes ([`guard`]: its Host,
//! and for changes a JSON body from this server's pages) and the HTTP/WebSocket handlers
//! ([`api`]; their one error type in [`error`], what they take from a request, the
//! operator's token included, in [`extract`], what they share in [`state`]). `hotlab
//! worker` is [`worker`]; [`server`] starts it all. [`bench`](mod@bench) drives a served lab as its
//! users do, from outside: `hotlab lab-check` end to end and `hotlab bench soak`.
//!
//! | route | what |
//! |---|---|
//! | `GET /api/system` | versions, devices, cores, the store's size |
//! | `GET /api/auth` | `{"operator": bool}`: whether the request carries the token (rate-limited per client) |
//! | `GET /api/runs?before=ID&limit=N`, `POST /api/runs` (token) | a page of runs, newest first; launch one (a `RunSpec` as JSON) → 201 `{"id"}` |
//! | `GET /api/runs/{id}`, `POST /api/runs/{id}/stop` (token) | one run; stop it |
//! | `GET /api/runs/{id}/events?since=SEQ`, `/metrics?since=SEQ` | its history, all kinds or metrics |
//! | `GET /api/runs/{id}/report[?format=md]`, `/trace`, `/export.csv`, `/policy` | its outputs |
//! | `GET /api/runs/{id}/summary` | its totals: info, summed profile, last metrics, report |
//! | `POST /api/prune` (token) | `{"older_than_days": N}`: deletes ended runs created before then → `{"pruned": [ids]}` |
//! | `GET /api/ws?run=ID&since=SEQ&fps=N` | what the client missed, then live events and the newest frame N times a second |
//! | `GET /api/machines` | the machines: devices, load, runs, last seen |
//! | `POST /api/sweeps` (token), `GET /api/sweeps[/{id}]` | a grid's runs and their table ([`sweep_api`]) |
//! | `GET /api/worker` (worker token) | a worker's connection ([`crate::wire::link`]) |
//! | `POST /api/runs/{id}/audit`, `/api/lessons/{id}` (token); `GET /api/audits…`, `/api/lessons` | audits and lessons ([`audit_api`]) |
//! | `GET /api/lessons/checks`, `POST /api/lessons/checks` (token) | this machine's lesson checks, cached ([`checks`]) |

pub mod api;
pub mod audit_api;
pub mod audits;
pub mod auth;
pub mod bench;
pub mod checks;
pub mod clock;
pub mod error;
pub mod extract;
pub mod guard;
pub mod limit;
pub mod machines;
pub mod ray;
pub mod remote;
pub mod runs;
pub mod server;
pub mod state;
pub mod store;
pub mod sweep_api;
pub mod sweeps;
pub mod trainer;
pub mod tune;
pub mod wire;
pub mod worker;
pub mod worker_api;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

/// Request bodies above this are refused (a run spec is well under 2 KB).
pub const BODY_LIMIT: usize = 64 * 1024;

/// The API routes (the caller adds the page's static files, then [`auth::cookie_from_query`]).
pub fn router(lab: state::Lab) -> Router {
    Router::new()
        .route("/api/system", get(api::system))
        .route("/api/auth", get(api::auth))
        .route("/api/knobs/{knob}/suggestions", get(api::suggestions))
        .route("/api/runs", get(api::list_runs).post(api::create_run))
        .route("/api/runs/{id}", get(api::get_run))
        .route("/api/runs/{id}/stop", post(api::stop_run))
        .route("/api/runs/{id}/events", get(api::run_events))
        .route("/api/runs/{id}/metrics", get(api::metrics))
        .route("/api/runs/{id}/report", get(api::report))
        .route("/api/runs/{id}/trace", get(api::trace))
        .route("/api/runs/{id}/export.csv", get(api::export_csv))
        .route("/api/runs/{id}/policy", get(api::policy))
        .route("/api/runs/{id}/summary", get(api::summary))
        .route("/api/prune", post(api::prune))
        .route("/api/runs/{id}/audit", post(audit_api::audit_run))
        .route("/api/runs/{id}/tune", post(audit_api::tune_run))
        .route("/api/lessons", get(audit_api::list_lessons))
        .route("/api/lessons/checks", get(audit_api::lesson_checks).post(audit_api::check_lessons))
        .route("/api/lessons/{id}", post(audit_api::run_lesson))
        .route("/api/audits", get(audit_api::list_audits))
        .route("/api/audits/{id}", get(audit_api::get_audit))
        .route("/api/audits/{id}/stop", post(audit_api::stop_audit))
        .route("/api/ws", get(api::ws))
        .route("/api/machines", get(worker_api::machines))
        .route("/api/sweeps", get(sweep_api::list_sweeps).post(sweep_api::start_sweep))
        .route("/api/sweeps/{id}", get(sweep_api::get_sweep))
        .route(crate::wire::link::PATH, get(worker_api::connect))
        .route("/api/{*rest}", get(api::not_found).post(api::not_found))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(lab)
}

//! The audit and lesson handlers: launching one (operator only) and following it (anyone).
//!
//! | route | what |
//! |---|---|
//! | `POST /api/runs/{id}/audit` (token) | `{"changes": ["KEY=VALUE" or "--flag value …"], "recommendations": bool, "repeats": K, "seconds": T, "total_steps": S}` → 201 the audit |
//! | `POST /api/runs/{id}/tune` (token) | `{"repeats", "seconds", "total_steps", "max_steps"}` → 201 the first audit of a search for the fastest setup; each next step is an audit of its own |
//! | `GET /api/lessons` | the lessons catalogue |
//! | `POST /api/lessons/{id}` (token) | `{"settings": {"KNOB": "VALUE"}, "repeats": K, "seconds": T}` → 201 the lesson's audit |
//! | `GET /api/lessons/checks` | this machine's lesson checks (`hotlab lesson check`), cached |
//! | `POST /api/lessons/checks` (token) | `{"lessons": ["ID", …], "seconds": T}` (both optional: every lesson, 0.5 s) → 202, the check started |
//! | `GET /api/audits?run=ID&lesson=ID&limit=N` | audits, newest first |
//! | `GET /api/audits/{id}`, `POST /api/audits/{id}/stop` (token) | one audit; stop it |

use super::audits::{Request, Search};
use super::error::{ApiError, ApiResult};
use super::extract::{json_body, json_body_or_default, page_limit, Operator, Path, Query};
use super::state::{blocking, Lab};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hotlab_protocol::{AuditInfo, LessonChecks};
use hotlab_report::audit::{Change, Plan};
use hotlab_report::lessons;
use hotlab_report::lessons::{Lesson, Params};
use serde::Deserialize;
use std::sync::Arc;

/// Seconds per run of an audit that names no budget (a run's own `total_steps` still ends
/// it first when it is shorter).
pub const DEFAULT_SECONDS: f64 = 2.0;

/// Pairs per change unless the request says.
pub const DEFAULT_REPEATS: usize = 3;

fn created(info: AuditInfo) -> Response {
    (StatusCode::CREATED, Json(info)).into_response()
}

/// Queues the plan once its variants fit in memory; durable before the answer.
async fn start(lab: &Lab, request: Request) -> ApiResult<Response> {
    for spec in std::iter::once(&request.plan.baseline).chain(&request.plan.variants) {
        lab.trainer.fits(spec)?;
    }
    let info = lab.audits.start(request);
    lab.durable().await?;
    Ok(created(info))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditAsk {
    /// `KEY=VALUE`, or flags as a recommendation writes them (`--backend vectorized`).
    #[serde(default)]
    changes: Vec<String>,
    /// Also the run's report's recommendations.
    #[serde(default)]
    recommendations: bool,
    repeats: Option<usize>,
    /// Seconds per run [`DEFAULT_SECONDS` unless `total_steps` is given].
    seconds: Option<f64>,
    total_steps: Option<u64>,
}

/// A run's summary, and its spec with an audit's budget: `seconds` and `total_steps` as
/// asked, [`DEFAULT_SECONDS`] when neither is.
async fn budgeted(
    lab: &Lab,
    id: u64,
    seconds: Option<f64>,
    total_steps: Option<u64>,
) -> ApiResult<(Arc<hotlab_protocol::RunSummary>, hotlab_spec::RunSpec)> {
    let manager = Arc::clone(&lab.manager);
    let summary = blocking(move || manager.summary(id)).await?.ok_or_else(|| ApiError::no_run(id))?;
    let mut baseline = summary.info.spec.clone();
    match (seconds, total_steps) {
        (None, None) => baseline.seconds = DEFAULT_SECONDS,
        (seconds, steps) => {
            baseline.seconds = seconds.unwrap_or(baseline.seconds);
            baseline.total_steps = steps.unwrap_or(baseline.total_steps);
        }
    }
    baseline.validate()?;
    lab.may_run(&baseline)?;
    Ok((summary, baseline))
}

fn no_report(id: u64, field: &str) -> ApiError {
    let message = format!("run {id} has no report yet: its recommendations can be audited once it has ended");
    ApiError::new(StatusCode::CONFLICT, "no_report", message).field(field)
}

/// `POST /api/runs/{id}/audit`: the run's spec as the baseline, with a short budget.
pub async fn audit_run(State(lab): State<Lab>, Path(id): Path<u64>, _: Operator, body: Bytes) -> ApiResult<Response> {
    let ask: AuditAsk = json_body(&body)?;
    let (summary, baseline) = budgeted(&lab, id, ask.seconds, ask.total_steps).await?;
    // A change written as one of the run's recommendations (`--backend vectorized`) keeps
    // its predicted bound and its target phase.
    let recommended = summary.report.iter().flat_map(|r| &r.recommendations);
    let mut changes = Vec::new();
    for text in &ask.changes {
        let change = match recommended.clone().find(|r| r.knob == text.trim()) {
            Some(r) => Change::recommended(r)?,
            None => Change::restore(text, None)?,
        };
        changes.push(change);
    }
    if ask.recommendations {
        let Some(report) = &summary.report else { return Err(no_report(id, "recommendations")) };
        // A recommendation the baseline already follows, or asked for by name, is left out.
        let more: Vec<Change> = report
            .recommendations
            .iter()
            .filter_map(|r| Change::recommended(r).ok())
            .filter(|c| c.apply(&baseline).is_ok() && !changes.iter().any(|o| o.text == c.text))
            .collect();
        changes.extend(more);
        if changes.is_empty() {
            let message = format!("run {id}'s report recommends nothing that changes it; give changes");
            return Err(ApiError::bad("invalid_value", "recommendations", message));
        }
    }
    for change in &changes {
        lab.may_run(&change.apply(&baseline)?)?;
    }
    let plan = Plan::new(baseline, changes, ask.repeats.unwrap_or(DEFAULT_REPEATS))?;
    start(&lab, Request { plan, run: Some(id), lesson: None, tune: None }).await
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TuneAsk {
    repeats: Option<usize>,
    seconds: Option<f64>,
    total_steps: Option<u64>,
    /// The most audits (changes kept) in the chain [`DEFAULT_TUNE_STEPS`].
    max_steps: Option<usize>,
}

/// Audits in a search unless the request says.
pub const DEFAULT_TUNE_STEPS: usize = 5;

/// `POST /api/runs/{id}/tune`: from the run's recommendations, audits that keep the fastest
/// confirmed change that still learns, one after another, until nothing helps.
pub async fn tune_run(State(lab): State<Lab>, Path(id): Path<u64>, _: Operator, body: Bytes) -> ApiResult<Response> {
    let ask: TuneAsk = json_body_or_default(&body)?;
    let max_steps = ask.max_steps.unwrap_or(DEFAULT_TUNE_STEPS);
    if !(1..=20).contains(&max_steps) {
        return Err(ApiError::bad("invalid_value", "max_steps", format!("{max_steps}: allowed 1 to 20")));
    }
    let (summary, baseline) = budgeted(&lab, id, ask.seconds, ask.total_steps).await?;
    let report = summary.report.as_ref().ok_or_else(|| no_report(id, "run"))?;
    let changes = crate::tune::candidates(report, &baseline, &[]);
    if changes.is_empty() {
        let message = format!("run {id}'s report recommends nothing that changes it: nothing to search");
        return Err(ApiError::new(StatusCode::CONFLICT, "nothing_to_tune", message).field("run"));
    }
    let tried = changes.iter().map(|c| c.text.clone()).collect();
    let plan = Plan::new(baseline, changes, ask.repeats.unwrap_or(DEFAULT_REPEATS))?;
    let tune = Some(Search { step: 1, max_steps, tried, speedup: 1.0 });
    start(&lab, Request { plan, run: Some(id), lesson: None, tune }).await
}

/// `GET /api/lessons`: the catalogue.
pub async fn list_lessons() -> Json<&'static [Lesson]> {
    Json(lessons::LESSONS)
}

fn no_lesson(id: &str) -> ApiError {
    let message = format!("no lesson '{id}'; the lessons: {}", lessons::ids().join(", "));
    ApiError::new(StatusCode::NOT_FOUND, "no_such_lesson", message).field("id")
}

/// `POST /api/lessons/{id}`: runs a lesson with its parameters.
pub async fn run_lesson(
    State(lab): State<Lab>,
    Path(id): Path<String>,
    _: Operator,
    body: Bytes,
) -> ApiResult<Response> {
    let lesson = lessons::find(&id).ok_or_else(|| no_lesson(&id))?;
    let params: Params = json_body_or_default(&body)?;
    // Where the machine it would go to now runs it on CUDA, the GPU's budget (lessons::GPU_FLOOR).
    let device = lesson.device(&params);
    let machines = lab.manager.machines();
    let chosen = machines.choose(None, &device, &lab.manager.queued_per_machine());
    let params = lesson.params_on(&params, chosen.is_ok_and(|m| machines.cuda_for(&m, &device)));
    let plan = lesson.plan(&params)?;
    start(&lab, Request { plan, run: None, lesson: Some((lesson, params)), tune: None }).await
}

/// `GET /api/lessons/checks`: what the checks found here, and the one running.
pub async fn lesson_checks(State(lab): State<Lab>) -> Json<LessonChecks> {
    Json(lab.checks.get())
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CheckAsk {
    /// The lessons to check [all].
    lessons: Option<Vec<String>>,
    /// Seconds of training per run [`CHECK_SECONDS`].
    seconds: Option<f64>,
}

/// Seconds per run of a lesson check unless the request says (`hotlab lesson check`'s).
pub const CHECK_SECONDS: f64 = 0.5;

/// `POST /api/lessons/checks`: checks the lessons on this machine, one after another.
pub async fn check_lessons(State(lab): State<Lab>, _: Operator, body: Bytes) -> ApiResult<Response> {
    let ask: CheckAsk = json_body_or_default(&body)?;
    let chosen: Vec<&'static Lesson> = match ask.lessons {
        None => lessons::LESSONS.iter().collect(),
        Some(ids) if ids.is_empty() => {
            return Err(ApiError::bad(
                "invalid_lessons",
                "lessons",
                "name at least one lesson, or leave it out for all",
            ))
        }
        Some(ids) => ids
            .iter()
            .map(|id| {
                let message = format!("no lesson '{id}'; the lessons: {}", lessons::ids().join(", "));
                lessons::find(id).ok_or_else(|| ApiError::bad("no_such_lesson", "lessons", message))
            })
            .collect::<Result<_, _>>()?,
    };
    let seconds = ask.seconds.unwrap_or(CHECK_SECONDS);
    if !(0.05..=60.0).contains(&seconds) {
        return Err(ApiError::bad(
            "invalid_seconds",
            "seconds",
            format!("{seconds}: allowed 0.05 to 60 seconds per run"),
        ));
    }
    match lab.checks.start(chosen, seconds) {
        Some(state) => Ok((StatusCode::ACCEPTED, Json(state)).into_response()),
        None => Err(ApiError::new(StatusCode::CONFLICT, "check_running", "a check is running; wait for it to end")),
    }
}

/// Audits per answer of `GET /api/audits` unless `limit` says, and the most it may say.
const AUDITS_PAGE: usize = 20;
const AUDITS_PAGE_MAX: usize = 200;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    run: Option<u64>,
    lesson: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/audits?run=ID&lesson=ID&limit=N`: newest first.
pub async fn list_audits(State(lab): State<Lab>, Query(q): Query<AuditQuery>) -> ApiResult<Json<Vec<AuditInfo>>> {
    let limit = page_limit(q.limit, AUDITS_PAGE, AUDITS_PAGE_MAX)?;
    if let Some(l) = q.lesson.as_deref().filter(|l| lessons::find(l).is_none()) {
        return Err(no_lesson(l).field("lesson"));
    }
    let audits = Arc::clone(&lab.audits);
    Ok(Json(blocking(move || audits.list(q.run, q.lesson.as_deref(), limit)).await?))
}

fn no_audit(id: u64) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no_such_audit", format!("no audit {id}")).field("id")
}

/// `GET /api/audits/{id}`.
pub async fn get_audit(State(lab): State<Lab>, Path(id): Path<u64>) -> ApiResult<Json<AuditInfo>> {
    let audits = Arc::clone(&lab.audits);
    Ok(Json(blocking(move || audits.get(id)).await?.ok_or_else(|| no_audit(id))?))
}

/// `POST /api/audits/{id}/stop`: stops it and its run in progress.
pub async fn stop_audit(State(lab): State<Lab>, Path(id): Path<u64>, _: Operator) -> ApiResult<Json<AuditInfo>> {
    let audits = Arc::clone(&lab.audits);
    let info = blocking(move || audits.get(id)).await?.ok_or_else(|| no_audit(id))?;
    if !lab.audits.stop(id) {
        let message = format!("audit {id} is {}; only queued or running audits can be stopped", info.status.as_str());
        return Err(ApiError::new(StatusCode::CONFLICT, "not_live", message));
    }
    Ok(Json(info))
}

//! One run, live: status, steps/s, charts, the ranked bottleneck table with its
//! recommendations (each launches the variant, or is audited: re-run interleaved with this run's spec), the phase split, the counters and the
//! rollout viewer. A finished run renders the same from its stored events.

use crate::charts::{Chart, Line};
use crate::format::{bytes, percent, seconds, si};
use crate::guide::Explain;
use crate::phases::PhaseBars;
use crate::rollout::RolloutView;
use crate::run_data::{chart_points, series, RunData};
use crate::stream::{self, Link};
use hotlab_protocol::{Event, RunInfo, RunStatus};
use hotlab_report::Report;
use hotlab_specs::{count_label, phase_info};
use leptos::prelude::*;
use std::time::Duration;

/// Points per chart line.
const CHART_POINTS: usize = 300;

/// How often buffered events reach the page (charts redraw at most this often).
const FLUSH: Duration = Duration::from_millis(150);

#[component]
pub fn RunView(id: u64, operator: Signal<bool>, on_launched: Callback<u64>) -> impl IntoView {
    let data = RwSignal::new(RunData::default());
    let info = RwSignal::new(None::<RunInfo>);
    let load_error = RwSignal::new(None::<String>);
    let link = RwSignal::new(Link::Connecting);
    follow_run(id, data, info, load_error, link);

    let status = move || data.with(|d| d.status).or_else(|| info.with(|i| i.as_ref().map(|i| i.status)));
    let status_text = move || status().map_or("…", RunStatus::as_str);
    let message = move || data.with(|d| d.message.clone());
    let live = move || status().is_some_and(|s| !s.is_final());
    let report = Memo::new(move |_| {
        let spec = info.with(|i| i.as_ref().map(|i| i.spec.clone()))?;
        data.with(|d| d.report(&spec))
    });
    let windows = Signal::derive(move || data.with(|d| d.windows.clone()));
    let frame = Signal::derive(move || data.with(|d| d.frame.clone()));
    let stop = move |_| {
        leptos::task::spawn_local(async move {
            if let Err(e) = crate::api::post::<serde_json::Value>(&format!("/api/runs/{id}/stop"), "").await {
                load_error.set(Some(e.message));
            }
        });
    };
    let launch_variant = variant_launcher(info, on_launched, load_error);

    let audits = RwSignal::new(Vec::new());
    crate::audits::follow(id, audits);
    let audit_change = move |body: serde_json::Value| crate::audits::request(id, body, load_error, audits);

    view! {
        <section class="panel run-head">
            <h2>"Run "{id}" "<span class=move || format!("status {}", status_text()) data-testid="run-status">{status_text}</span>
                {move || info.with(|i| i.as_ref().and_then(|i| i.machine.clone())).map(|m| view! {
                    <span class="muted machine-of-run" data-testid="run-machine">" on "{m}</span>
                })}
                {move || info.with(|i| i.as_ref().and_then(|i| i.ray_job.clone())).map(|j| view! {
                    <span class="muted" data-testid="run-ray-job">" · Ray job "<code>{j.id}</code>" "{j.status}</span>
                })}</h2>
            {move || (link.get() == Link::Lost).then(|| view! {
                <div class="banner" data-testid="connection-banner">"Disconnected from the lab — reconnecting…"</div>
            })}
            <p class="error" data-testid="run-message">{move || message().unwrap_or_default()}{move || load_error.get().unwrap_or_default()}</p>
            <Tiles data info live=Signal::derive(live)/>
            <p class="links">
                <span data-testid="run-summary">{move || info.with(|i| i.as_ref().map(|i| summary(&i.spec)))}</span>
                " · "<a href=format!("/api/runs/{id}/report?format=md") target="_blank">"report"</a>
                " · "<a href=format!("/api/runs/{id}/trace") target="_blank">"trace"</a>
                " · "<a href=format!("/api/runs/{id}/export.csv")>"CSV"</a>
                " · "<a href=format!("/api/runs/{id}/policy") target="_blank">"policy"</a>
                {move || (live() && operator.get()).then(|| view! { " " <button class="stop" data-testid="stop-button" on:click=stop>"Stop"</button> })}
            </p>
            {move || info.with(|i| i.as_ref().filter(|i| i.dropped > 0).map(|i| view! {
                <p class="error" data-testid="dropped">{format!("{} events not stored: the store fell behind (frames are dropped first, metrics last)", i.dropped)}</p>
            }))}
        </section>
        <RunCharts data/>
        <section class="panel">
            <h2>"Bottlenecks"</h2>
            <Explain section="bottlenecks"/>
            {move || report.get().map(|r| view! { <ReportView report=r operator launch=launch_variant audit=audit_change audits/> })}
        </section>
        <section class="panel">
            <h2>"Audits"</h2>
            <Explain section="verdicts"/>
            <Explain section="noise"/>
            <p>
                <button data-testid="tune-button" prop:disabled=move || !operator.get()
                    on:click=move |_| crate::audits::request_tune(id, load_error, audits)>"Find the fastest setup"</button>
                <span class="muted">" audits the recommendations, keeps the fastest confirmed one that still learns, and goes on from it until nothing helps"</span>
            </p>
            <crate::audits::RunAudits audits operator on_launched error=load_error/>
        </section>
        <section class="panel">
            <h2>"Phase split per update"</h2>
            <Explain section="phase-split"/>
            <PhaseBars bars=windows testid="phase-split"/>
        </section>
        <section class="panel">
            <h2>"Counters"</h2>
            <Explain section="counters"/>
            <Counters data/>
        </section>
        <section class="panel">
            <h2>"Rollout"</h2>
            <RolloutView frame/>
        </section>
    }
}

/// Keeps `data` up to date with the run's events (buffered, applied every [`FLUSH`]) and
/// `info` with its record, fetched again when its status changes, until the view is gone.
fn follow_run(
    id: u64,
    data: RwSignal<RunData>,
    info: RwSignal<Option<RunInfo>>,
    load_error: RwSignal<Option<String>>,
    link: RwSignal<Link>,
) {
    let alive = StoredValue::new(true);
    let pending = StoredValue::new(Vec::<Event>::new());
    let seen = StoredValue::new(0u64);

    let fetch_info = move || {
        leptos::task::spawn_local(async move {
            match crate::api::get::<RunInfo>(&format!("/api/runs/{id}")).await {
                Ok(i) => info.set(Some(i)),
                Err(e) => load_error.set(Some(e.message)),
            }
        })
    };
    fetch_info();
    stream::follow(
        id,
        // The view may be gone when the socket's handlers run: `try_` throughout.
        move || seen.try_get_value().unwrap_or(0),
        move |e| {
            if e.seq > seen.try_get_value().unwrap_or(0) {
                seen.try_update_value(|s| *s = e.seq);
            }
            let final_status =
                matches!(&e.body, hotlab_protocol::EventBody::Status { status, .. } if status.is_final());
            pending.try_update_value(|p| p.push(e));
            final_status
        },
        link,
        alive,
    );
    let flush = move || {
        let events = pending.try_update_value(std::mem::take).unwrap_or_default();
        if events.is_empty() {
            return;
        }
        let status_changed = events.iter().any(|e| matches!(e.body, hotlab_protocol::EventBody::Status { .. }));
        data.update(|d| {
            events.into_iter().for_each(|e| {
                d.apply(e);
            })
        });
        if status_changed {
            fetch_info();
        }
    };
    if let Ok(handle) = set_interval_with_handle(flush, FLUSH) {
        on_cleanup(move || handle.clear());
    }
    on_cleanup(move || {
        alive.set_value(false);
        stream::close(id);
    });
}

/// Launches the run's spec with a recommendation's knobs changed, on the run's machine (a
/// variant's figures compare only there); `on_launched` gets the new run's id.
fn variant_launcher(
    info: RwSignal<Option<RunInfo>>,
    on_launched: Callback<u64>,
    load_error: RwSignal<Option<String>>,
) -> impl Fn(Vec<(String, String)>) + Copy + Send + Sync + 'static {
    move |overrides: Vec<(String, String)>| {
        let Some(spec) = info.with_untracked(|i| i.as_ref().map(|i| i.spec.clone())) else { return };
        // A variant runs where the run did: its figures compare only there.
        let machine = info.with_untracked(|i| i.as_ref().and_then(|i| i.machine.clone()));
        let mut fields = serde_json::to_value(spec).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default();
        for (name, v) in overrides {
            // A recommendation names knobs by flag; each sits at its path in the spec.
            if let Some(knob) = hotlab_spec::knobs::find(&name) {
                knob.set(&mut fields, serde_json::Value::String(v));
            }
        }
        leptos::task::spawn_local(async move {
            match crate::launch::launch(&fields, machine.as_deref()).await {
                Ok(new) => on_launched.run(new),
                Err(e) => load_error.set(Some(e.message)),
            }
        });
    }
}

/// The run's charts: steps/s, the return, the losses, and where the run has them the world
/// model's losses, the Box action's components and the normalizers.
#[component]
fn RunCharts(data: RwSignal<RunData>) -> impl IntoView {
    let sps_line = Signal::derive(move || {
        data.with(|d| {
            vec![Line {
                name: "steps/s".into(),
                color: (0xf0, 0xa0, 0x30),
                points: chart_points(&series(&d.metrics, |m| Some(m.sps)), CHART_POINTS),
            }]
        })
    });
    let return_line = Signal::derive(move || {
        data.with(|d| {
            vec![Line {
                name: "return".into(),
                color: (0x4c, 0xc3, 0x8a),
                points: chart_points(&series(&d.metrics, |m| m.mean_return_last_100), CHART_POINTS),
            }]
        })
    });
    let loss_lines = Signal::derive(move || data.with(|d| crate::run_data::loss_lines(&d.metrics, CHART_POINTS)));
    let world_lines = Signal::derive(move || data.with(|d| crate::run_data::world_lines(&d.metrics, CHART_POINTS)));
    let has_world = move || world_lines.with(|l| l.iter().any(|l| !l.points.is_empty()));
    let group = |name: &'static str| {
        Signal::derive(move || data.with(|d| crate::run_data::group_lines(&d.metrics, name, CHART_POINTS)))
    };
    let (action_lines, norm_lines) = (group("action"), group("norm"));
    let has_action = move || action_lines.with(|l| !l.is_empty());
    let has_norm = move || norm_lines.with(|l| !l.is_empty());
    view! {
        <section class="panel charts">
            <Chart title="steps/s" testid="chart-sps" lines=sps_line/>
            <Chart title="mean return (last 100 episodes)" testid="chart-return" lines=return_line/>
            <Chart title="losses" testid="chart-loss" lines=loss_lines/>
            <Show when=has_world>
                <Chart title="world model losses (÷ first)" testid="chart-world" lines=world_lines/>
            </Show>
            <Show when=has_action>
                <Chart title="Box action per component: the rollout's mean and spread, the log-std" testid="chart-action" lines=action_lines/>
            </Show>
            <Show when=has_norm>
                <Chart title="normalizers: observations' mean |mean| and std, the return's std" testid="chart-norm" lines=norm_lines/>
            </Show>
        </section>
    }
}

/// The run's figures at a glance: steps/s, updates, env steps, the return and episodes;
/// while it runs, when it is expected to end at its speed so far.
#[component]
fn Tiles(data: RwSignal<RunData>, info: RwSignal<Option<RunInfo>>, live: Signal<bool>) -> impl IntoView {
    let left = move || {
        let last = data.with(|d| d.metrics.last().cloned())?;
        info.with(|i| i.as_ref().and_then(|i| crate::estimate::remaining(&i.spec, &last)))
    };
    view! {
        <div class="tiles">
            <div class="tile"><span class="label">"steps/s"</span><span class="value" data-testid="sps">{move || data.with(|d| d.sps().map_or("–".into(), si))}</span></div>
            <div class="tile"><span class="label">"updates"</span><span class="value" data-testid="progress">{move || data.with(|d| d.metrics.last().map_or("–".into(), progress))}</span></div>
            <div class="tile"><span class="label">"env steps"</span><span class="value" data-testid="env-steps" title=move || data.with(|d| d.metrics.last().map(|m| m.global_step.to_string()))>{move || data.with(|d| d.metrics.last().map_or("–".into(), |m| si(m.global_step as f64)))}</span></div>
            <div class="tile"><span class="label">"return (last 100)"</span><span class="value">{move || data.with(|d| d.metrics.last().and_then(|m| m.mean_return_last_100).map_or("–".into(), |r| format!("{r:.1}")))}</span></div>
            <div class="tile"><span class="label">"episodes"</span><span class="value">{move || data.with(|d| d.metrics.last().map_or("–".into(), |m| m.episodes.to_string()))}</span></div>
            {move || live.get().then(left).flatten().map(|secs| view! {
                <div class="tile" data-testid="expected-end" title=end_clock(secs)>
                    <span class="label">"expected end"</span>
                    <span class="value">"in "{crate::estimate::duration(secs)}</span>
                </div>
            })}
        </div>
    }
}

/// The wall-clock time `secs` from now, as this browser's clock reads it.
fn end_clock(secs: f64) -> String {
    let at = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(js_sys::Date::now() + secs * 1e3));
    format!(
        "at {} (its steps still to go at its steps/s so far, or its time budget if that ends it sooner)",
        String::from(at.to_locale_time_string("en-GB"))
    )
}

/// Updates done of how many (a script's run: done, its length its own).
fn progress(m: &hotlab_protocol::MetricsPoint) -> String {
    match m.updates {
        0 => m.update.to_string(),
        all => format!("{} / {all}", m.update),
    }
}

/// The spec in a line: the knobs that matter most for speed.
pub fn summary(spec: &hotlab_spec::RunSpec) -> String {
    if let Some(line) = spec.workload.summary() {
        return format!("{} · {line} · {}", spec.env().as_str(), spec.device);
    }
    format!(
        "{} · {} envs × {} steps · {} · {} · {} · {}",
        spec.env().as_str(),
        spec.envs,
        spec.steps,
        spec.exec.backend,
        spec.inference().as_str(),
        spec.device,
        spec.exec.precision
    )
}

#[component]
fn ReportView(
    report: Report,
    operator: Signal<bool>,
    launch: impl Fn(Vec<(String, String)>) + Copy + Send + Sync + 'static,
    audit: impl Fn(serde_json::Value) + Copy + Send + Sync + 'static,
    audits: RwSignal<Vec<hotlab_protocol::AuditInfo>>,
) -> impl IntoView {
    let split = report.split.clone();
    view! {
        <table class="bottlenecks">
            <thead><tr><th>"phase"</th><th>"time"</th><th>"% of wall"</th><th>"calls"</th><th>"per call"</th><th>"diagnosis"</th></tr></thead>
            <tbody>
                {report.rows.iter().map(|r| view! {
                    <tr data-testid="bottleneck-row">
                        <td><span class="swatch" style:background=crate::phases::color(r.phase)></span>{r.phase.name()}</td>
                        <td class="num">{seconds(r.wall_s)}</td>
                        <td class="num">{percent(r.percent)}</td>
                        <td class="num">{r.calls}{phase_info(r.phase).and_then(|i| i.per).map(|per| view! {
                            <span class="per" data-testid="row-per">" per "{per}</span>
                        })}</td>
                        <td class="num">{seconds(r.per_call_us / 1e6)}</td>
                        <td>{r.diagnosis.clone()}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
        <div class="split" data-testid="split">
            <div class="split-bar">
                <span style:width=format!("{}%", split.data_pct) class="data">"data "{format!("{:.0} %", split.data_pct)}</span>
                <span style:width=format!("{}%", split.forward_pct) class="forward">"forward "{format!("{:.0} %", split.forward_pct)}</span>
                <span style:width=format!("{}%", split.backward_pct) class="backward">"backward "{format!("{:.0} %", split.backward_pct)}</span>
            </div>
            <p><strong>{split.verdict.clone()}</strong>" — "{split.next_action.clone()}</p>
        </div>
        <h3>"Recommendations"</h3>
        {if report.recommendations.is_empty() {
            view! { <p class="muted">"No knob's signature in this profile: nothing to turn."</p> }.into_any()
        } else {
            view! {
                <ul class="recommendations">
                    {report.recommendations.iter().map(|rec| {
                        let overrides = rec.overrides();
                        let knob = rec.knob.clone();
                        let verdict = {
                            let knob = knob.clone();
                            move || audits.with(|a| crate::audits::latest_verdict(a, &knob))
                        };
                        // A change to the script's code: no flag to launch or audit; the
                        // lesson teaches the fix, a variant command verifies it.
                        let change = match (rec.auditable(), &rec.fix) {
                            (true, _) => view! { <code>{rec.knob.clone()}</code> }.into_any(),
                            (false, fix) => view! {
                                <span class="fix" data-testid="recommendation-fix">"change the code: "{fix.clone().unwrap_or_default()}</span>
                            }.into_any(),
                        };
                        let buttons = rec.auditable().then(|| view! {
                            <button data-testid="recommendation-launch" prop:disabled=move || !operator.get()
                                on:click=move |_| launch(overrides.clone())>"Launch this variant"</button>
                            <button data-testid="recommendation-audit" prop:disabled=move || !operator.get()
                                on:click=move |_| audit(serde_json::json!({ "changes": [knob.clone()] }))>"Audit"</button>
                            <span class="verdict" data-testid="recommendation-verdict">{verdict}</span>
                        });
                        view! {
                            <li data-testid="recommendation">
                                {change}" — "{rec.signature.clone()}
                                {rec.site.clone().map(|site| view! { " at "<code data-testid="recommendation-site">{site}</code> })}
                                " (up to "{format!("{:.2}×", rec.max_speedup)}")"
                                {lesson_link(rec)}
                                {buttons}
                            </li>
                        }
                    }).collect_view()}
                </ul>
                <button data-testid="audit-all" prop:disabled=move || !operator.get()
                    on:click=move |_| audit(serde_json::json!({ "recommendations": true }))>"Audit all"</button>
            }.into_any()
        }}
        <p class="muted small">{format!("{} env steps, {:.0} steps/s while profiled; profiler overhead {:.2} % of wall", report.env_steps, report.steps_per_s, report.profiler_overhead_pct)}</p>
        {(!report.notes.is_empty()).then(|| view! {
            <ul class="muted small report-notes" data-testid="report-notes">
                {report.notes.iter().map(|n| view! { <li>{n.clone()}</li> }).collect_view()}
            </ul>
        })}
        {report.steady_sps.map(|s| view! {
            <p class="muted small" data-testid="steady-sps">{format!("{s:.0} steps/s in the steady window (after the warm-up: start-up, compilation, capture, prefill), what an audit compares")}</p>
        })}
    }
}

/// The lesson that teaches a recommendation's fix, as a link, where the rule names one.
fn lesson_link(rec: &hotlab_core::advice::Recommendation) -> Option<impl IntoView> {
    let (row, id) = (rec.row?, rec.lesson.clone()?);
    let title = hotlab_report::lessons::LESSONS.iter().find(|l| l.id == id).map_or(id.clone(), |l| l.title.to_string());
    Some(view! {
        " · "<a class="lesson-link" data-testid="recommendation-lesson" data-lesson=id.clone() href=format!("#/lesson/{id}")>
            {format!("row {row}: {title}")}
        </a>
    })
}

/// A count per env step.
fn per(d: &RunData, x: f64) -> String {
    match d.total.counters.env_steps {
        0 => "–".to_string(),
        n => format!("{:.3}", x / n as f64),
    }
}

#[component]
fn Counters(data: RwSignal<RunData>) -> impl IntoView {
    // A count's cell shows it rounded; its title holds the exact count.
    let row = move |label: &'static str,
                    total: fn(&RunData) -> String,
                    per_step: fn(&RunData) -> String,
                    exact: fn(&RunData) -> Option<u64>| {
        view! {
            <tr data-testid=format!("counter-{}", label.replace(' ', "-"))>
                <td>{label}</td>
                <td class="num" title=move || data.with(exact).map(|n| n.to_string())>{move || data.with(total)}</td>
                <td class="num">{move || data.with(per_step)}</td>
            </tr>
        }
    };
    view! {
        <table class="counters" data-testid="counters">
            <thead><tr><th></th><th>"total"</th><th>"per env step"</th></tr></thead>
            <tbody>
                {row("env steps", |d| si(d.total.counters.env_steps as f64), |_| "1".into(), |d| Some(d.total.counters.env_steps))}
                {row("host syncs", |d| si(d.total.counters.host_syncs as f64), |d| per(d, d.total.counters.host_syncs as f64), |d| Some(d.total.counters.host_syncs))}
                {row("host→device copies", |d| si(d.total.counters.h2d_copies as f64), |d| per(d, d.total.counters.h2d_copies as f64), |d| Some(d.total.counters.h2d_copies))}
                {row("host→device bytes", |d| bytes(d.total.counters.h2d_bytes as f64), |d| per(d, d.total.counters.h2d_bytes as f64), |d| Some(d.total.counters.h2d_bytes))}
                {row("device→host copies", |d| si(d.total.counters.d2h_copies as f64), |d| per(d, d.total.counters.d2h_copies as f64), |d| Some(d.total.counters.d2h_copies))}
                {row("device→host bytes", |d| bytes(d.total.counters.d2h_bytes as f64), |d| per(d, d.total.counters.d2h_bytes as f64), |d| Some(d.total.counters.d2h_bytes))}
                {row("IPC round trips", |d| si(d.total.counters.ipc_round_trips as f64), |d| per(d, d.total.counters.ipc_round_trips as f64), |d| Some(d.total.counters.ipc_round_trips))}
                {row("spin polls", |d| si(d.total.counters.spin_iterations as f64), |d| per(d, d.total.counters.spin_iterations as f64), |d| Some(d.total.counters.spin_iterations))}
                {row("worker wait", |d| seconds(d.total.counters.worker_wait_s), |d| per(d, d.total.counters.worker_wait_s), |_| None)}
                // `--update graph`: replays of the captured update and the kernels and copies
                // they launched (each replay is one launch from the host).
                {row("update replays", |d| si(d.total.counters.update_replays as f64), |d| per(d, d.total.counters.update_replays as f64), |d| Some(d.total.counters.update_replays))}
                {row("update launches", |d| si(d.total.counters.update_launches as f64), |d| per(d, d.total.counters.update_launches as f64), |d| Some(d.total.counters.update_launches))}
                // The envs' own counts: whatever their workload declares (the morpho hosts' …).
                {move || data.with(|d| {
                    d.total.counters.own.iter().map(|(count, n)| view! {
                        <tr><td>{count_label(count)}</td><td class="num">{si(n as f64)}</td><td class="num">{per(d, n as f64)}</td></tr>
                    }).collect_view()
                })}
            </tbody>
        </table>
    }
}

//! Sweeps: the launch panel's sweep line (a grid over the form's spec, where its runs go)
//! and `#/sweep/ID`, the grid's runs with steps/s and return per cell and the best cell.

use crate::api::{self, ApiError};
use crate::format::si;
use crate::route::Route;
use hotlab_protocol::sweep::SweepInfo;
use leptos::prelude::*;
use serde_json::{json, Value};
use std::time::Duration;

/// POSTs a sweep of `grid` over `spec`; the new sweep's id.
pub async fn launch(grid: &str, on: &str, spec: &serde_json::Map<String, Value>) -> Result<u64, ApiError> {
    let body = json!({"grid": grid, "on": on, "spec": spec}).to_string();
    let created: Value = api::post("/api/sweeps", &body).await?;
    created["id"].as_u64().ok_or_else(|| ApiError::from_body(201, &created.to_string()))
}

/// The launch panel's sweep line.
#[component]
pub fn SweepLine(
    operator: Signal<bool>,
    spec: RwSignal<serde_json::Map<String, Value>>,
    on_started: Callback<u64>,
) -> impl IntoView {
    let grid = RwSignal::new("envs=8,32 backend=vectorized,threads".to_string());
    let on = RwSignal::new("any".to_string());
    let error = RwSignal::new(None::<String>);
    let start = move |_| {
        let (g, o, s) = (grid.get_untracked(), on.get_untracked(), spec.get_untracked());
        error.set(None);
        leptos::task::spawn_local(async move {
            match launch(&g, &o, &s).await {
                Ok(id) => on_started.run(id),
                Err(e) => {
                    let field = e.field.map(|f| format!("{f}: ")).unwrap_or_default();
                    let _ = error.try_set(Some(format!("{field}{}", e.message)));
                }
            }
        });
    };
    view! {
        <fieldset class="group sweep-line" prop:disabled=move || !operator.get()>
            <legend>"sweep"</legend>
            <label class="knob" title="KNOB=V1,V2 for each knob to vary: every combination is a run of the spec above">
                <span class="name">"grid"</span>
                <input type="text" name="grid" data-testid="sweep-grid" prop:value=move || grid.get()
                    on:change=move |ev| grid.set(event_target_value(&ev))/>
                <span class="help">"KNOB=V1,V2 …: every combination a run of the spec above"</span>
            </label>
            <label class="knob">
                <span class="name">"on"</span>
                <select name="on" data-testid="sweep-on" prop:value=move || on.get() on:change=move |ev| on.set(event_target_value(&ev))>
                    {["any", "local", "workers", "ray"].map(|o| view! { <option value=o>{o}</option> }).collect_view()}
                </select>
                <span class="help">"where its runs go: a free machine each, this server, the workers in turn, or Ray"</span>
            </label>
            <button type="button" data-testid="sweep-button" on:click=start>"Launch sweep"</button>
            <span class="error" data-testid="sweep-error">{move || error.get().unwrap_or_default()}</span>
        </fieldset>
    }
}

/// `#/sweep/ID`: asked for every second until it is over.
#[component]
pub fn SweepView(id: u64) -> impl IntoView {
    let sweep = RwSignal::new(None::<SweepInfo>);
    let error = RwSignal::new(None::<String>);
    let refresh = move || {
        leptos::task::spawn_local(async move {
            if sweep.try_with_untracked(|s| s.as_ref().is_some_and(|s| s.status.is_final())) != Some(false) {
                return;
            }
            match api::get::<SweepInfo>(&format!("/api/sweeps/{id}")).await {
                Ok(s) => {
                    let _ = sweep.try_set(Some(s));
                }
                Err(e) => {
                    let _ = error.try_set(Some(e.message));
                }
            }
        })
    };
    refresh();
    if let Ok(handle) = set_interval_with_handle(refresh, Duration::from_secs(1)) {
        on_cleanup(move || handle.clear());
    }
    view! {
        <section class="panel">
            <h2>"Sweep "{id}" "
                <span data-testid="sweep-status" class=move || format!("status {}", sweep.with(|s| s.as_ref().map_or("", |s| s.status.as_str())))>
                    {move || sweep.with(|s| s.as_ref().map_or("…", |s| s.status.as_str()))}
                </span>
            </h2>
            <p class="error">{move || error.get().unwrap_or_default()}</p>
            {move || sweep.get().map(|s| {
                let best = s.best;
                let best_return = s.best_return;
                view! {
                    <p class="muted"><code>{s.grid.clone()}</code>" on "{s.on.clone()}{s.message.clone().map(|m| format!(" · {m}")).unwrap_or_default()}</p>
                    <table class="runs sweep">
                        <thead><tr><th>"cell"</th><th>"run"</th><th>"machine"</th><th>"status"</th><th>"steps/s"</th><th>"return"</th><th></th></tr></thead>
                        <tbody>
                            {s.cells.into_iter().enumerate().map(|(i, c)| {
                                let mark = match (best == Some(i), best_return == Some(i)) {
                                    (true, true) => "fastest, best return",
                                    (true, false) => "fastest",
                                    (false, true) => "best return",
                                    _ => "",
                                };
                                view! {
                                    <tr data-testid="sweep-cell" class:best=best == Some(i)>
                                        <td><code>{c.label}</code></td>
                                        <td>{c.run.map(|r| view! { <a href=Route::Run(r).hash()>{format!("#{r}")}</a> })}</td>
                                        <td>{c.machine.unwrap_or_default()}</td>
                                        <td>{c.status.map_or("…", |s| s.as_str())}</td>
                                        <td class="num" data-testid="sweep-sps">{c.sps.map_or("–".into(), si)}</td>
                                        <td class="num">{c.mean_return.map_or("–".into(), |r| format!("{r:.1}"))}</td>
                                        <td data-testid="sweep-mark">{mark}</td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                }
            })}
        </section>
    }
}

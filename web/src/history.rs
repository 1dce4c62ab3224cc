//! The runs in the store, newest first, a page at a time: status, scenario, key knobs
//! and steps/s; pick two or more to compare. The newest page refreshes itself; older
//! pages are read once, on request.

use crate::format::si;
use crate::route::Route;
use hotlab_protocol::RunInfo;
use leptos::prelude::*;
use std::time::Duration;

/// Runs per page.
const PAGE: usize = 50;

#[component]
pub fn History(go: Callback<Route>) -> impl IntoView {
    let newest = RwSignal::new(Vec::<RunInfo>::new());
    let older = RwSignal::new(Vec::<RunInfo>::new());
    // Whether the last page read was full (so there may be more).
    let more = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let picked = RwSignal::new(Vec::<u64>::new());
    let runs = Memo::new(move |_| {
        let mut all = newest.get();
        let last = all.last().map_or(u64::MAX, |r| r.id);
        all.extend(older.get().into_iter().filter(|r| r.id < last));
        all
    });
    let refresh = move || {
        leptos::task::spawn_local(async move {
            match crate::api::get::<Vec<RunInfo>>(&format!("/api/runs?limit={PAGE}")).await {
                Ok(list) => {
                    if older.with_untracked(Vec::is_empty) {
                        more.set(list.len() == PAGE);
                    }
                    if newest.with_untracked(|r| r != &list) {
                        newest.set(list);
                    }
                    error.set(None);
                }
                Err(e) => error.set(Some(e.message)),
            }
        })
    };
    let load_older = move |_| {
        let before = runs.with_untracked(|r| r.last().map(|r| r.id));
        leptos::task::spawn_local(async move {
            let Some(before) = before else { return };
            match crate::api::get::<Vec<RunInfo>>(&format!("/api/runs?before={before}&limit={PAGE}")).await {
                Ok(page) => {
                    more.set(page.len() == PAGE);
                    older.update(|o| o.extend(page));
                }
                Err(e) => error.set(Some(e.message)),
            }
        })
    };
    refresh();
    if let Ok(handle) = set_interval_with_handle(refresh, Duration::from_secs(2)) {
        on_cleanup(move || handle.clear());
    }
    let toggle = move |id: u64| {
        picked.update(|p| match p.iter().position(|&x| x == id) {
            Some(i) => {
                p.remove(i);
            }
            None => p.push(id),
        })
    };
    view! {
        <div class="history">
            <p class="error">{move || error.get().unwrap_or_default()}</p>
            <button data-testid="compare-button" prop:disabled=move || picked.with(|p| p.len() < 2)
                on:click=move |_| go.run(Route::Compare(picked.get()))>
                {move || format!("Compare {} selected", picked.with(Vec::len))}
            </button>
            <table class="runs">
                <thead><tr><th></th><th>"run"</th><th>"status"</th><th>"env"</th><th>"backend"</th><th>"envs × steps"</th><th>"inference"</th><th>"device"</th><th>"machine"</th><th>"steps/s"</th></tr></thead>
                <tbody>
                    <For each=move || runs.get() key=|r| (r.id, r.status.as_str(), r.sps.map(f64::to_bits)) let:r>
                        {
                            let id = r.id;
                            view! {
                                <tr data-testid="history-row" data-run=id>
                                    <td><input type="checkbox" data-testid="pick" prop:checked=move || picked.with(|p| p.contains(&id)) on:change=move |_| toggle(id)/></td>
                                    <td><a href=Route::Run(id).hash()>{format!("#{id}")}</a></td>
                                    <td><span class=format!("status {}", r.status.as_str())>{r.status.as_str()}</span></td>
                                    <td>{r.spec.env().as_str()}</td>
                                    <td>{r.spec.exec.backend.to_string()}</td>
                                    <td class="num">{format!("{} × {}", r.spec.envs, r.spec.steps)}</td>
                                    <td>{r.spec.inference().as_str()}</td>
                                    <td>{r.spec.device.clone()}</td>
                                    <td data-testid="history-machine">{r.machine.clone().unwrap_or_default()}</td>
                                    <td class="num" data-testid="history-sps">{r.sps.map_or("–".into(), si)}</td>
                                </tr>
                            }
                        }
                    </For>
                </tbody>
            </table>
            {move || runs.with(Vec::is_empty).then(|| view! { <p class="muted">"No runs yet."</p> })}
            {move || more.get().then(|| view! {
                <button data-testid="older-runs" on:click=load_older>{format!("{PAGE} older runs")}</button>
            })}
        </div>
    }
}

//! The hotlab web lab (Leptos, client-side rendered, wasm32).
//!
//! - `#/` the lab's home: three ways in (a preset's run, a lesson, the playground), then the
//!   launch form, the run history, the system panel and the machines;
//! - `#/run/ID` one run, live over its WebSocket (or replayed when it is over);
//! - `#/compare/A,B,…` runs side by side;
//! - `#/playground` (or `/playground`) CartPole stepped in the browser, WebGPU or wasm CPU;
//! - `#/lessons`, `#/lesson/ID?…` the lessons, each run live with its verdicts;
//!   `#/lessons?present=1` the presenter's tour, a lesson a screen;
//! - `#/guide/SECTION` the guide to the panels (`docs/guide.md`);
//! - `#/sweep/ID` a sweep: its cells' runs, steps/s and return, the best cell.
//!
//! The pure parts (folding events, chart data, ratios, formatting, routes, form values)
//! are plain functions with native unit tests; the rest is views. `docs/architecture.md`
//! (in the repository) follows a run from the launch form to the charts.

mod api;
mod audits;
mod charts;
mod compare;
mod compare_view;
mod estimate;
mod format;
mod guide;
mod history;
mod home;
mod launch;
mod lessons;
mod machines;
mod pg_engine;
mod phases;
mod playground;
mod rollout;
mod route;
mod run_data;
mod run_view;
mod store_banner;
mod stream;
mod sweeps;

use hotlab_protocol::system::SystemInfo;
use leptos::prelude::*;
use route::Route;

fn gib(bytes: Option<u64>) -> String {
    bytes.map_or(String::new(), |b| format!(" · {:.1} GiB", b as f64 / (1u64 << 30) as f64))
}

/// The store's state in a line: "ok", or the state, the writes waiting and the events shed.
fn store_line(health: Option<&hotlab_protocol::system::StoreHealth>) -> String {
    use hotlab_protocol::system::StoreState;
    let Some(h) = health else { return "–".into() };
    let state = match h.state {
        StoreState::Ok => "ok",
        StoreState::Slow => "slow",
        StoreState::Failing => "failing",
    };
    format!("{state} · {} waiting · {} shed", h.waiting, h.shed)
}

#[component]
pub fn SystemPanel() -> impl IntoView {
    let system = RwSignal::new(None::<Result<SystemInfo, String>>);
    leptos::task::spawn_local(async move {
        system.set(Some(api::get::<SystemInfo>("/api/system").await.map_err(|e| e.message)));
    });
    view! {
        <section class="panel" data-testid="system-panel">
            <h2>"System"</h2>
            {move || match system.get() {
                None => view! { <p class="muted">"asking the worker…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error" data-testid="system-error">"The worker did not answer: "{e}</p> }.into_any(),
                Some(Ok(info)) => {
                    let cuda = if info.cuda_available { "available" } else { "not available" };
                    view! {
                        <dl class="facts">
                            <dt>"hotlab"</dt><dd data-testid="hotlab-version">{info.version.clone()}</dd>
                            <dt>"libtorch"</dt><dd data-testid="torch-version">{info.torch_version.clone()}</dd>
                            <dt>"CUDA"</dt><dd data-testid="cuda">{cuda}</dd>
                            <dt>"CPU cores"</dt><dd data-testid="cpu-cores">{info.cpu_cores}</dd>
                            <dt>"libtorch threads"</dt><dd>{info.torch_threads}</dd>
                            <dt>"run store"</dt><dd data-testid="store-size">{info.store_bytes.map_or("–".into(), |b| format::bytes(b as f64))}</dd>
                            <dt>"store writes"</dt><dd data-testid="store-state">{store_line(info.store.as_ref())}</dd>
                        </dl>
                        <h3>"Devices"</h3>
                        <ul class="devices">
                            {info.devices.into_iter().map(|d| view! {
                                <li data-testid="device"><code>{d.id}</code>" "{d.name}{gib(d.memory_bytes)}</li>
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }
            }}
        </section>
    }
}

fn current_route() -> Route {
    let location = web_sys::window().map(|w| w.location());
    let get = |f: fn(&web_sys::Location) -> Result<String, wasm_bindgen::JsValue>| {
        location.as_ref().and_then(|l| f(l).ok()).unwrap_or_default()
    };
    Route::from_location(&get(web_sys::Location::pathname), &get(web_sys::Location::hash))
}

#[component]
fn App() -> impl IntoView {
    let route = RwSignal::new(current_route());
    // Setting the same route again would rebuild its view (and reconnect a run's stream).
    let handle = window_event_listener(leptos::ev::hashchange, move |_| {
        let now = current_route();
        if route.get_untracked() != now {
            route.set(now);
        }
    });
    on_cleanup(move || handle.remove());
    let go = Callback::new(move |r: Route| {
        if let Some(w) = web_sys::window() {
            let _ = w.location().set_hash(&r.hash());
        }
        if route.get_untracked() != r {
            route.set(r);
        }
    });
    let operator = RwSignal::new(false);
    leptos::task::spawn_local(async move {
        if let Ok(v) = api::get::<serde_json::Value>("/api/auth").await {
            operator.set(v["operator"].as_bool().unwrap_or(false));
        }
    });
    let operator = Signal::from(operator);
    let launched = Callback::new(move |id: u64| go.run(Route::Run(id)));
    view! {
        <header class="top">
            <h1><a href="#/">"hotlab"</a></h1>
            <p class="tagline">"A lab for the hot path of vectorized reinforcement-learning training"</p>
            <nav class="nav">
                <a href="#/" data-testid="nav-lab">"Lab"</a>
                <a href="#/lessons" data-testid="nav-lessons">"Lessons"</a>
                <a href="#/playground" data-testid="nav-playground">"Playground"</a>
            </nav>
            <span class="role" data-testid="role">{move || if operator.get() { "operator" } else { "viewer" }}</span>
        </header>
        <store_banner::StoreBanner/>
        {move || match route.get() {
            Route::Home => view! { <home::Home operator go/> }.into_any(),
            Route::Run(id) => view! {
                <main class="run"><run_view::RunView id operator on_launched=launched/></main>
            }.into_any(),
            Route::Compare(ids) => view! {
                <main class="run"><compare_view::CompareView ids/></main>
            }.into_any(),
            Route::Playground => view! { <main class="pg"><playground::Playground/></main> }.into_any(),
            Route::Lessons => view! { <main class="lessons"><lessons::LessonsList operator/></main> }.into_any(),
            Route::Tour(tour) => view! { <main class="run"><lessons::Tour tour operator go/></main> }.into_any(),
            Route::Guide(section) => view! { <main class="run"><guide::Guide section/></main> }.into_any(),
            Route::Lesson(link) => view! { <main class="run"><lessons::LessonView link operator go/></main> }.into_any(),
            Route::Sweep(id) => view! { <main class="run"><sweeps::SweepView id/></main> }.into_any(),
        }}
    }
}

/// The query string without `token=…` (None when it has none): the token comes in the
/// URL once, the server answers with its HttpOnly cookie, and the address bar must not
/// keep it (a link copied from there would carry operator rights).
pub fn without_token(search: &str) -> Option<String> {
    let pairs: Vec<&str> = search.trim_start_matches('?').split('&').filter(|kv| !kv.is_empty()).collect();
    let kept: Vec<&str> = pairs.iter().copied().filter(|kv| !kv.starts_with("token=")).collect();
    if kept.len() == pairs.len() {
        return None;
    }
    Some(if kept.is_empty() { String::new() } else { format!("?{}", kept.join("&")) })
}

/// Takes the token out of the address bar (the page is not reloaded).
fn forget_token_in_url() {
    let Some(w) = web_sys::window() else { return };
    let l = w.location();
    let Some(query) = without_token(&l.search().unwrap_or_default()) else { return };
    let url = format!("{}{query}{}", l.pathname().unwrap_or_default(), l.hash().unwrap_or_default());
    if let Ok(history) = w.history() {
        let _ = history.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&url));
    }
}

fn main() {
    console_error_panic_hook::set_once();
    forget_token_in_url();
    leptos::mount::mount_to_body(App);
}

#[cfg(test)]
mod tests {
    use super::without_token;

    #[test]
    fn the_token_leaves_the_query_and_nothing_else_does() {
        assert_eq!(without_token("?token=abc"), Some(String::new()));
        assert_eq!(without_token("?a=1&token=abc&b=2"), Some("?a=1&b=2".into()));
        assert_eq!(without_token("?a=1"), None);
        assert_eq!(without_token(""), None);
        assert_eq!(without_token("?tokens=1"), None, "another key that starts alike stays");
    }
}

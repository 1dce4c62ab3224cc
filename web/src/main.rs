//! The hotlab web lab (Leptos, client-side rendered, wasm32).
//!
//! For now: the lab's name and what the worker says about itself (`GET /api/system`).
//! The launch panel, live charts and the rest come with the web front-end issue.

use hotlab_shared::system::SystemInfo;
use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// GETs a JSON document from the worker.
async fn get_json<T: serde::de::DeserializeOwned>(path: &str) -> Result<T, String> {
    let window = web_sys::window().ok_or("no window")?;
    let response = JsFuture::from(window.fetch_with_str(path)).await.map_err(|e| format!("{path}: {e:?}"))?;
    let response: web_sys::Response = response.dyn_into().map_err(|_| format!("{path}: not a response"))?;
    let text = JsFuture::from(response.text().map_err(|e| format!("{e:?}"))?)
        .await
        .map_err(|e| format!("{path}: {e:?}"))?
        .as_string()
        .unwrap_or_default();
    if !response.ok() {
        return Err(format!("{path}: HTTP {} {text}", response.status()));
    }
    serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))
}

fn gib(bytes: Option<u64>) -> String {
    bytes.map_or(String::new(), |b| format!(" · {:.1} GiB", b as f64 / (1u64 << 30) as f64))
}

#[component]
fn SystemPanel(info: SystemInfo) -> impl IntoView {
    let cuda = if info.cuda_available { "available" } else { "not available" };
    view! {
        <dl class="facts">
            <dt>"hotlab"</dt><dd data-testid="hotlab-version">{info.version.clone()}</dd>
            <dt>"libtorch"</dt><dd data-testid="torch-version">{info.torch_version.clone()}</dd>
            <dt>"CUDA"</dt><dd data-testid="cuda">{cuda}</dd>
            <dt>"CPU cores"</dt><dd data-testid="cpu-cores">{info.cpu_cores}</dd>
            <dt>"libtorch threads"</dt><dd>{info.torch_threads}</dd>
        </dl>
        <h3>"Devices"</h3>
        <ul class="devices">
            {info.devices.into_iter().map(|d| view! {
                <li data-testid="device"><code>{d.id}</code>" "{d.name}{gib(d.memory_bytes)}</li>
            }).collect_view()}
        </ul>
    }
}

#[component]
fn App() -> impl IntoView {
    let (system, set_system) = signal(None::<Result<SystemInfo, String>>);
    spawn_local(async move {
        set_system.set(Some(get_json::<SystemInfo>("/api/system").await));
    });
    view! {
        <header class="top">
            <h1>"hotlab"</h1>
            <p class="tagline">"A lab for the hot path of vectorized reinforcement-learning training"</p>
        </header>
        <main>
            <section class="panel" data-testid="system-panel">
                <h2>"System"</h2>
                {move || match system.get() {
                    None => view! { <p class="muted">"asking the worker…"</p> }.into_any(),
                    Some(Ok(info)) => view! { <SystemPanel info=info/> }.into_any(),
                    Some(Err(e)) => view! { <p class="error" data-testid="system-error">"The worker did not answer: "{e}</p> }.into_any(),
                }}
            </section>
        </main>
    }
}

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(App);
}

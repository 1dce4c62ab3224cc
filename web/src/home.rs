//! `#/` the lab's home: what the lab is for and three ways in (a one-click run per
//! workload's preset, a lesson, the playground), then the full launch form collapsed
//! under the preset picked, the history, the system and the machines. The first visit
//! says more; the browser remembers the visit (`localStorage`) and later ones open short.

use crate::estimate::{self, DEMO_SECONDS};
use crate::format::{grouped, si};
use crate::launch;
use crate::route::Route;
use hotlab_protocol::RunInfo;
use hotlab_spec::{presets, PresetSpec};
use hotlab_specs::AnyPreset;
use leptos::prelude::*;

/// The `localStorage` key that says this browser has seen the home.
const VISITED: &str = "hotlab.visited";

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

/// Whether this browser has been here before; marks it as having been.
fn first_visit() -> bool {
    let Some(s) = storage() else { return true };
    let first = s.get_item(VISITED).ok().flatten().is_none();
    let _ = s.set_item(VISITED, "1");
    first
}

#[component]
pub fn Home(operator: Signal<bool>, go: Callback<Route>) -> impl IntoView {
    let first = first_visit();
    let picked = RwSignal::new(presets::default().name);
    let spec = RwSignal::new(launch::preset(presets::default()));
    let form_open = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let launched = Callback::new(move |id: u64| go.run(Route::Run(id)));
    let swept = Callback::new(move |id: u64| go.run(Route::Sweep(id)));
    let adjust = Callback::new(move |p: &'static AnyPreset| {
        spec.set(launch::preset(p));
        picked.set(p.name);
        form_open.set(true);
    });
    let run_now = Callback::new(move |(p, budget): (&'static AnyPreset, Option<f64>)| {
        error.set(None);
        let mut body = launch::preset(p);
        if let Some(secs) = budget {
            body.insert("seconds".into(), serde_json::Value::from(secs));
        }
        leptos::task::spawn_local(async move {
            match launch::launch(&body, None).await {
                Ok(id) => launched.run(id),
                Err(e) => error.set(Some(format!("{}: {}", p.name, e.message))),
            }
        });
    });
    view! {
        <section class="panel welcome" data-testid="welcome">
            {if first {
                view! {
                    <div data-testid="first-visit">
                        <h2>"Where does each training step's time go?"</h2>
                        <p class="lead">"hotlab runs real reinforcement-learning trainers under every execution strategy, measures where each step's time goes, ranks the bottlenecks, and proves its advice by re-running with the fix, side by side. Start one of three ways:"</p>
                    </div>
                }.into_any()
            } else {
                view! { <p class="muted" data-testid="welcome-back">"Welcome back. Three ways in, or the form and your runs below."</p> }.into_any()
            }}
            <div class="ways">
                <div class="way" data-testid="way-run">
                    <h3>"1 · Run something now"</h3>
                    <p class="muted">"One click: a named preset per workload, live, ending in its bottleneck table."</p>
                    <PresetCards operator run_now adjust/>
                    <p class="error" data-testid="preset-error">{move || error.get().unwrap_or_default()}</p>
                </div>
                <div class="way" data-testid="way-lesson">
                    <h3>"2 · Take a lesson"</h3>
                    <p class="muted">"Each lesson turns one knob and measures its bottleneck appear and vanish. "
                        <a href="#/lessons">"All lessons"</a>" · "<a href="#/lessons?present=1" data-testid="tour-link">"presenter tour"</a></p>
                    <crate::lessons::LessonCards operator compact=true/>
                </div>
                <div class="way" data-testid="way-play">
                    <h3>"3 · Play in the browser"</h3>
                    <p class="muted">"CartPole stepped by thousands in this tab, on WebGPU or the CPU, with a policy trained here."</p>
                    <a class="button" href="#/playground" data-testid="play-link">"Open the playground"</a>
                </div>
            </div>
        </section>
        <main class="home">
            <section class="panel launch-panel">
                <details data-testid="launch-details" prop:open=move || form_open.get()
                    on:toggle=move |ev| form_open.set(event_target::<web_sys::HtmlDetailsElement>(&ev).open())>
                    <summary data-testid="launch-summary">
                        "Launch a run: every knob, starting from the preset "
                        <code data-testid="launch-preset">{move || picked.get()}</code>
                    </summary>
                    <launch::LaunchPanel operator spec picked on_launched=launched on_sweep=swept/>
                </details>
            </section>
            <div class="side">
                <section class="panel">
                    <h2>"History"</h2>
                    <crate::history::History go/>
                </section>
                <crate::SystemPanel/>
                <crate::machines::MachinesPanel/>
            </div>
        </main>
    }
}

/// A card per preset: its workload, its line, what it takes here, one click to run it,
/// and the form set to it. A preset this lab has not timed, or whose whole run takes longer
/// than [`DEMO_SECONDS`], runs that long first (which times it); the whole run is the
/// card's other button.
#[component]
fn PresetCards(
    operator: Signal<bool>,
    run_now: Callback<(&'static AnyPreset, Option<f64>)>,
    adjust: Callback<&'static AnyPreset>,
) -> impl IntoView {
    // A preset on CUDA runs only where one of the lab's machines has a GPU.
    let gpu_here = RwSignal::new(false);
    // The runs this lab keeps, newest first: a preset's speed here is a run of its spec's.
    let runs = RwSignal::new(Vec::<RunInfo>::new());
    leptos::task::spawn_local(async move {
        if let Ok(machines) = crate::api::get::<Vec<hotlab_protocol::MachineInfo>>("/api/machines").await {
            gpu_here.try_set(machines.iter().any(|m| m.system.as_ref().is_some_and(|s| s.cuda_available)));
        }
        if let Ok(list) = crate::api::get::<Vec<RunInfo>>("/api/runs?limit=1000").await {
            runs.try_set(list);
        }
    });
    view! {
        <div class="cards presets-cards">
            {presets::all().map(|p| {
                let spec = p.spec();
                let cuda = spec.device.starts_with("cuda");
                let blocked = move || cuda && !gpu_here.get();
                let timed = {
                    let spec = spec.clone();
                    Memo::new(move |_| runs.with(|r| estimate::measured(&spec, r)).map(|m| (m, estimate::whole_run(&spec, m.sps))))
                };
                // Whether the card's Run is a demo of DEMO_SECONDS, the whole run the other button.
                let demo = move || timed.get().is_none_or(|(_, secs)| secs > DEMO_SECONDS);
                let steps = grouped(spec.total_steps);
                view! {
                <div class="card preset-card" data-testid=format!("preset-{}", p.name)>
                    <span class="row">{spec.env().as_str()}</span>
                    <h4>{p.name}</h4>
                    <p>{p.about}</p>
                    <p class="hint">"Sets "<code data-testid="preset-flags">{match p.flags_line() {
                        line if line.is_empty() => "nothing: the defaults".to_string(),
                        line => line,
                    }}</code></p>
                    <p class="hint" data-testid="preset-time">{move || time_line(&steps, timed.get())}</p>
                    {move || blocked().then(|| view! {
                        <p class="hint" data-testid="preset-needs-gpu">"Needs a CUDA GPU: none of this lab's machines has one. Its figures on an H100 are in docs/gpu-results.md."</p>
                    })}
                    <button data-testid="preset-run" prop:disabled=move || !operator.get() || blocked()
                        on:click=move |_| run_now.run((p, demo().then_some(DEMO_SECONDS)))>
                        {move || if demo() { format!("Run {}", estimate::duration(DEMO_SECONDS)) } else { "Run".into() }}
                    </button>
                    {move || demo().then(|| view! {
                        " "
                        <button class="secondary" data-testid="preset-full" title="the whole run, all of its steps"
                            prop:disabled=move || !operator.get() || blocked() on:click=move |_| run_now.run((p, None))>"Full run"</button>
                    })}
                    " "
                    <button class="secondary" data-testid="preset-adjust" on:click=move |_| adjust.run(p)>"Adjust…"</button>
                </div>
            }}).collect_view()}
        </div>
        {move || (!operator.get()).then(|| view! {
            <p class="hint" data-testid="preset-hint">
                "Watching only: running needs the operator token. Open the URL that "<code>"hotlab serve"</code>" printed (it ends in ?token=…)."
            </p>
        })}
    }
}

/// What a card says its run takes here: the whole run at the speed a run of its spec
/// measured on this lab, or that none has yet and its Run times it.
fn time_line(steps: &str, timed: Option<(estimate::Measured, f64)>) -> String {
    let demo = estimate::duration(DEMO_SECONDS);
    match timed {
        Some((m, secs)) if secs <= DEMO_SECONDS => format!(
            "Here: about {} for its {steps} steps (run #{} ran {} steps/s).",
            estimate::duration(secs),
            m.run,
            si(m.sps)
        ),
        Some((m, secs)) => format!(
            "Here the whole run takes about {} ({steps} steps at the {} steps/s of run #{}): Run gives it {demo}, Full run all of it.",
            estimate::duration(secs),
            si(m.sps),
            m.run
        ),
        None => format!("Not timed on this lab yet: Run gives it {demo} and times it; Full run runs all {steps} steps."),
    }
}

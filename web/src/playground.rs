//! `/playground`: CartPole stepped in the browser, on WebGPU (the WGSL kernel through
//! wgpu) or, where the browser has none, in wasm on the CPU (the worker's own batch
//! env). A random policy, or the actor of a finished CartPole run fetched from the
//! worker. It needs no run and no GPU box: the lab's demo when neither is around.
//!
//! One async loop owns the engine (wgpu objects are not `Send`, so they live in the
//! task, not in signals): it rebuilds the engine when the form changes, steps a frame,
//! draws a sample of the envs, reports through signals, and waits for the next frame.

use crate::charts::{Chart, Line};
use crate::format::{envs_label, si};
use crate::pg_engine::{
    self, now_s, Engine, FrameOut, GpuKnobs, LessonRow, Measurement, Path, PgLesson, ReadBack, SpsMeter,
    STEPS_PER_DISPATCH, SWEEP,
};
use hotlab_protocol::{RunInfo, RunStatus};
use hotlab_specs::EnvName;
use hotlab_views::cartpole::{draw_one, Cell};
use hotlab_wgpu::gpu::Gpu;
use hotlab_wgpu::{Actor, Policy, Setup, Tally};
use leptos::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wasm_bindgen::JsCast;

/// Which path the form asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// WebGPU when the browser has an adapter, else the CPU.
    Auto,
    WebGpu,
    Cpu,
}

/// What the form asks for; the loop rebuilds its engine when this changes.
#[derive(Clone, Debug, PartialEq)]
struct Config {
    choice: Choice,
    envs: usize,
    /// A run whose actor acts; `None`: the uniform random policy.
    policy: Option<u64>,
    greedy: bool,
    seed: u64,
    /// The GPU path's steps per dispatch and read-back.
    knobs: GpuKnobs,
}

/// What the loop reports.
#[derive(Clone, Debug, Default, PartialEq)]
struct Live {
    path: Option<Path>,
    envs: usize,
    sps: Option<f64>,
    tally: Tally,
    error: Option<String>,
}

/// The signals the loop reads and writes (all `Copy`).
#[derive(Clone, Copy)]
struct Sigs {
    config: RwSignal<Config>,
    paused: RwSignal<bool>,
    live: RwSignal<Live>,
    webgpu: RwSignal<Option<Result<String, String>>>,
    points: RwSignal<Vec<Measurement>>,
    sweep_asked: RwSignal<u32>,
    sweeping: RwSignal<Option<String>>,
    /// A playground lesson to measure (taken by the loop), and what they measured.
    lesson_asked: RwSignal<Option<PgLesson>>,
    lesson_rows: RwSignal<Vec<LessonRow>>,
    canvas: NodeRef<leptos::html::Canvas>,
}

/// Resolves at the next animation frame (the browser's own pacing; paused when hidden).
async fn next_frame() {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.request_animation_frame(&resolve);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// The browser's WebGPU adapter, or why there is none.
async fn find_gpu() -> Result<Gpu, String> {
    let navigator = web_sys::window().ok_or("no window")?.navigator();
    let gpu = js_sys::Reflect::get(&navigator, &"gpu".into()).unwrap_or_default();
    if gpu.is_undefined() || gpu.is_null() {
        return Err("this browser has no WebGPU (navigator.gpu is absent)".into());
    }
    Gpu::new().await.map_err(|e| e.0)
}

async fn policy_of(cfg: &Config, actors: &mut HashMap<u64, Arc<Actor>>) -> Result<Policy, String> {
    let Some(id) = cfg.policy else { return Ok(Policy::Random) };
    let actor = match actors.get(&id) {
        Some(a) => a.clone(),
        None => {
            let text = crate::api::get_text(&format!("/api/runs/{id}/policy"))
                .await
                .map_err(|e| format!("run {id}'s policy: {}", e.message))?;
            let actor = Arc::new(Actor::from_policy_json(&text).map_err(|e| format!("run {id}'s {e}"))?);
            actors.insert(id, actor.clone());
            actor
        }
    };
    Ok(Policy::Actor { actor, greedy: cfg.greedy })
}

fn path_for(choice: Choice, gpu: Option<&Gpu>) -> Path {
    match (choice, gpu) {
        (Choice::WebGpu, _) | (Choice::Auto, Some(_)) => Path::WebGpu,
        (Choice::Cpu, _) | (Choice::Auto, None) => Path::Cpu,
    }
}

/// Sky, track, cart and pole for each sampled env, in an 8-wide grid.
fn draw_grid(canvas: &web_sys::HtmlCanvasElement, states: &[[f32; 4]]) -> Option<()> {
    let ctx: web_sys::CanvasRenderingContext2d = canvas.get_context("2d").ok()??.dyn_into().ok()?;
    let (w, h) = (canvas.width() as f64, canvas.height() as f64);
    ctx.set_fill_style_str("#182029");
    ctx.fill_rect(0.0, 0.0, w, h);
    let cols = 8.0;
    let rows = (states.len() as f64 / cols).ceil().max(1.0);
    let (cw, ch) = (w / cols, h / rows);
    for (i, s) in states.iter().enumerate() {
        let (left, top) = ((i % 8) as f64 * cw, (i / 8) as f64 * ch);
        let cell = Cell {
            left,
            width: cw,
            track_y: top + ch * 0.8,
            margin: 4.0,
            cart: (12.0, 6.0, 4.0),
            pole: (ch * 0.65, 2.0),
        };
        draw_one(&ctx, &cell, *s);
    }
    Some(())
}

/// Measures every available path at every size of [`SWEEP`] under the current policy.
async fn sweep(s: Sigs, gpu: Option<&Gpu>, policy: &Policy, alive: &AtomicBool) -> Result<(), String> {
    let paths: &[Path] = if gpu.is_some() { &[Path::WebGpu, Path::Cpu] } else { &[Path::Cpu] };
    let total = paths.len() * SWEEP.len();
    let mut k = 0;
    for &path in paths {
        for envs in SWEEP {
            k += 1;
            s.sweeping.set(Some(format!("{} · {envs} envs ({k}/{total})", path.as_str())));
            let setup = Setup { envs, seed: s.config.get_untracked().seed, policy: policy.clone() };
            let mut engine = Engine::new(path, gpu, &setup, GpuKnobs::default()).await?;
            engine.frame().await?; // warm-up: the first dispatch compiles the kernel
            let draw = |f: &FrameOut| {
                if let Some(canvas) = s.canvas.get_untracked() {
                    draw_grid(&canvas, &f.sample);
                }
            };
            if let Some(sps) = meter_engine(&mut engine, alive, (0.5, 20.0), draw).await? {
                s.points.update(|p| pg_engine::record(p, Measurement { path, envs, sps }));
            }
        }
    }
    Ok(())
}

/// Steps `engine` a frame per animation frame until it has been busy `budget.0` seconds
/// (and has a rate) or `budget.1` seconds have passed, and answers its steps per second.
async fn meter_engine(
    engine: &mut Engine,
    alive: &AtomicBool,
    budget: (f64, f64),
    mut on_frame: impl FnMut(&FrameOut),
) -> Result<Option<f64>, String> {
    let (mut meter, start) = (SpsMeter::default(), now_s());
    while alive.load(Ordering::Relaxed)
        && (meter.busy_s() < budget.0 || meter.sps().is_none())
        && now_s() - start < budget.1
    {
        let f = engine.frame().await?;
        meter.add(now_s(), f.tally.steps, f.busy_s, f64::INFINITY);
        on_frame(&f);
        next_frame().await;
    }
    Ok(meter.sps())
}

/// Rounds of a playground lesson: every setting measured once per round, in turn, so that
/// drift (another tab, a throttled GPU) hits all of them alike.
const LESSON_ROUNDS: usize = 2;

/// Measures each setting of a playground lesson on WebGPU, round after round, at the
/// form's env count, for about half a second each.
async fn measure_lesson(s: Sigs, gpu: Option<&Gpu>, lesson: PgLesson, alive: &AtomicBool) -> Result<(), String> {
    let gpu = gpu.ok_or("this lesson measures WebGPU dispatches, and this browser has no WebGPU")?;
    let cfg = s.config.get_untracked();
    let settings = lesson.settings();
    s.lesson_rows.update(|rows| {
        rows.retain(|r| r.lesson != lesson);
        rows.extend(settings.iter().map(|(setting, _)| LessonRow { lesson, setting: setting.clone(), rounds: vec![] }));
    });
    for round in 0..LESSON_ROUNDS {
        for (i, (setting, knobs)) in settings.iter().enumerate() {
            s.sweeping.set(Some(format!("{setting} (round {} of {LESSON_ROUNDS})", round + 1)));
            let setup = Setup { envs: cfg.envs, seed: cfg.seed, policy: Policy::Random };
            let mut engine = Engine::new(Path::WebGpu, Some(gpu), &setup, *knobs).await?;
            // Warm-up: the kernel compiles, and the frame grows to its length.
            for _ in 0..12 {
                if engine.frame().await?.busy_s > 0.012 {
                    break;
                }
            }
            if let Some(sps) = meter_engine(&mut engine, alive, (0.4, 10.0), |_| {}).await? {
                s.lesson_rows.update(|rows| {
                    if let Some(r) = rows.iter_mut().filter(|r| r.lesson == lesson).nth(i) {
                        r.rounds.push(sps);
                    }
                });
            }
        }
    }
    Ok(())
}

/// The loop: one engine at a time, a frame of stepping per animation frame.
async fn run_loop(s: Sigs, alive: Arc<AtomicBool>) {
    let gpu = find_gpu().await;
    s.webgpu.set(Some(gpu.as_ref().map(|g| g.adapter.clone()).map_err(Clone::clone)));
    let gpu = gpu.ok();
    let mut actors = HashMap::new();
    let mut engine: Option<(Config, Engine)> = None;
    let mut failed: Option<Config> = None;
    let (mut meter, mut tally, mut recorded_at) = (SpsMeter::default(), Tally::default(), 0.0);
    let mut sweeps_done = s.sweep_asked.get_untracked();
    while alive.load(Ordering::Relaxed) {
        let cfg = s.config.get_untracked();
        if s.sweep_asked.get_untracked() != sweeps_done {
            sweeps_done = s.sweep_asked.get_untracked();
            engine = None;
            let outcome = match policy_of(&cfg, &mut actors).await {
                Ok(policy) => sweep(s, gpu.as_ref(), &policy, &alive).await,
                Err(e) => Err(e),
            };
            s.sweeping.set(None);
            if let Err(e) = outcome {
                s.live.update(|l| l.error = Some(format!("sweep: {e}")));
            }
            continue;
        }
        if let Some(lesson) = s.lesson_asked.get_untracked() {
            s.lesson_asked.set(None);
            engine = None;
            let outcome = measure_lesson(s, gpu.as_ref(), lesson, &alive).await;
            s.sweeping.set(None);
            if let Err(e) = outcome {
                s.live.update(|l| l.error = Some(format!("{}: {e}", lesson.as_str())));
            }
            continue;
        }
        if s.paused.get_untracked() || failed.as_ref() == Some(&cfg) {
            next_frame().await;
            continue;
        }
        if engine.as_ref().map(|e| &e.0) != Some(&cfg) {
            s.live.set(Live { envs: cfg.envs, ..Live::default() });
            let built = match policy_of(&cfg, &mut actors).await {
                Ok(policy) => {
                    let setup = Setup { envs: cfg.envs, seed: cfg.seed, policy };
                    Engine::new(path_for(cfg.choice, gpu.as_ref()), gpu.as_ref(), &setup, cfg.knobs).await
                }
                Err(e) => Err(e),
            };
            match built {
                Ok(e) => {
                    engine = Some((cfg.clone(), e));
                    failed = None;
                    (meter, tally, recorded_at) = (SpsMeter::default(), Tally::default(), now_s());
                }
                Err(e) => {
                    s.live.set(Live { envs: cfg.envs, error: Some(e), ..Live::default() });
                    engine = None;
                    failed = Some(cfg);
                    continue;
                }
            }
        }
        let Some((_, e)) = engine.as_mut() else { continue };
        match e.frame().await {
            Ok(f) => {
                let now = now_s();
                meter.add(now, f.tally.steps, f.busy_s, 2.0);
                tally.add(f.tally);
                let path = e.path();
                s.live.set(Live { path: Some(path), envs: cfg.envs, sps: meter.sps(), tally, error: None });
                if let Some(canvas) = s.canvas.get_untracked() {
                    draw_grid(&canvas, &f.sample);
                }
                // The chart also keeps what the live loop measures, once a second.
                if let Some(sps) = meter.sps().filter(|_| now - recorded_at > 1.0 && meter.busy_s() > 0.25) {
                    recorded_at = now;
                    s.points.update(|p| pg_engine::record(p, Measurement { path, envs: cfg.envs, sps }));
                }
            }
            Err(err) => {
                s.live.set(Live { envs: cfg.envs, error: Some(err), ..Live::default() });
                engine = None;
                failed = Some(cfg);
            }
        }
        next_frame().await;
    }
}

#[component]
pub fn Playground() -> impl IntoView {
    let s = Sigs::new();
    let alive = Arc::new(AtomicBool::new(true));
    leptos::task::spawn_local(run_loop(s, alive.clone()));
    on_cleanup(move || alive.store(false, Ordering::Relaxed));

    let runs = finished_cartpole_runs();

    let envs_text = RwSignal::new("4096".to_string());
    let envs_error = RwSignal::new(None::<String>);
    let apply_envs = move || match pg_engine::parse_envs(&envs_text.get_untracked()) {
        Ok(n) => {
            envs_error.set(None);
            s.config.update(|c| c.envs = n);
        }
        Err(e) => envs_error.set(Some(e)),
    };
    let live = s.live;

    view! {
        <section class="panel playground" data-testid="playground">
            <h2>"Playground: CartPole in this browser"</h2>
            <p class="muted small">
                "Every env steps here: on WebGPU a WGSL kernel (the worker's f32 CartPole, its autoreset and random streams, the policy) runs "
                "many steps per dispatch with the state on the GPU; without WebGPU the worker's own batch env runs in wasm on the CPU. "
                "No run and no GPU box needed."
            </p>
            <div class="pg-form">
                <label>"path "
                    <select data-testid="pg-path" on:change=move |ev| {
                        let choice = match event_target_value(&ev).as_str() {
                            "webgpu" => Choice::WebGpu,
                            "cpu" => Choice::Cpu,
                            _ => Choice::Auto,
                        };
                        s.config.update(|c| c.choice = choice);
                    }>
                        <option value="auto">"auto (WebGPU when there is one)"</option>
                        <option value="webgpu" prop:disabled=move || !matches!(s.webgpu.get(), Some(Ok(_)))>"WebGPU"</option>
                        <option value="cpu">"wasm CPU"</option>
                    </select>
                </label>
                <label>"envs "
                    <input data-testid="pg-envs" type="text" inputmode="numeric" size="9" prop:value=move || envs_text.get()
                        on:input=move |ev| envs_text.set(event_target_value(&ev))
                        on:change=move |_| apply_envs()
                        on:keydown=move |ev: web_sys::KeyboardEvent| if ev.key() == "Enter" { apply_envs() }/>
                </label>
                <span class="pg-sizes">
                    {[1usize, 256, 4096, 65_536, 1_048_576].into_iter().map(|n| view! {
                        <button data-testid="pg-size" title=format!("{n} envs") on:click=move |_| { envs_text.set(n.to_string()); apply_envs(); }>{envs_label(n as f64)}</button>
                    }).collect_view()}
                </span>
                <label>"policy "
                    <select data-testid="pg-policy" on:change=move |ev| {
                        let id = event_target_value(&ev).parse::<u64>().ok();
                        s.config.update(|c| c.policy = id);
                    }>
                        <option value="random">"uniform random"</option>
                        {move || runs.get().into_iter().map(|r| view! {
                            <option value=r.id.to_string()>{format!("run #{} ({} steps, {})", r.id, si(r.spec.total_steps as f64), r.status.as_str())}</option>
                        }).collect_view()}
                    </select>
                </label>
                <label title="the most likely action instead of a draw from the policy">
                    <input type="checkbox" data-testid="pg-greedy" on:change=move |ev| {
                        let on = event_target_checked(&ev);
                        s.config.update(|c| c.greedy = on);
                    }/>" greedy"
                </label>
                <button data-testid="pg-pause" on:click=move |_| s.paused.update(|p| *p = !*p)>
                    {move || if s.paused.get() { "Resume" } else { "Pause" }}
                </button>
                <button data-testid="pg-sweep" prop:disabled=move || s.sweeping.with(Option::is_some)
                    on:click=move |_| s.sweep_asked.update(|n| *n += 1)>"Measure steps/s against N"</button>
            </div>
            <GpuKnobsForm s/>
            <p class="field-error" data-testid="pg-envs-error">{move || envs_error.get().unwrap_or_default()}</p>
            <p class="error" data-testid="pg-error">{move || live.with(|l| l.error.clone().unwrap_or_default())}</p>
            <PgTiles live/>
            <p class="muted small">
                <span data-testid="pg-adapter">{move || match s.webgpu.get() {
                    None => "looking for a WebGPU adapter…".to_string(),
                    Some(Ok(name)) => format!("WebGPU adapter: {name}"),
                    Some(Err(why)) => format!("No WebGPU: {why}. The CPU path runs."),
                }}</span>
                " · "{move || live.with(|l| format!("{} envs, {} env steps so far", l.envs, si(l.tally.steps as f64)))}
                " · steps/s counts stepping time (GPU: submit to read-back), not the wait for the next frame."
            </p>
            <p class="muted small" data-testid="pg-sweep-status">{move || s.sweeping.get().map(|t| format!("measuring {t}…")).unwrap_or_default()}</p>
            <PgViews s/>
        </section>
        <PgLessons s/>
    }
}

impl Sigs {
    fn new() -> Self {
        Sigs {
            config: RwSignal::new(Config {
                choice: Choice::Auto,
                envs: 4096,
                policy: None,
                greedy: false,
                seed: 1,
                knobs: GpuKnobs::default(),
            }),
            paused: RwSignal::new(false),
            live: RwSignal::new(Live::default()),
            webgpu: RwSignal::new(None),
            points: RwSignal::new(Vec::new()),
            sweep_asked: RwSignal::new(0),
            sweeping: RwSignal::new(None),
            lesson_asked: RwSignal::new(None),
            lesson_rows: RwSignal::new(Vec::new()),
            canvas: NodeRef::new(),
        }
    }
}

/// The lab's finished CartPole runs, newest first, as the list arrives: their actors can act
/// here.
fn finished_cartpole_runs() -> RwSignal<Vec<RunInfo>> {
    let runs = RwSignal::new(Vec::<RunInfo>::new());
    leptos::task::spawn_local(async move {
        if let Ok(list) = crate::api::get::<Vec<RunInfo>>("/api/runs").await {
            let usable = |r: &RunInfo| {
                r.spec.env() == EnvName::Cartpole && matches!(r.status, RunStatus::Finished | RunStatus::Stopped)
            };
            runs.set(list.into_iter().rev().filter(usable).collect());
        }
    });
    runs
}

/// The WebGPU path's knobs: steps per dispatch and when to read back.
#[component]
fn GpuKnobsForm(s: Sigs) -> impl IntoView {
    view! {
        <div class="pg-form">
            <label>"steps per dispatch (WebGPU) "
                <select data-testid="pg-steps-per-dispatch" on:change=move |ev| {
                    let k = event_target_value(&ev).parse::<u32>().ok();
                    s.config.update(|c| c.knobs.steps_per_dispatch = k);
                }>
                    <option value="auto" selected>"auto (fill a frame)"</option>
                    {STEPS_PER_DISPATCH.iter().map(|k| view! { <option value=k.to_string()>{k.to_string()}</option> }).collect_view()}
                </select>
            </label>
            <label>" read back "
                <select data-testid="pg-read-back" on:change=move |ev| {
                    let r = if event_target_value(&ev) == "every" { ReadBack::EveryDispatch } else { ReadBack::OncePerFrame };
                    s.config.update(|c| c.knobs.read_back = r);
                }>
                    <option value="frame" selected>"once per frame"</option>
                    <option value="every">"after every dispatch"</option>
                </select>
            </label>
        </div>
    }
}

/// The playground's figures: where it runs, steps/s, episode length and return, episodes.
#[component]
fn PgTiles(live: RwSignal<Live>) -> impl IntoView {
    let fmt_mean = move || live.with(|l| l.tally.mean_length().map_or("–".into(), |m| format!("{m:.1}")));
    view! {
        <div class="tiles">
            <div class="tile"><span class="label">"running on"</span><span class="value" data-testid="pg-backend">{move || live.with(|l| l.path.map_or("–", Path::as_str))}</span></div>
            <div class="tile"><span class="label">"steps/s"</span><span class="value" data-testid="pg-sps">{move || live.with(|l| l.sps.map_or("–".into(), si))}</span></div>
            <div class="tile"><span class="label">"mean episode length"</span><span class="value" data-testid="pg-mean-length">{fmt_mean}</span></div>
            <div class="tile"><span class="label">"mean return"</span><span class="value" data-testid="pg-mean-return">{fmt_mean}</span></div>
            <div class="tile"><span class="label">"episodes ended"</span><span class="value" data-testid="pg-episodes">{move || live.with(|l| l.tally.episodes.to_string())}</span></div>
        </div>
    }
}

/// The envs drawn, and steps/s against the env count: chart and table.
#[component]
fn PgViews(s: Sigs) -> impl IntoView {
    let lines = Signal::derive(move || {
        s.points.with(|p| {
            [(Path::WebGpu, "webgpu", (240, 160, 48)), (Path::Cpu, "wasm cpu", (90, 160, 230))]
                .into_iter()
                .map(|(path, name, color)| Line {
                    name: name.into(),
                    color,
                    points: p.iter().filter(|m| m.path == path).map(|m| (m.envs as f64, m.sps)).collect(),
                })
                .filter(|l| !l.points.is_empty())
                .collect()
        })
    });
    view! {
        <div class="pg-views">
            <canvas node_ref=s.canvas width="640" height="320" class="pg-canvas" data-testid="pg-canvas"></canvas>
            <div data-testid="pg-chart-wrap" data-points=move || s.points.with(Vec::len)>
                <Chart title="steps/s against envs (log–log)" testid="pg-chart" lines log=true/>
                <table class="pg-measurements">
                    <thead><tr><th>"path"</th><th class="num">"envs"</th><th class="num">"steps/s"</th></tr></thead>
                    <tbody>
                        {move || s.points.get().into_iter().map(|m| view! {
                            <tr data-testid="pg-measurement" data-path=m.path.as_str() data-envs=m.envs data-sps=m.sps.round()>
                                <td>{m.path.as_str()}</td><td class="num">{m.envs}</td><td class="num">{si(m.sps)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </div>
    }
}

/// The playground's lessons, each measured on this machine's GPU, with its table.
#[component]
fn PgLessons(s: Sigs) -> impl IntoView {
    let lesson_table = move |lesson: PgLesson| {
        view! {
            <table class="pg-measurements" data-testid=format!("pg-lesson-{}", lesson.as_str())>
                <thead><tr><th>"setting"</th><th class="num">"steps/s"</th><th class="num">"× the first"</th></tr></thead>
                <tbody>
                    {move || s.lesson_rows.with(|rows| {
                        let rows: Vec<&LessonRow> = rows.iter().filter(|r| r.lesson == lesson).collect();
                        let first = rows.first().and_then(|r| r.sps());
                        rows.iter().map(|r| {
                            let sps = r.sps();
                            let ratio = sps.zip(first).map_or("–".into(), |(x, f)| format!("×{:.2}", x / f));
                            view! {
                                <tr data-testid="pg-lesson-row" data-setting=r.setting.clone() data-sps=sps.map_or(0.0, f64::round)>
                                    <td>{r.setting.clone()}</td><td class="num">{sps.map_or("–".into(), si)}</td><td class="num">{ratio}</td>
                                </tr>
                            }
                        }).collect_view()
                    })}
                </tbody>
            </table>
        }
    };
    let busy = move || s.sweeping.with(Option::is_some);
    // One lesson: what it shows, the button that measures it, and its table.
    let card = move |lesson: PgLesson, title: &'static str, text: &'static str, button: &'static str| {
        view! {
            <div class="pg-lesson">
                <h3>{title}</h3>
                <p class="muted small">{text}</p>
                <button data-testid=format!("pg-lesson-{}-run", lesson.as_str()) prop:disabled=busy
                    on:click=move |_| s.lesson_asked.set(Some(lesson))>{button}</button>
                {lesson_table(lesson)}
            </div>
        }
    };
    view! {
        <section class="panel" data-testid="pg-lessons">
            <h2>"Lessons on this machine"</h2>
            {card(
                PgLesson::StepsPerDispatch,
                "Steps per dispatch (catalogue row 5: launch overhead)",
                "Every dispatch costs the same to record, submit and schedule, whether it steps every env once or a thousand times. Each frame runs dispatches of 1, 4, …, 1,024 steps until it holds about 20 ms of work, then reads back once: the steps/s show what a dispatch costs on this GPU.",
                "Measure each setting",
            )}
            {card(
                PgLesson::ReadBack,
                "Read back every dispatch or once per frame (catalogue row 4: a sync per step)",
                "One env step per dispatch. Reading the results back after each dispatch makes the page wait for the GPU every step; recording all of a frame's dispatches and reading back once lets them run back to back.",
                "Measure both",
            )}
        </section>
    }
}

//! `#/lessons` (the catalogue as cards, each with whether it shows on this machine),
//! `#/lesson/ID` (one lesson: its story, its parameters, and its latest run followed live,
//! side by side, ending in the verdicts) and `#/lessons?present=1` (the presenter's tour:
//! a lesson a screen in large type, forward and back with the arrow keys).
//!
//! The lesson's parameters live in the URL, so a link opens the same lesson as it was
//! set. Anyone sees the newest run of a lesson (a class follows the operator's); only the
//! operator starts one.

use crate::audits::AuditTable;
use crate::format::si;
use crate::route::{LessonLink, Route, Tour};
use hotlab_protocol::{AuditInfo, LessonChecks};
use hotlab_report::lessons;
use hotlab_report::lessons::{Check, Lesson, Params};
use hotlab_spec::knobs;
use leptos::prelude::*;
use std::time::Duration;

/// The first sentence of a lesson's story.
fn lead(l: &Lesson) -> &str {
    l.phenomenon.split_once(". ").map_or(l.phenomenon, |(first, _)| first)
}

/// What a lesson's card says of this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Its check found the signature here.
    Shows,
    /// Its check ran and the signature did not show.
    NotShown,
    /// It needs a GPU this machine lacks (with what a GPU measured, where known).
    NeedsGpu,
    /// Its check could not measure.
    Failed,
    /// Not checked here yet.
    Unchecked,
}

impl Seen {
    fn class(self) -> &'static str {
        match self {
            Seen::Shows => "seen shows",
            Seen::NotShown => "seen not-shown",
            Seen::NeedsGpu => "seen gpu",
            Seen::Failed => "seen failed",
            Seen::Unchecked => "seen unchecked",
        }
    }
}

/// What a GPU measured for the lesson, labelled with the device and the day (the
/// repository's record, `hotlab lesson check --record` on a GPU box), with the lesson's own
/// note on it (why a bottleneck does not show there, say); else the note alone, else that
/// nothing has been recorded: never an empty cell.
pub fn on_a_gpu(lesson: &Lesson) -> String {
    match (lessons::gpu_result(lesson.id), lesson.on_gpu) {
        (Some(r), Some(note)) => format!("{}; {note}", r.line()),
        (Some(r), None) => r.line(),
        (None, Some(note)) => note.to_string(),
        (None, None) => "no figure recorded on a GPU for this lesson yet".into(),
    }
}

/// The check's line on a lesson's card: from this machine's check, else what a GPU measured
/// for a lesson that needs one, else that it has not been checked.
pub fn seen(lesson: &Lesson, check: Option<&Check>, cuda: bool) -> (Seen, String) {
    let (seen, line) = seen_here(lesson, check, cuda);
    // Where it shows depends on the CPU: said beside what this machine found.
    match (seen, lesson.on_cpu) {
        (Seen::NeedsGpu, _) | (_, None) => (seen, line),
        (_, Some(note)) => (seen, format!("{line}; {note}")),
    }
}

fn seen_here(lesson: &Lesson, check: Option<&Check>, cuda: bool) -> (Seen, String) {
    let figures = |c: &Check| c.figures.iter().map(|f| si(f.value)).collect::<Vec<_>>().join(" → ");
    let gpu = || format!("needs a GPU; {}", on_a_gpu(lesson));
    match check {
        Some(c) if c.skipped.is_some() => (Seen::NeedsGpu, gpu()),
        Some(c) if c.error.is_some() => {
            let e = c.error.as_deref().unwrap_or_default();
            (Seen::Failed, format!("the check failed here: {}", e.lines().last().unwrap_or(e)))
        }
        Some(c) if c.shows => (Seen::Shows, format!("shows here: {} {}", c.measure, figures(c))),
        Some(c) => (Seen::NotShown, format!("did not show here: {} {}", c.measure, figures(c))),
        None if lesson.needs_gpu() && !cuda => (Seen::NeedsGpu, gpu()),
        None => (Seen::Unchecked, "not checked on this machine yet".into()),
    }
}

/// This machine's lesson checks, asked again every 2 s while one runs.
fn follow_checks(checks: RwSignal<Option<LessonChecks>>) {
    let ask = move || {
        leptos::task::spawn_local(async move {
            if let Ok(c) = crate::api::get::<LessonChecks>("/api/lessons/checks").await {
                checks.try_set(Some(c));
            }
        })
    };
    ask();
    let running = move || checks.try_with_untracked(|c| c.as_ref().is_some_and(|c| c.running.is_some()));
    if let Ok(handle) = set_interval_with_handle(
        move || {
            if running().unwrap_or(false) {
                ask();
            }
        },
        Duration::from_secs(2),
    ) {
        on_cleanup(move || handle.clear());
    }
}

/// The catalogue as cards: each lesson's row, title, phenomenon in a line, and what its
/// check found on this machine; with the button that checks them all (the operator's).
#[component]
pub fn LessonCards(operator: Signal<bool>, #[prop(optional)] compact: bool) -> impl IntoView {
    let checks = RwSignal::new(None::<LessonChecks>);
    let cuda = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    follow_checks(checks);
    leptos::task::spawn_local(async move {
        if let Ok(s) = crate::api::get::<hotlab_protocol::system::SystemInfo>("/api/system").await {
            cuda.try_set(s.cuda_available);
        }
    });
    let check_all = move |_| {
        error.set(None);
        leptos::task::spawn_local(async move {
            match crate::api::post::<LessonChecks>("/api/lessons/checks", "{}").await {
                Ok(c) => checks.set(Some(c)),
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    let running = move || checks.with(|c| c.as_ref().and_then(|c| c.running.clone().map(|r| (r, c.left))));
    let checked = move || checks.with(|c| c.as_ref().map_or(0, |c| c.checks.len()));
    view! {
        <div class=if compact { "cards lesson-cards compact" } else { "cards lesson-cards" }>
            {lessons::LESSONS.iter().map(|l| {
                let line = move || {
                    checks.with(|c| {
                        let check = c.as_ref().and_then(|c| c.checks.iter().find(|k| k.lesson == l.id));
                        seen(l, check, cuda.get())
                    })
                };
                view! {
                    <a class="card" data-testid="lesson-card" data-lesson=l.id href=format!("#/lesson/{}", l.id)>
                        <span class="row">"row "{l.row}{l.needs_gpu().then_some(" · needs a GPU")}</span>
                        <h3>{l.title}</h3>
                        {(!compact).then(|| view! { <p>{lead(l)}"."</p> })}
                        <p class=move || line().0.class() data-testid="lesson-seen">{move || line().1}</p>
                    </a>
                }
            }).collect_view()}
        </div>
        <p class="checks-line" data-testid="lesson-checks">
            {move || match running() {
                Some((lesson, left)) => format!("checking {lesson} on this machine ({left} after it)… "),
                None => checks.with(|c| c.as_ref().map_or(String::new(), |c| match c.checked_ms {
                    Some(_) => format!("{} of {} lessons checked on {}. ", c.checks.len(), lessons::LESSONS.len(), c.machine),
                    None => format!("Not checked on {} yet. ", c.machine),
                })),
            }}
            <button data-testid="check-lessons" prop:disabled=move || !operator.get() || running().is_some()
                on:click=check_all>{move || if checked() == 0 { "Check this machine" } else { "Check again" }}</button>
            <span class="muted">" trains each lesson's slow setting and fixes for half a second: about a minute in all"</span>
            <span class="error">{move || error.get().unwrap_or_default()}</span>
        </p>
    }
}

#[component]
pub fn LessonsList(operator: Signal<bool>) -> impl IntoView {
    view! {
        <section class="panel">
            <h2>"Lessons"</h2>
            <p class="muted">"Each lesson runs a bottleneck's slow setting and its fix side by side, interleaved, and ends with the measured verdict. "
                <a href="#/lessons?present=1" data-testid="tour-link">"Present them"</a>" one per screen."</p>
            <LessonCards operator/>
        </section>
    }
}

/// The presenter's tour: the lesson at `tour.at` in presenter mode, with the way forward
/// and back (buttons and the arrow keys).
#[component]
pub fn Tour(tour: Tour, operator: Signal<bool>, go: Callback<Route>) -> impl IntoView {
    let count = lessons::LESSONS.len();
    let at = tour.at.clamp(1, count);
    let lesson = &lessons::LESSONS[at - 1];
    let step = {
        let tour = tour.clone();
        move |to: usize| go.run(Route::Tour(Tour { at: to, ..tour.clone() }))
    };
    let (back, forward) = (step.clone(), step.clone());
    let keys = window_event_listener(leptos::ev::keydown, move |ev| {
        // Not while typing in a field.
        let typing =
            ev.target().and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlInputElement>(t).ok()).is_some();
        match ev.key().as_str() {
            "ArrowRight" | "PageDown" if !typing && at < count => step(at + 1),
            "ArrowLeft" | "PageUp" if !typing && at > 1 => step(at - 1),
            _ => {}
        }
    });
    on_cleanup(move || keys.remove());
    let link = LessonLink {
        id: lesson.id.to_string(),
        repeats: tour.repeats.clone(),
        seconds: tour.seconds.clone(),
        present: true,
        ..LessonLink::default()
    };
    view! {
        <nav class="tour" data-testid="tour">
            <button data-testid="tour-back" prop:disabled=at == 1 on:click=move |_| back(at - 1)>"← back"</button>
            <span class="tour-at" data-testid="tour-at">{format!("{at} / {count}")}</span>
            <button data-testid="tour-forward" prop:disabled=at == count on:click=move |_| forward(at + 1)>"forward →"</button>
            <a href="#/lessons">"leave the tour"</a>
        </nav>
        <LessonView link operator go/>
    }
}

/// The parameters a link carries, as the API takes them.
pub fn params(link: &LessonLink) -> Params {
    Params {
        settings: link.settings.clone(),
        repeats: link.repeats.as_deref().and_then(|r| r.trim().parse().ok()),
        seconds: link.seconds.as_deref().and_then(|s| s.trim().parse().ok()),
    }
}

/// A knob's value in the lesson as linked: the link's, else the lesson's baseline's.
fn value_of(lesson: &Lesson, link: &LessonLink, name: &str) -> String {
    link.settings.get(name).cloned().or_else(|| lesson.baseline.get(name)).unwrap_or_default()
}

#[component]
pub fn LessonView(link: LessonLink, operator: Signal<bool>, go: Callback<Route>) -> impl IntoView {
    let Some(lesson) = lessons::find(&link.id) else {
        return view! {
            <section class="panel"><p class="error" data-testid="lesson-error">{format!("No lesson '{}'. ", link.id)}<a href="#/lessons">"The lessons"</a></p></section>
        }
        .into_any();
    };
    let audit = RwSignal::new(None::<AuditInfo>);
    let error = RwSignal::new(None::<String>);
    let id = lesson.id;
    follow_newest_audit(id, audit, error);
    let link = StoredValue::new(link);
    let set = move |key: &'static str, name: String, value: String| {
        let mut l = link.get_value();
        match key {
            "repeats" => l.repeats = Some(value),
            "seconds" => l.seconds = Some(value),
            _ => {
                l.settings.insert(name, value);
            }
        }
        go.run(Route::Lesson(l));
    };
    let start = move |_| {
        let body = serde_json::to_string(&params(&link.get_value())).unwrap_or_default();
        leptos::task::spawn_local(async move {
            match crate::api::post::<AuditInfo>(&format!("/api/lessons/{id}"), &body).await {
                Ok(a) => {
                    error.set(None);
                    audit.set(Some(a));
                }
                Err(e) => {
                    error.set(Some(format!("{}{}", e.field.map_or(String::new(), |f| format!("{f}: ")), e.message)))
                }
            }
        });
    };
    let present = link.with_value(|l| l.present);
    let shown: Vec<(&'static str, String)> = link.with_value(|l| {
        lesson
            .baseline
            .knobs()
            .into_iter()
            .filter(|(k, _)| !l.hide.iter().any(|h| h == k))
            .map(|(k, _)| (k, value_of(lesson, l, k)))
            .collect()
    });
    let budget = link.with_value(|l| {
        (
            l.repeats.clone().unwrap_or(lesson.budget.repeats.to_string()),
            l.seconds.clone().unwrap_or(lesson.budget.seconds.to_string()),
        )
    });
    view! {
        <div class=if present { "lesson presenter" } else { "lesson" } data-testid="lesson">
            <LessonStory lesson/>
            <section class="panel params">
                <h3>"The slow setting"</h3>
                <div class="fields">
                    {shown.into_iter().map(|(name, value)| {
                        let help = knobs::find(name).map_or("", |k| k.help);
                        view! {
                            <label title=help>{name}
                                <input data-testid=format!("lesson-knob-{name}") prop:value=value
                                    on:change=move |ev| set("knob", name.to_string(), event_target_value(&ev))/>
                            </label>
                        }
                    }).collect_view()}
                    <label>"repeats"<input data-testid="lesson-repeats" prop:value=budget.0 on:change=move |ev| set("repeats", String::new(), event_target_value(&ev))/></label>
                    <label>"seconds per run"<input data-testid="lesson-seconds" prop:value=budget.1 on:change=move |ev| set("seconds", String::new(), event_target_value(&ev))/></label>
                </div>
                <button data-testid="lesson-run" prop:disabled=move || !operator.get() on:click=start>"Run this lesson"</button>
                {move || (!operator.get()).then(|| view! { <span class="muted">" viewers follow the operator's runs"</span> })}
                <p class="error" data-testid="lesson-message">{move || error.get().unwrap_or_default()}</p>
            </section>
            <SideBySide lesson audit/>
        </div>
    }
    .into_any()
}

/// Keeps `audit` at the lesson's newest audit, asked for every second while the page shows.
fn follow_newest_audit(id: &'static str, audit: RwSignal<Option<AuditInfo>>, error: RwSignal<Option<String>>) {
    let refresh = move || {
        leptos::task::spawn_local(async move {
            match crate::api::get::<Vec<AuditInfo>>(&format!("/api/audits?lesson={id}&limit=1")).await {
                // The page may be gone by the time the answer comes.
                Ok(mut newest) => {
                    let a = newest.pop();
                    if audit.try_with_untracked(|old| old != &a).unwrap_or(false) {
                        audit.try_set(a);
                    }
                }
                Err(e) => {
                    error.try_set(Some(e.message));
                }
            }
        })
    };
    refresh();
    if let Ok(handle) = set_interval_with_handle(refresh, Duration::from_secs(1)) {
        on_cleanup(move || handle.clear());
    }
}

/// The lesson's story: the phenomenon, where to look, the fixes and what a GPU showed.
#[component]
fn LessonStory(lesson: &'static Lesson) -> impl IntoView {
    let fixes = lesson.fixes().join(" · ");
    view! {
        <section class="panel story">
            <p class="muted"><a href="#/lessons">"Lessons"</a>" · catalogue row "{lesson.row}</p>
            <h2 data-testid="lesson-title">{lesson.title}</h2>
            <p>{lesson.phenomenon}</p>
            <p><strong>"Look at: "</strong>{lesson.look_at}</p>
            <p><strong>"The fixes: "</strong><code>{fixes}</code></p>
            <p class="muted" data-testid="gpu-result"><strong>"On a GPU: "</strong>{on_a_gpu(lesson)}</p>
        </section>
    }
}

/// The lesson's newest audit side by side, and whether its bottleneck showed.
#[component]
fn SideBySide(lesson: &'static Lesson, audit: RwSignal<Option<AuditInfo>>) -> impl IntoView {
    let (measure, unit) = (lesson.signature.measure, lesson.signature.text);
    view! {
        <section class="panel">
            <h3>"Side by side"</h3>
            <crate::guide::Explain section="verdicts"/>
            {move || match audit.get() {
                None => view! { <p class="muted" data-testid="lesson-idle">"This lesson has not run yet."</p> }.into_any(),
                Some(a) => {
                    let shows = a.shows;
                    let audit = Signal::derive(move || audit.get().unwrap_or_default());
                    view! {
                        <AuditTable audit measure unit/>
                        {shows.map(|s| view! {
                            <p class="signature" data-testid="lesson-shows">{if s { "The bottleneck showed: " } else { "The bottleneck did NOT show: " }}{unit}</p>
                        })}
                    }.into_any()
                }
            }}
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_gives_the_lessons_parameters() {
        let mut link = LessonLink { id: "per-item-sync".into(), repeats: Some("2".into()), ..LessonLink::default() };
        link.settings.insert("envs".into(), "32".into());
        let p = params(&link);
        assert_eq!((p.repeats, p.seconds, p.settings["envs"].as_str()), (Some(2), None, "32"));
        let lesson = lessons::find("per-item-sync").unwrap();
        assert_eq!(value_of(lesson, &link, "envs"), "32");
        assert_eq!(value_of(lesson, &link, "action_sync"), "per_item");
        assert!(lead(lesson).starts_with("Reading sampled actions") && !lead(lesson).contains(". "));
    }

    #[test]
    fn a_lesson_says_what_a_gpu_measured_or_that_nothing_is_recorded() {
        let recorded = lessons::find("per-item-sync").unwrap();
        assert!(on_a_gpu(recorded)
            .starts_with("measured on an NVIDIA H100 80GB HBM3, 2026-11-28: action_sync=stacked confirmed ×1.40 "));
        let explained = lessons::find("env-on-device").unwrap();
        let line = on_a_gpu(explained);
        assert!(
            line.contains("backend=device regression ×0.32") && line.ends_with(explained.on_gpu.unwrap()),
            "{line}"
        );
        let noted = Lesson { id: "not-recorded", on_gpu: Some("a note"), ..recorded.clone() };
        assert_eq!(on_a_gpu(&noted), "a note");
        let bare = Lesson { id: "not-recorded", on_gpu: None, ..recorded.clone() };
        assert_eq!(on_a_gpu(&bare), "no figure recorded on a GPU for this lesson yet");
        let (seen_as, line) =
            seen(&Lesson { baseline: lessons::Baseline::new(|s| s.device = "cuda".into()), ..bare }, None, false);
        assert_eq!(
            (seen_as, line.as_str()),
            (Seen::NeedsGpu, "needs a GPU; no figure recorded on a GPU for this lesson yet")
        );
    }

    /// A lesson whose bottleneck depends on the CPU says on which CPUs it shows, beside
    /// what this machine's check found (or that it has not checked); one that does not, only
    /// the check.
    #[test]
    fn a_lesson_says_on_which_cpus_it_shows() {
        let conv = lessons::find("conv-layout").unwrap();
        let (seen_as, line) = seen(conv, None, false);
        assert_eq!(seen_as, Seen::Unchecked);
        assert!(line.starts_with("not checked on this machine yet; it shows on CPUs with AVX-512"), "{line}");
        let precision = lessons::find("precision").unwrap();
        assert!(seen(precision, None, false).1.contains("elsewhere it is emulated"));
        let plain = lessons::find("rnn-sequence").unwrap();
        assert_eq!(seen(plain, None, false).1, "not checked on this machine yet");
    }
}

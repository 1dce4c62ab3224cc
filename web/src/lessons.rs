//! `#/lessons` (the catalogue as cards) and `#/lesson/ID` (one lesson: its story, its
//! parameters, and its latest run followed live, side by side, ending in the verdicts).
//!
//! The lesson's parameters live in the URL, so a link opens the same lesson as it was
//! set. Anyone sees the newest run of a lesson (a class follows the operator's); only the
//! operator starts one.

use crate::audits::AuditTable;
use crate::route::{LessonLink, Route};
use hotlab_shared::knobs;
use hotlab_shared::lessons::{self, Lesson, Params};
use hotlab_shared::protocol::AuditInfo;
use leptos::prelude::*;
use std::time::Duration;

/// The first sentence of a lesson's story.
fn lead(l: &Lesson) -> &str {
    l.phenomenon.split_once(". ").map_or(l.phenomenon, |(first, _)| first)
}

#[component]
pub fn LessonsList() -> impl IntoView {
    view! {
        <section class="panel">
            <h2>"Lessons"</h2>
            <p class="muted">"Each lesson runs a bottleneck's slow setting and its fix side by side, interleaved, and ends with the measured verdict."</p>
            <div class="cards">
                {lessons::LESSONS.iter().map(|l| view! {
                    <a class="card" data-testid="lesson-card" href=format!("#/lesson/{}", l.id)>
                        <span class="row">"row "{l.row}{l.needs_gpu().then_some(" · needs a GPU")}</span>
                        <h3>{l.title}</h3>
                        <p>{lead(l)}"."</p>
                    </a>
                }).collect_view()}
            </div>
        </section>
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
    link.settings
        .get(name)
        .cloned()
        .or_else(|| lesson.baseline.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string()))
        .unwrap_or_default()
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
            .iter()
            .filter(|(k, _)| !l.hide.iter().any(|h| h == k))
            .map(|(k, _)| (*k, value_of(lesson, l, k)))
            .collect()
    });
    let budget = link.with_value(|l| {
        (
            l.repeats.clone().unwrap_or(lesson.budget.repeats.to_string()),
            l.seconds.clone().unwrap_or(lesson.budget.seconds.to_string()),
        )
    });
    let fixes = lesson.variants.join(" · ");
    let measure = lesson.signature.measure;
    let unit = lesson.signature.text;
    view! {
        <div class=if present { "lesson presenter" } else { "lesson" } data-testid="lesson">
            <section class="panel story">
                <p class="muted"><a href="#/lessons">"Lessons"</a>" · catalogue row "{lesson.row}</p>
                <h2 data-testid="lesson-title">{lesson.title}</h2>
                <p>{lesson.phenomenon}</p>
                <p><strong>"Look at: "</strong>{lesson.look_at}</p>
                <p><strong>"The fixes: "</strong><code>{fixes}</code></p>
            </section>
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
            <section class="panel">
                <h3>"Side by side"</h3>
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
        </div>
    }
    .into_any()
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
}

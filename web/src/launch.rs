//! The launch panel: every `RunSpec` knob in its group (a workload's own settings only for
//! that workload), presets, and the server's validation message next to the field it
//! names. The form edits the nested spec as JSON, each knob at its path.

use crate::api::{self, ApiError};
use hotlab_core::knob::{workload_name, Knob, KnobKind};
use hotlab_core::run_knobs::GROUPS;
use hotlab_protocol::suggestions::Suggestions;
use hotlab_spec::knobs::KNOBS;
use hotlab_spec::{presets, PresetSpec};
use hotlab_specs::suggested_knobs;
use hotlab_specs::AnyPreset;
use hotlab_specs::EnvName;
use leptos::prelude::*;
use serde_json::{Map, Value};
use std::collections::HashMap;

pub type Spec = Map<String, Value>;

/// A preset's spec as JSON fields.
pub fn preset(p: &AnyPreset) -> Spec {
    serde_json::to_value(p.spec()).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default()
}

/// A field's value as the form shows it.
pub fn shown(v: Option<&Value>) -> String {
    hotlab_core::knob::text(v)
}

/// POSTs a spec (to `machine`, or any free one when None); the new run's id.
pub async fn launch(spec: &Spec, machine: Option<&str>) -> Result<u64, ApiError> {
    let mut body = spec.clone();
    if let Some(m) = machine {
        body.insert("machine".into(), Value::from(m));
    }
    let body = Value::Object(body).to_string();
    let created: Value = api::post("/api/runs", &body).await?;
    created["id"].as_u64().ok_or_else(|| ApiError::from_body(201, &created.to_string()))
}

/// The datalist a text field offers its values from: a workload's suggested knob's.
fn suggested(knob: &'static Knob) -> Option<String> {
    suggested_knobs().any(|(_, k)| k.name == knob.name).then(|| datalist_id(knob))
}

fn datalist_id(knob: &Knob) -> String {
    format!("{}-values", knob.name)
}

/// A workload's suggested knob: the values this machine offers for it
/// (`GET /api/knobs/{knob}/suggestions`) as the field's datalist, and a line per group
/// saying how many there are, or what installs a missing one (for gym: MuJoCo's, Box2D's).
/// Asked for when its workload is first picked.
#[component]
fn Suggested(workload: EnvName, knob: &'static Knob, env: Memo<Option<EnvName>>) -> impl IntoView {
    let found = RwSignal::new(None::<Result<Suggestions, String>>);
    Effect::new(move |asked: Option<bool>| {
        let wanted = env.get() == Some(workload);
        if wanted && asked != Some(true) {
            leptos::task::spawn_local(async move {
                let url = format!("/api/knobs/{}/suggestions", knob.name);
                let answer = api::get::<Suggestions>(&url).await.map_err(|e| e.message);
                let _ = found.try_set(Some(answer));
            });
        }
        wanted || asked == Some(true)
    });
    let groups = move || match found.get() {
        None => vec![view! { <li class="muted">"asking this machine…"</li> }.into_any()],
        Some(Err(e)) => vec![view! { <li class="error">{e}</li> }.into_any()],
        Some(Ok(s)) => match &s.error {
            Some(e) => vec![view! { <li class="error">{format!("{}: {e}", s.source)}</li> }.into_any()],
            None => s
                .groups
                .iter()
                .map(|g| {
                    view! { <li class:muted=g.missing.is_some() data-group=g.group.clone()>{s.line(g)}</li> }.into_any()
                })
                .collect(),
        },
    };
    let options = move || {
        found.with(|f| match f {
            Some(Ok(s)) => s.usable().map(|v| view! { <option value=v.to_string()/> }).collect_view(),
            _ => Vec::new().into_iter().collect_view(),
        })
    };
    let source = move || found.with(|f| f.as_ref().and_then(|f| f.as_ref().ok()).map(|s| s.source.clone()));
    view! {
        <div class="suggestions" data-testid="suggestions" data-knob=knob.name
            style:display=move || if env.get() == Some(workload) { "" } else { "none" }>
            <datalist id=datalist_id(knob)>{options}</datalist>
            <span class="muted">
                {format!("{} offers what can be used here", knob.name)}
                {move || source().map(|s| format!(" ({s})"))}":"
            </span>
            <ul>{groups}</ul>
        </div>
    }
}

#[component]
fn Field(
    knob: &'static Knob,
    spec: RwSignal<Spec>,
    env: Memo<Option<EnvName>>,
    errors: RwSignal<HashMap<String, String>>,
) -> impl IntoView {
    let name = knob.name;
    let value = move || spec.with(|s| shown(knob.get(s).as_ref()));
    let set = move |text: String| {
        spec.update(|s| knob.set(s, knob.kind.value(&text)));
        errors.update(|e| {
            e.remove(name);
        });
    };
    let input = match knob.kind {
        KnobKind::Bool => view! {
            <input type="checkbox" name=name prop:checked=move || value() == "true"
                on:change=move |ev| set(event_target_checked(&ev).to_string())/>
        }
        .into_any(),
        KnobKind::Choice(options) => view! {
            <select name=name prop:value=value on:change=move |ev| set(event_target_value(&ev))>
                {options.iter().map(|&o| view! { <option value=o selected=move || value() == o>{o}</option> }).collect_view()}
            </select>
        }
        .into_any(),
        _ => view! {
            <input type="text" name=name list=suggested(knob) prop:value=value on:change=move |ev| set(event_target_value(&ev))/>
        }
        .into_any(),
    };
    let error = move || errors.with(|e| e.get(name).cloned());
    view! {
        <label class="knob" class:invalid=move || error().is_some() title=knob.help
            style:display=move || if env.get().is_none_or(|e| knob.applies_to(e.as_str())) { "" } else { "none" }>
            <span class="name">{name}</span>
            {input}
            <span class="help">{knob.help}{knob.allowed().map(|a| format!(" ({a})"))}</span>
            <span class="field-error" data-testid=format!("error-{name}")>{move || error().unwrap_or_default()}</span>
        </label>
    }
}

/// A workload that runs its user's own command (`--env external`): whether this lab runs
/// them (`hotlab serve --allow-scripts`), asked of `/api/system` when it is first picked.
/// Returns whether launching is allowed as far as the form knows (refused: the lab says no).
#[component]
fn ScriptNote(env: Memo<Option<EnvName>>, allowed: RwSignal<Option<bool>>) -> impl IntoView {
    let shown = move || env.get().is_some_and(|e| e.runs_commands());
    Effect::new(move |asked: Option<bool>| {
        if shown() && asked != Some(true) {
            leptos::task::spawn_local(async move {
                if let Ok(info) = api::get::<hotlab_protocol::system::SystemInfo>("/api/system").await {
                    let _ = allowed.try_set(Some(info.scripts.unwrap_or(false)));
                }
            });
            return true;
        }
        asked == Some(true)
    });
    move || {
        shown().then(|| match allowed.get() {
            Some(true) => view! {
                <p class="note" data-testid="script-note">
                    "Your script runs on the machine as you give it, unmodified, under hotlab's probe: its output \
                     goes to the run's log, its time to the table below. This lab was started with "
                    <code>"--allow-scripts"</code>"."
                </p>
            }
            .into_any(),
            _ => view! {
                <p class="note error" data-testid="script-note">
                    "This lab runs no commands of its users. To profile your own script, start it with "
                    <code>"hotlab serve --allow-scripts"</code>
                    " (anyone with the operator token then runs any command on its machines)."
                </p>
            }
            .into_any(),
        })
    }
}

#[component]
pub fn LaunchPanel(
    operator: Signal<bool>,
    /// The form's spec (the home sets it to a preset's).
    spec: RwSignal<Spec>,
    /// The preset it started from.
    picked: RwSignal<&'static str>,
    on_launched: Callback<u64>,
    on_sweep: Callback<u64>,
) -> impl IntoView {
    // The workload's own fields show only for it (a memo: fields re-render when it changes).
    let env = Memo::new(move |_| spec.with(|s| workload_name(s)?.parse::<EnvName>().ok()));
    let errors = RwSignal::new(HashMap::<String, String>::new());
    let general = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let machine = RwSignal::new(String::new());
    let machine_error = Signal::derive(move || errors.with(|e| e.get("machine").cloned()));
    let scripts = RwSignal::new(None::<bool>);
    let refused = move || env.get().is_some_and(|e| e.runs_commands()) && scripts.get() != Some(true);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        busy.set(true);
        general.set(None);
        let body = spec.get_untracked();
        let to = machine.get_untracked();
        leptos::task::spawn_local(async move {
            match launch(&body, Some(to.as_str()).filter(|m| !m.is_empty())).await {
                Ok(id) => on_launched.run(id),
                Err(e) => match e.field.filter(|f| f == "machine" || KNOBS.iter().any(|k| k.name == f)) {
                    Some(field) => errors.update(|m| {
                        m.insert(field, e.message);
                    }),
                    None => general.set(Some(e.message)),
                },
            }
            busy.set(false);
        });
    };
    let presets = presets::all().map(|p| {
        view! {
            <button type="button" class="preset" title=p.about on:click=move |_| {
                spec.set(preset(p));
                picked.set(p.name);
                errors.set(HashMap::new());
            }>{p.name}</button>
        }
    });
    view! {
        <form class="launch" data-testid="launch-form" on:submit=submit>
            <div class="presets"><span class="muted">"presets "</span>{presets.collect_view()}</div>
            <fieldset class="knobs" prop:disabled=move || !operator.get()>
                {GROUPS.iter().map(|&group| view! {
                    <fieldset class="group">
                        <legend>{group}</legend>
                        {KNOBS.iter().filter(|k| k.group == group).map(|k| view! { <Field knob=k spec env errors/> }).collect_view()}
                    </fieldset>
                }).collect_view()}
            </fieldset>
            {suggested_knobs().map(|(workload, knob)| view! { <Suggested workload knob env/> }).collect_view()}
            <ScriptNote env allowed=scripts/>
            <fieldset class="group" prop:disabled=move || !operator.get()>
                <legend>"placement"</legend>
                <crate::machines::MachineSelect machine error=machine_error/>
            </fieldset>
            <div class="actions">
                <button type="submit" data-testid="launch-button" prop:disabled=move || !operator.get() || busy.get() || refused()>
                    "Launch run"
                </button>
                {move || (!operator.get()).then(|| view! {
                    <span class="hint" data-testid="launch-hint">
                        "Watching only: launching needs the operator token. Open the URL that "
                        <code>"hotlab serve"</code>" printed (it ends in ?token=…)."
                    </span>
                })}
                <span class="error" data-testid="launch-error">{move || general.get().unwrap_or_default()}</span>
            </div>
            <crate::sweeps::SweepLine operator spec on_started=on_sweep/>
        </form>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_text_becomes_typed_json_and_back() {
        assert_eq!(KnobKind::Int.value(" 8 "), Value::from(8u64));
        assert_eq!(KnobKind::Int.value("eight"), Value::from("eight"), "left for the server to name");
        assert_eq!(KnobKind::Float.value("2.5e-4"), Value::from(2.5e-4));
        assert_eq!(KnobKind::IntList.value("64, 64"), serde_json::json!([64, 64]));
        assert_eq!(KnobKind::OptionalText.value(""), Value::Null);
        assert_eq!(KnobKind::Bool.value("true"), Value::Bool(true));
        let spec = preset(presets::default());
        let get = |spec: &Spec, name| shown(hotlab_spec::knobs::find(name).unwrap().get(spec).as_ref());
        assert_eq!(get(&spec, "hidden"), "64,64");
        assert_eq!(get(&spec, "backend"), "vectorized");
        assert_eq!(get(&spec, "env"), "cartpole");
        let proof = preset(AnyPreset::find("proof").unwrap());
        assert_eq!(get(&proof, "queries"), "");
        assert_eq!(get(&proof, "proof_depth"), "10");
        for (spec, env) in [(&spec, EnvName::Cartpole), (&proof, EnvName::Proof)] {
            for k in KNOBS.iter().filter(|k| k.applies_to(env.as_str())) {
                assert!(k.get(spec).is_some(), "{} is a field of a {env} spec", k.name);
            }
        }
    }
}

//! Audits on screen: the settings an audit compares with their measured steps/s, phase
//! split and (for a lesson) the signature's figure, and each change's verdict. The run
//! view and the lesson page both show them.

use crate::format::si;
use hotlab_core::profile::Profile;
use hotlab_protocol::{AuditInfo, RunStatus, TuneStep};
use hotlab_report::audit::{ChangeResult, Verdict};
use hotlab_report::lessons::Measure;
use leptos::prelude::*;

/// One setting of an audit: what its finished runs measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SettingRow {
    pub setting: String,
    /// Runs finished, of the runs the plan has for it.
    pub done: usize,
    pub planned: usize,
    /// Median steps/s of its finished runs.
    pub sps: Option<f64>,
    /// Its newest finished run's profile.
    pub profile: Option<Profile>,
    /// The signature's figure of that profile.
    pub figure: Option<f64>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// The baseline, then each change, with what their finished runs measured.
pub fn setting_rows(a: &AuditInfo, measure: Option<Measure>) -> Vec<SettingRow> {
    let per_repeat = 2 + 2 * a.changes.len();
    let names = std::iter::once("baseline".to_string()).chain(a.changes.iter().map(|c| c.change.clone()));
    names
        .enumerate()
        .map(|(i, setting)| {
            let runs: Vec<_> =
                a.runs.iter().filter(|r| r.setting == setting).filter_map(|r| r.measured.as_ref()).collect();
            let profile = runs.last().map(|m| m.profile.clone());
            SettingRow {
                done: runs.len(),
                planned: a.repeats * if i == 0 { per_repeat - a.changes.len() } else { 1 },
                sps: median(runs.iter().map(|m| m.sps).collect()),
                figure: measure.zip(profile.as_ref()).map(|(m, p)| m.of(p)),
                profile,
                setting,
            }
        })
        .collect()
}

pub fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Confirmed => "confirmed",
        Verdict::NoEffect => "no effect",
        Verdict::Regression => "regression",
        Verdict::BeyondBound => "beyond the bound",
    }
}

/// `confirmed: ×1.83 (1.61–2.05)`, with the bound and learning when they say something.
pub fn verdict_text(c: &ChangeResult) -> String {
    let r = &c.ratio;
    let mut s = format!("{}: ×{:.2} ({:.2}–{:.2})", verdict_name(c.verdict), r.median, r.low, r.high);
    if let Some(b) = c.bound {
        s.push_str(&format!(", predicted ≤ ×{b:.2}"));
    }
    if c.verdict == Verdict::BeyondBound || c.moved != c.phase {
        s.push_str(&format!(", moved most: {}", c.moved.name()));
    }
    if c.learning_worse {
        s.push_str(", learning worse");
    }
    s
}

/// Where an audit is: `run 5 of 12: backend=threads`, or its end.
pub fn progress(a: &AuditInfo) -> String {
    let total = a.repeats * (2 + 2 * a.changes.len());
    match a.status {
        RunStatus::Queued => "queued behind another audit".into(),
        RunStatus::Running => {
            let current = a.runs.last().map_or("starting", |r| r.setting.as_str());
            format!("run {} of {total}: {current}", a.runs.len().max(1))
        }
        RunStatus::Finished => format!("done: {total} runs"),
        s => format!("{}{}", s.as_str(), a.message.as_ref().map_or(String::new(), |m| format!(": {m}"))),
    }
}

/// An audit's settings and verdicts.
#[component]
pub fn AuditTable(
    audit: Signal<AuditInfo>,
    #[prop(optional)] measure: Option<Measure>,
    #[prop(optional)] unit: &'static str,
) -> impl IntoView {
    let rows = Signal::derive(move || audit.with(|a| setting_rows(a, measure)));
    let verdict = move |i: usize| audit.with(|a| a.report.as_ref().and_then(|r| r.changes.get(i)).map(verdict_text));
    let profiles =
        Signal::derive(move || rows.with(|r| r.iter().map(|s| s.profile.clone().unwrap_or_default()).collect()));
    // The run in progress, asked for twice a second: its setting's steps/s as it streams.
    let live = RwSignal::new(None::<(String, f64)>);
    let poll = move || {
        let current = audit
            .try_with_untracked(|a| {
                (a.status == RunStatus::Running).then(|| a.runs.last().map(|r| (r.setting.clone(), r.run))).flatten()
            })
            .flatten();
        leptos::task::spawn_local(async move {
            let now = match current {
                Some((setting, run)) => crate::api::get::<hotlab_protocol::RunInfo>(&format!("/api/runs/{run}"))
                    .await
                    .ok()
                    .and_then(|i| (!i.status.is_final()).then_some(i.sps).flatten().map(|sps| (setting, sps))),
                None => None,
            };
            // The table may be gone by the time the answer comes (a newer audit replaced it).
            if live.try_with_untracked(|l| l != &now).unwrap_or(false) {
                live.try_set(now);
            }
        });
    };
    if let Ok(handle) = set_interval_with_handle(poll, std::time::Duration::from_millis(500)) {
        on_cleanup(move || handle.clear());
    }
    let live_sps = move |setting: &str| {
        live.with(|l| l.as_ref().filter(|(s, _)| s == setting).map(|(_, sps)| format!(" · now {}", si(*sps))))
    };
    let labels: Vec<String> = audit.with_untracked(|a| {
        std::iter::once("baseline".to_string()).chain(a.changes.iter().map(|c| c.change.clone())).collect()
    });
    view! {
        <p class="audit-progress" data-testid="audit-progress">{move || audit.with(progress)}</p>
        <table class="audit" data-testid="audit-table">
            <thead><tr><th>"setting"</th><th>"runs"</th><th>"steps/s"</th>{measure.map(|_| view! { <th>{unit}</th> })}<th>"verdict against the baseline"</th></tr></thead>
            <tbody>
                {move || rows.get().into_iter().enumerate().map(|(i, r)| view! {
                    <tr data-testid="audit-setting">
                        <td><code>{r.setting.clone()}</code></td>
                        <td class="num">{format!("{} / {}", r.done, r.planned)}</td>
                        <td class="num" data-testid="audit-sps">{r.sps.map_or("–".into(), si)}<span class="live" data-testid="live-sps">{live_sps(&r.setting)}</span></td>
                        {measure.map(|_| view! { <td class="num" data-testid="signature-figure">{r.figure.map_or("–".into(), |f| format!("{f:.4}"))}</td> })}
                        <td data-testid="verdict">{if i == 0 { audit.with(|a| a.report.as_ref().map(|r| format!("noise ×{:.3} ({:.3}–{:.3})", r.noise.median, r.noise.low, r.noise.high))).unwrap_or_default() } else { verdict(i - 1).unwrap_or_default() }}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
        <crate::phases::PhaseBars bars=profiles labels testid="audit-phases"/>
    }
}

/// The newest verdict on `change` among a run's audits (newest first).
pub fn latest_verdict(audits: &[AuditInfo], change: &str) -> Option<String> {
    audits.iter().find_map(|a| a.report.as_ref()?.changes.iter().find(|c| c.change == change).map(verdict_text))
}

/// POSTs `body` to `path` (an audit or a search of a run), adding the audit it starts.
fn ask(
    path: String,
    body: String,
    what: &'static str,
    error: RwSignal<Option<String>>,
    audits: RwSignal<Vec<AuditInfo>>,
) {
    leptos::task::spawn_local(async move {
        match crate::api::post::<AuditInfo>(&path, &body).await {
            // The run's page may be gone by the time the answer comes.
            Ok(a) => {
                audits.try_update(|list| list.insert(0, a));
            }
            Err(e) => {
                let field = e.field.map_or(String::new(), |f| format!("{f}: "));
                error.try_set(Some(format!("{what}: {field}{}", e.message)));
            }
        }
    });
}

/// Starts an audit of run `id` (`body` as `POST /api/runs/{id}/audit` takes it).
pub fn request(id: u64, body: serde_json::Value, error: RwSignal<Option<String>>, audits: RwSignal<Vec<AuditInfo>>) {
    ask(format!("/api/runs/{id}/audit"), body.to_string(), "audit", error, audits);
}

/// Starts a search for the fastest setup from run `id`'s recommendations.
pub fn request_tune(id: u64, error: RwSignal<Option<String>>, audits: RwSignal<Vec<AuditInfo>>) {
    ask(format!("/api/runs/{id}/tune"), "{}".into(), "find the fastest setup", error, audits);
}

/// A run's audits, newest first, asked for every two seconds.
pub fn follow(id: u64, audits: RwSignal<Vec<AuditInfo>>) {
    let refresh = move || {
        leptos::task::spawn_local(async move {
            if let Ok(list) = crate::api::get::<Vec<AuditInfo>>(&format!("/api/audits?run={id}&limit=5")).await {
                if audits.try_with_untracked(|old| old != &list).unwrap_or(false) {
                    audits.try_set(list);
                }
            }
        })
    };
    refresh();
    if let Ok(handle) = set_interval_with_handle(refresh, std::time::Duration::from_secs(2)) {
        on_cleanup(move || handle.clear());
    }
}

/// What a search's step says: what it kept, and where the search ended.
pub fn tune_text(t: &TuneStep) -> String {
    let kept = match (&t.kept, t.ratio) {
        (Some(k), Some(r)) => format!("kept {k} (×{r:.2})"),
        _ => "nothing confirmed that still learns".into(),
    };
    match &t.flags {
        Some(flags) => format!("{kept}; the search ends: ×{:.2} in all, hotlab train {flags}", t.speedup),
        None => format!("{kept}; searching on from it"),
    }
}

/// A run's audits, each with its settings and verdicts; a search's last one launches the
/// fastest configuration it found.
#[component]
pub fn RunAudits(
    audits: RwSignal<Vec<AuditInfo>>,
    operator: Signal<bool>,
    on_launched: Callback<u64>,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let launch_best = move |spec: hotlab_spec::RunSpec| {
        let fields = serde_json::to_value(spec).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default();
        leptos::task::spawn_local(async move {
            match crate::launch::launch(&fields, None).await {
                Ok(id) => on_launched.run(id),
                Err(e) => error.set(Some(e.message)),
            }
        });
    };
    view! {
        {move || match audits.with(Vec::is_empty) {
            true => view! { <p class="muted">"Not audited yet: an audit re-runs this run with a change, interleaved with the run as it is, and says whether the change held."</p> }.into_any(),
            false => audits.get().into_iter().map(|a| {
                let id = a.id;
                let audit = Signal::derive(move || audits.with(|l| l.iter().find(|x| x.id == id).cloned().unwrap_or_default()));
                let title = a.tune.as_ref().map_or(format!("Audit {id}"), |t| format!("Audit {id} · search step {}", t.step));
                let search = a.tune.as_ref().filter(|t| t.kept.is_some() || t.flags.is_some()).map(tune_text);
                let best = a.tune.as_ref().and_then(|t| t.best.clone());
                view! {
                    <div class="audit-one" data-testid="run-audit">
                        <h3>{title}</h3>
                        <AuditTable audit/>
                        {search.map(|t| view! { <p class="tune" data-testid="tune-step">{t}</p> })}
                        {best.map(|spec| view! {
                            <button data-testid="tune-launch" prop:disabled=move || !operator.get()
                                on:click=move |_| launch_best(spec.clone())>"Launch the fastest setup"</button>
                        })}
                    </div>
                }
            }).collect_view().into_any(),
        }}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_protocol::{AuditRun, ChangeInfo};
    use hotlab_report::audit::Measured;

    #[test]
    fn settings_gather_their_finished_runs() {
        let run = |setting: &str, sps: Option<f64>| AuditRun {
            setting: setting.into(),
            run: 1,
            measured: sps.map(|sps| Measured { sps, ..Measured::default() }),
        };
        let a = AuditInfo {
            repeats: 2,
            changes: vec![ChangeInfo { change: "envs=64".into(), bound: None }],
            runs: vec![
                run("baseline", Some(10.0)),
                run("baseline", Some(12.0)),
                run("envs=64", Some(40.0)),
                run("baseline", None),
            ],
            status: RunStatus::Running,
            ..AuditInfo::default()
        };
        let rows = setting_rows(&a, Some(Measure::Share(hotlab_core::profile::Phase::ENV_WAIT)));
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].done, rows[0].planned, rows[0].sps), (2, 6, Some(12.0)));
        assert_eq!((rows[1].done, rows[1].planned, rows[1].sps), (1, 2, Some(40.0)));
        assert_eq!(rows[1].figure, Some(0.0));
        assert_eq!(progress(&a), "run 4 of 8: baseline");
        let mut t = TuneStep {
            step: 1,
            kept: Some("--backend vectorized".into()),
            ratio: Some(3.0),
            speedup: 3.0,
            ..TuneStep::default()
        };
        assert_eq!(tune_text(&t), "kept --backend vectorized (×3.00); searching on from it");
        t.flags = Some("--envs 8".into());
        assert!(tune_text(&t).ends_with("×3.00 in all, hotlab train --envs 8"), "{}", tune_text(&t));
    }
}

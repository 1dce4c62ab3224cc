//! The morpho hosts' view: each shown env's host (slots coloured by stage, validation
//! accuracy over the episode's epochs) and env 0's decision, its eight heads.
//!
//! Compiled into `hotlab-web` (wasm32) from the registry: `crate` here is that crate.

use hotlab_shared::protocol::Frame;
use hotlab_shared::workloads::morpho::{MorphoFrame, MorphoView};
use hotlab_shared::workloads::EnvName;
use leptos::prelude::*;
use std::collections::BTreeMap;

#[component]
pub fn View(frame: Signal<Option<Frame>>) -> impl IntoView {
    let mine = move || frame.with(|f| f.as_ref().and_then(|f| f.read::<MorphoFrame>(EnvName::Morpho)));
    // Each shown env's validation accuracy by epoch, gathered over the frames of its
    // current episode (frames are sampled, so an epoch may be missing).
    let curves = RwSignal::new(BTreeMap::<usize, Vec<(u32, f32)>>::new());
    Effect::new(move |_| {
        if let Some(f) = mine() {
            curves.update(|c| f.envs.iter().for_each(|v| remember(c, v)));
        }
    });
    move || {
        mine().map(|f| {
            view! {
                <div class="morpho" data-testid="rollout-morpho">
                    {f.envs.into_iter().map(|v| host_view(v, curves)).collect_view()}
                </div>
            }
        })
    }
}

/// Adds a frame's accuracy to its env's curve; a new episode (the epoch went back) starts it over.
fn remember(curves: &mut BTreeMap<usize, Vec<(u32, f32)>>, v: &MorphoView) {
    let curve = curves.entry(v.env).or_default();
    if curve.last().is_some_and(|&(e, _)| e > v.epoch) {
        curve.clear();
    }
    if curve.last().is_none_or(|&(e, _)| e < v.epoch) {
        curve.push((v.epoch, v.accuracy));
    }
}

/// One host: its epoch and accuracy, the curve so far, its slots, and (for env 0) the decision.
fn host_view(v: MorphoView, curves: RwSignal<BTreeMap<usize, Vec<(u32, f32)>>>) -> impl IntoView {
    let (env, epochs) = (v.env, v.epochs.max(1));
    let points = move || {
        let curve = curves.with(|c| c.get(&env).cloned().unwrap_or_default());
        curve
            .iter()
            .map(|&(e, a)| format!("{:.1},{:.1}", e as f64 / epochs as f64 * 120.0, 36.0 - a as f64 * 36.0))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let decision = (env == 0).then(|| {
        view! {
            <table class="heads small" data-testid="morpho-heads">
                {v.decision.into_iter().map(|h| view! {
                    <tr class=if h.read { "" } else { "unread" }><td class="muted">{h.head}</td><td>{h.choice}</td></tr>
                }).collect_view()}
            </table>
        }
    });
    view! {
        <div class="host" data-testid="morpho-host">
            <p class="small"><b>{format!("env {env}")}</b>
                <span class="muted">{format!(" · epoch {}/{} · validation {:.1} %", v.epoch, v.epochs, v.accuracy * 100.0)}</span></p>
            <div class="host-row">
                <svg class="curve" width="120" height="36" viewBox="0 0 120 36">
                    <polyline points=points fill="none" stroke="#f0a030" stroke-width="1.5" />
                </svg>
                {v.slots.into_iter().enumerate().map(|(i, s)| {
                    let label = s.blueprint.clone().unwrap_or_default();
                    view! {
                        <div class=format!("slot stage-{}", s.stage) data-testid="morpho-slot" title=format!("slot {i}: {}", s.stage)>
                            <span class="small">{format!("slot {i} · {}", s.stage)}</span>
                            <span class="small">{label}</span>
                            <span class="small muted">{format!("α {:.2}", s.alpha)}</span>
                        </div>
                    }
                }).collect_view()}
            </div>
            {decision}
        </div>
    }
}

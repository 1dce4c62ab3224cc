//! The morpho hosts' view: each shown env's host (slots coloured by stage, validation
//! accuracy over the episode's epochs), its episode so far as a timeline (each slot's stage
//! per epoch, its α curve and its credit: a seed germinating, blending and fossilizing, or
//! the agent declining to grow), and env 0's decision, its eight heads.
//!
//! A module of `hotlab-views` (its root, `workloads/src/views.rs`, is beside this folder),
//! which it names `hotlab_views`; the web app (wasm32) shows it.

use hotlab_protocol::Frame;
use hotlab_specs::morpho::{MorphoFrame, MorphoView, SlotView};
use hotlab_specs::EnvName;
use leptos::prelude::*;
use std::collections::BTreeMap;

/// One epoch of an env's episode as a frame showed it.
#[derive(Clone)]
struct Seen {
    epoch: u32,
    accuracy: f32,
    slots: Vec<SlotView>,
}

/// Each shown env's current episode, epoch by epoch (frames are sampled, so an epoch may
/// be missing).
type Episodes = BTreeMap<usize, Vec<Seen>>;

#[component]
pub fn View(frame: Signal<Option<Frame>>) -> impl IntoView {
    let mine = move || frame.with(|f| f.as_ref().and_then(|f| f.read::<MorphoFrame>(EnvName::Morpho)));
    let episodes = RwSignal::new(Episodes::new());
    Effect::new(move |_| {
        if let Some(f) = mine() {
            episodes.update(|e| f.envs.iter().for_each(|v| remember(e, v)));
        }
    });
    move || {
        mine().map(|f| {
            view! {
                <div class="morpho" data-testid="rollout-morpho">
                    {f.envs.into_iter().map(|v| host_view(v, episodes)).collect_view()}
                </div>
            }
        })
    }
}

/// Adds a frame's epoch to its env's episode; a new episode (the epoch went back) starts it over.
fn remember(episodes: &mut Episodes, v: &MorphoView) {
    let episode = episodes.entry(v.env).or_default();
    if episode.last().is_some_and(|s| s.epoch > v.epoch) {
        episode.clear();
    }
    if episode.last().is_none_or(|s| s.epoch < v.epoch) {
        episode.push(Seen { epoch: v.epoch, accuracy: v.accuracy, slots: v.slots.clone() });
    }
}

/// Width and row height of the episode's timeline and curve.
const WIDTH: f64 = 120.0;
const ROW: f64 = 12.0;

/// The episode as rows of slots and columns of epochs: each cell coloured by the slot's
/// stage after that epoch (its credit in the cell's tooltip), each row with its α curve.
fn timeline(episode: &[Seen], epochs: u32, slots: usize) -> impl IntoView {
    let column = WIDTH / epochs as f64;
    let x = |epoch: u32| (epoch.max(1) - 1) as f64 * column;
    let cells = episode.iter().flat_map(|seen| {
        seen.slots.iter().enumerate().map(move |(i, s)| {
            let tip = format!(
                "epoch {} · slot {i} · {}{} · α {:.2} · credit {:+.3}",
                seen.epoch,
                s.stage,
                s.blueprint.as_deref().map(|b| format!(" ({b})")).unwrap_or_default(),
                s.alpha,
                s.credit
            );
            view! {
                <rect class=format!("stage-{}", s.stage) x=format!("{:.1}", x(seen.epoch)) y=format!("{:.1}", i as f64 * ROW)
                    width=format!("{:.1}", column - 0.5) height=format!("{:.1}", ROW - 1.0)><title>{tip}</title></rect>
            }
        })
    });
    let cells: Vec<_> = cells.collect();
    let alphas = (0..slots).map(|i| {
        let points: Vec<String> = episode
            .iter()
            .filter_map(|seen| seen.slots.get(i).map(|s| (seen.epoch, s.alpha)))
            .map(|(e, a)| {
                format!("{:.1},{:.1}", x(e) + column / 2.0, (i + 1) as f64 * ROW - 1.5 - a as f64 * (ROW - 3.0))
            })
            .collect();
        view! { <polyline class="alpha" points=points.join(" ") /> }
    });
    let alphas: Vec<_> = alphas.collect();
    let height = slots as f64 * ROW;
    view! {
        <svg class="timeline" data-testid="morpho-timeline" width=WIDTH height=height viewBox=format!("0 0 {WIDTH} {height}")>
            <title>"this episode so far: a row per slot, a column per epoch, coloured by the slot's stage (purple germinated, blue training, \
                yellow blending, orange holding, green fossilized, red cooldown); the white line is its α"</title>
            {cells}
            {alphas}
        </svg>
    }
}

/// One host: its epoch and accuracy, the curve and timeline so far, its slots, and (for
/// env 0) the decision.
fn host_view(v: MorphoView, episodes: RwSignal<Episodes>) -> impl IntoView {
    let (env, epochs, slots) = (v.env, v.epochs.max(1), v.slots.len());
    let episode = move || episodes.with(|e| e.get(&env).cloned().unwrap_or_default());
    let points = move || {
        episode()
            .iter()
            .map(|s| format!("{:.1},{:.1}", s.epoch as f64 / epochs as f64 * WIDTH, 36.0 - s.accuracy as f64 * 36.0))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let timeline = move || timeline(&episode(), epochs, slots);
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
                {timeline}
                {v.slots.into_iter().enumerate().map(|(i, s)| {
                    let label = s.blueprint.clone().unwrap_or_default();
                    view! {
                        <div class=format!("slot stage-{}", s.stage) data-testid="morpho-slot" title=format!("slot {i}: {}", s.stage)>
                            <span class="small">{format!("slot {i} · {}", s.stage)}</span>
                            <span class="small">{label}</span>
                            <span class="small muted">{format!("α {:.2} · credit {:+.3}", s.alpha, s.credit)}</span>
                        </div>
                    }
                }).collect_view()}
            </div>
            {decision}
        </div>
    }
}

//! The phase split as stacked bars: one bar per profile window (or per run), each phase
//! its own colour, with a legend of the phases present.

use hotlab_shared::profile::{Phase, Profile};
use leptos::prelude::*;

/// A colour per phase, in [`Phase::ALL`] order (data phases warm, forward green,
/// backward blue, the rest grey).
pub fn color(p: Phase) -> &'static str {
    match p {
        Phase::EnvStep => "#f0a030",
        Phase::EnvWait => "#ff6b6b",
        Phase::HostForward => "#f7c948",
        Phase::HostBackward => "#e0a526",
        Phase::HostOptimizer => "#c98a1a",
        Phase::Validation => "#f4d58d",
        Phase::Counterfactual => "#e8b4a0",
        Phase::Lifecycle => "#ff8f5a",
        Phase::Reward => "#d9825b",
        Phase::ObsTransfer => "#e879a0",
        Phase::PolicyForward => "#4cc38a",
        Phase::ActionReadback => "#c792ea",
        Phase::RolloutStore => "#d8b36a",
        Phase::Gae => "#b0885a",
        Phase::UpdateForward => "#2e9e6e",
        Phase::EmbeddingLookup => "#7fd1b9",
        Phase::Replay => "#e6a86a",
        Phase::Encoder => "#3fb27f",
        Phase::Rssm => "#5fc99a",
        Phase::Decoder => "#86d9b0",
        Phase::Imagine => "#a8e6c6",
        Phase::Backward => "#4a90e2",
        Phase::WorldBackward => "#3f7fd0",
        Phase::ActorCriticBackward => "#6f9fe0",
        Phase::Optimizer => "#7aa7e8",
        Phase::Telemetry => "#9aa0a6",
        Phase::Publish => "#6b7785",
        Phase::Other => "#3a4656",
    }
}

/// Each phase's share of a window, 0..1, in [`Phase::ALL`] order.
pub fn shares(p: &Profile) -> Vec<(Phase, f64)> {
    Phase::ALL.iter().map(|&ph| (ph, p.share(ph))).collect()
}

const W: f64 = 560.0;
const H: f64 = 150.0;

/// Stacked bars, one per profile, labelled below when `labels` has one per bar.
#[component]
pub fn PhaseBars(
    bars: Signal<Vec<Profile>>,
    #[prop(optional)] labels: Vec<String>,
    testid: &'static str,
) -> impl IntoView {
    let present = move || {
        bars.with(|b| {
            Phase::ALL.iter().copied().filter(|&ph| b.iter().any(|p| p.share(ph) >= 0.005)).collect::<Vec<_>>()
        })
    };
    let labels = std::sync::Arc::new(labels);
    view! {
        <div class="phase-bars" data-testid=testid>
            <svg viewBox=format!("0 0 {W} {}", H + 16.0) width="100%" preserveAspectRatio="none" role="img">
                {move || {
                    let labels = std::sync::Arc::clone(&labels);
                    bars.with(|b| {
                        let n = b.len().max(1) as f64;
                        let slot = W / n;
                        let bar = (slot * 0.8).max(1.0);
                        b.iter().enumerate().map(|(i, p)| {
                            let x = i as f64 * slot + (slot - bar) / 2.0;
                            let mut y = H;
                            let rects = shares(p).into_iter().filter(|(_, s)| *s > 0.0).map(|(ph, s)| {
                                let h = s * H;
                                y -= h;
                                view! { <rect x=x y=y width=bar height=h fill=color(ph)><title>{format!("{}: {:.1} %", ph.name(), 100.0 * s)}</title></rect> }
                            }).collect_view();
                            let label = labels.get(i).cloned().map(|l| view! {
                                <text x=x + bar / 2.0 y=H + 13.0 text-anchor="middle" class="bar-label">{l}</text>
                            });
                            view! { <g class="bar">{rects}{label}</g> }
                        }).collect_view()
                    })
                }}
            </svg>
            <ul class="legend">
                {move || present().into_iter().map(|ph| view! {
                    <li><span class="swatch" style:background=color(ph)></span>{ph.name()}</li>
                }).collect_view()}
            </ul>
        </div>
    }
}

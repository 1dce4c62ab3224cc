//! The phase split as stacked bars: one bar per profile window (or per run), each phase
//! its own colour, with a legend of the phases present.

use hotlab_core::profile::{Phase, Profile};
use hotlab_specs::{phase_info, PHASES};
use leptos::prelude::*;

/// A phase's colour, as its declaration gives it (grey for one this build does not know).
pub fn color(p: Phase) -> &'static str {
    phase_info(p).map_or("#8a8f98", |i| i.color)
}

/// Each phase's share of a window, 0..1, in the registry's order (then any it lacks).
pub fn shares(p: &Profile) -> Vec<(Phase, f64)> {
    let known = PHASES.iter().map(|i| i.phase);
    let unknown = p.phases.iter().map(|t| t.phase).filter(|&ph| phase_info(ph).is_none());
    known.chain(unknown).map(|ph| (ph, p.share(ph))).collect()
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
            let all = b.iter().flat_map(shares).filter(|&(_, s)| s >= 0.005).map(|(ph, _)| ph);
            let mut present: Vec<Phase> = Vec::new();
            all.for_each(|ph| {
                if !present.contains(&ph) {
                    present.push(ph)
                }
            });
            present
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

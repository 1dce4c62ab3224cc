//! Runs side by side: what differs between their specs, steps/s, the phase split and the
//! counters, each with its ratio to the first run (the "before").

use crate::compare::{differences, rows, Unit};
use crate::format::{bytes, percent, seconds, si, times};
use crate::phases::PhaseBars;
use crate::run_data::RunData;
use hotlab_protocol::{RunInfo, RunSummary};
use leptos::prelude::*;

/// One run's summary (its totals), not its events: a long run compares as fast as a short one.
async fn load(id: u64) -> Result<(RunInfo, RunData), String> {
    let summary = crate::api::get::<RunSummary>(&format!("/api/runs/{id}/summary")).await.map_err(|e| e.message)?;
    Ok((summary.info.clone(), RunData::from_summary(summary)))
}

fn value(unit: Unit, v: Option<f64>) -> String {
    match (unit, v) {
        (_, None) => "–".into(),
        (Unit::PerSecond | Unit::Count, Some(v)) => si(v),
        (Unit::Percent, Some(v)) => percent(v),
        (Unit::Bytes, Some(v)) => bytes(v),
        (Unit::Seconds, Some(v)) => seconds(v),
    }
}

#[component]
pub fn CompareView(ids: Vec<u64>) -> impl IntoView {
    let loaded = RwSignal::new(None::<Result<Vec<(RunInfo, RunData)>, String>>);
    let wanted = ids.clone();
    leptos::task::spawn_local(async move {
        let mut all = Vec::new();
        for id in wanted {
            match load(id).await {
                Ok(r) => all.push(r),
                Err(e) => {
                    loaded.set(Some(Err(format!("run {id}: {e}"))));
                    return;
                }
            }
        }
        loaded.set(Some(Ok(all)));
    });
    view! {
        <section class="panel compare" data-testid="compare-view">
            <h2>"Compare runs "{ids.iter().map(|i| format!("#{i}")).collect::<Vec<_>>().join(", ")}</h2>
            {move || match loaded.get() {
                None => view! { <p class="muted">"loading…"</p> }.into_any(),
                Some(Err(e)) => view! { <p class="error">{e}</p> }.into_any(),
                Some(Ok(runs)) => {
                    let specs: Vec<_> = runs.iter().map(|(i, _)| &i.spec).collect();
                    let diffs = differences(&specs);
                    let data: Vec<&RunData> = runs.iter().map(|(_, d)| d).collect();
                    let table = rows(&data);
                    let totals: Vec<_> = runs.iter().map(|(_, d)| d.total.clone()).collect();
                    let labels: Vec<String> = runs.iter().map(|(i, _)| format!("#{}", i.id)).collect();
                    let head = runs.iter().map(|(i, _)| view! { <th>{format!("#{} ({})", i.id, i.status.as_str())}</th> }).collect_view();
                    view! {
                        <h3>"What differs"</h3>
                        {if diffs.is_empty() { view! { <p class="muted">"The specs are the same."</p> }.into_any() } else { view! {
                            <table class="diffs"><tbody>
                                {diffs.into_iter().map(|(k, vals)| view! {
                                    <tr><td><code>{k}</code></td>{vals.into_iter().map(|v| view! { <td>{v}</td> }).collect_view()}</tr>
                                }).collect_view()}
                            </tbody></table>
                        }.into_any() }}
                        <table class="compare-table">
                            <thead><tr><th></th>{head}</tr></thead>
                            <tbody>
                                {table.into_iter().map(|r| {
                                    let unit = r.unit;
                                    let better = r.higher_is_better;
                                    view! {
                                        <tr data-testid="compare-row">
                                            <td>{r.label.clone()}</td>
                                            {r.values.iter().zip(&r.ratios).map(|(v, ratio)| {
                                                let class = match ratio {
                                                    Some(x) if (*x > 1.0) == better && (*x - 1.0).abs() > 0.02 => "ratio better",
                                                    Some(x) if (*x - 1.0).abs() > 0.02 => "ratio worse",
                                                    _ => "ratio",
                                                };
                                                view! {
                                                    <td class="num">{value(unit, *v)}
                                                        {ratio.map(|_| view! { " " <span class=class data-testid="ratio">{times(*ratio)}</span> })}
                                                    </td>
                                                }
                                            }).collect_view()}
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                        <h3>"Phase split"</h3>
                        <PhaseBars bars=Signal::derive(move || totals.clone()) labels=labels testid="compare-phases"/>
                    }.into_any()
                }
            }}
        </section>
    }
}

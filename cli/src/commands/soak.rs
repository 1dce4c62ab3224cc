//! `hotlab bench soak`: a lab under many viewers for minutes; flags and the printout.

use crate::failure::{Outcome, UsageError};
use anyhow::Context;
use clap::Args;
use hotlab_lab::bench::soak::{self, SoakReport, SoakSpec};
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct BenchSoakArgs {
    /// Minutes with the viewers and readers on.
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// Seconds without any viewer first (the steps/s to compare with).
    #[arg(long, default_value_t = 60.0)]
    pub baseline_s: f64,
    /// WebSocket viewers.
    #[arg(long, default_value_t = 200)]
    pub viewers: usize,
    /// Clients reading the run's history in a loop.
    #[arg(long, default_value_t = 1)]
    pub readers: usize,
    /// How far back each history read reaches, in events (past the live window, so the
    /// store is read too).
    #[arg(long, default_value_t = 10_000)]
    pub reach: u64,
    /// The run, as `POST /api/runs` takes it [a long CartPole run on the CPU].
    #[arg(long)]
    pub run: Option<String>,
    /// Seconds between memory samples.
    #[arg(long, default_value_t = 5.0)]
    pub sample_s: f64,
    /// Train the run on a worker of the lab (a `hotlab worker` process), not the lab's own
    /// machine; the lab is also killed and restarted once, and the reconnect timed.
    #[arg(long, conflicts_with = "on_ray")]
    pub on_worker: bool,
    /// Train the run as a Ray job on this head (http://HEAD:8265).
    #[arg(long, value_name = "URL")]
    pub on_ray: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn seconds(flag: &'static str, v: f64) -> Outcome<Duration> {
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| UsageError { flag, message: format!("{v}: allowed a positive number").to_string() }.into())
}

pub fn soak(a: BenchSoakArgs) -> Outcome<()> {
    let run = match &a.run {
        Some(text) => {
            serde_json::from_str(text).map_err(|e| UsageError { flag: "--run", message: format!("not JSON: {e}") })?
        }
        None => serde_json::json!({"envs": 8, "total_steps": 1_000_000_000_000u64, "device": "cpu"}),
    };
    let spec = SoakSpec {
        exe: std::env::current_exe().context("finding the hotlab binary")?,
        run,
        baseline: seconds("--baseline-s", a.baseline_s)?,
        watched: seconds("--minutes", a.minutes * 60.0)?,
        viewers: a.viewers,
        readers: a.readers,
        reach: a.reach,
        sample: seconds("--sample-s", a.sample_s)?,
        place: match (a.on_worker, a.on_ray) {
            (_, Some(url)) => soak::Place::Ray(url),
            (true, None) => soak::Place::Worker,
            (false, None) => soak::Place::Local,
        },
    };
    let bar = ProgressBar::new(1000);
    bar.set_style(ProgressStyle::with_template("{msg} [{bar:30}] {elapsed}/{duration}").expect("template"));
    let baseline = spec.baseline.as_secs_f64();
    let report = soak::soak(&spec, &mut |done, total| {
        bar.set_position((1000.0 * done / total) as u64);
        bar.set_message(if done < baseline { "unwatched" } else { "watched" });
    })?;
    bar.finish_and_clear();
    match a.json {
        true => println!("{}", serde_json::to_string(&report)?),
        false => print!("{}", table(&report)),
    }
    Ok(())
}

fn table(r: &SoakReport) -> String {
    let mut out = format!(
        "on {}: {} viewers, {} history readers; first update {:.2} s after the launch; viewers received {:.0} messages/s\n",
        r.place, r.viewers, r.readers, r.first_update_s, r.viewer_messages_per_s
    );
    if let (Some(c), Some(u)) = (r.reconnect_s, r.resumed_update_s) {
        out.push_str(&format!(
            "the lab restarted: the worker back in {c:.2} s, the run's next update in the lab after {u:.2} s\n"
        ));
    }
    out.push_str("phase       seconds   steps/s   publish   RSS MiB first / max / last   MiB/min (2nd half)\n");
    for p in &r.phases {
        out.push_str(&format!(
            "{:<10} {:>8.0} {:>9.0} {:>8.3}%   {:.1} / {:.1} / {:.1}   {} ({})\n",
            p.name,
            p.seconds,
            p.steps_per_s,
            100.0 * p.publish_share,
            p.rss_mib_first,
            p.rss_mib_max,
            p.rss_mib_last,
            per_min(p.rss_mib_per_min),
            per_min(p.rss_mib_per_min_second_half)
        ));
    }
    out.push_str(&format!(
        "events stored {}, dropped {}; viewers received {} messages; {} history reads; stopped in {:.3} s\n",
        r.events_stored, r.events_dropped, r.viewer_messages, r.history_reads, r.stop_s
    ));
    out
}

fn per_min(slope: Option<f64>) -> String {
    slope.map_or("-".into(), |s| format!("{s:+.2}"))
}

//! `hotlab bench morpho`: the morpho trainer per knob setting and env count.

use crate::failure::{usage, Outcome};
use clap::Args;
use hotlab_workloads::morpho::bench::trainer::{run, MorphoBench, MorphoBenchReport};

#[derive(Args, Debug)]
pub struct BenchMorphoArgs {
    /// Env counts to measure, comma-separated, each 1 to 1024.
    #[arg(long, value_delimiter = ',', default_value = "4,16,64")]
    pub envs: Vec<usize>,
    /// Decisions per env in each run (one rollout, one update), 1 to 64.
    #[arg(long, default_value_t = 4)]
    pub steps: usize,
    /// Rounds of every setting, interleaved, 1 to 10 (2 or more give each ratio an interval).
    #[arg(long, default_value_t = 2)]
    pub repeats: usize,
    /// cpu, cuda, cuda:N or auto.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// The hosts' first-stage channels, 1 to 256.
    #[arg(long, default_value_t = 16)]
    pub width: usize,
    /// Training images per task, 64 to 65536.
    #[arg(long, default_value_t = 1024)]
    pub images: usize,
    /// One JSON object, no progress.
    #[arg(long)]
    pub json: bool,
}

pub fn morpho(a: BenchMorphoArgs) -> Outcome<()> {
    if a.envs.is_empty() || a.envs.iter().any(|n| !(1..=1024).contains(n)) {
        return Err(usage("--envs", format!("must be env counts of 1 to 1024 (got {:?})", a.envs)));
    }
    for (flag, value, range) in
        [("--steps", a.steps, 1..=64), ("--repeats", a.repeats, 1..=10), ("--width", a.width, 1..=256)]
    {
        if !range.contains(&value) {
            return Err(usage(flag, format!("must be {} to {} (got {value})", range.start(), range.end())));
        }
    }
    if !(64..=65536).contains(&a.images) {
        return Err(usage("--images", format!("must be 64 to 65536 (got {})", a.images)));
    }
    hotlab_train::exec::device::resolve(&a.device).map_err(|e| usage("--device", e.message))?;
    let b = MorphoBench {
        envs: a.envs,
        steps: a.steps,
        repeats: a.repeats,
        device: a.device,
        width: a.width,
        images: a.images,
    };
    let bar = super::runs_bar(a.json);
    let r = run(&b, &mut super::runs_progress(&bar))?;
    bar.finish_and_clear();
    match a.json {
        true => println!("{}", serde_json::to_string(&r)?),
        false => print!("{}", table(&r)),
    }
    Ok(())
}

fn table(r: &MorphoBenchReport) -> String {
    let mut out = format!(
        "morpho on {} ({}, {} cores): width {}, {} images, {} decisions per env per run, every setting run {}× interleaved\n",
        r.device, r.cpu, r.cores, r.width, r.images, r.steps, r.repeats
    );
    out.push_str(&format!(
        "{:>5}  {:<22} {:>12} {:>16} {:>24}  {}\n",
        "envs", "setting", "decisions/s", "host samples/s", "vs defaults (95 %)", "where the time went"
    ));
    for f in &r.figures {
        let ratio = match (&f.vs_defaults, f.ratios.as_slice()) {
            (Some(i), _) => format!("{:.2} ({:.2}–{:.2})", i.median, i.low, i.high),
            (None, [one]) => format!("{one:.2}"),
            _ => "–".into(),
        };
        let phases: Vec<String> = f.phases.iter().take(4).map(|(p, s)| format!("{p} {:.0} %", 100.0 * s)).collect();
        out.push_str(&format!(
            "{:>5}  {:<22} {:>12.1} {:>16.0} {:>24}  {}\n",
            f.envs,
            f.setting,
            f.median_decisions_per_s,
            f.median_host_samples_per_s,
            ratio,
            phases.join(", ")
        ));
    }
    out
}

//! `hotlab bench growth`: a morpho spec trained on several seeds, each agent played against
//! the policies that do not grow, and whether the spec learns growth.

use super::knob_args::KnobArgs;
use crate::failure::{usage, Outcome};
use clap::Args;
use hotlab_core::run_knobs;
use hotlab_spec::PresetSpec;
use hotlab_specs::AnyPreset;
use hotlab_specs::WorkloadSpec;
use hotlab_train::workload::TaskSet;
use hotlab_workloads::morpho::bench::growth::{run, GrowthBench, Progress, SeedFigure};

#[derive(Args, Debug)]
pub struct BenchGrowthArgs {
    /// Starting point of the spec every seed trains; explicit flags override it.
    #[arg(long, default_value = "morpho", value_parser = super::train::preset_parser())]
    pub preset: &'static AnyPreset,
    /// Every setting of the runs, as `hotlab train` takes them (`--seed` is replaced by `--seeds`).
    #[command(flatten)]
    pub knobs: KnobArgs,
    /// Training seeds, comma-separated (1 to 10 of them); two thirds must learn growth.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    pub seeds: Vec<u64>,
    /// Episodes each agent and baseline plays, 1 to 1000.
    #[arg(long, default_value_t = 32)]
    pub episodes: usize,
    /// The evaluation's seed: its host draws and the sampled agent's actions.
    #[arg(long, default_value_t = 7)]
    pub eval_seed: u64,
    /// `held-out`, the tasks results are reported on, or `validation`, a separate set to
    /// tune on (tuning on the held-out tasks would make them tuned tasks).
    #[arg(long, default_value = "held-out", value_parser = TaskSet::NAMES)]
    pub task_set: String,
    /// One JSON object on stdout (every seed's whole yardstick included); no progress bar,
    /// but each seed's row on stderr as it is judged (a run takes minutes per seed).
    #[arg(long)]
    pub json: bool,
}

pub fn growth(a: BenchGrowthArgs) -> Outcome<()> {
    if a.seeds.is_empty() || a.seeds.len() > 10 {
        return Err(usage("--seeds", format!("give 1 to 10 training seeds (got {})", a.seeds.len())));
    }
    if !(1..=1000).contains(&a.episodes) {
        return Err(usage("--episodes", format!("must be between 1 and 1000 (got {})", a.episodes)));
    }
    if a.knobs.given.iter().any(|(k, _)| k.name == run_knobs::SEED.name) {
        return Err(usage("--seed", "the growth benchmark trains one run per --seeds value; give --seeds".into()));
    }
    let spec = a.knobs.apply(a.preset.spec())?;
    if !matches!(spec.workload, WorkloadSpec::Morpho(_)) {
        return Err(usage("--env", "the growth benchmark trains the morpho workload: --env morpho".into()));
    }
    spec.validate()?;
    let tasks: TaskSet = a.task_set.parse().map_err(|m| usage("--task-set", m))?;
    let b = GrowthBench { spec, seeds: a.seeds, episodes: a.episodes, eval_seed: a.eval_seed, tasks };
    let bar = super::runs_bar(a.json);
    bar.set_length(b.seeds.len() as u64);
    let r = run(&b, &mut |p| match p {
        Progress::Starts(what) => bar.set_message(what.to_string()),
        Progress::Training { seed, done, total } => {
            bar.set_position(seed as u64);
            bar.set_message(format!("seed {}: training, {done}/{total} decisions", b.seeds[seed]));
        }
        Progress::Judged(figure) => {
            let line = format!("{}{}", SeedFigure::header(), figure.row());
            match a.json {
                true => eprint!("{line}"),
                false => bar.println(line.trim_end()),
            }
        }
    })?;
    bar.finish_and_clear();
    match a.json {
        true => println!("{}", serde_json::to_string(&r)?),
        false => print!("{}", r.summary()),
    }
    Ok(())
}

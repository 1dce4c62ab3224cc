//! `hotlab bench growth`: does a morpho spec learn to grow? It trains the spec once per
//! training seed and plays each agent on tasks it never trained on against the policies
//! that do not grow (the yardstick, [`crate::morpho::eval`]). A seed *learned growth* when
//! its greedy play:
//! - beats waiting at the best tempo, the paired 95 % interval above 0;
//! - grows in at least half the episodes: a seed held or fossilized with positive Shapley
//!   credit at the end;
//! - scores at least the scripted grower's less one accuracy point.
//!
//! The spec *learns growth* when at least two thirds of its seeds did. Results are reported
//! on the held-out tasks; tuning uses the validation tasks (`--task-set validation`), which
//! never meet them.

use crate::morpho::eval::{Against, MorphoEval, Paired};
use crate::morpho::{Morpho, TrainedMorpho};
use anyhow::{anyhow, Context, Result};
use hotlab_spec::RunSpec;
use hotlab_specs::WorkloadSpec;
use hotlab_train::models::mlp::policy::{ActorCritic, Architecture};
use hotlab_train::workload::TaskSet;
use hotlab_train::{TrainOptions, UpdateMetrics};
use serde::Serialize;
use std::sync::Arc;

/// How far under the grower a seed may score and still count (one accuracy point).
pub const GROWER_SLACK: f64 = 0.01;

/// What to run.
#[derive(Clone, Debug)]
pub struct GrowthBench {
    /// The spec every seed trains (its `seed` replaced by each of `seeds`).
    pub spec: RunSpec,
    pub seeds: Vec<u64>,
    /// Episodes each agent and baseline plays.
    pub episodes: usize,
    /// The evaluation's seed (its host draws and sampled actions).
    pub eval_seed: u64,
    pub tasks: TaskSet,
}

/// One training seed: its training and how its agent played.
#[derive(Clone, Debug, Serialize)]
pub struct SeedFigure {
    pub seed: u64,
    /// The training run's wall time, its set-up included.
    pub train_s: f64,
    pub decisions: u64,
    /// Greedy play against waiting at the best tempo and against the grower.
    pub vs_best_waiting: Paired,
    pub vs_grower: Paired,
    /// Episodes of greedy play in which a seed held or fossilized with positive credit.
    pub grew: usize,
    /// Sampled play against waiting at the best tempo, and its episodes that grew.
    pub sampled_vs_best_waiting: Paired,
    pub sampled_grew: usize,
    /// Whether this seed learned growth (the module's three conditions).
    pub learned: bool,
    /// The whole yardstick.
    pub eval: MorphoEval,
}

#[derive(Clone, Debug, Serialize)]
pub struct GrowthReport {
    pub cpu: String,
    pub cores: usize,
    pub device: String,
    /// `held-out` or `validation`.
    pub tasks: String,
    pub episodes: usize,
    pub eval_seed: u64,
    pub seeds: Vec<SeedFigure>,
    /// Seeds that learned growth, and whether that is at least two thirds of them.
    pub learned: usize,
    pub spec_learns: bool,
}

impl GrowthReport {
    pub fn summary(&self) -> String {
        let mut out = format!(
            "growth on {} ({}, {} cores): {} {} episodes per seed, evaluation seed {}\n",
            self.device, self.cpu, self.cores, self.episodes, self.tasks, self.eval_seed
        );
        out.push_str(&SeedFigure::header());
        for s in &self.seeds {
            out.push_str(&s.row());
        }
        if let Some(first) = self.seeds.first() {
            let b: Vec<String> = first.eval.baselines.iter().map(|b| format!("{} {:.3}", b.name, b.mean)).collect();
            out.push_str(&format!("baselines: {}\n", b.join(", ")));
        }
        out.push_str(&format!(
            "{} of {} seeds learned growth: the spec {}\n",
            self.learned,
            self.seeds.len(),
            if self.spec_learns { "learns growth" } else { "does not learn growth (two thirds needed)" }
        ));
        out
    }
}

impl SeedFigure {
    /// The column titles of [`SeedFigure::row`].
    pub fn header() -> String {
        format!(
            "{:>5} {:>8} {:>10}  {:<26} {:<26} {:>6}  {:<26} {:>6}  {}\n",
            "seed",
            "train s",
            "decisions",
            "greedy − best waiting",
            "greedy − grower",
            "grew",
            "sampled − best waiting",
            "grew",
            "learned"
        )
    }

    /// This seed's figures on one line (the summary's row, and the progress line as each
    /// seed is judged).
    pub fn row(&self) -> String {
        let d = |p: &Paired| format!("{:+.3} [{:+.3}, {:+.3}]", p.diff, p.low, p.high);
        format!(
            "{:>5} {:>8.0} {:>10}  {:<26} {:<26} {:>6}  {:<26} {:>6}  {}\n",
            self.seed,
            self.train_s,
            self.decisions,
            d(&self.vs_best_waiting),
            d(&self.vs_grower),
            format!("{}/{}", self.grew, self.eval.episodes),
            d(&self.sampled_vs_best_waiting),
            format!("{}/{}", self.sampled_grew, self.eval.episodes),
            if self.learned { "yes" } else { "no" }
        )
    }
}

/// Whether greedy play in `e` meets the three conditions of learned growth.
pub fn learned(e: &MorphoEval) -> bool {
    // A play is paired with the best waiting, random legal and the grower, in that order.
    let (waiting, grower) = (&e.greedy.against[0], &e.greedy.against[2]);
    waiting.low > 0.0 && 2 * e.greedy.grew >= e.episodes && grower.diff >= -GROWER_SLACK
}

/// What the benchmark is doing, as it goes.
pub enum Progress<'a> {
    /// A part starts: a seed's training, a policy's play.
    Starts(&'a str),
    /// The seed at index `seed` has trained on `done` of `total` decisions.
    Training { seed: usize, done: u64, total: u64 },
    /// A seed is trained and judged: its figures, before the next seed starts.
    Judged(&'a SeedFigure),
}

/// Trains and evaluates every seed in turn, telling `progress` how it goes.
pub fn run(b: &GrowthBench, progress: &mut dyn FnMut(Progress<'_>)) -> Result<GrowthReport> {
    let WorkloadSpec::Morpho(settings) = &b.spec.workload else {
        return Err(anyhow!("--env: the growth benchmark trains the morpho workload"));
    };
    let mut seeds = Vec::new();
    for (i, &seed) in b.seeds.iter().enumerate() {
        let spec = RunSpec { seed, ..b.spec.clone() };
        progress(Progress::Starts(&format!("seed {seed}: training")));
        let total = spec.updates() * spec.batch_size() as u64;
        let opts = TrainOptions { skip_evaluation: true, ..TrainOptions::default() };
        let mut seen = |m: &UpdateMetrics| progress(Progress::Training { seed: i, done: m.point.global_step, total });
        // The whole run's wall time: set-up (a clone of the grower's play) included.
        let began = std::time::Instant::now();
        let trained = crate::train_with(&spec, opts, &mut seen).with_context(|| format!("seed {seed}"))?;
        let train_s = began.elapsed().as_secs_f64();
        let arch: Architecture = serde_json::from_value(trained.policy.shape())?;
        let net = ActorCritic::from_flat(arch, trained.policy.network().flat().copy());
        let agent = TrainedMorpho { net, workload: Arc::new(Morpho::load(settings, &spec)?) };
        let eval = agent.evaluation(b.tasks, b.episodes, b.eval_seed, Against::Baselines, &mut |name| {
            progress(Progress::Starts(&format!("seed {seed}: {name}")))
        });
        seeds.push(SeedFigure {
            seed,
            train_s,
            decisions: trained.report.total_steps,
            vs_best_waiting: eval.greedy.against[0].clone(),
            vs_grower: eval.greedy.against[2].clone(),
            grew: eval.greedy.grew,
            sampled_vs_best_waiting: eval.sampled.against[0].clone(),
            sampled_grew: eval.sampled.grew,
            learned: learned(&eval),
            eval,
        });
        progress(Progress::Judged(seeds.last().expect("just pushed")));
    }
    let info = hotlab_train::system::info();
    let learned = seeds.iter().filter(|s| s.learned).count();
    Ok(GrowthReport {
        cpu: info.devices.first().map(|d| d.name.clone()).unwrap_or_default(),
        cores: info.cpu_cores,
        device: b.spec.device.clone(),
        tasks: b.tasks.name().into(),
        episodes: b.episodes,
        eval_seed: b.eval_seed,
        spec_learns: 3 * learned >= 2 * seeds.len() && !seeds.is_empty(),
        learned,
        seeds,
    })
}

//! `hotlab lesson list` and `hotlab lesson run ID`: the catalogue's lessons, each run as an
//! audit of its fixes against its slow setting, with its signature's figures.

use crate::failure::{Outcome, UsageError};
use clap::{Args, Subcommand};
use hotlab_report::lessons;
use hotlab_report::lessons::{Lesson, Params};

#[derive(Subcommand, Debug)]
pub enum LessonCommand {
    /// The lessons: id, catalogue row, title, the slow setting and its fixes.
    List(ListArgs),
    /// Run a lesson: its slow setting and each fix, interleaved, with the verdicts and the
    /// signature's figure per setting (the same result as the lab's lesson page).
    Run(RunArgs),
    /// Train each lesson's slow setting and fixes once, briefly, and say whether its
    /// signature shows on this machine (exit 1 when one does not). A lesson that needs a
    /// GPU is skipped, saying so, on a machine without CUDA.
    Check(CheckArgs),
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The lessons to check (default: all).
    pub ids: Vec<String>,
    /// Seconds of training per run [signature runs: 0.5; with --verdicts, the verdicts'
    /// runs: each lesson's budget, on CUDA at least 4 s].
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Print one JSON array (a check per lesson) as the last line.
    #[arg(long)]
    pub json: bool,
    /// Record what this machine measured into FILE (the repository's is
    /// docs/lessons-gpu.json, made on a GPU box): per lesson checked, the device, the date,
    /// the signature's figures and, with --verdicts, each fix's verdict and ratio. Lessons
    /// already in FILE and not checked now keep their record.
    #[arg(long, value_name = "FILE")]
    pub record: Option<std::path::PathBuf>,
    /// With --record: also run each lesson as `lesson run` does (interleaved, at its budget
    /// on this device, or --seconds and --repeats where given) and record the audit's
    /// verdicts.
    #[arg(long, requires = "record")]
    pub verdicts: bool,
    /// With --verdicts: pairs per fix, and baseline/baseline pairs for the noise [each
    /// lesson's]. On a GPU, runs of 4 s × 3 repeats kept update-dispatch's A/A noise within
    /// 0.87–1.11 where 1 s × 2 spanned 0.19–6.52 (docs/gpu-results.md).
    #[arg(long, requires = "verdicts")]
    pub repeats: Option<usize>,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print the catalogue as one JSON array, each lesson with what a GPU measured
    /// (`gpu_result`, null where nothing is recorded).
    #[arg(long)]
    pub json: bool,
    /// Read the GPU results from FILE instead of the repository's record.
    #[arg(long, value_name = "FILE")]
    pub records: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The lesson (`hotlab lesson list` shows them).
    pub id: String,
    /// A knob over the lesson's baseline, KEY=VALUE (applies to every fix too); repeat for several.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub settings: Vec<String>,
    /// Pairs per fix, and baseline/baseline pairs for the noise [the lesson's; at least 3
    /// where the runs go to a CUDA device].
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Seconds of training per run [the lesson's; at least 4 where the runs go to a CUDA
    /// device, whose first second is mostly warm-up].
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Print one JSON object (the outcome) as the last line, no progress bar.
    #[arg(long)]
    pub json: bool,
}

pub fn lesson(c: LessonCommand) -> Outcome<()> {
    match c {
        LessonCommand::List(a) => list(a),
        LessonCommand::Run(a) => run(a),
        LessonCommand::Check(a) => check(a),
    }
}

fn check(a: CheckArgs) -> Outcome<()> {
    let chosen: Vec<&'static Lesson> = match a.ids.is_empty() {
        true => lessons::LESSONS.iter().collect(),
        false => a.ids.iter().map(|id| find(id)).collect::<Result<_, _>>()?,
    };
    // The signature's runs are short; the verdicts' get the lesson's budget on its device
    // (as `lesson run` gives them) unless asked otherwise.
    let params = Params { seconds: Some(a.seconds.unwrap_or(0.5)), repeats: a.repeats, ..Params::default() };
    let asked = Params { seconds: a.seconds, repeats: a.repeats, ..Params::default() };
    if let Some(file) = &a.record {
        crate::bench::lessons::read_records(file)?;
    }
    let mut checks = Vec::new();
    let mut recorded = Vec::new();
    for lesson in chosen {
        let c = crate::bench::lessons::check(lesson, &params)?;
        if a.record.is_some() && c.skipped.is_none() && c.error.is_none() {
            let verdicts = a.verdicts.then(|| on_its_device(lesson, &asked));
            recorded.push(crate::bench::lessons::record(lesson, &c, verdicts.as_ref())?);
        }
        if let (false, Some(why)) = (a.json, &c.skipped) {
            println!("{:<20} {:<13} {why}", c.lesson, "skipped");
        } else if !a.json {
            let figures: Vec<String> = c.figures.iter().map(|f| format!("{} {:.4}", f.setting, f.value)).collect();
            let shows = if c.shows { "shows" } else { "DOES NOT SHOW" };
            println!("{:<20} {shows:<13} {}: {}", c.lesson, c.measure, figures.join(", "));
        }
        checks.push(c);
    }
    if let Some(file) = &a.record {
        crate::bench::lessons::merge_records(file, recorded)?;
        if !a.json {
            println!("recorded in {}", file.display());
        }
    }
    if a.json {
        println!("{}", serde_json::to_string(&checks)?);
    }
    let missing: Vec<&str> =
        checks.iter().filter(|c| !c.shows && c.skipped.is_none()).map(|c| c.lesson.as_str()).collect();
    if !missing.is_empty() {
        return Err(anyhow::anyhow!("the signature did not show for {}", missing.join(", ")).into());
    }
    Ok(())
}

fn list(a: ListArgs) -> Outcome<()> {
    if a.json {
        let text = match &a.records {
            Some(file) => Some(
                std::fs::read_to_string(file)
                    .map_err(|e| UsageError { flag: "--records", message: format!("{}: {e}", file.display()) })?,
            ),
            None => None,
        };
        let records = lessons::gpu_results(text.as_deref()).map_err(|e| UsageError {
            flag: "--records",
            message: format!("{}: {e}", a.records.as_deref().map_or("the record".into(), |f| f.display().to_string())),
        })?;
        let mut out = Vec::new();
        for l in lessons::LESSONS {
            let mut v = serde_json::to_value(l)?;
            v["gpu_result"] = serde_json::to_value(records.iter().find(|r| r.lesson == l.id))?;
            out.push(v);
        }
        println!("{}", serde_json::to_string(&out)?);
        return Ok(());
    }
    for l in lessons::LESSONS {
        let base: Vec<String> = l.baseline.knobs().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("{:<20} row {:>2}  {}", l.id, l.row, l.title);
        println!("{:<28}{} → {}", "", base.join(" "), l.fixes().join(" | "));
    }
    Ok(())
}

fn find(id: &str) -> Result<&'static Lesson, UsageError> {
    lessons::find(id).ok_or_else(|| UsageError {
        flag: "ID",
        message: format!("'{id}' is not a lesson; the lessons: {}", lessons::ids().join(", ")),
    })
}

fn run(a: RunArgs) -> Outcome<()> {
    let lesson = find(&a.id)?;
    let mut settings = std::collections::BTreeMap::new();
    for s in &a.settings {
        let Some((k, v)) = s.split_once('=') else {
            return Err(UsageError { flag: "--set", message: format!("'{s}': write KEY=VALUE, e.g. envs=32") }.into());
        };
        settings.insert(k.trim().to_string(), v.trim().to_string());
    }
    let params = Params { settings, repeats: a.repeats, seconds: a.seconds };
    let plan = lesson.plan(&on_its_device(lesson, &params))?;
    if let Some(why) = crate::bench::lessons::unrunnable(lesson, &plan) {
        return Err(UsageError { flag: "ID", message: format!("{why}; run it on a GPU machine") }.into());
    }
    if !a.json {
        println!("{} (row {}): {}\n", lesson.title, lesson.row, lesson.phenomenon);
        println!("look at: {}\n", lesson.look_at);
    }
    let measured = super::audit::measure(&plan, a.json)?;
    let outcome = lesson.conclude(&plan, &measured).map_err(anyhow::Error::msg)?;
    match a.json {
        true => println!("{}", serde_json::to_string(&outcome)?),
        false => print!("{}", text(lesson, &outcome)),
    }
    Ok(())
}

/// `params` with the lesson's budget on the device its runs resolve to (on CUDA at least
/// [`lessons::GPU_FLOOR`]), where they leave it to the lesson.
fn on_its_device(lesson: &Lesson, params: &Params) -> Params {
    let cuda = matches!(hotlab_train::exec::device::resolve(&lesson.device(params)), Ok(tch::Device::Cuda(_)));
    lesson.params_on(params, cuda)
}

fn text(lesson: &Lesson, o: &hotlab_report::lessons::Outcome) -> String {
    let mut out = super::audit::table(&o.audit);
    out.push_str(&format!("\n{}:\n", lesson.signature.text));
    for f in &o.signature {
        out.push_str(&format!("  {:<28} {:.4}\n", f.setting, f.value));
    }
    let shows = if o.shows { "shows" } else { "DID NOT SHOW" };
    out.push_str(&format!("the signature {shows} on the slow setting\n"));
    out
}

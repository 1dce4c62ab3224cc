//! `hotlab profile -- CMD…`: a user's own training script, run unmodified under hotlab's
//! probe. The report maps its time to the catalogue (the advice names its row, its lesson
//! and the call site); `--verify` and `--variant` then audit the advice by re-running the
//! script, baseline and variant interleaved.

use super::train::ProfileArgs;
use crate::failure::{Outcome, UsageError};
use hotlab_report::audit::{AuditReport, Change, Plan};
use hotlab_report::{analyze, Report};
use hotlab_spec::knobs;
use hotlab_spec::{PresetSpec, RunSpec, SpecError};
use hotlab_specs::{EnvName, ExternalSpec};
use serde_json::{json, Value};

pub fn profile(a: ProfileArgs) -> Outcome<()> {
    if a.repeats < 2 {
        let message = format!("{}: at least 2 (one pair says nothing of the spread)", a.repeats);
        return Err(UsageError { flag: "--repeats", message }.into());
    }
    if a.trace.is_some() {
        let message = "traces hotlab's own workloads; a script's trace is PyTorch Profiler's".into();
        return Err(UsageError { flag: "--trace", message }.into());
    }
    let spec = script_spec(&a)?;
    let json = a.report == "json" || a.train.json;
    let trained = super::train::run_spec(&a.train, spec.clone(), None, json)?;
    let mut report = analyze(&trained.report.profile, &trained.report.config);
    report.steady_sps = trained.report.steady.as_ref().map(|s| s.sps);
    if !json {
        print!("{}", report.markdown());
    }
    let audit = verify(&a, &spec, &report, json)?;
    let cost = match a.probe_cost {
        true => Some(probe_cost(&a, &spec, &trained.report, json)?),
        false => None,
    };
    if json {
        let mut out = serde_json::to_value(&trained.report)?;
        if let Value::Object(fields) = &mut out {
            fields.insert("per_env_step".into(), per_env_step(&trained.report.counters));
            fields.insert("per_vector_step".into(), per_vector_step(&trained.report.profile));
            fields.insert("report".into(), serde_json::to_value(&report)?);
            fields.insert("audit".into(), serde_json::to_value(&audit)?);
            fields.insert("probe_cost".into(), cost.clone().unwrap_or(Value::Null));
        }
        println!("{out}");
    } else {
        if let Some(audit) = &audit {
            println!("\n## Verified by re-running\n\n{}", super::audit::table(audit));
        }
        if let Some(c) = &cost {
            println!(
                "\nprobe cost, measured: {:.0} steps/s under the full probe, {:.0} under the light one (env steps only, run after it): the full probe's hooks cost {:.1}%",
                c["full_sps"].as_f64().unwrap_or(0.0),
                c["light_sps"].as_f64().unwrap_or(0.0),
                c["cost_pct"].as_f64().unwrap_or(0.0)
            );
        }
    }
    Ok(())
}

/// The script run again under the light probe: its steps/s against the full probe's (each
/// run's steady window where it has one).
fn probe_cost(a: &ProfileArgs, spec: &RunSpec, full: &hotlab_train::TrainReport, json: bool) -> Outcome<Value> {
    let light = knobs::apply(spec.clone(), &[(&ExternalSpec::PROBE_MODE, Value::from("light"))])?;
    let run = super::train::run_spec(&a.train, light, None, json)?;
    let sps = |r: &hotlab_train::TrainReport| r.steady.as_ref().map_or(r.sps, |s| s.sps);
    let (full_sps, light_sps) = (sps(full), sps(&run.report));
    Ok(json!({
        "full_sps": full_sps,
        "light_sps": light_sps,
        "cost_pct": 100.0 * (1.0 - full_sps / light_sps.max(1e-12)),
    }))
}

/// `--torch-trace FILE`: a PyTorch Profiler trace read into the report (nothing runs).
pub fn torch_trace(a: ProfileArgs) -> Outcome<()> {
    let path = a.torch_trace.as_deref().expect("dispatched on --torch-trace");
    let facts = hotlab_workloads::external::trace::read(path)?;
    let report = hotlab_workloads::external::trace::report(&facts);
    match a.report == "json" || a.train.json {
        true => println!("{}", serde_json::to_string(&report)?),
        false => print!("{}", report.markdown()),
    }
    Ok(())
}

/// The run's spec: the flags given, the workload the script (`external`), its command the
/// words after `--` (as a shell would quote them again).
fn script_spec(a: &ProfileArgs) -> Outcome<RunSpec> {
    if a.script.is_empty() {
        return Ok(a.train.spec()?);
    }
    let joined = shlex::try_join(a.script.iter().map(String::as_str))
        .map_err(|e| SpecError::of(&ExternalSpec::COMMAND, format!("cannot be written as one command line: {e}")))?;
    // The script's knobs (`--vars`, `--cwd`) are taken with it: `env` is set first.
    let mut given = a.train.knobs.given.clone();
    given.extend([
        (&knobs::ENV, Value::from(EnvName::External.as_str())),
        (&ExternalSpec::COMMAND, Value::from(joined)),
    ]);
    Ok(knobs::apply(a.train.preset.spec(), &given)?)
}

/// The audits `--verify` and `--variant` ask for, run and concluded (None: none asked).
fn verify(a: &ProfileArgs, spec: &RunSpec, report: &Report, json: bool) -> Outcome<Option<AuditReport>> {
    let mut changes = Vec::new();
    if a.verify {
        for r in report.recommendations.iter().filter(|r| r.auditable()) {
            match Change::recommended(r).and_then(|c| c.apply(spec).map(|_| c)) {
                Ok(c) => changes.push(c),
                Err(e) => eprintln!("not verifying '{}': {e}", r.knob),
            }
        }
        let code: Vec<&str> =
            report.recommendations.iter().filter(|r| !r.auditable()).filter_map(|r| r.lesson.as_deref()).collect();
        if !code.is_empty() && a.variant.is_none() {
            eprintln!(
                "advice that needs a change to the code ({}) is verified with --variant 'COMMAND' (the script with the change made)",
                code.join(", ")
            );
        }
    }
    if let Some(variant) = &a.variant {
        let change = Change::parse(&format!("command={variant}"))?;
        change.apply(spec)?;
        changes.push(change);
    }
    if changes.is_empty() {
        if a.verify {
            eprintln!(
                "nothing to verify by a flag: no advice that a placeholder of the command makes (give one, e.g. \
                 {{async?--async}}, or --variant 'COMMAND')"
            );
        }
        return Ok(None);
    }
    let plan = Plan::new(spec.clone(), changes, a.repeats)?;
    let runs = super::audit::measure(&plan, json)?;
    Ok(Some(plan.conclude(&runs).map_err(anyhow::Error::msg)?))
}

/// The run's counts per env step (each env's step: a transition).
fn per_env_step(c: &hotlab_core::counters::Counters) -> Value {
    let per = |n: f64| n / c.env_steps.max(1) as f64;
    json!({
        "host_syncs": per(c.host_syncs as f64),
        "h2d_copies": per(c.h2d_copies as f64),
        "h2d_bytes": per(c.h2d_bytes as f64),
    })
}

/// A typical step of the script's loop (every env once): its reads and copies (the most
/// common counts), its torch ops (sampled), its forward batch; null where not measured.
fn per_vector_step(profile: &hotlab_core::profile::Profile) -> Value {
    let Some(s) = &profile.script else { return Value::Null };
    json!({
        "envs": s.num_envs,
        "vector_steps": s.vector_steps,
        "reads": s.reads_per_step(),
        "copies": s.copies_per_step(),
        "ops": s.ops_per_step(),
        "forward_batch": s.forward_batch(),
        "kind": s.kind(),
        "env_class": s.env_class,
        "grad_reads_per_optimizer_step": (s.optimizer_steps > 0).then(|| s.grad_reads as f64 / s.optimizer_steps as f64),
        "update_copies_per_optimizer_step": (s.optimizer_steps > 0).then(|| s.update_copies as f64 / s.optimizer_steps as f64),
    })
}

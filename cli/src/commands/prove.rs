//! `hotlab prove`: depth-bounded SLD proof search on a knowledge base, with one proof.

use crate::failure::{Outcome, UsageError};
use clap::Args;
use hotlab_workloads::proof::prolog::kb::Kb;
use hotlab_workloads::proof::prolog::prove::{annotate, prove, SUCCESSORS};
use hotlab_workloads::proof::prolog::worlds::load_kb;
use hotlab_workloads::proof::prolog::Atom;

#[derive(Args, Debug)]
pub struct ProveArgs {
    /// A Prolog file in the subset (facts and Horn rules, arity 1 or 2), or a generated
    /// world: `family:people=N,seed=S` or `geography:places=N,seed=S`.
    #[arg(long)]
    pub kb: String,
    /// The query: one atom, e.g. `ancestor(ann, cid)` (variables allowed: `ancestor(ann, W)`).
    #[arg(long)]
    pub query: String,
    /// Most resolution steps in a proof (default 10).
    #[arg(long, default_value_t = 10)]
    pub depth: usize,
    /// Successors kept per step, in clause order (the env's action count; default 20).
    #[arg(long, default_value_t = SUCCESSORS)]
    pub successors: usize,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn prove_cmd(a: ProveArgs) -> Outcome<()> {
    let usage = |flag: &'static str, message: String| UsageError { flag, message };
    if a.depth > 64 {
        return Err(usage("--depth", format!("{} is too deep; allowed 0 to 64", a.depth)).into());
    }
    if a.successors == 0 {
        return Err(usage("--successors", "must be at least 1".into()).into());
    }
    let program = load_kb(&a.kb).map_err(|m| usage("--kb", m))?;
    let atom: Atom = a.query.parse().map_err(|e| usage("--query", format!("'{}': {e}", a.query)))?;
    let mut kb = Kb::new(&program);
    let goals = kb.query(&atom).map_err(|e| usage("--query", e.to_string()))?;
    let mut outcome = prove(&kb, &goals, a.depth, a.successors);
    annotate(&mut outcome, &program.clauses);
    if a.json {
        let mut v = serde_json::to_value(&outcome)?;
        v["query"] = serde_json::Value::String(atom.to_string());
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if outcome.provable {
        println!("{atom}: provable within depth {} ({} steps)", a.depth, outcome.proof.len());
        for step in &outcome.proof {
            println!("  {}\n    with {}\n    → {}", step.goals, step.clause_text, step.resolvent);
        }
    } else {
        println!("{atom}: not provable within depth {}", a.depth);
    }
    let d = &outcome.dropped;
    println!(
        "{} goal lists expanded; successors dropped: {} cut off (over {}), {} too long, {} with too many variables",
        outcome.expanded, d.cut_off, a.successors, d.too_long, d.too_many_vars
    );
    Ok(())
}

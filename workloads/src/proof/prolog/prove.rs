//! Depth-bounded proof search over the env's own successor relation, and an independent
//! step-by-step check of the proofs it returns.
//!
//! "Provable within depth D" means: some path of at most D successor choices (the same
//! choices the env offers: at most `limit` per step, in clause order) reaches the empty
//! goal list. The search deepens iteratively, so the proof it returns is a shortest one;
//! it never revisits a goal list already on its path (a shortest proof never does), and
//! remembers goal lists that failed for a reason that did not depend on the path.

use super::kb::{Dropped, Goals, Kb, Successor};
use super::syntax::{Atom, Clause, Term};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// The env's default limit on successors per step (seed 000's 20).
pub const SUCCESSORS: usize = 20;

/// One resolution step of a proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The goal list before the step.
    pub goals: String,
    /// The clause resolved with its first atom (index in the program).
    pub clause: usize,
    pub clause_text: String,
    /// The goal list after the step.
    pub resolvent: String,
}

/// What a search found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub provable: bool,
    pub depth: usize,
    /// A shortest proof (empty when not provable).
    pub proof: Vec<Step>,
    /// Goal lists expanded.
    pub expanded: u64,
    /// Successors left out of the goal lists expanded, by reason (each list counted once).
    pub dropped: Dropped,
}

struct Search<'a> {
    kb: &'a Kb,
    limit: usize,
    /// Goal lists that failed with this much depth left, whatever the path.
    failed: HashMap<Goals, usize>,
    path: HashSet<Goals>,
    expanded: u64,
    /// Goal lists whose dropped successors are already counted (iterations re-expand).
    counted: HashSet<Goals>,
    dropped: Dropped,
    scratch: Vec<Vec<Successor>>,
}

impl Search<'_> {
    /// Whether `goals` has a proof within `left` steps; the proof's successors (in
    /// reverse) go to `proof`. The flag is whether the answer depended on the path.
    fn solve(&mut self, goals: &Goals, left: usize, level: usize, proof: &mut Vec<Successor>) -> (bool, bool) {
        if goals.is_empty() {
            return (true, false);
        }
        if left == 0 || self.failed.get(goals).is_some_and(|&d| d >= left) {
            return (false, false);
        }
        if self.scratch.len() <= level {
            self.scratch.push(Vec::new());
        }
        let mut succ = std::mem::take(&mut self.scratch[level]);
        let d = self.kb.successors(goals, self.limit, &mut succ);
        self.expanded += 1;
        if self.counted.insert(*goals) {
            self.dropped.add(&d);
        }
        self.path.insert(*goals);
        let mut path_dependent = false;
        let mut found = false;
        for s in &succ {
            if self.path.contains(&s.goals) {
                path_dependent = true;
                continue;
            }
            let (ok, dep) = self.solve(&s.goals, left - 1, level + 1, proof);
            path_dependent |= dep;
            if ok {
                proof.push(*s);
                found = true;
                break;
            }
        }
        self.path.remove(goals);
        self.scratch[level] = succ;
        if !found && !path_dependent {
            let best = self.failed.entry(*goals).or_insert(0);
            *best = (*best).max(left);
        }
        (found, path_dependent)
    }
}

impl<'a> Search<'a> {
    fn new(kb: &'a Kb, limit: usize) -> Self {
        Search {
            kb,
            limit,
            failed: HashMap::new(),
            path: HashSet::new(),
            expanded: 0,
            counted: HashSet::new(),
            dropped: Dropped::default(),
            scratch: Vec::new(),
        }
    }
}

/// Answers "provable within depth?" for many queries of one knowledge base, keeping the
/// goal lists that failed from one query to the next (a failure that did not depend on
/// the path is a fact about the knowledge base). Labelling a world's random queries,
/// most of them unprovable, goes from seconds to milliseconds.
pub struct Prover<'a>(Search<'a>);

impl<'a> Prover<'a> {
    pub fn new(kb: &'a Kb, limit: usize) -> Self {
        Prover(Search::new(kb, limit))
    }

    /// Whether `query` has a proof of at most `depth` steps (the same answer as [`prove`]).
    pub fn provable(&mut self, query: &Goals, depth: usize) -> bool {
        self.0.path.clear();
        self.0.solve(query, depth, 0, &mut Vec::new()).0
    }
}

/// Searches for a proof of `query` of at most `depth` steps.
pub fn prove(kb: &Kb, query: &Goals, depth: usize, limit: usize) -> Outcome {
    let mut search = Search::new(kb, limit);
    let mut proof = Vec::new();
    let provable = (0..=depth).any(|d| {
        proof.clear();
        search.solve(query, d, 0, &mut proof).0
    });
    proof.reverse();
    let mut steps = Vec::new();
    let mut current = *query;
    for s in &proof {
        steps.push(Step {
            goals: kb.goals_text(&current),
            clause: s.clause as usize,
            clause_text: String::new(),
            resolvent: kb.goals_text(&s.goals),
        });
        current = s.goals;
    }
    Outcome { provable, depth, proof: steps, expanded: search.expanded, dropped: search.dropped }
}

/// Fills each step's `clause_text` from the program.
pub fn annotate(outcome: &mut Outcome, clauses: &[Clause]) {
    for step in &mut outcome.proof {
        step.clause_text = clauses[step.clause].to_string();
    }
}

/// Checks a proof step by step, from the source text alone (not with the resolution code
/// that found it): each step's resolvent must be the first goal resolved with the named
/// clause, up to variable renaming, and the last must be empty.
pub fn check(clauses: &[Clause], query: &Atom, steps: &[Step]) -> Result<(), String> {
    let mut goals = vec![query.clone()];
    for (i, step) in steps.iter().enumerate() {
        let shown = parse_goals(&step.goals).map_err(|e| format!("step {i}: goals: {e}"))?;
        if !variant(&shown, &goals) {
            return Err(format!("step {i}: goals {} do not follow from the previous step", step.goals));
        }
        let clause = clauses.get(step.clause).ok_or_else(|| format!("step {i}: no clause {}", step.clause))?;
        let (first, rest) = goals.split_first().ok_or_else(|| format!("step {i}: nothing left to resolve"))?;
        let fresh = |a: &Atom| Atom { pred: a.pred.clone(), args: a.args.iter().map(|t| rename(t, "c")).collect() };
        let head = fresh(&clause.head);
        if head.pred != first.pred || head.args.len() != first.args.len() {
            return Err(format!("step {i}: clause {} does not match {first}", step.clause));
        }
        let mut sub: HashMap<String, Term> = HashMap::new();
        for (a, b) in first.args.iter().zip(&head.args) {
            if !unify_terms(a, b, &mut sub) {
                return Err(format!("step {i}: {first} does not unify with {}", clause.head));
            }
        }
        let next: Vec<Atom> = clause.body.iter().map(fresh).chain(rest.iter().cloned()).collect();
        let resolved: Vec<Atom> = next.iter().map(|a| apply(a, &sub)).collect();
        let claimed = parse_goals(&step.resolvent).map_err(|e| format!("step {i}: resolvent: {e}"))?;
        if !variant(&claimed, &resolved) {
            return Err(format!("step {i}: resolvent {} is not the resolution of {first}", step.resolvent));
        }
        // Keep variable names apart from the next clause's.
        goals = resolved
            .iter()
            .map(|a| Atom { pred: a.pred.clone(), args: a.args.iter().map(|t| rename(t, "g")).collect() })
            .collect();
    }
    if goals.is_empty() {
        Ok(())
    } else {
        Err(format!("the proof ends with {} goals left", goals.len()))
    }
}

fn rename(t: &Term, prefix: &str) -> Term {
    match t {
        Term::Var(v) => Term::Var(format!("{prefix}{v}")),
        c => c.clone(),
    }
}

fn walk(t: &Term, sub: &HashMap<String, Term>) -> Term {
    let mut t = t.clone();
    while let Term::Var(v) = &t {
        match sub.get(v) {
            Some(next) => t = next.clone(),
            None => break,
        }
    }
    t
}

fn unify_terms(a: &Term, b: &Term, sub: &mut HashMap<String, Term>) -> bool {
    match (walk(a, sub), walk(b, sub)) {
        (x, y) if x == y => true,
        (Term::Var(v), y) | (y, Term::Var(v)) => {
            sub.insert(v, y);
            true
        }
        _ => false,
    }
}

fn apply(a: &Atom, sub: &HashMap<String, Term>) -> Atom {
    Atom { pred: a.pred.clone(), args: a.args.iter().map(|t| walk(t, sub)).collect() }
}

/// Whether two goal lists are equal up to a one-to-one renaming of variables.
fn variant(a: &[Atom], b: &[Atom]) -> bool {
    let (mut ab, mut ba) = (HashMap::new(), HashMap::new());
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.pred == y.pred
                && x.args.len() == y.args.len()
                && x.args.iter().zip(&y.args).all(|(s, t)| match (s, t) {
                    (Term::Var(v), Term::Var(w)) => {
                        ab.entry(v.clone()).or_insert_with(|| w.clone()) == w
                            && ba.entry(w.clone()).or_insert_with(|| v.clone()) == v
                    }
                    _ => s == t,
                })
        })
}

/// `[a(x), b(_G0)]` back into atoms.
fn parse_goals(text: &str) -> Result<Vec<Atom>, String> {
    let inner = text.trim().strip_prefix('[').and_then(|t| t.strip_suffix(']')).ok_or("not a [list]")?;
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    // Atoms end at ')': split there, since arguments hold no parentheses.
    inner
        .split_inclusive(')')
        .map(|part| part.trim().trim_start_matches(',').trim())
        .filter(|part| !part.is_empty())
        .map(|part| part.parse::<Atom>().map_err(|e| e.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proof::prolog::Program;

    const FAMILY: &str = "parent(a, b).\nparent(b, c).\nparent(c, d).\nparent(a, e).\n\
        ancestor(X, Y) :- parent(X, Y).\nancestor(X, Y) :- parent(X, Z), ancestor(Z, Y).\n\
        loop(X) :- loop(X).\nloop(z).\n";

    fn run(query: &str, depth: usize) -> (Program, Atom, Outcome) {
        let program: Program = FAMILY.parse().unwrap();
        let mut kb = Kb::new(&program);
        let atom: Atom = query.parse().unwrap();
        let q = kb.query(&atom).unwrap();
        let mut out = prove(&kb, &q, depth, SUCCESSORS);
        annotate(&mut out, &program.clauses);
        (program, atom, out)
    }

    #[test]
    fn finds_a_shortest_proof_and_it_checks() {
        let (program, atom, out) = run("ancestor(a, d)", 10);
        assert!(out.provable);
        // ancestor → parent(a,Z),ancestor(Z,d) → ancestor(b,d) → … → parent(c,d) → []
        assert_eq!(out.proof.len(), 6);
        assert_eq!(out.proof[0].clause_text, "ancestor(X, Y) :- parent(X, Z), ancestor(Z, Y).");
        assert_eq!(out.proof.last().unwrap().resolvent, "[]");
        check(&program.clauses, &atom, &out.proof).unwrap();
    }

    #[test]
    fn the_depth_bound_is_respected() {
        assert!(!run("ancestor(a, d)", 5).2.provable);
        assert!(run("ancestor(a, d)", 6).2.provable);
        assert!(!run("ancestor(d, a)", 12).2.provable);
    }

    #[test]
    fn cycles_do_not_hide_a_later_clause() {
        // loop(z) :- loop(z) repeats its own goal: the guard skips it, the fact proves it.
        let (program, atom, out) = run("loop(z)", 3);
        assert!(out.provable);
        assert_eq!(out.proof.len(), 1);
        check(&program.clauses, &atom, &out.proof).unwrap();
        assert!(!run("loop(y)", 8).2.provable);
    }

    #[test]
    fn a_tampered_proof_is_rejected() {
        let (program, atom, mut out) = run("ancestor(a, d)", 10);
        out.proof[2].resolvent = "[ancestor(e, d)]".into();
        assert!(check(&program.clauses, &atom, &out.proof).unwrap_err().contains("step 2"));
        let (_, _, mut short) = run("ancestor(a, d)", 10);
        short.proof.pop();
        assert!(check(&program.clauses, &atom, &short.proof).unwrap_err().contains("goals left"));
        let (_, _, mut wrong) = run("ancestor(a, d)", 10);
        wrong.proof[0].clause = 0;
        assert!(check(&program.clauses, &atom, &wrong.proof).is_err());
    }
}

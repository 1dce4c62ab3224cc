//! A knowledge base compiled for resolution: predicates and constants interned, clauses
//! indexed by predicate, goal lists as fixed-size arrays of small integers (no allocation
//! per successor: the env derives up to 20 of them per step).

use super::syntax::{Atom, Program, Term};
use std::collections::HashMap;

/// Most atoms in a goal list (seed 000's state is 10 atoms × 3 indices).
pub const MAX_ATOMS: usize = 10;
/// Most distinct variables in a goal list (the encoding's variable slots).
pub const MAX_VARS: usize = 8;
/// The second argument of an arity-1 atom (never a constant id).
pub const NO_ARG: i32 = i32::MAX;

/// A compiled term: a constant id (≥ 0) or variable `v` as `-(v + 1)`.
pub type CTerm = i32;

/// Variable `v` as a term.
pub fn var(v: usize) -> CTerm {
    -(v as i32) - 1
}

/// The variable index of a term, if it is one.
pub fn var_index(t: CTerm) -> Option<usize> {
    (t < 0).then(|| (-(t + 1)) as usize)
}

/// A compiled atom: predicate id and two arguments (`NO_ARG` for arity 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CAtom {
    pub pred: u32,
    pub args: [CTerm; 2],
}

/// A goal list of at most [`MAX_ATOMS`] atoms, variables numbered canonically (in order
/// of first appearance), unused slots zeroed: equal lists are variants of each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Goals {
    pub len: u8,
    pub atoms: [CAtom; MAX_ATOMS],
}

impl Goals {
    pub fn one(atom: CAtom) -> Self {
        let mut g = Goals { len: 1, ..Goals::default() };
        g.atoms[0] = atom;
        g.canonicalize();
        g
    }

    pub fn as_slice(&self) -> &[CAtom] {
        &self.atoms[..self.len as usize]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Distinct variables (after canonicalization: the highest index + 1).
    pub fn vars(&self) -> usize {
        self.as_slice().iter().flat_map(|a| a.args).filter_map(var_index).map(|v| v + 1).max().unwrap_or(0)
    }

    /// Renumbers variables by first appearance; returns how many there are.
    fn canonicalize(&mut self) -> usize {
        let mut map: [i32; 2 * MAX_ATOMS] = [0; 2 * MAX_ATOMS];
        let mut seen: [CTerm; 2 * MAX_ATOMS] = [0; 2 * MAX_ATOMS];
        let mut n = 0;
        for atom in &mut self.atoms[..self.len as usize] {
            for arg in &mut atom.args {
                if *arg < 0 {
                    let pos = seen[..n].iter().position(|s| s == arg);
                    let slot = pos.unwrap_or_else(|| {
                        seen[n] = *arg;
                        map[n] = var(n);
                        n += 1;
                        n - 1
                    });
                    *arg = map[slot];
                }
            }
        }
        n
    }
}

/// A clause with its variables numbered `0..vars`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CClause {
    pub head: CAtom,
    pub body: Vec<CAtom>,
    pub vars: usize,
}

/// Why successors were left out of a step, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Dropped {
    /// Resolvents past the first `Limits::successors` (clause order).
    pub cut_off: u64,
    /// Resolvents longer than [`MAX_ATOMS`].
    pub too_long: u64,
    /// Resolvents with more than [`MAX_VARS`] variables.
    pub too_many_vars: u64,
}

impl Dropped {
    pub fn add(&mut self, o: &Dropped) {
        self.cut_off += o.cut_off;
        self.too_long += o.too_long;
        self.too_many_vars += o.too_many_vars;
    }
}

/// One successor: the goal list and the clause that produced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Successor {
    pub goals: Goals,
    pub clause: u32,
}

/// A knowledge base ready for resolution.
#[derive(Clone, Debug)]
pub struct Kb {
    /// `(name, arity)` per predicate id.
    pub preds: Vec<(String, usize)>,
    /// Name per constant id.
    pub consts: Vec<String>,
    /// Clauses in program order.
    pub clauses: Vec<CClause>,
    /// Clause ids per predicate, in program order.
    by_pred: Vec<Vec<u32>>,
    pred_ids: HashMap<(String, usize), u32>,
    const_ids: HashMap<String, u32>,
}

/// Why a query cannot be asked of a knowledge base.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("the query has {0} distinct variables; at most {MAX_VARS} are supported")]
    TooManyVars(usize),
}

impl Kb {
    pub fn new(program: &Program) -> Self {
        let mut kb = Kb {
            preds: Vec::new(),
            consts: Vec::new(),
            clauses: Vec::new(),
            by_pred: Vec::new(),
            pred_ids: HashMap::new(),
            const_ids: HashMap::new(),
        };
        for clause in &program.clauses {
            let mut vars: Vec<String> = Vec::new();
            let head = kb.compile(&clause.head, &mut vars);
            let body = clause.body.iter().map(|a| kb.compile(a, &mut vars)).collect();
            let id = kb.clauses.len() as u32;
            kb.by_pred[head.pred as usize].push(id);
            kb.clauses.push(CClause { head, body, vars: vars.len() });
        }
        kb
    }

    /// Interns the predicate and constants of `atom` (new ones get new ids); variables
    /// are numbered in `vars` (each `_` is its own).
    pub fn compile(&mut self, atom: &Atom, vars: &mut Vec<String>) -> CAtom {
        let key = (atom.pred.clone(), atom.args.len());
        let next = self.preds.len() as u32;
        let pred = *self.pred_ids.entry(key.clone()).or_insert(next);
        if pred == next {
            self.preds.push(key);
            self.by_pred.push(Vec::new());
        }
        let mut args = [NO_ARG; 2];
        for (slot, term) in args.iter_mut().zip(&atom.args) {
            *slot = match term {
                Term::Const(c) => self.constant(c) as CTerm,
                Term::Var(v) if v == "_" => {
                    vars.push(String::new());
                    var(vars.len() - 1)
                }
                Term::Var(v) => var(vars.iter().position(|x| x == v).unwrap_or_else(|| {
                    vars.push(v.clone());
                    vars.len() - 1
                })),
            };
        }
        CAtom { pred, args }
    }

    fn constant(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.const_ids.get(name) {
            return id;
        }
        let id = self.consts.len() as u32;
        self.consts.push(name.to_string());
        self.const_ids.insert(name.to_string(), id);
        id
    }

    /// A query as a goal list (its constants and predicate interned).
    pub fn query(&mut self, atom: &Atom) -> Result<Goals, QueryError> {
        let mut vars = Vec::new();
        let a = self.compile(atom, &mut vars);
        if vars.len() > MAX_VARS {
            return Err(QueryError::TooManyVars(vars.len()));
        }
        Ok(Goals::one(a))
    }

    /// A ground query over names the knowledge base already has (`None` otherwise),
    /// without interning anything.
    pub fn ground_query(&self, atom: &Atom) -> Option<Goals> {
        let pred = self.pred_id(&atom.pred, atom.args.len())?;
        let mut args = [NO_ARG; 2];
        for (slot, term) in args.iter_mut().zip(&atom.args) {
            let Term::Const(c) = term else { return None };
            *slot = *self.const_ids.get(c)? as CTerm;
        }
        Some(Goals::one(CAtom { pred, args }))
    }

    pub fn pred_id(&self, name: &str, arity: usize) -> Option<u32> {
        self.pred_ids.get(&(name.to_string(), arity)).copied()
    }

    pub fn const_id(&self, name: &str) -> Option<u32> {
        self.const_ids.get(name).copied()
    }

    /// The successors of `goals`: SLD resolution of its first atom with every clause of
    /// its predicate in program order, the clause's variables standardized apart, the
    /// substitution applied to the whole list. Resolvents longer than [`MAX_ATOMS`] or
    /// with more than [`MAX_VARS`] variables are dropped; the first `limit` are kept.
    pub fn successors(&self, goals: &Goals, limit: usize, out: &mut Vec<Successor>) -> Dropped {
        out.clear();
        let mut dropped = Dropped::default();
        let Some(first) = goals.as_slice().first() else { return dropped };
        let rest = &goals.as_slice()[1..];
        let base = goals.vars();
        let Some(ids) = self.by_pred.get(first.pred as usize) else { return dropped };
        let mut bind: Vec<CTerm> = Vec::new();
        for &id in ids {
            let clause = &self.clauses[id as usize];
            // Goal variables keep 0..base; the clause's are renamed to base.. (standardized apart).
            bind.clear();
            bind.resize(base + clause.vars, UNBOUND);
            let rename = |t: CTerm| var_index(t).map_or(t, |v| var(base + v));
            let unified = (0..2).all(|i| unify(first.args[i], rename(clause.head.args[i]), &mut bind));
            if !unified {
                continue;
            }
            if clause.body.len() + rest.len() > MAX_ATOMS {
                dropped.too_long += 1;
                continue;
            }
            if out.len() == limit {
                dropped.cut_off += 1;
                continue;
            }
            let mut next = Goals { len: (clause.body.len() + rest.len()) as u8, ..Goals::default() };
            let renamed = clause.body.iter().map(|a| CAtom { pred: a.pred, args: a.args.map(rename) });
            for (slot, atom) in next.atoms.iter_mut().zip(renamed.chain(rest.iter().copied())) {
                *slot = CAtom { pred: atom.pred, args: atom.args.map(|t| resolve(t, &bind)) };
            }
            if next.canonicalize() > MAX_VARS {
                dropped.too_many_vars += 1;
                continue;
            }
            out.push(Successor { goals: next, clause: id });
        }
        dropped
    }

    /// `atom` as Prolog text (variables as `_G0`, `_G1`, …).
    pub fn atom_text(&self, atom: &CAtom) -> String {
        let (name, arity) = &self.preds[atom.pred as usize];
        let term = |t: CTerm| match var_index(t) {
            Some(v) => format!("_G{v}"),
            None => self.consts[t as usize].clone(),
        };
        let args: Vec<String> = atom.args[..*arity].iter().map(|&t| term(t)).collect();
        format!("{name}({})", args.join(", "))
    }

    /// A goal list as Prolog text: `[a(x), b(_G0)]`.
    pub fn goals_text(&self, goals: &Goals) -> String {
        let atoms: Vec<String> = goals.as_slice().iter().map(|a| self.atom_text(a)).collect();
        format!("[{}]", atoms.join(", "))
    }
}

const UNBOUND: CTerm = i32::MIN;

/// Follows variable bindings to a constant or an unbound variable.
fn resolve(mut t: CTerm, bind: &[CTerm]) -> CTerm {
    while let Some(v) = var_index(t) {
        match bind.get(v) {
            Some(&b) if b != UNBOUND => t = b,
            _ => break,
        }
    }
    t
}

/// Unifies two terms under `bind` (function-free: no occurs check is needed).
fn unify(a: CTerm, b: CTerm, bind: &mut [CTerm]) -> bool {
    let (a, b) = (resolve(a, bind), resolve(b, bind));
    if a == b {
        return true;
    }
    match (var_index(a), var_index(b)) {
        (Some(v), _) => bind[v] = b,
        (None, Some(v)) => bind[v] = a,
        (None, None) => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kb(text: &str) -> Kb {
        Kb::new(&text.parse().unwrap())
    }

    fn texts(kb: &Kb, goals: &Goals) -> Vec<String> {
        let mut out = Vec::new();
        kb.successors(goals, 20, &mut out);
        out.iter().map(|s| kb.goals_text(&s.goals)).collect()
    }

    #[test]
    fn resolves_the_first_goal_in_clause_order_with_fresh_variables() {
        let mut kb = kb("parent(a, b).\nparent(b, c).\nparent(a, d).\n\
             ancestor(X, Y) :- parent(X, Y).\nancestor(X, Y) :- parent(X, Z), ancestor(Z, Y).\n");
        let q = kb.query(&"ancestor(a, W)".parse().unwrap()).unwrap();
        assert_eq!(
            texts(&kb, &q),
            vec!["[parent(a, _G0)]", "[parent(a, _G0), ancestor(_G0, _G1)]"],
            "the goal's W and the clause's Y/Z are kept apart and renumbered canonically"
        );
        let mut succ = Vec::new();
        kb.successors(&q, 20, &mut succ);
        assert_eq!(texts(&kb, &succ[1].goals), vec!["[ancestor(b, _G0)]", "[ancestor(d, _G0)]"]);
        let fact = kb.query(&"parent(b, c)".parse().unwrap()).unwrap();
        assert_eq!(texts(&kb, &fact), vec!["[]"]);
        let none = kb.query(&"parent(c, a)".parse().unwrap()).unwrap();
        assert!(texts(&kb, &none).is_empty());
    }

    #[test]
    fn shared_variables_are_bound_through_the_whole_list() {
        let mut kb = kb("p(X, X) :- q(X).\nq(a).\n");
        let mut vars = Vec::new();
        let g = Goals::one(kb.compile(&"p(A, B)".parse().unwrap(), &mut vars));
        assert_eq!(texts(&kb, &g), vec!["[q(_G0)]"]);
        let g = kb.query(&"p(a, B)".parse().unwrap()).unwrap();
        assert_eq!(texts(&kb, &g), vec!["[q(a)]"]);
        let g = kb.query(&"p(a, b)".parse().unwrap()).unwrap();
        assert!(texts(&kb, &g).is_empty());
    }

    #[test]
    fn the_successor_limit_cuts_off_in_clause_order_and_counts() {
        let facts: String = (0..25).map(|i| format!("r(a, c{i}).\n")).collect();
        let mut kb = kb(&facts);
        let q = kb.query(&"r(a, X)".parse().unwrap()).unwrap();
        let mut out = Vec::new();
        let dropped = kb.successors(&q, 20, &mut out);
        assert_eq!(out.len(), 20);
        assert_eq!(out.iter().map(|s| s.clause).collect::<Vec<_>>(), (0..20).collect::<Vec<_>>());
        assert_eq!(dropped.cut_off, 5);
    }

    #[test]
    fn long_resolvents_are_dropped_and_counted() {
        let mut kb = kb("p(X) :- q(X), q(X), q(X), q(X), q(X), q(X).\np(a).\n");
        let mut vars = Vec::new();
        let atom = kb.compile(&"p(b)".parse().unwrap(), &mut vars);
        let mut g = Goals { len: 6, ..Goals::default() };
        g.atoms[..6].fill(atom);
        let mut out = Vec::new();
        let d = kb.successors(&g, 20, &mut out);
        assert_eq!((out.len(), d.too_long), (0, 1), "6 body atoms + 5 left = 11; p(b) does not match p(a)");
        g.len = 5;
        let d = kb.successors(&g, 20, &mut out);
        assert_eq!((out.len(), d.too_long, out[0].goals.len), (1, 0, 10));
    }
}

//! Seeded relational worlds of any size, and their query sets.
//!
//! - `family:people=N,seed=S`: a family tree (facts `parent/2`, `male/1`, `female/1`)
//!   with the rules `grandparent`, `ancestor` (recursive), `sibling`, `uncle`, `aunt`
//!   and `cousin`. The subset has no disequality, so `sibling(X, X)` holds for anyone
//!   with a parent (and a father is his children's `uncle`): the rules are what they say.
//! - `geography:places=N,seed=S`: a containment hierarchy (`in/2` from cities to
//!   regions to countries to continents; `border/2` between places of the same level)
//!   with `located_in` (transitive) and `neighbor_of` (symmetric).
//!
//! Queries are ground atoms of the rule predicates, half provable within the depth bound
//! and half not, split by entity: a query is held out (test) when one of its constants is
//! a held-out entity, so no test query is a training query and each needs the rules.

use super::kb::Kb;
use super::prove::{Prover, SUCCESSORS};
use super::syntax::{Atom, Program, Term};
use hotlab_env::rng::HostRng;
use std::collections::HashSet;
use std::fmt::Write;

/// A generated world's description: `family:people=200,seed=3`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldSpec {
    pub kind: WorldKind,
    /// People or places.
    pub size: usize,
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorldKind {
    Family,
    Geography,
}

impl WorldKind {
    fn size_key(self) -> &'static str {
        match self {
            WorldKind::Family => "people",
            WorldKind::Geography => "places",
        }
    }
}

impl std::str::FromStr for WorldSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, params) = s.split_once(':').unwrap_or((s, ""));
        let kind = match name {
            "family" => WorldKind::Family,
            "geography" => WorldKind::Geography,
            other => return Err(format!("unknown world '{other}'; allowed: family, geography")),
        };
        let mut spec = WorldSpec { kind, size: 100, seed: 0 };
        for param in params.split(',').filter(|p| !p.is_empty()) {
            let (key, value) =
                param.split_once('=').ok_or_else(|| format!("'{param}' is not key=value (in world '{s}')"))?;
            let number = || value.parse::<u64>().map_err(|_| format!("{key}={value}: not a whole number"));
            match key {
                "seed" => spec.seed = number()?,
                k if k == kind.size_key() => {
                    spec.size = number()? as usize;
                    if !(4..=1_000_000).contains(&spec.size) {
                        return Err(format!("{key}={value}: allowed 4 to 1000000"));
                    }
                }
                other => {
                    return Err(format!(
                        "unknown parameter '{other}' for world {name}; allowed: {}, seed",
                        kind.size_key()
                    ))
                }
            }
        }
        Ok(spec)
    }
}

impl std::fmt::Display for WorldSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.kind {
            WorldKind::Family => "family",
            WorldKind::Geography => "geography",
        };
        write!(f, "{name}:{}={},seed={}", self.kind.size_key(), self.size, self.seed)
    }
}

/// A generated knowledge base and the entities its queries may use.
pub struct World {
    pub program: Program,
    /// The query predicates (rules), with their arities.
    pub query_preds: Vec<(&'static str, usize)>,
    pub entities: Vec<String>,
}

const FAMILY_RULES: &str = "\
grandparent(X, Y) :- parent(X, Z), parent(Z, Y).
ancestor(X, Y) :- parent(X, Y).
ancestor(X, Y) :- parent(X, Z), ancestor(Z, Y).
sibling(X, Y) :- parent(P, X), parent(P, Y).
uncle(X, Y) :- parent(P, Y), sibling(X, P), male(X).
aunt(X, Y) :- parent(P, Y), sibling(X, P), female(X).
cousin(X, Y) :- parent(A, X), parent(B, Y), sibling(A, B).
";

const GEOGRAPHY_RULES: &str = "\
located_in(X, Y) :- in(X, Y).
located_in(X, Y) :- in(X, Z), located_in(Z, Y).
neighbor_of(X, Y) :- border(X, Y).
neighbor_of(X, Y) :- border(Y, X).
";

impl WorldSpec {
    pub fn generate(&self) -> World {
        let mut rng = HostRng::new(self.seed ^ 0x5EED_0F00);
        match self.kind {
            WorldKind::Family => family(self.size, &mut rng),
            WorldKind::Geography => geography(self.size, &mut rng),
        }
    }
}

fn family(people: usize, rng: &mut HostRng) -> World {
    let mut text = String::from("% A generated family tree.\n");
    let male: Vec<bool> = (0..people).map(|_| rng.below(2) == 0).collect();
    let name = |i: usize| format!("{}{i}", if male[i] { "m" } else { "f" });
    // Founders come in couples; every later person is a child of an earlier couple, and
    // may marry an earlier person of the other sex who is not a sibling.
    let founders = (people / 6).max(2) & !1;
    let mut couples: Vec<(usize, usize)> = Vec::new();
    let mut parents_of: Vec<Option<usize>> = vec![None; people];
    let mut single: Vec<usize> = Vec::new();
    let mut children = Vec::new();
    for i in 0..people {
        if i >= founders && !couples.is_empty() {
            // Prefer recent couples so that the tree grows generations, not a bush.
            let c = couples.len() - 1 - rng.below(couples.len().min(8) as u64) as usize;
            parents_of[i] = Some(c);
            children.push((couples[c], i));
        }
        single.push(i);
        if i < founders || rng.below(3) > 0 {
            let earlier = &single[..single.len() - 1];
            let partner = earlier
                .iter()
                .rposition(|&j| male[j] != male[i] && (parents_of[i].is_none() || parents_of[j] != parents_of[i]));
            if let Some(pos) = partner {
                let j = single.remove(pos);
                single.pop();
                couples.push(if male[i] { (i, j) } else { (j, i) });
            }
        }
    }
    for ((father, mother), child) in children {
        let _ = writeln!(text, "parent({}, {}).", name(father), name(child));
        let _ = writeln!(text, "parent({}, {}).", name(mother), name(child));
    }
    for (i, &m) in male.iter().enumerate() {
        let _ = writeln!(text, "{}({}).", if m { "male" } else { "female" }, name(i));
    }
    text.push_str(FAMILY_RULES);
    World {
        program: text.parse().expect("the generator writes the subset"),
        query_preds: vec![
            ("grandparent", 2),
            ("ancestor", 2),
            ("sibling", 2),
            ("uncle", 2),
            ("aunt", 2),
            ("cousin", 2),
        ],
        entities: (0..people).map(name).collect(),
    }
}

fn geography(places: usize, rng: &mut HostRng) -> World {
    // Levels: continents, countries, regions, cities, about ×3 per level.
    let continents = (places / 40).max(1);
    let countries = (places / 13).max(continents);
    let regions = (places / 4).max(countries);
    let sizes = [continents, countries, regions, places.saturating_sub(continents + countries + regions).max(1)];
    let prefixes = ["continent", "country", "region", "city"];
    let mut text = String::from("% A generated geography.\n");
    let mut entities = Vec::new();
    let mut previous: Vec<String> = Vec::new();
    for (level, (&n, prefix)) in sizes.iter().zip(prefixes).enumerate() {
        let names: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
        let mut parent_of = Vec::new();
        for (i, place) in names.iter().enumerate() {
            if level > 0 {
                // Contiguous blocks, so that neighbours tend to share a parent.
                let p = (i * previous.len() / n).min(previous.len() - 1);
                let _ = writeln!(text, "in({place}, {}).", previous[p]);
                parent_of.push(p);
            } else {
                parent_of.push(0);
            }
        }
        for i in 1..n {
            if rng.below(4) < 3 {
                let _ = writeln!(text, "border({}, {}).", names[i - 1], names[i]);
            }
            if i >= 3 && rng.below(5) == 0 {
                let j = i - 2 - rng.below(2) as usize;
                let _ = writeln!(text, "border({}, {}).", names[j], names[i]);
            }
        }
        entities.extend(names.iter().cloned());
        previous = names;
    }
    text.push_str(GEOGRAPHY_RULES);
    World {
        program: text.parse().expect("the generator writes the subset"),
        query_preds: vec![("located_in", 2), ("neighbor_of", 2)],
        entities,
    }
}

/// A knowledge base from `--kb`: a generated world (`family:…`, `geography:…`) or a
/// Prolog file in the subset.
pub fn load_kb(kb: &str) -> Result<Program, String> {
    let name = kb.split(':').next().unwrap_or_default();
    if matches!(name, "family" | "geography") && !std::path::Path::new(kb).exists() {
        return Ok(kb.parse::<WorldSpec>()?.generate().program);
    }
    let text = std::fs::read_to_string(kb)
        .map_err(|e| format!("cannot read '{kb}': {e} (give a Prolog file or a world: family:people=N,seed=S or geography:places=N,seed=S)"))?;
    text.parse().map_err(|e| format!("{kb}: {e}"))
}

/// A ground query and whether it is provable within the depth bound it was made for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    pub atom: Atom,
    pub provable: bool,
}

/// Training and held-out queries.
#[derive(Clone, Debug, Default)]
pub struct QuerySet {
    pub train: Vec<Query>,
    pub test: Vec<Query>,
}

impl QuerySet {
    /// As a query file: one ground atom per line, `% test` before the held-out ones,
    /// `% provable`/`% unprovable` after each (comments, so the file parses as facts).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for (label, set) in [("% train", &self.train), ("% test", &self.test)] {
            out.push_str(label);
            out.push('\n');
            for q in set {
                let _ = writeln!(out, "{}. % {}", q.atom, if q.provable { "provable" } else { "unprovable" });
            }
        }
        out
    }
}

/// `count` queries (about half provable within `depth`), held-out ones where a constant is
/// in the held-out quarter of the entities.
pub fn queries(world: &World, count: usize, depth: usize, seed: u64) -> QuerySet {
    let mut rng = HostRng::new(seed ^ 0x51E5);
    let kb = Kb::new(&world.program);
    let mut prover = Prover::new(&kb, SUCCESSORS);
    let mut held_out: Vec<&String> = world.entities.iter().collect();
    rng.shuffle(&mut held_out);
    let held_out: HashSet<&String> = held_out[..world.entities.len() / 4].iter().copied().collect();
    let (mut set, mut seen) = (QuerySet::default(), HashSet::new());
    let (mut provable, mut unprovable) = (0, 0);
    let half = count.div_ceil(2);
    let mut attempts = 0;
    while provable + unprovable < count && attempts < count * 400 {
        attempts += 1;
        let (pred, _) = world.query_preds[rng.below(world.query_preds.len() as u64) as usize];
        let pick = |rng: &mut HostRng| world.entities[rng.below(world.entities.len() as u64) as usize].clone();
        let (a, b) = (pick(&mut rng), pick(&mut rng));
        let atom = Atom { pred: pred.to_string(), args: vec![Term::Const(a.clone()), Term::Const(b.clone())] };
        if !seen.insert(atom.clone()) {
            continue;
        }
        let goals = kb.ground_query(&atom).expect("a query over the world's own names");
        let ok = prover.provable(&goals, depth);
        if (ok && provable >= half) || (!ok && unprovable >= count - half) {
            continue;
        }
        *(if ok { &mut provable } else { &mut unprovable }) += 1;
        let q = Query { atom, provable: ok };
        if held_out.contains(&a) || held_out.contains(&b) {
            set.test.push(q);
        } else {
            set.train.push(q);
        }
    }
    set
}

/// Parses a query file: ground atoms, one clause each; `% test` starts the held-out part
/// (without it every query is for training). Whether each is provable is left to the prover.
pub fn parse_queries(text: &str) -> Result<(Vec<Atom>, Vec<Atom>), String> {
    let (train_text, test_text) = match text.lines().position(|l| l.trim() == "% test") {
        Some(line) => {
            let split: usize = text.lines().take(line).map(|l| l.len() + 1).sum();
            (&text[..split.min(text.len())], &text[split.min(text.len())..])
        }
        None => (text, ""),
    };
    let parse = |part: &str, first_line: usize| -> Result<Vec<Atom>, String> {
        let program: Program = part.parse().map_err(|e: super::ParseError| {
            format!("line {}, column {}: {}", e.line + first_line, e.column, e.message)
        })?;
        program
            .clauses
            .into_iter()
            .map(|c| {
                if !c.body.is_empty() {
                    return Err(format!("query '{c}' is a rule; a query is one ground atom"));
                }
                if c.head.args.iter().any(|t| matches!(t, Term::Var(_))) {
                    return Err(format!("query '{}' has variables; queries must be ground", c.head));
                }
                Ok(c.head)
            })
            .collect()
    };
    let offset = train_text.lines().count();
    Ok((parse(train_text, 0)?, parse(test_text, offset)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_specs_parse_print_and_reject_bad_parameters() {
        let w: WorldSpec = "family:people=200,seed=3".parse().unwrap();
        assert_eq!((w.kind, w.size, w.seed), (WorldKind::Family, 200, 3));
        assert_eq!(w.to_string(), "family:people=200,seed=3");
        assert_eq!("geography".parse::<WorldSpec>().unwrap().size, 100);
        assert!("family:places=3".parse::<WorldSpec>().unwrap_err().contains("allowed: people, seed"));
        assert!("family:people=x".parse::<WorldSpec>().unwrap_err().contains("not a whole number"));
        assert!("family:people=2".parse::<WorldSpec>().unwrap_err().contains("allowed 4"));
        assert!("zoo".parse::<WorldSpec>().unwrap_err().contains("allowed: family, geography"));
    }

    #[test]
    fn generation_is_seeded_and_round_trips_through_text() {
        for spec in ["family:people=60,seed=1", "geography:places=80,seed=2"] {
            let w: WorldSpec = spec.parse().unwrap();
            let (a, b) = (w.generate().program, w.generate().program);
            assert_eq!(a, b);
            assert_eq!(a.to_string().parse::<Program>().unwrap(), a);
            let other = WorldSpec { seed: w.seed + 1, ..w.clone() }.generate().program;
            assert_ne!(a, other);
        }
    }

    #[test]
    fn families_have_generations_and_queries_split_by_entity() {
        let w = "family:people=120,seed=5".parse::<WorldSpec>().unwrap().generate();
        let parents = w.program.clauses.iter().filter(|c| c.head.pred == "parent").count();
        assert!(parents > 80, "{parents} parent facts");
        let set = queries(&w, 200, 10, 1);
        let all: Vec<&Query> = set.train.iter().chain(&set.test).collect();
        assert_eq!(all.len(), 200);
        assert_eq!(all.iter().filter(|q| q.provable).count(), 100);
        assert!(all.iter().any(|q| q.provable && q.atom.pred == "ancestor"));
        assert!(!set.test.is_empty() && set.train.len() > set.test.len());
        let train_entities: HashSet<&Term> = set.train.iter().flat_map(|q| &q.atom.args).collect();
        let test_only = set.test.iter().filter(|q| q.atom.args.iter().any(|a| !train_entities.contains(a))).count();
        assert!(test_only > 0, "held-out queries mention entities no training query does");
        let (train, test) = parse_queries(&set.to_text()).unwrap();
        assert_eq!((train.len(), test.len()), (set.train.len(), set.test.len()));
    }

    #[test]
    fn query_files_reject_rules_and_variables_with_the_line() {
        assert!(parse_queries("ancestor(a, b).\nancestor(X, b).\n").unwrap_err().contains("ground"));
        assert!(parse_queries("p(a) :- q(a).\n").unwrap_err().contains("is a rule"));
        let e = parse_queries("p(a).\n% test\np(b).\np(.\n").unwrap_err();
        assert!(e.starts_with("line 4"), "{e}");
    }
}

//! The proof environment (seed 000): the state is a goal list, an action picks one of its
//! SLD successors; reward 1 when the list becomes empty (a proof).
//!
//! Observation, seed 000's three fields (integer indices into one vocabulary):
//! - `state` `(1, 10, 3)`: (predicate, argument, argument) per atom, padded with 0;
//! - `successors` `(20, 10, 3)`: the successor goal lists, in clause order, padded;
//! - `action_mask` `(20)`: 1 where a successor may be chosen (it exists and does not
//!   repeat a goal list already on this episode's path: the cycle guard).
//!
//! Vocabulary: 0 padding, 1 the empty goal list, then [`MAX_VARS`] variable slots (the
//! variables of each goal list renamed canonically, by first appearance), then the
//! predicates, then the constants. An episode ends on a proof (terminated, reward 1), a
//! dead end: no successor left (terminated, 0), or the depth limit (truncated, 0).

use crate::proof::prolog::kb::{var_index, CTerm, Dropped, Goals, Kb, Successor, MAX_ATOMS, MAX_VARS, NO_ARG};
use crate::proof::prolog::prove::{Prover, SUCCESSORS};
use crate::proof::prolog::worlds::{load_kb, parse_queries, queries, WorldSpec};
use hotlab_env::rng::EnvRng;
use hotlab_env::{BatchEnv, EnvError, EnvSpec, EpisodeEnd, FieldData, FieldKind, FieldSpec, HeadSpec, Observations};
use hotlab_env::{ScalarEnv, StepBatch};
use std::sync::Arc;

pub const PAD: i64 = 0;
pub const EMPTY: i64 = 1;
/// The first variable slot's index.
pub const FIRST_VAR: i64 = 2;
/// Indices per goal list: atoms × (predicate, argument, argument).
pub const GOAL_WIDTH: usize = MAX_ATOMS * 3;
/// Queries generated for a world when no query file is given.
pub const GENERATED_QUERIES: usize = 400;

/// Index ranges of the vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vocab {
    pub preds: usize,
    pub consts: usize,
}

impl Vocab {
    pub fn size(&self) -> usize {
        FIRST_VAR as usize + MAX_VARS + self.preds + self.consts
    }

    fn pred(&self, p: u32) -> i64 {
        (FIRST_VAR as usize + MAX_VARS) as i64 + p as i64
    }

    fn term(&self, t: CTerm) -> i64 {
        match (t, var_index(t)) {
            (NO_ARG, _) => PAD,
            (_, Some(v)) => FIRST_VAR + v as i64,
            (c, None) => (FIRST_VAR as usize + MAX_VARS + self.preds) as i64 + c as i64,
        }
    }

    /// Writes a goal list's [`GOAL_WIDTH`] indices (the empty list as its own token).
    pub fn encode(&self, goals: &Goals, out: &mut [i64]) {
        out.fill(PAD);
        if goals.is_empty() {
            out[0] = EMPTY;
        }
        for (atom, slot) in goals.as_slice().iter().zip(out.chunks_exact_mut(3)) {
            slot[0] = self.pred(atom.pred);
            slot[1] = self.term(atom.args[0]);
            slot[2] = self.term(atom.args[1]);
        }
    }
}

/// A knowledge base with its queries and the env's limits: built once per run, shared
/// by every env (and rebuilt identically by each worker process from the same spec).
#[derive(Debug)]
pub struct ProofTask {
    pub kb: Kb,
    pub train: Arc<Vec<Goals>>,
    pub test: Vec<Goals>,
    /// Whether each test query is provable within `depth` (the prover's answer).
    pub test_provable: Vec<bool>,
    pub depth: usize,
    pub vocab: Vocab,
    /// `--kb` and `--queries` as given (a worker process loads the same task from them).
    pub source: String,
    pub queries_file: Option<String>,
}

impl ProofTask {
    /// From `--kb` (a world or a file), `--queries` (a file; generated for a world when
    /// absent) and the depth limit. Errors name the flag.
    pub fn load(kb: &str, queries_file: Option<&str>, depth: usize) -> Result<Self, (&'static str, String)> {
        let (program, (train_atoms, test_atoms)) = match queries_file {
            Some(path) => {
                let program = load_kb(kb).map_err(|m| ("kb", m))?;
                let text = match path {
                    "-" => std::io::read_to_string(std::io::stdin()),
                    _ => std::fs::read_to_string(path),
                };
                let text = text.map_err(|e| ("queries", format!("cannot read '{path}': {e}")))?;
                (program, parse_queries(&text).map_err(|m| ("queries", format!("{path}: {m}")))?)
            }
            None if std::path::Path::new(kb).exists() => {
                return Err(("queries", format!("a query file is needed with the knowledge base file '{kb}'")));
            }
            None => {
                let world = kb.parse::<WorldSpec>().map_err(|m| ("kb", m))?;
                let w = world.generate();
                let set = queries(&w, GENERATED_QUERIES, depth, world.seed);
                let atoms = |qs: Vec<crate::proof::prolog::worlds::Query>| qs.into_iter().map(|q| q.atom).collect();
                (w.program, (atoms(set.train), atoms(set.test)))
            }
        };
        if train_atoms.is_empty() {
            return Err(("queries", "no training queries (lines before '% test')".into()));
        }
        let mut kb_c = Kb::new(&program);
        let mut compile = |atoms: Vec<crate::proof::prolog::Atom>| -> Result<Vec<Goals>, (&'static str, String)> {
            atoms.iter().map(|a| kb_c.query(a).map_err(|e| ("queries", format!("{a}: {e}")))).collect()
        };
        let train = compile(train_atoms)?;
        let test = compile(test_atoms)?;
        let mut prover = Prover::new(&kb_c, SUCCESSORS);
        let test_provable = test.iter().map(|q| prover.provable(q, depth)).collect();
        let vocab = Vocab { preds: kb_c.preds.len(), consts: kb_c.consts.len() };
        Ok(ProofTask {
            kb: kb_c,
            train: Arc::new(train),
            test,
            test_provable,
            depth,
            vocab,
            source: kb.to_string(),
            queries_file: queries_file.map(str::to_string),
        })
    }

    /// An encoded goal list ([`Vocab::encode`]'s `GOAL_WIDTH` indices) as Prolog text;
    /// variable slots print as `_V0`, `_V1`, …
    pub fn decode(&self, row: &[i64]) -> String {
        let v = self.vocab;
        let first_pred = FIRST_VAR + MAX_VARS as i64;
        let first_const = first_pred + v.preds as i64;
        let name = |t: i64| -> String {
            match t {
                EMPTY => "true".into(),
                t if (FIRST_VAR..first_pred).contains(&t) => format!("_V{}", t - FIRST_VAR),
                t if (first_pred..first_const).contains(&t) => self.kb.preds[(t - first_pred) as usize].0.clone(),
                t if t >= first_const && ((t - first_const) as usize) < v.consts => {
                    self.kb.consts[(t - first_const) as usize].clone()
                }
                t => format!("?{t}"),
            }
        };
        if row.first() == Some(&EMPTY) {
            return "[]".into();
        }
        let atoms: Vec<String> = row
            .chunks_exact(3)
            .take_while(|a| a[0] != PAD)
            .map(|a| {
                let args: Vec<String> = a[1..].iter().filter(|&&t| t != PAD).map(|&t| name(t)).collect();
                format!("{}({})", name(a[0]), args.join(", "))
            })
            .collect();
        format!("[{}]", atoms.join(", "))
    }

    /// The training queries as a query file (what worker processes load instead of
    /// generating the queries again).
    pub fn train_text(&self) -> String {
        let atom = |q: &Goals| q.as_slice().iter().map(|a| self.kb.atom_text(a)).collect::<Vec<_>>().join(", ");
        self.train.iter().map(|q| format!("{}.\n", atom(q))).collect()
    }

    pub fn env_spec(&self) -> EnvSpec {
        let field = |name: &str, shape: Vec<usize>| FieldSpec::new(name, shape, FieldKind::I64);
        EnvSpec {
            name: "proof".into(),
            fields: vec![
                field("state", vec![1, MAX_ATOMS, 3]),
                field("successors", vec![SUCCESSORS, MAX_ATOMS, 3]),
                field("action_mask", vec![SUCCESSORS]),
            ],
            heads: vec![HeadSpec { name: "successor".into(), n: SUCCESSORS }],
            masked: true,
            continuous: 0,
        }
    }
}

/// One proof episode's state, shared by the scalar env and the batch.
#[derive(Clone, Debug)]
pub struct ProofEnv {
    task: Arc<ProofTask>,
    rng: EnvRng,
    /// The queries episodes start from (the task's training queries unless set).
    pool: Arc<Vec<Goals>>,
    goals: Goals,
    successors: Vec<Successor>,
    allowed: [bool; SUCCESSORS],
    /// Goal lists visited this episode (the cycle guard).
    path: Vec<Goals>,
    steps: u32,
    ret: f64,
    /// Successors left out, over the env's life.
    pub dropped: Dropped,
}

impl ProofEnv {
    /// The env of global index `index` (its own random stream) over the training queries.
    pub fn new(task: Arc<ProofTask>, seed: u64, index: u64) -> Self {
        let pool = Arc::clone(&task.train);
        Self::with_queries(task, pool, seed, index)
    }

    /// An env whose episodes start from `pool` (e.g. the held-out queries).
    pub fn with_queries(task: Arc<ProofTask>, pool: Arc<Vec<Goals>>, seed: u64, index: u64) -> Self {
        let mut env = ProofEnv {
            task,
            rng: EnvRng::for_env(seed, index),
            pool,
            goals: Goals::default(),
            successors: Vec::with_capacity(SUCCESSORS),
            allowed: [false; SUCCESSORS],
            path: Vec::new(),
            steps: 0,
            ret: 0.0,
            dropped: Dropped::default(),
        };
        env.reset_episode();
        env
    }

    /// Starts an episode at `query`.
    pub fn start(&mut self, query: Goals) {
        self.goals = query;
        self.path.clear();
        self.steps = 0;
        self.ret = 0.0;
        self.expand();
    }

    fn reset_episode(&mut self) {
        let q = self.pool[(self.rng.next_u32() as usize) % self.pool.len()];
        self.start(q);
    }

    fn expand(&mut self) {
        self.path.push(self.goals);
        let d = self.task.kb.successors(&self.goals, SUCCESSORS, &mut self.successors);
        self.dropped.add(&d);
        self.allowed = [false; SUCCESSORS];
        for (slot, s) in self.allowed.iter_mut().zip(&self.successors) {
            *slot = !self.path.contains(&s.goals);
        }
    }

    /// The current goal list and the successors the env offers.
    pub fn goals(&self) -> &Goals {
        &self.goals
    }

    pub fn successors(&self) -> &[Successor] {
        &self.successors
    }

    pub fn allowed(&self) -> &[bool; SUCCESSORS] {
        &self.allowed
    }

    /// Takes successor `action`: (reward, terminated, truncated). An action that is not
    /// allowed ends the episode as a dead end.
    pub fn advance(&mut self, action: i64) -> (f64, bool, bool) {
        self.steps += 1;
        let chosen = usize::try_from(action).ok().filter(|&a| a < SUCCESSORS && self.allowed[a]);
        let Some(a) = chosen else { return (0.0, true, false) };
        self.goals = self.successors[a].goals;
        if self.goals.is_empty() {
            self.ret += 1.0;
            return (1.0, true, false);
        }
        self.expand();
        if !self.allowed.iter().any(|&x| x) {
            return (0.0, true, false);
        }
        (0.0, false, self.steps as usize >= self.task.depth)
    }

    /// Writes the three observation fields of this env at row `e` of each.
    pub fn observe(&self, fields: &mut [FieldData], e: usize) {
        let vocab = &self.task.vocab;
        let [FieldData::I64(state), FieldData::I64(succ), FieldData::I64(mask)] = fields else {
            unreachable!("the proof env's fields are three index fields");
        };
        vocab.encode(&self.goals, &mut state[e * GOAL_WIDTH..(e + 1) * GOAL_WIDTH]);
        let rows = &mut succ[e * SUCCESSORS * GOAL_WIDTH..(e + 1) * SUCCESSORS * GOAL_WIDTH];
        for (k, row) in rows.chunks_exact_mut(GOAL_WIDTH).enumerate() {
            match self.successors.get(k) {
                Some(s) => vocab.encode(&s.goals, row),
                None => row.fill(PAD),
            }
        }
        for (m, &ok) in mask[e * SUCCESSORS..(e + 1) * SUCCESSORS].iter_mut().zip(&self.allowed) {
            *m = ok as i64;
        }
    }
}

/// One proof env stepped on its own (the `sequential` backend's unit).
pub struct ProofScalar {
    env: ProofEnv,
    spec: EnvSpec,
}

impl ProofScalar {
    pub fn new(task: Arc<ProofTask>, seed: u64, index: u64) -> Self {
        let spec = task.env_spec();
        Self { env: ProofEnv::new(task, seed, index), spec }
    }
}

impl ScalarEnv for ProofScalar {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, obs: &mut [FieldData]) {
        self.env.reset_episode();
        self.env.observe(obs, 0);
    }

    fn step(&mut self, action: &[i64], obs: &mut [FieldData]) -> (f64, bool, bool) {
        let r = self.env.advance(action[0]);
        self.env.observe(obs, 0);
        r
    }
}

/// A batch of proof envs on one thread, writing straight into the batch buffers (the
/// `vectorized` backend, and each worker's slice under `threads` and `subprocess`).
pub struct ProofBatch {
    envs: Vec<ProofEnv>,
    spec: EnvSpec,
}

impl ProofBatch {
    /// `count` envs whose streams start at global index `first`.
    pub fn new(task: Arc<ProofTask>, count: usize, seed: u64, first: u64) -> Self {
        let spec = task.env_spec();
        let envs = (0..count as u64).map(|i| ProofEnv::new(Arc::clone(&task), seed, first + i)).collect();
        Self { envs, spec }
    }

    /// Successors left out over all envs so far.
    pub fn dropped(&self) -> Dropped {
        let mut d = Dropped::default();
        self.envs.iter().for_each(|e| d.add(&e.dropped));
        d
    }
}

impl BatchEnv for ProofBatch {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    fn reset(&mut self, out: &mut Observations) -> Result<(), EnvError> {
        for (e, env) in self.envs.iter_mut().enumerate() {
            env.reset_episode();
            env.observe(&mut out.fields, e);
        }
        Ok(())
    }

    fn step(&mut self, actions: &[i64], out: &mut StepBatch) -> Result<(), EnvError> {
        if actions.len() != self.envs.len() {
            return Err(EnvError(format!("proof: {} actions for {} envs", actions.len(), self.envs.len())));
        }
        out.episodes.clear();
        for (e, env) in self.envs.iter_mut().enumerate() {
            let (reward, term, trunc) = env.advance(actions[e]);
            out.reward[e] = reward as f32;
            out.terminated[e] = term;
            out.truncated[e] = trunc;
            if term || trunc {
                out.episodes.push(EpisodeEnd { env: e, episode_return: env.ret, length: env.steps, terminated: term });
                env.observe(&mut out.final_obs.fields, e);
                env.reset_episode();
            }
            env.observe(&mut out.obs.fields, e);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_training_queries_round_trip_through_a_query_file() {
        let task = ProofTask::load("family:people=40,seed=1", None, 8).unwrap();
        let path = std::env::temp_dir().join(format!("hotlab-train-queries-{}.pl", std::process::id()));
        std::fs::write(&path, task.train_text()).unwrap();
        let again = ProofTask::load("family:people=40,seed=1", Some(path.to_str().unwrap()), 8).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(again.train, task.train, "same queries, same order, same indices");
        assert_eq!(again.vocab, task.vocab);
        assert!(again.test.is_empty());
    }

    const KB: &str = "parent(a, b).\nparent(b, c).\nparent(a, d).\nloop(X) :- loop(X).\n\
        ancestor(X, Y) :- parent(X, Y).\nancestor(X, Y) :- parent(X, Z), ancestor(Z, Y).\n";

    fn task(queries: &str, depth: usize) -> Arc<ProofTask> {
        // Tests run in parallel: each call gets its own folder.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("hotlab-proof-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (k, q) = (dir.join("kb.pl"), dir.join("queries.pl"));
        std::fs::write(&k, KB).unwrap();
        std::fs::write(&q, queries).unwrap();
        Arc::new(ProofTask::load(k.to_str().unwrap(), Some(q.to_str().unwrap()), depth).unwrap())
    }

    fn query(t: &ProofTask, text: &str) -> Goals {
        t.kb.clone().query(&text.parse().unwrap()).unwrap()
    }

    fn observe(env: &ProofEnv, spec: &EnvSpec) -> Vec<Vec<i64>> {
        let mut obs = Observations::zeros(spec, 1);
        env.observe(&mut obs.fields, 0);
        obs.fields.into_iter().map(|f| if let FieldData::I64(v) = f { v } else { panic!() }).collect()
    }

    #[test]
    fn observations_have_seed_000s_shapes_and_a_hand_checked_encoding() {
        let t = task("ancestor(a, c).\n", 6);
        let spec = t.env_spec();
        let sizes: Vec<usize> = spec.fields.iter().map(|f| f.numel()).collect();
        assert_eq!(sizes, vec![30, 600, 20]);
        // Vocabulary: 0 pad, 1 empty, 2..10 variables, predicates (parent, loop, ancestor), constants (a, b, c, d).
        assert_eq!(t.vocab, Vocab { preds: 3, consts: 4 });
        assert_eq!(t.vocab.size(), 17);
        let (parent, ancestor, a, c) = (10, 12, 13, 15);
        let env = ProofEnv::new(Arc::clone(&t), 1, 0);
        let o = observe(&env, &spec);
        assert_eq!(o[0][..6], [ancestor, a, c, 0, 0, 0]);
        assert!(o[0][3..].iter().all(|&x| x == PAD));
        // Successors: [parent(a, c)] and [parent(a, V0), ancestor(V0, c)] (variable slot 0 = index 2).
        assert_eq!(o[1][..6], [parent, a, c, 0, 0, 0]);
        assert_eq!(o[1][30..36], [parent, a, 2, ancestor, 2, c]);
        assert!(o[1][60..].iter().all(|&x| x == PAD), "rows past the successors are padding");
        assert_eq!(o[2][..3], [1, 1, 0]);
        assert_eq!(o[2].iter().sum::<i64>(), 2);
        // Decoding gives the text back, variable slots as _V0, _V1, …
        assert_eq!(t.decode(&o[0][..30]), "[ancestor(a, c)]");
        assert_eq!(t.decode(&o[1][..30]), "[parent(a, c)]");
        assert_eq!(t.decode(&o[1][30..60]), "[parent(a, _V0), ancestor(_V0, c)]");
        let mut empty = [0; GOAL_WIDTH];
        t.vocab.encode(&Goals::default(), &mut empty);
        assert_eq!(t.decode(&empty), "[]");
    }

    #[test]
    fn an_episode_ends_on_a_proof_a_dead_end_or_the_depth_limit() {
        let t = task("ancestor(a, c).\n", 6);
        let spec = t.env_spec();
        let mut env = ProofEnv::new(Arc::clone(&t), 1, 0);
        // The recursive clause, then parent(a, b), then the base clause, then the fact.
        assert_eq!(env.advance(1), (0.0, false, false));
        assert_eq!(t.kb.goals_text(env.goals()), "[parent(a, _G0), ancestor(_G0, c)]");
        assert_eq!(env.advance(0), (0.0, false, false));
        assert_eq!(t.kb.goals_text(env.goals()), "[ancestor(b, c)]");
        assert_eq!(env.advance(0), (0.0, false, false));
        assert_eq!(env.advance(0), (1.0, true, false), "parent(b, c) is a fact: proved");
        let o = observe(&env, &spec);
        assert_eq!(o[0][0], EMPTY);

        env.start(t.train[0]);
        env.advance(0); // [parent(a, c)]: no fact, no successor
        assert_eq!(env.successors().len(), 0);
        let mut env2 = ProofEnv::new(Arc::clone(&t), 1, 0);
        assert_eq!(env2.advance(0), (0.0, true, false), "a dead end ends the episode");
        assert_eq!(env2.advance(7), (0.0, true, false), "a masked action is a dead end");
    }

    #[test]
    fn the_cycle_guard_masks_a_repeated_goal_list_and_depth_truncates() {
        let t = task("loop(a).\n", 3);
        let env = ProofEnv::new(Arc::clone(&t), 1, 0);
        // loop(a) :- loop(a) leads back to itself: masked, so the start is a dead end.
        assert_eq!(env.successors().len(), 1);
        assert!(!env.allowed()[0]);
        let t = task("ancestor(a, c).\n", 2);
        let mut env = ProofEnv::new(Arc::clone(&t), 1, 0);
        env.start(query(&t, "ancestor(a, W)"));
        assert_eq!(env.advance(1), (0.0, false, false));
        assert_eq!(env.advance(0), (0.0, false, true), "two steps at depth 2: truncated");
    }

    #[test]
    fn variables_are_renamed_canonically_per_state() {
        let t = task("ancestor(a, c).\n", 6);
        let mut env = ProofEnv::new(Arc::clone(&t), 1, 0);
        env.start(query(&t, "ancestor(W, c)"));
        let o = observe(&env, &t.env_spec());
        // The query's W is slot 0; in the recursive successor the clause's Z becomes slot 1.
        assert_eq!(o[0][..3], [12, 2, 15]);
        assert_eq!(o[1][30..36], [10, 2, 3, 12, 3, 15]);
    }

    #[test]
    fn a_batch_autoresets_and_keeps_the_final_observation() {
        let t = task("ancestor(a, b).\n", 6);
        let mut batch = ProofBatch::new(Arc::clone(&t), 2, 1, 0);
        let spec = batch.spec().clone();
        let mut obs = Observations::zeros(&spec, 2);
        batch.reset(&mut obs).unwrap();
        let mut out = StepBatch::new(&spec, 2);
        batch.step(&[0, 1], &mut out).unwrap();
        assert_eq!(out.reward, vec![0.0, 0.0]);
        batch.step(&[0, 0], &mut out).unwrap();
        // Env 0: [parent(a, b)] → the fact: proved. Env 1 goes on.
        assert_eq!(out.reward, vec![1.0, 0.0]);
        assert_eq!(out.episodes.len(), 1);
        assert_eq!((out.episodes[0].env, out.episodes[0].length, out.episodes[0].episode_return), (0, 2, 1.0));
        let FieldData::I64(fin) = &out.final_obs.fields[0] else { panic!() };
        assert_eq!(fin[0], EMPTY);
        let FieldData::I64(now) = &out.obs.fields[0] else { panic!() };
        assert_eq!(now[0], 12, "env 0 starts over at its query");
    }

    #[test]
    fn loading_names_the_flag_that_is_wrong() {
        assert_eq!(ProofTask::load("family:people=x", None, 8).unwrap_err().0, "kb");
        assert_eq!(ProofTask::load("/nonexistent.pl", Some("/nonexistent.q"), 8).unwrap_err().0, "kb");
        let generated = ProofTask::load("family:people=40,seed=2", None, 8).unwrap();
        assert!(!generated.train.is_empty() && !generated.test.is_empty());
        assert!(generated.test_provable.iter().any(|&p| p));
    }
}

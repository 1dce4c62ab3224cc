//! `proof` (seed 000): proof search over a Prolog knowledge base. The state is the goal
//! list (up to 10 atoms of 3 indices), the env offers up to 20 successor goal lists by SLD
//! resolution of the first goal, with a mask; reward 1 for a proof.
//!
//! - [`prolog`](crate::proof::prolog): the Prolog subset: parser and printer, SLD resolution, depth-bounded
//!   proof search and checking, generated worlds and queries;
//! - [`goals`](crate::proof::goals): the env: goal lists encoded as index fields, successors with an action
//!   mask, scalar and batched;
//! - [`policy`](crate::proof::policy): the embedding policy (embedding lookups pooled into goal-list states,
//!   each successor scored) as libtorch ops; [`host`](crate::proof::host): its native forward;
//! - [`actor`](crate::proof::actor): the rollout's forward (eager or fused);
//! - [`update`](crate::proof::update): PPO's minibatch gradient ([`grad`](crate::proof::grad): by hand on the CPU, autograd elsewhere);
//! - [`eval`](crate::proof::eval): the held-out proof rate against random choice.

pub mod actor;
pub mod eval;
pub mod goals;
pub mod grad;
pub mod host;
pub mod policy;
pub mod prolog;
pub mod update;

use crate::proof::goals::{ProofBatch, ProofScalar, ProofTask, GOAL_WIDTH, PAD};
use crate::proof::prolog::prove::SUCCESSORS;
use actor::ProofActor;
use anyhow::{bail, Result};
use host::ProofHost;
use hotlab_core::choices::{Backend, Inference};
use hotlab_core::run_knobs;
use hotlab_env::{Actions, BatchEnv, FieldData, Observations, ScalarEnv};
use hotlab_protocol::Frame;
use hotlab_spec::{RunSpec, SpecError};
use hotlab_specs::proof::ProofFrame;
use hotlab_specs::ProofSpec;
use hotlab_specs::{EnvName, WorkloadSpec};
use hotlab_train::checkpoint;
use hotlab_train::error::RunError;
use hotlab_train::exec::transfer::Eager;
use hotlab_train::exec::{worker_flags, EnvMaker};
use hotlab_train::params::{Network, ParamSlot};
use hotlab_train::ppo::{self, collect::HostCollector, PpoLearner, FUSED_NOTE};
use hotlab_train::precision::Precision;
use hotlab_train::workload::{Evaluation, Learner, Setup, TrainedPolicy, Workload};
use policy::{ProofArch, ProofNet};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// Episodes per held-out query for the sampled policy and the random baseline, in the
/// run's report.
const EVAL_TRIES: usize = 16;

/// The key of the policy's shape and vocabulary in a checkpoint's `spec.json`.
pub const CHECKPOINT_KEY: &str = "proof";

/// The proof workload: its settings, and the knowledge base, queries and limits they
/// name, loaded once.
pub struct Proof {
    pub settings: ProofSpec,
    pub task: Arc<ProofTask>,
}

impl Proof {
    /// Loads (or generates and labels) the knowledge base and queries.
    pub fn load(settings: &ProofSpec) -> Result<Self, SpecError> {
        let s = settings;
        let task =
            ProofTask::load(&s.kb, s.queries.as_deref(), s.depth).map_err(|(field, m)| SpecError::new(field, m))?;
        Ok(Self { settings: s.clone(), task: Arc::new(task) })
    }
}

impl EnvMaker for Proof {
    fn name(&self) -> &'static str {
        "proof"
    }

    fn vector_env(&self, count: usize, seed: u64, first: u64) -> Box<dyn BatchEnv> {
        Box::new(ProofBatch::new(Arc::clone(&self.task), count, seed, first))
    }

    fn scalar_env(&self, seed: u64, index: u64) -> Box<dyn ScalarEnv> {
        Box::new(ProofScalar::new(Arc::clone(&self.task), seed, index))
    }

    /// The training queries go to the worker on its standard input (`queries: "-"`), so
    /// that no worker generates and labels them again.
    fn worker_flags(&self) -> (Vec<String>, Option<String>) {
        let t = &self.task;
        let settings =
            ProofSpec { kb: t.source.clone(), queries: Some("-".into()), depth: t.depth, ..self.settings.clone() };
        (worker_flags(WorkloadSpec::Proof(settings)), Some(t.train_text()))
    }
}

/// The registry's entry: this workload for a run (a bad setting is refused, named).
impl crate::Native for ProofSpec {
    fn load(settings: &Self, _spec: &RunSpec) -> Result<Arc<dyn Workload>, SpecError> {
        Ok(Arc::new(Proof::load(settings)?))
    }
}

impl Workload for Proof {
    /// Env 0's goal list, its successors (as many as exist) with their mask, and the choice.
    fn frame(&self, step: u64, obs: &Observations, actions: Actions<'_>) -> Option<Frame> {
        let actions = actions.index;
        let [FieldData::I64(state), FieldData::I64(succ), FieldData::I64(mask)] = obs.fields.as_slice() else {
            return None;
        };
        let rows = succ[..SUCCESSORS * GOAL_WIDTH].chunks_exact(GOAL_WIDTH).take_while(|row| row[0] != PAD);
        let successors: Vec<String> = rows.map(|row| self.task.decode(row)).collect();
        let allowed = mask[..successors.len()].iter().map(|&m| m != 0).collect();
        let goals = self.task.decode(&state[..GOAL_WIDTH]);
        Some(Frame::new(EnvName::Proof, step, &ProofFrame { goals, successors, allowed, choice: actions[0] }))
    }

    fn learner(self: Arc<Self>, setup: &mut Setup<'_>) -> Result<Box<dyn Learner>, RunError> {
        let spec = setup.spec;
        if spec.exec.backend == Backend::Device {
            return Err(SpecError::of(&run_knobs::BACKEND, "device steps CartPole only; the proof env runs on the host: allowed here: sequential, threads, subprocess, vectorized").into());
        }
        let env_spec = self.vector_env(1, spec.seed, 0).spec().clone();
        let heads: Vec<usize> = env_spec.heads.iter().map(|h| h.n).collect();
        let arch = ProofArch {
            vocab: self.task.vocab.size(),
            embed: self.settings.embed_dim,
            hidden: spec.ppo.hidden[0],
            successors: env_spec.total_choices(),
        };
        let net = ProofNet::new(arch, setup.device);
        if setup.precision.kind != tch::Kind::Float {
            setup.notes.push("env proof: the embedding policy's update runs in fp32, whatever --precision says".into());
            setup.precision = Precision::fp32();
        }
        let (opt, mover) = ppo::after_init(setup, &net.flat);
        let device = setup.device;
        let actor = || match spec.exec.inference {
            // Graph is validated away off the device backend.
            Inference::Eager | Inference::Graph => ProofActor::Eager(Eager::new(&spec.exec, device)),
            Inference::Fused => {
                ProofActor::Fused { policy: Box::new(ProofHost::new(net.arch.clone(), &net.host_params())) }
            }
        };
        if spec.exec.inference == Inference::Fused {
            setup.notes.push(FUSED_NOTE.into());
        }
        let collector = HostCollector::new(spec, self.clone(), 0, actor)?;
        let agent = ProofAgent { net, task: Arc::clone(&self.task) };
        Ok(Box::new(PpoLearner::new(setup, agent, opt, mover, Box::new(collector), heads)))
    }

    fn load_policy(self: Arc<Self>, stored: checkpoint::Stored) -> Result<Box<dyn TrainedPolicy>> {
        Ok(Box::new(TrainedProof::load(stored, Arc::clone(&self.task))?))
    }
}

/// The embedding policy as PPO trains it, with the task its indices mean something in.
pub struct ProofAgent {
    pub net: ProofNet,
    pub task: Arc<ProofTask>,
}

/// The policy's shape and the token of every vocabulary index past the fixed ones
/// (predicates as `name/arity`, then constants): the indices mean something only with the
/// knowledge base they were built from, so loading rebuilds the task from the spec and
/// refuses a knowledge base that no longer gives the same tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProofMeta {
    pub arch: ProofArch,
    pub predicates: Vec<String>,
    pub constants: Vec<String>,
}

impl ProofMeta {
    pub fn of(task: &ProofTask, arch: &ProofArch) -> Self {
        Self {
            arch: arch.clone(),
            predicates: task.kb.preds.iter().map(|(name, arity)| format!("{name}/{arity}")).collect(),
            constants: task.kb.consts.clone(),
        }
    }
}

/// A trained (or loaded) embedding policy and its task.
pub struct TrainedProof {
    pub net: ProofNet,
    pub task: Arc<ProofTask>,
}

impl TrainedProof {
    /// A checkpoint's policy on `task` (rebuilt from the checkpoint's spec), refused when
    /// the task no longer gives the vocabulary it was trained with.
    pub fn load(stored: checkpoint::Stored, task: Arc<ProofTask>) -> Result<Self> {
        let meta: ProofMeta = stored.shape(CHECKPOINT_KEY)?;
        let a = &meta.arch;
        let sizes_ok = (1..=1024).contains(&a.embed) && (1..=4096).contains(&a.hidden) && a.successors == SUCCESSORS;
        if a.vocab != task.vocab.size() || !sizes_ok {
            bail!(
                "the checkpoint's policy (vocabulary {}, embedding {}, hidden {}, {} successors) does not fit the proof env (vocabulary {}, {SUCCESSORS} successors; widths 1 to 1024 and 4096)",
                a.vocab, a.embed, a.hidden, a.successors, task.vocab.size()
            );
        }
        if ProofMeta::of(&task, &meta.arch) != meta {
            let kb = &task.source;
            bail!("the knowledge base '{kb}' no longer gives the vocabulary this policy was trained with");
        }
        let expected = meta.arch.layout().iter().map(ParamSlot::numel).sum();
        let flat = stored.params(expected)?;
        Ok(Self { net: ProofNet::from_flat(meta.arch, flat), task })
    }

    fn evaluation(&self, tries: usize, seed: u64) -> Evaluation {
        let mut policy = ProofHost::new(self.net.arch.clone(), &self.net.host_params());
        let e = eval::evaluate(&self.task, &mut policy, tries, seed);
        let summary = e.summary();
        Evaluation { key: CHECKPOINT_KEY, json: serde_json::to_value(&e).unwrap_or_default(), summary }
    }
}

impl TrainedPolicy for TrainedProof {
    fn network(&self) -> &dyn Network {
        &self.net
    }

    fn checkpoint_key(&self) -> &'static str {
        CHECKPOINT_KEY
    }

    /// The checkpoint stores the knowledge base's names with the network's shape.
    fn save(&self, dir: &Path, spec: &RunSpec) -> Result<()> {
        let meta = serde_json::to_value(ProofMeta::of(&self.task, &self.net.arch))?;
        checkpoint::save(dir, spec, CHECKPOINT_KEY, meta, &self.net.flat)
    }

    fn report_evaluation(&self, seed: u64) -> Option<Evaluation> {
        Some(self.evaluation(EVAL_TRIES, seed))
    }

    /// The held-out proof rate against random choice, `episodes` tries per query (at most
    /// 1000) for the sampled policy and the baseline.
    fn evaluate(&self, episodes: usize, seed: u64) -> Result<Evaluation> {
        Ok(self.evaluation(episodes.min(1000), seed))
    }
}

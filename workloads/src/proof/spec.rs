//! `proof` (seed 000): proof search over a Prolog knowledge base. Its settings, their
//! knobs, its frame and what its phases mean to the report (the env and its Prolog are the
//! proof workload's native code).
//!
//! A module of `hotlab-specs`, the registry (the lab and the browser read it too): it is
//! written in `hotlab-core`'s words, names the registry `hotlab_specs`, and links no libtorch.

use hotlab_core::choices::{Backend, Inference};
use hotlab_core::knob::{Knob, KnobKind::*};
use hotlab_core::preset::Preset;
use hotlab_core::profile::{Phase, PhaseInfo, PhaseKind, Profile};
use hotlab_core::run::RunContext;
use hotlab_specs::{setting, EnvName, Settings, HOST_BACKENDS};
use serde::{Deserialize, Serialize};

/// The proof env's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProofSpec {
    /// The knowledge base: a Prolog file or a generated world (`family:people=N,seed=S`,
    /// `geography:places=N,seed=S`). Flag `--kb`.
    pub kb: String,
    /// A query file (ground atoms; `% test` starts the held-out part); for a generated
    /// world the queries are generated when this is absent. Flag `--queries`.
    pub queries: Option<String>,
    /// Most resolution steps in an episode (the depth limit). Flag `--proof-depth`.
    pub depth: usize,
    /// Width of the policy's index embeddings (its hidden width is `ppo.hidden`'s first).
    /// Flag `--embed-dim`.
    pub embed_dim: usize,
}

impl Default for ProofSpec {
    fn default() -> Self {
        Self { kb: "family:people=200,seed=3".into(), queries: None, depth: 10, embed_dim: 32 }
    }
}

/// Embedding lookups (the proof policy's index embeddings), rollout and update.
pub const EMBEDDING_LOOKUP: Phase = Phase::new("embedding_lookup");

/// The knobs other code names (errors, hooks), declared once here and listed in `KNOBS`.
impl ProofSpec {
    /// The knob of `--kb`.
    pub const KB: Knob = setting(
        EnvName::Proof,
        "kb",
        "workload.proof.kb",
        Text,
        "proof: a generated world (family:people=N,seed=S) or a .pl file in the data dir",
    )
    .about("a Prolog file (facts and Horn rules, arity 1 or 2) or a generated world, `family:people=N,seed=S` or `geography:places=N,seed=S`");

    /// The knob of `--queries`.
    pub const QUERIES: Knob = setting(
        EnvName::Proof,
        "queries",
        "workload.proof.queries",
        OptionalText,
        "proof: a query file in the data dir (generated for a world when empty)",
    )
    .about("a query file, one ground atom per line, `% test` before the held-out ones (needed with a --kb file; generated for a world when absent)");
}

impl Settings for ProofSpec {
    // The proof env on a family world (the embedding policy learns ~10× faster at lr 0.003
    // than at 2.5e-4).
    const PRESETS: &'static [Preset<Self>] = &[Preset::new(
        "proof",
        "Seed 000's proof search on a 200-person family world: 64 envs, lr 0.003, 1M steps, about 10 s; the training proof rate rises (held-out queries need a smaller world: --kb family:people=30,seed=3)",
        |run, _| {
            run.envs = 64;
            run.total_steps = 1_000_000;
            run.ppo.lr = 0.003;
        },
    )];
    const KNOBS: &'static [Knob] = &[
        Self::KB,
        Self::QUERIES,
        setting(EnvName::Proof, "proof_depth", "workload.proof.depth", Int, "proof: most resolution steps per episode")
            .range(1.0, 64.0),
        setting(
            EnvName::Proof,
            "embed_dim",
            "workload.proof.embed_dim",
            Int,
            "proof: width of the policy's index embeddings",
        )
        .range(1.0, 1024.0),
    ];
    /// Resolution is symbolic: the envs step on the host.
    const BACKENDS: &'static [Backend] = HOST_BACKENDS;
    const PHASES: &'static [PhaseInfo] =
        &[PhaseInfo::new(EMBEDDING_LOOKUP, PhaseKind::Forward, "#7fd1b9", "index embeddings")];
    /// The goal list (10 × 3), 20 successors (20 × 10 × 3) and the mask (20), in i64.
    const OBS_BYTES: u64 = (10 * 3 + 20 * 10 * 3 + 20) * 8;
    /// Integer states, successors and masks: `--obs-norm on` is refused.
    const FLOAT_OBS: bool = false;

    /// The knowledge base unless it names a generated world (`family:…`, `geography:…`;
    /// the proof workload parses the rest), and the query file.
    fn files(&mut self) -> Vec<(&'static str, &mut String)> {
        let kind = self.kb.split_once(':').map_or(self.kb.as_str(), |(kind, _)| kind);
        let world = matches!(kind, "family" | "geography");
        let kb = (!world).then_some((Self::KB.name, &mut self.kb));
        kb.into_iter().chain(self.queries.as_mut().map(|q| (Self::QUERIES.name, q))).collect()
    }

    fn diagnosis(&self, phase: Phase, _profile: &Profile, run: &RunContext) -> Option<String> {
        let d = self.embed_dim;
        match (phase, run.exec.inference) {
            (EMBEDDING_LOOKUP, Inference::Fused) => {
                Some(format!("goal lists as sums of projected embedding rows (host), embed dim {d}"))
            }
            (EMBEDDING_LOOKUP, _) => Some(format!("index embeddings (embedding_bag), embed dim {d}")),
            _ => None,
        }
    }
}

/// What the viewer draws of env 0: its goal list, the successors offered (with whether
/// each is allowed) and the one chosen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProofFrame {
    pub goals: String,
    pub successors: Vec<String>,
    pub allowed: Vec<bool>,
    pub choice: i64,
}

//! Does the trained proof policy prove more than chance? Its proof rate on the held-out
//! test queries (those provable within the depth limit) against a uniform choice among
//! the same allowed successors, at the same depth limit, with the same env.

use crate::proof::goals::{ProofEnv, ProofTask, GOAL_WIDTH};
use crate::proof::host::ProofHost;
use hotlab_env::rng::HostRng;
use hotlab_env::FieldData;
use hotlab_train::models::mlp::host::sample_head;
use serde::Serialize;
use std::sync::Arc;

/// Proof rates on the held-out queries.
#[derive(Clone, Debug, Serialize)]
pub struct ProofEval {
    /// Held-out queries that are provable within the depth limit: what the rates count.
    pub queries: usize,
    /// The depth limit (steps per episode), the env's.
    pub depth: usize,
    /// Share proved by the policy taking its most likely allowed successor.
    pub greedy: f64,
    /// Share proved by the policy sampling its successor (mean over `tries` per query).
    pub sampled: f64,
    /// Share proved by a uniform choice among the allowed successors (mean over `tries`).
    pub random: f64,
    pub tries: usize,
}

impl ProofEval {
    /// One line for people.
    pub fn summary(&self) -> String {
        format!(
            "held-out proofs ({} provable queries, depth {}): policy {:.1} % greedy, {:.1} % sampled; uniform random {:.1} %",
            self.queries,
            self.depth,
            100.0 * self.greedy,
            100.0 * self.sampled,
            100.0 * self.random
        )
    }
}

/// How an episode picks its successor.
#[derive(Clone, Copy)]
#[repr(u64)]
enum Chooser {
    Greedy,
    Sampled,
    Random,
}

/// Runs `tries` episodes per provable held-out query for the sampled policy and the
/// random chooser (one for the deterministic greedy policy).
pub fn evaluate(task: &Arc<ProofTask>, policy: &mut ProofHost, tries: usize, seed: u64) -> ProofEval {
    let queries: Vec<_> = task.test.iter().zip(&task.test_provable).filter(|(_, &p)| p).map(|(q, _)| *q).collect();
    let mut rate = |chooser: Chooser, tries: usize| -> f64 {
        // Each chooser its own stream: the baseline does not depend on the policy.
        let mut rng = HostRng::new(seed ^ (0xE7A1 + chooser as u64));
        if queries.is_empty() {
            return 0.0;
        }
        let mut proved = 0usize;
        for (i, q) in queries.iter().enumerate() {
            let mut env = ProofEnv::with_queries(Arc::clone(task), Arc::new(vec![*q]), seed, i as u64);
            for _ in 0..tries {
                env.start(*q);
                proved += episode(&mut env, policy, chooser, &mut rng) as usize;
            }
        }
        proved as f64 / (queries.len() * tries) as f64
    };
    let greedy = rate(Chooser::Greedy, 1);
    let sampled = rate(Chooser::Sampled, tries);
    let random = rate(Chooser::Random, tries);
    ProofEval { queries: queries.len(), depth: task.depth, greedy, sampled, random, tries }
}

/// Plays one episode from the env's current state; whether it ended in a proof.
fn episode(env: &mut ProofEnv, policy: &mut ProofHost, chooser: Chooser, rng: &mut HostRng) -> bool {
    let k = policy.arch.successors;
    let mut fields =
        vec![FieldData::I64(vec![0; GOAL_WIDTH]), FieldData::I64(vec![0; k * GOAL_WIDTH]), FieldData::I64(vec![0; k])];
    let mut logits = vec![0f32; k];
    loop {
        env.observe(&mut fields, 0);
        let [FieldData::I64(state), FieldData::I64(succ), FieldData::I64(mask)] = &fields[..] else {
            unreachable!("three index fields")
        };
        let allowed: Vec<usize> = (0..k).filter(|&j| mask[j] != 0).collect();
        // Nothing allowed: the env ends the episode as a dead end whatever is chosen.
        let action = match (chooser, allowed.is_empty()) {
            (_, true) => 0,
            (Chooser::Random, false) => allowed[(rng.next_u64() % allowed.len() as u64) as usize],
            (Chooser::Greedy | Chooser::Sampled, false) => {
                policy.embed(state, succ, mask, None);
                policy.heads();
                policy.tape.row_logits(0, &mut logits);
                match chooser {
                    Chooser::Greedy => *allowed.iter().max_by(|&&a, &&b| logits[a].total_cmp(&logits[b])).unwrap_or(&0),
                    _ => sample_head(&logits, |j| mask[j] != 0, rng.next_f32()).0,
                }
            }
        };
        let (reward, terminated, truncated) = env.advance(action as i64);
        if terminated || truncated {
            return reward > 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proof::policy::ProofArch;

    #[test]
    fn a_uniform_policy_scores_like_random_and_the_evaluation_repeats() {
        let task = Arc::new(ProofTask::load("family:people=40,seed=5", None, 8).unwrap());
        let arch = ProofArch { vocab: task.vocab.size(), embed: 4, hidden: 8, successors: 20 };
        // Zero weights: every allowed successor scores the same, so greedy takes the
        // first allowed one and sampling is uniform.
        let n: i64 = arch.layout().iter().map(|s| s.numel()).sum();
        let mut policy = ProofHost::new(arch, &vec![0.0; n as usize]);
        let a = evaluate(&task, &mut policy, 8, 1);
        assert!(a.queries > 0, "the held-out set has provable queries");
        assert_eq!(a.depth, 8);
        for r in [a.greedy, a.sampled, a.random] {
            assert!((0.0..=1.0).contains(&r));
        }
        // A uniform sampler is the random chooser: the rates agree up to noise.
        assert!((a.sampled - a.random).abs() < 0.15, "{a:?}");
        let b = evaluate(&task, &mut policy, 8, 1);
        assert_eq!((a.greedy, a.sampled, a.random), (b.greedy, b.sampled, b.random), "seeded: repeatable");
    }
}

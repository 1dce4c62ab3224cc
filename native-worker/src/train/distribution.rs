//! A multi-head masked categorical distribution over libtorch logits.
//!
//! The actor's logits `[B, Σ n_h]` hold the heads side by side; head `h` is a
//! categorical over its `n_h` columns. A mask (true = allowed) pushes disallowed
//! logits to a large negative value, so they get probability 0 (never sampled) and add
//! nothing to the entropy. An action is one index per head; its log-probability and
//! entropy are the sums over heads.

use tch::{Kind, Tensor};

/// What masked-out logits are set to (CleanRL's masked categorical uses the same idea).
pub const MASKED_LOGIT: f64 = -1e8;

/// Applies the mask, if any.
pub fn masked(logits: &Tensor, mask: Option<&Tensor>) -> Tensor {
    match mask {
        Some(m) => logits.masked_fill(&m.logical_not(), MASKED_LOGIT),
        None => logits.shallow_clone(),
    }
}

/// Per-head log-probabilities of every choice.
fn head_log_probs(logits: &Tensor, heads: &[usize]) -> Vec<Tensor> {
    if heads.len() == 1 {
        return vec![logits.log_softmax(-1, Kind::Float)];
    }
    let mut start = 0;
    heads
        .iter()
        .map(|&n| {
            let lp = logits.narrow(-1, start, n as i64).log_softmax(-1, Kind::Float);
            start += n as i64;
            lp
        })
        .collect()
}

/// Log-probability `[B]` of `actions` `[B, H]` and entropy `[B]`, summed over heads.
pub fn log_prob_and_entropy(
    logits: &Tensor,
    mask: Option<&Tensor>,
    heads: &[usize],
    actions: &Tensor,
) -> (Tensor, Tensor) {
    let logits = masked(logits, mask);
    let mut log_prob: Option<Tensor> = None;
    let mut entropy: Option<Tensor> = None;
    for (h, lp) in head_log_probs(&logits, heads).into_iter().enumerate() {
        let a = actions.narrow(-1, h as i64, 1);
        let chosen = lp.gather(-1, &a, false).squeeze_dim(-1);
        let ent = -(lp.exp() * &lp).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float);
        log_prob = Some(match log_prob {
            Some(acc) => acc + chosen,
            None => chosen,
        });
        entropy = Some(match entropy {
            Some(acc) => acc + ent,
            None => ent,
        });
    }
    (log_prob.expect("at least one head"), entropy.expect("at least one head"))
}

/// Samples one action per head: `[B, H]` (i64). Uses libtorch's generator.
pub fn sample(logits: &Tensor, mask: Option<&Tensor>, heads: &[usize]) -> Tensor {
    let logits = masked(logits, mask);
    let picks: Vec<Tensor> = head_log_probs(&logits, heads).iter().map(|lp| lp.exp().multinomial(1, true)).collect();
    Tensor::cat(&picks, -1)
}

/// The most likely action per head: `[B, H]` (i64).
pub fn greedy(logits: &Tensor, mask: Option<&Tensor>, heads: &[usize]) -> Tensor {
    let logits = masked(logits, mask);
    let mut start = 0;
    let picks: Vec<Tensor> = heads
        .iter()
        .map(|&n| {
            let a = logits.narrow(-1, start, n as i64).argmax(-1, true);
            start += n as i64;
            a
        })
        .collect();
    Tensor::cat(&picks, -1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f32], shape: &[i64]) -> Tensor {
        Tensor::from_slice(v).view(shape)
    }

    #[test]
    fn log_prob_and_entropy_match_a_hand_computed_case() {
        // Two heads: [ln1, ln2, ln3] (probs 1/6, 2/6, 3/6) and [0, 0] (1/2, 1/2).
        let (l1, l2, l3) = (1f32.ln(), 2f32.ln(), 3f32.ln());
        let logits = t(&[l1, l2, l3, 0.0, 0.0], &[1, 5]);
        let actions = Tensor::from_slice(&[2i64, 1]).view([1, 2]);
        let (lp, ent) = log_prob_and_entropy(&logits, None, &[3, 2], &actions);
        let want_lp = (0.5f64).ln() + (0.5f64).ln();
        let p = [1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0];
        let want_ent = -p.iter().map(|q: &f64| q * q.ln()).sum::<f64>() + 2f64.ln();
        assert!((f64::try_from(lp.squeeze()).unwrap() - want_lp).abs() < 1e-6);
        assert!((f64::try_from(ent.squeeze()).unwrap() - want_ent).abs() < 1e-6);
    }

    #[test]
    fn masked_choices_get_zero_probability_and_no_entropy() {
        let logits = t(&[0.0, 0.0, 0.0, 0.0], &[1, 4]);
        let mask = Tensor::from_slice(&[true, false, true, false]).view([1, 4]);
        let actions = Tensor::from_slice(&[2i64]).view([1, 1]);
        let (lp, ent) = log_prob_and_entropy(&logits, Some(&mask), &[4], &actions);
        assert!((f64::try_from(lp.squeeze()).unwrap() - 0.5f64.ln()).abs() < 1e-6);
        assert!((f64::try_from(ent.squeeze()).unwrap() - 2f64.ln()).abs() < 1e-6);
    }

    #[test]
    fn masked_actions_are_never_sampled() {
        let _seeded = crate::testing::torch_seed(3);
        // Large logits on the masked choices: sampling must still avoid them.
        let logits = Tensor::from_slice(&[9.0f32, 0.0, 9.0, 0.0, 5.0, -1.0]).view([1, 6]).repeat([4096, 1]);
        let mask = Tensor::from_slice(&[false, true, false, true, false, true]).view([1, 6]).repeat([4096, 1]);
        let heads = [4, 2];
        let a = sample(&logits, Some(&mask), &heads);
        assert_eq!(a.size(), [4096, 2]);
        let first = Vec::<i64>::try_from(a.select(1, 0)).unwrap();
        let second = Vec::<i64>::try_from(a.select(1, 1)).unwrap();
        assert!(first.iter().all(|&x| x == 1 || x == 3), "head 0 sampled a masked choice");
        assert!(second.iter().all(|&x| x == 1), "head 1 sampled a masked choice");
        assert!(first.contains(&1) && first.contains(&3));
        assert_eq!(Vec::<i64>::try_from(greedy(&logits, Some(&mask), &heads).get(0)).unwrap(), vec![1, 1]);
    }
}

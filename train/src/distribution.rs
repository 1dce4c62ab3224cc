//! A multi-head masked categorical distribution over libtorch logits.
//!
//! The actor's logits `[B, Σ n_h]` hold the heads side by side; head `h` is a
//! categorical over its `n_h` columns. A mask (true = allowed) pushes disallowed
//! logits to a large negative value, so they get probability 0 (never sampled) and add
//! nothing to the entropy. An action is one index per head; its log-probability and
//! entropy are the sums over heads.

pub mod gaussian;

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
    let (log_prob, entropies) = log_prob_and_entropies(logits, mask, heads, actions);
    let mut entropies = entropies.into_iter();
    let first = entropies.next().expect("at least one head");
    (log_prob, entropies.fold(first, |acc, ent| acc + ent))
}

/// Log-probability `[B]` of `actions` `[B, H]`, summed over heads, and each head's entropy
/// `[B]` (a pinned or masked-out head's is 0).
pub fn log_prob_and_entropies(
    logits: &Tensor,
    mask: Option<&Tensor>,
    heads: &[usize],
    actions: &Tensor,
) -> (Tensor, Vec<Tensor>) {
    let logits = masked(logits, mask);
    let mut log_prob: Option<Tensor> = None;
    let mut entropies = Vec::with_capacity(heads.len());
    for (h, lp) in head_log_probs(&logits, heads).into_iter().enumerate() {
        let a = actions.narrow(-1, h as i64, 1);
        let chosen = lp.gather(-1, &a, false).squeeze_dim(-1);
        entropies.push(-(lp.exp() * &lp).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float));
        log_prob = Some(match log_prob {
            Some(acc) => acc + chosen,
            None => chosen,
        });
    }
    (log_prob.expect("at least one head"), entropies)
}

/// Samples one action per head: `[B, H]` (i64). Uses libtorch's generator.
pub fn sample(logits: &Tensor, mask: Option<&Tensor>, heads: &[usize]) -> Tensor {
    let logits = masked(logits, mask);
    let picks: Vec<Tensor> = head_log_probs(&logits, heads).iter().map(|lp| lp.exp().multinomial(1, true)).collect();
    Tensor::cat(&picks, -1)
}

/// Samples from the actor's `outputs` (the logits of `heads`, then with `log_std` the
/// Gaussian's means) with libtorch's generator: the indices `[B, heads]`, the real
/// components `[B, D]` where there is a Gaussian, and the action's log-probability `[B]`.
pub fn sample_outputs(outputs: &Tensor, log_std: Option<&Tensor>, heads: &[usize]) -> (Tensor, Option<Tensor>, Tensor) {
    let width: i64 = heads.iter().map(|&n| n as i64).sum();
    let rows = outputs.size()[0];
    let (mut actions, mut log_prob) = (Tensor::zeros([rows, 0], (Kind::Int64, outputs.device())), None);
    if !heads.is_empty() {
        let logits = if log_std.is_some() { outputs.narrow(1, 0, width) } else { outputs.shallow_clone() };
        actions = sample(&logits, None, heads);
        log_prob = Some(log_prob_and_entropy(&logits, None, heads, &actions).0);
    }
    let real = log_std.map(|log_std| {
        let mean = outputs.narrow(1, width, log_std.size()[0]);
        let real = gaussian::sample(&mean, log_std);
        let lp = gaussian::log_prob(&mean, log_std, &real);
        log_prob = Some(log_prob.take().map_or_else(|| lp.shallow_clone(), |acc| acc + &lp));
        real
    });
    (actions, real, log_prob.expect("at least one head"))
}

/// The actor's most likely action: each categorical head's best choice `[B, heads]` and
/// the Gaussian's mean `[B, D]` where there is one.
pub fn greedy_outputs(outputs: &Tensor, log_std: Option<&Tensor>, heads: &[usize]) -> (Tensor, Option<Tensor>) {
    let width: i64 = heads.iter().map(|&n| n as i64).sum();
    let actions = match heads.is_empty() {
        true => Tensor::zeros([outputs.size()[0], 0], (Kind::Int64, outputs.device())),
        false => greedy(&outputs.narrow(1, 0, width), None, heads),
    };
    (actions, log_std.map(|l| outputs.narrow(1, width, l.size()[0])))
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

/// A mask that depends on the first head's choice: a table of one row of `Σ n_h` flags
/// per choice of head 0 (`[B, n_0·Σ n_h]`; head 0's own part alike in every row). The
/// mask `[B, Σ n_h]` an action with first-head choices `first` `[B]` was drawn under.
pub fn resolve_rows(table: &Tensor, first: &Tensor, heads: &[usize]) -> Tensor {
    let (b, width) = (table.size()[0], heads.iter().sum::<usize>() as i64);
    let rows = table.view([b, -1, width]);
    rows.gather(1, &first.view([b, 1, 1]).expand([b, 1, width], false), false).squeeze_dim(1)
}

/// Samples under a [`resolve_rows`] table: head 0 under its part of the table, then every
/// other head under the row head 0 picked. The actions `[B, H]` and that mask `[B, Σ n_h]`.
pub fn sample_by_rows(logits: &Tensor, table: &Tensor, heads: &[usize]) -> (Tensor, Tensor) {
    let (b, n0) = (table.size()[0], heads[0] as i64);
    let first_mask = table.narrow(1, 0, n0);
    let first = sample(&logits.narrow(-1, 0, n0), Some(&first_mask), &heads[..1]).view([b]);
    let mask = resolve_rows(table, &first, heads);
    let actions = sample(logits, Some(&mask), heads);
    actions.narrow(1, 0, 1).copy_(&first.view([b, 1]));
    (actions, mask)
}

/// The most likely action under a [`resolve_rows`] table: head 0's, then the others' under
/// its row.
pub fn greedy_by_rows(logits: &Tensor, table: &Tensor, heads: &[usize]) -> Tensor {
    let (b, n0) = (table.size()[0], heads[0] as i64);
    let first = greedy(&logits.narrow(-1, 0, n0), Some(&table.narrow(1, 0, n0)), &heads[..1]).view([b]);
    let actions = greedy(logits, Some(&resolve_rows(table, &first, heads)), heads);
    actions.narrow(1, 0, 1).copy_(&first.view([b, 1]));
    actions
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

    /// Head 1's mask follows head 0's choice: choice 0 allows head 1's first option only,
    /// choice 1 its second only; every draw is consistent and the mask returned is its row.
    #[test]
    fn a_mask_by_rows_follows_the_first_heads_choice() {
        let _seeded = crate::testing::torch_seed(4);
        let heads = [2, 2];
        let row0 = [true, true, true, false];
        let row1 = [true, true, false, true];
        let table = Tensor::from_slice(&[row0, row1].concat()).view([1, 8]).repeat([512, 1]);
        let logits = Tensor::zeros([512, 4], (tch::Kind::Float, tch::Device::Cpu));
        let (a, mask) = sample_by_rows(&logits, &table, &heads);
        let a = Vec::<i64>::try_from(a.reshape([-1])).unwrap();
        let pairs: Vec<(i64, i64)> = a.chunks(2).map(|p| (p[0], p[1])).collect();
        assert!(pairs.iter().all(|&(h0, h1)| h0 == h1), "head 1 follows head 0: {:?}", &pairs[..8]);
        assert!(pairs.iter().any(|p| p.0 == 0) && pairs.iter().any(|p| p.0 == 1));
        let mask = Vec::<bool>::try_from(mask.reshape([-1])).unwrap();
        for (row, &(h0, _)) in mask.chunks(4).zip(&pairs) {
            assert_eq!(row, if h0 == 0 { &row0 } else { &row1 });
        }
    }
}

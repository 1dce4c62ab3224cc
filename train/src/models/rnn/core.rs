//! The recurrent core: an LSTM or a GRU cell over one flat parameter vector, in PyTorch's
//! gate layout (`nn.LSTM`: i, f, g, o; `nn.GRU`: r, z, n), so its weights are
//! `nn.LSTM`'s/`nn.GRU`'s one layer's, copied as they are.
//!
//! Two forms of the same function. While acting, [`Core::step`]: one fused cell call per
//! env step for every env. While learning, [`Core::sequence`]: one call over a whole
//! segment of `T` steps for every env, its episodes cut where they start: each env's
//! segment splits into runs between episode starts, and the runs go to libtorch's
//! packed-sequence RNN together (longest first), each from its own initial state (the
//! env's state at the rollout's start for its first run, zeros for a run that starts an
//! episode). So the update's outputs are the rollout's, with one call where a cell stepped
//! `T` times would make `T`.

use crate::models::layers::{Builder, Init};
use crate::params::FlatParams;
use hotlab_shared::spec::Rnn;
use tch::{Device, Kind, Tensor};

/// A recurrent state: `[h]` (GRU) or `[h, c]` (LSTM), `[rows, width]` each.
pub type State = Vec<Tensor>;

/// The cell's parameters (their indices in the network's layout) and its width.
#[derive(Clone, Copy, Debug)]
pub struct Core {
    pub cell: Rnn,
    pub width: i64,
    w_ih: usize,
    w_hh: usize,
    b_ih: usize,
    b_hh: usize,
}

impl Core {
    /// A cell of `width` over `inputs` features, drawn as CleanRL's `ppo_atari_lstm.py`
    /// draws its LSTM: orthogonal weights (gain 1), zero biases.
    pub fn new(b: &mut Builder, name: &str, cell: Rnn, inputs: i64, width: i64) -> Self {
        let gates = width
            * match cell {
                Rnn::Lstm => 4,
                Rnn::Gru => 3,
                Rnn::None => panic!("a recurrent core needs lstm or gru"),
            };
        Self {
            cell,
            width,
            w_ih: b.param(&format!("{name}.w_ih"), &[gates, inputs], Init::Orthogonal(1.0)),
            w_hh: b.param(&format!("{name}.w_hh"), &[gates, width], Init::Orthogonal(1.0)),
            b_ih: b.param(&format!("{name}.b_ih"), &[gates], Init::Zero),
            b_hh: b.param(&format!("{name}.b_hh"), &[gates], Init::Zero),
        }
    }

    /// A zero state for `rows` envs.
    pub fn zeros(&self, rows: usize, device: Device) -> State {
        let parts = if self.cell == Rnn::Lstm { 2 } else { 1 };
        (0..parts).map(|_| Tensor::zeros([rows as i64, self.width], (Kind::Float, device))).collect()
    }

    fn weights<'p>(&self, p: &'p FlatParams) -> [&'p Tensor; 4] {
        [p.get(self.w_ih), p.get(self.w_hh), p.get(self.b_ih), p.get(self.b_hh)]
    }

    /// One step for every row: `x` `[rows, inputs]` from `state`, whose rows are zeroed
    /// first where `keep` (`[rows, 1]`, 0 or 1) is 0; the output (`h`) and the new state.
    pub fn step(&self, p: &FlatParams, x: &Tensor, state: &State, keep: Option<&Tensor>) -> (Tensor, State) {
        let state: State = match keep {
            Some(k) => state.iter().map(|s| s * k).collect(),
            None => state.iter().map(Tensor::shallow_clone).collect(),
        };
        let [w_ih, w_hh, b_ih, b_hh] = self.weights(p);
        match self.cell {
            Rnn::Lstm => {
                let hx: Vec<&Tensor> = state.iter().collect();
                let (h, c) = x.lstm_cell(&hx, w_ih, w_hh, Some(b_ih), Some(b_hh));
                (h.shallow_clone(), vec![h, c])
            }
            _ => {
                let h = x.gru_cell(&state[0], w_ih, w_hh, Some(b_ih), Some(b_hh));
                (h.shallow_clone(), vec![h])
            }
        }
    }

    /// Every row's outputs over a segment: `x` `[T, M, inputs]` (time first), each of the
    /// `M` envs from its row of `state` (`[M, width]` each), its state reset (zeroed) before
    /// step `t` where `starts[t·M + m]`. Gives `[T, M, width]`, as [`Core::step`] called `T`
    /// times would, in one call.
    pub fn sequence(&self, p: &FlatParams, x: &Tensor, state: &State, starts: &[bool]) -> Tensor {
        let size = x.size();
        let (steps, envs) = (size[0] as usize, size[1] as usize);
        assert_eq!(starts.len(), steps * envs, "one start flag per step and env");
        let runs = Runs::of(steps, envs, starts);
        let device = x.device();
        let index = Tensor::from_slice(&runs.index).to_device(device);
        let data = x.reshape([(steps * envs) as i64, -1]).index_select(0, &index);
        let batch_sizes = Tensor::from_slice(&runs.batch_sizes);
        let first = Tensor::from_slice(&runs.first).to_device(device);
        // Each run's initial state: its env's row, or the zero row appended at `envs`.
        let hx: State = state
            .iter()
            .map(|s| Tensor::cat(&[s, &s.zeros_like().narrow(0, 0, 1)], 0).index_select(0, &first).unsqueeze(0))
            .collect();
        let [w_ih, w_hh, b_ih, b_hh] = self.weights(p);
        let params = [w_ih, w_hh, b_ih, b_hh];
        let packed = match self.cell {
            Rnn::Lstm => {
                Tensor::lstm_data(&data, &batch_sizes, &[&hx[0], &hx[1]], &params, true, 1, 0.0, true, false).0
            }
            _ => Tensor::gru_data(&data, &batch_sizes, &hx[0], &params, true, 1, 0.0, true, false).0,
        };
        // Each packed row back to its step and env (every one is written once).
        let rows = Tensor::zeros([(steps * envs) as i64, self.width], (Kind::Float, device));
        rows.index_copy(0, &index, &packed).view([steps as i64, envs as i64, self.width])
    }
}

/// A segment's runs between episode starts, packed as libtorch's packed sequences are:
/// longest run first, time-major.
struct Runs {
    /// Per packed row, its row `t·M + m` in the segment.
    index: Vec<i64>,
    /// Runs still going at each time of the packing.
    batch_sizes: Vec<i64>,
    /// Per run, the env whose state it starts from, or `M` (the zero row) for a run that
    /// starts an episode.
    first: Vec<i64>,
}

impl Runs {
    fn of(steps: usize, envs: usize, starts: &[bool]) -> Self {
        // (env, first step, length), in env order, then longest first (a stable sort).
        let mut runs = Vec::new();
        for m in 0..envs {
            let mut t0 = 0;
            for t in 1..steps {
                if starts[t * envs + m] {
                    runs.push((m, t0, t - t0));
                    t0 = t;
                }
            }
            runs.push((m, t0, steps - t0));
        }
        runs.sort_by_key(|r| std::cmp::Reverse(r.2));
        let longest = runs.first().map_or(0, |r| r.2);
        let (mut index, mut batch_sizes) = (Vec::with_capacity(steps * envs), Vec::with_capacity(longest));
        for t in 0..longest {
            let going = runs.iter().take_while(|r| r.2 > t).count();
            batch_sizes.push(going as i64);
            index.extend(runs[..going].iter().map(|&(m, t0, _)| ((t0 + t) * envs + m) as i64));
        }
        let first = runs.iter().map(|&(m, t0, _)| if t0 == 0 && !starts[m] { m } else { envs } as i64).collect();
        Self { index, batch_sizes, first }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The packing covers every step of every env once, and each run starts where an
    /// episode does (or at the segment's start).
    #[test]
    fn runs_cover_the_segment_once_and_start_where_episodes_do() {
        let mut rng = hotlab_shared::rng::HostRng::new(3);
        for (steps, envs) in [(1, 1), (5, 3), (16, 7), (33, 2)] {
            let starts: Vec<bool> = (0..steps * envs).map(|_| rng.next_f64() < 0.2).collect();
            let runs = Runs::of(steps, envs, &starts);
            let mut seen = runs.index.clone();
            seen.sort();
            assert_eq!(seen, (0..(steps * envs) as i64).collect::<Vec<_>>());
            assert_eq!(runs.batch_sizes.iter().sum::<i64>(), (steps * envs) as i64);
            assert!(runs.batch_sizes.windows(2).all(|w| w[0] >= w[1]), "longest first");
            let cuts = (0..steps * envs).filter(|&r| r >= envs && starts[r]).count();
            assert_eq!(runs.first.len(), envs + cuts, "one run per env and per start inside the segment");
        }
    }
}

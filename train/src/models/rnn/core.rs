//! The recurrent core: an LSTM or a GRU cell over one flat parameter vector, in PyTorch's
//! gate layout (`nn.LSTM`: i, f, g, o; `nn.GRU`: r, z, n), so its weights are
//! `nn.LSTM`'s/`nn.GRU`'s one layer's, copied as they are.
//!
//! While acting, [`Core::step`]: one fused cell call per env step for every env. While
//! learning, one of two forms of the same function over a segment of `T` steps
//! (`--rnn-update`, catalogue row 12): [`Core::sequence`] cuts the segment where any env's
//! episode starts and runs each stretch in one call of libtorch's whole-sequence RNN (on
//! the CPU it projects a stretch's inputs in one product and runs oneDNN's or its own
//! fused loop), the state zeroed for the envs that start there; [`Core::stepped`] calls
//! the cell once per step, as CleanRL's `ppo_atari_lstm.py` does. Both give what
//! [`Core::step`] gave the rollout.

use crate::models::layers::{Builder, Init};
use crate::params::FlatParams;
use hotlab_core::choices::Rnn;
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
    /// step `t` where `starts[t·M + m]`. Gives `[T, M, width]` (as [`Core::step`] called
    /// `T` times would) and the calls it made: one per stretch between starts.
    pub fn sequence(&self, p: &FlatParams, x: &Tensor, state: &State, starts: &[bool]) -> (Tensor, usize) {
        let (steps, envs) = segment(x, starts);
        let cuts: Vec<usize> =
            (1..steps).filter(|&t| starts[t * envs..(t + 1) * envs].contains(&true)).chain([steps]).collect();
        let [w_ih, w_hh, b_ih, b_hh] = self.weights(p);
        let params = [w_ih, w_hh, b_ih, b_hh];
        let mut now: State = state.iter().map(Tensor::shallow_clone).collect();
        let (mut outs, mut from) = (Vec::with_capacity(cuts.len()), 0);
        for to in cuts {
            if let Some(keep) = keep_of(&starts[from * envs..(from + 1) * envs], x.device()) {
                now = now.iter().map(|s| s * &keep).collect();
            }
            let stretch = x.narrow(0, from as i64, (to - from) as i64);
            let hx: Vec<Tensor> = now.iter().map(|s| s.unsqueeze(0)).collect();
            let out = match self.cell {
                Rnn::Lstm => {
                    let (out, h, c) = stretch.lstm(&[&hx[0], &hx[1]], &params, true, 1, 0.0, true, false, false);
                    now = vec![h.squeeze_dim(0), c.squeeze_dim(0)];
                    out
                }
                _ => {
                    let (out, h) = stretch.gru(&hx[0], &params, true, 1, 0.0, true, false, false);
                    now = vec![h.squeeze_dim(0)];
                    out
                }
            };
            outs.push(out);
            from = to;
        }
        let calls = outs.len();
        (Tensor::cat(&outs, 0), calls)
    }

    /// [`Core::sequence`]'s outputs by the cell called once per step (`T` calls).
    pub fn stepped(&self, p: &FlatParams, x: &Tensor, state: &State, starts: &[bool]) -> (Tensor, usize) {
        let (steps, envs) = segment(x, starts);
        let mut now: State = state.iter().map(Tensor::shallow_clone).collect();
        let mut outs = Vec::with_capacity(steps);
        for t in 0..steps {
            let keep = keep_of(&starts[t * envs..(t + 1) * envs], x.device());
            let (h, next) = self.step(p, &x.get(t as i64), &now, keep.as_ref());
            outs.push(h);
            now = next;
        }
        (Tensor::stack(&outs, 0), steps)
    }
}

/// A segment's steps and envs, checked against its start flags.
fn segment(x: &Tensor, starts: &[bool]) -> (usize, usize) {
    let size = x.size();
    let (steps, envs) = (size[0] as usize, size[1] as usize);
    assert_eq!(starts.len(), steps * envs, "one start flag per step and env");
    (steps, envs)
}

/// `[rows, 1]` on `device`: 0 where a row starts an episode, 1 elsewhere; None when none does.
pub fn keep_of(starts: &[bool], device: Device) -> Option<Tensor> {
    starts.contains(&true).then(|| {
        let keep: Vec<f32> = starts.iter().map(|&s| if s { 0.0 } else { 1.0 }).collect();
        Tensor::from_slice(&keep).view([keep.len() as i64, 1]).to_device(device)
    })
}

//! The host's Adam, written out so that its state is ours: a seed's moments can be dropped
//! with the seed (`--slots dynamic`: the optimizer rebuilt without it) or zeroed in place
//! (`--slots sleeper`: the pool's tensors never change), and a masked seed is never
//! stepped. libtorch's optimizer keeps its state out of reach, so neither could be done
//! alike with it.

use tch::Tensor;

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPS: f64 = 1e-8;

/// One parameter tensor and its moments.
struct Entry {
    param: Tensor,
    m: Tensor,
    v: Tensor,
    steps: i32,
    /// Its learning-rate group: 0 the host's own, `slot + 1` a slot's seeds.
    group: usize,
    /// Who owns it: `None` the host, `Some((slot, blueprint))` a seed.
    owner: Option<(usize, usize)>,
    /// Stepped when it has a gradient (a sleeper seed's is masked while it sleeps).
    live: bool,
}

pub struct HostAdam {
    entries: Vec<Entry>,
    /// Learning rate per group.
    lr: Vec<f64>,
}

impl HostAdam {
    /// An optimizer for `groups` learning-rate groups, each at `lr` until set.
    pub fn new(groups: usize, lr: f64) -> Self {
        Self { entries: Vec::new(), lr: vec![lr; groups] }
    }

    /// Takes `params` in with fresh moments (zeros, allocated now).
    pub fn add(&mut self, params: &[Tensor], group: usize, owner: Option<(usize, usize)>, live: bool) {
        for p in params {
            let (m, v) = (p.zeros_like(), p.zeros_like());
            self.entries.push(Entry { param: p.shallow_clone(), m, v, steps: 0, group, owner, live });
        }
    }

    /// Drops `owner`'s parameters and their moments (the rest keep theirs).
    pub fn remove(&mut self, owner: (usize, usize)) {
        self.entries.retain(|e| e.owner != Some(owner));
    }

    /// Zeroes `owner`'s moments and step counts in place and marks it live or masked.
    pub fn reset(&mut self, owner: (usize, usize), live: bool) {
        for e in self.entries.iter_mut().filter(|e| e.owner == Some(owner)) {
            let _ = (e.m.zero_(), e.v.zero_());
            (e.steps, e.live) = (0, live);
        }
    }

    /// Marks `owner` live (stepped) or masked (never stepped).
    pub fn set_live(&mut self, owner: (usize, usize), live: bool) {
        self.entries.iter_mut().filter(|e| e.owner == Some(owner)).for_each(|e| e.live = live);
    }

    pub fn set_lr(&mut self, group: usize, lr: f64) {
        self.lr[group] = lr;
    }

    /// Moment tensors held (two per parameter tensor).
    pub fn state_tensors(&self) -> usize {
        2 * self.entries.len()
    }

    pub fn zero_grad(&mut self) {
        for e in &mut self.entries {
            let mut g = e.param.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }

    /// One Adam step of every live parameter that has a gradient.
    pub fn step(&mut self) {
        tch::no_grad(|| {
            for e in self.entries.iter_mut().filter(|e| e.live) {
                let g = e.param.grad();
                if !g.defined() {
                    continue;
                }
                e.steps += 1;
                let _ = e.m.g_mul_scalar_(BETA1).g_add_(&(&g * (1.0 - BETA1)));
                let _ = e.v.g_mul_scalar_(BETA2).g_add_(&(g.square() * (1.0 - BETA2)));
                let (c1, c2) = (1.0 - BETA1.powi(e.steps), 1.0 - BETA2.powi(e.steps));
                let denom = (&e.v / c2).sqrt() + EPS;
                let _ = e.param.g_sub_(&(&e.m / denom * (self.lr[e.group] / c1)));
            }
        })
    }
}

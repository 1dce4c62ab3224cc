//! The rollout buffer: one update's transitions, `[T, N, …]`, time first.
//!
//! Steps are recorded on the host as they happen (the env and the fused forward run
//! there); [`Rollout::to_batch`] moves the whole rollout to the trainer's device in one
//! copy per field, flattened to `[T·N, …]`, so the update only touches device tensors.
//! An eager forward keeps its log-probs and values on the device instead (`device`).

use crate::exec::transfer::{Eager, Mover};
use hotlab_core::choices::RolloutCopy;
use hotlab_core::counters::Counters;
use tch::{Device, Kind, Tensor};

pub struct Rollout {
    pub steps: usize,
    pub envs: usize,
    pub obs_dim: usize,
    pub heads: usize,
    /// Real-valued action components per env (a Gaussian head's), 0 for none.
    pub continuous: usize,
    pub obs: Vec<f32>,
    /// An image's bytes, `[T, N, bytes]`, where the policy reads them as bytes (a CNN's):
    /// empty when it reads features (`obs`).
    pub bytes: Vec<u8>,
    /// Bytes per env of `bytes` (0: none kept).
    pub bytes_width: usize,
    /// Index fields (the proof env's state, successors and mask), `[T, N, width]` each;
    /// empty for an f32 env.
    pub index: Vec<IndexBuf>,
    pub actions: Vec<i64>,
    /// `[T, N, continuous]`: the real-valued actions as sampled (an env with bounds clips
    /// its own copy; the loss sees these).
    pub real: Vec<f32>,
    pub log_probs: Vec<f32>,
    pub values: Vec<f32>,
    pub rewards: Vec<f32>,
    pub terminated: Vec<bool>,
    pub truncated: Vec<bool>,
    /// Value of the final observation at truncated steps (for GAE's bootstrap).
    pub final_values: Vec<f32>,
    /// `[T, N]` log-probs and values on the device (eager forward only).
    pub device: Option<(Tensor, Tensor)>,
    /// A recurrent actor's memory of the rollout ([`Batch::memory`]), left by its `finish`.
    pub memory: Option<Memory>,
    /// Every leaf of a structured observation kept in its own form ([`Rollout::with_leaves`]).
    pub leaves: bool,
}

/// A rollout on the device, flattened, with its advantages and returns.
pub struct Batch {
    /// The first observation field (f32 features, an image's bytes, or the proof env's
    /// state indices).
    pub obs: Tensor,
    /// The other observation fields (the proof env's successors and mask).
    pub extra: Vec<Tensor>,
    pub actions: Tensor,
    /// `[B, continuous]` f32, the Gaussian head's actions, where the policy has one.
    pub real_actions: Option<Tensor>,
    pub log_probs: Tensor,
    pub values: Tensor,
    pub advantages: Tensor,
    pub returns: Tensor,
    /// A recurrent policy's: where episodes began and each env's state at the rollout's
    /// start (its update re-runs each env's segment from them).
    pub memory: Option<Memory>,
}

/// What a recurrent policy's update needs of its rollout besides the rows: the rows are
/// whole envs' segments, re-run from each env's state at the rollout's start, the state
/// reset where an episode starts.
pub struct Memory {
    /// `[T·N]`, row `t·N + n`: step `t`'s observation of env `n` starts an episode.
    pub starts: Vec<bool>,
    /// Each env's state before the rollout's first step (before the reset a start asks
    /// for), `[N, width]` each: `h`, and an LSTM's `c`.
    pub state: Vec<Tensor>,
}

impl Batch {
    /// The rows in `index` (a permutation slice), for one minibatch.
    pub fn select(&self, index: &Tensor) -> Batch {
        let pick = |t: &Tensor| t.index_select(0, index);
        Batch {
            obs: pick(&self.obs),
            extra: self.extra.iter().map(pick).collect(),
            actions: pick(&self.actions),
            real_actions: self.real_actions.as_ref().map(pick),
            log_probs: pick(&self.log_probs),
            values: pick(&self.values),
            advantages: pick(&self.advantages),
            returns: pick(&self.returns),
            memory: None,
        }
    }

    /// [`Batch::select`] for a batch in host memory: the rows in `order` copied into
    /// `out` (same shapes) by plain row copies, with no index tensor and no op dispatch.
    /// Returns false (and copies nothing) when a field is not a contiguous CPU tensor.
    pub fn select_host(&self, order: &[i64], out: &Batch) -> bool {
        let mut pairs = vec![
            (&self.obs, &out.obs),
            (&self.actions, &out.actions),
            (&self.log_probs, &out.log_probs),
            (&self.values, &out.values),
            (&self.advantages, &out.advantages),
            (&self.returns, &out.returns),
        ];
        pairs.extend(self.extra.iter().zip(&out.extra));
        pairs.extend(self.real_actions.iter().zip(&out.real_actions));
        let fits = |t: &Tensor| {
            t.device() == Device::Cpu && t.is_contiguous() && t.size().first() == Some(&(order.len() as i64))
        };
        if !pairs.iter().all(|(a, b)| fits(a) && fits(b) && a.size() == b.size() && a.kind() == b.kind()) {
            return false;
        }
        for (src, dst) in pairs {
            let row = src.numel() / order.len().max(1) * src.kind().elt_size_in_bytes();
            let (from, to) = (src.data_ptr() as *const u8, dst.data_ptr() as *mut u8);
            for (i, &r) in order.iter().enumerate() {
                assert!((r as usize) < order.len(), "select_host: row {r} out of range");
                // SAFETY: both tensors are contiguous with `order.len()` rows of `row` bytes,
                // `r` is in range, and `out` is a different set of tensors than `self`.
                unsafe { std::ptr::copy_nonoverlapping(from.add(r as usize * row), to.add(i * row), row) };
            }
        }
        true
    }

    /// New handles onto the same tensors.
    /// Copies `src`'s rows into this batch's own tensors (same shapes), keeping their
    /// addresses: the static input of a captured update.
    pub fn copy_from(&mut self, src: &Batch) {
        let pairs = [
            (&mut self.obs, &src.obs),
            (&mut self.actions, &src.actions),
            (&mut self.log_probs, &src.log_probs),
            (&mut self.values, &src.values),
            (&mut self.advantages, &src.advantages),
            (&mut self.returns, &src.returns),
        ];
        for (dst, src) in pairs {
            dst.copy_(src);
        }
        for (dst, src) in self.extra.iter_mut().zip(&src.extra) {
            dst.copy_(src);
        }
        for (dst, src) in self.real_actions.iter_mut().zip(&src.real_actions) {
            dst.copy_(src);
        }
    }

    pub fn shallow_clone(&self) -> Batch {
        let memory = self
            .memory
            .as_ref()
            .map(|m| Memory { starts: m.starts.clone(), state: m.state.iter().map(Tensor::shallow_clone).collect() });
        Batch { memory, ..self.rows(0, self.obs.size()[0]) }
    }

    /// Fresh tensors of this batch's shapes and kinds.
    pub fn empty_like(&self) -> Batch {
        Batch {
            obs: self.obs.empty_like(),
            extra: self.extra.iter().map(Tensor::empty_like).collect(),
            actions: self.actions.empty_like(),
            real_actions: self.real_actions.as_ref().map(Tensor::empty_like),
            log_probs: self.log_probs.empty_like(),
            values: self.values.empty_like(),
            advantages: self.advantages.empty_like(),
            returns: self.returns.empty_like(),
            memory: None,
        }
    }

    /// Rows `start .. start + len` (a view, no copy).
    pub fn rows(&self, start: i64, len: i64) -> Batch {
        let cut = |t: &Tensor| t.narrow(0, start, len);
        Batch {
            obs: cut(&self.obs),
            extra: self.extra.iter().map(cut).collect(),
            actions: cut(&self.actions),
            real_actions: self.real_actions.as_ref().map(cut),
            log_probs: cut(&self.log_probs),
            values: cut(&self.values),
            advantages: cut(&self.advantages),
            returns: cut(&self.returns),
            memory: None,
        }
    }
}

impl Rollout {
    /// `obs_dim`: the features per env the policy reads (0 for a policy that reads an
    /// image's bytes, `bytes_width` per env, or indices only); `index_widths`: per index
    /// field, its width per env (none for an f32 env); `(heads, continuous)`: the
    /// categorical heads and the real-valued components per env.
    pub fn new(
        steps: usize,
        envs: usize,
        (obs_dim, bytes_width): (usize, usize),
        index_widths: &[usize],
        (heads, continuous): (usize, usize),
    ) -> Self {
        let n = steps * envs;
        Self {
            steps,
            envs,
            obs_dim,
            heads,
            continuous,
            obs: vec![0.0; n * obs_dim],
            bytes: vec![0; n * bytes_width],
            bytes_width,
            index: index_widths.iter().map(|&w| IndexBuf::new(n, w)).collect(),
            actions: vec![0; n * heads],
            real: vec![0.0; n * continuous],
            log_probs: vec![0.0; n],
            values: vec![0.0; n],
            rewards: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            final_values: vec![0.0; n],
            device: None,
            memory: None,
            leaves: false,
        }
    }

    /// Keeps every leaf of a structured observation as [`crate::models::combined`] reads
    /// it: the float leaves' features side by side in `obs` (`obs_dim` their total), the
    /// image leaves' bytes side by side in `bytes` (`bytes_width` theirs), each index leaf
    /// in its own buffer. Its batch is `obs` (the features, `[B, 0]` where there are none),
    /// then `extra`: the index leaves in order, then the bytes where there are any.
    pub fn with_leaves(self) -> Self {
        Self { leaves: true, ..self }
    }

    /// Records step `t`'s log-probs and values on the device that computed them, in
    /// `[T, N]` buffers made there on first use: an eager actor's outputs stay on its
    /// device until the update ([`crate::ppo::device_outputs`]).
    pub fn record_on_device(&mut self, t: usize, log_probs: &Tensor, values: &Tensor) {
        let (shape, device) = ([self.steps as i64, self.envs as i64], log_probs.device());
        let (lp, v) = self.device.get_or_insert_with(|| {
            (Tensor::zeros(shape, (Kind::Float, device)), Tensor::zeros(shape, (Kind::Float, device)))
        });
        lp.get(t as i64).copy_(log_probs);
        v.get(t as i64).copy_(values);
    }

    /// Records step `t`'s observations (the features field or the index fields).
    pub fn store_obs(&mut self, t: usize, obs: &hotlab_env::Observations) {
        use hotlab_env::FieldData;
        if self.leaves {
            return self.store_leaves(t, obs);
        }
        let n = self.envs;
        let mut index = self.index.iter_mut();
        for field in &obs.fields {
            match field {
                FieldData::I64(v) => {
                    let buf = index.next().expect("one buffer per index field");
                    let w = buf.width;
                    buf.as_mut_slice()[t * n * w..(t + 1) * n * w].copy_from_slice(v);
                }
                // A CNN reads the bytes themselves, converted on its device.
                FieldData::U8(v) | FieldData::Bool(v) if self.bytes_width > 0 => {
                    let w = self.bytes_width;
                    self.bytes[t * n * w..(t + 1) * n * w].copy_from_slice(v);
                }
                // An MLP reads features: pixels and flags become them here, once per step
                // for the whole batch.
                features => {
                    features.features_into(&mut self.obs[t * n * self.obs_dim..(t + 1) * n * self.obs_dim]);
                }
            }
        }
    }

    /// Step `t`'s leaves ([`Rollout::with_leaves`]): each float leaf's and each image
    /// leaf's rows at its place in the step's rows of features or bytes.
    fn store_leaves(&mut self, t: usize, obs: &hotlab_env::Observations) {
        use hotlab_env::FieldData;
        let (n, d, w) = (self.envs, self.obs_dim, self.bytes_width);
        let (mut features, mut bytes) = (0, 0);
        let mut index = self.index.iter_mut();
        for field in &obs.fields {
            match field {
                FieldData::I64(v) => {
                    let buf = index.next().expect("one buffer per index leaf");
                    let k = buf.width;
                    buf.as_mut_slice()[t * n * k..(t + 1) * n * k].copy_from_slice(v);
                }
                FieldData::U8(v) | FieldData::Bool(v) => {
                    bytes += place(&mut self.bytes[t * n * w..(t + 1) * n * w], w, bytes, v, n);
                }
                FieldData::F32(v) => {
                    features += place(&mut self.obs[t * n * d..(t + 1) * n * d], d, features, v, n);
                }
            }
        }
    }

    /// Step `t`'s index fields: `(rows, width)` each.
    pub fn index_step(&self, t: usize) -> Vec<(&[i64], usize)> {
        let n = self.envs;
        self.index.iter().map(|b| (&b.as_slice()[t * n * b.width..(t + 1) * n * b.width], b.width)).collect()
    }

    /// Step `t`'s index fields (rows only) and its mutable slot, at once.
    pub fn index_and_slot(&mut self, t: usize) -> (Vec<&[i64]>, StepSlot<'_>) {
        let (n, d, h, k) = (self.envs, self.obs_dim, self.heads, self.continuous);
        let fields = self.index.iter().map(|b| &b.as_slice()[t * n * b.width..(t + 1) * n * b.width]).collect();
        let slot = StepSlot {
            obs: &mut self.obs[t * n * d..(t + 1) * n * d],
            actions: &mut self.actions[t * n * h..(t + 1) * n * h],
            real: &mut self.real[t * n * k..(t + 1) * n * k],
            log_probs: &mut self.log_probs[t * n..(t + 1) * n],
            values: &mut self.values[t * n..(t + 1) * n],
        };
        (fields, slot)
    }

    /// Mutable views of step `t`'s rows.
    pub fn step_mut(&mut self, t: usize) -> StepSlot<'_> {
        self.index_and_slot(t).1
    }

    /// The rollout on the device, flattened, with its advantages and returns: one copy
    /// per field, or per step and field (`copy`); log-probs and values are already there
    /// when `on_device` holds them.
    pub fn to_batch(
        &self,
        advantages: &[f32],
        returns: &[f32],
        on_device: Option<(Tensor, Tensor)>,
        (mover, copy): (&Mover, RolloutCopy),
        c: &mut Counters,
    ) -> Batch {
        let b = (self.steps * self.envs) as i64;
        let t = self.steps;
        let (log_probs, values) = match on_device {
            Some(lv) => lv,
            None => (
                mover.upload_rollout(&self.log_probs, &[b], t, copy, c),
                mover.upload_rollout(&self.values, &[b], t, copy, c),
            ),
        };
        let mut fields: Vec<Tensor> =
            self.index.iter().map(|buf| mover.upload_i64_tensor(&buf.tensor.view([b, buf.width as i64]), c)).collect();
        if self.leaves {
            // Each leaf in its own form: the image leaves' bytes move as bytes.
            if self.bytes_width > 0 {
                fields.push(mover.upload_rollout(&self.bytes, &[b, self.bytes_width as i64], t, copy, c));
            }
        }
        // Features first (a structured observation's always, `[B, 0]` where it has none); else an image's bytes (to the device as bytes); else an env of
        // indices only, its first field.
        let obs = if self.leaves && self.obs_dim == 0 {
            Tensor::zeros([b, 0], (Kind::Float, mover.device))
        } else if self.leaves || self.obs_dim > 0 || (fields.is_empty() && self.bytes_width == 0) {
            mover.upload_rollout(&self.obs, &[b, self.obs_dim as i64], t, copy, c)
        } else if self.bytes_width > 0 {
            mover.upload_frames_rollout(&self.bytes, &[b, self.bytes_width as i64], t, copy, c)
        } else {
            fields.remove(0)
        };
        Batch {
            obs,
            extra: fields,
            actions: mover.upload_rollout(&self.actions, &[b, self.heads as i64], t, copy, c),
            real_actions: (self.continuous > 0)
                .then(|| mover.upload_rollout(&self.real, &[b, self.continuous as i64], t, copy, c)),
            log_probs,
            values,
            advantages: mover.upload_rollout(advantages, &[b], t, copy, c),
            returns: mover.upload_rollout(returns, &[b], t, copy, c),
            memory: None,
        }
    }
}

/// `src`'s `n` rows (of its own width) written at column `at` of `dst`'s rows of `width`;
/// the columns they took.
fn place<T: Copy>(dst: &mut [T], width: usize, at: usize, src: &[T], n: usize) -> usize {
    let w = src.len() / n.max(1);
    if w > 0 {
        for (e, row) in src.chunks_exact(w).enumerate() {
            dst[e * width + at..e * width + at + w].copy_from_slice(row);
        }
    }
    w
}

/// An index field's rollout buffer, `[T·N·width]`: a libtorch CPU tensor, so that an
/// update on the CPU reads it in place (the proof env's successors are 4.8 KB per step
/// and env: copying them per update cost more than the update's forward).
pub struct IndexBuf {
    tensor: Tensor,
    pub width: usize,
}

impl IndexBuf {
    fn new(rows: usize, width: usize) -> Self {
        Self { tensor: Tensor::zeros([(rows * width) as i64], (Kind::Int64, Device::Cpu)), width }
    }

    pub fn as_slice(&self) -> &[i64] {
        // SAFETY: the tensor is written only through `as_mut_slice`, which borrows `self`
        // mutably; batches that share it are read by the update, never while a rollout writes.
        unsafe { crate::kernels::host_i64(&self.tensor) }
    }

    fn as_mut_slice(&mut self) -> &mut [i64] {
        // SAFETY: as above; `&mut self` rules out other slices of this buffer.
        unsafe { crate::kernels::host_i64_mut(&self.tensor) }
    }
}

/// Step `t` of a rollout, filled by the policy.
pub struct StepSlot<'a> {
    pub obs: &'a mut [f32],
    pub actions: &'a mut [i64],
    /// `[N, continuous]`
    pub real: &'a mut [f32],
    pub log_probs: &'a mut [f32],
    pub values: &'a mut [f32],
}

impl StepSlot<'_> {
    /// A policy's sampled actions read back from its device into this step: the discrete
    /// heads' `[N, H]` where it has heads, the Box action's `[N, continuous]` where it has one.
    pub fn read_sampled(&mut self, io: &Eager, (actions, real): (&Tensor, Option<&Tensor>), c: &mut Counters) {
        if !self.actions.is_empty() {
            io.read_actions(actions, self.actions, c);
        }
        if let Some(real) = real {
            io.read_actions(real, self.real, c);
        }
    }
}

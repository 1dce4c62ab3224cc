//! The rollout buffer: one update's transitions, `[T, N, …]`, time first.
//!
//! Steps are recorded on the host as they happen (the env and the fused forward run
//! there); [`Rollout::to_batch`] moves the whole rollout to the trainer's device in one
//! copy per field, flattened to `[T·N, …]`, so the update only touches device tensors.
//! An eager forward keeps its log-probs and values on the device instead (`device`), and
//! with `--rollout-copy kept` the inputs it moved there and the actions it sampled too
//! ([`Rollout::record_on_device`]), held step by step as the forward made them and joined
//! once by `to_batch`: each observation then crosses to the device once (catalogue row 11).

use crate::exec::transfer::{Eager, Mover};
use hotlab_core::choices::{Frames, RolloutCopy};
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
    /// Whether an eager forward's inputs and actions are kept on its device (`--rollout-copy
    /// kept`, [`Rollout::keeping`]).
    keep: bool,
    /// What it kept, step by step (`[T]`, filled as the steps are recorded).
    kept: Vec<Option<KeptStep>>,
}

/// What an eager forward has on its device after a step ([`Rollout::record_on_device`]).
pub struct OnDevice<'a> {
    /// The inputs it moved there, in the batch's order: the observation field the batch
    /// reads first ([`Batch::obs`]), then the others ([`Batch::extra`]).
    pub inputs: &'a [&'a Tensor],
    /// `[N, H]` i64, the sampled categorical actions (`[N, 0]` for none).
    pub actions: &'a Tensor,
    /// `[N, continuous]` f32, a Gaussian head's, where the policy has one.
    pub real: Option<&'a Tensor>,
    /// `[N]` each.
    pub log_probs: &'a Tensor,
    pub values: &'a Tensor,
}

/// One step's inputs and sampled actions, the tensors the forward made on its device
/// (`--rollout-copy kept`): held, not copied, until the update joins the steps.
struct KeptStep {
    /// None for an index field on a CPU device: the update reads its host buffer in place,
    /// so keeping it would only add a copy.
    inputs: Vec<Option<Tensor>>,
    /// `[N, H]`
    actions: Tensor,
    real: Option<Tensor>,
}

/// Where a batch's observation field comes from when it is not kept.
#[derive(Clone, Copy)]
enum Source {
    /// The f32 features (`obs`).
    Features,
    /// A structured observation with no float leaf: `[B, 0]`.
    NoFeatures,
    /// An image's bytes that the policy reads as its observation (`--frames` applies).
    Frames,
    /// A structured observation's image leaves, side by side.
    LeafBytes,
    /// Index field `k`.
    Index(usize),
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
            keep: false,
            kept: Vec::new(),
        }
    }

    /// Keeps an eager forward's inputs and actions on its device where `keep`
    /// (`--rollout-copy kept`): the update then copies none of them from the host.
    pub fn keeping(self, keep: bool) -> Self {
        Self { keep, ..self }
    }

    /// Keeps every leaf of a structured observation as [`crate::models::combined`] reads
    /// it: the float leaves' features side by side in `obs` (`obs_dim` their total), the
    /// image leaves' bytes side by side in `bytes` (`bytes_width` theirs), each index leaf
    /// in its own buffer. Its batch is `obs` (the features, `[B, 0]` where there are none),
    /// then `extra`: the index leaves in order, then the bytes where there are any.
    pub fn with_leaves(self) -> Self {
        Self { leaves: true, ..self }
    }

    /// Records step `t` on the device that computed it, in `[T, N, …]` buffers made there
    /// on first use: an eager actor's log-probs and values stay on its device until the
    /// update ([`crate::ppo::device_outputs`]), and where the rollout is [`keeping`](Self::keeping),
    /// the inputs it moved and the actions it sampled too.
    pub fn record_on_device(&mut self, t: usize, step: OnDevice<'_>) {
        let (shape, device) = ([self.steps as i64, self.envs as i64], step.log_probs.device());
        let (lp, v) = self.device.get_or_insert_with(|| {
            (Tensor::zeros(shape, (Kind::Float, device)), Tensor::zeros(shape, (Kind::Float, device)))
        });
        lp.get(t as i64).copy_(step.log_probs);
        v.get(t as i64).copy_(step.values);
        if !self.keep {
            return;
        }
        let held = |x: &Tensor| (x.device() != Device::Cpu || x.kind() != Kind::Int64).then(|| x.shallow_clone());
        self.kept.resize_with(self.steps, || None);
        self.kept[t] = Some(KeptStep {
            inputs: step.inputs.iter().map(|x| held(x)).collect(),
            actions: step.actions.shallow_clone(),
            real: step.real.map(Tensor::shallow_clone),
        });
    }

    /// What the forward kept, joined over the rollout's steps: per input field (in the
    /// batch's order) its `[T·N, …]` rows where every step kept it, the actions, the real
    /// actions. None unless every step was kept. Takes them: after the join the steps'
    /// tensors are freed, so the device holds the rollout once.
    fn take_kept(&mut self) -> Option<(Vec<Option<Tensor>>, Tensor, Option<Tensor>)> {
        let steps: Vec<KeptStep> = std::mem::take(&mut self.kept).into_iter().collect::<Option<_>>()?;
        if steps.len() != self.steps {
            return None;
        }
        let join = |parts: Option<Vec<&Tensor>>| parts.map(|p| Tensor::cat(&p, 0));
        let fields = steps.first().map_or(0, |s| s.inputs.len());
        let inputs = (0..fields).map(|i| join(steps.iter().map(|s| s.inputs[i].as_ref()).collect())).collect();
        let actions = Tensor::cat(&steps.iter().map(|s| &s.actions).collect::<Vec<_>>(), 0);
        let real = join(steps.iter().map(|s| s.real.as_ref()).collect());
        Some((inputs, actions, real))
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
    /// when `on_device` holds them, and what the forward kept (`kept`) is not copied.
    pub fn to_batch(
        &mut self,
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
        let kept = self.take_kept().filter(|_| copy == RolloutCopy::Kept);
        let (mut kept_inputs, kept_actions, kept_real) = match kept {
            Some((inputs, actions, real)) => (inputs, Some(actions), real),
            None => (Vec::new(), None, None),
        };
        kept_inputs.resize_with(self.sources().len(), || None);
        let mut inputs = (self.sources().into_iter().zip(kept_inputs))
            .map(|(source, kept)| kept.unwrap_or_else(|| self.upload(source, (mover, copy), c)));
        let obs = inputs.next().expect("a batch reads one observation field at least");
        let extra = inputs.collect();
        Batch {
            obs,
            extra,
            actions: kept_actions
                .unwrap_or_else(|| mover.upload_rollout(&self.actions, &[b, self.heads as i64], t, copy, c)),
            real_actions: (self.continuous > 0).then(|| {
                kept_real.unwrap_or_else(|| mover.upload_rollout(&self.real, &[b, self.continuous as i64], t, copy, c))
            }),
            log_probs,
            values,
            advantages: mover.upload_rollout(advantages, &[b], t, copy, c),
            returns: mover.upload_rollout(returns, &[b], t, copy, c),
            memory: None,
        }
    }

    /// Bytes the update's batch takes on the device: each transition's observation fields
    /// (an image's as `--frames` moves it), actions, log-prob, value, advantage and return,
    /// twice (the batch, kept or copied there, and an epoch's shuffled copy).
    pub fn device_bytes(&self, frames: Frames) -> u64 {
        let image = if frames == Frames::Float && !self.leaves { 4 } else { 1 };
        let index: usize = self.index.iter().map(|b| 8 * b.width).sum();
        let row = 4 * self.obs_dim + image * self.bytes_width + index + 8 * self.heads + 4 * self.continuous + 16;
        2 * (row * self.steps * self.envs) as u64
    }

    /// Refused, before the run, when the update's batch ([`Rollout::device_bytes`]) would
    /// not fit in the `free` bytes of the run's device.
    pub fn check_room(&self, spec: &hotlab_spec::RunSpec, free: u64) -> Result<(), hotlab_spec::SpecError> {
        let need = self.device_bytes(spec.exec.frames);
        if need <= free {
            return Ok(());
        }
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let transitions = (self.steps * self.envs) as u64;
        Err(hotlab_spec::SpecError::new(
            "envs",
            format!(
                "the update's batch needs {need} bytes ({:.2} GiB) on {}: envs × steps = {} × {} transitions of {} bytes, held twice (the batch and an epoch's shuffled copy); the device has {free} bytes ({:.2} GiB) free: lower --envs or --steps",
                gib(need),
                spec.device,
                self.envs,
                self.steps,
                need / 2 / transitions.max(1),
                gib(free)
            ),
        ))
    }

    /// Where the batch's observation fields come from, in its order: [`Batch::obs`] (the
    /// features, a structured observation's always, `[B, 0]` where it has none; else an
    /// image's bytes; else, for an env of indices only, its first field), then
    /// [`Batch::extra`] (the index fields, then a structured observation's image bytes).
    fn sources(&self) -> Vec<Source> {
        let index = (0..self.index.len()).map(Source::Index);
        if self.leaves {
            let features = if self.obs_dim == 0 { Source::NoFeatures } else { Source::Features };
            let bytes = (self.bytes_width > 0).then_some(Source::LeafBytes);
            std::iter::once(features).chain(index).chain(bytes).collect()
        } else if self.obs_dim > 0 || (self.index.is_empty() && self.bytes_width == 0) {
            std::iter::once(Source::Features).chain(index).collect()
        } else if self.bytes_width > 0 {
            std::iter::once(Source::Frames).chain(index).collect()
        } else {
            index.collect()
        }
    }

    /// One observation field from the host's buffers to the device, `[T·N, width]`.
    fn upload(&self, source: Source, (mover, copy): (&Mover, RolloutCopy), c: &mut Counters) -> Tensor {
        let (b, t) = ((self.steps * self.envs) as i64, self.steps);
        let (d, w) = (self.obs_dim as i64, self.bytes_width as i64);
        match source {
            Source::Features => mover.upload_rollout(&self.obs, &[b, d], t, copy, c),
            Source::NoFeatures => Tensor::zeros([b, 0], (Kind::Float, mover.device)),
            // Each leaf in its own form: the image leaves' bytes move as bytes.
            Source::LeafBytes => mover.upload_rollout(&self.bytes, &[b, w], t, copy, c),
            Source::Frames => mover.upload_frames_rollout(&self.bytes, &[b, w], t, copy, c),
            Source::Index(k) => {
                let buf = &self.index[k];
                mover.upload_i64_tensor(&buf.tensor.view([b, buf.width as i64]), c)
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_core::choices::Transfer;
    use hotlab_env::rng::HostRng;

    /// A rollout of `steps × envs` with features `d`, image bytes `w`, index fields of
    /// `index` widths and `heads` categorical heads, filled with random values, recorded
    /// both on the host and, as an eager forward would record it, on the device.
    fn filled(shape: (usize, usize), (d, w): (usize, usize), index: &[usize], heads: usize, seed: u64) -> Rollout {
        let (steps, envs) = shape;
        let mut r = Rollout::new(steps, envs, (d, w), index, (heads, 0)).keeping(true);
        if d == 0 && w > 0 && !index.is_empty() {
            r = r.with_leaves();
        }
        let mut rng = HostRng::new(seed);
        for t in 0..steps {
            let obs: Vec<f32> = (0..envs * d).map(|_| rng.next_f64() as f32).collect();
            let bytes: Vec<u8> = (0..envs * w).map(|_| rng.next_u64() as u8).collect();
            let actions: Vec<i64> = (0..envs * heads).map(|_| (rng.next_u64() % 5) as i64).collect();
            r.obs[t * envs * d..(t + 1) * envs * d].copy_from_slice(&obs);
            r.bytes[t * envs * w..(t + 1) * envs * w].copy_from_slice(&bytes);
            r.actions[t * envs * heads..(t + 1) * envs * heads].copy_from_slice(&actions);
            for buf in &mut r.index {
                let k = buf.width;
                for v in &mut buf.as_mut_slice()[t * envs * k..(t + 1) * envs * k] {
                    *v = (rng.next_u64() % 7) as i64;
                }
            }
            let (n, d, w) = (envs as i64, d as i64, w as i64);
            let features = Tensor::from_slice(&obs).view([n, d]);
            let frames = Tensor::from_slice(&bytes).view([n, w]);
            let fields: Vec<Tensor> =
                r.index_step(t).iter().map(|(v, k)| Tensor::from_slice(v).view([n, *k as i64])).collect();
            let inputs: Vec<&Tensor> = match (r.leaves, d > 0) {
                (true, _) => std::iter::once(&features).chain(&fields).chain(std::iter::once(&frames)).collect(),
                (false, true) => std::iter::once(&features).chain(&fields).collect(),
                (false, false) => std::iter::once(&frames).chain(&fields).collect(),
            };
            let sampled = Tensor::from_slice(&actions).view([n, heads as i64]);
            let lp = Tensor::zeros([n], (Kind::Float, Device::Cpu));
            r.record_on_device(
                t,
                OnDevice { inputs: &inputs, actions: &sampled, real: None, log_probs: &lp, values: &lp },
            );
        }
        r
    }

    fn fields(b: &Batch) -> Vec<Tensor> {
        [&b.obs, &b.actions, &b.advantages, &b.returns].into_iter().chain(&b.extra).map(Tensor::shallow_clone).collect()
    }

    /// What an eager forward kept is the batch a copy from the host's buffers makes, field
    /// for field, over shapes (features, an image's bytes, a structured observation's
    /// leaves with index fields; several envs, steps and heads); the copy moves the
    /// observations and actions again, kept moves only the advantages and returns.
    #[test]
    fn a_kept_rollout_is_the_batch_a_copy_makes_and_moves_only_what_the_host_made() {
        // (steps, envs), (features, bytes), index widths, heads
        type Case = ((usize, usize), (usize, usize), &'static [usize], usize);
        let cases: [Case; 5] = [
            ((4, 3), (5, 0), &[], 1),
            ((7, 2), (1, 0), &[], 3),
            ((3, 5), (0, 36), &[], 1),
            ((5, 4), (0, 12), &[2, 3], 2),
            ((2, 6), (4, 0), &[3], 1),
        ];
        let mover = Mover::new(Transfer::Packed, Device::Cpu);
        for (seed, (shape, widths, index, heads)) in cases.into_iter().enumerate() {
            let mut r = filled(shape, widths, index, heads, seed as u64);
            let rows = shape.0 * shape.1;
            let (adv, ret) = (vec![0.5f32; rows], vec![1.5f32; rows]);
            let (mut ck, mut cw) = (Counters::default(), Counters::default());
            let kept = r.to_batch(&adv, &ret, None, (&mover, RolloutCopy::Kept), &mut ck);
            let whole = r.to_batch(&adv, &ret, None, (&mover, RolloutCopy::Whole), &mut cw);
            let at = format!("{shape:?} {widths:?} {index:?} heads {heads}");
            for (a, b) in fields(&kept).iter().zip(fields(&whole)) {
                assert_eq!((a.size(), a.kind()), (b.size(), b.kind()), "{at}");
                assert!(a.equal(&b), "{at}");
            }
            // log-probs and values move in both (no eager outputs handed in); index
            // fields are read in place on the CPU in both.
            let (d, w) = widths;
            let moved_again = rows * (4 * d + w + 8 * heads);
            assert_eq!(cw.h2d_bytes - ck.h2d_bytes, moved_again as u64, "{at}");
            assert_eq!(ck.h2d_bytes, (rows * 4 * 4) as u64, "{at}: log-probs, values, advantages, returns");
        }
    }

    /// A batch that would not fit in the device's free memory is refused before the run,
    /// naming `envs` and the bytes it needs.
    #[test]
    fn a_batch_too_big_for_the_device_is_refused_with_the_bytes_it_needs() {
        let spec = hotlab_spec::RunSpec { envs: 8, steps: 128, ..Default::default() };
        let r = Rollout::new(128, 8, (0, 28_224), &[], (1, 0));
        let need = r.device_bytes(Frames::Bytes);
        assert_eq!(need, 2 * 128 * 8 * (28_224 + 8 + 16));
        assert_eq!(r.device_bytes(Frames::Float), need + 2 * 128 * 8 * 3 * 28_224, "floats are 4 bytes a pixel");
        r.check_room(&spec, need).unwrap();
        let e = r.check_room(&spec, need - 1).unwrap_err();
        assert_eq!(e.field, "envs");
        assert!(e.message.contains(&format!("needs {need} bytes")), "{}", e.message);
        assert!(e.message.contains("lower --envs or --steps"), "{}", e.message);
    }
}

//! Moving data between the host and the trainer's device, counted (catalogue rows 2 and 4).
//!
//! - Observations to the device (`--transfer`): `per_tensor` copies each field of each env
//!   separately and stacks them there (seed 000's pattern); `packed` copies one contiguous
//!   buffer per step; `pinned` stages in page-locked memory and copies without blocking
//!   (on a CPU device there is nothing to pin: it behaves as `packed`, and the run says so).
//! - Actions back to the host (`--action-sync`): `per_item` reads every element of every
//!   head as a scalar (each one a device sync on a GPU: seed 002's `.item()` per env);
//!   `stacked` reads all heads at once.
//! - Images (`--frames`): their bytes, converted on the device by the encoder, or floats
//!   made on the host first (catalogue row 2 on pixels: four times the bytes).

use hotlab_core::choices::{ActionSync, Frames, RolloutCopy, Transfer};
use hotlab_core::counters::Counters;
use hotlab_core::run::ExecSpec;
use tch::{Device, Tensor};

/// What an eager (libtorch) actor moves each rollout step: observations to the device
/// (`--transfer`) and sampled actions back (`--action-sync`). Each model's eager actor is
/// this, acting for its network (`impl Actor<Net> for Eager`).
pub struct Eager {
    pub mover: Mover,
    pub sync: ActionSync,
}

impl Eager {
    pub fn new(exec: &ExecSpec, device: Device) -> Self {
        Eager { mover: Mover::new(exec.transfer, device), sync: exec.action_sync }
    }

    /// Sampled `actions` read back into `out`, as `--action-sync` says.
    pub fn read_actions<T: tch::kind::Element + Copy>(&self, actions: &Tensor, out: &mut [T], c: &mut Counters) {
        self.mover.read_actions(actions, out, self.sync, c);
    }
}

pub struct Mover {
    pub mode: Transfer,
    pub device: Device,
    /// How images travel (`--frames`): as bytes, or as floats made on the host, each byte
    /// times this scale (what the encoder would multiply it by).
    pub frames: Option<f64>,
    /// Page-locked staging buffers, one per observation field.
    staging: Vec<Option<Tensor>>,
}

impl Mover {
    pub fn new(mode: Transfer, device: Device) -> Self {
        Self { mode, device, frames: None, staging: Vec::new() }
    }

    /// Images as `--frames` says: `float` converts each byte to float32 times `scale` on
    /// the host before it moves (four times the bytes); `bytes` moves the bytes.
    pub fn with_frames(self, frames: Frames, scale: f64) -> Self {
        Self { frames: (frames == Frames::Float).then_some(scale), ..self }
    }

    /// `bytes` as floats made on the host where `--frames float`, else None.
    fn host_floats(&self, bytes: &[u8]) -> Option<Vec<f32>> {
        let scale = self.frames? as f32;
        Some(bytes.iter().map(|&b| f32::from(b) * scale).collect())
    }

    /// A step's images of `rows × width` bytes (field `field`) as `[rows, width]` on the
    /// device, moved the way `--transfer` says, as bytes or floats (`--frames`).
    pub fn frames_to_device(
        &mut self,
        field: usize,
        bytes: &[u8],
        rows: usize,
        width: usize,
        c: &mut Counters,
    ) -> Tensor {
        match self.host_floats(bytes) {
            Some(floats) => self.field_to_device(field, &floats, rows, width, c),
            None => self.field_to_device(field, bytes, rows, width, c),
        }
    }

    /// Images in one copy, as bytes or floats (`--frames`).
    pub fn upload_frames(&self, bytes: &[u8], shape: &[i64], c: &mut Counters) -> Tensor {
        match self.host_floats(bytes) {
            Some(floats) => self.upload(&floats, shape, c),
            None => self.upload(bytes, shape, c),
        }
    }

    /// A rollout's images, as [`Mover::upload_rollout`] moves them, as bytes or floats.
    pub fn upload_frames_rollout(
        &self,
        bytes: &[u8],
        shape: &[i64],
        steps: usize,
        copy: RolloutCopy,
        c: &mut Counters,
    ) -> Tensor {
        match self.host_floats(bytes) {
            Some(floats) => self.upload_rollout(&floats, shape, steps, copy, c),
            None => self.upload_rollout(bytes, shape, steps, copy, c),
        }
    }

    /// A note for the run's report when a mode cannot do what it says here.
    pub fn note(&self) -> Option<String> {
        (self.mode == Transfer::Pinned && self.device == Device::Cpu)
            .then(|| "transfer pinned on a CPU device: nothing to pin, behaves as packed".to_string())
    }

    /// `rows × dim` host floats (one field) as a `[rows, dim]` tensor on the device.
    pub fn obs_to_device(&mut self, obs: &[f32], rows: usize, dim: usize, c: &mut Counters) -> Tensor {
        self.field_to_device(0, obs, rows, dim, c)
    }

    /// Field number `field` of a step, `rows × dim` host values, as a `[rows, dim]`
    /// tensor on the device, moved the way `--transfer` says.
    pub fn field_to_device<T: tch::kind::Element + Copy>(
        &mut self,
        field: usize,
        data: &[T],
        rows: usize,
        dim: usize,
        c: &mut Counters,
    ) -> Tensor {
        match self.mode {
            Transfer::PerTensor => {
                let parts: Vec<Tensor> = data
                    .chunks_exact(dim)
                    .map(|row| {
                        c.h2d_copies += 1;
                        c.h2d_bytes += std::mem::size_of_val(row) as u64;
                        Tensor::from_slice(row).to_device(self.device)
                    })
                    .collect();
                Tensor::stack(&parts, 0)
            }
            Transfer::Pinned if self.device != Device::Cpu => {
                let shape = [rows as i64, dim as i64];
                if self.staging.len() <= field {
                    self.staging.resize_with(field + 1, || None);
                }
                let fresh = || Tensor::empty(shape, (T::KIND, Device::Cpu)).pin_memory(self.device);
                let staging = self.staging[field].get_or_insert_with(fresh);
                if staging.size() != shape || staging.kind() != T::KIND {
                    *staging = fresh();
                }
                // SAFETY: the staging tensor is a contiguous host buffer of rows × dim
                // elements of T that nothing else reads until the copy below is issued.
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr(), staging.data_ptr() as *mut T, data.len());
                }
                c.h2d_copies += 1;
                c.h2d_bytes += std::mem::size_of_val(data) as u64;
                staging.to_device_(self.device, T::KIND, true, true)
            }
            Transfer::Packed | Transfer::Pinned => {
                c.h2d_copies += 1;
                c.h2d_bytes += std::mem::size_of_val(data) as u64;
                Tensor::from_slice(data).view([rows as i64, dim as i64]).to_device(self.device)
            }
        }
    }

    /// One bulk host→device copy.
    pub fn upload<T: tch::kind::Element>(&self, v: &[T], shape: &[i64], c: &mut Counters) -> Tensor {
        c.h2d_copies += 1;
        c.h2d_bytes += std::mem::size_of_val(v) as u64;
        Tensor::from_slice(v).view(shape).to_device(self.device)
    }

    /// One bulk host→device copy.
    pub fn upload_f32(&self, v: &[f32], shape: &[i64], c: &mut Counters) -> Tensor {
        self.upload(v, shape, c)
    }

    /// One bulk host→device copy.
    pub fn upload_i64(&self, v: &[i64], shape: &[i64], c: &mut Counters) -> Tensor {
        self.upload(v, shape, c)
    }

    /// A rollout field, time first in `steps` equal parts, on the device as `shape`: one
    /// copy (`whole`; `kept` for a field the forward did not keep), or one per step
    /// concatenated there (`per_step`, catalogue row 11).
    pub fn upload_rollout<T: tch::kind::Element>(
        &self,
        v: &[T],
        shape: &[i64],
        steps: usize,
        copy: RolloutCopy,
        c: &mut Counters,
    ) -> Tensor {
        match copy {
            RolloutCopy::Whole | RolloutCopy::Kept => self.upload(v, shape, c),
            RolloutCopy::PerStep => {
                let per = (v.len() / steps.max(1)).max(1);
                let parts: Vec<Tensor> = v.chunks(per).map(|step| self.upload(step, &[-1], c)).collect();
                Tensor::cat(&parts, 0).view(shape)
            }
        }
    }

    /// A host tensor on the device: shared as it is on the CPU (no copy), one copy
    /// elsewhere.
    pub fn upload_i64_tensor(&self, t: &Tensor, c: &mut Counters) -> Tensor {
        if self.device == Device::Cpu {
            return t.shallow_clone();
        }
        c.h2d_copies += 1;
        c.h2d_bytes += (t.numel() * 8) as u64;
        t.to_device(self.device)
    }

    /// Sampled actions `[N, H]` into `out`, by the chosen read-back.
    pub fn read_actions<T: tch::kind::Element + Copy>(
        &self,
        actions: &Tensor,
        out: &mut [T],
        sync: ActionSync,
        c: &mut Counters,
    ) {
        match sync {
            ActionSync::PerItem => {
                let width = actions.size()[1];
                for (i, slot) in out.iter_mut().enumerate() {
                    let (e, h) = (i as i64 / width, i as i64 % width);
                    let mut one = [*slot];
                    actions.get(e).get(h).to_device(Device::Cpu).copy_data(&mut one, 1);
                    *slot = one[0];
                    c.host_syncs += 1;
                    c.d2h_copies += 1;
                    c.d2h_bytes += std::mem::size_of::<T>() as u64;
                }
            }
            ActionSync::Stacked => read_into(actions, out, c),
        }
    }
}

/// One bulk device→host read (a sync on a GPU).
pub fn read_into<T: tch::kind::Element>(t: &Tensor, out: &mut [T], c: &mut Counters) {
    let host = t.to_device(Device::Cpu).contiguous().view([-1]);
    host.copy_data(out, out.len());
    c.host_syncs += 1;
    c.d2h_copies += 1;
    c.d2h_bytes += std::mem::size_of_val(out) as u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_tensor_copies_each_row_packed_copies_once_and_both_agree() {
        let obs: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let (mut a, mut b) = (Counters::default(), Counters::default());
        let per = Mover::new(Transfer::PerTensor, Device::Cpu).obs_to_device(&obs, 3, 4, &mut a);
        let packed = Mover::new(Transfer::Packed, Device::Cpu).obs_to_device(&obs, 3, 4, &mut b);
        assert!(per.equal(&packed));
        assert_eq!((a.h2d_copies, a.h2d_bytes), (3, 48));
        assert_eq!((b.h2d_copies, b.h2d_bytes), (1, 48));
        let pinned = Mover::new(Transfer::Pinned, Device::Cpu);
        assert!(pinned.note().unwrap().contains("behaves as packed"));
    }

    #[test]
    fn a_rollout_copied_per_step_equals_one_copied_whole() {
        let v: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let m = Mover::new(Transfer::Packed, Device::Cpu);
        let (mut a, mut b) = (Counters::default(), Counters::default());
        let whole = m.upload_rollout(&v, &[12, 2], 4, RolloutCopy::Whole, &mut a);
        let per_step = m.upload_rollout(&v, &[12, 2], 4, RolloutCopy::PerStep, &mut b);
        assert!(whole.equal(&per_step));
        assert_eq!((a.h2d_copies, b.h2d_copies), (1, 4));
        assert_eq!(a.h2d_bytes, b.h2d_bytes);
    }

    #[test]
    fn per_item_reads_every_element_stacked_reads_once() {
        let actions = Tensor::from_slice(&[1i64, 0, 1, 1, 0, 0]).view([3, 2]);
        let m = Mover::new(Transfer::Packed, Device::Cpu);
        let (mut a, mut b) = (Counters::default(), Counters::default());
        let (mut x, mut y) = ([0i64; 6], [0i64; 6]);
        m.read_actions(&actions, &mut x, ActionSync::PerItem, &mut a);
        m.read_actions(&actions, &mut y, ActionSync::Stacked, &mut b);
        assert_eq!(x, [1, 0, 1, 1, 0, 0]);
        assert_eq!(x, y);
        assert_eq!(a.host_syncs, 6);
        assert_eq!(b.host_syncs, 1);
    }
}

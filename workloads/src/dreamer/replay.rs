//! The replay buffer: one ring of steps per env, sampled as sequences of `seq_len`
//! consecutive steps (which may cross an episode's start: `first` marks it and the
//! RSSM restarts there, as DreamerV3 does).
//!
//! A step is its frame, the action that led to it (0 at an episode's first), the reward
//! received on arriving, whether the episode continues after it, and whether it is an
//! episode's first. Where the steps live is `--replay` (catalogue row 11): `host` keeps
//! them in host memory and gathers each batch there, then copies it to the model's
//! device, the host waiting for each copy; `pinned` stages the batch in page-locked memory
//! and copies it without blocking (CUDA); `device` keeps them in tensors beside the model,
//! so a batch is one small copy of the rows to gather (staged the same way) and gathers there.

use super::render::PIXELS;
use hotlab_core::counters::Counters;
use hotlab_env::rng::HostRng;
use hotlab_specs::dreamer::ReplayAt;
use tch::{Device, Kind, Tensor};

/// One env's step as the collector writes it.
pub struct Step<'a> {
    pub frame: &'a [u8],
    pub prev_action: i64,
    pub reward: f32,
    pub cont: bool,
    pub first: bool,
}

/// A batch of `b` sequences of `t` steps on the model's device.
pub struct Batch {
    pub b: i64,
    pub t: i64,
    /// `[b, t, PIXELS]` bytes.
    pub obs: Tensor,
    /// `[b, t]` i64.
    pub prev_action: Tensor,
    /// `[b, t]` f32 each.
    pub reward: Tensor,
    pub cont: Tensor,
    pub first: Tensor,
}

/// Where the steps are.
enum Store {
    /// Host memory: frames `[env][slot][pixel]`, and each small field per step.
    Host { frames: Vec<u8>, prev_action: Vec<i64>, reward: Vec<f32>, cont: Vec<f32>, first: Vec<f32> },
    /// Tensors on the model's device: `[steps, PIXELS]` bytes, and `[steps, 4]` f32 (the
    /// previous action, reward, continue and first flag of each step).
    Device { frames: Tensor, small: Tensor },
}

/// The small fields' columns in [`Store::Device`]'s `small`.
const SMALL: i64 = 4;

pub struct Replay {
    at: ReplayAt,
    device: Device,
    /// Steps each env's ring holds.
    slots: usize,
    store: Store,
    /// Per env: the next slot to write, and how many are filled.
    head: Vec<usize>,
    filled: Vec<usize>,
}

/// Host tensor `t` on `device`, counted as a host→device copy when that is a GPU: from
/// page-locked staging without blocking the host (`staged`), or a plain copy from pageable
/// memory, which waits until the device has run everything queued before it.
fn copy_to(t: Tensor, device: Device, staged: bool, c: &mut Counters) -> Tensor {
    if device == Device::Cpu {
        return t;
    }
    c.h2d_copies += 1;
    c.h2d_bytes += (t.numel() * t.kind().elt_size_in_bytes()) as u64;
    match staged {
        // libtorch's pinned allocator records the copy's stream before reusing the block.
        true => t.internal_pin_memory(device).to_device_(device, t.kind(), true, false),
        false => t.to_device(device),
    }
}

impl Replay {
    /// `capacity` steps over `envs` rings, where `at` says (`pinned` keeps them on the host
    /// like `host`; only its batches' copies differ).
    pub fn new(at: ReplayAt, capacity: usize, envs: usize, device: Device) -> Self {
        let slots = (capacity / envs).max(2);
        let n = slots * envs;
        let store = match at {
            ReplayAt::Host | ReplayAt::Pinned => Store::Host {
                frames: vec![0; n * PIXELS as usize],
                prev_action: vec![0; n],
                reward: vec![0.0; n],
                cont: vec![0.0; n],
                first: vec![0.0; n],
            },
            ReplayAt::Device => Store::Device {
                frames: Tensor::zeros([n as i64, PIXELS], (Kind::Uint8, device)),
                small: Tensor::zeros([n as i64, SMALL], (Kind::Float, device)),
            },
        };
        Self { at, device, slots, store, head: vec![0; envs], filled: vec![0; envs] }
    }

    /// Steps stored, over every env.
    pub fn len(&self) -> usize {
        self.filled.iter().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every env's ring holds a sequence of `t` steps.
    pub fn can_sample(&self, t: usize) -> bool {
        self.filled.iter().all(|&f| f >= t)
    }

    /// Appends one step per env in `steps` (env `e` at row `e`). On the device: the frames,
    /// the small fields and the rows to write go there in three copies per call.
    pub fn push(&mut self, envs: &[usize], steps: &[Step<'_>], c: &mut Counters) {
        let px = PIXELS as usize;
        let mut rows = Vec::with_capacity(envs.len());
        for &e in envs {
            rows.push((e * self.slots + self.head[e]) as i64);
            self.head[e] = (self.head[e] + 1) % self.slots;
            self.filled[e] = (self.filled[e] + 1).min(self.slots);
        }
        let flag = |b: bool| f32::from(u8::from(b));
        match &mut self.store {
            Store::Host { frames, prev_action, reward, cont, first } => {
                for (&i, s) in rows.iter().zip(steps) {
                    let i = i as usize;
                    frames[i * px..(i + 1) * px].copy_from_slice(s.frame);
                    prev_action[i] = s.prev_action;
                    reward[i] = s.reward;
                    cont[i] = flag(s.cont);
                    first[i] = flag(s.first);
                }
            }
            Store::Device { frames, small } => {
                let k = steps.len() as i64;
                let bytes: Vec<u8> = steps.iter().flat_map(|s| s.frame.iter().copied()).collect();
                let values: Vec<f32> =
                    steps.iter().flat_map(|s| [s.prev_action as f32, s.reward, flag(s.cont), flag(s.first)]).collect();
                let device = self.device;
                let index = copy_to(Tensor::from_slice(&rows), device, true, c);
                let bytes = copy_to(Tensor::from_slice(&bytes), device, true, c);
                let values = copy_to(Tensor::from_slice(&values), device, true, c);
                let _ = frames.index_copy_(0, &index, &bytes.view([k, PIXELS]));
                let _ = small.index_copy_(0, &index, &values.view([k, SMALL]));
            }
        }
    }

    /// `b` sequences of `t` steps ([`Self::draw`]'s rows). From the host: five copies
    /// (frames and each small field); from the device: one (the rows to gather).
    pub fn sample(&self, b: usize, t: usize, rng: &mut HostRng, c: &mut Counters) -> Batch {
        let index = self.draw(b, t, rng);
        let (bt, shape) = (b as i64, [b as i64, t as i64]);
        let to_model = |t: Tensor, c: &mut Counters| copy_to(t, self.device, self.at != ReplayAt::Host, c);
        match &self.store {
            Store::Host { frames, prev_action, reward, cont, first } => {
                let px = PIXELS as usize;
                let mut bytes = Vec::with_capacity(index.len() * px);
                for &i in &index {
                    bytes.extend_from_slice(&frames[i as usize * px..(i as usize + 1) * px]);
                }
                let obs = to_model(Tensor::from_slice(&bytes), c).view([bt, t as i64, PIXELS]);
                let gather = |v: &Vec<f32>| index.iter().map(|&i| v[i as usize]).collect::<Vec<f32>>();
                let [reward, cont, first] =
                    [reward, cont, first].map(|v| to_model(Tensor::from_slice(&gather(v)), c).view(shape));
                let actions: Vec<i64> = index.iter().map(|&i| prev_action[i as usize]).collect();
                let prev_action = to_model(Tensor::from_slice(&actions), c).view(shape);
                Batch { b: bt, t: t as i64, obs, prev_action, reward, cont, first }
            }
            Store::Device { .. } => {
                let rows = to_model(Tensor::from_slice(&index), c);
                self.gather(&rows, bt, t as i64).expect("a device store")
            }
        }
    }

    /// The rows of `b` sequences of `t` steps, sequence by sequence, as [`Self::sample`]
    /// draws them: each from a random env, starting at a random step whose sequence lies
    /// inside what its ring holds.
    pub fn draw(&self, b: usize, t: usize, rng: &mut HostRng) -> Vec<i64> {
        let mut index = Vec::with_capacity(b * t);
        for _ in 0..b {
            let e = (rng.next_u64() % self.head.len() as u64) as usize;
            let oldest = (self.head[e] + self.slots - self.filled[e]) % self.slots;
            let start = oldest + (rng.next_u64() % (self.filled[e] - t + 1) as u64) as usize;
            index.extend((0..t).map(|k| (e * self.slots + (start + k) % self.slots) as i64));
        }
        index
    }

    /// The `b × t` batch at `rows` (`[b·t]` i64 on the model's device, from [`Self::draw`]),
    /// gathered on the device with no host work: what a captured train step replays. None
    /// when the steps are on the host.
    pub fn gather(&self, rows: &Tensor, b: i64, t: i64) -> Option<Batch> {
        let Store::Device { frames, small } = &self.store else { return None };
        let obs = frames.index_select(0, rows).view([b, t, PIXELS]);
        let small = small.index_select(0, rows).view([b, t, SMALL]);
        let column = |i: i64| small.select(2, i).contiguous();
        let prev_action = column(0).to_kind(Kind::Int64);
        Some(Batch { b, t, obs, prev_action, reward: column(1), cont: column(2), first: column(3) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame whose every pixel says which env and step it is.
    fn frame(e: usize, k: usize) -> Vec<u8> {
        vec![(e * 100 + k) as u8; PIXELS as usize]
    }

    fn filled(at: ReplayAt, capacity: usize) -> Replay {
        let mut r = Replay::new(at, capacity, 2, Device::Cpu);
        let mut c = Counters::default();
        for k in 0..30 {
            let frames = [frame(0, k), frame(1, k)];
            let steps: Vec<Step> = frames
                .iter()
                .map(|f| Step {
                    frame: f,
                    prev_action: (k % 2) as i64,
                    reward: k as f32,
                    cont: k % 3 > 0,
                    first: k % 7 == 0,
                })
                .collect();
            r.push(&[0, 1], &steps, &mut c);
        }
        r
    }

    /// Sequences are consecutive steps of one env, from what the ring still holds, with
    /// every field of the same step; host and device buffers give the same batch, field for field.
    #[test]
    fn sequences_are_consecutive_steps_of_one_env_wherever_the_frames_live() {
        let mut batches = Vec::new();
        for at in [ReplayAt::Host, ReplayAt::Device] {
            let r = filled(at, 40); // 20 slots per env: steps 10..30 remain
            assert!(r.can_sample(20) && !r.can_sample(21));
            let mut rng = HostRng::new(3);
            let batch = r.sample(8, 5, &mut rng, &mut Counters::default());
            let rewards = Vec::<f32>::try_from(batch.reward.view([-1])).unwrap();
            let pixels = Vec::<u8>::try_from(batch.obs.select(2, 0).reshape([-1])).unwrap();
            for (s, seq) in rewards.chunks(5).enumerate() {
                assert!(seq[0] >= 10.0, "a step the ring overwrote: {seq:?}");
                assert!(seq.windows(2).all(|w| w[1] == w[0] + 1.0), "not consecutive: {seq:?}");
                let env = pixels[s * 5] as usize / 100;
                for (k, &p) in pixels[s * 5..s * 5 + 5].iter().enumerate() {
                    assert_eq!(p as usize, env * 100 + seq[k] as usize);
                }
            }
            let rest = [&batch.cont, &batch.first, &batch.prev_action.to_kind(Kind::Float)]
                .map(|t| Vec::<f32>::try_from(t.reshape([-1])).unwrap());
            assert_eq!(batch.prev_action.kind(), Kind::Int64);
            batches.push((rewards, pixels, rest));
        }
        assert_eq!(batches[0], batches[1]);
    }
}

//! The replay buffer: one ring of steps per env, sampled as sequences of `seq_len`
//! consecutive steps (which may cross an episode's start: `first` marks it and the
//! RSSM restarts there, as DreamerV3 does).
//!
//! A step is its frame, the action that led to it (0 at an episode's first), the reward
//! received on arriving, whether the episode continues after it, and whether it is an
//! episode's first. Where the frames live is `--replay` (catalogue row 11): `host` keeps
//! them in host memory and gathers each batch there, then copies it to the model's
//! device; `pinned` gathers into page-locked memory and copies without blocking (CUDA);
//! `device` keeps them in a tensor beside the model, so a batch is one gather there.

use super::world::PIXELS;
use hotlab_shared::counters::Counters;
use hotlab_shared::rng::HostRng;
use hotlab_shared::spec::ReplayAt;
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

/// Where the frames are.
enum Frames {
    /// Host memory, `[env][slot][pixel]`.
    Host(Vec<u8>),
    /// A `[envs × slots, PIXELS]` byte tensor on the model's device.
    Device(Tensor),
}

pub struct Replay {
    at: ReplayAt,
    device: Device,
    /// Steps each env's ring holds.
    slots: usize,
    frames: Frames,
    prev_action: Vec<i64>,
    reward: Vec<f32>,
    cont: Vec<f32>,
    first: Vec<f32>,
    /// Per env: the next slot to write, and how many are filled.
    head: Vec<usize>,
    filled: Vec<usize>,
}

impl Replay {
    /// `capacity` steps over `envs` rings, the frames where `at` says (`pinned` keeps them
    /// on the host like `host`; only its batches differ).
    pub fn new(at: ReplayAt, capacity: usize, envs: usize, device: Device) -> Self {
        let slots = (capacity / envs).max(2);
        let n = slots * envs;
        let frames = match at {
            ReplayAt::Host | ReplayAt::Pinned => Frames::Host(vec![0; n * PIXELS as usize]),
            ReplayAt::Device => Frames::Device(Tensor::zeros([n as i64, PIXELS], (Kind::Uint8, device))),
        };
        Self {
            at,
            device,
            slots,
            frames,
            prev_action: vec![0; n],
            reward: vec![0.0; n],
            cont: vec![0.0; n],
            first: vec![0.0; n],
            head: vec![0; envs],
            filled: vec![0; envs],
        }
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

    /// Appends one step per env in `steps` (env `e` at row `e`); frames go to the device in
    /// one copy per call.
    pub fn push(&mut self, envs: &[usize], steps: &[Step<'_>], c: &mut Counters) {
        let px = PIXELS as usize;
        let mut rows = Vec::with_capacity(envs.len());
        for (&e, s) in envs.iter().zip(steps) {
            let i = e * self.slots + self.head[e];
            rows.push(i as i64);
            self.prev_action[i] = s.prev_action;
            self.reward[i] = s.reward;
            self.cont[i] = f32::from(u8::from(s.cont));
            self.first[i] = f32::from(u8::from(s.first));
            if let Frames::Host(frames) = &mut self.frames {
                frames[i * px..(i + 1) * px].copy_from_slice(s.frame);
            }
            self.head[e] = (self.head[e] + 1) % self.slots;
            self.filled[e] = (self.filled[e] + 1).min(self.slots);
        }
        if let Frames::Device(frames) = &mut self.frames {
            let bytes: Vec<u8> = steps.iter().flat_map(|s| s.frame.iter().copied()).collect();
            let new = Tensor::from_slice(&bytes).view([steps.len() as i64, PIXELS]).to_device(self.device);
            let index = Tensor::from_slice(&rows).to_device(self.device);
            let _ = frames.index_copy_(0, &index, &new);
            if self.device != Device::Cpu {
                c.h2d_copies += 2;
                c.h2d_bytes += (bytes.len() + rows.len() * 8) as u64;
            }
        }
    }

    /// `b` sequences of `t` steps: each from a random env, starting at a random step whose
    /// sequence lies inside what its ring holds.
    pub fn sample(&self, b: usize, t: usize, rng: &mut HostRng, c: &mut Counters) -> Batch {
        let mut index = Vec::with_capacity(b * t);
        for _ in 0..b {
            let e = (rng.next_u64() % self.head.len() as u64) as usize;
            let oldest = (self.head[e] + self.slots - self.filled[e]) % self.slots;
            let start = oldest + (rng.next_u64() % (self.filled[e] - t + 1) as u64) as usize;
            index.extend((0..t).map(|k| e * self.slots + (start + k) % self.slots));
        }
        let shape = [b as i64, t as i64];
        let gather = |v: &Vec<f32>| index.iter().map(|&i| v[i]).collect::<Vec<f32>>();
        let small = [gather(&self.reward), gather(&self.cont), gather(&self.first)];
        let actions: Vec<i64> = index.iter().map(|&i| self.prev_action[i]).collect();
        let to_model = |t: Tensor, c: &mut Counters| {
            if self.device == Device::Cpu {
                return t;
            }
            c.h2d_copies += 1;
            c.h2d_bytes += (t.numel() * t.kind().elt_size_in_bytes()) as u64;
            match self.at {
                ReplayAt::Pinned => t.pin_memory(self.device).to_device_(self.device, t.kind(), true, false),
                ReplayAt::Host | ReplayAt::Device => t.to_device(self.device),
            }
        };
        let obs = match &self.frames {
            Frames::Host(frames) => {
                let px = PIXELS as usize;
                let mut bytes = Vec::with_capacity(index.len() * px);
                for &i in &index {
                    bytes.extend_from_slice(&frames[i * px..(i + 1) * px]);
                }
                to_model(Tensor::from_slice(&bytes), c).view([b as i64, t as i64, PIXELS])
            }
            Frames::Device(frames) => {
                let rows: Vec<i64> = index.iter().map(|&i| i as i64).collect();
                frames.index_select(0, &to_model(Tensor::from_slice(&rows), c)).view([b as i64, t as i64, PIXELS])
            }
        };
        let [reward, cont, first] = small.map(|v| to_model(Tensor::from_slice(&v), c).view(shape));
        let prev_action = to_model(Tensor::from_slice(&actions), c).view(shape);
        Batch { b: b as i64, t: t as i64, obs, prev_action, reward, cont, first }
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
                .map(|f| Step { frame: f, prev_action: (k % 2) as i64, reward: k as f32, cont: true, first: k == 0 })
                .collect();
            r.push(&[0, 1], &steps, &mut c);
        }
        r
    }

    /// Sequences are consecutive steps of one env, from what the ring still holds, with
    /// every field of the same step; host and device buffers give the same batch.
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
            batches.push((rewards, pixels));
        }
        assert_eq!(batches[0], batches[1]);
    }
}

//! Rollout frames: glimpses of what the envs are doing, taken during the rollout at a
//! bounded rate, for watching a run (the lab streams them as `rollout` events).
//!
//! A frame costs a few hundred bytes read from data the rollout already has on the host;
//! on the device backend it is one small read-back, taken at most once per update.

use hotlab_shared::env::{FieldData, Observations};
use hotlab_shared::prolog::prove::SUCCESSORS;
use hotlab_shared::proof::{ProofTask, GOAL_WIDTH, PAD};
use hotlab_shared::protocol::Frame;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tch::Tensor;

/// CartPole envs shown per frame.
pub const CARTPOLE_ENVS: usize = 4;

/// Where frames go, and how often they are wanted.
pub struct FrameFeed {
    pub sink: Box<dyn FnMut(Frame) + Send>,
    /// The gap wanted between two frames, asked before each one (the lab wants 30 per
    /// second while someone watches and fewer otherwise).
    pub gap: Box<dyn Fn() -> Duration + Send>,
}

/// The trainer's side: decides when a frame is due and builds it.
pub struct Frames {
    feed: Option<FrameFeed>,
    task: Option<Arc<ProofTask>>,
    last: Option<Instant>,
}

impl Frames {
    pub fn new(feed: Option<FrameFeed>, task: Option<Arc<ProofTask>>) -> Self {
        Self { feed, task, last: None }
    }

    /// True when a frame should be taken now (never without a feed).
    pub fn due(&self) -> bool {
        let Some(feed) = &self.feed else { return false };
        self.last.is_none_or(|t| t.elapsed() >= (feed.gap)())
    }

    fn send(&mut self, frame: Frame) {
        if let Some(feed) = &mut self.feed {
            self.last = Some(Instant::now());
            (feed.sink)(frame);
        }
    }

    /// A frame from host observations and the actions just chosen for them.
    pub fn host(&mut self, step: u64, obs: &Observations, actions: &[i64]) {
        let frame = match (&self.task, obs.fields.as_slice()) {
            (Some(task), [FieldData::I64(state), FieldData::I64(succ), FieldData::I64(mask)]) => {
                proof_frame(task, step, state, succ, mask, actions[0])
            }
            (None, [FieldData::F32(state)]) => {
                let n = (state.len() / 4).min(CARTPOLE_ENVS);
                cartpole_frame(step, &state[..n * 4], &actions[..n])
            }
            _ => return,
        };
        self.send(frame);
    }

    /// A frame from device tensors: observations `[envs, 4]` and actions `[envs, 1]`.
    pub fn device(&mut self, step: u64, obs: &Tensor, actions: &Tensor) {
        let n = (obs.size()[0] as usize).min(CARTPOLE_ENVS) as i64;
        let read = |t: Tensor| t.to_device(tch::Device::Cpu).contiguous().view([-1]);
        let (Ok(state), Ok(acts)) = (
            Vec::<f32>::try_from(read(obs.narrow(0, 0, n).to_kind(tch::Kind::Float))),
            Vec::<i64>::try_from(read(actions.narrow(0, 0, n).to_kind(tch::Kind::Int64))),
        ) else {
            return;
        };
        self.send(cartpole_frame(step, &state, &acts));
    }
}

fn cartpole_frame(step: u64, state: &[f32], actions: &[i64]) -> Frame {
    let states = state.chunks_exact(4).map(|s| [s[0], s[1], s[2], s[3]]).collect();
    Frame::Cartpole { step, states, actions: actions.to_vec() }
}

/// Env 0's goal list, its successors (as many as exist) with their mask, and the choice.
fn proof_frame(task: &ProofTask, step: u64, state: &[i64], succ: &[i64], mask: &[i64], choice: i64) -> Frame {
    let rows = succ[..SUCCESSORS * GOAL_WIDTH].chunks_exact(GOAL_WIDTH).take_while(|row| row[0] != PAD);
    let successors: Vec<String> = rows.map(|row| task.decode(row)).collect();
    let allowed = mask[..successors.len()].iter().map(|&m| m != 0).collect();
    Frame::Proof { step, goals: task.decode(&state[..GOAL_WIDTH]), successors, allowed, choice }
}

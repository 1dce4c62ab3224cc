//! Rollout frames: glimpses of what the envs are doing, taken during the rollout at a
//! bounded rate, for watching a run (the lab streams them as `rollout` events).
//!
//! The workload draws a frame (`Workload::frame`) from data the rollout already has on
//! the host, a few hundred bytes; a device rollout takes one small read-back for it, at
//! most once per update. This module only decides when one is due and passes it on.

use hotlab_protocol::Frame;
use std::time::{Duration, Instant};

/// Where frames go, and how often they are wanted.
pub struct FrameFeed {
    pub sink: Box<dyn FnMut(Frame) + Send>,
    /// The gap wanted between two frames, asked before each one (the lab wants 30 per
    /// second while someone watches and fewer otherwise).
    pub gap: Box<dyn Fn() -> Duration + Send>,
}

/// The trainer's side: decides when a frame is due and sends it.
pub struct Frames {
    feed: Option<FrameFeed>,
    last: Option<Instant>,
}

impl Frames {
    pub fn new(feed: Option<FrameFeed>) -> Self {
        Self { feed, last: None }
    }

    /// True when a frame should be taken now (never without a feed).
    pub fn due(&self) -> bool {
        let Some(feed) = &self.feed else { return false };
        self.last.is_none_or(|t| t.elapsed() >= (feed.gap)())
    }

    /// Whether frames go anywhere (a lab streams this run).
    pub fn watched(&self) -> bool {
        self.feed.is_some()
    }

    pub fn send(&mut self, frame: Frame) {
        if let Some(feed) = &mut self.feed {
            self.last = Some(Instant::now());
            (feed.sink)(frame);
        }
    }
}

//! A body of libtorch ops on static buffers run eagerly for a warm-up, then captured once
//! as a CUDA graph on a side stream and replayed from then on, each replay counted with
//! what it launched: `--update graph`'s PPO update and the dreamer's train step.

use super::shim::{Graph, Launches, Stream};
use anyhow::{bail, Context, Result};
use hotlab_core::counters::Counters;
use tch::Device;

/// Records what `record` queues as one graph, on a side stream of `device` that waits for
/// the current stream's work first (capture runs nothing; a capture may not be on the
/// default stream), then makes the current stream wait for the side stream again.
pub fn capture_aside(device: Device, record: impl FnOnce() -> Result<()>) -> Result<Graph> {
    let Device::Cuda(index) = device else {
        bail!("a CUDA graph is captured on a CUDA device (this one is {device:?})")
    };
    let side = Stream::new(index)?;
    let current = Stream::current(index)?;
    side.wait_for(&current)?;
    side.make_current()?;
    let graph = Graph::capture(record);
    current.make_current()?;
    current.wait_for(&side)?;
    graph
}

/// Where a captured body stands: how many times it ran, and its graph once captured.
pub struct Replayer {
    device: Device,
    /// Capture after the warm-up (CUDA only); false: always eager (the tests on the CPU).
    capture: bool,
    /// Eager runs before the capture.
    warmup: u64,
    graph: Option<Graph>,
    runs: u64,
    /// What one replay launches (None before the capture, or where the driver could not say).
    pub launches: Option<Launches>,
    /// Replays of the graph so far.
    pub replays: u64,
}

impl Replayer {
    pub fn new(device: Device, capture: bool, warmup: u64) -> Self {
        Self { device, capture, warmup, graph: None, runs: 0, launches: None, replays: 0 }
    }

    /// Runs `body` once: eagerly during the warm-up (and always without capture); after
    /// it, the first time captured (`what` names it in an error) and from then on replayed.
    /// Each replay is counted in `c` with its launches.
    pub fn run(&mut self, what: &str, c: &mut Counters, mut body: impl FnMut() -> Result<()>) -> Result<()> {
        if self.capture && !self.device.is_cuda() {
            bail!("--update: graph replays {what} as a captured CUDA graph, and this run is on {:?}; allowed there: eager", self.device);
        }
        if self.graph.is_none() && self.capture && self.runs >= self.warmup {
            let graph =
                capture_aside(self.device, &mut body).with_context(|| format!("capturing {what} as a CUDA graph"))?;
            self.launches = graph.launches().ok();
            self.graph = Some(graph);
        }
        match &self.graph {
            Some(graph) => {
                graph.replay()?;
                self.replays += 1;
                self.launches.unwrap_or_default().count_replay(c);
            }
            None => body()?,
        }
        self.runs += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without capture the body runs every time and nothing is counted; asked to capture on
    /// the CPU it is refused by name, before the body runs.
    #[test]
    fn without_capture_the_body_runs_eagerly_and_capture_needs_cuda() {
        let mut c = Counters::default();
        let mut eager = Replayer::new(Device::Cpu, false, 2);
        let mut runs = 0;
        for _ in 0..5 {
            eager
                .run("the update", &mut c, || {
                    runs += 1;
                    Ok(())
                })
                .unwrap();
        }
        assert_eq!((runs, eager.replays, c.update_replays, c.update_launches), (5, 0, 0, 0));
        let mut captured = Replayer::new(Device::Cpu, true, 2);
        let err = captured.run("the update", &mut c, || panic!("ran")).unwrap_err();
        assert!(format!("{err:#}").contains("--update: graph replays the update"), "{err:#}");
    }
}

//! The trainer's GPU check of its fused optimizer: `clip_adam` (the gradient clip and Adam in one
//! kernel) against libtorch's ops (`clip_grad_norm`, then `FlatAdam::step_device`), launched
//! eagerly and replayed from captured graphs, with each one's launches per step (the
//! captured graph's nodes) and its time per step.

use super::{check, progress, relative};
use crate::adam::FlatAdam;
use crate::cuda::gpu::Gpu;
use crate::cuda::optim::ClipAdam;
use crate::cuda::replayer::capture_aside;
use crate::cuda::shim::{Graph, Launches};
use crate::ppo::update::clip_grad_norm;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// Parameters of an actor and a critic of (64, 64) over 4 inputs and 2 actions: what PPO's
/// update steps at `--preset gpu`.
const PARAMS: i64 = 9_027;
const STEPS: usize = 16;
const MAX_NORM: f64 = 0.5;
const LR: f32 = 2.5e-3;

/// One way to take a clipped Adam step on the static buffers.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    Torch,
    Fused,
}

/// A parameter vector, its optimizer and a static gradient buffer, stepped one way.
struct Stepper<'a> {
    way: Way,
    params: Tensor,
    grad: Tensor,
    adam: FlatAdam,
    lr: Tensor,
    kernel: &'a ClipAdam,
}

impl<'a> Stepper<'a> {
    fn new(way: Way, p0: &Tensor, kernel: &'a ClipAdam) -> Self {
        let params = p0.copy();
        let adam = FlatAdam::new(&params, 1e-5);
        let lr = Tensor::from_slice(&[LR]).to_device(p0.device());
        Self { way, grad: params.zeros_like(), params, adam, lr, kernel }
    }

    /// One step on what the gradient buffer holds.
    fn step(&mut self) -> anyhow::Result<()> {
        match self.way {
            Way::Torch => {
                clip_grad_norm(&mut self.grad, MAX_NORM);
                self.adam.step_device(&mut self.params, &self.grad, &self.lr);
                Ok(())
            }
            Way::Fused => self.adam.step_fused(&mut self.params, &mut self.grad, &self.lr, MAX_NORM, self.kernel),
        }
    }

    /// One step recorded on a side stream (capture runs nothing).
    fn capture(&mut self) -> anyhow::Result<Graph> {
        capture_aside(self.params.device(), || self.step())
    }

    /// `grads` stepped in turn: eagerly, or (`replayed`) two eagerly, then one captured
    /// and replayed for the rest. Returns the parameters and what a replay launches.
    fn run(mut self, grads: &[Tensor], replayed: bool) -> anyhow::Result<(Tensor, Option<Launches>)> {
        let mut graph = None;
        for (i, g) in grads.iter().enumerate() {
            self.grad.copy_(g);
            if replayed && i == 2 {
                graph = Some(self.capture()?);
            }
            match &graph {
                Some(graph) => graph.replay()?,
                None => self.step()?,
            }
        }
        let launches = graph.map(|g| g.launches()).transpose()?;
        Ok((self.params.to_device(Device::Cpu), launches))
    }

    /// Microseconds per step over `n` steps (after 3 of warm-up), eagerly or replayed.
    fn time(mut self, g: &Tensor, replayed: bool, n: usize) -> anyhow::Result<f64> {
        self.grad.copy_(g);
        for _ in 0..3 {
            self.step()?;
        }
        let graph = replayed.then(|| self.capture()).transpose()?;
        tch::Cuda::synchronize(0);
        let start = Instant::now();
        for _ in 0..n {
            match &graph {
                Some(graph) => graph.replay()?,
                None => self.step()?,
            }
        }
        tch::Cuda::synchronize(0);
        Ok(1e6 * start.elapsed().as_secs_f64() / n as f64)
    }
}

/// `clip_adam` against libtorch's clip and Adam over 16 steps whose gradients alternate
/// between ones the clip scales and ones it leaves: eager against eager, and both replayed
/// from a graph captured after two eager steps; to 1e-5 of the largest parameter. Reports
/// the launches of one captured step each way and the time per step (eager and replayed).
pub fn clip_adam_check(gpu: &Arc<Gpu>) -> Value {
    const NAME: &str = "clip_adam_matches_libtorch";
    progress("clip_adam (the clip and Adam in one kernel) against libtorch's ops");
    let kernel = match ClipAdam::new(gpu.clone()) {
        Ok(k) => k,
        Err(e) => return check(NAME, false, "-", json!(format!("{e:#}"))),
    };
    let outcome = (|| -> anyhow::Result<Value> {
        let dev = Device::Cuda(0);
        tch::manual_seed(11);
        let p0 = Tensor::randn([PARAMS], (Kind::Float, dev)) * 0.1;
        let grads: Vec<Tensor> = (0..STEPS)
            .map(|i| Tensor::randn([PARAMS], (Kind::Float, dev)) * if i % 2 == 0 { 1.0 } else { 1e-3 })
            .collect();
        let run = |way, replayed| Stepper::new(way, &p0, &kernel).run(&grads, replayed);
        let (torch, _) = run(Way::Torch, false)?;
        let (fused, _) = run(Way::Fused, false)?;
        let (torch_replayed, torch_launches) = run(Way::Torch, true)?;
        let (fused_replayed, fused_launches) = run(Way::Fused, true)?;
        let moved = relative(&p0.to_device(Device::Cpu), &torch);
        let diffs = [relative(&torch, &fused), relative(&torch, &torch_replayed), relative(&torch, &fused_replayed)];
        let time = |way, replayed| Stepper::new(way, &p0, &kernel).time(&grads[0], replayed, 2_000);
        let us = json!({
            "torch_eager": time(Way::Torch, false)?, "fused_eager": time(Way::Fused, false)?,
            "torch_replayed": time(Way::Torch, true)?, "fused_replayed": time(Way::Fused, true)?,
        });
        let ok = moved > 1e-3 && diffs.iter().all(|d| *d <= 1e-5) && fused_launches.is_some_and(|l| l.kernels <= 3);
        Ok(check(
            NAME,
            ok,
            "16 clipped Adam steps: fused eager, libtorch replayed and fused replayed within 1e-5 of libtorch eager (relative to the largest parameter); a fused step at most 3 kernels",
            json!({"params": PARAMS, "moved": moved,
                   "relative_diff": {"fused": diffs[0], "torch_replayed": diffs[1], "fused_replayed": diffs[2]},
                   "launches_per_step": {"torch": torch_launches, "fused": fused_launches},
                   "us_per_step": us}),
        ))
    })();
    outcome.unwrap_or_else(|e| check(NAME, false, "-", json!(format!("{e:#}"))))
}

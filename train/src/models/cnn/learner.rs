//! PPO with the CNN actor-critic, for any workload whose observation is an image: the
//! network, the optimizer and the host rollout, its forward in libtorch ops.

use super::agent::CnnAgent;
use super::{CnnNet, CnnShape, Compute, Layout};
use crate::error::RunError;
use crate::exec::transfer::{Eager, Mover};
use crate::ppo::{self, collect::HostCollector, PpoLearner};
use crate::workload::{Learner, Setup, Workload};
use anyhow::Result;
use hotlab_core::choices::{Frames, Inference, UpdateMode};
use hotlab_core::run_knobs;
use hotlab_env::EnvSpec;
use hotlab_spec::SpecError;
use std::sync::Arc;

/// The learner of `workload`, whose envs are `env_spec` (an image observation); settings
/// the CNN has no form for are refused, naming what is allowed.
pub fn ppo_learner(
    workload: Arc<dyn Workload>,
    setup: &mut Setup<'_>,
    env_spec: &EnvSpec,
) -> Result<Box<dyn Learner>, RunError> {
    let spec = setup.spec;
    let shape = CnnShape::of(env_spec)?;
    if spec.exec.update != UpdateMode::Eager {
        let message =
            format!("{}: the CNN policy's update runs libtorch's ops and autograd; allowed: eager", spec.exec.update);
        return Err(SpecError::of(&run_knobs::UPDATE, message).into());
    }
    let kind = setup.precision.kind;
    if !matches!(kind, tch::Kind::Float | tch::Kind::BFloat16) || setup.precision.scaler.is_some() {
        let message = format!(
            "{}: the CNN policy has no loss scaler for fp16's products; allowed: fp32, bf16 (or auto)",
            setup.precision.label()
        );
        return Err(SpecError::of(&run_knobs::PRECISION, message).into());
    }
    setup.eager_only = true;
    if spec.exec.inference == Inference::Fused {
        setup.notes.push("inference fused has no CNN form: the CNN's rollout forward runs libtorch's ops (eager), the step's images moved as bytes".into());
    }
    let compute = Compute { kind, layout: Layout::resolve(spec.exec.conv_layout, setup.device) };
    let net = CnnNet::new(shape, setup.device, compute)?;
    let encoder = format!("{:?} CNN", net.encoder.trunk);
    setup.notes.push(format!(
        "policy: the {encoder} over {:?} images of {:?}, converted to float on the device (bytes until there); convolutions in {}, products in {}",
        net.shape.obs.shape,
        net.shape.obs.kind,
        compute.layout.as_str(),
        setup.precision.label()
    ));
    let heads: Vec<usize> = env_spec.heads.iter().map(|h| h.n).collect();
    if spec.exec.threads == 0 {
        // A convolution's minibatch splits well at any size, and the envs' workers wait
        // while the update runs: every core for libtorch (Breakout at the atari preset on
        // 2 cores: 1.34–1.69× the steps/s of one thread, docs/benchmarks.md).
        setup.threads = crate::cores();
    }
    let (opt, mover) = ppo::after_init(setup, &net.params.flat);
    let (frames, scale) = (spec.exec.frames, net.encoder.scale);
    if frames == Frames::Float {
        setup.notes.push("frames float: each image converted to float32 on the host before it moves (4× its bytes); the encoder reads it as it is".into());
    }
    let mover = mover.with_frames(frames, scale);
    let (transfer, sync, device) = (spec.exec.transfer, spec.exec.action_sync, setup.device);
    let actor = move || Eager { mover: Mover::new(transfer, device).with_frames(frames, scale), sync };
    // No features (`obs_dim` 0): the rollout keeps the image's bytes.
    let collector = Box::new(HostCollector::new(spec, Arc::clone(&workload), 0, actor)?);
    let agent = CnnAgent { net, env: workload };
    Ok(Box::new(PpoLearner::new(setup, agent, opt, mover, collector, heads)))
}

//! PPO with the recurrent actor-critic (`--rnn lstm|gru`), for the workloads whose policy
//! is the shared one: the network, the optimizer and the host rollout, its forward in
//! libtorch ops with each env's state carried.

use super::agent::{RnnActor, RnnAgent};
use super::{Input, RnnNet, RnnShape};
use crate::error::RunError;
use crate::exec::transfer::{Eager, Mover};
use crate::models::cnn::{Compute, Layout};
use crate::ppo::{self, collect::HostCollector, PpoLearner};
use crate::workload::{Learner, Setup, Workload};
use anyhow::Result;
use hotlab_core::choices::{Frames, Inference, RnnUpdate};
use hotlab_core::run_knobs;
use hotlab_env::EnvSpec;
use hotlab_spec::SpecError;
use std::sync::Arc;

/// The learner of `workload`, whose envs are `env_spec`; settings the recurrent policy has
/// no form for are refused, naming what is allowed.
pub fn ppo_learner(
    workload: Arc<dyn Workload>,
    setup: &mut Setup<'_>,
    env_spec: &EnvSpec,
) -> Result<Box<dyn Learner>, RunError> {
    let spec = setup.spec;
    let shape = RnnShape::of(env_spec, &spec.ppo.hidden, spec.ppo.rnn, spec.ppo.rnn_width)?;
    let kind = setup.precision.kind;
    if !matches!(kind, tch::Kind::Float | tch::Kind::BFloat16) || setup.precision.scaler.is_some() {
        let message = format!(
            "{}: the recurrent policy has no loss scaler for fp16's products; allowed: fp32, bf16 (or auto)",
            setup.precision.label()
        );
        return Err(SpecError::of(&run_knobs::PRECISION, message).into());
    }
    setup.eager_only = true;
    if spec.exec.inference == Inference::Fused {
        setup.notes.push("inference fused has no recurrent form: the rollout's forward runs libtorch's ops (eager), one cell call per step for every env".into());
    }
    let compute = Compute { kind, layout: Layout::resolve(spec.exec.conv_layout, setup.device) };
    let net = RnnNet::new(shape.clone(), setup.device, compute)?;
    let (m, envs) = (spec.ppo.minibatches, spec.envs);
    setup.notes.push(format!(
        "policy: {} (the core in fp32); each env's state reset where its episode starts; the update's {m} minibatches are {} whole envs of {} steps each, re-run from their state at the rollout's start {}",
        net.describe(),
        envs / m,
        spec.steps,
        match spec.exec.rnn_update {
            RnnUpdate::Sequence => "in one whole-sequence call per stretch between episode starts",
            RnnUpdate::Stepped => "by a cell call per step (--rnn-update stepped)",
        }
    ));
    let heads: Vec<usize> = env_spec.heads.iter().map(|h| h.n).collect();
    let image = matches!(shape.input, Input::Image(_));
    if spec.exec.threads == 0 && image {
        // As the CNN's: a convolution's minibatch splits well, and the envs wait meanwhile.
        setup.threads = crate::cores();
    }
    let (opt, mover) = ppo::after_init(setup, &net.params.flat);
    let (frames, scale) = (spec.exec.frames, net.frame_scale());
    let mover = if image { mover.with_frames(frames, scale) } else { mover };
    let (transfer, sync, device) = (spec.exec.transfer, spec.exec.action_sync, setup.device);
    let actor = move || {
        let mover = Mover::new(transfer, device);
        let mover = if image { mover.with_frames(frames, scale) } else { mover };
        RnnActor::new(Eager { mover, sync })
    };
    if image && frames == Frames::Float {
        setup.notes.push("frames float: each image converted to float32 on the host before it moves (4× its bytes); the encoder reads it as it is".into());
    }
    let collector = Box::new(HostCollector::new(spec, Arc::clone(&workload), shape.obs_dim(), actor)?);
    let agent = RnnAgent { net, env: workload };
    Ok(Box::new(PpoLearner::new(setup, agent, opt, mover, collector, heads)))
}

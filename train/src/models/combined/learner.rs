//! PPO with the combined actor-critic, for the workloads whose policy is the shared one and
//! whose observation is structured: the network, the optimizer and the host rollout, which
//! keeps each leaf in its own form.

use super::agent::CombinedAgent;
use super::{CombinedNet, CombinedShape};
use crate::error::RunError;
use crate::exec::transfer::{Eager, Mover};
use crate::models::cnn::{Compute, Layout};
use crate::ppo::{self, collect::HostCollector, PpoLearner};
use crate::workload::{Learner, Setup, Workload};
use anyhow::Result;
use hotlab_core::choices::{Frames, Inference, UpdateMode};
use hotlab_core::run_knobs;
use hotlab_env::EnvSpec;
use hotlab_spec::SpecError;
use std::sync::Arc;

/// The learner of `workload`, whose envs are `env_spec` (a structured observation);
/// settings the combined policy has no form for are refused, naming what is allowed.
pub fn ppo_learner(
    workload: Arc<dyn Workload>,
    setup: &mut Setup<'_>,
    env_spec: &EnvSpec,
) -> Result<Box<dyn Learner>, RunError> {
    let spec = setup.spec;
    let shape = CombinedShape::of(env_spec, &spec.ppo.hidden)?;
    if spec.exec.update != UpdateMode::Eager {
        let message = format!(
            "{}: the combined policy's update (a Dict or Tuple observation's) runs libtorch's ops and autograd; allowed: eager",
            spec.exec.update
        );
        return Err(SpecError::of(&run_knobs::UPDATE, message).into());
    }
    if spec.exec.frames == Frames::Float {
        let message = "float: a Dict or Tuple observation's image leaves move as bytes, each scaled by its own encoder; allowed: bytes";
        return Err(SpecError::of(&run_knobs::FRAMES, message).into());
    }
    let kind = setup.precision.kind;
    if !matches!(kind, tch::Kind::Float | tch::Kind::BFloat16) || setup.precision.scaler.is_some() {
        let message = format!(
            "{}: the combined policy has no loss scaler for fp16's products; allowed: fp32, bf16 (or auto)",
            setup.precision.label()
        );
        return Err(SpecError::of(&run_knobs::PRECISION, message).into());
    }
    setup.eager_only = true;
    if spec.exec.inference == Inference::Fused {
        setup.notes.push("inference fused has no combined form: the rollout's forward runs libtorch's ops (eager), each leaf moved in its own form".into());
    }
    let compute = Compute { kind, layout: Layout::resolve(spec.exec.conv_layout, setup.device) };
    let net = CombinedNet::new(shape, setup.device, compute)?;
    setup.notes.push(format!(
        "policy: one encoder per leaf ({}), {} features side by side, then tanh MLPs {:?} for the actor and the critic",
        net.encoder.describe(&net.shape.leaves),
        net.encoder.width,
        net.shape.hidden
    ));
    let heads: Vec<usize> = env_spec.heads.iter().map(|h| h.n).collect();
    if spec.exec.threads == 0 && env_spec.fields.iter().any(|f| f.kind.is_bytes()) {
        // As the CNN's: a convolution's minibatch splits well, and the envs wait meanwhile.
        setup.threads = crate::cores();
    }
    let (opt, mover) = ppo::after_init(setup, &net.params.flat);
    let (transfer, sync, device) = (spec.exec.transfer, spec.exec.action_sync, setup.device);
    let actor = move || Eager { mover: Mover::new(transfer, device), sync };
    let collector = Box::new(HostCollector::with_leaves(spec, Arc::clone(&workload), actor)?);
    let agent = CombinedAgent { net, env: workload };
    Ok(Box::new(PpoLearner::new(setup, agent, opt, mover, collector, heads)))
}

//! PPO with the MLP actor-critic, for any workload whose observation is one f32 vector:
//! the network, the optimizer, the helper thread and the rollout (on the host, eager or
//! fused inference; or a workload's own device collector under `--backend device`).

use super::actor::MlpActor;
use super::host::FusedPolicy;
use super::policy::{ActorCritic, Architecture};
use super::{architecture, MlpAgent};
use crate::error::RunError;
use crate::exec::transfer::Eager;
use crate::ppo::{self, collect::HostCollector, Collect, PpoLearner, FUSED_NOTE};
use crate::workload::{Learner, Setup, Workload};
use anyhow::Result;
use hotlab_core::choices::{Backend, Inference, UpdateMode};
use hotlab_core::run_knobs;
use hotlab_env::EnvSpec;
use std::sync::Arc;

/// A workload's rollout on its device (`--backend device`), given the network's shape and
/// the number of action heads (it opens its own kernels, `Setup::open_gpu`).
pub type DeviceRollout<'f> =
    Box<dyn FnOnce(&mut Setup<'_>, &Architecture, usize) -> Result<Box<dyn Collect<MlpAgent>>, RunError> + 'f>;

/// The learner of `workload`, whose envs are `env_spec`; `device` is its device rollout,
/// if it has one (the spec's validation refuses `--backend device` where it has none).
pub fn ppo_learner(
    workload: Arc<dyn Workload>,
    setup: &mut Setup<'_>,
    env_spec: &EnvSpec,
    device: Option<DeviceRollout<'_>>,
) -> Result<Box<dyn Learner>, RunError> {
    let spec = setup.spec;
    let heads: Vec<usize> = env_spec.heads.iter().map(|h| h.n).collect();
    let arch = architecture(env_spec, &spec.ppo.hidden)?;
    if arch.gaussian > 0 && spec.exec.update == UpdateMode::GraphFused {
        return Err(hotlab_spec::SpecError::of(&run_knobs::UPDATE, super::grad::GAUSSIAN_NOT_FUSED).into());
    }
    let net = ActorCritic::new(arch.clone(), setup.device);
    let (opt, mover) = ppo::after_init(setup, &net.flat);
    let helper = super::update_helper(setup)?;
    if helper.is_some() {
        setup.notes.push("two threads: the update's actor and critic, and the halves of a fused rollout step of 64 envs or more (CPU, fp32)".into());
    }
    let collector: Box<dyn Collect<MlpAgent>> = match device {
        Some(device) if spec.exec.backend == Backend::Device => device(setup, &arch, heads.len())?,
        _ => {
            let device = setup.device;
            if spec.exec.inference == Inference::Fused {
                setup.notes.push(FUSED_NOTE.into());
            }
            let actor = || match spec.exec.inference {
                // Graph is validated away off the device backend.
                Inference::Eager | Inference::Graph => MlpActor::Eager(Eager::new(&spec.exec, device)),
                Inference::Fused => {
                    let policy = Box::new(FusedPolicy::new(&arch, &net.host_params()));
                    let twin = helper.as_ref().map(|h| (policy.clone(), Arc::clone(h)));
                    MlpActor::Fused { policy, twin }
                }
            };
            Box::new(HostCollector::new(spec, Arc::clone(&workload), arch.obs_dim, actor)?)
        }
    };
    let agent = MlpAgent { net, helper, env: workload };
    Ok(Box::new(PpoLearner::new(setup, agent, opt, mover, collector, heads)))
}

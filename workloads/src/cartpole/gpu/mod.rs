//! CartPole's GPU checks and benchmarks (`hotlab gpu-check`): its device env's kernels
//! against the host reference (`env.rs`), the graph rollout and GAE's kernel (`rollout.rs`),
//! PPO's update on the GPU against its references (`update.rs`), and PPO runs on the GPU
//! that must learn, with the benchmarks (`runs.rs`).

mod env;
mod rollout;
mod runs;
mod update;

use hotlab_core::choices::Inference;
use hotlab_train::gpu_check::{progress, Target};
use hotlab_train::models::mlp::policy::Architecture;
use serde_json::Value;

/// The CartPole MLP's shape (64, 64): what the kernels and updates are checked on.
fn cartpole_arch() -> Architecture {
    Architecture { obs_dim: 4, hidden: vec![64, 64], logits: 2, gaussian: 0 }
}

/// Every check on `target`: on CUDA each kernel and graph against its reference and the
/// learning runs; on ROCm (libtorch's ops only) a learning run of the device backend.
pub fn checks(target: &Target) -> Vec<Value> {
    let Some(gpu) = target.cuda() else {
        return vec![runs::train_check("device_backend_tensor_ops", Inference::Fused)];
    };
    progress("fused env step against the batch env");
    let mut out = vec![env::fused_step_check(gpu)];
    progress("multi-step kernel against the batch env");
    out.push(env::multistep_check(gpu));
    progress("graph rollout: replay, direct launches, libtorch's forward");
    out.extend(rollout::graph_checks(gpu));
    progress("the rollout kernel's forward at widths that are not multiples of a warp");
    out.push(rollout::odd_widths_check(gpu));
    progress("GAE's kernel against the host's");
    out.push(rollout::gae_check(gpu));
    progress("a PPO update on the GPU against the CPU");
    out.push(update::ppo_check());
    progress("the PPO update captured as a CUDA graph against the eager one");
    out.extend(update::update_graph_checks());
    progress("PPO with --inference graph on CartPole");
    out.push(runs::train_check("ppo_graph_learns", Inference::Graph));
    progress("--preset gpu: the rollout and the update captured, to its learning bar");
    out.push(runs::preset_gpu_check());
    out
}

/// The benchmarks on a CUDA GPU, the stepping benchmark up to 2^`max_log2` envs: rows
/// `multistep`, `single_step` and `ppo`.
pub fn bench(target: &Target, max_log2: u32) -> Vec<(&'static str, Value)> {
    target.cuda().map(|gpu| runs::benchmarks(gpu, max_log2)).unwrap_or_default()
}

//! The graph rollout and the device rollout's GAE against their references: a replay
//! against the same kernels launched directly, the rollout kernel's forward against
//! libtorch's at ordinary and odd widths, its transitions against shared's dynamics, its
//! sampling against the softmax, and GAE's kernel against the host loop.

use super::cartpole_arch;
use crate::cartpole::device::env::DeviceCartPole;
use crate::cartpole::device::graph::{Buffers, GraphRollout};
use crate::cartpole::device::rollout::DeviceRollout;
use hotlab_env::cartpole::dynamics_f32;
use hotlab_env::rng::HostRng;
use hotlab_train::cuda::gpu::Gpu;
use hotlab_train::gpu_check::{check, host_f32, max_abs_diff};
use hotlab_train::models::mlp::policy::{ActorCritic, Architecture};
use serde_json::{json, Value};
use std::sync::Arc;
use tch::{Device, Kind};

/// The graph rollout: a replay equals the same kernels launched directly, bit for bit;
/// the kernel's values and log-probs equal libtorch's forward on the stored observations;
/// the stored transitions are shared's dynamics; sampled actions follow the softmax.
pub(super) fn graph_checks(gpu: &Arc<Gpu>) -> Vec<Value> {
    const N: usize = 2048;
    const T: usize = 64;
    let seed = 3;
    let dev = Device::Cuda(0);
    tch::manual_seed(1);
    let net = ActorCritic::new(cartpole_arch(), dev);
    let run = |direct: bool| -> Result<(DeviceRollout, DeviceCartPole), String> {
        let mut env = DeviceCartPole::new(N, seed, dev);
        let rollout = DeviceRollout::new(&mut env, T, 4, 1);
        let mut g = GraphRollout::new(Arc::clone(gpu), &env, &cartpole_arch(), seed)?;
        for _ in 0..2 {
            g.run(T, &net.flat, &env, &rollout.buffers(), direct)?;
        }
        Ok((rollout, env))
    };
    let (graph, direct) = match (run(false), run(true)) {
        (Ok(g), Ok(d)) => (g, d),
        (Err(e), _) | (_, Err(e)) => return vec![check("graph_rollout", false, "-", json!(e))],
    };
    let (a, b) = (graph.0.buffers(), direct.0.buffers());
    let pairs = [
        (a.obs, b.obs),
        (a.actions, b.actions),
        (a.log_probs, b.log_probs),
        (a.values, b.values),
        (a.final_obs, b.final_obs),
        (a.done, b.done),
    ];
    let same = pairs.iter().all(|(x, y)| x.to_kind(Kind::Double).equal(&y.to_kind(Kind::Double)));
    let mut out = vec![check(
        "graph_replay_equals_direct_launches",
        same,
        "bit for bit",
        json!({"envs": N, "steps": T, "rollouts": 2}),
    )];

    let (obs, actions) = (a.obs.view([-1, 4]), a.actions.view([-1, 1]));
    let (dv, dl) = forward_diffs(&net, &a);
    out.push(check(
        "rollout_kernel_matches_libtorch_forward",
        dv <= 1e-4 && dl <= 1e-4,
        "|Δvalue| ≤ 1e-4, |Δlog-prob| ≤ 1e-4",
        json!({"max_value_diff": dv, "max_log_prob_diff": dl}),
    ));

    let (o, f, act) = (host_f32(&obs), host_f32(a.final_obs), host_f32(&actions));
    let worst = (0..N * T).map(|k| {
        let s = dynamics_f32([o[4 * k], o[4 * k + 1], o[4 * k + 2], o[4 * k + 3]], act[k] as i64);
        max_abs_diff(&s, &f[4 * k..4 * k + 4])
    });
    let worst = worst.fold(0.0, f64::max);
    let p_right = tch::no_grad(|| net.logits(&obs).softmax(-1, Kind::Float).select(1, 1).mean(Kind::Float));
    let (p, freq) =
        (f64::try_from(p_right).unwrap_or(-1.0), act.iter().map(|&x| x as f64).sum::<f64>() / act.len() as f64);
    out.push(check(
        "rollout_kernel_transitions_and_sampling",
        worst <= 2e-6 && (p - freq).abs() <= 0.01,
        "|Δstate| ≤ 2e-6 against shared's dynamics; share of action 1 within 0.01 of the mean softmax",
        json!({"max_abs_diff": worst, "mean_p_action_1": p, "share_action_1": freq, "samples": N * T}),
    ));
    out
}

/// The rollout kernel's forward, shared by a warp's lanes, at widths that leave lanes
/// idle or give them two outputs (48, 37 and 64 wide, three hidden layers): its values
/// and log-probs equal libtorch's forward on the stored observations.
pub(super) fn odd_widths_check(gpu: &Arc<Gpu>) -> Value {
    const N: usize = 1000;
    const T: usize = 8;
    let arch = Architecture { obs_dim: 4, hidden: vec![48, 37, 64], logits: 2, gaussian: 0 };
    let dev = Device::Cuda(0);
    tch::manual_seed(2);
    let net = ActorCritic::new(arch.clone(), dev);
    let mut env = DeviceCartPole::new(N, 5, dev);
    let rollout = DeviceRollout::new(&mut env, T, 4, 1);
    let ran = GraphRollout::new(Arc::clone(gpu), &env, &arch, 5)
        .and_then(|mut g| g.run(T, &net.flat, &env, &rollout.buffers(), false));
    if let Err(e) = ran {
        return check("rollout_kernel_odd_widths", false, "-", json!(e));
    }
    let (dv, dl) = forward_diffs(&net, &rollout.buffers());
    check(
        "rollout_kernel_odd_widths",
        dv <= 1e-4 && dl <= 1e-4,
        "|Δvalue| ≤ 1e-4, |Δlog-prob| ≤ 1e-4 against libtorch at widths 48, 37, 64",
        json!({"max_value_diff": dv, "max_log_prob_diff": dl, "envs": N, "steps": T}),
    )
}

/// GAE's CUDA kernel against the host loop on random rollouts with terminations and
/// truncations (shapes that are not multiples of a block): equal to the bit.
pub(super) fn gae_check(gpu: &Arc<Gpu>) -> Value {
    use crate::cartpole::device::rollout::gae_kernel;
    use hotlab_train::gae::{gae, GaeTensors, RandomRollout};
    let f = match gpu.function("gae") {
        Ok(f) => f,
        Err(e) => return check("gae_kernel_matches_host", false, "-", json!(e)),
    };
    let mut rng = HostRng::new(7);
    let mut worst = 0.0f64;
    let mut equal = true;
    for (steps, envs) in [(16usize, 4096usize), (1, 3), (37, 1000), (128, 300)] {
        let r = RandomRollout::draw(&mut rng, steps, envs);
        let (adv, ret) = gae(&r.input(), 0.99, 0.95);
        match gae_kernel(gpu, &f, &GaeTensors::of(&r.tensors(Device::Cuda(0))), 0.99, 0.95) {
            Ok((a, b)) => {
                let (a, b) = (host_f32(&a), host_f32(&b));
                equal &= a == adv && b == ret;
                worst = worst.max(max_abs_diff(&a, &adv)).max(max_abs_diff(&b, &ret));
            }
            Err(e) => return check("gae_kernel_matches_host", false, "-", json!(e)),
        }
    }
    check(
        "gae_kernel_matches_host",
        equal,
        "bit for bit, at 16×4096, 1×3, 37×1000 and 128×300",
        json!({"max_abs_diff": worst}),
    )
}

/// The largest differences between the values and log-probs a rollout's kernel stored and
/// libtorch's forward of `net` on the stored observations and actions.
fn forward_diffs(net: &ActorCritic, b: &Buffers<'_>) -> (f64, f64) {
    let (obs, actions) = (b.obs.view([-1, 4]), b.actions.view([-1, 1]));
    let (values, lp) = tch::no_grad(|| {
        let logits = net.logits(&obs);
        let (lp, _) = hotlab_train::distribution::log_prob_and_entropy(&logits, None, &[2], &actions);
        (net.value(&obs), lp)
    });
    let dv = max_abs_diff(&host_f32(&values), &host_f32(b.values));
    (dv, max_abs_diff(&host_f32(&lp), &host_f32(b.log_probs)))
}

//! `--host-exec batched`: the hosts of a batch of envs trained as one model with a leading
//! env dimension. Each stage is one grouped convolution over every host's weights (the
//! hosts' channels side by side, one group per host), each blueprint one batched call over
//! the hosts that run a seed of it in that slot, the head one batched matmul, the loss one
//! call; autograd hands each host's own tensors their gradients and each host's Adam steps
//! them as before. A host whose epoch is shorter (its tempo) simply leaves the batch after
//! its last minibatch. Same draws, same seeds' modes (learning, blended, masked), same
//! arithmetic up to the order of the reductions: the same hosts to rounding (tested).

use super::{Host, Slot, SLOTS};
use crate::morpho::blueprint::Blueprint;
use crate::morpho::mixed;
use hotlab_env::rng::HostRng;
use hotlab_specs::morpho::SlotPool;
use hotlab_specs::morpho::{HOST_BACKWARD, HOST_FORWARD, HOST_OPTIMIZER, HOST_PASSES, HOST_SAMPLES};
use hotlab_train::exec::parts::PartClock;
use std::time::Instant;
use tch::{Kind, Reduction, Tensor};

/// A host's part in a batched epoch: its training data and minibatch draws.
pub struct Member<'a> {
    pub host: &'a mut Host,
    pub x: &'a Tensor,
    pub y: &'a Tensor,
    pub rng: &'a mut HostRng,
    /// Minibatches in its epoch.
    pub steps: u32,
}

/// Trains every member's host for its `steps` minibatches of `batch`, the hosts still in
/// their epoch as one model per minibatch; each host's mean loss and accuracy.
pub fn train(members: &mut [Member<'_>], batch: i64, clock: &PartClock) -> Vec<(f64, f64)> {
    let mut sums = vec![(0.0, 0.0); members.len()];
    members.iter_mut().for_each(|m| m.host.mark_stepped());
    let longest = members.iter().map(|m| m.steps).max().unwrap_or(0);
    for step in 0..longest {
        let t = Instant::now();
        let active: Vec<usize> = (0..members.len()).filter(|&i| members[i].steps > step).collect();
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        for &i in &active {
            let m = &mut members[i];
            let n = m.x.size()[0] as u64;
            let idx: Vec<i64> = (0..batch).map(|_| m.rng.below(n) as i64).collect();
            let idx = Tensor::from_slice(&idx).to(m.x.device());
            xs.push(m.x.index_select(0, &idx));
            ys.push(m.y.index_select(0, &idx));
        }
        let hosts: Vec<&Host> = active.iter().map(|&i| &*members[i].host).collect();
        let logits = forward(&hosts, &Tensor::stack(&xs, 0));
        let y = Tensor::stack(&ys, 0);
        let (a, b, classes) = logits.size3().expect("logits are [hosts, batch, classes]");
        let per_host = logits
            .view([a * b, classes])
            .log_softmax(-1, Kind::Float)
            .nll_loss_nd::<Tensor>(&y.view([a * b]), None, Reduction::None, -100)
            .view([a, b])
            .mean_dim(1, false, Kind::Float);
        let right = logits.argmax(-1, false).eq_tensor(&y).to_kind(Kind::Float).mean_dim(1, false, Kind::Float);
        let losses = Vec::<f64>::try_from(&per_host.to_kind(Kind::Double)).unwrap_or_default();
        let rights = Vec::<f64>::try_from(&right.to_kind(Kind::Double)).unwrap_or_default();
        for (k, &i) in active.iter().enumerate() {
            sums[i].0 += losses[k];
            sums[i].1 += rights[k];
        }
        let t = clock.lap(HOST_FORWARD, t);
        for &i in &active {
            members[i].host.opt.zero_grad();
        }
        per_host.sum(Kind::Float).backward();
        let t = clock.lap(HOST_BACKWARD, t);
        for &i in &active {
            members[i].host.opt.step();
        }
        clock.lap(HOST_OPTIMIZER, t);
        clock.count(HOST_PASSES, 1);
        clock.count(HOST_SAMPLES, active.len() as u64 * batch as u64);
    }
    members.iter().zip(sums).map(|(m, (l, r))| (l / m.steps.max(1) as f64, r / m.steps.max(1) as f64)).collect()
}

/// Concatenates one tensor per host along `dim`.
fn cat(hosts: &[&Host], dim: i64, part: impl Fn(&Host) -> &Tensor) -> Tensor {
    Tensor::cat(&hosts.iter().map(|h| part(h)).collect::<Vec<_>>(), dim)
}

/// The class logits `[hosts, batch, classes]` of each host on its own images
/// `x` `[hosts, batch, 1, side, side]`, in a training step (a sleeper pool runs its sleepers).
pub fn forward(hosts: &[&Host], x: &Tensor) -> Tensor {
    let n = hosts.len() as i64;
    let (_, b, _, side, _) = x.size5().expect("images are [hosts, batch, 1, side, side]");
    // Each host's images as its own input channel.
    let mut h = x.transpose(0, 1).reshape([b, n, side, side]);
    let kind = hosts[0].kind;
    let op = |t: &Tensor| mixed::operand(t, kind);
    for s in 0..SLOTS {
        let stride = super::stage_stride(s);
        let w = cat(hosts, 0, |host| &host.stages[s].ws);
        let bias = cat(hosts, 0, |host| host.stages[s].bs.as_ref().expect("stages have a bias"));
        let act =
            op(&h).conv2d(&op(&w), Some(&op(&bias)), [stride, stride], [1, 1], [1, 1], n).to_kind(Kind::Float).relu();
        h = seeds(hosts, s, act);
    }
    let c = hosts[0].slots[2].channels;
    let features = h.mean_dim(&[2i64, 3][..], false, Kind::Float).view([b, n, c]).transpose(0, 1);
    let w = Tensor::stack(&hosts.iter().map(|h| &h.head.ws).collect::<Vec<_>>(), 0);
    let bias =
        Tensor::stack(&hosts.iter().map(|h| h.head.bs.as_ref().expect("the head has a bias")).collect::<Vec<_>>(), 0);
    (op(&features).matmul(&op(&w).transpose(1, 2)) + op(&bias).unsqueeze(1)).to_kind(Kind::Float)
}

/// How a host's seed of a blueprint takes part in a step: as [`Host::forward`] runs it.
#[derive(Clone, Copy)]
enum Mode {
    /// Learning at α = 0: adds `s − detach(s)` of `s = seed(detach(x))`.
    Learning,
    /// Blended: adds `α·seed(x)`.
    Blended(f64),
    /// A sleeper: adds `0·seed(x)`.
    Masked,
}

fn mode(slot: &Slot, blueprint: usize, sleepers: bool) -> Option<Mode> {
    slot.seeds[blueprint].as_ref()?;
    let live = slot.live.is_some_and(|l| super::index(l) == blueprint);
    if live && slot.learning {
        Some(Mode::Learning)
    } else if live && slot.alpha != 0.0 {
        Some(Mode::Blended(slot.alpha))
    } else {
        sleepers.then_some(Mode::Masked)
    }
}

/// Slot `s`'s seeds added to the stage's activation `act` `[batch, hosts · channels, h, w]`.
fn seeds(hosts: &[&Host], s: usize, act: Tensor) -> Tensor {
    let (b, _, hh, ww) = act.size4().expect("an activation is [batch, channels, h, w]");
    let (n, c) = (hosts.len() as i64, hosts[0].slots[s].channels);
    let mut h = act.view([b, n, c, hh, ww]);
    for (bp, blueprint) in Blueprint::ALL.into_iter().enumerate() {
        let runs: Vec<(usize, Mode)> = hosts
            .iter()
            .enumerate()
            .filter_map(|(i, host)| Some((i, mode(&host.slots[s], bp, host.pool == SlotPool::Sleeper)?)))
            .collect();
        if runs.is_empty() {
            continue;
        }
        let factor = |f: &dyn Fn(Mode) -> f64| {
            let v: Vec<f32> = runs.iter().map(|&(_, m)| f(m) as f32).collect();
            Tensor::from_slice(&v).view([1, runs.len() as i64, 1, 1, 1]).to(act.device())
        };
        let learning = factor(&|m| matches!(m, Mode::Learning) as u8 as f64);
        let scale = factor(&|m| match m {
            Mode::Learning => 1.0,
            Mode::Blended(alpha) => alpha,
            Mode::Masked => 0.0,
        });
        let idx = Tensor::from_slice(&runs.iter().map(|&(i, _)| i as i64).collect::<Vec<_>>()).to(act.device());
        let x = act.view([b, n, c, hh, ww]).index_select(1, &idx);
        // A learning seed sees its input detached: the host gets no gradient through it.
        let input = if runs.iter().any(|&(_, m)| matches!(m, Mode::Learning)) {
            x.detach() * &learning + &x * (learning.neg() + 1.0)
        } else {
            x
        };
        let modules: Vec<_> =
            runs.iter().map(|&(i, _)| hosts[i].slots[s].seeds[bp].as_ref().expect("a seed runs")).collect();
        let params: Vec<_> = modules.iter().map(|m| m.named()).collect();
        let out = blueprint.forward_batched(&input, &params, hosts[0].kind);
        let added = &out * &scale - out.detach() * &learning;
        h = h.index_add(1, &idx, &added);
    }
    h.view([b, n * c, hh, ww])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::morpho::glyphs::{generate, TaskSpec};
    use crate::morpho::host::tensors;
    use crate::morpho::part_clock;
    use tch::Device;

    /// Three hosts in different states — bare; a conv3x3 seed learning and an MLP blended
    /// in; attention fully blended, a norm learning and a depthwise seed just grafted (not
    /// run) — trained for 5, 2 and 3 minibatches one by one and as one batch: the same
    /// losses and the same weights to rounding, with a dynamic pool and a sleeper pool.
    #[test]
    fn batched_hosts_train_as_each_host_alone_does() {
        let task = generate(&TaskSpec { seed: 4, train: 256, val: 64, ..TaskSpec::default() });
        let (x, y) = tensors(&task.train, Device::Cpu);
        let cases = [
            (SlotPool::Dynamic, Kind::Float, 1e-5),
            (SlotPool::Sleeper, Kind::Float, 1e-5),
            (SlotPool::Dynamic, Kind::BFloat16, 1e-3),
        ];
        for (pool, kind, tolerance) in cases {
            let make = || -> Vec<(Host, HostRng)> {
                (0..3u64)
                    .map(|i| {
                        let mut rng = HostRng::new(40 + i);
                        let mut host = Host::new(4, 3e-3, pool, Device::Cpu, &mut rng).unwrap();
                        host.set_kind(kind);
                        let mut graft = |s: usize, bp: Blueprint, alpha: f64, learning: bool| {
                            host.graft(s, bp, alpha, 1.0, &mut rng);
                            host.slots[s].learning = learning;
                        };
                        match i {
                            1 => {
                                graft(0, Blueprint::Conv3x3, 0.0, true);
                                graft(2, Blueprint::Mlp, 0.5, false);
                            }
                            2 => {
                                graft(1, Blueprint::Attention, 1.0, false);
                                graft(0, Blueprint::Norm, 0.0, true);
                                graft(2, Blueprint::Depthwise, 0.0, false);
                            }
                            _ => {}
                        }
                        (host, rng)
                    })
                    .collect()
            };
            let steps = [5u32, 2, 3];
            let clock = part_clock();
            let mut alone = make();
            let alone_losses: Vec<(f64, f64)> = alone
                .iter_mut()
                .zip(steps)
                .map(|((host, rng), n)| host.train_steps(&x, &y, n, 16, rng, &clock))
                .collect();
            let mut together = make();
            let mut members: Vec<Member<'_>> = together
                .iter_mut()
                .zip(steps)
                .map(|((host, rng), steps)| Member { host, x: &x, y: &y, rng, steps })
                .collect();
            let batched_losses = train(&mut members, 16, &clock);
            for (a, b) in alone_losses.iter().zip(&batched_losses) {
                assert!((a.0 - b.0).abs() < tolerance, "{pool:?} {kind:?}: losses {a:?} vs {b:?}");
                assert!(kind != Kind::Float || a.1 == b.1, "{pool:?}: accuracies {a:?} vs {b:?}");
            }
            let apart = |a: &Host, b: &Host| {
                let (va, vb) = (a.all_params(), b.all_params());
                assert_eq!(va.len(), vb.len());
                va.iter().zip(&vb).map(|(p, q)| (p - q).abs().max().double_value(&[])).fold(0.0, f64::max)
            };
            let fresh = make();
            for (((a, _), (b, _)), (f, _)) in alone.iter().zip(&together).zip(&fresh) {
                let worst = apart(a, b);
                assert!(worst < tolerance, "{pool:?} {kind:?}: weights apart by {worst}");
                assert!(apart(a, f) > 1e-4, "{pool:?}: the hosts trained");
            }
        }
    }
}

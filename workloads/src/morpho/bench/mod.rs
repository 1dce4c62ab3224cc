//! `hotlab bench host`: the morpho env's host training alone, bare and grown, as arithmetic
//! throughput against this machine's sgemm: is a host step compute-bound or overhead-bound?
//! FLOPs are counted from the layer shapes (a training step ≈ 3 × the forward: the
//! backward computes the input's gradient and the weights', each about a forward).
//! `hotlab bench morpho`, the whole trainer per knob setting, is [`trainer`]; the CLI's
//! flags and printouts of both are its commands (`cli/src/commands/`).

pub mod growth;
pub mod trainer;

use super::blueprint::Blueprint;
use super::host::{batch, tensors, Host, SLOTS};
use crate::morpho::glyphs::{generate, TaskSpec, CLASSES, SIDE};
use crate::morpho::part_clock;
use hotlab_env::rng::HostRng;
use hotlab_specs::morpho::SlotPool;
use serde::Serialize;
use std::time::Instant;
use tch::{Device, Tensor};

/// What to measure.
#[derive(Clone, Debug)]
pub struct HostBench {
    pub width: i64,
    pub batch: i64,
    /// Seconds per measurement.
    pub seconds: f64,
    /// Hosts in the batch of the `--host-exec` comparison.
    pub envs: usize,
    /// Where the hosts train (the per-host figures and Shapley credit stay on the CPU).
    pub device: Device,
}

/// One host setup's throughput.
#[derive(Clone, Debug, Serialize)]
pub struct HostFigure {
    /// `bare`, or the blueprint grown (α = 1) in every slot.
    pub host: String,
    pub params: usize,
    pub minibatches_per_s: f64,
    pub samples_per_s: f64,
    /// Counted training FLOPs per minibatch (None where the blueprint's cost is not counted).
    pub mflop_per_minibatch: Option<f64>,
    pub gflops: Option<f64>,
    /// `gflops` over one thread's sgemm.
    pub share_of_sgemm: Option<f64>,
}

/// Shapley credit of three live seeds, exact or from sampled orderings: its cost and its
/// error against the exact values.
#[derive(Clone, Debug, Serialize)]
pub struct ShapleyFigure {
    /// Sampled orderings (None: exact, every ordering).
    pub perms: Option<usize>,
    /// Validations run per credit (distinct coalitions less the full one), mean over draws.
    pub validations: f64,
    pub ms_per_credit: f64,
    /// Mean |sampled − exact| over the seeds and draws, in validation accuracy.
    pub mean_abs_error: f64,
}

/// `--host-exec`: a batch of hosts trained one after another or as one model.
#[derive(Clone, Debug, Serialize)]
pub struct ExecFigure {
    /// `bare`, or `conv3x3` in every slot.
    pub host: String,
    /// `per_env` or `batched`.
    pub exec: String,
    pub envs: usize,
    /// Host minibatches per second, all hosts together.
    pub minibatches_per_s: f64,
    pub gflops: f64,
    pub share_of_sgemm: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct HostReport {
    pub width: i64,
    pub batch: i64,
    /// libtorch's sgemm (1024 × 1024), one thread and every thread: the peaks to compare with.
    pub sgemm_gflops_1_thread: f64,
    pub sgemm_gflops_all_threads: f64,
    pub threads: i32,
    pub hosts: Vec<HostFigure>,
    /// `--host-exec`: a batch of `envs` hosts, one by one and as one model.
    pub exec: Vec<ExecFigure>,
    /// `--shapley-perms`: cost against estimation error (conv3x3, mlp and attention live).
    pub shapley: Vec<ShapleyFigure>,
}

/// Forward FLOPs of a 3×3 convolution per image.
fn conv(cin: i64, cout: i64, side: i64) -> f64 {
    2.0 * (cin * cout * 9 * side * side) as f64
}

/// Training FLOPs per minibatch of the host at `width`, with `grown` in every slot where
/// its cost is counted (a 3×3 convolution; None for the others).
fn flops(width: i64, batch: i64, grown: Option<Blueprint>) -> Option<f64> {
    let s = SIDE as i64;
    let stages = [(1, width, s), (width, 2 * width, s / 2), (2 * width, 4 * width, s / 4)];
    let mut forward: f64 = stages.iter().map(|&(i, o, side)| conv(i, o, side)).sum::<f64>();
    forward += 2.0 * (4 * width * CLASSES as i64) as f64;
    match grown {
        None => {}
        Some(Blueprint::Conv3x3) => forward += stages.iter().map(|&(_, o, side)| conv(o, o, side)).sum::<f64>(),
        Some(_) => return None,
    }
    Some(3.0 * forward * batch as f64)
}

/// Runs the measurements: sgemm, then the bare host and each blueprint in every slot, each
/// trained on one thread (as an env's host is) for `seconds`.
pub fn run(b: &HostBench, mut progress: impl FnMut(&str)) -> anyhow::Result<HostReport> {
    let threads = tch::get_num_threads();
    let all = hotlab_train::system::sgemm_gflops(Device::Cpu);
    tch::set_num_threads(1);
    let one = hotlab_train::system::sgemm_gflops(Device::Cpu);
    let task = generate(&TaskSpec { seed: 1, train: 1024, val: 64, ..TaskSpec::default() });
    let (x, y) = tensors(&task.train, Device::Cpu);
    let clock = part_clock();
    let mut hosts = Vec::new();
    for grown in std::iter::once(None).chain(Blueprint::ALL.map(Some)) {
        let name = grown.map_or("bare", Blueprint::name);
        progress(name);
        let mut rng = HostRng::new(3);
        let mut host = Host::new(b.width, 1e-3, SlotPool::Dynamic, Device::Cpu, &mut rng)?;
        if let Some(bp) = grown {
            (0..SLOTS).for_each(|s| host.graft(s, bp, 1.0, 1.0, &mut rng));
        }
        host.train_steps(&x, &y, 2, b.batch, &mut rng, &clock);
        let (start, mut done) = (Instant::now(), 0u64);
        while start.elapsed().as_secs_f64() < b.seconds {
            host.train_steps(&x, &y, 4, b.batch, &mut rng, &clock);
            done += 4;
        }
        let per_s = done as f64 / start.elapsed().as_secs_f64();
        let f = flops(b.width, b.batch, grown);
        let gflops = f.map(|f| f * per_s / 1e9);
        hosts.push(HostFigure {
            host: name.into(),
            params: host.params(),
            minibatches_per_s: per_s,
            samples_per_s: per_s * b.batch as f64,
            mflop_per_minibatch: f.map(|f| f / 1e6),
            gflops,
            share_of_sgemm: gflops.map(|g| g / one),
        });
    }
    let exec = match b.device {
        Device::Cpu => exec_figures(b, one, &x, &y, &mut progress)?,
        d => {
            let (xd, yd) = (x.to(d), y.to(d));
            exec_figures(b, hotlab_train::system::sgemm_gflops(d), &xd, &yd, &mut progress)?
        }
    };
    progress("shapley");
    let shapley = shapley_figures(b, &x, &y, &task)?;
    tch::set_num_threads(threads);
    Ok(HostReport {
        width: b.width,
        batch: b.batch,
        sgemm_gflops_1_thread: one,
        sgemm_gflops_all_threads: all,
        threads,
        hosts,
        exec,
        shapley,
    })
}

/// A batch of `b.envs` hosts (bare, and conv3x3 in every slot), one minibatch each per
/// step, trained one after another and as one model, on one thread or on `x`'s GPU (each
/// step ends with reading its losses, so the GPU's time is counted).
fn exec_figures(
    b: &HostBench,
    sgemm: f64,
    x: &Tensor,
    y: &Tensor,
    progress: &mut impl FnMut(&str),
) -> anyhow::Result<Vec<ExecFigure>> {
    let clock = part_clock();
    let mut out = Vec::new();
    for grown in [None, Some(Blueprint::Conv3x3)] {
        for batched in [false, true] {
            let (name, exec) = (grown.map_or("bare", Blueprint::name), if batched { "batched" } else { "per_env" });
            progress(&format!("{} hosts, {name}, {exec}", b.envs));
            let mut hosts = (0..b.envs as u64)
                .map(|i| {
                    let mut rng = HostRng::new(7 + i);
                    let mut host = Host::new(b.width, 1e-3, SlotPool::Dynamic, x.device(), &mut rng)?;
                    if let Some(bp) = grown {
                        (0..SLOTS).for_each(|s| host.graft(s, bp, 1.0, 1.0, &mut rng));
                    }
                    Ok((host, rng))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let step = |hosts: &mut Vec<(Host, HostRng)>| {
                if batched {
                    let mut members: Vec<batch::Member<'_>> =
                        hosts.iter_mut().map(|(host, rng)| batch::Member { host, x, y, rng, steps: 1 }).collect();
                    batch::train(&mut members, b.batch, &clock);
                } else {
                    hosts.iter_mut().for_each(|(host, rng)| {
                        host.train_steps(x, y, 1, b.batch, rng, &clock);
                    });
                }
            };
            step(&mut hosts);
            let (start, mut done) = (Instant::now(), 0usize);
            while start.elapsed().as_secs_f64() < b.seconds {
                step(&mut hosts);
                done += b.envs;
            }
            let per_s = done as f64 / start.elapsed().as_secs_f64();
            let gflops = flops(b.width, b.batch, grown).unwrap_or(0.0) * per_s / 1e9;
            out.push(ExecFigure {
                host: name.into(),
                exec: exec.into(),
                envs: b.envs,
                minibatches_per_s: per_s,
                gflops,
                share_of_sgemm: gflops / sgemm,
            });
        }
    }
    Ok(out)
}

/// Draws of each sampled setting.
const DRAWS: u64 = 20;

/// A host grown in every slot (conv3x3, mlp, attention, α = 1), trained briefly, credited
/// exactly and with 1 to 8 sampled orderings, `DRAWS` draws each.
fn shapley_figures(
    b: &HostBench,
    x: &Tensor,
    y: &Tensor,
    task: &crate::morpho::glyphs::Task,
) -> anyhow::Result<Vec<ShapleyFigure>> {
    let (xv, yv) = tensors(&task.val, Device::Cpu);
    let mut rng = HostRng::new(5);
    let mut host = Host::new(b.width, 3e-3, SlotPool::Dynamic, Device::Cpu, &mut rng)?;
    for (s, bp) in [Blueprint::Conv3x3, Blueprint::Mlp, Blueprint::Attention].into_iter().enumerate() {
        host.graft(s, bp, 1.0, 1.0, &mut rng);
    }
    host.train_steps(x, y, 32, b.batch, &mut rng, &part_clock());
    let mut credit = |perms: Option<usize>, draw: u64| {
        let mut validations = 0usize;
        let full = host.evaluate(&xv, &yv).1;
        let mut value = |mask: u32| {
            if mask == 0b111 {
                return full;
            }
            validations += 1;
            let kept: Vec<f64> = host.slots.iter().map(|s| s.alpha).collect();
            (0..SLOTS).filter(|s| mask & (1 << s) == 0).for_each(|s| host.slots[s].alpha = 0.0);
            let v = host.evaluate(&xv, &yv).1;
            host.slots.iter_mut().zip(kept).for_each(|(s, a)| s.alpha = a);
            v
        };
        let mut draws = HostRng::new(draw);
        let t = Instant::now();
        let values = crate::morpho::rules::shapley(SLOTS, &mut value, perms.map(|n| (n, &mut draws)));
        (values, validations, t.elapsed().as_secs_f64())
    };
    let (exact, validations, secs) = credit(None, 0);
    let mut out = vec![ShapleyFigure {
        perms: None,
        validations: validations as f64,
        ms_per_credit: 1e3 * secs,
        mean_abs_error: 0.0,
    }];
    for n in [1, 2, 4, 8] {
        let (mut v, mut s, mut err) = (0.0, 0.0, 0.0);
        for draw in 1..=DRAWS {
            let (values, validations, secs) = credit(Some(n), draw);
            err += values.iter().zip(&exact).map(|(a, b)| (a - b).abs()).sum::<f64>() / SLOTS as f64;
            (v, s) = (v + validations as f64, s + secs);
        }
        let d = DRAWS as f64;
        out.push(ShapleyFigure {
            perms: Some(n),
            validations: v / d,
            ms_per_credit: 1e3 * s / d,
            mean_abs_error: err / d,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_count_the_hosts_convolutions() {
        // Width 1, one image: stages 1→1 at 16², 1→2 at 8², 2→4 at 4², head 4→10.
        let forward = 2.0 * (9.0 * 256.0 + 18.0 * 64.0 + 72.0 * 16.0 + 40.0);
        assert_eq!(flops(1, 1, None), Some(3.0 * forward));
        let grown = forward + 2.0 * (9.0 * 256.0 + 36.0 * 64.0 + 144.0 * 16.0);
        assert_eq!(flops(1, 1, Some(Blueprint::Conv3x3)), Some(3.0 * grown));
        assert_eq!(flops(1, 1, Some(Blueprint::Attention)), None);
    }
}

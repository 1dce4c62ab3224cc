//! `--update graph` against today's update on made-up rollouts: the same parameters and
//! statistics to rounding after several updates. On the CPU the captured path's ops run
//! eagerly (its static buffers, device step count and learning-rate tensor: the test
//! below, over seeds and shapes); on CUDA they are captured and replayed (`gpu-check`).

use super::CartPole;
use hotlab_core::counters::Counters;
use hotlab_env::rng::HostRng;
use hotlab_spec::RunSpec;
use hotlab_train::adam::FlatAdam;
use hotlab_train::cuda::shim::Launches;
use hotlab_train::models::mlp::policy::{ActorCritic, Architecture};
use hotlab_train::models::mlp::MlpAgent;
use hotlab_train::ppo::captured::{CapturedUpdate, Shuffles};
use hotlab_train::ppo::update::{self, UpdateCtx};
use hotlab_train::profiler::{Meters, Profiler};
use hotlab_train::rollout::Batch;
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

/// A rollout's worth of made-up rows, drawn from `rng`.
fn batch(n: i64, device: Device, rng: &mut HostRng) -> Batch {
    let mut draw = |count: i64, scale: f32, shift: f32| -> Tensor {
        Tensor::from_slice(&(0..count).map(|_| rng.next_f32() * scale + shift).collect::<Vec<f32>>())
    };
    let obs = draw(4 * n, 0.4, -0.2).view([n, 4]);
    let log_probs = draw(n, 0.5, -1.0);
    let values = draw(n, 2.0, 0.0);
    let advantages = draw(n, 2.0, -1.0);
    let returns = draw(n, 10.0, 0.0);
    let actions = Tensor::from_slice(&(0..n).map(|i| (i * 7 + n) % 2).collect::<Vec<i64>>()).view([n, 1]);
    let on = |t: Tensor| t.to_device(device);
    Batch {
        obs: on(obs),
        extra: Vec::new(),
        actions: on(actions),
        real_actions: None,
        log_probs: on(log_probs),
        values: on(values),
        advantages: on(advantages),
        returns: on(returns),
        memory: None,
    }
}

/// A fresh network from `seed`: its parameters drawn from the run's own stream (not
/// libtorch's global generator, which tests on other threads reseed).
fn agent(seed: u64, device: Device) -> MlpAgent {
    let arch = Architecture { obs_dim: 4, hidden: vec![64, 64], logits: 2, gaussian: 0 };
    let mut rng = HostRng::new(seed + 1000);
    let flat: Vec<f32> = (0..arch.num_params()).map(|_| (rng.next_f32() - 0.5) * 0.5).collect();
    let net = ActorCritic::from_flat(arch, Tensor::from_slice(&flat).to_device(device));
    MlpAgent { net, helper: None, env: Arc::new(CartPole) }
}

/// Which update [`train_updates`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Today's update: libtorch's autograd, minibatch by minibatch.
    Autograd,
    /// The captured path's ops (static buffers, hand-written backward), launched eagerly.
    Static,
    /// The captured path captured once after its warm-up and replayed (CUDA only; on the
    /// CPU it is [`Path::Static`]).
    Replayed,
    /// [`Path::Replayed`] with hotlab's loss and Adam kernels (`--update graph_fused`;
    /// CUDA only).
    Fused,
}

/// Where [`train_updates`]' epoch shuffles come from.
pub enum Shuffle {
    /// The run's stream on the host, as the eager update draws it.
    Host,
    /// Drawn on the device inside the captured update (the captured paths only).
    Device,
    /// These orders, `[epochs, rows]` per update (another run's, read back).
    Given(Vec<Tensor>),
}

impl Shuffle {
    /// [`Shuffle::Given`] the first `updates` of `orders`.
    pub fn given(orders: &[Tensor], updates: usize) -> Self {
        Shuffle::Given(orders.iter().take(updates).map(Tensor::shallow_clone).collect())
    }
}

/// What [`train_updates`] ends with.
pub struct Trained {
    /// The flat parameters after the updates.
    pub params: Vec<f32>,
    /// Each update's statistics.
    pub stats: Vec<Vec<f64>>,
    /// Each update's shuffles, `[epochs, rows]` on the CPU (the captured paths').
    pub orders: Vec<Tensor>,
    /// What one replay launched ([`Path::Replayed`] on CUDA), and the replays.
    pub launches: Option<Launches>,
    pub replays: u64,
}

/// `updates` updates on `device` of a fresh network from `seed` on the same batches, by
/// `path`, with the shuffles from `shuffle`.
pub fn train_updates(
    spec: &RunSpec,
    device: Device,
    seed: u64,
    updates: usize,
    path: Path,
    shuffle: &Shuffle,
) -> Trained {
    let mut agent = agent(seed, device);
    let mut opt = FlatAdam::new(&agent.net.flat, 1e-5);
    let captured = matches!(path, Path::Replayed | Path::Fused) && device.is_cuda();
    let mut graph = CapturedUpdate::new(device, captured, path == Path::Fused);
    let (mut data, mut shuffles) = (HostRng::new(seed + 100), HostRng::new(seed));
    let (mut stats, mut orders) = (Vec::new(), Vec::new());
    for u in 0..updates {
        let b = batch(spec.batch_size() as i64, device, &mut data);
        let mut precision =
            hotlab_train::precision::resolve(hotlab_core::choices::Precision::Fp32, device).expect("fp32 anywhere");
        let lr = spec.ppo.lr * (1.0 - u as f64 / updates as f64);
        let ctx = UpdateCtx { spec, heads: &[2], lr, precision: &mut precision, telemetry: None, stop: None };
        let (mut prof, mut c) = (Profiler::new(None), Counters::default());
        let given = match shuffle {
            Shuffle::Given(all) => Some(all[u].to_device(device)),
            _ => None,
        };
        let out = if path != Path::Autograd {
            let from = match (shuffle, &given) {
                (Shuffle::Device, _) => Shuffles::Device,
                (_, Some(g)) => Shuffles::Given(g),
                _ => Shuffles::Host(&mut shuffles),
            };
            let meters = Meters { prof: &mut prof, counters: &mut c };
            let out = graph.update((&mut agent, &mut opt), &b, ctx, from, meters).expect("a capturable network");
            orders.extend(graph.orders().map(|o| o.copy().to_device(Device::Cpu)));
            out
        } else if let Some(g) = &given {
            let rows: Vec<Vec<i64>> =
                (0..g.size()[0]).map(|e| Vec::try_from(g.get(e).to_device(Device::Cpu)).unwrap()).collect();
            update::update_with(&mut agent, &mut opt, &b, ctx, &mut |e, o| o.clone_from(&rows[e]), &mut prof, &mut c)
        } else {
            assert!(matches!(shuffle, Shuffle::Host), "the autograd update draws its shuffles on the host");
            update::update(&mut agent, &mut opt, &b, ctx, &mut shuffles, &mut prof, &mut c)
        };
        stats.push(out.expect("not stopped").0 .0.iter().map(|(_, v)| *v).collect());
    }
    let params = Vec::<f32>::try_from(agent.net.flat.to_kind(Kind::Float)).unwrap_or_default();
    Trained { params, stats, orders, launches: graph.replayer.launches, replays: graph.replayer.replays }
}

/// The largest difference between two parameter vectors.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// How far apart two parameter vectors trained from one start ended.
#[derive(Clone, Copy, Debug)]
pub struct Agreement {
    /// The largest difference.
    pub max: f32,
    /// The share of the elements more than [`Agreement::ROUNDING`] apart.
    pub off: f64,
}

impl Agreement {
    /// What rounding alone moves an element by in a few updates.
    pub const ROUNDING: f32 = 2e-5;
    /// The share of elements rounding may push further: Adam divides each gradient by its
    /// own running size, so an element whose gradient is near 0 turns a rounding difference
    /// into a step of up to the learning rate, and which elements do so depends on the
    /// CPU's vector width (1.9e-4 apart on one CI machine, under 2e-6 on another).
    pub const OFF_SHARE: f64 = 0.01;

    pub fn of(a: &[f32], b: &[f32]) -> Self {
        let off = a.iter().zip(b).filter(|(x, y)| (*x - *y).abs() > Self::ROUNDING).count();
        Agreement { max: max_abs_diff(a, b), off: off as f64 / a.len().max(1) as f64 }
    }

    /// The same training to rounding: nearly every element within [`Agreement::ROUNDING`],
    /// and none further than one Adam step at `lr`.
    pub fn same_training(&self, lr: f64) -> bool {
        self.off <= Self::OFF_SHARE && f64::from(self.max) <= lr
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotlab_core::run::PpoSpec;

    fn spec(envs: usize, steps: usize, minibatches: usize, epochs: usize) -> RunSpec {
        RunSpec {
            envs,
            steps,
            ppo: PpoSpec { minibatches, epochs, lr: 2.5e-3, ..PpoSpec::default() },
            ..RunSpec::default()
        }
    }

    #[test]
    fn the_captured_update_run_eagerly_is_todays_update_over_seeds_and_shapes() {
        // (envs, steps, minibatches, epochs)
        for (envs, steps, minibatches, epochs) in [(8, 16, 4, 4), (32, 8, 2, 2), (4, 128, 4, 4), (64, 4, 1, 3)] {
            let spec = spec(envs, steps, minibatches, epochs);
            for seed in 1..=3 {
                let eager = train_updates(&spec, Device::Cpu, seed, 3, Path::Autograd, &Shuffle::Host);
                let captured = train_updates(&spec, Device::Cpu, seed, 3, Path::Static, &Shuffle::Host);
                let (eager, eager_stats, captured, captured_stats) =
                    (eager.params, eager.stats, captured.params, captured.stats);
                let start = Vec::<f32>::try_from(agent(seed, Device::Cpu).net.flat).unwrap();
                let moved = max_abs_diff(&eager, &start);
                let d = Agreement::of(&eager, &captured);
                let shape = format!("{envs}×{steps}, {minibatches} minibatches × {epochs} epochs, seed {seed}");
                assert!(moved > 1e-3, "{shape}: the updates moved the parameters ({moved})");
                assert!(d.same_training(spec.ppo.lr), "{shape}: {d:?} after 3 updates");
                for (a, b) in eager_stats.iter().flatten().zip(captured_stats.iter().flatten()) {
                    assert!(
                        (a - b).abs() <= 1e-4 * (1.0 + a.abs()),
                        "{shape}: statistics {eager_stats:?} vs {captured_stats:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn shuffles_drawn_on_the_device_are_permutations_and_the_update_is_todays_given_them() {
        // The device shuffles draw from libtorch's generator, which other tests seed and draw
        // from on parallel threads: holding it keeps both sides' draws their own.
        let _seeded = hotlab_train::testing::torch_seed(1);
        for (envs, steps, minibatches, epochs) in [(8, 16, 4, 4), (32, 8, 2, 2), (64, 4, 1, 3)] {
            let spec = spec(envs, steps, minibatches, epochs);
            for seed in 1..=3 {
                let shape = format!("{envs}×{steps}, {minibatches} minibatches × {epochs} epochs, seed {seed}");
                let drawn = train_updates(&spec, Device::Cpu, seed, 3, Path::Static, &Shuffle::Device);
                assert_eq!(drawn.orders.len(), 3, "{shape}");
                let rows = (envs * steps) as i64;
                for o in &drawn.orders {
                    assert_eq!(o.size(), [epochs as i64, rows], "{shape}");
                    let sorted = o.sort(1, false).0;
                    assert!(
                        sorted.equal(
                            &Tensor::arange(rows, (Kind::Int64, Device::Cpu)).expand([epochs as i64, rows], false)
                        ),
                        "{shape}: each epoch's order is a permutation"
                    );
                }
                let epochs_differ = epochs > 1 && !drawn.orders[0].get(0).equal(&drawn.orders[0].get(1));
                assert!(epochs == 1 || epochs_differ, "{shape}: each epoch draws its own order");
                assert!(!drawn.orders[0].equal(&drawn.orders[1]), "{shape}: each update draws anew");
                let given = Shuffle::given(&drawn.orders, 3);
                let eager = train_updates(&spec, Device::Cpu, seed, 3, Path::Autograd, &given);
                let d = Agreement::of(&eager.params, &drawn.params);
                assert!(d.same_training(spec.ppo.lr), "{shape}: {d:?} after 3 updates");
                // The comparison tells orders apart: the next update's orders in place of each
                // (with one minibatch the order cannot matter).
                if minibatches == 1 {
                    continue;
                }
                let shifted = Shuffle::Given((0..3).map(|u| drawn.orders[(u + 1) % 3].shallow_clone()).collect());
                let other = train_updates(&spec, Device::Cpu, seed, 3, Path::Autograd, &shifted);
                let apart = Agreement::of(&other.params, &drawn.params);
                assert!(!apart.same_training(spec.ppo.lr), "{shape}: other orders, {apart:?}");
                let again = train_updates(&spec, Device::Cpu, seed, 3, Path::Static, &given);
                assert_eq!(again.params, drawn.params, "{shape}: the same shuffles, the same update");
            }
        }
    }
}

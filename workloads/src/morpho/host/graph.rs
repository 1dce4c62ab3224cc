//! A sleeper host's training step as a CUDA graph (catalogue row 9, seed 003 strategy B):
//! with `--slots sleeper` every step runs the same ops on the same tensors, so after two
//! warm-up steps the host's minibatch (forward, loss, backward, Adam) is captured once and
//! replayed with one launch per minibatch for the rest of the host's life. What changes
//! between steps lives in tensors the graph reads: the minibatch's indices, each seed's
//! blend and learning flag ([`Host::forward_static`]), each optimizer entry's step count,
//! live flag and rate ([`HostAdam::step_static`]). A dynamic pool changes its parameter
//! set with every graft, which no captured graph survives: it is never captured.
//!
//! On a CPU (tests), for fp16 hosts of a dynamic pool (their loss scaler skips a step by
//! masking it on the device) or where a capture fails, the same static step runs eagerly.

use super::{correct, index, Epoch, Host, SLOTS};
use crate::morpho::adam::DeviceState;
use crate::morpho::blueprint::Blueprint;
use hotlab_specs::morpho::{GRAPH_REPLAYS, HOST_FORWARD, HOST_PASSES};
use hotlab_train::cuda::shim::Graph;
use hotlab_train::exec::parts::PartClock;
use std::time::Instant;
use tch::{Kind, Tensor};

/// Eager static steps before the capture (cuBLAS and cuDNN set themselves up in them).
const WARM_STEPS: u32 = 2;

/// A host's captured step and the tensors it reads and writes.
pub struct Captured {
    /// `[2, SLOTS, blueprints]`: each seed's blend (α where it blends) and learning flag.
    masks: Tensor,
    /// The masks last written, to write them only when a decision changed them.
    shown: Vec<f32>,
    adam: DeviceState,
    /// The minibatch's indices, copied in before each step.
    idx: Tensor,
    /// The step's loss and accuracy, added to the epoch's sums after each step.
    loss: Tensor,
    right: Tensor,
    /// Whether to capture (CUDA) or always run the static step eagerly.
    capture: bool,
    warm: u32,
    graph: Option<Graph>,
}

impl Host {
    /// From now on each minibatch is the static step: captured after two warm-up steps
    /// (`capture`: CUDA, a sleeper pool, whose tensors never change), eager otherwise (the
    /// CPU's tests; fp16 hosts, whose loss scaler needs the step's masked form).
    pub fn static_steps(&mut self, capture: bool) {
        let device = self.vs.device();
        let f32s = |shape: &[i64]| Tensor::zeros(shape, (Kind::Float, device));
        self.captured = Some(Captured {
            masks: f32s(&[2, SLOTS as i64, Blueprint::ALL.len() as i64]),
            shown: Vec::new(),
            adam: DeviceState::default(),
            idx: Tensor::zeros([0], (Kind::Int64, device)),
            loss: f32s(&[]),
            right: f32s(&[]),
            capture,
            warm: 0,
            graph: None,
        });
    }

    /// Whether this host's steps are captured graphs now.
    pub fn is_captured(&self) -> bool {
        self.captured.as_ref().is_some_and(|c| c.graph.is_some())
    }

    /// Each seed's blend and learning flag, as [`Host::forward`] reads them from the slots.
    fn mask_values(&self) -> Vec<f32> {
        let n = Blueprint::ALL.len();
        let mut out = vec![0.0; 2 * SLOTS * n];
        for (s, slot) in self.slots.iter().enumerate() {
            if let Some(b) = slot.live.map(index) {
                if slot.learning {
                    out[SLOTS * n + s * n + b] = 1.0;
                } else {
                    out[s * n + b] = slot.alpha as f32;
                }
            }
        }
        out
    }

    /// [`Host::forward`] with every seed run and weighed by the masks, the same ops
    /// whatever the slots' stages: a blending seed adds `α·seed(x)`, a learning one
    /// `s − detach(s)` of `s = seed(detach(x))`, a sleeping or dormant one `0·seed(x)`.
    pub(super) fn forward_static(&self, x: &Tensor, masks: &Tensor) -> Tensor {
        let mut h = x.shallow_clone();
        for (s, (stage, slot)) in self.stages.iter().zip(&self.slots).enumerate() {
            let a = super::mixed::conv(stage, &h, super::stage_stride(s), 1, 1, self.kind).relu();
            h = a.shallow_clone();
            for (b, seed) in slot.seeds.iter().enumerate() {
                let Some(seed) = seed else { continue };
                let (blend, learn) =
                    (masks.get(0).get(s as i64).get(b as i64), masks.get(1).get(s as i64).get(b as i64));
                let input = a.detach().where_self(&learn.gt(0.5), &a);
                let out = seed.net.forward_in(&input, self.kind);
                h = h + &out * &blend + (&out - out.detach()) * &learn;
            }
        }
        super::mixed::linear(&self.head, &h.mean_dim(&[2i64, 3][..], false, Kind::Float), self.kind)
    }

    /// One static step on the minibatch in `c.idx`: what is captured.
    fn static_step(&mut self, c: &Captured, x: &Tensor, y: &Tensor) {
        let (xb, yb) = (x.index_select(0, &c.idx), y.index_select(0, &c.idx));
        let logits = self.forward_static(&xb, &c.masks);
        let loss = logits.cross_entropy_for_logits(&yb);
        tch::no_grad(|| {
            c.loss.shallow_clone().copy_(&loss);
            c.right.shallow_clone().copy_(&correct(&logits, &yb));
        });
        self.opt.zero_grad();
        match self.scaler.as_mut() {
            Some(scaler) => {
                scaler.scale(&loss).backward();
                let mut grads = self.opt.grads();
                let keep = scaler.unscale(&mut grads.iter_mut().collect::<Vec<_>>());
                self.opt.step_static(&c.adam, Some(&keep));
            }
            None => {
                loss.backward();
                self.opt.step_static(&c.adam, None);
            }
        }
    }

    /// The epoch's next minibatch as the static step: the masks and optimizer state written
    /// where a decision changed them, the indices copied in, then a replay of the captured
    /// graph (or, while warming up or off CUDA, the step itself), timed as one forward.
    pub(super) fn minibatch_static(&mut self, epoch: &mut Epoch, x: &Tensor, y: &Tensor, clock: &PartClock) {
        let Some(mut c) = self.captured.take() else { return };
        let t = Instant::now();
        if c.idx.size()[0] != epoch.batch {
            // A graph reads a minibatch of one size: a new size is captured anew.
            c.idx = Tensor::zeros([epoch.batch], (Kind::Int64, c.idx.device()));
            (c.graph, c.warm) = (None, 0);
        }
        let shown = self.mask_values();
        tch::no_grad(|| {
            if shown != c.shown {
                c.masks.copy_(&Tensor::from_slice(&shown).view(&c.masks.size()[..]).to(c.masks.device()));
                c.shown = shown;
            }
            self.opt.sync(&mut c.adam);
            c.idx.copy_(&epoch.idx.narrow(0, i64::from(epoch.done) * epoch.batch, epoch.batch));
        });
        match &c.graph {
            Some(graph) => match graph.replay() {
                Ok(()) => clock.count(GRAPH_REPLAYS, 1),
                Err(e) => {
                    // Eager from now on, and said once per process.
                    warn_once(&format!("replaying: {e:#}"));
                    (c.graph, c.capture) = (None, false);
                    self.static_step(&c, x, y);
                }
            },
            None if c.capture && c.warm >= WARM_STEPS => {
                let graph = Graph::capture(|| {
                    self.static_step(&c, x, y);
                    Ok(())
                });
                match graph.and_then(|g| g.replay().map(|_| g)) {
                    Ok(g) => {
                        c.graph = Some(g);
                        clock.count(GRAPH_REPLAYS, 1);
                    }
                    Err(e) => {
                        // Eager from now on, and said once per process.
                        warn_once(&format!("{e:#}"));
                        c.capture = false;
                        self.static_step(&c, x, y);
                    }
                }
            }
            None => {
                self.static_step(&c, x, y);
                c.warm += 1;
            }
        }
        tch::no_grad(|| {
            let _ = epoch.loss.g_add_(&c.loss.to_kind(Kind::Double));
            let _ = epoch.right.g_add_(&c.right.to_kind(Kind::Double));
        });
        self.captured = Some(c);
        clock.lap(HOST_FORWARD, t);
        clock.count(HOST_PASSES, 1);
        epoch.done += 1;
    }
}

fn warn_once(message: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!("hotlab: a sleeper host's captured step failed ({message}); the hosts' steps run eagerly")
    });
}

#[cfg(test)]
mod tests {
    use super::super::tensors;
    use super::*;
    use crate::morpho::glyphs::{generate, TaskSpec};
    use crate::morpho::part_clock;
    use hotlab_env::rng::HostRng;
    use hotlab_specs::morpho::SlotPool;
    use tch::Device;

    /// The step a graph captures (masks and optimizer state read from tensors, every seed
    /// run) trains a sleeper host as the eager step does, to rounding: bare, then through a
    /// seed learning at α = 0, blending, removed and regrafted beside others at other rates;
    /// the same minibatches, gradient norms and accuracies.
    #[test]
    fn the_static_step_trains_a_sleeper_host_as_the_eager_step_does() {
        let task = generate(&TaskSpec { seed: 3, train: 256, val: 128, ..TaskSpec::default() });
        let ((x, y), (xv, yv)) = (tensors(&task.train, Device::Cpu), tensors(&task.val, Device::Cpu));
        let clock = part_clock();
        let run = |stat: bool| {
            let mut rng = HostRng::new(9);
            let mut host = Host::new(4, 3e-3, SlotPool::Sleeper, Device::Cpu, &mut rng).unwrap();
            if stat {
                host.static_steps(false);
            }
            let mut trace = Vec::new();
            let mut train = |host: &mut Host, rng: &mut HostRng| {
                let (loss, acc) = host.train_steps(&x, &y, 3, 32, rng, &clock);
                let logits = tch::no_grad(|| host.forward_with(&xv, false));
                trace.push((loss, acc, logits, host.seed_grad_norms()));
            };
            train(&mut host, &mut rng);
            super::super::tests::grow_and_prune(&mut host, &mut rng, &mut train);
            (trace, host.evaluate(&xv, &yv))
        };
        let (eager, stat) = (run(false), run(true));
        assert_eq!(eager.0.len(), stat.0.len());
        for (i, (e, s)) in eager.0.iter().zip(&stat.0).enumerate() {
            let gap = (&e.2 - &s.2).abs().max().double_value(&[]);
            assert!(gap < 1e-4, "epoch {i}: logits {gap}");
            assert!(
                (e.0 - s.0).abs() < 1e-5 && e.1 == s.1,
                "epoch {i}: loss and accuracy {:?} {:?}",
                (e.0, e.1),
                (s.0, s.1)
            );
            let (en, sn) = (e.3.unwrap_or_default(), s.3.unwrap_or_default());
            for (a, b) in en.iter().zip(&sn) {
                assert!((a - b).abs() <= 1e-4 * a.abs().max(1e-3), "epoch {i}: seed gradient norms {en:?} {sn:?}");
            }
        }
        assert!(eager.0[2].3.unwrap()[2] > 0.0, "the blended seed learns");
        assert!((eager.1 .0 - stat.1 .0).abs() < 1e-4 && eager.1 .1 == stat.1 .1, "{:?} {:?}", eager.1, stat.1);
    }

    /// fp16 hosts (`--host-precision fp16`, the static step with its loss scaler on the
    /// device): a step whose scaled gradients overflow leaves every weight as it was and
    /// halves the scale, with no read; at a sane scale the host learns. libtorch runs fp16
    /// on the CPU, slowly.
    #[test]
    fn an_fp16_host_skips_an_overflowing_step_and_learns_at_a_sane_scale() {
        use hotlab_train::precision::DeviceScaler;
        let task = generate(&TaskSpec { seed: 5, train: 1024, val: 256, ..TaskSpec::default() });
        let ((x, y), (xv, yv)) = (tensors(&task.train, Device::Cpu), tensors(&task.val, Device::Cpu));
        let clock = part_clock();
        let mut rng = HostRng::new(4);
        let mut host = Host::new(8, 1e-2, SlotPool::Dynamic, Device::Cpu, &mut rng).unwrap();
        host.set_kind(Kind::Half);
        host.static_steps(false);
        host.graft(1, Blueprint::Conv3x3, 1.0, 1.0, &mut rng);
        host.scaler = Some(DeviceScaler::starting_at(1e30, Device::Cpu));
        let before: Vec<Tensor> = host.all_params().iter().map(Tensor::copy).collect();
        host.train_steps(&x, &y, 1, 32, &mut rng, &clock);
        assert!(host.all_params().iter().zip(&before).all(|(a, b)| a.equal(b)), "a skipped step changes nothing");
        let (scale, skipped) = host.loss_scale().unwrap();
        assert_eq!(skipped, 1);
        assert!((scale / 5e29 - 1.0).abs() < 1e-6, "the scale halves: {scale}");
        host.scaler = Some(DeviceScaler::starting_at(1024.0, Device::Cpu));
        let (start, _) = host.evaluate(&xv, &yv);
        for _ in 0..4 {
            host.train_steps(&x, &y, 16, 64, &mut rng, &clock);
        }
        let (end, _) = host.evaluate(&xv, &yv);
        assert_eq!(host.loss_scale().unwrap().1, 0, "no overflow at 1024");
        assert!(end < start - 0.2, "an fp16 host learns: {start} -> {end}");
    }
}

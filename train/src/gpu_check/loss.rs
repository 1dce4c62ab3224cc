//! The trainer's GPU check of its fused loss: `ppo_loss_grad` (the PPO loss's gradient with
//! respect to the network's outputs in one kernel) against the same formulas in libtorch's
//! ops (`output_grads`), over head shapes and minibatch sizes, launched eagerly and
//! replayed from a captured graph on new inputs, with each way's launches and time per
//! minibatch.

use super::{check, progress, relative};
use crate::cuda::gpu::Gpu;
use crate::cuda::loss::{LossConsts, LossGrads, LossInputs, PpoLossGrad};
use crate::cuda::replayer::capture_aside;
use crate::models::mlp::grad::{output_grads, LossBatch, OutputGrads, Outputs};
use crate::rollout::Batch;
use hotlab_core::run::PpoSpec;
use hotlab_env::rng::HostRng;
use hotlab_spec::RunSpec;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// (heads, rows): one head of two actions at CleanRL's minibatch and at `--preset gpu`'s,
/// an odd size past a block, several heads, and eight (as many as a workload has).
const CASES: &[(&[usize], i64)] =
    &[(&[2], 128), (&[2], 16_384), (&[2], 1_000), (&[3, 2, 4], 777), (&[6, 3, 5, 3, 4, 3, 3, 3], 257)];
const TOLERANCE: f64 = 1e-5;

/// A minibatch's network outputs and rollout figures, drawn on the GPU from `seed`: logits
/// spread wide and old log-probs and values far enough from the new ones that both
/// clips are taken on many rows.
struct Inputs {
    logits: Tensor,
    value: Tensor,
    mb: Batch,
    adv: Tensor,
}

impl Inputs {
    fn draw(heads: &[usize], rows: i64, seed: u64, dev: Device) -> Self {
        let mut rng = HostRng::new(seed);
        tch::manual_seed(rng.next_u64() as i64);
        let f = (Kind::Float, dev);
        let width: i64 = heads.iter().map(|&n| n as i64).sum();
        let actions: Vec<Tensor> =
            heads.iter().map(|&n| Tensor::randint(n as i64, [rows, 1], (Kind::Int64, dev))).collect();
        let value = Tensor::randn([rows, 1], f);
        let adv = Tensor::randn([rows, 1], f);
        let adv = (&adv - adv.mean(Kind::Float)) / (adv.std(true) + 1e-8);
        let mb = Batch {
            obs: Tensor::zeros([rows, 1], f),
            extra: Vec::new(),
            actions: Tensor::cat(&actions, 1),
            real_actions: None,
            log_probs: Tensor::randn([rows], f) * 0.5 - heads.len() as f64,
            values: value.view([rows]) + Tensor::randn([rows], f) * 0.4,
            advantages: adv.view([rows]),
            returns: Tensor::randn([rows], f),
            memory: None,
        };
        Self { logits: Tensor::randn([rows, width], f) * 2.0, value, mb, adv }
    }

    /// Copies `other`'s figures into these tensors (a captured graph's static inputs).
    fn fill(&mut self, other: &Inputs) {
        for (to, from) in [
            (&mut self.logits, &other.logits),
            (&mut self.value, &other.value),
            (&mut self.mb.actions, &other.mb.actions),
            (&mut self.mb.log_probs, &other.mb.log_probs),
            (&mut self.mb.values, &other.mb.values),
            (&mut self.adv, &other.adv),
            (&mut self.mb.returns, &other.mb.returns),
        ] {
            to.copy_(from);
        }
    }
}

/// The three differences (∂logits, ∂value, statistics) between two results, each relative
/// to libtorch's largest entry.
fn differences(want: &OutputGrads, got: &OutputGrads) -> [f64; 3] {
    let stats = match (&want.stats, &got.stats) {
        (Some(a), Some(b)) => relative(a, b),
        _ => f64::INFINITY,
    };
    [relative(&want.d_logits, &got.d_logits), relative(&want.d_value, &got.d_value), stats]
}

/// `ppo_loss_grad` against `output_grads` over [`CASES`] (seeds 1–3 each), then replayed
/// from a graph captured on one case's buffers and refilled with another draw; to 1e-5 of
/// each output's largest entry. Reports the share of rows each clip took,
/// each way's launches per minibatch captured, and µs per minibatch at `--preset gpu`'s
/// minibatch (eager and replayed).
pub fn ppo_loss_grad_check(gpu: &Arc<Gpu>) -> Value {
    const NAME: &str = "ppo_loss_grad_matches_libtorch";
    progress("ppo_loss_grad (the PPO loss's gradient in one kernel) against libtorch's ops");
    let kernel = match PpoLossGrad::new(gpu.clone()) {
        Ok(k) => k,
        Err(e) => return check(NAME, false, "-", json!(format!("{e:#}"))),
    };
    let outcome = (|| -> anyhow::Result<Value> {
        let dev = Device::Cuda(0);
        let spec = RunSpec { ppo: PpoSpec { ent_coef: 0.05, ..PpoSpec::default() }, ..RunSpec::default() };
        let k = LossConsts { clip: spec.ppo.clip, vf_coef: spec.ppo.vf_coef, ent_coef: spec.ppo.ent_coef, scale: 1.0 };
        let torch = |x: &Inputs, heads: &[usize]| {
            let out = Outputs { actor: &x.logits, log_std: None, value: &x.value };
            output_grads(out, LossBatch { mb: &x.mb, adv: &x.adv, heads, spec: &spec }, 1.0, true)
        };
        let fused = |x: &Inputs, heads: &[usize]| {
            let (mb, logits, value, adv) = (&x.mb, &x.logits, &x.value, &x.adv);
            let (actions, log_probs, values, returns) = (&mb.actions, &mb.log_probs, &mb.values, &mb.returns);
            let LossGrads { d_logits, d_value, stats } = kernel.launch(
                LossInputs { logits, value, actions, log_probs, values, adv, returns },
                heads,
                k,
                true,
            )?;
            anyhow::Ok(OutputGrads { d_logits, d_value, d_log_std: None, stats })
        };

        let mut cases = Vec::new();
        let mut worst = 0.0f64;
        for &(heads, rows) in CASES {
            for seed in 1..=3 {
                let x = Inputs::draw(heads, rows, seed, dev);
                let (want, got) = (torch(&x, heads), fused(&x, heads)?);
                let d = differences(&want, &got);
                worst = d.iter().copied().fold(worst, f64::max);
                let stats = Vec::<f64>::try_from(want.stats.as_ref().expect("asked").to_device(Device::Cpu))?;
                cases.push(json!({"heads": heads, "rows": rows, "seed": seed, "diff": d, "clipfrac": stats[4]}));
            }
        }

        // Captured on one draw's buffers, replayed on another's.
        let heads: &[usize] = &[3, 2, 4];
        let mut x = Inputs::draw(heads, 777, 4, dev);
        let _ = fused(&x, heads)?;
        let mut out = None;
        let graph = capture_aside(dev, || {
            out = Some(fused(&x, heads)?);
            Ok(())
        })?;
        let next = Inputs::draw(heads, 777, 5, dev);
        x.fill(&next);
        graph.replay()?;
        let replayed = differences(&torch(&next, heads), out.as_ref().expect("captured"));
        worst = replayed.iter().copied().fold(worst, f64::max);

        // Launches and time at `--preset gpu`'s minibatch.
        let heads: &[usize] = &[2];
        let x = Inputs::draw(heads, 16_384, 6, dev);
        let torch_graph = capture_aside(dev, || {
            let _ = torch(&x, heads);
            Ok(())
        })?;
        let fused_graph = capture_aside(dev, || fused(&x, heads).map(drop))?;
        let time = |f: &dyn Fn() -> anyhow::Result<()>| -> anyhow::Result<f64> {
            for _ in 0..3 {
                f()?;
            }
            tch::Cuda::synchronize(0);
            let start = Instant::now();
            for _ in 0..1_000 {
                f()?;
            }
            tch::Cuda::synchronize(0);
            Ok(1e3 * start.elapsed().as_secs_f64())
        };
        let us = json!({
            "torch_eager": time(&|| { let _ = torch(&x, heads); Ok(()) })?,
            "fused_eager": time(&|| fused(&x, heads).map(drop))?,
            "torch_replayed": time(&|| torch_graph.replay())?,
            "fused_replayed": time(&|| fused_graph.replay())?,
        });
        let launches = json!({"torch": torch_graph.launches()?, "fused": fused_graph.launches()?});
        let clipped = cases.iter().filter(|c| c["clipfrac"].as_f64().unwrap_or(0.0) > 0.05).count();
        let ok = worst <= TOLERANCE && clipped == cases.len() && fused_graph.launches()?.kernels <= 2;
        Ok(check(
            NAME,
            ok,
            "∂logits, ∂value and the statistics within 1e-5 of libtorch's (relative to each one's largest entry), eagerly over 5 shapes × 3 seeds and replayed on new inputs; more than 5 % of rows clipped in every case; at most 2 kernels fused",
            json!({"worst": worst, "cases": cases, "replayed_diff": replayed,
                   "launches_per_minibatch": launches, "us_per_minibatch": us}),
        ))
    })();
    outcome.unwrap_or_else(|e| check(NAME, false, "-", json!(format!("{e:#}"))))
}

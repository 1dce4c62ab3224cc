//! `ppo_loss_grad` (`loss.cu`): the PPO loss's gradient with respect to the network's
//! logits and value, and the minibatch's statistics, in one launch (plus the statistics'
//! zeroing) where the MLP's `output_grads` (`models/mlp/grad.rs`) takes about 40 libtorch
//! kernels. The same formulas in the same order; `hotlab gpu-check` holds the two
//! equal, eagerly and replayed from a captured graph.

use super::gpu::Gpu;
use super::launch::{on_current_stream, ptr, require};
use anyhow::{anyhow, bail, Result};
use cudarc::driver::CudaFunction;
use std::ffi::c_void;
use std::sync::Arc;
use tch::{Kind, Tensor};

/// Action heads the kernel takes (`PPO_MAX_HEADS` in `loss.cu`).
pub const MAX_HEADS: usize = 16;

/// The heads' sizes, passed by value (`PpoHeads` in `loss.cu`).
#[repr(C)]
struct Heads {
    n: i32,
    size: [i32; MAX_HEADS],
}

/// The loss's constants.
#[derive(Clone, Copy, Debug)]
pub struct LossConsts {
    /// The surrogate's and the value's clip (`--clip`).
    pub clip: f64,
    pub vf_coef: f64,
    pub ent_coef: f64,
    /// The gradients' scale (the fp16 loss scale, else 1).
    pub scale: f64,
}

/// The kernel's tensors: the forward's outputs, the minibatch's columns and its normalized
/// advantages. Every float f32 `[B]` (`[B, Σ heads]` for the logits, `[B, 1]` for the value
/// and the advantages), the actions i64 `[B, heads]`, contiguous, on the GPU.
pub struct LossInputs<'a> {
    pub logits: &'a Tensor,
    pub value: &'a Tensor,
    pub actions: &'a Tensor,
    pub log_probs: &'a Tensor,
    pub values: &'a Tensor,
    pub adv: &'a Tensor,
    pub returns: &'a Tensor,
}

/// What the kernel gives: ∂loss/∂logits `[B, Σ heads]`, ∂loss/∂value `[B, 1]`, and the
/// minibatch's `[pg_loss, v_loss, entropy, approx_kl, clipfrac]` when asked for.
pub struct LossGrads {
    pub d_logits: Tensor,
    pub d_value: Tensor,
    pub stats: Option<Tensor>,
}

/// The kernel, loaded from a GPU's compiled module.
pub struct PpoLossGrad {
    f: CudaFunction,
    /// Keeps the module (and its context) loaded.
    gpu: Arc<Gpu>,
}

impl PpoLossGrad {
    pub fn new(gpu: Arc<Gpu>) -> Result<Self> {
        let f = gpu.function("ppo_loss_grad").map_err(|e| anyhow!(e))?;
        Ok(Self { f, gpu })
    }

    /// ∂loss/∂`logits` and ∂loss/∂`value` of one minibatch, and with `want_stats` its
    /// statistics; the same as the MLP's `output_grads`. Each action must lie within its
    /// head (the policy's samples do; the kernel reads the logit it names).
    pub fn launch(&self, x: LossInputs<'_>, heads: &[usize], k: LossConsts, want_stats: bool) -> Result<LossGrads> {
        let LossInputs { logits, value, actions, log_probs, values, adv, returns } = x;
        if heads.is_empty() || heads.len() > MAX_HEADS || heads.contains(&0) {
            bail!("ppo_loss_grad: 1 to {MAX_HEADS} heads of at least one action each, not {heads:?}");
        }
        let (device, rows) = (logits.device(), logits.size().first().copied().unwrap_or(0));
        let width: i64 = heads.iter().map(|&n| n as i64).sum();
        let f32s = [
            ("logits", logits, rows * width),
            ("value", value, rows),
            ("log_probs", log_probs, rows),
            ("values", values, rows),
            ("adv", adv, rows),
            ("returns", returns, rows),
        ];
        for (name, t, len) in f32s {
            require("ppo_loss_grad", name, t, Kind::Float, len, device)?;
        }
        require("ppo_loss_grad", "actions", actions, Kind::Int64, rows * heads.len() as i64, device)?;
        let d_logits = logits.empty_like();
        let d_value = value.empty_like();
        let stats = want_stats.then(|| Tensor::zeros([5], (Kind::Float, device)));
        let mut sizes = [0i32; MAX_HEADS];
        for (s, &n) in sizes.iter_mut().zip(heads) {
            *s = i32::try_from(n).map_err(|_| anyhow!("ppo_loss_grad: a head of {n} actions"))?;
        }
        let mut heads = Heads { n: heads.len() as i32, size: sizes };
        let too_many = |what: &str| anyhow!("ppo_loss_grad: {what} is more than one launch covers");
        let (mut rows32, mut width32) =
            (i32::try_from(rows).map_err(|_| too_many("rows"))?, i32::try_from(width).map_err(|_| too_many("width"))?);
        let mut pointers =
            [logits, value, actions, log_probs, values, adv, returns, &d_logits, &d_value].map(ptr).to_vec();
        pointers.push(stats.as_ref().map_or(0, ptr));
        let mut floats = [k.clip as f32, k.vf_coef as f32, k.ent_coef as f32, k.scale as f32];
        // The kernel's parameters in its signature's order: rows, width, the heads by value,
        // 10 pointers (the last one null without statistics), 4 floats.
        let mut args: Vec<*mut c_void> = Vec::with_capacity(17);
        args.push((&mut rows32 as *mut i32).cast());
        args.push((&mut width32 as *mut i32).cast());
        args.push((&mut heads as *mut Heads).cast());
        args.extend(pointers.iter_mut().map(|p| (p as *mut u64).cast::<c_void>()));
        args.extend(floats.iter_mut().map(|f| (f as *mut f32).cast::<c_void>()));
        // SAFETY: the arguments match `ppo_loss_grad`'s signature (the tensors checked above,
        // and alive through the call; the outputs are returned, so they outlive it).
        unsafe { on_current_stream(&self.gpu, &self.f, "ppo_loss_grad", device, rows32, &mut args)? };
        Ok(LossGrads { d_logits, d_value, stats })
    }
}

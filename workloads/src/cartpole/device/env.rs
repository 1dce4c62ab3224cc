//! `device`: CartPole whose state lives in tensors on the trainer's device and is stepped
//! by tensor ops — nothing crosses to the host per step (catalogue row 3). It runs on the
//! CPU too. The per-env random streams are the same 32-bit PCG as the host batch, done in
//! int64 tensors masked to 32 bits, so resets draw the same numbers; the dynamics are the
//! same f32 expressions (libtorch's `sin`/`cos` may differ from Rust's by an ulp, so
//! trajectories agree to ~1e-6, not bit for bit).

use cudarc::driver::CudaFunction;
use hotlab_env::cartpole::{
    FORCE_MAG, GRAVITY, LENGTH, MASS_POLE, MAX_STEPS, POLE_MASS_LENGTH, RESET_BOUND, TAU, THETA_THRESHOLD, TOTAL_MASS,
    X_THRESHOLD,
};
use hotlab_env::rng::EnvRng;
use hotlab_train::cuda::gpu::{ptr, Arg, Gpu};
use std::sync::Arc;
use tch::{Device, Kind, Tensor};

const MASK32: i64 = 0xFFFF_FFFF;

/// What one step returns, all `[N]` (or `[N, 4]`) tensors on the device.
pub struct DeviceStep {
    /// Observations after the step (the next episode's first where an episode ended).
    pub obs: Tensor,
    pub reward: Tensor,
    pub terminated: Tensor,
    pub truncated: Tensor,
    /// `terminated | truncated`.
    pub done: Tensor,
    /// The last observation before any reset.
    pub final_obs: Tensor,
    /// Return and length of the episode that ended (meaningful where `done`).
    pub episode_return: Tensor,
    pub episode_length: Tensor,
}

pub struct DeviceCartPole {
    pub envs: usize,
    device: Device,
    x: Tensor,
    x_dot: Tensor,
    theta: Tensor,
    theta_dot: Tensor,
    elapsed: Tensor,
    ret: Tensor,
    /// PCG state per env (u32 held in i64).
    rng: Tensor,
    /// The fused CUDA kernel that replaces the tensor ops of [`Self::step`], when set.
    kernel: Option<(Arc<Gpu>, CudaFunction)>,
}

/// One PCG-RXS-M-XS step on every element: (next state, 32 output bits).
fn pcg(state: &Tensor) -> (Tensor, Tensor) {
    let next = (state * 747_796_405i64 + 2_891_336_453i64).bitwise_and(MASK32);
    let shift = state.bitwise_right_shift_tensor_scalar(28) + 4;
    let word = (state.bitwise_right_shift(&shift).bitwise_xor_tensor(state) * 277_803_737i64).bitwise_and(MASK32);
    let out = word.bitwise_right_shift_tensor_scalar(22).bitwise_xor_tensor(&word);
    (next, out)
}

impl DeviceCartPole {
    /// `envs` CartPoles with the streams of global indices `0..envs` of `seed`.
    pub fn new(envs: usize, seed: u64, device: Device) -> Self {
        let states: Vec<i64> = (0..envs as u64).map(|i| EnvRng::for_env(seed, i).state() as i64).collect();
        let zeros = Tensor::zeros([envs as i64], (Kind::Float, device));
        Self {
            envs,
            device,
            x: zeros.copy(),
            x_dot: zeros.copy(),
            theta: zeros.copy(),
            theta_dot: zeros.copy(),
            elapsed: Tensor::zeros([envs as i64], (Kind::Int64, device)),
            ret: Tensor::zeros([envs as i64], (Kind::Double, device)),
            rng: Tensor::from_slice(&states).to_device(device),
            kernel: None,
        }
    }

    /// Steps with the fused `cartpole_step` kernel from now on (CUDA only): one launch
    /// per step instead of ~60 tensor ops, the same transitions to rounding.
    pub fn use_kernel(&mut self, gpu: Arc<Gpu>) -> Result<(), String> {
        let f = gpu.function("cartpole_step")?;
        self.kernel = Some((gpu, f));
        Ok(())
    }

    pub fn fused(&self) -> bool {
        self.kernel.is_some()
    }

    /// The state tensors the rollout kernel steps in place: x, x_dot, theta, theta_dot,
    /// elapsed, ret, rng.
    pub fn state_tensors(&self) -> [&Tensor; 7] {
        [&self.x, &self.x_dot, &self.theta, &self.theta_dot, &self.elapsed, &self.ret, &self.rng]
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// Uniform in ±RESET_BOUND for every env, advancing the streams only where `mask`.
    fn draw(&mut self, mask: Option<&Tensor>) -> Tensor {
        let (next, bits) = pcg(&self.rng);
        self.rng = match mask {
            Some(m) => next.where_self(m, &self.rng),
            None => next,
        };
        let b = RESET_BOUND as f32;
        let unit = bits.bitwise_right_shift_tensor_scalar(8).to_kind(Kind::Float) * (1.0 / 16_777_216.0);
        // Same f32 operation order as EnvRng::uniform_f32: low + (high - low) * unit.
        unit * ((b - (-b)) as f64) + (-b) as f64
    }

    /// The current observations `[N, 4]`.
    pub fn observations(&self) -> Tensor {
        self.obs()
    }

    fn obs(&self) -> Tensor {
        Tensor::stack(&[&self.x, &self.x_dot, &self.theta, &self.theta_dot], 1)
    }

    /// Starts every episode; returns the first observations `[N, 4]`.
    pub fn reset(&mut self) -> Tensor {
        self.x = self.draw(None);
        self.x_dot = self.draw(None);
        self.theta = self.draw(None);
        self.theta_dot = self.draw(None);
        let _ = self.elapsed.zero_();
        let _ = self.ret.zero_();
        self.obs()
    }

    /// One step of every env with `actions` (`[N]` or `[N, 1]`, int64), with autoreset.
    pub fn step(&mut self, actions: &Tensor) -> DeviceStep {
        if let Some((gpu, f)) = &self.kernel {
            return self.step_fused(gpu, f, actions);
        }
        let f = |v: f64| v as f32 as f64;
        let a = actions.reshape([-1]);
        let force = Tensor::where_scalar(&a.eq(1), f(FORCE_MAG), f(-FORCE_MAG)).to_kind(Kind::Float);
        let (sin, cos) = (self.theta.sin(), self.theta.cos());
        let temp = (force + (&self.theta_dot * &self.theta_dot) * f(POLE_MASS_LENGTH) * &sin) / f(TOTAL_MASS);
        let thetaacc = (&sin * f(GRAVITY) - &cos * &temp)
            / (((&cos * &cos) * f(MASS_POLE) / f(TOTAL_MASS)).neg() + f(4.0 / 3.0)).g_mul_scalar(f(LENGTH));
        let xacc = &temp - &thetaacc * f(POLE_MASS_LENGTH) * &cos / f(TOTAL_MASS);
        let x = &self.x + &self.x_dot * f(TAU);
        let x_dot = &self.x_dot + xacc * f(TAU);
        let theta = &self.theta + &self.theta_dot * f(TAU);
        let theta_dot = &self.theta_dot + thetaacc * f(TAU);

        self.elapsed += 1;
        self.ret += 1.0;
        let (xt, tt) = (f(X_THRESHOLD), f(THETA_THRESHOLD));
        let terminated = x.lt(-xt).logical_or(&x.gt(xt)).logical_or(&theta.lt(-tt)).logical_or(&theta.gt(tt));
        let truncated = self.elapsed.ge(MAX_STEPS as i64);
        let done = terminated.logical_or(&truncated);
        let final_obs = Tensor::stack(&[&x, &x_dot, &theta, &theta_dot], 1);
        let episode_return = self.ret.copy();
        let episode_length = self.elapsed.copy();

        // Autoreset: draw for everyone, advance streams and replace state only where done.
        let reset = [self.draw(Some(&done)), self.draw(Some(&done)), self.draw(Some(&done)), self.draw(Some(&done))];
        self.x = reset[0].where_self(&done, &x);
        self.x_dot = reset[1].where_self(&done, &x_dot);
        self.theta = reset[2].where_self(&done, &theta);
        self.theta_dot = reset[3].where_self(&done, &theta_dot);
        self.elapsed = self.elapsed.masked_fill(&done, 0i64);
        self.ret = self.ret.masked_fill(&done, 0.0);

        DeviceStep {
            obs: self.obs(),
            reward: Tensor::ones([self.envs as i64], (Kind::Float, self.device)),
            terminated,
            truncated,
            done,
            final_obs,
            episode_return,
            episode_length,
        }
    }

    /// [`Self::step`] as one launch of `cartpole_step` on libtorch's stream.
    fn step_fused(&self, gpu: &Gpu, f: &CudaFunction, actions: &Tensor) -> DeviceStep {
        let n = self.envs as i64;
        let opts = |kind| (kind, self.device);
        let out = DeviceStep {
            obs: Tensor::empty([n, 4], opts(Kind::Float)),
            reward: Tensor::empty([n], opts(Kind::Float)),
            terminated: Tensor::empty([n], opts(Kind::Bool)),
            truncated: Tensor::empty([n], opts(Kind::Bool)),
            done: Tensor::empty([n], opts(Kind::Bool)),
            final_obs: Tensor::empty([n, 4], opts(Kind::Float)),
            episode_return: Tensor::empty([n], opts(Kind::Double)),
            episode_length: Tensor::empty([n], opts(Kind::Int64)),
        };
        let actions = actions.reshape([-1]).to_kind(Kind::Int64).contiguous();
        let mut args = vec![Arg::I32(n as i32), ptr(&actions)];
        args.extend(self.state_tensors().map(ptr));
        args.extend(
            [&out.obs, &out.reward, &out.terminated, &out.truncated, &out.done, &out.final_obs]
                .map(ptr)
                .into_iter()
                .chain([ptr(&out.episode_return), ptr(&out.episode_length)]),
        );
        // A failed launch means a broken GPU context: nothing sensible can continue.
        gpu.launch(f, &gpu.torch_stream, self.envs, &args).unwrap_or_else(|e| panic!("cartpole_step: {e}"));
        out
    }
}

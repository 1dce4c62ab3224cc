//! The GPU hot path on CUDA: hand-written kernels compiled at run time by NVRTC and
//! launched through cudarc on libtorch's tensors (their device pointers, libtorch's
//! primary context and stream).
//!
//! - [`nvrtc`]: the kernels' source (the trainer's: GAE, `gae.cu`, with the two below; a
//!   workload's own, which its folder declares) and their compilation (no GPU needed);
//! - [`gpu`]: what GPU support this process has, and launching the kernels;
//! - [`events`]: device time per phase from CUDA events, and GPU memory;
//! - [`optim`]: the gradient clip and Adam in one kernel (`optim.cu`), on libtorch's
//!   current stream;
//! - [`fused`]: `--update graph_fused`'s two kernels, loaded together;
//! - [`launch`]: checking libtorch tensors and launching a kernel on libtorch's stream;
//! - [`loss`]: the PPO loss's gradient with respect to the network's outputs in one kernel
//!   (`loss.cu`), likewise;
//! - [`shim`]: libtorch's streams and graph capture, through a small C++ file;
//! - [`replayer`]: a body of libtorch ops run eagerly for a warm-up, then captured and
//!   replayed (`--update graph`).
//!
//! An env's kernels live in its workload's folder with what drives them (its device
//! backend), compiled in one module with the trainer's; `hotlab gpu-check` checks every GPU
//! path against its CPU reference.
//!
//! Where a path needs CUDA and there is none (the CPU, or torch on ROCm, where HIP looks
//! like CUDA to libtorch but our kernels cannot run), the worker says so and falls back
//! to libtorch's tensor ops.

pub mod events;
pub mod fused;
pub mod gpu;
pub mod launch;
pub mod loss;
pub mod nvrtc;
pub mod optim;
pub mod replayer;
pub mod shim;

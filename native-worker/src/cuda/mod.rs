//! The GPU hot path on CUDA: hand-written kernels compiled at run time by NVRTC and
//! launched through cudarc on libtorch's tensors (their device pointers, libtorch's
//! primary context and stream).
//!
//! - [`nvrtc`]: the kernels' source and their compilation (no GPU needed);
//! - [`gpu`]: what GPU support this process has, and launching the kernels;
//! - [`graph`]: `--inference graph`, the rollout captured as a CUDA graph;
//! - [`events`]: device time per phase from CUDA events, and GPU memory;
//! - [`check`]: `hotlab gpu-check`, every GPU path against its CPU reference.
//!
//! Where a path needs CUDA and there is none (the CPU, or torch on ROCm, where HIP looks
//! like CUDA to libtorch but our kernels cannot run), the worker says so and falls back
//! to libtorch's tensor ops.

pub mod check;
pub mod events;
pub mod gpu;
pub mod graph;
pub mod nvrtc;

//! The library side of the measuring commands: env stepping per backend (`hotlab bench
//! envs`, [`envs`]) and every GPU path against its CPU reference (`hotlab gpu-check`,
//! [`gpu_check`]).

pub mod envs;
pub mod gpu_check;

//! The runs of the measuring commands (their flags and printouts are in `commands/`): a change audited by re-running (`hotlab
//! audit`, [`audit`]), env stepping per backend (`hotlab bench
//! envs`, [`envs`]), a lab under many viewers for minutes (`hotlab bench soak`, [`soak`]),
//! a grid of settings each trained once (`hotlab sweep --on local`, [`sweep`]) and every GPU
//! path against its CPU reference (`hotlab gpu-check`, [`gpu_check`]; the fused optimizer's
//! part in [`gpu_optim`]), the lab end to end on
//! one worker (`hotlab lab-check`, [`lab_check`]; a workload's own GPU
//! checks and its benchmarks' runs are in its folder, `hotlab_workloads::<name>::{gpu,
//! bench}`).

pub mod audit;
pub mod envs;
pub mod gpu_check;
pub mod gpu_loss;
pub mod gpu_optim;
pub mod lab_check;
pub mod lessons;
pub mod soak;
pub mod sweep;
pub mod tune;

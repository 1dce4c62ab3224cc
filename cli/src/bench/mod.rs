//! The runs of the measuring commands (their flags and printouts are in `commands/`): a
//! change audited by re-running (`hotlab audit`, [`audit`]), env stepping per backend
//! (`hotlab bench envs`, [`envs`]), a grid of settings each trained once (`hotlab sweep --on
//! local`, [`sweep`]), the search for the fastest setup ([`tune`]), a lesson's check
//! ([`lessons`]) and every GPU path against its CPU reference (`hotlab gpu-check`,
//! [`gpu_check`], gathering the trainer's checks from `hotlab_train::gpu_check` and each
//! workload's from its folder, `hotlab_workloads::<name>::gpu`). The lab driven from outside
//! (`hotlab lab-check`, `hotlab bench soak`) is `hotlab_lab::bench`.

pub mod audit;
pub mod envs;
pub mod gpu_check;
pub mod lessons;
pub mod sweep;
pub mod tune;

//! The runs of the measuring commands (their flags and printouts are in `commands/`): a change audited by re-running (`hotlab
//! audit`, [`audit`]), env stepping per backend (`hotlab bench
//! envs`, [`envs`]), the morpho trainer per knob setting (`hotlab bench morpho`, [`morpho`]), a lab under many viewers for minutes (`hotlab bench soak`,
//! [`soak`]), a grid of settings each trained once (`hotlab sweep --on local`, [`sweep`])
//! and every GPU path against its CPU reference (`hotlab gpu-check`, [`gpu_check`]; the
//! dreamer's in [`gpu_dreamer`], the morpho hosts' in [`gpu_morpho`]).

pub mod audit;
pub mod envs;
pub mod gpu_check;
pub mod gpu_dreamer;
pub mod gpu_morpho;
pub mod lessons;
pub mod morpho;
pub mod soak;
pub mod sweep;
pub mod tune;

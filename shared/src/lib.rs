//! Code shared by the hotlab worker (native) and the web app (wasm32).
//! `docs/architecture.md` (in the repository) shows where it sits in a run's data flow.
//!
//! - [`spec`]: the one [`RunSpec`](spec::RunSpec) that the CLI, the REST API and the
//!   UI all use, nested by concern (the workload with its own settings, `ppo`, `exec`,
//!   `telemetry`), with its presets, validation and the flat form's migration.
//! - [`env`]: the environment traits (several observation fields, several action heads,
//!   an optional action mask) and their batch buffers.
//! - [`cartpole`]: Gymnasium's CartPole-v1, as a scalar f64 reference and an f32
//!   struct-of-arrays batch with same-step autoreset.
//! - [`glyphs`]: the morphogenetic workload's task, 16×16 glyphs drawn from a seed.
//! - [`pixels`]: grey frames on the wire (the dreamer's view), base64 and halved.
//! - [`morpho`]: the morphogenetic workload's slot lifecycle, its eight action heads and
//!   their masks, and Shapley contributions.
//! - [`prolog`]: the proof environment's Prolog subset: parser and printer, SLD
//!   resolution, depth-bounded proof search and checking, generated worlds and queries.
//! - [`proof`]: the proof environment (seed 000): goal lists encoded as index fields,
//!   successors with an action mask, scalar and batched.
//! - [`rng`]: the per-env random streams (32-bit, so a GPU shader can run the same ones).
//! - [`sweep`]: a grid of knob values, every combination a run, and the best cell.
//! - [`system`]: what `/api/system` and `hotlab system --json` answer.
//! - [`protocol`]: the lab's events (REST history and WebSocket stream).
//! - [`report`]: the bottleneck report, a pure function of a profile and its spec.
//! - [`audit`]: a change to a run (`KEY=VALUE`), the interleaved plan of an audit, and
//!   its verdicts against this machine's noise and the report's bound.
//! - [`lessons`]: the catalogue's lessons, each a baseline, its fixes, a signature and a budget.
//! - [`tune`]: `hotlab tune`'s choices: the next candidates, the change to keep, the flags.
//! - [`knobs`]: every spec field as a knob: its flag, its JSON path, its group, kind and
//!   help (the launch form, the CLI's errors and the flat form's migration use it).

pub mod audit;
pub mod cartpole;
pub mod counters;
pub mod env;
pub mod glyphs;
pub mod knobs;
pub mod lessons;
pub mod morpho;
pub mod pixels;
pub mod profile;
pub mod prolog;
pub mod proof;
pub mod protocol;
pub mod report;
pub mod rng;
pub mod spec;
pub mod sweep;
pub mod system;
pub mod tune;

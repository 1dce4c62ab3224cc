//! Code shared by the hotlab worker (native) and the web app (wasm32): what both sides
//! read and write. What only the trainer runs (the proof env's Prolog, the morpho env's
//! lifecycle and tasks) lives with its workload (`hotlab-workloads`); the lab's search for
//! the fastest setup with the lab (`hotlab-lab`).
//! `docs/architecture.md` (in the repository) shows where it sits in a run's data flow.
//!
//! - [`env`](mod@env): the environment traits (several observation fields, several action heads,
//!   an optional action mask) and their batch buffers.
//! - [`cartpole`]: Gymnasium's CartPole-v1, as a scalar f64 reference and an f32
//!   struct-of-arrays batch with same-step autoreset.
//! - [`pixels`]: grey frames on the wire (the dreamer's view), base64 and halved.
//! - [`rng`]: the per-env random streams (32-bit, so a GPU shader can run the same ones).
//! - [`suggestions`]: the values a machine offers for a knob (the launch form's lists).
//! - [`sweep`]: a grid of knob values, every combination a run, and the best cell.
//! - [`system`]: what `/api/system` and `hotlab system --json` answer.
//! - [`protocol`]: the lab's events (REST history and WebSocket stream).
//! - [`report`]: the bottleneck report, a pure function of a profile and its spec.
//! - [`audit`]: a change to a run (`KEY=VALUE`), the interleaved plan of an audit, and
//!   its verdicts against this machine's noise and the report's bound.
//! - [`lessons`]: the catalogue's lessons, each a baseline, its fixes, a signature and a budget.
//! - [`fuzz`]: the fuzz targets' budget and seed, from the environment (`cargo xtask fuzz`).
//!
//! Below it sit the run's spec (`hotlab-spec`: `RunSpec`, its knob table and presets'
//! specs), the registry (`hotlab-specs`) and the words every layer and every
//! workload's declarations share (`hotlab-core`: knobs, the run's settings and choices,
//! phases and profiles, counters, advice). Nothing of theirs is re-exported here: a crate
//! above that uses them names them, so its `Cargo.toml` shows what it depends on.

pub mod audit;
pub mod cartpole;
pub mod env;
pub mod fuzz;
pub mod lessons;
pub mod pixels;
pub mod protocol;
pub mod report;
pub mod rng;
pub mod suggestions;
pub mod sweep;
pub mod system;

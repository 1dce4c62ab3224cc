//! How a run talks to the lab, whichever machine trains it: a run's process writes JSON
//! lines ([`process`]), here or on a worker, and a worker relays them over its WebSocket
//! to the lab ([`link`]). Both the lab's server and the worker (`crate::worker`)
//! import this; it imports neither.

pub mod http;
pub mod link;
pub mod memory;
pub mod process;

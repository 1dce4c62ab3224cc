//! The lab driven from outside as its users drive it, each with real processes of the
//! `hotlab` binary (the lab served, a worker) over REST and the WebSocket: the end-to-end
//! check of a GPU box (`hotlab lab-check`, [`lab_check`]) and many viewers for minutes
//! (`hotlab bench soak`, [`soak`]).

pub mod lab_check;
pub mod soak;

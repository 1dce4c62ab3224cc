//! The link between the lab and a worker (`hotlab worker`): one WebSocket the worker opens
//! to `GET /api/worker`, JSON text messages both ways.
//!
//! At connect the worker names itself and its versions in headers ([`HEADER_NAME`],
//! [`HEADER_VERSION`], [`HEADER_LINK`]) and proves itself with the worker token
//! (`Authorization: Bearer T`); a wrong token or a mismatch is refused before the upgrade,
//! with a message naming both versions. Then the worker says [`ToLab::Hello`] and the lab
//! answers [`ToWorker::Welcome`].
//!
//! Nothing is lost on a flaky network: the worker numbers each message of a run, from one,
//! and keeps it until the lab acknowledges it ([`ToWorker::Ack`], sent once the store has
//! committed it). On reconnect the worker lists the runs it holds, the lab answers with
//! the last number it has of each, and the worker resends the rest; the lab drops any
//! number it already has.

use crate::wire::process::FromRun;
use hotlab_protocol::system::SystemInfo;
use hotlab_protocol::{Load, PROTOCOL_VERSION};
use hotlab_spec::RunSpec;
use serde::{Deserialize, Serialize};

/// Where workers connect.
pub const PATH: &str = "/api/worker";
/// The worker's name (as the lab lists it and as `"machine"` names it).
pub const HEADER_NAME: &str = "x-hotlab-worker";
/// The worker's hotlab version.
pub const HEADER_VERSION: &str = "x-hotlab-version";
/// The worker's link protocol ([`LINK_PROTOCOL`]).
pub const HEADER_LINK: &str = "x-hotlab-link";

/// This link's protocol: the event protocol's version and this file's, together. Lab and
/// worker must agree on it and on hotlab's version (a spec's fields change with it).
pub const LINK_PROTOCOL: u32 = PROTOCOL_VERSION * 100 + 1;

/// This binary's hotlab version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What a worker says to the lab.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToLab {
    /// First, on every connect: the machine, how many runs it takes at once, and the
    /// runs it holds (running, or ended with messages the lab has not acknowledged).
    /// `once`: a worker started for one run (a Ray job's), which ends with it.
    Hello {
        system: SystemInfo,
        max_runs: usize,
        held: Vec<Held>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        once: Option<u64>,
    },
    /// Message `n` of a run (from 1, without gaps).
    Run { run: u64, n: u64, msg: Box<FromRun> },
    /// Every few seconds: the machine's load.
    Heartbeat { load: Load },
}

/// A run a worker holds at connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub run: u64,
    /// Whether its process still trains (false: it ended while the lab was away).
    pub live: bool,
}

/// What the lab says to a worker.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// The answer to [`ToLab::Hello`]: the runs to go on with, each with what the lab has
    /// of it; and those to drop (the lab no longer has them live: stop them, forget their
    /// messages).
    Welcome {
        resume: Vec<Resume>,
        forget: Vec<u64>,
    },
    /// Train this run. Files its spec names (a knowledge base in the lab's data dir)
    /// travel with it: the worker writes them to its own data dir and trains on those.
    Start {
        run: u64,
        spec: Box<RunSpec>,
        #[serde(default)]
        files: Vec<FileCopy>,
    },
    Stop {
        run: u64,
    },
    /// Someone watches the run now (rollout frames more often) or no longer.
    Watched {
        run: u64,
        watched: bool,
    },
    /// The lab has committed the run's messages up to `n`: the worker may drop them.
    Ack {
        run: u64,
        n: u64,
    },
}

/// A file a run's spec names, by the spec field that names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCopy {
    pub field: String,
    pub body: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    pub run: u64,
    /// The last message of the run the lab has received: send those after it.
    pub have: u64,
    /// The last one it has committed: drop those up to it (≤ `have`).
    pub committed: u64,
}

/// The refusal when a worker's versions differ from the lab's, naming both.
pub fn mismatch(worker_version: &str, worker_link: &str) -> Option<String> {
    let same = worker_version == VERSION && worker_link == LINK_PROTOCOL.to_string();
    (!same).then(|| {
        format!(
            "version mismatch: this lab is hotlab {VERSION} (link protocol {LINK_PROTOCOL}), the worker is hotlab {worker_version} (link protocol {worker_link}); run the same hotlab on both"
        )
    })
}

/// A worker's name: 1 to 64 letters, digits, `.`, `_` or `-`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    match ok {
        true => Ok(()),
        false => Err(format!("'{name}': a worker's name is 1 to 64 letters, digits, '.', '_' or '-'")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mismatch_names_both_versions() {
        assert_eq!(mismatch(VERSION, &LINK_PROTOCOL.to_string()), None);
        let m = mismatch("0.0.1", "7").expect("refused");
        assert!(m.contains(VERSION) && m.contains("0.0.1") && m.contains(&LINK_PROTOCOL.to_string()), "{m}");
        assert!(mismatch(VERSION, "7").is_some());
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("gpu-box.1_a").is_ok());
        for bad in ["", "a b", "x/y", &"n".repeat(65)] {
            assert!(check_name(bad).unwrap_err().contains("worker's name"), "{bad}");
        }
    }

    #[test]
    fn messages_round_trip() {
        let m = ToWorker::Welcome { resume: vec![Resume { run: 3, have: 17, committed: 12 }], forget: vec![4] };
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains(r#""type":"welcome""#), "{text}");
        let back: ToWorker = serde_json::from_str(&text).unwrap();
        assert!(matches!(back, ToWorker::Welcome { resume, forget } if resume[0].have == 17 && forget == [4]));
    }
}

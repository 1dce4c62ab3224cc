//! What the worker reports about itself (`GET /api/system`, `hotlab system --json`).

use serde::{Deserialize, Serialize};

/// The worker's build and hardware.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemInfo {
    /// Always "hotlab".
    pub name: String,
    /// hotlab's version.
    pub version: String,
    /// The libtorch version the worker was built against.
    pub torch_version: String,
    /// Whether libtorch sees a CUDA (or ROCm) device.
    pub cuda_available: bool,
    /// Compute devices, the CPU first.
    pub devices: Vec<DeviceInfo>,
    /// Logical CPU cores.
    pub cpu_cores: usize,
    /// libtorch intra-op threads.
    pub torch_threads: usize,
    /// The lab's run store on disk, in bytes (when a lab serves this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_bytes: Option<u64>,
    /// Whether the lab's run store is keeping up (when a lab serves this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreHealth>,
    /// Whether the lab runs its users' own commands (`hotlab serve --allow-scripts`), when
    /// a lab serves this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scripts: Option<bool>,
}

/// How the lab's run store is doing: writing, slow (a commit has taken long, or its queue
/// is half full), or failing (its last commit failed: a full disk, say; it retries, and
/// keeps what it could not write).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoreHealth {
    /// `ok`, `slow` or `failing`.
    pub state: StoreState,
    /// What is wrong, in words (None when `ok`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Writes waiting for the disk.
    pub waiting: u64,
    /// Events shed since the lab started because the store fell behind (counted per run too).
    pub shed: u64,
}

/// See [`StoreHealth`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreState {
    Ok,
    Slow,
    Failing,
}

/// One compute device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// As a spec names it: `cpu`, `cuda:0`, …
    pub id: String,
    /// Human-readable model name.
    pub name: String,
    /// Memory in bytes, where known.
    pub memory_bytes: Option<u64>,
}

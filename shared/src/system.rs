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

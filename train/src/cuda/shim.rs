//! libtorch's CUDA streams and graph capture, which tch does not reach, through a small
//! C++ file (`shim.cpp`, compiled by `build.rs` against the torch wheel's headers where
//! it was built for CUDA): a stream made current so that the libtorch ops after it run
//! there (per-env host training, seed 003, each host's stream its own), a wait between two streams on the device
//! (seed 002 #4), and a captured graph of libtorch ops replayed with one launch (the
//! sleeper host step, catalogue row 9).
//!
//! Where the build has no shim (ROCm, a CPU-only torch) or the process has no GPU, every
//! constructor returns an error that says which; nothing else changes.

use anyhow::{bail, Result};

#[cfg(hotlab_cuda_shim)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};
    extern "C" {
        pub fn hl_last_error() -> *const c_char;
        pub fn hl_stream_new(device: c_int, current: c_int, out: *mut *mut c_void) -> c_int;
        pub fn hl_stream_external(cu_stream: *mut c_void, device: c_int, out: *mut *mut c_void) -> c_int;
        pub fn hl_stream_free(stream: *mut c_void);
        pub fn hl_stream_set_current(stream: *mut c_void) -> c_int;
        pub fn hl_stream_wait(waiter: *mut c_void, on: *mut c_void) -> c_int;
        pub fn hl_stream_synchronize(stream: *mut c_void) -> c_int;
        pub fn hl_stream_raw(stream: *mut c_void, out: *mut *mut c_void) -> c_int;
        pub fn hl_graph_new(out: *mut *mut c_void) -> c_int;
        pub fn hl_graph_free(graph: *mut c_void);
        pub fn hl_graph_capture_begin(graph: *mut c_void) -> c_int;
        pub fn hl_graph_capture_end(graph: *mut c_void) -> c_int;
        pub fn hl_graph_replay(graph: *mut c_void) -> c_int;
        pub fn hl_graph_raw(graph: *mut c_void, out: *mut *mut c_void) -> c_int;
    }
}

/// Whether this build can make streams and capture graphs (given a GPU).
pub const AVAILABLE: bool = cfg!(hotlab_cuda_shim);

/// A libtorch CUDA stream (owned handle), and the CUDA stream itself where this process
/// made it ([`Stream::unique`]).
pub struct Stream(*mut std::ffi::c_void, Option<std::sync::Arc<cudarc::driver::CudaStream>>);

/// A captured graph of libtorch ops, with its private memory pool.
pub struct Graph(*mut std::ffi::c_void);

/// What one replay of a captured graph launches, by its nodes: the kernels, the copies and
/// fills, and the rest (event records, waits). Eagerly, the same ops are as many launches
/// from the host, each one dispatched by libtorch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Launches {
    pub kernels: u64,
    pub copies: u64,
    pub other: u64,
}

impl Launches {
    /// Counts one replay of a graph that launches these.
    pub fn count_replay(&self, c: &mut hotlab_core::counters::Counters) {
        c.update_replays += 1;
        c.update_launches += self.total();
    }

    /// Every node: what the host would launch one by one without the graph.
    pub fn total(&self) -> u64 {
        self.kernels + self.copies + self.other
    }
}

// The handles are libtorch objects usable from any thread (one user at a time).
unsafe impl Send for Stream {}
unsafe impl Send for Graph {}

#[cfg(hotlab_cuda_shim)]
fn check(what: &str, rc: std::ffi::c_int) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: the shim returns a pointer to its thread's last message, NUL-terminated.
    let msg = unsafe { std::ffi::CStr::from_ptr(ffi::hl_last_error()) }.to_string_lossy();
    let first = msg.lines().next().unwrap_or("").to_string();
    bail!("{what}: {first}")
}

#[cfg(not(hotlab_cuda_shim))]
fn unavailable<T>(what: &str) -> Result<T> {
    bail!("{what}: this build has no CUDA stream support (its libtorch has no CUDA headers: ROCm or CPU-only)")
}

impl Stream {
    /// A new stream from libtorch's pool on CUDA device `device`.
    pub fn new(device: usize) -> Result<Self> {
        Self::make(device, false)
    }

    /// libtorch's current stream on `device` (to wait on, or to make current again).
    pub fn current(device: usize) -> Result<Self> {
        Self::make(device, true)
    }

    /// A new stream on `device` that no other caller gets: libtorch's pool hands its 32
    /// streams round robin, so past 32 (hosts stepped on several threads, say) two callers
    /// would share one, and a graph captured on it would take the other's work.
    #[cfg(hotlab_cuda_shim)]
    pub fn unique(device: usize) -> Result<Self> {
        if let Some(why) = crate::cuda::gpu::Support::probe().why_not() {
            bail!("making a CUDA stream: {why}");
        }
        let made = cudarc::driver::CudaContext::new(device)
            .and_then(|ctx| ctx.new_stream())
            .map_err(|e| anyhow::anyhow!("making a CUDA stream: {e:?}"))?;
        let mut out = std::ptr::null_mut();
        // SAFETY: `made` is a live stream of the primary context libtorch uses; it outlives
        // the handle (dropped after it). The shim writes a new handle when it returns 0.
        check("making a CUDA stream", unsafe {
            ffi::hl_stream_external(made.cu_stream().cast(), device as i32, &mut out)
        })?;
        Ok(Self(out, Some(made)))
    }

    #[cfg(not(hotlab_cuda_shim))]
    pub fn unique(_: usize) -> Result<Self> {
        unavailable("making a CUDA stream")
    }

    #[cfg(hotlab_cuda_shim)]
    fn make(device: usize, current: bool) -> Result<Self> {
        let mut out = std::ptr::null_mut();
        // SAFETY: the shim writes a new handle to `out` when it returns 0.
        check("making a CUDA stream", unsafe { ffi::hl_stream_new(device as i32, current as i32, &mut out) })?;
        Ok(Self(out, None))
    }

    #[cfg(not(hotlab_cuda_shim))]
    fn make(_: usize, _: bool) -> Result<Self> {
        unavailable("making a CUDA stream")
    }

    /// The CUDA stream itself (a `CUstream`), to launch our own kernels onto.
    pub fn raw(&self) -> Result<*mut std::ffi::c_void> {
        #[cfg(hotlab_cuda_shim)]
        {
            let mut out = std::ptr::null_mut();
            // SAFETY: `self.0` is a live handle; the shim writes its cudaStream_t.
            check("reading a CUDA stream", unsafe { ffi::hl_stream_raw(self.0, &mut out) })?;
            Ok(out)
        }
        #[cfg(not(hotlab_cuda_shim))]
        unavailable(&format!("reading the CUDA stream {:p}", self.0))
    }

    /// libtorch's ops on this stream's device run here from now on, on this thread.
    pub fn make_current(&self) -> Result<()> {
        #[cfg(hotlab_cuda_shim)]
        // SAFETY: `self.0` is a live handle.
        return check("setting the current CUDA stream", unsafe { ffi::hl_stream_set_current(self.0) });
        #[cfg(not(hotlab_cuda_shim))]
        unavailable("setting the current CUDA stream")
    }

    /// This stream waits, on the device, for what `other` has queued so far.
    pub fn wait_for(&self, other: &Stream) -> Result<()> {
        #[cfg(hotlab_cuda_shim)]
        // SAFETY: both handles are live.
        return check("a stream wait", unsafe { ffi::hl_stream_wait(self.0, other.0) });
        #[cfg(not(hotlab_cuda_shim))]
        unavailable(&format!("a stream wait on {:p}", other.0))
    }

    /// Blocks the host until this stream's work is done.
    pub fn synchronize(&self) -> Result<()> {
        #[cfg(hotlab_cuda_shim)]
        // SAFETY: `self.0` is a live handle.
        return check("synchronizing a CUDA stream", unsafe { ffi::hl_stream_synchronize(self.0) });
        #[cfg(not(hotlab_cuda_shim))]
        unavailable("synchronizing a CUDA stream")
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        #[cfg(hotlab_cuda_shim)]
        {
            if self.1.is_some() {
                // Its work done before the stream goes (libtorch's allocator keeps blocks
                // per stream, and a later stream could reuse the handle).
                let _ = self.synchronize();
            }
            // SAFETY: the handle was made by the shim and is dropped once.
            unsafe { ffi::hl_stream_free(self.0) }
        }
    }
}

impl Graph {
    /// Captures what `record` queues on the current stream (which must not be the default
    /// stream: make a [`Stream`] current first) as one graph.
    pub fn capture(record: impl FnOnce() -> Result<()>) -> Result<Self> {
        #[cfg(hotlab_cuda_shim)]
        {
            let mut out = std::ptr::null_mut();
            // SAFETY: the shim writes a new handle to `out` when it returns 0.
            check("making a CUDA graph", unsafe { ffi::hl_graph_new(&mut out) })?;
            let graph = Self(out);
            // SAFETY: `graph.0` is live; a capture begun is always ended.
            check("beginning a graph capture", unsafe { ffi::hl_graph_capture_begin(graph.0) })?;
            let recorded = record();
            let ended = check("ending a graph capture", unsafe { ffi::hl_graph_capture_end(graph.0) });
            recorded?;
            ended?;
            Ok(graph)
        }
        #[cfg(not(hotlab_cuda_shim))]
        {
            drop(record);
            unavailable("capturing a CUDA graph")
        }
    }

    /// What one replay launches, counted from the captured graph's nodes by the driver.
    pub fn launches(&self) -> Result<Launches> {
        #[cfg(hotlab_cuda_shim)]
        {
            use cudarc::driver::sys::{cuGraphGetNodes, cuGraphNodeGetType, CUgraph, CUgraphNodeType};
            let mut raw = std::ptr::null_mut();
            // SAFETY: `self.0` is a live, captured graph; the shim writes its cudaGraph_t.
            check("reading a captured CUDA graph", unsafe { ffi::hl_graph_raw(self.0, &mut raw) })?;
            let graph = raw as CUgraph;
            let mut n = 0usize;
            // SAFETY: a null node array asks for the count only.
            unsafe { cuGraphGetNodes(graph, std::ptr::null_mut(), &mut n) }.result()?;
            let mut nodes = vec![std::ptr::null_mut(); n];
            // SAFETY: `nodes` holds `n` entries, the count just read.
            unsafe { cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut n) }.result()?;
            let mut out = Launches::default();
            for node in nodes.into_iter().take(n) {
                let mut kind = CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
                // SAFETY: `node` is one of the graph's nodes.
                unsafe { cuGraphNodeGetType(node, &mut kind) }.result()?;
                match kind {
                    CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL => out.kernels += 1,
                    CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMCPY | CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMSET => {
                        out.copies += 1
                    }
                    _ => out.other += 1,
                }
            }
            Ok(out)
        }
        #[cfg(not(hotlab_cuda_shim))]
        unavailable(&format!("counting the launches of the CUDA graph {:p}", self.0))
    }

    /// Launches the captured work again, on the current stream.
    pub fn replay(&self) -> Result<()> {
        #[cfg(hotlab_cuda_shim)]
        // SAFETY: `self.0` is a live, captured graph.
        return check("replaying a CUDA graph", unsafe { ffi::hl_graph_replay(self.0) });
        #[cfg(not(hotlab_cuda_shim))]
        unavailable(&format!("replaying the CUDA graph {:p}", self.0))
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        #[cfg(hotlab_cuda_shim)]
        // SAFETY: the handle was made by the shim and is dropped once.
        unsafe {
            ffi::hl_graph_free(self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shim is built here (the torch wheel has CUDA's headers) and, without a GPU,
    /// refuses with libtorch's own message instead of crashing.
    #[test]
    fn without_a_gpu_a_stream_is_refused_with_a_message() {
        if tch::Cuda::is_available() {
            let s = Stream::new(0).expect("a stream on a GPU");
            s.make_current().and_then(|_| Stream::current(0)).expect("current");
            let own = Stream::unique(0).expect("a stream of its own on a GPU");
            own.make_current().and_then(|_| own.synchronize()).expect("usable");
            return;
        }
        let err = Stream::new(0).err().expect("no GPU, no stream").to_string();
        assert!(!err.contains("no CUDA stream support"), "the shim was compiled here: {err}");
        assert!(err.starts_with("making a CUDA stream: ") && err.len() > 25, "{err}");
        let err = Stream::unique(0).err().expect("no GPU, no stream of its own").to_string();
        assert!(err.starts_with("making a CUDA stream: ") && err.contains("GPU"), "{err}");
        let err = Graph::capture(|| Ok(())).err().expect("no GPU, no graph").to_string();
        assert!(err.contains("CUDA graph") || err.contains("capture"), "{err}");
    }
}

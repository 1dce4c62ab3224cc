//! Device time per phase from CUDA events recorded on libtorch's stream at every span
//! boundary, read once per window (one host sync per update, counted as the window's
//! drain); and the GPU's memory in use, sampled at each drain.
//!
//! The timer needs libtorch's context and stream only, never a kernel of ours: the loop
//! opens it for any workload on a CUDA device.

use super::gpu::Support;
use crate::profiler::DeviceTimer;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use hotlab_core::profile::{GpuMemory, Phase};
use std::sync::Arc;

pub struct EventTimer {
    ctx: Arc<CudaContext>,
    /// libtorch's stream (the legacy default stream of the primary context).
    stream: Arc<CudaStream>,
    /// Recorded boundaries: the phase the work before each belongs to.
    marks: Vec<(Option<Phase>, CudaEvent)>,
    /// Events already read, reused (creating one costs a driver call).
    pool: Vec<CudaEvent>,
    memory: GpuMemory,
    /// Set when the driver refused an event: the timer stops rather than lie.
    failed: bool,
}

impl EventTimer {
    /// A timer on CUDA GPU `ordinal`'s primary context (libtorch's); why not where there
    /// is no CUDA driver (the CPU, ROCm).
    pub fn open(ordinal: usize) -> Result<Self, String> {
        if let Some(why) = Support::probe().why_not() {
            return Err(why.replace("hand-written CUDA kernels need", "CUDA events need"));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| format!("opening the CUDA device: {e:?}"))?;
        // Events are recorded on libtorch's work, which cudarc's tracking does not see.
        // SAFETY: the timer allocates nothing that streams share.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        Ok(Self { ctx, stream, marks: Vec::new(), pool: Vec::new(), memory: GpuMemory::default(), failed: false })
    }

    fn event(&mut self) -> Option<CudaEvent> {
        self.pool.pop().or_else(|| self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).ok())
    }
}

impl DeviceTimer for EventTimer {
    fn mark(&mut self, phase: Option<Phase>) {
        if self.failed {
            return;
        }
        match self.event() {
            Some(ev) if ev.record(&self.stream).is_ok() => self.marks.push((phase, ev)),
            _ => self.failed = true,
        }
    }

    fn drain(&mut self) -> Vec<(Phase, f64)> {
        let mut out = Vec::new();
        if let Some((_, last)) = self.marks.last() {
            if last.synchronize().is_err() {
                self.failed = true;
            }
        }
        for w in self.marks.windows(2) {
            if let (Some(phase), Ok(ms)) = (w[1].0, w[0].1.elapsed_ms(&w[1].1)) {
                out.push((phase, ms as f64 / 1e3));
            }
        }
        // The last boundary starts the next window.
        let keep = self.marks.pop();
        self.pool.extend(self.marks.drain(..).map(|(_, ev)| ev));
        self.marks.extend(keep.map(|(_, ev)| (None, ev)));
        if let Ok((free, total)) = self.ctx.mem_get_info() {
            let used = (total - free) as u64;
            self.memory =
                GpuMemory { used_bytes: used, peak_bytes: self.memory.peak_bytes.max(used), total_bytes: total as u64 };
        }
        out
    }

    fn memory(&self) -> Option<GpuMemory> {
        (self.memory.total_bytes > 0).then_some(self.memory)
    }
}

//! Device time per phase from CUDA events recorded on libtorch's stream at every span
//! boundary, read once per window (one host sync per update, counted as the window's
//! drain); and the GPU's memory in use, sampled at each drain.

use super::gpu::Gpu;
use crate::profiler::DeviceTimer;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;
use hotlab_shared::profile::{GpuMemory, Phase};
use std::sync::Arc;

pub struct EventTimer {
    gpu: Arc<Gpu>,
    /// Recorded boundaries: the phase the work before each belongs to.
    marks: Vec<(Option<Phase>, CudaEvent)>,
    /// Events already read, reused (creating one costs a driver call).
    pool: Vec<CudaEvent>,
    memory: GpuMemory,
    /// Set when the driver refused an event: the timer stops rather than lie.
    failed: bool,
}

impl EventTimer {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        Self { gpu, marks: Vec::new(), pool: Vec::new(), memory: GpuMemory::default(), failed: false }
    }

    fn event(&mut self) -> Option<CudaEvent> {
        self.pool.pop().or_else(|| self.gpu.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).ok())
    }
}

impl DeviceTimer for EventTimer {
    fn mark(&mut self, phase: Option<Phase>) {
        if self.failed {
            return;
        }
        match self.event() {
            Some(ev) if ev.record(&self.gpu.torch_stream).is_ok() => self.marks.push((phase, ev)),
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
        if let Ok((free, total)) = self.gpu.ctx.mem_get_info() {
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

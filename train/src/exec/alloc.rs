//! Allocator settings for the trainer.
//!
//! libtorch allocates a fresh buffer for every intermediate tensor. Above glibc's mmap
//! threshold (128 KiB, adaptive) each one is a fresh `mmap` that is page-faulted in and
//! unmapped on free: at the `wide` preset that was ~15 % of the update in the kernel's
//! page-fault path. Raising the thresholds keeps those buffers in the heap for reuse.

/// Applies the settings once; harmless to call again.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; it is called before the
    // trainer's threads allocate and takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

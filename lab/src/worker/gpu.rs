//! The worker's GPUs as its heartbeats report them, from `nvidia-smi` (libtorch has no API
//! for a device's load, and the worker does not link it).

/// GPU memory in use (bytes, summed) and utilization (0 to 1, averaged), where
/// `nvidia-smi` is installed.
pub fn load() -> Option<(u64, f64)> {
    let out = std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=memory.used,utilization.gpu", "--format=csv,noheader,nounits"])
        .output()
        .ok()?;
    let rows: Vec<(u64, f64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (mib, util) = l.split_once(',')?;
            Some((mib.trim().parse::<u64>().ok()? * 1024 * 1024, util.trim().parse::<f64>().ok()? / 100.0))
        })
        .collect();
    (!rows.is_empty()).then(|| {
        let used = rows.iter().map(|r| r.0).sum();
        (used, rows.iter().map(|r| r.1).sum::<f64>() / rows.len() as f64)
    })
}

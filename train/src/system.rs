//! Describing the machine: hotlab and libtorch versions, devices, cores.

use hotlab_protocol::system::{DeviceInfo, SystemInfo};

/// The libtorch version this binary was built against (read from the wheel by build.rs).
pub const TORCH_VERSION: &str = env!("HOTLAB_TORCH_VERSION");

pub fn info() -> SystemInfo {
    let cuda_available = tch::Cuda::is_available();
    let mut devices = vec![DeviceInfo { id: "cpu".into(), name: cpu_name(), memory_bytes: total_memory() }];
    if cuda_available {
        let gpus = nvidia_smi();
        for i in 0..tch::Cuda::device_count() as usize {
            let (name, memory_bytes) = gpus.get(i).cloned().unwrap_or_else(|| ("CUDA device".into(), None));
            devices.push(DeviceInfo { id: format!("cuda:{i}"), name, memory_bytes });
        }
    }
    SystemInfo {
        name: "hotlab".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        torch_version: TORCH_VERSION.into(),
        cuda_available,
        devices,
        cpu_cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        torch_threads: tch::get_num_threads().max(1) as usize,
        store_bytes: None,
        store: None,
        scripts: None,
    }
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()))
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The machine's memory, from `/proc/meminfo`.
pub fn total_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 =
        text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// GPU names and memory from `nvidia-smi`, where it is installed (libtorch has no API for them).
fn nvidia_smi() -> Vec<(String, Option<u64>)> {
    let Ok(out) = std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=name,memory.total", "--format=csv,noheader,nounits"])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (name, mib) = l.rsplit_once(',')?;
            Some((name.trim().to_string(), mib.trim().parse::<u64>().ok().map(|m| m * 1024 * 1024)))
        })
        .collect()
}

/// Memory the OS can give a new allocation now (`MemAvailable`), in bytes; None off Linux.
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A spec whose rollout, networks and worker processes would not fit in the memory
/// available now is refused before it starts (an out-of-memory kill would take the whole
/// lab down with it).
pub fn check_memory(spec: &hotlab_spec::RunSpec) -> Result<(), hotlab_spec::SpecError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    available_memory().map_or(Ok(()), |bytes| spec.check_memory(bytes, cores))
}

/// Best-of-five seconds of `f`.
fn best(mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// libtorch's sgemm in GFLOP/s on `device` (1024² on the CPU with its current thread
/// count, 8192² on a GPU; fp32), timed to a read of the result: the peak a benchmark's
/// achieved GFLOP/s is compared with.
pub fn sgemm_gflops(device: tch::Device) -> f64 {
    use tch::{Device, Kind, Tensor};
    let n = if device == Device::Cpu { 1024 } else { 8192 };
    let (a, b) = (Tensor::randn([n, n], (Kind::Float, device)), Tensor::randn([n, n], (Kind::Float, device)));
    let run = || {
        let c = a.mm(&b);
        let _ = c.double_value(&[0, 0]);
    };
    run();
    2.0 * (n * n * n) as f64 / best(run) / 1e9
}

/// This process's resident memory, from `/proc/self/status`.
pub fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 =
        text.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

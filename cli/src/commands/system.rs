//! `hotlab system`: versions, devices and cores.

use crate::failure::Outcome;
use clap::Args;
use hotlab_train::system;

#[derive(Args, Debug)]
pub struct SystemArgs {
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn system(a: SystemArgs) -> Outcome<()> {
    let info = system::info();
    if a.json {
        println!("{}", serde_json::to_string(&info)?);
        return Ok(());
    }
    println!("hotlab {} (libtorch {})", info.version, info.torch_version);
    println!("CPU cores: {}, libtorch threads: {}", info.cpu_cores, info.torch_threads);
    println!("CUDA available: {}", info.cuda_available);
    for d in &info.devices {
        let mem = d.memory_bytes.map_or(String::new(), |b| format!(", {:.1} GiB", b as f64 / (1u64 << 30) as f64));
        println!("  {}: {}{mem}", d.id, d.name);
    }
    Ok(())
}

//! Steps/s of the playground's two paths natively: the WGSL kernel through wgpu on
//! Vulkan (Mesa's lavapipe on a machine without a GPU) and the CPU batch env, at several
//! batch sizes, under the random policy or a hand-made balancing actor.
//!
//! ```text
//! cargo run --release -p hotlab-wgpu --example playground_bench -- [--policy random|actor]
//!     [--sizes 1,16,256,4096,65536,1048576] [--seconds 0.5] [--json]
//! ```

use hotlab_wgpu::cpu::CpuCartPole;
use hotlab_wgpu::gpu::{Gpu, GpuCartPole};
use hotlab_wgpu::{Actor, Policy, Setup, Tally};
use std::sync::Arc;
use std::time::Instant;

const HELP: &str = "playground_bench: steps/s of the WGSL kernel (wgpu, Vulkan) and of the CPU batch env

Options:
  --policy random|actor   the uniform random policy (default) or a balancing 4-8-2 tanh actor
  --sizes N,N,...         batch sizes (default 1,16,256,4096,65536,1048576; each 1 to 1048576)
  --seconds S             measuring time per size and path (default 0.5)
  --json                  one JSON object instead of a table";

struct Args {
    policy: Policy,
    sizes: Vec<usize>,
    seconds: f64,
    json: bool,
}

fn parse() -> Result<Args, String> {
    let mut a =
        Args { policy: Policy::Random, sizes: vec![1, 16, 256, 4096, 65536, 1 << 20], seconds: 0.5, json: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--policy" => {
                a.policy = match value()?.as_str() {
                    "random" => Policy::Random,
                    "actor" => Policy::Actor { actor: balancer(), greedy: true },
                    other => return Err(format!("--policy: '{other}'; allowed: random, actor")),
                }
            }
            "--sizes" => {
                a.sizes = value()?
                    .split(',')
                    .map(|s| s.trim().parse::<usize>().ok().filter(|n| (1..=hotlab_wgpu::MAX_ENVS).contains(n)))
                    .collect::<Option<_>>()
                    .ok_or("--sizes: a comma-separated list of sizes between 1 and 1048576")?
            }
            "--seconds" => {
                a.seconds = value()?
                    .parse()
                    .ok()
                    .filter(|s: &f64| (0.01..=60.0).contains(s))
                    .ok_or("--seconds: a number between 0.01 and 60")?
            }
            "--json" => a.json = true,
            "-h" | "--help" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option '{other}' (see --help)")),
        }
    }
    Ok(a)
}

/// One tanh unit leaning with the pole; the logits ±5 of it (as in the tests).
fn balancer() -> Arc<Actor> {
    let mut params = vec![0f32; 4 * 8 + 8 + 8 * 2 + 2];
    for (i, w) in [0.0, 0.3, 10.0, 3.0].into_iter().enumerate() {
        params[i * 8] = w;
    }
    params[40] = -5.0;
    params[41] = 5.0;
    Arc::new(Actor { widths: vec![4, 8, 2], params, norm: None })
}

/// Steps/s over `seconds` after a warm-up, growing the steps per call until a call
/// takes about 50 ms (so per-call overhead is what a real frame loop would pay).
fn measure(seconds: f64, mut step: impl FnMut(u32) -> Tally) -> (f64, Option<f64>) {
    step(1); // the first dispatch compiles the kernel (lavapipe JITs it)
    let mut k = 1;
    loop {
        let t = Instant::now();
        step(k);
        if t.elapsed().as_secs_f64() > 0.05 || k >= 4096 {
            break;
        }
        k *= 2;
    }
    let start = Instant::now();
    let mut tally = Tally::default();
    while start.elapsed().as_secs_f64() < seconds {
        tally.add(step(k));
    }
    (tally.steps as f64 / start.elapsed().as_secs_f64(), tally.mean_length())
}

fn main() {
    let args = parse().unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2);
    });
    let gpu = pollster::block_on(Gpu::new()).unwrap_or_else(|e| {
        eprintln!("error: {e} (install mesa-vulkan-drivers for lavapipe)");
        std::process::exit(1);
    });
    let mut rows = Vec::new();
    for &n in &args.sizes {
        let setup = Setup { envs: n, seed: 1, policy: args.policy.clone() };
        let mut g = pollster::block_on(GpuCartPole::new(&gpu, &setup)).expect("the kernel builds");
        let (gpu_sps, gpu_len) = measure(args.seconds, |k| pollster::block_on(g.run(k, 16)).expect("gpu step").0);
        let mut c = CpuCartPole::new(&setup).expect("valid setup");
        let (cpu_sps, cpu_len) = measure(args.seconds, |k| c.run(k, &mut || false));
        if !args.json {
            println!(
                "{n:>8} envs   wgpu {gpu_sps:>14.0} steps/s   cpu {cpu_sps:>14.0} steps/s   mean length {:.1} / {:.1}",
                gpu_len.unwrap_or(0.0),
                cpu_len.unwrap_or(0.0)
            );
        }
        rows.push(serde_json::json!({"envs": n, "wgpu_sps": gpu_sps, "cpu_sps": cpu_sps,
            "wgpu_mean_length": gpu_len, "cpu_mean_length": cpu_len}));
    }
    if args.json {
        let policy = if matches!(args.policy, Policy::Random) { "random" } else { "actor" };
        println!(
            "{}",
            serde_json::json!({"adapter": gpu.adapter, "policy": policy, "seconds": args.seconds, "sizes": rows})
        );
    }
}

//! The WGSL kernel against `hotlab_env`'s f32 batch env, on a real Vulkan device
//! (Mesa's lavapipe here; `cargo xtask test` installs it).
//!
//! Tolerance: every transition starts the GPU from the batch env's exact state, step
//! counter and reset stream. The next state then agrees to 2e-6 absolute (the kernel is
//! the same f32 arithmetic; a GPU may round a division or fuse a multiply-add
//! differently), the reset states drawn at an autoreset agree to 1e-6, and the
//! terminated/truncated flags are equal except where the state is within 1e-5 of a
//! threshold (none in these runs; the test counts them). On lavapipe the worst difference
//! is 2.4e-7, one unit in the last place of a value near 2.

use hotlab_env::cartpole as cp;
use hotlab_env::cartpole::CartPoleBatch;
use hotlab_env::rng::HostRng;
use hotlab_env::{BatchEnv, Observations, StepBatch};
use hotlab_wgpu::actor::InputNorm;
use hotlab_wgpu::cpu::CpuCartPole;
use hotlab_wgpu::gpu::{Gpu, GpuCartPole};
use hotlab_wgpu::{Actor, Policy, Setup, Tally};
use std::sync::{Arc, OnceLock};

const STATE_TOL: f32 = 2e-6;
const RESET_TOL: f32 = 1e-6;

fn gpu() -> &'static Gpu {
    static GPU: OnceLock<Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        pollster::block_on(Gpu::new())
            .unwrap_or_else(|e| panic!("{e}: these tests need a Vulkan device (apt-get install mesa-vulkan-drivers)"))
    })
}

fn near_threshold(s: [f32; 4]) -> bool {
    let (xt, tt) = (cp::X_THRESHOLD as f32, cp::THETA_THRESHOLD as f32);
    (s[0].abs() - xt).abs() < 1e-5 || (s[2].abs() - tt).abs() < 1e-5
}

fn max_diff(a: [f32; 4], b: [f32; 4]) -> f32 {
    a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn wgsl_transitions_match_the_batch_env_autoreset_and_truncation_included() {
    println!("adapter: {}", gpu().adapter);
    for (seed, n, steps) in [(1u64, 1usize, 600), (7, 64, 300), (42, 1000, 200), (3, 4099, 60)] {
        let mut cpu = CartPoleBatch::new(n, seed, 0);
        let spec = cpu.spec().clone();
        cpu.reset(&mut Observations::zeros(&spec, n)).unwrap();
        let mut out = StepBatch::new(&spec, n);
        let setup = Setup { envs: n, seed, policy: Policy::Random };
        let mut gpu = pollster::block_on(GpuCartPole::new(gpu(), &setup)).unwrap();
        let first = pollster::block_on(gpu.states(n)).unwrap();
        assert_eq!(first, (0..n).map(|i| cpu.state(i)).collect::<Vec<_>>(), "the first states are the batch env's");

        let mut host = HostRng::new(seed);
        let (mut worst, mut resets, mut truncations, mut borderline) = (0f32, 0, 0, 0);
        for step in 0..steps {
            if step == 0 {
                // Env 0 is 3 steps from the time limit: the pole is kept upright below.
                cpu.elapsed[0] = cp::MAX_STEPS - 3;
            }
            if step < 3 {
                cpu.set_state(0, [0.0; 4]);
            }
            let actions: Vec<u32> = (0..n).map(|_| host.below(2) as u32).collect();
            let states: Vec<[f32; 4]> = (0..n).map(|i| cpu.state(i)).collect();
            let rngs: Vec<_> = (0..n).map(|i| cpu.rng(i)).collect();
            gpu.load(&states, &cpu.elapsed, &rngs);
            let t = pollster::block_on(gpu.step_with(&actions)).unwrap();
            let a64: Vec<i64> = actions.iter().map(|&a| a as i64).collect();
            cpu.step(&a64, &mut out).unwrap();
            assert_eq!(t.actions, actions, "the kernel took the given actions");
            for i in 0..n {
                let ended = out.terminated[i] || out.truncated[i];
                let reached = if ended { out.final_row(0, i).try_into().unwrap() } else { cpu.state(i) };
                if t.terminated[i] != out.terminated[i] {
                    assert!(
                        near_threshold(reached),
                        "seed {seed} env {i} step {step}: terminated differs at {reached:?}"
                    );
                    borderline += 1;
                    continue;
                }
                assert_eq!(t.truncated[i], out.truncated[i], "seed {seed} env {i} step {step}: truncated");
                let d = max_diff(t.final_state[i], reached);
                assert!(d <= STATE_TOL, "seed {seed} env {i} step {step}: {:?} vs {reached:?}", t.final_state[i]);
                worst = worst.max(d);
                if ended {
                    resets += 1;
                    truncations += out.truncated[i] as usize;
                    let d = max_diff(t.state[i], cpu.state(i));
                    assert!(d <= RESET_TOL, "seed {seed} env {i}: reset to {:?} vs {:?}", t.state[i], cpu.state(i));
                }
            }
        }
        println!("seed {seed}, {n} envs, {steps} steps: worst |Δstate| {worst:e}, {resets} autoresets, {truncations} truncations, {borderline} borderline flags");
        assert!(resets >= n, "every env ended at least once on average ({resets})");
        assert!(truncations >= 1, "the time limit was hit");
        assert_eq!(borderline, 0);
    }
}

/// Runs `steps` batch steps on the GPU in dispatches of `per_dispatch`.
fn gpu_tally(setup: &Setup, steps: u32, per_dispatch: u32) -> (Tally, Vec<[f32; 4]>) {
    let mut g = pollster::block_on(GpuCartPole::new(gpu(), setup)).unwrap();
    let mut tally = Tally::default();
    let mut done = 0;
    while done < steps {
        let k = per_dispatch.min(steps - done);
        tally.add(pollster::block_on(g.run(k, 0)).unwrap().0);
        done += k;
    }
    (tally, pollster::block_on(g.states(setup.envs)).unwrap())
}

#[test]
fn many_steps_per_dispatch_equal_one_per_dispatch_and_the_cpu_playground() {
    let setup = Setup { envs: 3000, seed: 5, policy: Policy::Random };
    let (one, s1) = gpu_tally(&setup, 120, 1);
    let (many, s40) = gpu_tally(&setup, 120, 40);
    assert_eq!(one, many, "the tallies do not depend on how steps are split into dispatches");
    let worst = s1.iter().zip(&s40).map(|(a, b)| max_diff(*a, *b)).fold(0.0, f32::max);
    assert!(worst <= STATE_TOL, "{worst}");
    // Dispatches submitted together and read back once (the playground's read-back lesson).
    let mut g = pollster::block_on(GpuCartPole::new(gpu(), &setup)).unwrap();
    let mut batched = Tally::default();
    for _ in 0..4 {
        batched.add(pollster::block_on(g.run_batched(30, 1, 0)).unwrap().0);
    }
    assert_eq!(batched, one, "120 dispatches of 1 step, read back every 30");
    let states = pollster::block_on(g.states(setup.envs)).unwrap();
    let worst = states.iter().zip(&s1).map(|(a, b)| max_diff(*a, *b)).fold(0.0, f32::max);
    assert!(worst <= STATE_TOL, "{worst}");

    // The CPU playground draws the same actions from the same streams: the same episodes,
    // up to an episode whose end a rounding difference moved (none here).
    let mut cpu = CpuCartPole::new(&setup).unwrap();
    let c = cpu.run(120, &mut || false);
    assert_eq!(c.steps, one.steps);
    println!("gpu {one:?}\ncpu {c:?}");
    assert!(c.episodes.abs_diff(one.episodes) <= c.episodes / 1000, "{c:?} vs {one:?}");
    let mean = one.mean_length().unwrap();
    assert!((19.0..26.0).contains(&mean), "random episodes last about 22 steps: {mean}");
}

/// A hand-made actor: one tanh unit that leans with the pole (10θ + 3θ̇ + 0.3ẋ), the
/// logits ±5 of it, seven idle units.
fn balancer() -> Arc<Actor> {
    let mut params = vec![0f32; 4 * 8 + 8 + 8 * 2 + 2];
    for (i, w) in [0.0, 0.3, 10.0, 3.0].into_iter().enumerate() {
        params[i * 8] = w;
    }
    params[40] = -5.0; // w1[0][0]: logit 0
    params[41] = 5.0; // w1[0][1]: logit 1
    Arc::new(Actor { widths: vec![4, 8, 2], params, norm: None })
}

/// The balancer behind a normalizer, its first layer undoing it: it still balances,
/// reading its inputs through the statistics (the clip at ±3 bites only far from upright).
fn normalized_balancer() -> Arc<Actor> {
    let norm = InputNorm { mean: [0.05, -0.1, 0.01, 0.2], scale: [2.0, 0.5, 8.0, 1.5], clip: 3.0 };
    let mut params = balancer().params.clone();
    // w·x + b = (w / scale)·((x − mean)·scale) + (b + w·mean).
    let mut bias = 0.0;
    for i in 0..4 {
        bias += params[i * 8] * norm.mean[i];
        params[i * 8] /= norm.scale[i];
    }
    params[32] = bias;
    Arc::new(Actor { widths: vec![4, 8, 2], params, norm: Some(norm) })
}

#[test]
fn the_actor_in_wgsl_chooses_as_the_host_does_and_balances() {
    for (actor, greedy) in [(balancer(), true), (balancer(), false), (normalized_balancer(), true)] {
        let setup = Setup { envs: 2048, seed: 9, policy: Policy::Actor { actor: actor.clone(), greedy } };
        let mut g = pollster::block_on(GpuCartPole::new(gpu(), &setup)).unwrap();
        let mut rngs: Vec<_> = (0..setup.envs as u64).map(|i| hotlab_wgpu::action_rng(9, i)).collect();
        let (mut same, mut total) = (0, 0);
        for _ in 0..20 {
            let before = pollster::block_on(g.states(setup.envs)).unwrap();
            let t = pollster::block_on(g.step_policy()).unwrap();
            for (i, s) in before.iter().enumerate() {
                let host = hotlab_wgpu::actor::choose(&setup.policy, *s, &mut rngs[i]);
                same += (host == t.actions[i] as i64) as usize;
                total += 1;
            }
        }
        // tanh and exp may differ in the last bits between the GPU and the host: a
        // choice at an exact tie could flip, nothing more.
        assert!(same * 1000 >= total * 999, "greedy {greedy}: {same} of {total} choices agree");

        let (tally, _) = gpu_tally(&setup, 2000, 250);
        let mean = tally.mean_length().unwrap();
        println!("balancer, greedy {greedy}: mean episode length {mean:.1} over {} episodes", tally.episodes);
        assert!(mean > 220.0, "a balancing actor keeps the pole up over 10× longer than random: {mean}");
    }
}

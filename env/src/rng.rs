//! Per-env random streams.
//!
//! Every env owns its own 32-bit PCG stream (PCG-RXS-M-XS), keyed by the run seed and
//! the env's global index. Results therefore do not depend on how envs are partitioned
//! across threads or processes, and the generator needs only 32-bit integer arithmetic,
//! so a WGSL or CUDA kernel can reproduce it bit for bit.

/// A 32-bit PCG generator (one per env).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvRng {
    state: u32,
}

impl EnvRng {
    /// The stream of env `index` in a run seeded with `seed`.
    pub fn for_env(seed: u64, index: u64) -> Self {
        let mixed = splitmix64(seed ^ splitmix64(index.wrapping_add(0x9E37_79B9_7F4A_7C15)));
        Self { state: (mixed ^ (mixed >> 32)) as u32 }
    }

    /// The current state (for generators that run the same stream elsewhere, e.g. in tensors).
    pub fn state(&self) -> u32 {
        self.state
    }

    /// Next 32 random bits.
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.state = old.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
        let word = ((old >> ((old >> 28) + 4)) ^ old).wrapping_mul(277_803_737);
        (word >> 22) ^ word
    }

    /// Uniform in [0, 1) with 24 bits of precision (exact in f32).
    #[inline]
    pub fn next_unit_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / 16_777_216.0)
    }

    /// Uniform in [low, high).
    #[inline]
    pub fn uniform_f32(&mut self, low: f32, high: f32) -> f32 {
        low + (high - low) * self.next_unit_f32()
    }
}

/// The action stream of env `i` (random and sampled actions of the GPU kernels and the
/// playground): separate from its reset stream, so that the env's trajectory given its
/// actions is exactly the batch env's.
pub fn action_rng(seed: u64, i: u64) -> EnvRng {
    EnvRng::for_env(seed ^ 0xAC71_0A5E_ED00_0001, i)
}

/// SplitMix64: a good 64-bit mixer, used to derive seeds.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A 64-bit host-side generator for everything that is not per-env (sampling
/// actions, shuffling minibatches, generating test data). xoshiro256++.
#[derive(Clone, Debug)]
pub struct HostRng {
    s: [u64; 4],
}

impl HostRng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut s = [0u64; 4];
        for word in &mut s {
            x = splitmix64(x);
            *word = x;
        }
        Self { s }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// Uniform in [0, 1) as f32.
    #[inline]
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / 16_777_216.0)
    }

    /// Uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_streams_are_independent_of_each_other_and_reproducible() {
        let mut a = EnvRng::for_env(7, 0);
        let mut b = EnvRng::for_env(7, 1);
        let mut a2 = EnvRng::for_env(7, 0);
        let xs: Vec<u32> = (0..8).map(|_| a.next_u32()).collect();
        let ys: Vec<u32> = (0..8).map(|_| b.next_u32()).collect();
        let xs2: Vec<u32> = (0..8).map(|_| a2.next_u32()).collect();
        assert_eq!(xs, xs2);
        assert_ne!(xs, ys);
    }

    #[test]
    fn unit_floats_stay_in_range_and_cover_it() {
        let mut r = EnvRng::for_env(1, 2);
        let v: Vec<f32> = (0..10_000).map(|_| r.uniform_f32(-0.05, 0.05)).collect();
        assert!(v.iter().all(|x| (-0.05..0.05).contains(x)));
        assert!(v.iter().any(|&x| x < -0.045) && v.iter().any(|&x| x > 0.045));
        let mut h = HostRng::new(3);
        let mut counts = [0usize; 4];
        for _ in 0..4000 {
            counts[h.below(4) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 850), "{counts:?}");
    }
}

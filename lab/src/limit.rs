//! A per-client rate limit on token checks: `GET /api/auth` and every request that
//! brings a wrong token spend from the client's bucket, so the token cannot be guessed
//! at network speed. A client is its IP address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Checks a client may make at once, and how fast its allowance comes back by default.
pub const BURST: f64 = 60.0;
pub const PER_SECOND: f64 = 1.0;

/// Clients remembered at most; full buckets are forgotten first.
const CLIENTS: usize = 10_000;

/// What the limiter reads the time from (`Instant::now`, or a test's own clock).
pub type Clock = Box<dyn Fn() -> Instant + Send + Sync>;

pub struct Limiter {
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
    /// Checks a second a client's allowance comes back at.
    per_second: f64,
    clock: Clock,
}

impl Default for Limiter {
    fn default() -> Self {
        Self::new(PER_SECOND)
    }
}

impl Limiter {
    /// A limiter whose allowance comes back at `per_second` (0: never; `hotlab serve
    /// --auth-checks-per-second`).
    pub fn new(per_second: f64) -> Self {
        Self::with_clock(per_second, Box::new(Instant::now))
    }

    /// One that reads the time from `clock`.
    pub fn with_clock(per_second: f64, clock: Clock) -> Self {
        Self { buckets: Mutex::default(), per_second, clock }
    }

    /// Spends one check for `client`; Err(how long until one is back) when none is left
    /// (`Duration::MAX` when none ever comes back).
    pub fn take(&self, client: IpAddr) -> Result<(), Duration> {
        let now = (self.clock)();
        let rate = self.per_second;
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= CLIENTS {
            buckets.retain(|_, (left, at)| *left + now.duration_since(*at).as_secs_f64() * rate < BURST);
        }
        let (left, at) = buckets.entry(client).or_insert((BURST, now));
        *left = (*left + now.duration_since(*at).as_secs_f64() * rate).min(BURST);
        *at = now;
        if *left < 1.0 {
            return Err(match rate > 0.0 {
                true => Duration::from_secs_f64((1.0 - *left) / rate),
                false => Duration::MAX,
            });
        }
        *left -= 1.0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_client_gets_its_burst_then_one_check_a_second_and_others_are_not_affected() {
        let start = Instant::now();
        let now = Arc::new(Mutex::new(start));
        let clock = Arc::clone(&now);
        let limiter = Limiter::with_clock(PER_SECOND, Box::new(move || *clock.lock().unwrap()));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let allowed = (0..200).filter(|_| limiter.take(a).is_ok()).count();
        assert_eq!(allowed, BURST as usize, "the burst, and no more while the clock stands");
        assert_eq!(limiter.take(a).unwrap_err(), Duration::from_secs_f64(1.0 / PER_SECOND));
        assert!(limiter.take(b).is_ok(), "another client has its own bucket");
        *now.lock().unwrap() = start + Duration::from_millis(2500);
        let allowed = (0..200).filter(|_| limiter.take(a).is_ok()).count();
        assert_eq!(allowed, 2, "two and a half seconds give two whole checks back");
        let wait = limiter.take(a).unwrap_err();
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-9, "{wait:?}: the half check left is half a second's");
        let frozen = Limiter::with_clock(0.0, Box::new(Instant::now));
        assert_eq!((0..200).filter(|_| frozen.take(a).is_ok()).count(), BURST as usize);
        assert_eq!(frozen.take(a).unwrap_err(), Duration::MAX, "none comes back at 0 a second");
    }
}

//! A per-client rate limit on token checks: `GET /api/auth` and every request that
//! brings a wrong token spend from the client's bucket, so the token cannot be guessed
//! at network speed. A client is its IP address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Checks a client may make at once, and how fast its allowance comes back.
pub const BURST: f64 = 60.0;
pub const PER_SECOND: f64 = 1.0;

/// Clients remembered at most; full buckets are forgotten first.
const CLIENTS: usize = 10_000;

#[derive(Default)]
pub struct Limiter {
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl Limiter {
    /// Spends one check for `client`; Err(how long until one is back) when none is left.
    pub fn take(&self, client: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= CLIENTS {
            buckets.retain(|_, (left, at)| *left + now.duration_since(*at).as_secs_f64() * PER_SECOND < BURST);
        }
        let (left, at) = buckets.entry(client).or_insert((BURST, now));
        *left = (*left + now.duration_since(*at).as_secs_f64() * PER_SECOND).min(BURST);
        *at = now;
        if *left < 1.0 {
            return Err(Duration::from_secs_f64((1.0 - *left) / PER_SECOND));
        }
        *left -= 1.0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_its_burst_then_waits_and_others_are_not_affected() {
        let limiter = Limiter::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let allowed = (0..200).filter(|_| limiter.take(a).is_ok()).count();
        // The loop takes far less than a second on any machine; allow for one refill.
        assert!((BURST as usize..=BURST as usize + 2).contains(&allowed), "{allowed}");
        let wait = limiter.take(a).unwrap_err();
        assert!(wait <= Duration::from_secs_f64(1.0 / PER_SECOND));
        assert!(limiter.take(b).is_ok(), "another client has its own bucket");
    }
}

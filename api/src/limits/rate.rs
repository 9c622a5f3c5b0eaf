//! The per-key rate limit: governor's GCRA, one state per API key (by the
//! sha256 of the key, never the key). Each request takes one cell; a key
//! may send `burst` at once and then one per `1 / per_second` seconds,
//! which is the token bucket docs/operations.md describes.

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use governor::clock::{Clock, MonotonicClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::Quota;

/// Keys held before an eviction pass is forced (bounded memory even with
/// very many keys in use).
pub(super) const MAX_BUCKETS: usize = 100_000;
/// Idle keys are evicted at most this often when the map is small.
pub(super) const SWEEP_EVERY: Duration = Duration::from_secs(10);

type Keyed<C> = governor::RateLimiter<
    String,
    DashMapStateStore<String>,
    C,
    NoOpMiddleware<<C as Clock>::Instant>,
>;

/// A rate limit per API key.
pub struct RateLimiter<C: Clock = MonotonicClock> {
    quota: Quota,
    clock: C,
    /// Swapped for an empty one when evicting the idle keys is not enough
    /// (see [`RateLimiter::sweep`]).
    keys: RwLock<Arc<Keyed<C>>>,
    last_sweep: Mutex<C::Instant>,
}

impl<C: Clock> std::fmt::Debug for RateLimiter<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("quota", &self.quota)
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// `None` when `per_second` is 0 (off) or not a finite positive number.
    pub fn new(per_second: f64, burst: u32) -> Option<Self> {
        Self::with_clock(per_second, burst, MonotonicClock)
    }
}

impl<C: Clock + Clone> RateLimiter<C> {
    pub fn with_clock(per_second: f64, burst: u32, clock: C) -> Option<Self> {
        if !(per_second.is_finite() && per_second > 0.0) {
            return None;
        }
        let period = Duration::try_from_secs_f64(1.0 / per_second).ok()?;
        let burst = NonZeroU32::new(burst.max(1))?;
        let quota = Quota::with_period(period)?.allow_burst(burst);
        let now = clock.now();
        Some(Self {
            keys: RwLock::new(Arc::new(Keyed::dashmap_with_clock(quota, clock.clone()))),
            quota,
            clock,
            last_sweep: Mutex::new(now),
        })
    }

    fn keys(&self) -> Arc<Keyed<C>> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Takes a cell for `key`, or says how long until one is there.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        let now = self.clock.now();
        let due = {
            let mut last = self.last_sweep.lock().unwrap_or_else(|p| p.into_inner());
            let due = Duration::from(now.duration_since(*last)) >= SWEEP_EVERY;
            if due {
                *last = now;
            }
            due
        };
        let keys = self.keys();
        if due || keys.len() >= MAX_BUCKETS {
            self.sweep(&keys);
        }
        self.keys()
            .check_key(&key.to_owned())
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Forgets every key whose state is that of a fresh one (governor's
    /// `retain_recent`). If more than `MAX_BUCKETS` keys are still busy,
    /// every key is forgotten: governor cannot pick the least limited ones
    /// to drop, and forgetting can only make the limit more lenient, never
    /// stricter.
    fn sweep(&self, keys: &Keyed<C>) {
        keys.retain_recent();
        if keys.len() >= MAX_BUCKETS {
            let fresh = Arc::new(Keyed::dashmap_with_clock(self.quota, self.clock.clone()));
            *self.keys.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        } else {
            keys.shrink_to_fit();
        }
    }

    /// Keys currently held.
    pub fn len(&self) -> usize {
        self.keys().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use governor::clock::FakeRelativeClock;

    use super::super::retry_after_seconds;
    use super::*;

    #[test]
    fn a_key_gets_its_burst_then_is_told_when() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(0.5, 2, clock.clone()).unwrap();
        assert!(limiter.check("a").is_ok());
        assert!(limiter.check("a").is_ok());
        let wait = limiter.check("a").unwrap_err();
        assert_eq!(retry_after_seconds(wait), 2);
        // Another key has its own state.
        assert!(limiter.check("b").is_ok());
        // Half a cell later: one second more to wait.
        clock.advance(Duration::from_secs(1));
        let wait = limiter.check("a").unwrap_err();
        assert_eq!(retry_after_seconds(wait), 1);
        clock.advance(Duration::from_secs(1));
        assert!(limiter.check("a").is_ok());
    }

    #[test]
    fn off_means_off() {
        assert!(RateLimiter::new(0.0, 10).is_none());
        assert!(RateLimiter::new(f64::NAN, 10).is_none());
    }

    #[test]
    fn idle_keys_are_evicted() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(100.0, 10, clock.clone()).unwrap();
        for i in 0..1_000 {
            limiter.check(&format!("k{i}")).unwrap();
        }
        assert_eq!(limiter.len(), 1_000);
        // Long after, every key is as good as new: the next check sweeps them.
        clock.advance(SWEEP_EVERY);
        limiter.check("fresh").unwrap();
        assert_eq!(limiter.len(), 1);
    }

    #[test]
    fn the_map_never_outgrows_its_bound() {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::with_clock(0.001, 1, clock).unwrap();
        for i in 0..(MAX_BUCKETS + 10) {
            let _ = limiter.check(&format!("k{i}"));
        }
        assert!(limiter.len() <= MAX_BUCKETS);
    }
}

//! When a failed delivery is tried again, and when it is given up.

use std::time::Duration;

/// The delivery settings of a process (`TALLY_WEBHOOK_*`, docs/operations.md).
#[derive(Debug, Clone, Copy)]
pub struct WebhookConfig {
    /// One attempt's time limit (`TALLY_WEBHOOK_TIMEOUT_MS`, 10 s).
    pub timeout: Duration,
    /// The first retry's cap (`TALLY_WEBHOOK_RETRY_BASE_MS`, 5 s).
    pub retry_base: Duration,
    /// No wait is longer (`TALLY_WEBHOOK_RETRY_MAX_MS`, 1 h).
    pub retry_max: Duration,
    /// A delivery still failing this long after its event is given up
    /// (`failed`, dead-lettered; `TALLY_WEBHOOK_MAX_AGE_S`, 3 days).
    pub max_age: Duration,
    /// `http://` and private addresses allowed (`--webhook-allow-insecure`).
    pub allow_insecure: bool,
    /// How often the log and the due deliveries are looked at when no
    /// commit of this process says so sooner.
    pub poll: Duration,
    /// Attempts in flight in this process, over every endpoint.
    pub max_in_flight: usize,
    /// Attempts in flight to one endpoint: a slow one takes no more.
    pub max_in_flight_per_endpoint: usize,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            retry_base: Duration::from_secs(5),
            retry_max: Duration::from_secs(3600),
            max_age: Duration::from_secs(3 * 24 * 3600),
            allow_insecure: false,
            poll: Duration::from_millis(500),
            max_in_flight: 64,
            max_in_flight_per_endpoint: 8,
        }
    }
}

impl WebhookConfig {
    /// How long a claimed delivery is the claimant's: longer than one
    /// attempt can take, so no two processes send it at once; a process
    /// killed mid-attempt leaves it to another once this has passed.
    pub fn lease(&self) -> Duration {
        self.timeout * 2 + Duration::from_secs(5)
    }

    /// The wait before attempt `attempts + 1` after `attempts` failures:
    /// capped exponential backoff with full jitter (uniform in
    /// `[0, min(max, base·2^(attempts−1))]`), never below the receiver's
    /// `Retry-After`. `unit` is a uniform draw in `[0, 1)`.
    pub fn backoff(&self, attempts: u32, retry_after: Option<Duration>, unit: f64) -> Duration {
        let exponent = attempts.saturating_sub(1).min(30);
        let cap = self
            .retry_base
            .saturating_mul(1u32 << exponent)
            .min(self.retry_max);
        let jittered = cap.mul_f64(unit.clamp(0.0, 1.0));
        match retry_after {
            Some(floor) => jittered.max(floor.min(self.retry_max)),
            None => jittered,
        }
    }
}

/// A uniform draw in `[0, 1)` for the jitter (not for anything secret).
pub fn jitter_unit() -> f64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_doubles_then_stops_and_retry_after_is_a_floor() {
        let c = WebhookConfig {
            retry_base: Duration::from_millis(100),
            retry_max: Duration::from_millis(1_000),
            ..WebhookConfig::default()
        };
        assert_eq!(c.backoff(1, None, 1.0), Duration::from_millis(100));
        assert_eq!(c.backoff(2, None, 1.0), Duration::from_millis(200));
        assert_eq!(c.backoff(4, None, 1.0), Duration::from_millis(800));
        assert_eq!(c.backoff(5, None, 1.0), Duration::from_millis(1_000));
        assert_eq!(c.backoff(500, None, 1.0), Duration::from_millis(1_000));
        assert_eq!(c.backoff(3, None, 0.5), Duration::from_millis(200));
        assert_eq!(c.backoff(3, None, 0.0), Duration::ZERO);
        let floor = Some(Duration::from_millis(700));
        assert_eq!(c.backoff(1, floor, 0.0), Duration::from_millis(700));
        // A Retry-After beyond the cap waits the cap, not a day.
        let far = Some(Duration::from_secs(86_400));
        assert_eq!(c.backoff(1, far, 0.0), Duration::from_millis(1_000));
    }

    #[test]
    fn jitter_is_in_range() {
        for _ in 0..1000 {
            let u = jitter_unit();
            assert!((0.0..1.0).contains(&u));
        }
    }
}

//! When to retry and how long to wait.

use std::time::Duration;

/// How a status code is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classification {
    /// May succeed later: 429 and every 5xx.
    Retry,
    /// Final: every other 4xx (409, 422, 401, 403, 404, 413, …).
    Final,
}

pub fn classify(status: u16) -> Classification {
    match status {
        429 | 500..=599 => Classification::Retry,
        _ => Classification::Final,
    }
}

/// Bounds on retrying.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Most attempts, the first included.
    pub max_attempts: u32,
    /// First backoff cap; doubles per attempt.
    pub base_delay: Duration,
    /// Largest backoff cap.
    pub max_delay: Duration,
    /// No retry starts after this much time since the first attempt.
    pub total_budget: Duration,
    /// Timeout of one attempt.
    pub request_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 8,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            total_budget: Duration::from_secs(30),
            request_timeout: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (1-based): full jitter
    /// over `min(max_delay, base_delay × 2^(attempt−1))`, scaled by `jitter`
    /// in [0, 1); never shorter than the server's `Retry-After`.
    pub fn delay(&self, attempt: u32, jitter: f64, retry_after: Option<Duration>) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let cap = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        let jittered = cap.mul_f64(jitter.clamp(0.0, 1.0));
        match retry_after {
            Some(at_least) => jittered.max(at_least),
            None => jittered,
        }
    }
}

/// A uniform number in [0, 1) from the operating system's randomness, so
/// that many clients retrying together spread out.
pub(crate) fn jitter() -> f64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
            total_budget: Duration::from_secs(30),
            request_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_cap_doubles_then_stops_at_max_delay() {
        let p = policy();
        let caps: Vec<u128> = (1..=7)
            .map(|a| p.delay(a, 0.999_999_9, None).as_millis())
            .collect();
        assert_eq!(caps, vec![99, 199, 399, 799, 1599, 1999, 1999]);
        assert_eq!(p.delay(1000, 1.0, None), Duration::from_secs(2));
    }

    #[test]
    fn jitter_spreads_over_the_whole_range() {
        let p = policy();
        assert_eq!(p.delay(3, 0.0, None), Duration::ZERO);
        assert_eq!(p.delay(3, 0.5, None), Duration::from_millis(200));
        let samples: Vec<f64> = (0..1000).map(|_| jitter()).collect();
        assert!(samples.iter().all(|j| (0.0..1.0).contains(j)));
        assert!(samples.iter().any(|j| *j < 0.1) && samples.iter().any(|j| *j > 0.9));
    }

    #[test]
    fn retry_after_is_a_floor() {
        let p = policy();
        assert_eq!(
            p.delay(1, 0.1, Some(Duration::from_secs(1))),
            Duration::from_secs(1)
        );
        assert_eq!(
            p.delay(6, 1.0, Some(Duration::from_millis(10))),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn only_429_and_5xx_are_retried() {
        for s in [429, 500, 502, 503, 504] {
            assert_eq!(classify(s), Classification::Retry, "{s}");
        }
        for s in [400, 401, 403, 404, 409, 413, 422] {
            assert_eq!(classify(s), Classification::Final, "{s}");
        }
    }
}

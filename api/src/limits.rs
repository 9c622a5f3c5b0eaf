//! Protection of one `tally serve` process: a token bucket per API key, a
//! request timeout, a cap on requests in flight, a bound on the bytes of
//! request bodies in flight, and the shutdown drain that
//! `GET /readyz` reports (docs/operations.md, "Configuration";
//! docs/api-decisions.md, limits).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::problem::ApiError;

/// Default of `--request-timeout-ms`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of `--max-in-flight`.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1_024;
/// Buckets kept before an eviction pass is forced (bounded memory even with
/// very many keys in use).
const MAX_BUCKETS: usize = 100_000;
/// Idle buckets are evicted at most this often when the map is small.
const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// Paths never shed or rate limited: load balancers and scrapers must see
/// the truth about an overloaded process.
const PROBES: &[&str] = &["/healthz", "/readyz", "/metrics"];

/// The limits of one process.
#[derive(Debug)]
pub struct Limits {
    /// `None`: rate limiting is off.
    pub rate: Option<RateLimiter>,
    pub request_timeout: Duration,
    /// `None`: no cap on requests in flight.
    in_flight: Option<Arc<Semaphore>>,
    max_in_flight: usize,
    /// `None`: no bound on the bytes of request bodies in flight.
    body_budget: Option<BodyBudget>,
}

impl Default for Limits {
    fn default() -> Self {
        Self::new(None, DEFAULT_REQUEST_TIMEOUT, DEFAULT_MAX_IN_FLIGHT)
    }
}

impl Limits {
    /// `max_in_flight == 0` means no cap. The body budget is the default
    /// one ([`Limits::with_body_budget`] changes it).
    pub fn new(rate: Option<RateLimiter>, request_timeout: Duration, max_in_flight: usize) -> Self {
        Self {
            rate,
            request_timeout,
            in_flight: (max_in_flight > 0).then(|| Arc::new(Semaphore::new(max_in_flight))),
            max_in_flight,
            body_budget: BodyBudget::new(DEFAULT_BODY_BUDGET_BYTES),
        }
    }

    /// The same limits with `bytes` of request bodies in flight (0: no bound).
    pub fn with_body_budget(mut self, bytes: usize) -> Self {
        self.body_budget = BodyBudget::new(bytes);
        self
    }
}

/// Default of `--max-body-mib-in-flight`: 256 MiB, sized for a 2-core,
/// 4 GiB host (docs/operations.md, "Memory").
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 256 * 1024 * 1024;
/// What a body is taken to cost, per declared byte, before it is read: 2
/// while it is received (the chunks as they arrive and the contiguous copy
/// they are collected into) and 2 for parsing it, which covers bodies of
/// mostly strings (a batch of debits with metadata measured 1.3); a body
/// that parses into more grows its allowance when it is parsed
/// ([`crate::body::parse_cost`]).
pub const UPFRONT_BYTES_FACTOR: usize = 4;
/// The part of [`UPFRONT_BYTES_FACTOR`] that is for parsing.
pub const UPFRONT_PARSE_FACTOR: usize = 2;
/// The budget counts KiB, so that a semaphore's permits reach terabytes.
const BUDGET_UNIT: usize = 1024;

/// The bytes of request bodies in flight, as a semaphore of KiB.
#[derive(Debug)]
struct BodyBudget {
    units: Arc<Semaphore>,
    total: usize,
}

impl BodyBudget {
    fn new(bytes: usize) -> Option<Self> {
        let total = (bytes / BUDGET_UNIT).min(Semaphore::MAX_PERMITS);
        (total > 0).then(|| Self {
            units: Arc::new(Semaphore::new(total)),
            total,
        })
    }
}

/// What one request holds of the body budget, in its extensions: taken
/// for its declared length before it is read, grown by what parsing it
/// takes ([`crate::body`]), given back when its answer is ready.
#[derive(Debug, Clone)]
pub struct BodyAllowance {
    units: Arc<Semaphore>,
    total: usize,
    held: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
}

impl BodyAllowance {
    /// Takes `bytes` more of the budget: `BodyBudget` (503) if the budget
    /// is spent now, `TooCostly` (413) if the request could never fit.
    pub fn grow(&self, bytes: usize) -> Result<(), ApiError> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let have = held.as_ref().map_or(0, |p| p.num_permits());
        let more = bytes.div_ceil(BUDGET_UNIT);
        if have + more > self.total {
            return Err(ApiError::TooCostly {
                bytes: (have + more) * BUDGET_UNIT,
                budget: self.total * BUDGET_UNIT,
            });
        }
        let Ok(more) = u32::try_from(more) else {
            return Err(ApiError::BodyBudget(self.total * BUDGET_UNIT));
        };
        match self.units.clone().try_acquire_many_owned(more) {
            Ok(permit) => {
                match held.as_mut() {
                    Some(h) => h.merge(permit),
                    None => *held = Some(permit),
                }
                Ok(())
            }
            Err(_) => Err(ApiError::BodyBudget(self.total * BUDGET_UNIT)),
        }
    }
}

/// The bytes a request's body may take while received: its declared
/// length (the route's limit if it declares none), never more than the
/// limit, which refuses longer bodies unread.
fn declared_body_bytes(request: &Request) -> usize {
    let limit = crate::body_size::body_limit(request.uri().path());
    let hint = axum::body::HttpBody::size_hint(request.body());
    let declared = hint
        .exact()
        .or(hint.upper())
        .map_or(limit, |n| usize::try_from(n).unwrap_or(usize::MAX));
    declared.min(limit)
}

/// A token bucket per API key (by the sha256 of the key, never the key).
/// Each request takes one token; a bucket holds at most `burst` tokens and
/// refills at `per_second`.
#[derive(Debug)]
pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<Buckets>,
}

#[derive(Debug)]
struct Buckets {
    map: HashMap<String, Bucket>,
    last_sweep: Instant,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    /// `None` when `per_second` is 0 (off) or not a finite positive number.
    pub fn new(per_second: f64, burst: u32) -> Option<Self> {
        (per_second.is_finite() && per_second > 0.0).then(|| Self {
            per_second,
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(Buckets {
                map: HashMap::new(),
                last_sweep: Instant::now(),
            }),
        })
    }

    /// Takes a token for `key`, or says how long until one is there.
    pub fn check(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let due = now.saturating_duration_since(buckets.last_sweep) >= SWEEP_EVERY;
        if due || buckets.map.len() >= MAX_BUCKETS {
            self.sweep(&mut buckets, now);
        }
        let bucket = buckets.map.entry(key.to_owned()).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - bucket.tokens) / self.per_second;
            Err(Duration::from_secs_f64(wait))
        }
    }

    /// Forgets every bucket that has refilled completely: a full bucket is
    /// the same as none. If that is not enough (more than `MAX_BUCKETS`
    /// keys busy at once), the fullest buckets go too, which can only make
    /// the limit more lenient, never stricter.
    fn sweep(&self, buckets: &mut Buckets, now: Instant) {
        let (per_second, burst) = (self.per_second, self.burst);
        let level = |b: &Bucket| {
            (b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * per_second).min(burst)
        };
        buckets.map.retain(|_, b| level(b) < burst);
        if buckets.map.len() >= MAX_BUCKETS {
            let mut levels: Vec<f64> = buckets.map.values().map(level).collect();
            levels.sort_by(f64::total_cmp);
            let keep = MAX_BUCKETS / 2;
            let cut = levels[keep.min(levels.len() - 1)];
            buckets.map.retain(|_, b| level(b) < cut);
        }
        buckets.last_sweep = now;
    }

    /// Buckets currently held.
    pub fn len(&self) -> usize {
        self.buckets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether the process is shutting down, and how long it keeps serving
/// after the signal while `/readyz` answers 503.
#[derive(Debug, Clone, Default)]
pub struct Lifecycle {
    draining: Arc<AtomicBool>,
    pub drain: Duration,
}

impl Lifecycle {
    pub fn new(drain: Duration) -> Self {
        Self {
            draining: Arc::default(),
            drain,
        }
    }

    pub fn begin_shutdown(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// The middleware around every route: sheds requests beyond
/// `--max-in-flight` or past `--max-body-mib-in-flight` (503) and answers 503 to one that runs longer than
/// `--request-timeout-ms`. The handler is dropped then; an intent it already
/// handed to its tenant's writer is still decided (and may be committed), so
/// the client's retry with the same upstream ID is a replay.
pub async fn guard(State(limits): State<Arc<Limits>>, request: Request, next: Next) -> Response {
    let probe = PROBES.contains(&request.uri().path());
    let _permit = match (&limits.in_flight, probe) {
        (Some(slots), false) => match slots.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => return ApiError::Busy(limits.max_in_flight).into_response(),
        },
        _ => None,
    };
    let mut request = request;
    // Held until the answer is ready: the body, parsed or not, is gone then.
    let _allowance = match (&limits.body_budget, probe) {
        (Some(budget), false) => {
            let allowance = BodyAllowance {
                units: budget.units.clone(),
                total: budget.total,
                held: Arc::default(),
            };
            let bytes = declared_body_bytes(&request) * UPFRONT_BYTES_FACTOR;
            if bytes > 0 {
                if let Err(e) = allowance.grow(bytes) {
                    return e.into_response();
                }
            }
            request.extensions_mut().insert(allowance.clone());
            Some(allowance)
        }
        _ => None,
    };
    match tokio::time::timeout(limits.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::TimedOut(limits.request_timeout).into_response(),
    }
}

/// Seconds for `Retry-After`: whole seconds, rounded up, at least 1.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_says_when() {
        let limiter = RateLimiter::new(0.5, 2).unwrap();
        let t0 = Instant::now();
        assert!(limiter.check("a", t0).is_ok());
        assert!(limiter.check("a", t0).is_ok());
        let wait = limiter.check("a", t0).unwrap_err();
        assert_eq!(retry_after_seconds(wait), 2);
        // Another key has its own bucket.
        assert!(limiter.check("b", t0).is_ok());
        // Half a token later: one second more to wait.
        let wait = limiter.check("a", t0 + Duration::from_secs(1)).unwrap_err();
        assert_eq!(retry_after_seconds(wait), 1);
        assert!(limiter.check("a", t0 + Duration::from_secs(2)).is_ok());
    }

    #[test]
    fn off_means_off() {
        assert!(RateLimiter::new(0.0, 10).is_none());
        assert!(RateLimiter::new(f64::NAN, 10).is_none());
    }

    #[test]
    fn idle_buckets_are_evicted() {
        let limiter = RateLimiter::new(100.0, 10).unwrap();
        let t0 = Instant::now();
        for i in 0..1_000 {
            limiter.check(&format!("k{i}"), t0).unwrap();
        }
        assert_eq!(limiter.len(), 1_000);
        // Long after, every bucket is full again: the next check sweeps them.
        limiter.check("fresh", t0 + SWEEP_EVERY).unwrap();
        assert_eq!(limiter.len(), 1);
    }

    #[test]
    fn the_map_never_outgrows_its_bound() {
        let limiter = RateLimiter::new(0.001, 1).unwrap();
        let t0 = Instant::now();
        for i in 0..(MAX_BUCKETS + 10) {
            let _ = limiter.check(&format!("k{i}"), t0);
        }
        assert!(limiter.len() <= MAX_BUCKETS);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(4_001)), 5);
        assert_eq!(retry_after_seconds(Duration::from_secs(3)), 3);
    }
}

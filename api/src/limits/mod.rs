//! Protection of one `tally serve` process: a rate limit per API key, a
//! request timeout, a cap on requests in flight, a bound on the bytes of
//! request bodies in flight, and the shutdown drain that
//! `GET /readyz` reports (docs/operations.md, "Configuration";
//! docs/api-decisions.md, limits).

mod rate;

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::{error::Overloaded, LoadShedLayer};
use tower::timeout::TimeoutLayer;
use tower::{ServiceBuilder, ServiceExt as _};

use crate::problem::ApiError;

pub use rate::RateLimiter;

/// Default of `--request-timeout-ms`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of `--max-in-flight`.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1_024;
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
/// `--max-in-flight` (tower's `LoadShed` over a `GlobalConcurrencyLimit`:
/// 503 `busy` at once, never a queue) or past `--max-body-mib-in-flight`
/// (503), the probes excepted, and answers 503 to one that runs longer than
/// `--request-timeout-ms` (tower's `Timeout`; tower-http's answers 408 with
/// no problem body and no `Retry-After`, so tower's error is mapped here
/// instead). The handler is dropped then; an entry request it already handed to its
/// tenant's writer is still decided (and may be committed), so the client's
/// retry with the same upstream ID is a replay.
///
/// The layers are assembled per request, inside this middleware, because
/// the probes must pass the shedding (a layer on the router would cover
/// every route) and each answer must be tally's problem body; the semaphore
/// is the process's, shared by every request.
pub async fn guard(State(shared): State<Arc<Limits>>, request: Request, next: Next) -> Response {
    let probe = PROBES.contains(&request.uri().path());
    let limits = shared.clone();
    let in_flight = if probe {
        None
    } else {
        limits.in_flight.clone()
    };
    let mut next = Some(next);
    let guarded = ServiceBuilder::new()
        .layer(LoadShedLayer::new())
        .option_layer(in_flight.map(GlobalConcurrencyLimitLayer::with_semaphore))
        .layer(TimeoutLayer::new(limits.request_timeout))
        .service_fn(move |request: Request| {
            // `oneshot` calls the service once: `next` is there.
            let (limits, next) = (limits.clone(), next.take());
            async move {
                let budget = if probe {
                    None
                } else {
                    limits.body_budget.as_ref()
                };
                Ok::<_, Infallible>(match next {
                    Some(next) => with_body_allowance(budget, request, next).await,
                    None => {
                        ApiError::Internal("a guarded request ran twice".into()).into_response()
                    }
                })
            }
        });
    match guarded.oneshot(request).await {
        Ok(response) => response,
        Err(e) if e.is::<Overloaded>() => ApiError::Busy(shared.max_in_flight).into_response(),
        // The only other error is the timeout's: the handler's is Infallible.
        Err(_) => ApiError::TimedOut(shared.request_timeout).into_response(),
    }
}

/// Runs the request holding its share of the body budget until its answer
/// is ready: the body, parsed or not, is gone then. No crate bounds the
/// bytes of bodies in flight across requests (tower-http's `RequestBodyLimit`
/// bounds one body): this budget, grown as bodies are parsed
/// ([`crate::body::parse_cost`]), stays tally's own.
async fn with_body_allowance(
    budget: Option<&BodyBudget>,
    mut request: Request,
    next: Next,
) -> Response {
    let _allowance = match budget {
        Some(budget) => {
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
        None => None,
    };
    next.run(request).await
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
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(4_001)), 5);
        assert_eq!(retry_after_seconds(Duration::from_secs(3)), 3);
    }
}

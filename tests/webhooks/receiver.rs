//! A webhook receiver for the tests: a real HTTP server that checks every
//! signature the way a receiver must (Standard Webhooks), records what it
//! got, and misbehaves on demand.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::Value;

/// What one request carried.
#[derive(Debug, Clone)]
pub struct Received {
    pub id: String,
    pub timestamp: i64,
    pub signatures: Vec<String>,
    pub body: String,
    pub event: Value,
    /// Whether a signature verified with one of the receiver's secrets.
    pub verified: bool,
}

/// How the receiver answers the `n`-th attempt (1-based) of an event.
pub type Answer = Arc<dyn Fn(&str, usize) -> (StatusCode, Option<u64>) + Send + Sync>;

#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

struct Inner {
    secrets: Mutex<Vec<String>>,
    received: Mutex<Vec<Received>>,
    attempts: Mutex<HashMap<String, usize>>,
    /// Requests being handled now, per webhook-id, and the most ever.
    in_flight: Mutex<HashMap<String, usize>>,
    most_at_once: AtomicUsize,
    answer: Mutex<Answer>,
    delay: Mutex<Duration>,
}

/// HMAC-SHA256 over `{id}.{timestamp}.{body}` keyed with the decoded
/// secret, base64: written here from the specification, not borrowed from
/// the server's code.
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &str) -> String {
    use base64::Engine as _;
    use hmac::Mac as _;
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

async fn hook(
    State(r): State<Arc<Inner>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap) {
    let text = String::from_utf8(body.to_vec()).unwrap();
    let header = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let id = header("webhook-id");
    let timestamp: i64 = header("webhook-timestamp").parse().unwrap_or(0);
    let signatures: Vec<String> = header("webhook-signature")
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,").map(str::to_owned))
        .collect();
    let now = chrono::Utc::now().timestamp();
    let verified = (now - timestamp).abs() <= 300
        && r.secrets
            .lock()
            .unwrap()
            .iter()
            .any(|s| signatures.contains(&signature(s, &id, timestamp, &text)));
    {
        let mut in_flight = r.in_flight.lock().unwrap();
        let n = in_flight.entry(id.clone()).or_insert(0);
        *n += 1;
        r.most_at_once.fetch_max(*n, Ordering::Relaxed);
    }
    let delay = *r.delay.lock().unwrap();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let attempt = {
        let mut attempts = r.attempts.lock().unwrap();
        let n = attempts.entry(id.clone()).or_insert(0);
        *n += 1;
        *n
    };
    r.received.lock().unwrap().push(Received {
        id: id.clone(),
        timestamp,
        signatures,
        event: serde_json::from_str(&text).unwrap_or(Value::Null),
        body: text,
        verified,
    });
    let (status, retry_after) = (r.answer.lock().unwrap().clone())(&id, attempt);
    *r.in_flight.lock().unwrap().get_mut(&id).unwrap() -= 1;
    let mut out = HeaderMap::new();
    if let Some(s) = retry_after {
        out.insert("retry-after", s.to_string().parse().unwrap());
    }
    (status, out)
}

impl Receiver {
    pub async fn start() -> Receiver {
        let inner = Arc::new(Inner {
            secrets: Mutex::default(),
            received: Mutex::default(),
            attempts: Mutex::default(),
            in_flight: Mutex::default(),
            most_at_once: AtomicUsize::new(0),
            answer: Mutex::new(Arc::new(|_, _| (StatusCode::NO_CONTENT, None))),
            delay: Mutex::new(Duration::ZERO),
        });
        let app = Router::new()
            .route("/hook", post(hook))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { addr, inner }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn trust(&self, secret: &str) {
        self.inner.secrets.lock().unwrap().push(secret.to_owned());
    }

    pub fn answer(
        &self,
        f: impl Fn(&str, usize) -> (StatusCode, Option<u64>) + Send + Sync + 'static,
    ) {
        *self.inner.answer.lock().unwrap() = Arc::new(f);
    }

    pub fn delay(&self, d: Duration) {
        *self.inner.delay.lock().unwrap() = d;
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    /// The most requests of one event handled at the same moment.
    pub fn most_at_once(&self) -> usize {
        self.inner.most_at_once.load(Ordering::Relaxed)
    }

    /// Waits until `done` holds of what was received, or panics after `within`.
    pub async fn wait_for(&self, within: Duration, what: &str, done: impl Fn(&[Received]) -> bool) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if done(&self.received()) {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "{what}: not within {within:?} ({} requests received)",
                    self.received().len()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

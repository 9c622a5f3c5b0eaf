//! What the benchmark posts: realistic cardinality (10,000 accounts, random
//! upstream IDs), and preload bodies that can be regenerated exactly so a
//! replay carries the same fingerprint as the original.

use std::sync::Mutex;

use bytes::Bytes;
use serde_json::{json, Value};

pub const ACCOUNTS: u64 = 10_000;
/// Counter accounts of the "no hot account" workloads.
pub const COUNTERS: u64 = 64;

/// xorshift64*: fast, seedable, good enough to pick accounts and IDs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn amount(i: u64) -> String {
    format!("0.{:04}", i % 9_999 + 1)
}

/// The i-th preloaded usage debit; the same `i` always gives the same body.
pub fn preload_debit(i: u64) -> Value {
    json!({
        "usage_record_id": format!("pre-{i}"),
        "account": format!("cust_{}", (i * 7_919) % ACCOUNTS),
        "amount": amount(i),
        "unit": "USD",
        "meter": "llm-tokens",
        "quantity": (i % 5_000 + 1).to_string(),
        "counter_account": format!("@revenue-{}", i % COUNTERS),
    })
}

/// A new usage debit with a random upstream ID. `hot` sends every debit to
/// the one default counter account, `@revenue`.
pub fn new_debit(rng: &mut Rng, hot: bool) -> Value {
    let n = rng.next();
    let mut body = json!({
        "usage_record_id": format!("new-{n:016x}-{:08x}", rng.next() as u32),
        "account": format!("cust_{}", n % ACCOUNTS),
        "amount": amount(n),
        "unit": "USD",
        "meter": "llm-tokens",
        "quantity": (n % 5_000 + 1).to_string(),
    });
    if !hot {
        body["counter_account"] = json!(format!("@revenue-{}", (n >> 20) % COUNTERS));
    }
    body
}

pub fn with_type(mut body: Value) -> Value {
    body["type"] = json!("usage_debit");
    body
}

/// The bodies of the last [`RecentPosts::WINDOW`] new debits of a scenario,
/// for retries: a client whose response was lost sends the same request
/// again seconds later, which is what most replays are.
#[derive(Default)]
pub struct RecentPosts(Mutex<RecentRing>);

#[derive(Default)]
struct RecentRing {
    bodies: Vec<Bytes>,
    pushed: usize,
}

impl RecentPosts {
    /// Retries repeat one of the last 50,000 posts (about 8 s of a flood of
    /// 6,000 posts/s)…
    pub const WINDOW: usize = 50_000;
    /// …but none of the last 1,000, which may still be in flight (64
    /// clients): a retry follows a lost answer, not a pending one.
    pub const SETTLED: usize = 1_000;

    pub fn push(&self, body: Bytes) {
        let mut ring = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let at = ring.pushed % Self::WINDOW;
        if at == ring.bodies.len() {
            ring.bodies.push(body);
        } else {
            ring.bodies[at] = body;
        }
        ring.pushed += 1;
    }

    /// A settled recent post, or `None` until enough were posted.
    pub fn pick(&self, rng: &mut Rng) -> Option<super::http_load::Request> {
        let ring = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let settled = ring.bodies.len().checked_sub(Self::SETTLED)?;
        if settled == 0 {
            return None;
        }
        // Back from the newest settled one, within the window.
        let back = Self::SETTLED + rng.below(settled as u64) as usize;
        let at = (ring.pushed - 1 - back) % Self::WINDOW;
        Some(super::http_load::Request {
            path: super::http_load::SINGLE_PATH.into(),
            body: ring.bodies[at].clone(),
            rows: 1,
            auth: None,
            then: None,
        })
    }
}

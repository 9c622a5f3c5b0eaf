//! What the benchmark measures: each scenario's requests, clients and raw
//! baseline, and the targets that compare a scenario with all-new posts.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::http_load::{self, Request};
use crate::workload::{self, new_debit, preload_debit, with_type};

/// Makes one request of a scenario.
pub type Make = Box<dyn Fn(&mut workload::Rng) -> Request + Send + Sync>;

pub struct Scenario {
    /// The key `--only` selects it by.
    pub key: &'static str,
    pub name: &'static str,
    pub clients: usize,
    /// The raw baseline it is compared with: (connections, rows per transaction).
    pub raw: Option<(usize, usize)>,
    pub make: Make,
}

/// One `POST /v1/usage-debits`.
pub fn single(body: Value) -> Request {
    Request {
        path: http_load::SINGLE_PATH.into(),
        body: body.to_string().into(),
        rows: 1,
        auth: None,
        then: None,
    }
}

/// One `POST /v1/batch` of these operations.
pub fn batch(bodies: impl Iterator<Item = Value>) -> Request {
    let ops: Vec<Value> = bodies.map(with_type).collect();
    let rows = ops.len() as u64;
    Request {
        path: "/v1/batch".into(),
        body: json!({ "operations": ops }).to_string().into(),
        rows,
        auth: None,
        then: None,
    }
}

/// All-new single POSTs, spread over the counter accounts.
pub fn all_new() -> Make {
    Box::new(|rng| single(new_debit(rng, false)))
}

/// All-new single POSTs, each by a tenant picked at random among those
/// of `keys` (their `Authorization` lines).
pub fn spread_over(keys: Arc<[Arc<str>]>) -> Make {
    Box::new(move |rng| {
        let mut request = single(new_debit(rng, false));
        request.auth = Some(keys[rng.below(keys.len() as u64) as usize].clone());
        request
    })
}

/// Every scenario, in the order they run; `preloaded` entries are in the
/// ledger for the replays to pick from. A tenant scenario whose tenants
/// have no keys (it was not selected) is left out.
pub fn all(preloaded: u64, tenants: &Tenants) -> Vec<Scenario> {
    let n = preloaded.max(1);
    let recent_posts = Arc::new(workload::RecentPosts::default());
    let mut scenarios = vec![
        Scenario {
            key: "single1",
            name: "single POST, 1 client",
            clients: 1,
            raw: Some((1, 1)),
            make: all_new(),
        },
        Scenario {
            key: "single16",
            name: "single POST, 16 clients",
            clients: 16,
            raw: Some((16, 1)),
            make: all_new(),
        },
        Scenario {
            key: "single64",
            name: "single POST, 64 clients",
            clients: 64,
            raw: Some((64, 1)),
            make: all_new(),
        },
        Scenario {
            key: "batch100",
            name: "batch of 100, 4 clients",
            clients: 4,
            raw: Some((4, 100)),
            make: Box::new(|rng| batch((0..100).map(|_| new_debit(rng, false)))),
        },
        Scenario {
            key: "batch1000",
            name: "batch of 1,000, 2 clients",
            clients: 2,
            raw: Some((2, 1000)),
            make: Box::new(|rng| batch((0..1000).map(|_| new_debit(rng, false)))),
        },
        Scenario {
            key: "hot",
            name: "hot @revenue, single, 64 clients",
            clients: 64,
            raw: None,
            make: Box::new(|rng| single(new_debit(rng, true))),
        },
        Scenario {
            key: "replay50",
            name: "50% replays, single, 64 clients",
            clients: 64,
            raw: None,
            make: Box::new(move |rng| {
                if rng.below(2) == 0 {
                    single(preload_debit(rng.below(n)))
                } else {
                    single(new_debit(rng, false))
                }
            }),
        },
        Scenario {
            key: "retry50",
            name: "50% retries of recent posts, single, 64 clients",
            clients: 64,
            raw: None,
            make: Box::new(move |rng| {
                let retry = if rng.below(2) == 0 {
                    recent_posts.pick(rng)
                } else {
                    None
                };
                retry.unwrap_or_else(|| {
                    let request = single(new_debit(rng, false));
                    recent_posts.push(request.body.clone());
                    request
                })
            }),
        },
        Scenario {
            key: "intents64",
            name: "intent claim + complete, 64 clients",
            clients: 64,
            raw: None,
            make: Box::new(crate::intents::claim),
        },
        Scenario {
            key: "replay100",
            name: "100% replays, single, 64 clients",
            clients: 64,
            raw: None,
            make: Box::new(move |rng| single(preload_debit(rng.below(n)))),
        },
    ];
    for (key, name, keys) in [
        (
            "tenants300",
            "300 tenants, single, 64 clients",
            &tenants.of300,
        ),
        (
            "tenants10k",
            "10,000 tenants, single, 64 clients",
            &tenants.of10k,
        ),
    ] {
        if !keys.is_empty() {
            scenarios.push(Scenario {
                key,
                name,
                clients: 64,
                raw: None,
                make: spread_over(keys.clone()),
            });
        }
    }
    scenarios
}

/// The keys (`Authorization` lines) of the tenants of the tenant
/// scenarios, one key per tenant; empty when the scenario is not run.
pub struct Tenants {
    pub of300: Arc<[Arc<str>]>,
    pub of10k: Arc<[Arc<str>]>,
}

/// A target comparing a scenario with all-new single POSTs @64.
pub struct Pairing {
    pub key: &'static str,
    pub target: &'static str,
    pub goal: f64,
}

impl Pairing {
    /// Each is measured between two halves of an all-new run (A-B-A): a
    /// drift of the machine or the ledger over the three windows, if
    /// steady, weighs the same on both sides of the ratio.
    pub const ALL: [Pairing; 6] = [
        // Two round trips per intent (claim, then complete with the
        // token the claim answered), against one per single debit.
        Pairing {
            key: "intents64",
            target: "intents claimed + completed / all new (single @64)",
            goal: 0.5,
        },
        Pairing {
            key: "hot",
            target: "hot @revenue / spread counter accounts (single @64)",
            goal: 0.9,
        },
        Pairing {
            key: "replay50",
            target: "50% replays / all new (single @64)",
            goal: 1.5,
        },
        Pairing {
            key: "retry50",
            target: "50% retries of recent posts / all new (single @64)",
            goal: 1.5,
        },
        Pairing {
            key: "tenants300",
            target: "300 tenants / one tenant (single @64)",
            goal: 0.8,
        },
        Pairing {
            key: "tenants10k",
            target: "10,000 tenants / one tenant (single @64)",
            goal: 0.6,
        },
    ];

    pub fn of(key: &str) -> Option<&'static Pairing> {
        Self::ALL.iter().find(|p| p.key == key)
    }
}

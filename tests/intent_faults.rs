//! The intents' fault suite, on every engine: 500 intents worked by 16
//! workers over two servers, behind proxies that drop answers, with
//! workers killed mid-step and steps failing retryably. Each step bumps an
//! external counter keyed by `(intent_id, fence)`, as a downstream system
//! would see its calls. Afterwards every intent has exactly one outcome,
//! every counted call belongs to a claim in the log, the ledger entries the
//! completions carried exist once, and `tally verify` passes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::proxy::{Fault, Proxy};
use common::{Engine, Ledger};
use rust_decimal::Decimal;
use serde_json::json;
use tally_client::{
    ClaimIntent, Client, OnceError, OnceOptions, Operation, RetryPolicy, StepError, StepOutput,
    UsageDebit,
};

engine_tests!(five_hundred_intents_under_faults_each_have_one_outcome);

const INTENTS: usize = 500;
const WORKERS: usize = 16;

type Counter = Arc<Mutex<HashMap<(String, i64), u32>>>;

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 10,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(100),
        total_budget: Duration::from_secs(20),
        request_timeout: Duration::from_secs(5),
    }
}

/// How the first attempt at intent `n` goes wrong, if it does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Trouble {
    None,
    /// The worker is killed after the side effect, before it finishes.
    Killed,
    /// The step fails retryably after the side effect.
    Fails,
}

fn trouble(n: usize) -> Trouble {
    match n % 10 {
        3 => Trouble::Killed,
        7 => Trouble::Fails,
        _ => Trouble::None,
    }
}

async fn work(client: Client, n: usize, first: bool, counter: Counter) -> bool {
    let intent_id = format!("job_{n:03}");
    let claim = ClaimIntent::new(&intent_id, "report.send", json!({"n": n}));
    let options = OnceOptions {
        lease_seconds: 1,
        max_attempts: 10,
        wait_budget: Duration::from_secs(10),
    };
    let trouble = if first { trouble(n) } else { Trouble::None };
    let (killed_tx, killed_rx) = tokio::sync::oneshot::channel::<()>();
    let step_counter = counter.clone();
    let run = tokio::spawn(async move {
        client
            .once(&claim, &options, |lease| async move {
                *step_counter
                    .lock()
                    .unwrap()
                    .entry((lease.intent_id.clone(), lease.fence))
                    .or_default() += 1;
                match trouble {
                    Trouble::Killed => {
                        let _ = killed_tx.send(());
                        std::future::pending().await
                    }
                    Trouble::Fails => Err(StepError::retryable("busy", "downstream busy")),
                    Trouble::None => Ok(StepOutput {
                        result: json!({"fence": lease.fence}),
                        entries: if n.is_multiple_of(5) {
                            vec![Operation::UsageDebit(UsageDebit::new(
                                format!("use_{n}"),
                                "cust",
                                Decimal::from_str("0.25").unwrap(),
                                "USD",
                            ))]
                        } else {
                            Vec::new()
                        },
                    }),
                }
            })
            .await
    });
    if trouble == Trouble::Killed {
        let _ = killed_rx.await;
        run.abort(); // the worker dies mid-step: no finish, no heartbeat
        return false;
    }
    // Any stored outcome ends the intent's work (an intent whose attempts
    // ran out is `failed`, for ever).
    match run.await.unwrap() {
        Ok(_) => true,
        Err(OnceError::Step { .. } | OnceError::Client(_)) => false,
    }
}

async fn five_hundred_intents_under_faults_each_have_one_outcome(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let servers = [ledger.server().await, ledger.server().await];
    let proxies = [
        Proxy::start(servers[0].addr()).await,
        Proxy::start(servers[1].addr()).await,
    ];
    proxies[0].set_fault(Fault::DropResponse(13));
    proxies[1].set_fault(Fault::DropResponse(17));
    let clients: Vec<Client> = proxies
        .iter()
        .map(|p| Client::new(p.url(), &key, policy()).unwrap())
        .collect();
    let counter: Counter = Arc::default();
    let queue: Arc<Mutex<VecDeque<(usize, bool)>>> =
        Arc::new(Mutex::new((0..INTENTS).map(|n| (n, true)).collect()));
    let done = Arc::new(Mutex::new(vec![false; INTENTS]));
    let started = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (client, counter) = (clients[w % 2].clone(), counter.clone());
            let (queue, done) = (queue.clone(), done.clone());
            tokio::spawn(async move {
                loop {
                    let Some((n, first)) = queue.lock().unwrap().pop_front() else {
                        return;
                    };
                    if work(client.clone(), n, first, counter.clone()).await {
                        done.lock().unwrap()[n] = true;
                    } else {
                        queue.lock().unwrap().push_back((n, false));
                    }
                }
            })
        })
        .collect();
    for w in workers {
        tokio::time::timeout(Duration::from_secs(240), w)
            .await
            .expect("the workers finish")
            .unwrap();
    }
    assert!(
        done.lock().unwrap().iter().all(|d| *d),
        "every intent succeeded"
    );
    let elapsed = started.elapsed();
    let injected = proxies[0].injected() + proxies[1].injected();
    assert!(injected > 20, "answers were dropped: {injected}");

    // One outcome each; every counted call belongs to a claim in the log.
    let direct = Client::new(&servers[0].base, &key, RetryPolicy::default()).unwrap();
    let counted = counter.lock().unwrap().clone();
    let mut calls_by_intent: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for ((intent_id, fence), calls) in &counted {
        assert_eq!(*calls, 1, "{intent_id} ran twice under fence {fence}");
        calls_by_intent
            .entry(intent_id.clone())
            .or_default()
            .push(*fence);
    }
    assert_eq!(calls_by_intent.len(), INTENTS);
    let mut succeeded = 0;
    let mut debited = 0u64;
    for n in 0..INTENTS {
        let intent_id = format!("job_{n:03}");
        let intent = direct.get_intent(&intent_id).await.unwrap();
        assert!(
            ["succeeded", "failed"].contains(&intent.status.as_str()),
            "{intent:?}"
        );
        let history = intent.history.clone().unwrap();
        let outcomes = history
            .iter()
            .filter(|h| h.change == "succeeded" || h.change == "failed")
            .count();
        assert_eq!(outcomes, 1, "{intent_id}: {history:?}");
        let claimed: Vec<i64> = history
            .iter()
            .filter(|h| h.change == "claimed")
            .filter_map(|h| h.fence)
            .collect();
        for fence in &calls_by_intent[&intent_id] {
            assert!(
                claimed.contains(fence),
                "{intent_id}: a call under fence {fence} no claim made: {history:?}"
            );
        }
        if intent.result.is_some() && n.is_multiple_of(5) {
            debited += 1;
        }
        if let Some(result) = &intent.result {
            let winner = result["fence"].as_i64().unwrap();
            assert_eq!(winner, intent.fence, "the outcome is the last claim's");
            succeeded += 1;
        }
    }
    assert!(
        succeeded >= INTENTS * 9 / 10,
        "{succeeded} of {INTENTS} succeeded"
    );
    let debits = direct.balance("cust").await.unwrap();
    assert_eq!(
        debits.posted,
        -Decimal::from_str("0.25").unwrap() * Decimal::from(debited),
        "each completion's entry once"
    );
    drop(servers);
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out} {err}");
    println!(
        "intent fault suite, {}: {INTENTS} intents ({succeeded} succeeded), {WORKERS} workers \
         over 2 servers, {} answers dropped, {} step calls, {:.1} s, verify ok",
        ledger.engine.name(),
        injected,
        counted.len(),
        elapsed.as_secs_f64()
    );
}

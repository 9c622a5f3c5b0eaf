//! Stateful property test of the whole ledger over HTTP: random sequences
//! of every operation kind — usage debits, payments, holds and their
//! capture, release and expiry, refunds, reversals, adjustments, account
//! settings, batches, replays and conflicts — with amounts at the edges of
//! the domain (28 significant digits, 18 fractional digits, JSON numbers
//! with exponents at the ends of i64, objects where a number goes) and
//! system and odd counter accounts, sent to a real `tally serve` on each
//! engine, one fresh tenant per sequence.
//!
//! Every answer is checked against a model of the rules
//! (tests/ledger_properties/model.rs); after each sequence every read
//! endpoint is read and compared with the model, the audit export must be
//! complete and verify offline, `tally verify` must pass, and every unit's
//! balances must sum to zero.
//!
//! `TALLY_PROPTEST_CASES` (default 16) and `TALLY_PROPTEST_OPS` (most
//! operations per sequence, default 30) size the run; see
//! docs/reliability.md for the on-demand command.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "ledger_properties/apply.rs"]
mod apply;
#[path = "ledger_properties/call.rs"]
mod call;
#[path = "ledger_properties/checks.rs"]
mod checks;
mod common;
#[path = "ledger_properties/fx.rs"]
mod fx;
#[path = "ledger_properties/gen.rs"]
mod gen;
#[path = "ledger_properties/model.rs"]
mod model;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use common::{Engine, Ledger, Server};
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use serde_json::Value;

use apply::Answer;
use call::{body_text, resolve_counter, Call, HoldExpiry};
use gen::{Exclude, Expiry, Op};
use model::{Model, Window};

engine_tests!(random_operation_sequences_keep_the_ledger_sound);

const SCOPES: &str = "post,read,audit,admin";

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

async fn random_operation_sequences_keep_the_ledger_sound(engine: Engine) {
    let handle = tokio::runtime::Handle::current();
    let outcome = tokio::task::spawn_blocking(move || run(engine, handle))
        .await
        .unwrap();
    if let Err(m) = outcome {
        panic!("{m}");
    }
}

fn run(engine: Engine, handle: tokio::runtime::Handle) -> Result<(), String> {
    let cases = env_number("TALLY_PROPTEST_CASES", 16) as u32;
    let max_ops = env_number("TALLY_PROPTEST_OPS", 30) as usize;
    let seed = env_number(
        "PROPTEST_RNG_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    let exclude = Exclude::from_env();
    // Each shrinking step replays a whole sequence over HTTP, so few.
    let shrink = env_number("PROPTEST_MAX_SHRINK_ITERS", 48) as u32;
    let config = Config {
        cases,
        max_shrink_iters: shrink,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    };
    let engine_name = if engine.is_postgres() {
        "postgres"
    } else {
        "sqlite"
    };
    eprintln!(
        "ledger_properties ({engine_name}): {cases} cases of up to {max_ops} operations, \
         PROPTEST_RNG_SEED={seed}, excluded: {exclude:?}"
    );
    let started = Instant::now();
    let harness = std::cell::RefCell::new(Harness {
        engine,
        env: None,
        exclude,
        stats: Stats::default(),
    });
    let mut runner = TestRunner::new(config);
    let result = runner.run(&gen::sequence(exclude, max_ops), |ops| {
        let mut h = harness.borrow_mut();
        handle
            .block_on(h.case(&ops))
            .map_err(|m| TestCaseError::fail(format!("{m}\n  sequence: {ops:#?}")))
    });
    let h = harness.into_inner();
    eprintln!(
        "ledger_properties ({engine_name}): {} sequences, {} operations, {} requests in {:.1} s; \
         answers {:?}; failing sequences {}\n  writes answered: {:?}\n  failures seen: {:#?}",
        h.stats.cases,
        h.stats.ops,
        h.stats.requests,
        started.elapsed().as_secs_f64(),
        h.stats.statuses,
        h.stats.failures,
        h.stats.outcomes,
        h.stats.failure_kinds
    );
    result.map_err(|e| format!("{e}\n(PROPTEST_RNG_SEED={seed} generates the same sequences)"))
}

#[derive(Default)]
struct Stats {
    cases: u64,
    ops: u64,
    requests: u64,
    failures: u64,
    statuses: BTreeMap<u16, u64>,
    /// How often each kind of answer to a write was seen (what the run covered).
    outcomes: BTreeMap<String, u64>,
    /// Every failure seen, shrinking steps included, by its first line.
    failure_kinds: BTreeMap<String, u64>,
}

impl Stats {
    fn count(&mut self, call: &Call, a: &Answer) {
        let what = match a.body["code"].as_str() {
            Some("invalid_request") => format!(
                "invalid_request {}",
                a.body["errors"][0]["field"].as_str().unwrap_or("")
            ),
            Some(code) => code.to_owned(),
            None => call.kind().as_str().to_owned(),
        };
        let label = format!(
            "{} {what}{}",
            a.status,
            if a.replayed { " (replay)" } else { "" }
        );
        *self.outcomes.entry(label).or_default() += 1;
    }
}

struct Harness {
    engine: Engine,
    /// The ledger and server shared by sequences; replaced after a failing
    /// one, whose damage (a tenant `tally verify` rejects) would otherwise
    /// fail every later sequence.
    /// The server first, so that it stops before its database is dropped.
    env: Option<(Server, Ledger)>,
    exclude: Exclude,
    stats: Stats,
}

impl Harness {
    async fn case(&mut self, ops: &[Op]) -> Result<(), String> {
        if self.env.is_none() {
            let ledger = Ledger::new(self.engine.clone()).await;
            // A fast projector keeps the waits of a case short; the sweep
            // lags expiry by up to 200 ms, so captures of expired holds
            // that are still open (`hold_expired`) happen too.
            let server = ledger
                .server_with(&["--hold-sweep-ms", "200", "--usage-interval-ms", "20"])
                .await;
            self.env = Some((server, ledger));
        }
        self.stats.cases += 1;
        let (server, ledger) = self.env.as_ref().expect("set above");
        let tenant = format!("prop{}", uuid::Uuid::now_v7().simple());
        let key = ledger.key(&tenant, SCOPES).await;
        let (outcome, log) = {
            let mut run = Run {
                server,
                ledger,
                key,
                model: Model::default(),
                sent: Vec::new(),
                log: Vec::new(),
                started: Utc::now(),
                exclude: self.exclude,
                stats: &mut self.stats,
            };
            let mut outcome = Ok(());
            for (i, op) in ops.iter().enumerate() {
                run.stats.ops += 1;
                if let Err(m) = run.op(op).await {
                    outcome = Err(format!("operation #{i} failed: {m}"));
                    break;
                }
            }
            if outcome.is_ok() {
                outcome = checks::after_sequence(&mut run).await;
            }
            (outcome, run.log)
        };
        if let Err(m) = outcome {
            self.stats.failures += 1;
            *self
                .stats
                .failure_kinds
                .entry(failure_kind(&m))
                .or_default() += 1;
            self.env = None;
            let log = log.join("\n    ");
            return Err(format!("{m}\n  tenant {tenant}, transcript:\n    {log}"));
        }
        Ok(())
    }
}

/// A request as sent, for replaying it byte for byte.
#[derive(Clone)]
struct Sent {
    method: reqwest::Method,
    url: String,
    body: String,
    calls: Vec<Call>,
    batch: bool,
}

pub struct Run<'a> {
    pub server: &'a Server,
    pub ledger: &'a Ledger,
    pub key: String,
    pub model: Model,
    sent: Vec<Sent>,
    pub log: Vec<String>,
    pub started: DateTime<Utc>,
    pub exclude: Exclude,
    stats: &'a mut Stats,
}

/// A JSON answer.
pub struct Got {
    pub status: u16,
    pub replayed: bool,
    pub content_type: String,
    pub raw: Vec<u8>,
    pub json: Value,
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

impl Run<'_> {
    pub fn url(&self, segments: &[&str]) -> reqwest::Url {
        let mut url = reqwest::Url::parse(&self.server.base).expect("the server's base URL");
        url.path_segments_mut()
            .expect("an http URL")
            .clear()
            .extend(segments);
        url
    }

    /// Sends a request; any 5xx, a transport error or an answer that is
    /// not JSON of the right content type is a failure.
    pub async fn send(
        &mut self,
        method: reqwest::Method,
        url: &str,
        body: Option<&str>,
    ) -> Result<Got, String> {
        let mut req = self
            .server
            .client
            .request(method.clone(), url)
            .bearer_auth(&self.key);
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_owned());
        }
        self.stats.requests += 1;
        let r = req
            .send()
            .await
            .map_err(|e| format!("{method} {url}: no answer: {e}"))?;
        let status = r.status().as_u16();
        *self.stats.statuses.entry(status).or_default() += 1;
        let header = |name: &str| {
            r.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        let content_type = header("content-type");
        let replayed = header("idempotent-replayed") == "true";
        let raw = r
            .bytes()
            .await
            .map_err(|e| format!("{method} {url}: the answer was cut: {e}"))?
            .to_vec();
        let text = String::from_utf8_lossy(&raw);
        if status >= 500 {
            return Err(format!("{method} {url} answered {status}: {text}"));
        }
        let json = if content_type.starts_with("application/x-ndjson")
            || content_type.starts_with("text/csv")
        {
            Value::Null
        } else {
            let want = if status >= 400 {
                "application/problem+json"
            } else {
                "application/json"
            };
            if content_type != want {
                return Err(format!(
                    "{method} {url} answered {status} as {content_type:?}, not {want}: {text}"
                ));
            }
            serde_json::from_slice(&raw)
                .map_err(|e| format!("{method} {url}: the answer is not JSON ({e}): {text}"))?
        };
        Ok(Got {
            status,
            replayed,
            content_type,
            raw,
            json,
        })
    }

    /// GET, answering 2xx or 4xx (a 5xx fails in `send`).
    pub async fn get(&mut self, segments: &[&str], query: &[(&str, &str)]) -> Result<Got, String> {
        let mut url = self.url(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        self.send(reqwest::Method::GET, url.as_str(), None).await
    }

    fn resolve(&self, op: &Op) -> Option<Call> {
        let now = Utc::now();
        Some(match op {
            Op::Debit(d) => Call::Debit(d.clone(), resolve_counter(&d.counter, &d.account)),
            Op::Payment(p) => Call::Payment(p.clone(), resolve_counter(&p.counter, &p.account)),
            Op::Hold(h) => {
                let at = |t: DateTime<Utc>| HoldExpiry::At(rfc3339(t), t);
                let expiry = match h.expiry {
                    Expiry::Short => at(now + chrono::Duration::milliseconds(300)),
                    Expiry::ShortTtl => HoldExpiry::Ttl(1),
                    Expiry::Long => HoldExpiry::Ttl(600),
                    Expiry::Past => at(now - chrono::Duration::seconds(1)),
                    Expiry::TooFar => at(now + chrono::Duration::days(400)),
                    Expiry::BadTtl => HoldExpiry::Ttl(0),
                };
                // Whole microseconds, as sent.
                let expiry = match expiry {
                    HoldExpiry::At(text, _) => {
                        let t = DateTime::parse_from_rfc3339(&text)
                            .expect("own text")
                            .with_timezone(&Utc);
                        HoldExpiry::At(text, t)
                    }
                    ttl => ttl,
                };
                Call::Hold(h.clone(), resolve_counter(&h.counter, &h.account), expiry)
            }
            Op::Capture { hold, id, amount } => Call::Capture {
                hold: hold.clone(),
                id: id.clone(),
                amount: amount.clone(),
            },
            Op::Release { hold, id } => Call::Release {
                hold: hold.clone(),
                id: id.clone(),
            },
            Op::Refund(r) => Call::Refund(r.clone()),
            Op::Reversal(r) => {
                let entries = &self.model.entries;
                let entry_id = match r.target {
                    Some(i) if !entries.is_empty() => entries[i % entries.len()].id.clone(),
                    _ => "ent_does_not_exist".to_owned(),
                };
                Call::Reversal {
                    id: r.id.clone(),
                    entry_id,
                }
            }
            Op::Adjustment {
                id,
                account,
                amount,
                direction,
                unit,
            } => Call::Adjustment {
                id: id.clone(),
                account: account.clone(),
                amount: amount.clone(),
                direction: direction.clone(),
                unit: unit.clone(),
            },
            Op::Settings {
                account,
                unit,
                overdraft,
            } => Call::Settings {
                account: account.clone(),
                unit: unit.clone(),
                overdraft: overdraft.clone(),
            },
            Op::Batch(_) | Op::Replay(_) | Op::Sleep => return None,
        })
    }

    fn request_for(&self, call: &Call) -> (reqwest::Method, String) {
        let post = reqwest::Method::POST;
        let url = |s: &[&str]| self.url(s).to_string();
        match call {
            Call::Debit(..) => (post, url(&["v1", "usage-debits"])),
            Call::Payment(..) => (post, url(&["v1", "payments"])),
            Call::Hold(..) => (post, url(&["v1", "holds"])),
            Call::Capture { hold, .. } => (post, url(&["v1", "holds", hold, "capture"])),
            Call::Release { hold, .. } => (post, url(&["v1", "holds", hold, "release"])),
            Call::Refund(..) => (post, url(&["v1", "refunds"])),
            Call::Reversal { .. } => (post, url(&["v1", "reversals"])),
            Call::Adjustment { .. } => (post, url(&["v1", "adjustments"])),
            Call::Settings { account, .. } => {
                (reqwest::Method::PUT, url(&["v1", "accounts", account]))
            }
        }
    }

    async fn op(&mut self, op: &Op) -> Result<(), String> {
        let sent = match op {
            // Time passing is one of the generated operations (holds
            // expire): the sleep is the behaviour under test.
            Op::Sleep => {
                self.log.push("sleep 320 ms".into());
                tokio::time::sleep(Duration::from_millis(320)).await;
                return Ok(());
            }
            Op::Replay(n) => {
                if self.sent.is_empty() {
                    return Ok(());
                }
                self.sent[n % self.sent.len()].clone()
            }
            Op::Batch(items) => {
                let calls: Vec<Call> = items.iter().filter_map(|i| self.resolve(i)).collect();
                let ops: Vec<String> = calls
                    .iter()
                    .map(|c| {
                        let mut f = c.fields();
                        f.insert(0, ("type", format!("\"{}\"", c.kind().as_str())));
                        body_text(&f)
                    })
                    .collect();
                Sent {
                    method: reqwest::Method::POST,
                    url: self.url(&["v1", "batch"]).to_string(),
                    body: format!("{{\"operations\":[{}]}}", ops.join(",")),
                    calls,
                    batch: true,
                }
            }
            _ => {
                let call = self.resolve(op).expect("a single operation");
                let (method, url) = self.request_for(&call);
                Sent {
                    method,
                    url,
                    body: body_text(&call.fields()),
                    calls: vec![call],
                    batch: false,
                }
            }
        };
        self.sent.push(sent.clone());
        let start = Utc::now();
        let got = self
            .send(sent.method.clone(), &sent.url, Some(&sent.body))
            .await;
        let w = Window {
            start,
            end: Utc::now(),
        };
        let mut line = format!("{} {} {}", sent.method, sent.url, sent.body);
        let got = match got {
            Ok(g) => g,
            Err(m) => {
                self.log.push(line);
                return Err(m);
            }
        };
        let _ = write!(
            line,
            " → {}{} {}",
            got.status,
            if got.replayed { " replayed" } else { "" },
            summary(&got.json)
        );
        self.log.push(line);
        if sent.batch {
            if got.status != 200 {
                return Err(format!("the batch answered {}", got.status));
            }
            let results = got.json["results"].as_array().cloned().unwrap_or_default();
            if results.len() != sent.calls.len() {
                return Err(format!(
                    "{} results for {} operations",
                    results.len(),
                    sent.calls.len()
                ));
            }
            for (i, (call, item)) in sent.calls.iter().zip(results).enumerate() {
                let answer = Answer {
                    status: item["status"].as_u64().unwrap_or(0) as u16,
                    replayed: item["replayed"] == true,
                    body: if item.get("entry").is_some() {
                        item["entry"].clone()
                    } else {
                        item["problem"].clone()
                    },
                    raw: None,
                };
                let alts = self.model.expect(call, &w);
                self.stats.count(call, &answer);
                self.model
                    .apply(call, &alts, &answer)
                    .map_err(|m| format!("batch item {i}: {m}"))?;
            }
            return Ok(());
        }
        let call = &sent.calls[0];
        let answer = Answer {
            status: got.status,
            replayed: got.replayed,
            body: got.json.clone(),
            raw: Some(got.raw.clone()),
        };
        let alts = match call {
            // An empty account leaves the path without its segment: no such route.
            Call::Settings { account, .. } if account.is_empty() => vec![
                model::Alt::Refuse {
                    status: 404,
                    code: None,
                    counter: None,
                },
                model::Alt::Refuse {
                    status: 405,
                    code: None,
                    counter: None,
                },
            ],
            _ => self.model.expect(call, &w),
        };
        self.stats.count(call, &answer);
        self.model.apply(call, &alts, &answer)
    }
}

/// A failure's first line without what differs between runs (ports, ids,
/// numbers), so that failures of one kind count together.
fn failure_kind(message: &str) -> String {
    let first = message.lines().next().unwrap_or("");
    let mut out = String::new();
    let mut chars = first.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars.peek().is_some_and(|d| d.is_ascii_alphanumeric()) {
                chars.next();
            }
            out.push('N');
        } else {
            out.push(c);
        }
    }
    out.chars().take(200).collect()
}

/// A short summary of an answer for the transcript.
fn summary(v: &Value) -> String {
    if let Some(results) = v["results"].as_array() {
        let items: Vec<String> = results
            .iter()
            .map(|r| {
                format!(
                    "{}{}",
                    r["status"],
                    r["problem"]["code"]
                        .as_str()
                        .map(|c| format!(" {c}"))
                        .unwrap_or_default()
                )
            })
            .collect();
        return format!("[{}]", items.join(", "));
    }
    let entry = if v.get("entry").is_some() {
        &v["entry"]
    } else {
        v
    };
    let mut s = String::new();
    if let Some(c) = v["code"].as_str() {
        let _ = write!(s, "{c} ");
        if let Some(errors) = v["errors"].as_array() {
            let fields: Vec<&str> = errors.iter().filter_map(|e| e["field"].as_str()).collect();
            let _ = write!(s, "{fields:?} ");
        }
    }
    if let Some(id) = entry["id"].as_str() {
        let _ = write!(
            s,
            "{id} seq {} {} {} → {} {} balance_after {}",
            entry["seq"],
            entry["amount"].as_str().unwrap_or(""),
            entry["debit_account"].as_str().unwrap_or(""),
            entry["credit_account"].as_str().unwrap_or(""),
            entry["status"].as_str().unwrap_or(""),
            entry["balance_after"].as_str().unwrap_or("")
        );
    }
    if let Some(v) = v["settings_version"].as_i64() {
        let _ = write!(s, "settings_version {v}");
    }
    s
}

//! What must hold after every sequence: every read endpoint answers 2xx or
//! 4xx and agrees with the model, nothing acknowledged is missing, the
//! export is complete and verifies offline, `tally verify` passes, and each
//! unit's balances sum to zero.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use serde_json::Value;

use super::fx::Fx;
use super::gen::CUSTOMERS;
use super::model::{is_system, HoldStatus, HOLDS};
use super::Run;

macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(format!($($arg)+));
        }
    };
}

fn now_text() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true)
}

fn dec(v: &Value, field: &str) -> Option<Fx> {
    v[field].as_str().and_then(Fx::parse)
}

pub async fn after_sequence(run: &mut Run<'_>) -> Result<(), String> {
    settle_holds(run).await?;
    let entries = all_entries(run).await?;
    entries_match_the_model(run, &entries)?;
    entries_read_back(run, &entries).await?;
    balances(run, &entries).await?;
    accounts(run).await?;
    filters(run, &entries).await?;
    holds(run).await?;
    usage(run).await?;
    statements(run).await?;
    audit(run, &entries).await?;
    service(run).await?;
    if !run.exclude.hostile_reads {
        hostile_reads(run).await?;
    }
    let (ok, out, err) = run.ledger.tally(&["verify"]).await;
    ensure!(ok, "`tally verify` failed:\n{out}\n{err}");
    Ok(())
}

/// Waits until every hold past its expiry was released by the sweep, so
/// that `held` is known exactly.
async fn settle_holds(run: &mut Run<'_>) -> Result<(), String> {
    let open: Vec<(String, chrono::DateTime<Utc>)> = run
        .model
        .holds
        .iter()
        .filter(|(_, h)| {
            h.status == HoldStatus::Open
                && h.expires_at < Utc::now() + chrono::Duration::seconds(60)
        })
        .map(|(id, h)| (id.clone(), h.expires_at))
        .collect();
    for (id, expires_at) in open {
        // Until the hold's expiry has passed (the expiry is the behaviour
        // under test); then its release is polled for below.
        let wait = (expires_at - Utc::now()).to_std().unwrap_or_default();
        tokio::time::sleep(wait + Duration::from_millis(60)).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let r = run.get(&["v1", "holds", &id], &[]).await?;
            ensure!(r.status == 200, "GET hold {id} answered {}", r.status);
            let status = r.json["status"].as_str().unwrap_or("").to_owned();
            if status == "expired" {
                if let Some(h) = run.model.holds.get_mut(&id) {
                    h.status = HoldStatus::Expired;
                }
                break;
            }
            ensure!(
                status == "open",
                "hold {id}, open in the model, is {status} on the server"
            );
            ensure!(
                std::time::Instant::now() < deadline,
                "hold {id} expired at {expires_at} and is still open 10 s later"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// The tenant's whole log, in pages of 7 (to cross page boundaries).
async fn all_entries(run: &mut Run<'_>) -> Result<Vec<Value>, String> {
    let mut out: Vec<Value> = Vec::new();
    let mut after = 0i64;
    loop {
        let after_text = after.to_string();
        let r = run
            .get(
                &["v1", "entries"],
                &[("limit", "7"), ("after_seq", &after_text)],
            )
            .await?;
        ensure!(r.status == 200, "GET /v1/entries answered {}", r.status);
        let page = r.json["entries"].as_array().cloned().unwrap_or_default();
        out.extend(page);
        match r.json["next_after_seq"].as_i64() {
            Some(n) => after = n,
            None => break,
        }
    }
    for (i, e) in out.iter().enumerate() {
        ensure!(
            e["seq"].as_i64() == Some(i as i64 + 1),
            "the log's seqs are not 1..n: position {i} holds seq {}",
            e["seq"]
        );
    }
    Ok(out)
}

fn without_reversed_by(e: &Value) -> Value {
    let mut e = e.clone();
    if let Some(m) = e.as_object_mut() {
        m.remove("reversed_by");
    }
    e
}

fn entries_match_the_model(run: &Run<'_>, entries: &[Value]) -> Result<(), String> {
    let by_id: BTreeMap<&str, &Value> = entries
        .iter()
        .map(|e| (e["id"].as_str().unwrap_or(""), e))
        .collect();
    for m in &run.model.entries {
        let Some(e) = by_id.get(m.id.as_str()) else {
            return Err(format!(
                "entry {} ({}) was answered but is not in the log",
                m.id,
                m.kind.as_str()
            ));
        };
        if !m.first.is_null() {
            ensure!(
                without_reversed_by(e) == without_reversed_by(&m.first),
                "entry {} reads back other than first answered:\n  first: {}\n  now:   {e}",
                m.id,
                m.first
            );
        }
        ensure!(
            (e["status"] == "posted") == m.posted && e["kind"] == m.kind.as_str(),
            "entry {} has another kind or status than answered",
            m.id
        );
    }
    // The only entries nobody asked for are the sweep's releases.
    let known: BTreeSet<&str> = run.model.entries.iter().map(|m| m.id.as_str()).collect();
    let mut sweeps = 0;
    for e in entries {
        if known.contains(e["id"].as_str().unwrap_or("")) {
            continue;
        }
        let hold = e["upstream_id"]
            .as_str()
            .and_then(|u| u.strip_prefix("@expired:"))
            .unwrap_or("");
        ensure!(
            e["kind"] == "hold_release"
                && run
                    .model
                    .holds
                    .get(hold)
                    .is_some_and(|h| h.status == HoldStatus::Expired),
            "an entry nobody asked for: {e}"
        );
        sweeps += 1;
    }
    let expired = run
        .model
        .holds
        .values()
        .filter(|h| h.status == HoldStatus::Expired)
        .count();
    ensure!(
        sweeps == expired,
        "{expired} holds expired but the log holds {sweeps} releases by the sweep"
    );
    Ok(())
}

async fn entries_read_back(run: &mut Run<'_>, entries: &[Value]) -> Result<(), String> {
    for e in entries {
        let id = e["id"].as_str().unwrap_or("").to_owned();
        let r = run.get(&["v1", "entries", &id], &[]).await?;
        ensure!(
            r.status == 200,
            "GET /v1/entries/{id} answered {}",
            r.status
        );
        ensure!(
            without_reversed_by(&r.json) == without_reversed_by(e),
            "GET /v1/entries/{id} differs from the list:\n  {}\n  {e}",
            r.json
        );
        let reversed_by = run.model.reversed.get(&id).map(String::as_str);
        ensure!(
            r.json["reversed_by"].as_str() == reversed_by,
            "entry {id}: reversed_by is {} where the model has {reversed_by:?}",
            r.json["reversed_by"]
        );
    }
    let r = run.get(&["v1", "entries", "ent_nope"], &[]).await?;
    ensure!(r.status == 404, "an unknown entry answered {}", r.status);
    Ok(())
}

/// Every balance agrees with the model, and each unit sums to zero.
async fn balances(run: &mut Run<'_>, entries: &[Value]) -> Result<(), String> {
    let mut accounts: BTreeSet<(String, String)> = run.model.bal.keys().cloned().collect();
    for e in entries {
        let moves = e["status"] == "posted"
            && !matches!(
                e["kind"].as_str(),
                Some("hold" | "hold_release" | "account_settings")
            );
        if moves {
            for side in ["debit_account", "credit_account"] {
                let a = e[side].as_str().unwrap_or("").to_owned();
                accounts.insert((a, e["unit"].as_str().unwrap_or("").to_owned()));
            }
        }
    }
    let mut sums: BTreeMap<String, Fx> = BTreeMap::new();
    let mid = (entries.len() / 2).to_string();
    let now = now_text();
    for (account, unit) in &accounts {
        let mut q = vec![];
        if is_system(account) {
            q.push(("unit", unit.as_str()));
        }
        let r = run.get(&["v1", "accounts", account, "balance"], &q).await?;
        let Some(want) = run.model.bal.get(&(account.clone(), unit.clone())).cloned() else {
            return Err(format!(
                "{account} ({unit}) moved money the model does not know of"
            ));
        };
        ensure!(
            r.status == 200,
            "GET balance of {account} ({unit}) answered {}: {}",
            r.status,
            r.json
        );
        let held = run.model.held_now(account, unit);
        let b = &r.json;
        let got = (
            dec(b, "debits"),
            dec(b, "credits"),
            dec(b, "posted"),
            dec(b, "held"),
            dec(b, "available"),
        );
        let expected = (
            Some(want.debits.clone()),
            Some(want.credits.clone()),
            Some(want.posted()),
            Some(held.clone()),
            Some(want.posted().sub(&held)),
        );
        ensure!(
            got == expected,
            "balance of {account} ({unit}) is {b}, the model's debits {:?} credits {:?} held {held:?}",
            want.debits,
            want.credits
        );
        let s = sums.entry(unit.clone()).or_default();
        *s = s.add(&want.posted());
        // The same balance as of now, and as of the middle of the log.
        let mut q_at = q.clone();
        q_at.push(("as_of", now.as_str()));
        let r = run
            .get(&["v1", "accounts", account, "balance"], &q_at)
            .await?;
        ensure!(
            r.status == 200 && dec(&r.json, "posted") == Some(want.posted()),
            "balance of {account} as of {now} is {} {}",
            r.status,
            r.json
        );
        let mut q_seq = q.clone();
        q_seq.push(("as_of_seq", mid.as_str()));
        let r = run
            .get(&["v1", "accounts", account, "balance"], &q_seq)
            .await?;
        ensure!(
            r.status == 200,
            "balance of {account} as of seq {mid} answered {}: {}",
            r.status,
            r.json
        );
    }
    for (unit, sum) in sums {
        ensure!(
            sum.is_zero(),
            "the balances of {unit} sum to {sum:?}, not zero"
        );
    }
    // A customer the sequence never touched has no balance.
    for c in CUSTOMERS {
        if !run.model.bal.keys().any(|(a, _)| a == c) {
            let r = run.get(&["v1", "accounts", c, "balance"], &[]).await?;
            ensure!(
                r.status == 404,
                "balance of untouched {c} answered {}",
                r.status
            );
        }
    }
    Ok(())
}

async fn accounts(run: &mut Run<'_>) -> Result<(), String> {
    for c in CUSTOMERS {
        let r = run.get(&["v1", "accounts", c], &[]).await?;
        let bal = run.model.bal.iter().find(|((a, _), _)| a == c);
        let settings = run.model.settings.get(c);
        let Some(((_, unit), want)) = bal else {
            ensure!(
                settings.is_none() && (r.status == 404 || r.status == 200),
                "account {c} answered {}",
                r.status
            );
            continue;
        };
        ensure!(
            r.status == 200,
            "GET account {c} answered {}: {}",
            r.status,
            r.json
        );
        let a = &r.json;
        let version = settings.map_or(0, |s| s.version);
        let overdraft = settings.map_or(Value::from("allow"), |s| s.overdraft.to_json());
        ensure!(
            a["unit"] == unit.as_str()
                && a["settings_version"].as_i64() == Some(version)
                && a["overdraft"] == overdraft
                && dec(&a["balance"], "posted") == Some(want.posted()),
            "account {c} is {a}, the model's unit {unit}, version {version}, overdraft {overdraft}, posted {:?}",
            want.posted()
        );
    }
    Ok(())
}

/// The list's filters select exactly what they say.
async fn filters(run: &mut Run<'_>, entries: &[Value]) -> Result<(), String> {
    let mut accounts: BTreeSet<String> = CUSTOMERS.iter().map(|c| (*c).to_owned()).collect();
    accounts.extend(run.model.bal.keys().map(|(a, _)| a.clone()));
    accounts.insert(HOLDS.to_owned());
    for a in &accounts {
        let r = run
            .get(
                &["v1", "entries"],
                &[("account", a.as_str()), ("limit", "1000")],
            )
            .await?;
        ensure!(
            r.status == 200,
            "GET /v1/entries?account={a} answered {}",
            r.status
        );
        let want: Vec<&Value> = entries
            .iter()
            .filter(|e| e["debit_account"] == a.as_str() || e["credit_account"] == a.as_str())
            .map(|e| &e["id"])
            .collect();
        let got: Vec<&Value> = r.json["entries"]
            .as_array()
            .map(|v| v.iter().map(|e| &e["id"]).collect())
            .unwrap_or_default();
        ensure!(
            got == want,
            "GET /v1/entries?account={a} lists {got:?}, not {want:?}"
        );
    }
    let kinds: BTreeSet<&str> = entries.iter().filter_map(|e| e["kind"].as_str()).collect();
    for k in kinds {
        let r = run
            .get(&["v1", "entries"], &[("kind", k), ("limit", "1000")])
            .await?;
        let n = r.json["entries"].as_array().map_or(0, Vec::len);
        let want = entries.iter().filter(|e| e["kind"] == k).count();
        ensure!(
            r.status == 200 && n == want,
            "GET /v1/entries?kind={k}: {} with {n} entries, not {want}",
            r.status
        );
    }
    let from =
        (run.started - chrono::Duration::seconds(1)).to_rfc3339_opts(SecondsFormat::Micros, true);
    let to = now_text();
    let r = run
        .get(
            &["v1", "entries"],
            &[
                ("from", from.as_str()),
                ("to", to.as_str()),
                ("limit", "1000"),
            ],
        )
        .await?;
    let n = r.json["entries"].as_array().map_or(0, Vec::len);
    ensure!(
        r.status == 200 && n == entries.len(),
        "GET /v1/entries?from&to: {} with {n} entries, not {}",
        r.status,
        entries.len()
    );
    Ok(())
}

async fn holds(run: &mut Run<'_>) -> Result<(), String> {
    let holds: Vec<(String, HoldStatus, Fx)> = run
        .model
        .holds
        .iter()
        .map(|(id, h)| (id.clone(), h.status, h.amount.clone()))
        .collect();
    for (id, status, amount) in holds {
        let r = run.get(&["v1", "holds", &id], &[]).await?;
        ensure!(
            r.status == 200
                && r.json["status"] == status.as_str()
                && dec(&r.json, "amount") == Some(amount.clone()),
            "hold {id} is {} {}, the model's {} of {amount:?}",
            r.status,
            r.json,
            status.as_str()
        );
    }
    let r = run.get(&["v1", "holds", "h_nope"], &[]).await?;
    ensure!(r.status == 404, "an unknown hold answered {}", r.status);
    Ok(())
}

/// Usage summaries catch up with the log and equal the model's sums.
async fn usage(run: &mut Run<'_>) -> Result<(), String> {
    for c in CUSTOMERS {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let r = loop {
            let r = run.get(&["v1", "accounts", c, "usage"], &[]).await?;
            ensure!(
                r.status == 200,
                "GET usage of {c} answered {}: {}",
                r.status,
                r.json
            );
            if r.json["current_as_of_seq"] == r.json["head_seq"] {
                break r;
            }
            ensure!(
                std::time::Instant::now() < deadline,
                "the usage summaries of {c} are stuck at seq {} (head {}) for 10 s",
                r.json["current_as_of_seq"],
                r.json["head_seq"]
            );
            tokio::time::sleep(Duration::from_millis(30)).await;
        };
        let want: Vec<(String, Option<String>, String, Fx, Fx, i64)> = run
            .model
            .usage
            .iter()
            .filter(|((a, ..), row)| {
                a == c && !(row.amount.is_zero() && row.quantity.is_zero() && row.entries == 0)
            })
            .map(|((_, meter, day, unit), row)| {
                (
                    day.format("%Y-%m-%d").to_string(),
                    (!meter.is_empty()).then(|| meter.clone()),
                    unit.clone(),
                    row.amount.clone(),
                    row.quantity.clone(),
                    row.entries,
                )
            })
            .collect();
        let got: Vec<(String, Option<String>, String, Fx, Fx, i64)> = r.json["usage"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .map(|u| {
                        (
                            u["period"].as_str().unwrap_or("").to_owned(),
                            u["meter"].as_str().map(str::to_owned),
                            u["unit"].as_str().unwrap_or("").to_owned(),
                            dec(u, "amount").unwrap_or_default(),
                            dec(u, "quantity").unwrap_or_default(),
                            u["entries"].as_i64().unwrap_or(-1),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut want_sorted = want.clone();
        want_sorted.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
        ensure!(
            got == want_sorted,
            "usage of {c} is {got:?}, the model's {want_sorted:?}"
        );
        let r = run
            .get(&["v1", "accounts", c, "usage"], &[("granularity", "month")])
            .await?;
        ensure!(
            r.status == 200,
            "monthly usage of {c} answered {}",
            r.status
        );
    }
    Ok(())
}

async fn statements(run: &mut Run<'_>) -> Result<(), String> {
    let from =
        (run.started - chrono::Duration::seconds(1)).to_rfc3339_opts(SecondsFormat::Micros, true);
    let to = now_text();
    let accounts: Vec<(String, String)> = run.model.bal.keys().cloned().collect();
    for (account, unit) in accounts {
        let mut q = vec![("from", from.as_str()), ("to", to.as_str())];
        if is_system(&account) {
            q.push(("unit", unit.as_str()));
        }
        let r = run
            .get(&["v1", "accounts", &account, "statement"], &q)
            .await?;
        ensure!(
            r.status == 200,
            "statement of {account} ({unit}) answered {}: {}",
            r.status,
            r.json
        );
        let want = run.model.bal[&(account.clone(), unit.clone())].clone();
        let closing = &r.json["closing_balance"];
        let opening = &r.json["opening_balance"];
        ensure!(
            dec(closing, "debits") == Some(want.debits.clone())
                && dec(closing, "credits") == Some(want.credits.clone())
                && dec(closing, "held") == Some(run.model.held_now(&account, &unit))
                && dec(opening, "posted") == Some(Fx::zero()),
            "statement of {account} ({unit}): {}",
            r.json
        );
    }
    Ok(())
}

/// The audit head and the export cover the whole log, and the export
/// verifies offline.
async fn audit(run: &mut Run<'_>, entries: &[Value]) -> Result<(), String> {
    let n = entries.len() as i64;
    let last_hash = entries
        .last()
        .and_then(|e| e["hash"].as_str())
        .unwrap_or("")
        .to_owned();
    let r = run.get(&["v1", "audit", "head"], &[]).await?;
    ensure!(
        r.status == 200
            && r.json["seq"].as_i64() == Some(n)
            && (n == 0 || r.json["hash"] == last_hash.as_str()),
        "audit head {} {}, the log ends at seq {n} {last_hash}",
        r.status,
        r.json
    );
    let r = run.get(&["v1", "audit", "export"], &[]).await?;
    ensure!(r.status == 200, "the export answered {}", r.status);
    let text = String::from_utf8_lossy(&r.raw).into_owned();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| {
            serde_json::from_str(l).map_err(|e| format!("an export line is not JSON ({e}): {l}"))
        })
        .collect::<Result<_, _>>()?;
    ensure!(
        lines.len() as i64 == n + 2
            && lines[0]["record"] == "header"
            && lines.last().is_some_and(|t| t["record"] == "trailer"
                && t["entries"].as_i64() == Some(n)
                && t["last_seq"].as_i64() == Some(n)),
        "the export is incomplete: {} lines for {n} entries, last {:?}",
        lines.len(),
        lines.last()
    );
    for (line, e) in lines[1..lines.len() - 1].iter().zip(entries) {
        ensure!(
            line["id"] == e["id"] && line["hash"] == e["hash"],
            "export line {line} is not entry {}",
            e["id"]
        );
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("export.jsonl");
    std::fs::write(&file, &r.raw).map_err(|e| e.to_string())?;
    let file = file.display().to_string();
    let (ok, out, err) = run.ledger.tally(&["verify", "--export", &file]).await;
    ensure!(
        ok,
        "`tally verify --export` of the API's export failed:\n{out}\n{err}"
    );
    let r = run
        .get(&["v1", "audit", "export"], &[("format", "csv")])
        .await?;
    ensure!(r.status == 200, "the CSV export answered {}", r.status);
    Ok(())
}

/// The service endpoints answer, and the server counted no 5xx answer to
/// anything since it started (every earlier sequence on it passed).
async fn service(run: &mut Run<'_>) -> Result<(), String> {
    for path in ["healthz", "readyz", "openapi.json", "metrics"] {
        let url = run.url(&[path]);
        let r = run
            .server
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| format!("GET /{path}: no answer: {e}"))?;
        let status = r.status().as_u16();
        let text = r.text().await.map_err(|e| format!("GET /{path}: {e}"))?;
        ensure!(status == 200, "GET /{path} answered {status}: {text}");
        if path == "metrics" {
            let errors: Vec<&str> = text
                .lines()
                .filter(|l| !l.starts_with('#') && l.contains("status=\"5"))
                .collect();
            ensure!(errors.is_empty(), "the server answered 5xx: {errors:?}");
        }
    }
    Ok(())
}

/// A read: path segments and query pairs.
type Read<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);

/// Names no request body may carry are refused in paths and queries too:
/// a 4xx, never a 5xx.
async fn hostile_reads(run: &mut Run<'_>) -> Result<(), String> {
    let long = "x".repeat(200);
    let from =
        (run.started - chrono::Duration::seconds(1)).to_rfc3339_opts(SecondsFormat::Micros, true);
    let to = now_text();
    let period = [("from", from.as_str()), ("to", to.as_str())];
    for bad in ["a\u{0}b", "a\u{1b}b", long.as_str()] {
        let reads: Vec<Read> = vec![
            (vec!["v1", "accounts", bad, "balance"], vec![]),
            (vec!["v1", "accounts", bad], vec![]),
            (vec!["v1", "accounts", bad, "usage"], vec![]),
            (vec!["v1", "accounts", bad, "statement"], period.to_vec()),
            (vec!["v1", "entries", bad], vec![]),
            (vec!["v1", "holds", bad], vec![]),
            (vec!["v1", "entries"], vec![("account", bad)]),
        ];
        for (segments, query) in reads {
            let r = run.get(&segments, &query).await?;
            ensure!(
                (400..500).contains(&r.status),
                "GET {segments:?} {query:?} answered {}",
                r.status
            );
        }
    }
    Ok(())
}

//! `tally import` on every engine (docs/ingest.md): every row counted once
//! in the summary and the reject file, a re-run that replays, an import
//! killed with SIGKILL at about half and run again, an import beside a
//! server posting to the same tenant, and the settings file of `tally serve`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{debit, Engine, Ledger, TALLY};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::process::Command;

engine_tests!(
    an_import_counts_every_row_and_a_rerun_replays_them,
    a_csv_import_reads_the_same_fields_and_the_serve_settings_file,
    an_import_killed_at_half_and_run_again_posts_every_row_once,
    an_import_beside_a_server_on_the_same_tenant_loses_nothing,
);

/// `tally import` with `args`: (exit code, stdout, stderr).
async fn import(ledger: &Ledger, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(TALLY)
        .arg("import")
        .args(args)
        .args(["--database-url", &ledger.database_url])
        .env("TALLY_LOG", "warn")
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The count the summary gives for `outcome`.
fn summary(out: &str, outcome: &str) -> u64 {
    out.lines()
        .find_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(outcome)).then(|| words.next().unwrap().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no {outcome} in the summary: {out}"))
}

fn debit_op(id: &str, account: &str, amount: &str) -> Value {
    let mut op = debit(id, account, amount);
    op["type"] = json!("usage_debit");
    op
}

fn write_jsonl(path: &Path, ops: &[Value]) {
    let text: String = ops.iter().map(|o| format!("{o}\n")).collect();
    std::fs::write(path, text).unwrap();
}

fn decimal(v: &Value) -> Decimal {
    v.as_str().unwrap().parse().unwrap()
}

async fn verify(ledger: &Ledger) {
    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "tally verify: {out} {err}");
}

async fn an_import_counts_every_row_and_a_rerun_replays_them(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ops.jsonl");
    let rejects = dir.path().join("rejects.jsonl");
    let mut ops: Vec<Value> = (0..2_500)
        .map(|i| debit_op(&format!("ur_{i}"), &format!("cust_{}", i % 7), "0.10"))
        .collect();
    // Line 2,501: the same row again (a replay); 2,502: its key with other
    // parameters (a conflict); 2,503: a refund of no payment (rejected by
    // the rules); 2,504: not an operation (invalid).
    ops.push(debit_op("ur_3", "cust_3", "0.10"));
    ops.push(debit_op("ur_4", "cust_4", "9.99"));
    ops.push(
        json!({"type": "refund", "refund_id": "re_1", "payment_id": "pay_none", "amount": "1"}),
    );
    ops.push(json!({"type": "usage_debit", "usage_record_id": "ur_x", "amount": "-1"}));
    write_jsonl(&file, &ops);
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str("\n{not json\n");
    std::fs::write(&file, text).unwrap();

    let args = [
        file.to_str().unwrap(),
        "--tenant",
        "acme",
        "--rejects",
        rejects.to_str().unwrap(),
    ];
    let (code, out, err) = import(&ledger, &args).await;
    assert_eq!(code, 1, "invalid and conflicting rows exit 1: {out} {err}");
    assert_eq!(summary(&out, "created"), 2_500, "{out}");
    assert_eq!(summary(&out, "replayed"), 1, "{out}");
    assert_eq!(summary(&out, "conflicting"), 1, "{out}");
    assert_eq!(summary(&out, "rejected"), 1, "{out}");
    assert_eq!(summary(&out, "invalid"), 2, "{out}");
    let lines: Vec<Value> = std::fs::read_to_string(&rejects)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let named: Vec<(i64, &str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["line"].as_i64().unwrap(),
                l["outcome"].as_str().unwrap(),
                l["problem"]["code"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(named[0], (2_502, "conflicting", "idempotency_conflict"));
    assert_eq!(named[1].0, 2_503);
    assert_eq!(named[1].1, "rejected");
    assert_eq!(named[2], (2_504, "invalid", "invalid_request"));
    assert_eq!(
        named[3],
        (2_506, "invalid", "invalid_request"),
        "line 2,505 is blank"
    );
    assert_eq!(lines.len(), 4);
    assert_eq!(ledger.count("entries").await, 2_500);

    let (code, out, _) = import(&ledger, &args).await;
    assert_eq!(code, 1);
    assert_eq!(summary(&out, "created"), 0, "{out}");
    assert_eq!(summary(&out, "replayed"), 2_501, "{out}");
    assert_eq!(ledger.count("entries").await, 2_500);

    // A clean file exits 0.
    let clean = dir.path().join("clean.jsonl");
    write_jsonl(&clean, &ops[..10]);
    let (code, out, _) = import(&ledger, &[clean.to_str().unwrap(), "--tenant", "acme"]).await;
    assert_eq!((code, summary(&out, "replayed")), (0, 10), "{out}");

    let key = ledger.key("acme", "read").await;
    let server = ledger.server().await;
    // 2,500 debits of 0.10 over 7 accounts: cust_0 has ur_0, ur_7, … (358).
    let balance = server.balance(&key, "cust_0").await;
    assert_eq!(
        decimal(&balance["debits"]),
        decimal(&json!("35.80")),
        "{balance}"
    );
    verify(&ledger).await;
}

async fn a_csv_import_reads_the_same_fields_and_the_serve_settings_file(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.csv");
    std::fs::write(
        &file,
        "type,usage_record_id,payment_id,account,amount,unit,metadata\n\
         payment,,pay_1,cust_1,50,USD,\"{\"\"source\"\":\"\"backfill\"\"}\"\n\
         usage_debit,ur_1,,cust_1,1.25,USD,\n\
         usage_debit,ur_2,,cust_1,0.75,USD,\n\
         usage_debit,ur_3,,cust_1,not-a-number,USD,\n",
    )
    .unwrap();
    // The database comes from the settings file of `tally serve` alone.
    let config = dir.path().join("tally.toml");
    std::fs::write(
        &config,
        format!(
            "database_url = \"{}\"\nmax_group = 500\n",
            ledger.database_url
        ),
    )
    .unwrap();
    let out = Command::new(TALLY)
        .args(["import", file.to_str().unwrap(), "--tenant", "acme"])
        .args(["--config", config.to_str().unwrap()])
        .env_remove("TALLY_DATABASE_URL")
        .env("TALLY_LOG", "warn")
        .stdout(Stdio::piped())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text} {:?}", out.stderr);
    assert_eq!(summary(&text, "created"), 3, "{text}");
    assert_eq!(summary(&text, "invalid"), 1, "{text}");

    let key = ledger.key("acme", "read").await;
    let server = ledger.server().await;
    let balance = server.balance(&key, "cust_1").await;
    assert_eq!(
        decimal(&balance["credits"]),
        decimal(&json!("50")),
        "{balance}"
    );
    assert_eq!(
        decimal(&balance["debits"]),
        decimal(&json!("2.00")),
        "{balance}"
    );
    let entries = server.all_entries(&key).await;
    assert_eq!(entries[0]["metadata"]["source"], "backfill");
    verify(&ledger).await;
}

/// A file of `n` distinct debits of 0.01 to 20 accounts.
fn many_debits(path: &Path, n: usize) {
    let ops: Vec<Value> = (0..n)
        .map(|i| debit_op(&format!("ur_{i}"), &format!("cust_{}", i % 20), "0.01"))
        .collect();
    write_jsonl(path, &ops);
}

async fn an_import_killed_at_half_and_run_again_posts_every_row_once(engine: Engine) {
    const ROWS: usize = 40_000;
    let ledger = Ledger::new(engine).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ops.jsonl");
    many_debits(&file, ROWS);
    // The database exists (and is migrated) before its rows are counted.
    let key = ledger.key("acme", "read").await;
    let mut child = Command::new(TALLY)
        .args(["import", file.to_str().unwrap(), "--tenant", "acme"])
        .args(["--database-url", &ledger.database_url])
        .env("TALLY_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let committed = loop {
        let n = ledger.count("entries").await;
        if n as usize >= ROWS / 2 {
            break n;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "stuck at {n}");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the import ended before half: {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    // A COMMIT the killed process had sent still completes on a database
    // server (PostgreSQL finishes it before it notices the closed socket):
    // exactly the ambiguity a re-run must absorb. The count is read once it
    // has stopped moving.
    let mut before = ledger.count("entries").await as u64;
    let settling = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let now = ledger.count("entries").await as u64;
        if now == before {
            break;
        }
        before = now;
        assert!(
            settling.elapsed() < Duration::from_secs(60),
            "never settled: {now}"
        );
    }
    assert!(
        before >= committed as u64 && (before as usize) < ROWS,
        "killed too late: {before}"
    );

    let (code, out, err) = import(&ledger, &[file.to_str().unwrap(), "--tenant", "acme"]).await;
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(
        summary(&out, "replayed"),
        before,
        "rows committed before the kill replay: {out}"
    );
    assert_eq!(summary(&out, "created"), ROWS as u64 - before, "{out}");
    assert_eq!(ledger.count("entries").await as usize, ROWS);
    let server = ledger.server().await;
    let balance = server.balance(&key, "cust_7").await;
    assert_eq!(
        decimal(&balance["debits"]),
        decimal(&json!("20")),
        "{balance}"
    );
    verify(&ledger).await;
}

async fn an_import_beside_a_server_on_the_same_tenant_loses_nothing(engine: Engine) {
    const ROWS: usize = 10_000;
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ops.jsonl");
    many_debits(&file, ROWS);
    let posting = {
        let url = format!("http://{}/v1/usage-debits", server.addr());
        let key = key.clone();
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut created = 0;
            for i in 0..400 {
                // Some keys the file holds too: whichever comes first
                // creates, the other replays.
                let id = if i % 4 == 0 {
                    format!("ur_{i}")
                } else {
                    format!("live_{i}")
                };
                let r = http
                    .post(&url)
                    .bearer_auth(&key)
                    .json(&debit(&id, &format!("cust_{}", i % 20), "0.01"))
                    .send()
                    .await
                    .unwrap();
                assert!(r.status() == 201 || r.status() == 200, "{}", r.status());
                created += 1;
            }
            created
        })
    };
    let (code, out, err) = import(&ledger, &[file.to_str().unwrap(), "--tenant", "acme"]).await;
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(posting.await.unwrap(), 400);
    assert_eq!(
        summary(&out, "created") + summary(&out, "replayed"),
        ROWS as u64
    );
    // 10,000 file rows plus the 300 live keys the file does not hold.
    let entries = server.all_entries(&key).await;
    assert_eq!(entries.len(), ROWS + 300);
    let mut sum = Decimal::ZERO;
    for a in 0..20 {
        sum += decimal(&server.balance(&key, &format!("cust_{a}")).await["debits"]);
    }
    assert_eq!(sum, decimal(&json!("103")));
    verify(&ledger).await;
}

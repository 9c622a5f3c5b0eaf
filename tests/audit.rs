//! The finance audit trail: exports of the log, verified offline by
//! `tally verify --export` with no database and no server; signed
//! checkpoints; and each kind of tampering caught and named.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{debit, Engine, Ledger, Server, TALLY};
use serde_json::{json, Value};
use tally_ledger::audit::format::{EntryRecord, TrailerRecord};
use tally_ledger::audit::sign::{checkpoint_message, verify_checkpoint, Signature};
use tally_ledger::audit::COLUMNS;
use tally_ledger::chain::{entry_hash, GENESIS_HASH};
use tally_ledger::fingerprint::Fingerprint;
use tally_ledger::fold::LogFold;

engine_tests!(
    an_export_of_every_kind_verifies_offline,
    tally_export_writes_the_same_entries_signed_with_the_configured_key,
    a_csv_export_is_rfc_4180_and_verifies,
    exports_need_the_audit_scope_and_valid_parameters,
    each_kind_of_tampering_is_caught_and_named,
    a_partial_export_verifies_from_its_first_link,
    the_signed_head_verifies_with_the_public_key,
    a_database_failure_mid_export_ends_it_without_a_trailer,
    an_export_streams_in_the_memory_of_a_page,
);

const ALL: &str = "post,read,admin,audit";
/// RFC 8032 test vector 1: a seed and its public key.
const SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const PUBLIC_KEY: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

/// A comma, a quote and a newline: every CSV quoting rule at once.
const AWKWARD: &str = "a, \"b\"\nc";

/// A server signing with [`SEED`] given as `TALLY_SIGNING_KEY`.
async fn signing_server(ledger: &Ledger) -> Server {
    Server::start_with_env(&ledger.database_url, &[], &[("TALLY_SIGNING_KEY", SEED)]).await
}

async fn post_ok(server: &Server, path: &str, key: &str, body: Value) -> Value {
    let r = server.post(path, key, &body).await;
    assert!(r.status == 201 || r.status == 200, "{path}: {r:?}");
    r.json()
}

/// Every kind of entry: settings, payments, debits, a hold and its capture,
/// a refund, a reversal, an adjustment and a stored rejection; plus one
/// entry of another tenant that must never show up.
async fn populate(ledger: &Ledger, server: &Server) -> String {
    let key = ledger.key("acme", ALL).await;
    let r = server
        .put(
            "/v1/accounts/cust",
            &key,
            &json!({"unit": "USD", "overdraft": "forbid"}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    post_ok(
        server,
        "/v1/payments",
        &key,
        json!({"payment_id": "p1", "account": "cust", "amount": "20", "unit": "USD",
               "metadata": {"note": AWKWARD}}),
    )
    .await;
    let d1 = post_ok(
        server,
        "/v1/usage-debits",
        &key,
        json!({"usage_record_id": "ur,\"1\"", "account": "cust", "amount": "2.50", "unit": "USD",
               "meter": "tokens", "quantity": "2500", "metadata": {"note": AWKWARD}}),
    )
    .await;
    post_ok(
        server,
        "/v1/usage-debits",
        &key,
        debit("u2", "cust", "1.25"),
    )
    .await;
    post_ok(
        server,
        "/v1/holds",
        &key,
        json!({"hold_id": "h1", "account": "cust", "amount": "3", "unit": "USD", "ttl_seconds": 600}),
    )
    .await;
    post_ok(
        server,
        "/v1/holds/h1/capture",
        &key,
        json!({"capture_id": "c1", "amount": "2"}),
    )
    .await;
    post_ok(
        server,
        "/v1/refunds",
        &key,
        json!({"refund_id": "r1", "payment_id": "p1", "amount": "1", "reason": "goodwill"}),
    )
    .await;
    post_ok(
        server,
        "/v1/reversals",
        &key,
        json!({"reversal_id": "rv1", "entry_id": d1["id"], "reason": "duplicate"}),
    )
    .await;
    post_ok(
        server,
        "/v1/adjustments",
        &key,
        json!({"adjustment_id": "a1", "account": "cust", "amount": "0.75",
               "direction": "credit", "reason": "support credit"}),
    )
    .await;
    post_ok(
        server,
        "/v1/holds",
        &key,
        json!({"hold_id": "h2", "account": "cust", "amount": "1", "unit": "USD", "ttl_seconds": 600}),
    )
    .await;
    let rejected = server
        .post("/v1/usage-debits", &key, &debit("u_big", "cust", "1000"))
        .await;
    assert_eq!(rejected.status, 422, "{rejected:?}");
    assert_eq!(rejected.json()["code"], "insufficient_funds");
    post_ok(server, "/v1/usage-debits", &key, debit("u3", "cust", "0.5")).await;

    let other = ledger.key("other", ALL).await;
    post_ok(
        server,
        "/v1/usage-debits",
        &other,
        debit("secret_of_other", "their_cust", "9"),
    )
    .await;
    key
}

/// `tally verify --export FILE [extra…]`, with no database anywhere:
/// (exit code, stdout, stderr).
fn verify(file: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(TALLY)
        .arg("verify")
        .arg("--export")
        .arg(file)
        .args(extra)
        .env_remove("TALLY_DATABASE_URL")
        .env("TALLY_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_owned).collect()
}

fn joined(lines: &[String]) -> String {
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

async fn export(server: &Server, key: &str, query: &str) -> String {
    let r = server.get(&format!("/v1/audit/export{query}"), key).await;
    assert_eq!(r.status, 200, "{r:?}");
    String::from_utf8(r.body).unwrap()
}

async fn an_export_of_every_kind_verifies_offline(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = signing_server(&ledger).await;
    let key = populate(&ledger, &server).await;
    let r = server.get("/v1/audit/export", &key).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.content_type(), "application/x-ndjson; charset=utf-8");
    let head = server.get("/v1/audit/head", &key).await.json();
    let n = head["seq"].as_i64().unwrap();
    assert_eq!(
        r.headers["content-disposition"],
        format!("attachment; filename=\"tally-export-acme-1-{n}.jsonl\"").as_str()
    );
    let text = String::from_utf8(r.body).unwrap();
    let all = lines(&text);
    assert_eq!(all.len() as i64, n + 2, "header, {n} entries, trailer");
    let header: Value = serde_json::from_str(&all[0]).unwrap();
    assert_eq!(
        (
            &header["record"],
            &header["format"],
            &header["tenant"],
            &header["from_seq"],
            &header["to_seq"]
        ),
        (
            &json!("header"),
            &json!("tally-export/1"),
            &json!("acme"),
            &json!(1),
            &json!(n)
        )
    );
    // Every kind is in it, with the hashes the API shows.
    let api = server.all_entries(&key).await;
    let mut kinds = Vec::new();
    for (line, e) in all[1..=n as usize].iter().zip(&api) {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["record"], "entry");
        assert_eq!(
            v["tenant_id"], "acme",
            "another tenant's data never appears"
        );
        assert_eq!((&v["seq"], &v["hash"]), (&e["seq"], &e["hash"]));
        assert_eq!(v["fingerprint"], e["fingerprint"]);
        kinds.push(format!("{}/{}", v["kind"], v["status"]));
    }
    for kind in [
        "account_settings",
        "payment",
        "usage_debit",
        "hold",
        "hold_capture",
        "refund",
        "reversal",
        "adjustment",
    ] {
        assert!(
            kinds.contains(&format!("\"{kind}\"/\"posted\"")),
            "{kind} in {kinds:?}"
        );
    }
    assert!(kinds.contains(&"\"usage_debit\"/\"rejected\"".to_owned()));
    assert!(!text.contains("secret_of_other") && !text.contains("their_cust"));
    let trailer: TrailerRecord = serde_json::from_str(&all[n as usize + 1]).unwrap();
    assert_eq!(
        (trailer.entries, trailer.last_seq, &trailer.last_hash),
        (n, n, &head["hash"].as_str().unwrap().to_owned())
    );
    assert_eq!(trailer.signature.as_ref().unwrap().public_key, PUBLIC_KEY);

    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "acme.jsonl", &text);
    let (code, out, err) = verify(&file, &["--public-key", PUBLIC_KEY]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains(&format!("entries:    {n}, seq 1 to {n}")),
        "{out}"
    );
    assert!(out.contains("balances (account, unit) folded"), "{out}");
    assert!(out.contains("1 holds open"), "{out}");
    assert!(out.contains("the key you gave"), "{out}");
    assert!(out.contains("verify OK"), "{out}");

    // The other tenant's export holds its one entry only.
    let other = ledger.key("other", "audit").await;
    let theirs = lines(&export(&server, &other, "").await);
    assert_eq!(theirs.len(), 3);
    assert!(theirs[1].contains("secret_of_other") && !theirs[1].contains("\"cust\""));
}

async fn tally_export_writes_the_same_entries_signed_with_the_configured_key(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = ledger.server().await;
    let key = populate(&ledger, &server).await;
    let from_api = lines(&export(&server, &key, "").await);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cli.jsonl");
    let out = std::process::Command::new(TALLY)
        .args(["export", "--database-url", &ledger.database_url])
        .args(["--tenant", "acme", "--output"])
        .arg(&file)
        .env("TALLY_SIGNING_KEY", SEED)
        .env("TALLY_LOG", "warn")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let from_cli = lines(&std::fs::read_to_string(&file).unwrap());
    assert_eq!(from_cli.len(), from_api.len());
    // Same bytes but for the times (exported_at, signed_at) and the signature.
    let n = from_api.len() - 1;
    assert_eq!(from_cli[1..n], from_api[1..n]);
    let strip = |l: &str| {
        let mut v: Value = serde_json::from_str(l).unwrap();
        v.as_object_mut().unwrap().remove("exported_at");
        v.as_object_mut().unwrap().remove("signature");
        v
    };
    assert_eq!(strip(&from_cli[0]), strip(&from_api[0]));
    assert_eq!(strip(&from_cli[n]), strip(&from_api[n]));
    let api_trailer: Value = serde_json::from_str(&from_api[n]).unwrap();
    assert_eq!(
        api_trailer["signature"],
        Value::Null,
        "this server has no key"
    );
    let cli_trailer: Value = serde_json::from_str(&from_cli[n]).unwrap();
    assert_eq!(cli_trailer["signature"]["public_key"], PUBLIC_KEY);
    let (code, out, err) = verify(&file, &["--public-key", PUBLIC_KEY]);
    assert_eq!(code, 0, "{out}\n{err}");

    // The unsigned export verifies too, and says it is unsigned; asking
    // for a key it does not carry fails.
    let unsigned = write(dir.path(), "api.jsonl", &joined(&from_api));
    let (code, out, _) = verify(&unsigned, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("signing off"), "{out}");
    let (code, out, _) = verify(&unsigned, &["--public-key", PUBLIC_KEY]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the file is not signed"), "{out}");

    // To standard output, CSV, a range.
    let (ok, csv, err) = ledger
        .tally(&[
            "export", "--tenant", "acme", "--format", "csv", "--to-seq", "3",
        ])
        .await;
    assert!(ok, "{err}");
    assert_eq!(csv.matches("\r\n").count(), 4, "{csv}");
    // Bad arguments are usage errors (2).
    let (ok, _, err) = ledger
        .tally(&["export", "--tenant", "acme", "--to-seq", "999"])
        .await;
    assert!(!ok && err.contains("to_seq"), "{err}");
}

async fn a_csv_export_is_rfc_4180_and_verifies(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = ledger.server().await;
    let key = populate(&ledger, &server).await;
    let r = server.get("/v1/audit/export?format=csv", &key).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.content_type(), "text/csv; charset=utf-8; header=present");
    assert!(r.headers["content-disposition"]
        .to_str()
        .unwrap()
        .ends_with(".csv\""));
    let text = String::from_utf8(r.body).unwrap();
    assert!(text.starts_with(&format!("{}\r\n", COLUMNS.join(","))));
    let jsonl = lines(&export(&server, &key, "").await);
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(header, COLUMNS);
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(
        rows.len(),
        jsonl.len() - 2,
        "one row per entry, no trailer row"
    );
    let mut awkward_seen = 0;
    for (row, line) in rows.iter().zip(&jsonl[1..]) {
        let v: Value = serde_json::from_str(line).unwrap();
        for (i, column) in COLUMNS.iter().enumerate() {
            let want = match &v[*column] {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            assert_eq!(row.get(i).unwrap(), want, "{column} of seq {}", v["seq"]);
        }
        let params: Value = serde_json::from_str(row.get(13).unwrap()).unwrap();
        if params["metadata"]["note"] == AWKWARD {
            awkward_seen += 1;
        }
    }
    assert_eq!(awkward_seen, 2, "the comma, quote and newline round-trip");
    assert!(rows.iter().any(|r| r.get(4) == Some("ur,\"1\"")));
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "acme.csv", &text);
    let (code, out, err) = verify(&file, &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("CSV carries no trailer"), "{out}");
    // A changed amount in the CSV is caught too.
    let tampered = text.replace(",1.25,USD,", ",12.5,USD,");
    assert_ne!(tampered, text);
    let file = write(dir.path(), "tampered.csv", &tampered);
    let (code, out, _) = verify(&file, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("amount changed?"), "{out}");
}

async fn exports_need_the_audit_scope_and_valid_parameters(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = ledger.server().await;
    let key = populate(&ledger, &server).await;
    let no_audit = ledger.key("acme", "post,read,admin").await;
    for path in ["/v1/audit/export", "/v1/audit/head"] {
        let r = server.get(path, &no_audit).await;
        assert_eq!(
            (r.status, r.code()),
            (403, "forbidden".to_owned()),
            "{path}"
        );
        let r = server.get(path, "tally_nope").await;
        assert_eq!(r.status, 401, "{path}");
    }
    let audit_only = ledger.key("acme", "audit").await;
    assert_eq!(
        server.get("/v1/audit/export", &audit_only).await.status,
        200
    );

    let head = server.get("/v1/audit/head", &key).await.json()["seq"]
        .as_i64()
        .unwrap();
    let fields = |r: &common::Resp| -> Vec<String> {
        assert_eq!(
            (r.status, r.code()),
            (422, "invalid_request".to_owned()),
            "{r:?}"
        );
        r.json()["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap().to_owned())
            .collect()
    };
    let r = server
        .get(
            "/v1/audit/export?format=xml&from_seq=0&to_seq=-1&page=2",
            &key,
        )
        .await;
    let mut got = fields(&r);
    got.sort();
    assert_eq!(got, ["format", "from_seq", "page", "to_seq"]);
    let r = server
        .get(&format!("/v1/audit/export?to_seq={}", head + 1), &key)
        .await;
    assert_eq!(fields(&r), ["to_seq"]);
    let r = server
        .get("/v1/audit/export?from_seq=5&to_seq=3", &key)
        .await;
    assert_eq!(fields(&r), ["from_seq"]);
    let r = server.get("/v1/audit/head?x=1", &key).await;
    assert_eq!(fields(&r), ["x"]);
}

/// Re-chains `entries` after changing seq `seq`'s amount, recomputing its
/// fingerprint and every balance_after and hash with the ledger's own
/// functions: what someone with database access but no signing key can do.
fn rehash_with_new_amount(export_lines: &[String], seq: i64, amount: &str) -> Vec<String> {
    let n = export_lines.len() - 1;
    let mut out = vec![export_lines[0].clone()];
    let mut fold = LogFold::new();
    let mut prev = GENESIS_HASH;
    for line in &export_lines[1..n] {
        let record: EntryRecord = serde_json::from_str(line).unwrap();
        let mut e = record.to_stored().unwrap();
        if e.seq == seq {
            let old = tally_ledger::amount::canonical(e.amount);
            e.amount = amount.parse().unwrap();
            e.params = e.params.replace(
                &format!("\"amount\":\"{old}\""),
                &format!("\"amount\":\"{amount}\""),
            );
            e.fingerprint = Fingerprint::of_canonical(&e.params).to_string();
        }
        fold.apply(&e).unwrap();
        e.balance_after = fold.balances.get(&e.account, &e.unit).unwrap().posted();
        e.prev_hash = hex::encode(prev);
        prev = entry_hash(&prev, &e);
        e.hash = hex::encode(prev);
        let mut bytes = Vec::new();
        EntryRecord::of(&e).write_json_line(&mut bytes);
        out.push(String::from_utf8(bytes).unwrap().trim_end().to_owned());
    }
    let mut trailer: TrailerRecord = serde_json::from_str(&export_lines[n]).unwrap();
    trailer.last_hash = hex::encode(prev);
    out.push(serde_json::to_string(&trailer).unwrap());
    out
}

async fn each_kind_of_tampering_is_caught_and_named(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = signing_server(&ledger).await;
    let key = populate(&ledger, &server).await;
    let head = server.get("/v1/audit/head", &key).await.json();
    let noted = format!("{}:{}", head["seq"], head["hash"].as_str().unwrap());
    let original = lines(&export(&server, &key, "").await);
    let dir = tempfile::tempdir().unwrap();
    let check = |name: &str, lines: &[String], extra: &[&str]| {
        let file = write(dir.path(), name, &joined(lines));
        verify(&file, extra)
    };
    let (code, out, _) = check("original.jsonl", &original, &["--head", &noted]);
    assert_eq!(code, 0, "{out}");
    // Line n + 1 holds seq n. Seq 4 is the debit u2 of 1.25.
    assert!(
        original[4].contains("\"upstream_id\":\"u2\""),
        "{}",
        original[4]
    );

    let mut changed = original.clone();
    changed[4] = changed[4].replace("\"amount\":\"1.25\"", "\"amount\":\"0.25\"");
    assert_ne!(changed[4], original[4]);
    let (code, out, err) = check("changed.jsonl", &changed, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("line 5 (seq 4): amount changed? the entry hash does not match its contents"),
        "{out}"
    );
    assert!(err.contains("FAILED"), "{err}");

    let mut deleted = original.clone();
    deleted.remove(6);
    let (code, out, _) = check("deleted.jsonl", &deleted, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("seq 6 missing between lines 6 and 7"), "{out}");

    let mut swapped = original.clone();
    swapped.swap(8, 9);
    let (code, out, _) = check("swapped.jsonl", &swapped, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("lines 9 and 10 swapped: seq 8 follows seq 9"),
        "{out}"
    );

    let truncated = &original[..original.len() - 1];
    let (code, out, _) = check("truncated.jsonl", truncated, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("trailer missing: the file is truncated"),
        "{out}"
    );

    // Re-hashed by someone without the key: every link, fingerprint, hash
    // and balance holds, but the signature does not…
    let rehashed = rehash_with_new_amount(&original, 4, "0.25");
    assert_ne!(rehashed[4], original[4]);
    let (code, out, _) = check("rehashed.jsonl", &rehashed, &[]);
    assert_eq!(code, 1, "{out}");
    let last = original.len();
    assert!(
        out.contains(&format!(
            "line {last}: signature does not match: the signed checkpoint is for seq"
        )) && out.contains("re-hashed"),
        "{out}"
    );
    // …and the head noted before does not either.
    let (code, out, _) = check("rehashed.jsonl", &rehashed, &["--head", &noted]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "line {} (seq {}): the hash differs from the head you noted",
            last - 1,
            head["seq"]
        )),
        "{out}"
    );
    // Re-signed with the forger's own key: refused against the real one.
    let mut resigned = rehashed.clone();
    let mut trailer: TrailerRecord = serde_json::from_str(&resigned[last - 1]).unwrap();
    let forger = tally_ledger::audit::sign::Signer::generate().unwrap();
    trailer.signature = Some(forger.sign(
        "acme",
        trailer.last_seq,
        &trailer.last_hash,
        chrono::Utc::now(),
    ));
    resigned[last - 1] = serde_json::to_string(&trailer).unwrap();
    let (code, out, _) = check("resigned.jsonl", &resigned, &["--public-key", PUBLIC_KEY]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("signed by another key"), "{out}");
    // Usage errors are 2.
    let (code, _, err) = check("x.jsonl", &original, &["--head", "nonsense"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = verify(&dir.path().join("missing.jsonl"), &[]);
    assert_eq!(code, 2, "{err}");
}

async fn a_partial_export_verifies_from_its_first_link(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = signing_server(&ledger).await;
    let key = populate(&ledger, &server).await;
    let entries = server.all_entries(&key).await;
    let dir = tempfile::tempdir().unwrap();
    let text = export(&server, &key, "?from_seq=3&to_seq=7").await;
    let part = lines(&text);
    assert_eq!(part.len(), 7);
    let first: Value = serde_json::from_str(&part[1]).unwrap();
    assert_eq!(
        (&first["seq"], &first["prev_hash"]),
        (&json!(3), &entries[1]["hash"])
    );
    let file = write(dir.path(), "part.jsonl", &text);
    let noted = format!("2:{}", entries[1]["hash"].as_str().unwrap());
    let (code, out, err) = verify(&file, &["--head", &noted, "--public-key", PUBLIC_KEY]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("entries:    5, seq 3 to 7"), "{out}");
    assert!(out.contains("the hash of seq 2, not in this file"), "{out}");
    assert!(out.contains("balances:   skipped"), "{out}");
    // A wrong link before the range is caught.
    let wrong = format!("2:{}", entries[2]["hash"].as_str().unwrap());
    let (code, out, _) = verify(&file, &["--head", &wrong]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("prev_hash differs from the head you noted"),
        "{out}"
    );
    // A head outside the file cannot be checked: that is a failure.
    let (code, out, _) = verify(&file, &["--head", &format!("9:{}", "0".repeat(64))]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("is not in this export"), "{out}");
    // Nothing new since seq n: an empty export that still verifies.
    let n = entries.len();
    let text = export(&server, &key, &format!("?from_seq={}", n + 1)).await;
    let empty = lines(&text);
    assert_eq!(empty.len(), 2);
    let trailer: TrailerRecord = serde_json::from_str(&empty[1]).unwrap();
    assert_eq!(
        (
            trailer.entries,
            trailer.last_seq,
            Some(trailer.last_hash.as_str())
        ),
        (0, n as i64, entries[n - 1]["hash"].as_str())
    );
    let file = write(dir.path(), "empty.jsonl", &text);
    let (code, out, _) = verify(&file, &["--public-key", PUBLIC_KEY]);
    assert_eq!(code, 0, "{out}");
}

async fn the_signed_head_verifies_with_the_public_key(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    // Without a key: unsigned, and said so.
    let server = ledger.server().await;
    let key = ledger.key("acme", ALL).await;
    let head = server.get("/v1/audit/head", &key).await.json();
    assert_eq!(
        (
            &head["seq"],
            &head["hash"],
            &head["signing"],
            &head["signature"]
        ),
        (
            &json!(0),
            &json!("0".repeat(64)),
            &json!("off"),
            &Value::Null
        )
    );
    assert!(head["notice"].as_str().unwrap().contains("signing is off"));
    let empty = export(&server, &key, "").await;
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = verify(&write(dir.path(), "empty.jsonl", &empty), &[]);
    assert_eq!(code, 0, "{out}");
    drop(server);

    // A bad key stops the server, naming the setting and not the key.
    let out = std::process::Command::new(TALLY)
        .args(["serve", "--database-url", &ledger.database_url])
        .args(["--listen", "127.0.0.1:0"])
        .env("TALLY_SIGNING_KEY", "not-a-real-seed-1234")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("TALLY_SIGNING_KEY") && !err.contains("not-a-real-seed"),
        "{err}"
    );
    let seed_file = write(dir.path(), "seed", "abcd\n");
    let out = std::process::Command::new(TALLY)
        .args(["serve", "--database-url", &ledger.database_url])
        .args(["--listen", "127.0.0.1:0", "--signing-key-file"])
        .arg(&seed_file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--signing-key-file"), "{err}");

    // An operator publishes the public key; a reader checks the head with it.
    let seed_file = write(dir.path(), "seed.hex", &format!("{SEED}\n"));
    let out = std::process::Command::new(TALLY)
        .args(["signing-key", "public", "--signing-key-file"])
        .arg(&seed_file)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("public_key: {PUBLIC_KEY}\n")
    );
    let server = ledger
        .server_with(&["--signing-key-file", seed_file.to_str().unwrap()])
        .await;
    post_ok(&server, "/v1/usage-debits", &key, debit("u1", "cust", "1")).await;
    let head = server.get("/v1/audit/head", &key).await.json();
    assert_eq!(head["signing"], "on");
    assert!(head.get("notice").is_none());
    let sig: Signature = serde_json::from_value(head["signature"].clone()).unwrap();
    let hash = head["hash"].as_str().unwrap();
    assert_eq!(sig.public_key, PUBLIC_KEY);
    assert_eq!(sig.signed_at, head["checked_at"].as_str().unwrap());
    assert_eq!(
        sig.message,
        format!("tally-checkpoint/1\nacme\n1\n{hash}\n{}", sig.signed_at)
    );
    assert_eq!(
        sig.message,
        checkpoint_message("acme", 1, hash, &sig.signed_at)
    );
    verify_checkpoint(&sig, "acme", 1, hash).unwrap();
    assert!(verify_checkpoint(&sig, "acme", 1, &"0".repeat(64)).is_err());
    assert!(verify_checkpoint(&sig, "evil", 1, hash).is_err());

    // `signing-key generate` makes keys that work.
    let out = std::process::Command::new(TALLY)
        .args(["signing-key", "generate"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let got: Vec<&str> = text.lines().collect();
    assert!(
        got[0].starts_with("seed: ") && got[1].starts_with("public_key: "),
        "{text}"
    );
    let seed = got[0].trim_start_matches("seed: ");
    let out = std::process::Command::new(TALLY)
        .args(["signing-key", "public"])
        .env("TALLY_SIGNING_KEY", seed)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        got[1],
        "public derives the generated public key"
    );
}

async fn a_database_failure_mid_export_ends_it_without_a_trailer(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = signing_server(&ledger).await;
    let key = ledger.key("acme", ALL).await;
    // 40 pages: far more than the socket buffers hold, so the server is
    // still reading the log when the database goes away.
    for b in 0..40 {
        let ops: Vec<Value> = (0..1000)
            .map(|i| {
                json!({"type": "usage_debit", "usage_record_id": format!("u{b}_{i}"),
                       "account": format!("c{i}"), "amount": "1", "unit": "USD",
                       "metadata": {"pad": "x".repeat(200)}})
            })
            .collect();
        let r = server
            .post("/v1/batch", &key, &json!({"operations": ops}))
            .await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    let mut response = server
        .client
        .get(format!("{}/v1/audit/export", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut got = response.chunk().await.unwrap().unwrap().to_vec();
    // The log's table disappears behind the server's back.
    ledger
        .sql(&["ALTER TABLE entries RENAME TO entries_gone"])
        .await;
    let ended = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => got.extend_from_slice(&chunk),
            Ok(None) => break "cleanly",
            Err(_) => break "with an error",
        }
    };
    assert_eq!(
        ended, "with an error",
        "the client must see an incomplete transfer"
    );
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("{\"record\":\"header\""));
    assert!(!text.contains("\"record\":\"trailer\""));
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "cut.jsonl", &text);
    let (code, out, _) = verify(&file, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("trailer missing: the file is truncated")
            || out.contains("the file is truncated or damaged here"),
        "{out}"
    );
    // `tally export` says so too, and exits 2.
    let out_file = dir.path().join("cli.jsonl");
    let out = std::process::Command::new(TALLY)
        .args(["export", "--database-url", &ledger.database_url])
        .args(["--tenant", "acme", "--output"])
        .arg(&out_file)
        .env("TALLY_LOG", "error")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// The resident anonymous memory (the heap) of process `pid`, in bytes:
/// what would grow with an export held in memory. File-backed pages, such
/// as SQLite's map of the database file, are not counted.
fn heap_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .expect("RssAnon in /proc/PID/status (Linux)");
    kib.trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// An export of 50,000 entries (76 MiB) grows the server's heap by a
/// fraction of its size while it streams (4 to 6 MiB measured): the server
/// holds a few pages of the log at a time, never the export. Held in
/// memory, the export grew it by more than 200 MiB.
async fn an_export_streams_in_the_memory_of_a_page(engine: Engine) {
    const ENTRIES: i64 = 50_000;
    const MIB: u64 = 1024 * 1024;
    let ledger = Ledger::new(engine.clone()).await;
    let key = ledger.key("acme", "post,read,audit").await;
    let server = ledger.server().await;
    let pad = "x".repeat(450);
    let payment = json!({"payment_id": "p", "account": "cust", "amount": "1", "unit": "USD",
                         "metadata": {"a": pad, "b": pad}});
    assert_eq!(
        server.post("/v1/payments", &key, &payment).await.status,
        201
    );
    // Copies of that entry written straight into the log (filling it through
    // the API would take most of the test's time); only the export reads
    // them, and it does not check the chain.
    let columns = "tenant_id, seq, id, kind, upstream_id, status, rejection_code, \
        rejection_message, account, debit_account, credit_account, amount, unit, params, \
        fingerprint, recorded_at, balance_after, prev_hash, hash";
    let copied = "e.tenant_id, n.i, e.id || '_' || n.i, e.kind, e.upstream_id || '_' || n.i, \
        e.status, e.rejection_code, e.rejection_message, e.account, e.debit_account, \
        e.credit_account, e.amount, e.unit, e.params, e.fingerprint, e.recorded_at, \
        e.balance_after, e.prev_hash, e.hash";
    let copies = match engine {
        Engine::Sqlite => format!(
            "WITH RECURSIVE n(i) AS (SELECT 2 UNION ALL SELECT i + 1 FROM n WHERE i < {ENTRIES}) \
             INSERT INTO entries ({columns}) SELECT {copied} FROM entries e, n WHERE e.seq = 1"
        ),
        Engine::Postgres { .. } => format!(
            "INSERT INTO entries ({columns}) SELECT {copied} \
             FROM entries e, generate_series(2, {ENTRIES}) AS n(i) WHERE e.seq = 1"
        ),
    };
    let head = format!("UPDATE ledger_heads SET seq = {ENTRIES} WHERE tenant_id = 'acme'");
    ledger.sql(&[&copies, &head]).await;

    // Ten pages first: what any export allocates once, and what the
    // allocator keeps of a page once freed, are in the baseline.
    let pages = export(&server, &key, "?to_seq=10000").await;
    assert_eq!(lines(&pages).len(), 10_002);
    drop(pages);
    let before = heap_bytes(server.pid());
    let mut response = server
        .client
        .get(format!("{}/v1/audit/export", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (mut received, mut newlines, mut peak) = (0u64, 0i64, before);
    while let Some(chunk) = response.chunk().await.unwrap() {
        received += chunk.len() as u64;
        newlines += chunk.iter().filter(|b| **b == b'\n').count() as i64;
        peak = peak.max(heap_bytes(server.pid()));
    }
    assert_eq!(
        newlines,
        ENTRIES + 2,
        "the header, every entry, the trailer"
    );
    assert!(received > 40 * MIB, "{received} bytes");
    let grew = peak.saturating_sub(before);
    eprintln!(
        "export of {} MiB: server heap {} MiB, peak +{:.1} MiB",
        received / MIB,
        before / MIB,
        grew as f64 / MIB as f64
    );
    assert!(
        grew < received / 3,
        "the server's heap grew by {grew} bytes while it exported {received}"
    );
}

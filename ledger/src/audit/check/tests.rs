//! The checker against damaged, reordered and re-signed exports.

#![allow(clippy::unwrap_used)]

use std::str::FromStr;

use chrono::{TimeZone, Utc};
use rust_decimal::Decimal;

use super::*;
use crate::audit::format::{write_json_record, EntryRecord, HeaderRecord, TrailerRecord};
use crate::audit::sign::Signer;
use crate::audit::FORMAT;
use crate::chain::{entry_hash, GENESIS_HASH};
use crate::entry::EntryStatus;
use crate::fingerprint::Fingerprint;
use crate::request::EntryKind;

const SEED: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

/// Entries 1..=n of usage debits over three accounts, chained and folded
/// as the writer would.
fn chain(n: i64) -> Vec<StoredEntry> {
    let mut fold = LogFold::new();
    let mut prev = GENESIS_HASH;
    let mut out = Vec::new();
    for seq in 1..=n {
        let account = format!("cust_{}", seq % 3);
        let amount = format!("{seq}.5");
        let params = format!(r#"{{"account":"{account}","amount":"{amount}","unit":"USD"}}"#);
        let mut e = StoredEntry {
            tenant_id: "acme".into(),
            seq,
            id: format!("ent_{seq}"),
            kind: EntryKind::UsageDebit,
            upstream_id: format!("ur_{seq}"),
            status: EntryStatus::Posted,
            rejection_code: None,
            rejection_message: None,
            account: account.clone(),
            debit_account: account.clone(),
            credit_account: "@revenue".into(),
            amount: Decimal::from_str(&amount).unwrap(),
            unit: "USD".into(),
            fingerprint: Fingerprint::of_canonical(&params).to_string(),
            params,
            recorded_at: Utc.timestamp_opt(1_764_410_400 + seq, 0).unwrap(),
            balance_after: crate::balance::WideDecimal::ZERO,
            prev_hash: hex::encode(prev),
            hash: String::new(),
        };
        fold.apply(&e).unwrap();
        e.balance_after = fold.balances.get(&account, "USD").unwrap().posted();
        prev = entry_hash(&prev, &e);
        e.hash = hex::encode(prev);
        out.push(e);
    }
    out
}

fn export(entries: &[StoredEntry], from: i64, to: i64, signer: Option<&Signer>) -> Vec<String> {
    let mut out = Vec::new();
    write_json_record(
        &mut out,
        &HeaderRecord {
            record: "header".into(),
            format: FORMAT.into(),
            tenant: "acme".into(),
            from_seq: from,
            to_seq: to,
            exported_at: "2026-12-01T00:00:00.000000Z".into(),
        },
    );
    let part: Vec<&StoredEntry> = entries
        .iter()
        .filter(|e| e.seq >= from && e.seq <= to)
        .collect();
    for e in &part {
        EntryRecord::of(e).write_json_line(&mut out);
    }
    let last_hash = part.last().map(|e| e.hash.clone()).unwrap_or_default();
    write_json_record(
        &mut out,
        &TrailerRecord {
            record: "trailer".into(),
            entries: part.len() as i64,
            last_seq: to,
            signature: signer.map(|s| s.sign("acme", to, &last_hash, Utc::now())),
            last_hash,
        },
    );
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn check(lines: &[String], options: CheckOptions) -> Result<Report, String> {
    check_jsonl(&lines.join("\n"), options).map_err(|p| p.to_string())
}

#[test]
fn an_untouched_export_verifies_and_folds() {
    let signer = Signer::from_seed_hex(SEED).unwrap();
    let lines = export(&chain(20), 1, 20, Some(&signer));
    let key = parse_public_key_for_test(&signer);
    let report = check(
        &lines,
        CheckOptions {
            head: Some(NotedHead::parse(&format!("7:{}", chain(20)[6].hash)).unwrap()),
            public_key: Some(key),
        },
    )
    .unwrap();
    assert_eq!(report.entries, 20);
    assert_eq!((report.from_seq, report.to_seq), (1, 20));
    assert_eq!(report.balances, Some(4));
    assert!(matches!(
        report.signature,
        SignatureStatus::Valid {
            matches_given: true,
            ..
        }
    ));
}

fn parse_public_key_for_test(signer: &Signer) -> [u8; 32] {
    crate::audit::sign::parse_public_key(&signer.public_key_hex()).unwrap()
}

#[test]
fn a_partial_export_verifies_from_its_first_prev_hash() {
    let entries = chain(20);
    let lines = export(&entries, 8, 15, None);
    let report = check(&lines, CheckOptions::default()).unwrap();
    assert_eq!(report.entries, 8);
    assert_eq!(report.anchor_hash, entries[6].hash);
    assert_eq!(report.balances, None);
    let noted = NotedHead::parse(&format!("7:{}", entries[6].hash)).unwrap();
    check(
        &lines,
        CheckOptions {
            head: Some(noted),
            public_key: None,
        },
    )
    .unwrap();
    let empty = export(&entries, 21, 20, None);
    let mut empty = empty;
    empty[1] = empty[1].replace(
        "\"last_hash\":\"\"",
        &format!("\"last_hash\":\"{}\"", entries[19].hash),
    );
    assert_eq!(check(&empty, CheckOptions::default()).unwrap().entries, 0);
}

#[test]
fn each_kind_of_tampering_is_named() {
    let lines = export(&chain(20), 1, 20, None);
    // Line n + 1 holds seq n.
    let mut changed = lines.clone();
    changed[17] = changed[17].replace("\"amount\":\"17.5\"", "\"amount\":\"1700.5\"");
    let e = check(&changed, CheckOptions::default()).unwrap_err();
    assert!(e.starts_with("line 18 (seq 17): amount changed?"), "{e}");

    let mut deleted = lines.clone();
    deleted.remove(5);
    let e = check(&deleted, CheckOptions::default()).unwrap_err();
    assert!(e.starts_with("seq 5 missing between lines 5 and 6"), "{e}");

    let mut swapped = lines.clone();
    swapped.swap(8, 9);
    let e = check(&swapped, CheckOptions::default()).unwrap_err();
    assert!(
        e.contains("lines 9 and 10 swapped: seq 8 follows seq 9"),
        "{e}"
    );

    let mut twice = lines.clone();
    twice.insert(4, lines[4].clone());
    let e = check(&twice, CheckOptions::default()).unwrap_err();
    assert!(e.contains("seq 4 appears twice"), "{e}");

    let truncated = &lines[..15];
    let e = check(truncated, CheckOptions::default()).unwrap_err();
    assert!(
        e.starts_with("trailer missing: the file is truncated"),
        "{e}"
    );

    let mut cut = lines.clone();
    cut[20].truncate(40);
    cut.truncate(21);
    let e = check(&cut, CheckOptions::default()).unwrap_err();
    assert!(e.contains("truncated or damaged"), "{e}");

    let mut params = lines.clone();
    params[3] = params[3].replace("\\\"amount\\\":\\\"3.5\\\"", "\\\"amount\\\":\\\"3.6\\\"");
    assert_ne!(params[3], lines[3]);
    let e = check(&params, CheckOptions::default()).unwrap_err();
    assert!(e.starts_with("line 4 (seq 3): params changed?"), "{e}");

    let e = check(&lines[1..], CheckOptions::default()).unwrap_err();
    assert!(e.starts_with("line 1: header missing"), "{e}");
}

#[test]
fn a_rehashed_chain_passes_the_links_but_not_the_signature_or_the_noted_head() {
    let signer = Signer::from_seed_hex(SEED).unwrap();
    let original = chain(12);
    let lines = export(&original, 1, 12, Some(&signer));
    let noted = NotedHead::parse(&format!("12:{}", original[11].hash)).unwrap();
    // Rewrite seq 4's amount and re-chain everything after it.
    let mut forged = original.clone();
    let mut fold = LogFold::new();
    let mut prev = GENESIS_HASH;
    for e in &mut forged {
        if e.seq == 4 {
            e.amount = Decimal::from_str("0.01").unwrap();
            e.params = e.params.replace("\"4.5\"", "\"0.01\"");
            e.fingerprint = Fingerprint::of_canonical(&e.params).to_string();
        }
        fold.apply(e).unwrap();
        e.balance_after = fold.balances.get(&e.account, "USD").unwrap().posted();
        e.prev_hash = hex::encode(prev);
        prev = entry_hash(&prev, e);
        e.hash = hex::encode(prev);
    }
    let mut tampered = export(&forged, 1, 12, None);
    let trailer: TrailerRecord = serde_json::from_str(&lines[13]).unwrap();
    let mut forged_trailer: TrailerRecord = serde_json::from_str(&tampered[13]).unwrap();
    forged_trailer.signature = trailer.signature.clone();
    tampered[13] = serde_json::to_string(&forged_trailer).unwrap();

    let e = check(&tampered, CheckOptions::default()).unwrap_err();
    assert!(e.starts_with("line 14: signature does not match"), "{e}");
    assert!(e.contains("re-hashed"), "{e}");
    let e = check(
        &tampered,
        CheckOptions {
            head: Some(noted),
            public_key: None,
        },
    )
    .unwrap_err();
    assert!(
        e.starts_with("line 13 (seq 12): the hash differs from the head you noted"),
        "{e}"
    );

    // Re-signed with another key: valid on its own, refused against the given key.
    let other = Signer::generate().unwrap();
    forged_trailer.signature = Some(other.sign("acme", 12, &forged[11].hash, Utc::now()));
    tampered[13] = serde_json::to_string(&forged_trailer).unwrap();
    check(&tampered, CheckOptions::default()).unwrap();
    let e = check(
        &tampered,
        CheckOptions {
            head: None,
            public_key: Some(parse_public_key_for_test(&signer)),
        },
    )
    .unwrap_err();
    assert!(e.contains("signed by another key"), "{e}");
}

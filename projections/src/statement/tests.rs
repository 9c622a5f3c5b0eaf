//! Tests of statements and balances at a time.
#![allow(clippy::unwrap_used)]

use std::str::FromStr;

use super::*;
use rust_decimal::Decimal;
use tally_ledger::entry::{EntryStatus, StoredEntry};
use tally_ledger::fold::LogFold;
use tally_ledger::request::EntryKind;
use tally_ledger::store::Storage;

fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

fn entry(
    seq: i64,
    kind: EntryKind,
    upstream_id: &str,
    (account, debit, credit): (&str, &str, &str),
    amount: &str,
    params: &str,
) -> StoredEntry {
    StoredEntry {
        tenant_id: "t".into(),
        seq,
        id: format!("ent_{seq}"),
        kind,
        upstream_id: upstream_id.into(),
        status: EntryStatus::Posted,
        rejection_code: None,
        rejection_message: None,
        account: account.into(),
        debit_account: debit.into(),
        credit_account: credit.into(),
        amount: d(amount),
        unit: "USD".into(),
        params: params.into(),
        fingerprint: String::new(),
        recorded_at: DateTime::from_timestamp(1_764_410_400 + seq, 0).unwrap(),
        balance_after: tally_ledger::balance::WideDecimal::ZERO,
        prev_hash: String::new(),
        hash: String::new(),
    }
}

/// A log touching `cust` and `@revenue`: payments, debits, holds
/// captured and released, a rejected debit and a reversal.
fn log() -> Vec<StoredEntry> {
    use EntryKind::*;
    let c = "cust";
    let mut rejected = entry(5, UsageDebit, "u2", (c, c, "@revenue"), "500", "{}");
    rejected.status = EntryStatus::Rejected;
    rejected.rejection_code = Some("insufficient_funds".into());
    vec![
        entry(1, AccountSettings, "cust#1", (c, c, c), "0", "{}"),
        entry(2, Payment, "p1", (c, "@payments", c), "100", "{}"),
        entry(3, UsageDebit, "u1", (c, c, "@revenue"), "7.5", "{}"),
        entry(4, Hold, "h1", (c, c, "@holds"), "20", "{}"),
        rejected,
        entry(
            6,
            HoldCapture,
            "cap1",
            (c, c, "@revenue"),
            "12",
            r#"{"hold_id":"h1"}"#,
        ),
        entry(7, Hold, "h2", (c, c, "@holds"), "3", "{}"),
        entry(
            8,
            Reversal,
            "r1",
            (c, "@revenue", c),
            "7.5",
            r#"{"entry_id":"ent_3"}"#,
        ),
        entry(9, Hold, "h3", (c, c, "@holds"), "4", "{}"),
        entry(
            10,
            HoldRelease,
            "rel2",
            (c, c, "@holds"),
            "3",
            r#"{"hold_id":"h2"}"#,
        ),
        entry(11, UsageDebit, "u3", (c, c, "@revenue"), "1.25", "{}"),
    ]
}

fn fold(account: &str, entries: &[&StoredEntry], all: &[StoredEntry]) -> AccountFold {
    let mut f = AccountFold::new(account, "USD");
    let page: Vec<StoredEntry> = entries.iter().map(|e| (*e).clone()).collect();
    let mut outside = HashMap::new();
    for id in f.holds_outside(&page).unwrap() {
        let h = all.iter().find(|e| e.upstream_id == id).unwrap();
        outside.insert(id, h.amount);
    }
    for e in &page {
        f.apply(e, &outside).unwrap();
    }
    f
}

#[test]
fn a_seq_prefix_folds_as_the_log_fold_does() {
    let all = log();
    for n in 0..=all.len() {
        let mut log_fold = LogFold::new();
        for e in &all[..n] {
            log_fold.apply(e).unwrap();
        }
        let prefix: Vec<&StoredEntry> = all[..n].iter().collect();
        // @revenue's fold sees captures without their holds.
        for account in ["cust", "@revenue"] {
            let mine: Vec<&StoredEntry> = prefix
                .iter()
                .copied()
                .filter(|e| e.debit_account == account || e.credit_account == account)
                .collect();
            let f = fold(account, &mine, &all);
            let want = log_fold
                .balances
                .get(account, "USD")
                .cloned()
                .unwrap_or_default();
            assert_eq!(f.balance(), want, "{account} after {n} entries");
        }
    }
}

#[test]
fn any_split_adds_up_even_when_time_is_not_seq_order() {
    let all = log();
    let total = fold("cust", &all.iter().collect::<Vec<_>>(), &all).balance();
    assert_eq!(total.posted().to_string(), "86.75");
    assert_eq!(total.held.to_string(), "4");
    // Every subset (by a bit mask over the entries) and its complement:
    // what a recorded_at boundary may cut when clocks are skewed.
    for mask in 0u32..(1 << all.len()) {
        let (a, b): (Vec<&StoredEntry>, Vec<&StoredEntry>) =
            all.iter().partition(|e| mask & (1 << (e.seq - 1)) != 0);
        let (fa, fb) = (fold("cust", &a, &all), fold("cust", &b, &all));
        assert!(
            adds_up(&fa.balance(), &fb.balance(), &total),
            "mask {mask:b}"
        );
        assert_eq!(fa.entries + fb.entries, all.len());
    }
}

#[tokio::test]
async fn a_period_with_too_many_entries_is_refused() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    for i in 0..3 {
        let body = serde_json::json!({
            "usage_record_id": format!("u{i}"), "account": "cust", "amount": "1", "unit": "USD"
        });
        let request =
            tally_ledger::request::EntryRequest::usage_debit(body.as_object().unwrap().clone())
                .unwrap();
        tally_ledger::group::commit_group(&storage, "t", &[&request])
            .await
            .unwrap();
    }
    let now = Utc::now();
    let period = (now - TimeDelta::days(1), now);
    let read = |max| read_statement_limited(&storage, "t", "cust", None, period, now, max);
    let s = read(3).await.unwrap();
    assert_eq!(s.movements.entries, 3);
    assert_eq!(s.closing_balance.posted, "-3");
    match read(2).await {
        Err(LedgerError::Invalid(v)) => assert_eq!(v.errors[0].field, "to"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn microseconds_round_the_right_way() {
    let t = DateTime::parse_from_rfc3339("2026-01-01T00:00:00.0000015Z")
        .unwrap()
        .with_timezone(&Utc);
    assert_eq!(
        format_recorded_at(&ceil_micros(t)),
        "2026-01-01T00:00:00.000002Z"
    );
    assert_eq!(
        format_recorded_at(&floor_micros(t)),
        "2026-01-01T00:00:00.000001Z"
    );
    let whole = floor_micros(t);
    assert_eq!(ceil_micros(whole), whole);
}

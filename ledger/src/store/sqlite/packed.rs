//! Rows packed by SQLite as one JSON array (`json_group_array`), read
//! without handing rows over one at a time: a page of the log here, and
//! any packed array folded element by element ([`for_each_packed`], which
//! the read models use too).

use chrono::{DateTime, Utc};

use crate::entry::{EntryStatus, StoredEntry};
use crate::request::EntryKind;
use crate::store::rows::{parse_decimal, parse_total};
use crate::LedgerError;

/// One entry of a packed page: [`ENTRY_COLUMNS`] in order.
#[derive(serde::Deserialize)]
pub(super) struct PackedEntry(
    String,
    i64,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    String,
);

impl PackedEntry {
    pub(super) fn into_entry(self) -> Result<StoredEntry, LedgerError> {
        let PackedEntry(
            tenant_id,
            seq,
            id,
            kind,
            upstream_id,
            status,
            rejection_code,
            rejection_message,
            account,
            debit_account,
            credit_account,
            amount,
            unit,
            params,
            fingerprint,
            recorded_at,
            balance_after,
            prev_hash,
            hash,
        ) = self;
        Ok(StoredEntry {
            tenant_id,
            seq,
            id,
            kind: EntryKind::parse(&kind)
                .ok_or_else(|| LedgerError::Corrupt(format!("unknown kind {kind:?}")))?,
            upstream_id,
            status: EntryStatus::parse(&status)
                .ok_or_else(|| LedgerError::Corrupt(format!("unknown status {status:?}")))?,
            rejection_code,
            rejection_message,
            account,
            debit_account,
            credit_account,
            amount: parse_decimal(&amount, "amount")?,
            unit,
            params,
            fingerprint,
            recorded_at: DateTime::parse_from_rfc3339(&recorded_at)
                .map_err(|_| LedgerError::Corrupt(format!("recorded_at {recorded_at:?}")))?
                .with_timezone(&Utc),
            balance_after: parse_total(&balance_after, "balance_after")?,
            prev_hash,
            hash,
        })
    }
}

/// Calls `fold` with each element of a JSON array packed by SQLite
/// (`json_group_array`), as it is parsed: no vector of a whole window is
/// built first (its growth was a few percent of a rebuild's CPU). Returns
/// how many elements were folded; a fold error stops the parse and is
/// returned as it is, a malformed array is [`LedgerError::Corrupt`].
pub fn for_each_packed<'de, T, F>(packed: &'de str, what: &str, fold: F) -> Result<u64, LedgerError>
where
    T: serde::Deserialize<'de>,
    F: FnMut(T) -> Result<(), LedgerError>,
{
    use serde::de::{Deserializer, SeqAccess, Visitor};

    struct Each<T, F> {
        fold: F,
        failed: Option<LedgerError>,
        count: u64,
        item: std::marker::PhantomData<T>,
    }

    impl<'de, T, F> Visitor<'de> for &mut Each<T, F>
    where
        T: serde::Deserialize<'de>,
        F: FnMut(T) -> Result<(), LedgerError>,
    {
        type Value = ();

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an array")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while let Some(item) = seq.next_element::<T>()? {
                if let Err(e) = (self.fold)(item) {
                    self.failed = Some(e);
                    return Err(serde::de::Error::custom("fold failed"));
                }
                self.count += 1;
            }
            Ok(())
        }
    }

    let mut each = Each {
        fold,
        failed: None,
        count: 0,
        item: std::marker::PhantomData,
    };
    let mut de = serde_json::Deserializer::from_str(packed);
    let parsed = (&mut de).deserialize_seq(&mut each).and_then(|()| de.end());
    match (each.failed.take(), parsed) {
        (Some(e), _) => Err(e),
        (None, Err(e)) => Err(LedgerError::Corrupt(format!("{what}: {e}"))),
        (None, Ok(())) => Ok(each.count),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn packed_arrays_are_folded_element_by_element() {
        let mut seen = Vec::new();
        let n = for_each_packed(
            r#"[["a",1],["b\"q",2]]"#,
            "test",
            |(s, n): (String, i64)| {
                seen.push((s, n));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(n, 2);
        assert_eq!(seen, vec![("a".into(), 1), ("b\"q".into(), 2)]);
        assert_eq!(for_each_packed("[]", "test", |_: i64| Ok(())).unwrap(), 0);

        // A fold error comes back as it is, and stops the parse.
        let mut calls = 0;
        let err = for_each_packed("[1,2,3]", "test", |_: i64| {
            calls += 1;
            Err(LedgerError::Corrupt("second".into()))
        })
        .unwrap_err();
        assert!(matches!(err, LedgerError::Corrupt(m) if m == "second"));
        assert_eq!(calls, 1);

        // Malformed, the wrong shape, or trailing text: corrupt, named.
        for bad in ["[1,2", "{\"a\":1}", "[1] x", "[\"x\"]"] {
            let err = for_each_packed(bad, "postings", |_: i64| Ok(())).unwrap_err();
            assert!(
                matches!(&err, LedgerError::Corrupt(m) if m.starts_with("postings: ")),
                "{bad}: {err:?}"
            );
        }
    }
}

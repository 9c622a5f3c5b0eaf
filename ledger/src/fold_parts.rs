//! A fold of a whole log, split into seq ranges read on one connection
//! each and added afterwards: decimal addition is exact, so the split
//! cannot change the result.

use crate::balance::{BalanceProjection, PostingSums};
use crate::LedgerError;

/// The seq ranges a rebuild folds at once, one connection each
/// ([`rebuild_parts`] of them), adding the partial sums afterwards: decimal
/// addition is exact, so the split cannot change the result.
pub fn rebuild_ranges(head_seq: i64) -> Vec<(i64, i64)> {
    split_range(0, head_seq)
}

/// How many parts a rebuild reads at once, one connection each: one for
/// a small log, else as many as the machine has cores, within 2..=8.
pub fn rebuild_parts(small: bool) -> i64 {
    if small {
        return 1;
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 8) as i64
}

/// [`rebuild_ranges`] of the seqs in `(after, upto]`.
pub fn split_range(after: i64, upto: i64) -> Vec<(i64, i64)> {
    let head_seq = upto.saturating_sub(after).max(0);
    let parts = rebuild_parts(head_seq < 1_000);
    let step = (head_seq + parts - 1) / parts.max(1);
    (0..parts)
        .map(|i| (after + i * step, after + ((i + 1) * step).min(head_seq)))
        .filter(|(from, to)| from < to)
        .collect()
}

/// Adds the debits and credits summed over the whole log, part by part,
/// into `into` (whose debits and credits are still zero).
pub fn merge_postings(into: &mut BalanceProjection, parts: Vec<PostingSums>) {
    let mut sums = PostingSums::new();
    for part in parts {
        sums.merge(part);
    }
    sums.add_into(into);
}

/// Waits for the partial folds of a rebuild.
pub async fn join_folds<T>(
    tasks: Vec<tokio::task::JoinHandle<Result<T, LedgerError>>>,
) -> Result<Vec<T>, LedgerError> {
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(
            task.await
                .map_err(|e| LedgerError::Unavailable(format!("a rebuild fold stopped: {e}")))??,
        );
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn split_ranges_cover_the_seqs_once() {
        for (after, upto) in [
            (0, 10),
            (0, 1_000_003),
            (400_000, 1_000_003),
            (7, 7),
            (9, 3),
        ] {
            let ranges = split_range(after, upto);
            let mut next = after;
            for (from, to) in &ranges {
                assert_eq!(*from, next, "{after}..{upto}: {ranges:?}");
                assert!(from < to);
                next = *to;
            }
            assert_eq!(next, upto.max(after), "{after}..{upto}: {ranges:?}");
        }
        assert_eq!(split_range(0, 999), vec![(0, 999)]);
        assert!(split_range(0, 1_000).len() >= 2);
        assert!(split_range(400_000, 1_000_003).len() >= 2);
        assert_eq!(rebuild_ranges(1_000_003), split_range(0, 1_000_003));
    }
}

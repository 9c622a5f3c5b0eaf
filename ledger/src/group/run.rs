//! Runs one group: load its state, call the decision, build its write,
//! and teach the writer's memory what it leaves behind.

use std::time::Instant;

use crate::decide::{decide_group, Decision};
use crate::store::{new_entry_id, now_micros, GroupTransaction};
use crate::LedgerError;

use super::build::build_write;
use super::load::{load, Loaded};
use super::memory::WriterMemory;
use super::remember::remember;
use super::{Decided, Group};

/// Decides a group on `tx` (its head locked first): the decisions, and
/// what is to be written. `memory` then already holds what the group
/// leaves behind; if the write fails, the caller must make it forget.
pub(crate) async fn decide<T: GroupTransaction>(
    tx: &mut T,
    group: Group<'_>,
    final_now: &mut (dyn FnMut(usize, &Decision) + Send),
    memory: &mut WriterMemory,
) -> Result<Decided, LedgerError> {
    let t0 = Instant::now();
    let Loaded {
        fence,
        mut state,
        accounts,
        read_records,
        locked,
        keys_read,
    } = load(tx, &group, memory, t0).await?;
    let requests = group.requests;

    let t_load = t0.elapsed();
    let committed_seq = state.head.seq;
    let mut outcome = decide_group(&mut state, requests, now_micros(), new_entry_id);
    let t_decide = t0.elapsed();
    // A replay of an entry that an earlier transaction committed is final
    // whatever becomes of this one (entries are immutable, keys forever):
    // it need not wait for this group's insert and fsync.
    for (i, decision) in outcome.decisions.iter().enumerate() {
        if matches!(decision, Decision::Replayed(e) if e.seq <= committed_seq) {
            final_now(i, decision);
        }
    }
    let (write, end) = build_write(group.tenant, fence, &state, &mut outcome);
    tracing::debug!(
        requests = requests.len(),
        lock_ms = locked.as_secs_f64() * 1e3,
        keys_ms = (keys_read - locked).as_secs_f64() * 1e3,
        load_ms = (t_load - locked).as_secs_f64() * 1e3,
        decide_ms = (t_decide - t_load).as_secs_f64() * 1e3,
        "group decided"
    );
    remember(memory, end, &state, &accounts, read_records, &outcome);
    Ok(Decided {
        decisions: outcome.decisions,
        write,
        start: fence,
    })
}

//! Keys looked up before the writer: replays and conflicts answered there,
//! a key taken since its look-up replayed by the group.

use super::*;

/// A key found free before the writer and taken before its group: the
/// UNIQUE constraint refuses the second entry, and the retry, looking
/// the key up under the lock, answers a replay.
#[tokio::test]
async fn a_key_taken_after_the_look_up_is_replayed_not_posted_twice() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    let first = debit("u1", "1");
    crate::group::commit_group(&storage, "t", &[&first])
        .await
        .unwrap();

    let again = debit("u1", "1");
    let mut memory = WriterMemory::default();
    let stale = crate::group::commit_group_with(
        &storage,
        Group::looked_up("t", &[&again], &[true]),
        &mut |_, _| {},
        &mut memory,
    )
    .await;
    assert!(
        matches!(&stale, Err(LedgerError::Database(e)) if is_unique_violation(e)),
        "{stale:?}"
    );
    assert_eq!(entries(&storage).await, 1);

    let decisions = commit_with_retry(
        &RoundCommitter::start(storage.clone(), 1, Arc::default()),
        Group::looked_up("t", &[&again], &[true]),
        &mut |_, _| {},
        &mut memory,
    )
    .await
    .unwrap()
    .decisions;
    assert!(
        matches!(&decisions[..], [Decision::Replayed(e)] if e.seq == 1),
        "{decisions:?}"
    );
    assert_eq!(entries(&storage).await, 1);
}

/// Runs the look-up task over `requests` until they are all handled:
/// their answers, what reached the writer, and how many were answered
/// before it.
async fn look_up_alone(
    storage: &Storage,
    requests: Vec<Vec<EntryRequest>>,
) -> (Vec<Option<Vec<Decision>>>, Vec<Job>, u64) {
    let (to_look_up, queue) = mpsc::unbounded_channel();
    let (to_writer, mut writer_queue) = mpsc::unbounded_channel();
    let stage = Stage {
        pending: Arc::new(AtomicUsize::new(requests.iter().map(Vec::len).sum())),
        config: WriterConfig::default(),
        stats: Arc::default(),
        key_taken: KeyTaken::default(),
        commits: RoundCommitter::start(storage.clone(), 1, Arc::default()),
        budget: Arc::default(),
        heads: Default::default(),
    };
    let stats = stage.stats.clone();
    let mut answers = Vec::new();
    for batch in requests {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            requests: batch,
            absent: Vec::new(),
            reply,
        };
        to_look_up.send(job).unwrap();
        answers.push(answer);
    }
    drop(to_look_up);
    look_up(
        storage.clone(),
        "t".to_owned(),
        queue,
        to_writer,
        stage,
        Weak::new(),
    )
    .await;
    let mut forwarded = Vec::new();
    while let Some(job) = writer_queue.recv().await {
        forwarded.push(job);
    }
    let mut answered = Vec::new();
    for mut answer in answers {
        answered.push(answer.try_recv().ok().map(Result::unwrap));
    }
    let before = stats.answered_before_group.load(Ordering::Relaxed);
    (answered, forwarded, before)
}

/// Replays and conflicts of committed entries are answered before the
/// writer; a request mixing them with a new key goes to the writer
/// with only the free key marked.
#[tokio::test]
async fn committed_keys_are_answered_before_the_writer() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    crate::group::commit_group(&storage, "t", &[&debit("u1", "1")])
        .await
        .unwrap();
    let requests = || {
        vec![
            vec![debit("u1", "1")],
            vec![debit("u1", "2")],
            vec![debit("u1", "1"), debit("u2", "1")],
        ]
    };

    let (answered, forwarded, before) = look_up_alone(&storage, requests()).await;
    assert!(
        matches!(answered[0].as_deref(), Some([Decision::Replayed(_)])),
        "{answered:?}"
    );
    assert!(
        matches!(answered[1].as_deref(), Some([Decision::Conflict { .. }])),
        "{answered:?}"
    );
    assert!(
        answered[2].is_none(),
        "the mixed request waits for the writer"
    );
    assert_eq!(forwarded.len(), 1);
    assert_eq!(forwarded[0].absent, vec![false, true]);
    assert_eq!(before, 2);
}

/// Through the writers, sequential requests get the same answers
/// whichever path they take.
#[tokio::test]
async fn replays_and_conflicts_through_the_writers() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    let writers = Writers::new(storage.clone(), nothing_recent());
    writers.decide("t", debit("u1", "1")).await.unwrap();
    let replay = writers.decide("t", debit("u1", "1")).await.unwrap();
    assert!(matches!(replay, Decision::Replayed(_)), "{replay:?}");
    let conflict = writers.decide("t", debit("u1", "2")).await.unwrap();
    assert!(
        matches!(conflict, Decision::Conflict { .. }),
        "{conflict:?}"
    );
    replay_of_u1_and_new_u2(&writers).await;
    let stats = writers.stats();
    assert_eq!(
        stats.requests.load(Ordering::Relaxed) as u64
            + stats.answered_before_group.load(Ordering::Relaxed),
        5
    );
    // A request of replays and conflicts opens no transaction, even
    // with the writer idle: only the two requests with a new key did.
    assert_eq!(stats.groups.load(Ordering::Relaxed), 2);
    assert_eq!(stats.answered_before_group.load(Ordering::Relaxed), 2);
    assert_eq!(entries(&storage).await, 2);
}

/// Jobs queued one after another reach the writer in that order even
/// while their look-ups run beside each other (PostgreSQL runs several):
/// of two requests with one key and other amounts, the first queued is the
/// entry and the second the conflict, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_reach_the_writer_in_the_order_they_were_queued() {
    for db in TestDb::every_engine(16).await {
        let writers = Writers::new(db.storage.clone(), nothing_recent());
        for round in 0..10 {
            let mut queued = Vec::new();
            for i in 0..60 {
                let id = format!("r{round}-k{}", i / 2);
                let amount = if i % 2 == 0 { "1" } else { "2" };
                queued.push(writers.queue_all("t", vec![debit(&id, amount)]).unwrap());
                // The look-up task takes this job before the next arrives.
                tokio::task::yield_now().await;
            }
            for (i, q) in queued.into_iter().enumerate() {
                let d = q.decisions().await.unwrap().pop().unwrap();
                if i % 2 == 0 {
                    assert!(
                        matches!(d, Decision::Created(_)),
                        "{}: job {i}: {d:?}",
                        db.engine()
                    );
                } else {
                    assert!(
                        matches!(d, Decision::Conflict { .. }),
                        "{}: job {i}: {d:?}",
                        db.engine()
                    );
                }
            }
        }
    }
}

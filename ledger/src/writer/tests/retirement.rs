//! Idle writers retire; requests racing a retiring writer are answered.

use super::*;

/// A tenant's writer that has nothing to do stops, and takes what it
/// remembered with it; the tenant's next request starts a new one, which
/// finds the log as it was.
#[tokio::test]
async fn an_idle_writer_stops_and_the_next_request_starts_another() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    let writers = Writers::new(storage.clone(), idle_after(50));
    writers.decide("t", debit("u1", "1")).await.unwrap();
    assert_eq!(writers.queue_depth().tenants, 1);
    let stopped = || writers.stats().idle_writers_stopped.load(Ordering::Relaxed);
    let waited = Instant::now();
    while writers.queue_depth().tenants > 0 {
        assert!(
            waited.elapsed() < Duration::from_secs(5),
            "the idle writer never stopped"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(stopped(), 1);

    let replay = writers.decide("t", debit("u1", "1")).await.unwrap();
    assert!(
        matches!(replay, Decision::Replayed(ref e) if e.seq == 1),
        "{replay:?}"
    );
    let created = writers.decide("t", debit("u2", "1")).await.unwrap();
    assert!(
        matches!(created, Decision::Created(ref e) if e.seq == 2),
        "{created:?}"
    );
    assert_eq!(writers.queue_depth().tenants, 1);
    assert_eq!(entries(&storage).await, 2);
}

/// Requests arriving while their tenant's writer retires (it stops
/// after 1 ms without work, so it retires between most of them) are
/// every one answered, and each key is posted exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_racing_a_retiring_writer_are_all_answered() {
    let storage = Storage::connect_with("sqlite::memory:", 1).await.unwrap();
    let writers = Writers::new(storage.clone(), idle_after(1));
    let mut tasks = Vec::new();
    for client in 0..4 {
        let writers = writers.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..25u64 {
                let id = format!("c{client}-{n}");
                let created = writers.decide("t", debit(&id, "1")).await.unwrap();
                assert!(matches!(created, Decision::Created(_)), "{created:?}");
                let replay = writers.decide("t", debit(&id, "1")).await.unwrap();
                assert!(matches!(replay, Decision::Replayed(_)), "{replay:?}");
                tokio::time::sleep(Duration::from_micros(500 * (n % 5))).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let filter = EntryFilter {
        limit: 1_000,
        ..EntryFilter::default()
    };
    let posted = storage.list_entries("t", &filter).await.unwrap();
    assert_eq!(posted.len(), 100);
    let keys: HashSet<&str> = posted.iter().map(|e| e.upstream_id.as_str()).collect();
    assert_eq!(keys.len(), 100);
    assert!(
        writers.stats().idle_writers_stopped.load(Ordering::Relaxed) > 0,
        "no writer retired during the run: the race was not exercised"
    );
}

//! `tally ingest nats` against a real NATS JetStream server, on every
//! engine (docs/ingest.md): 12,000 messages carrying 10,000 distinct usage
//! records (2,000 duplicates) and 50 invalid ones, the consumer killed
//! with SIGKILL twice mid-stream. Exactly 10,000 entries, every message
//! acknowledged, exactly the invalid ones in the dead-letter subject, and
//! a letter stored just before a kill is not stored twice.
//!
//! Needs `TALLY_TEST_NATS_URL` (e.g. `nats://127.0.0.1:4222`); skipped
//! without it unless `TALLY_REQUIRE_NATS=1` (CI), which makes the skip a
//! failure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use common::metrics::scrape;
use common::{debit, Engine, Ledger, Server, TALLY};
use futures::StreamExt;
use serde_json::Value;
use tokio::process::{Child, Command};

engine_tests!(
    duplicates_and_kills_make_exactly_one_entry_per_record,
    the_server_runs_the_consumer_from_its_settings_file_and_counts_it,
    a_letter_stored_before_a_kill_is_stored_once,
);

fn nats_url() -> Option<String> {
    match std::env::var("TALLY_TEST_NATS_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("TALLY_REQUIRE_NATS").as_deref() != Ok("1"),
                "TALLY_REQUIRE_NATS=1 but TALLY_TEST_NATS_URL is not set"
            );
            eprintln!("skipped: set TALLY_TEST_NATS_URL to run the NATS tests");
            None
        }
    }
}

struct Names {
    stream: String,
    subject: String,
    dead_letter: String,
    durable: String,
}

/// A migrated ledger, and a stream of names of its own (`tag` tells the
/// tests apart on a shared NATS server) made on JetStream.
async fn ledger_and_stream(
    engine: Engine,
    url: &str,
    tag: &str,
) -> (Ledger, Names, jetstream::Context) {
    let ledger = Ledger::new(engine).await;
    // The database exists, migrated, before the consumers count its rows.
    let _ = ledger.key("acme", "read").await;
    let id = uuid::Uuid::now_v7().simple().to_string();
    let names = Names {
        stream: format!("TALLY_{}_{id}", tag.to_uppercase()),
        subject: format!("tally.{tag}.{id}.debits"),
        dead_letter: format!("tally.{tag}.{id}.dead"),
        durable: format!("{tag}_{id}"),
    };
    let js = jetstream::new(async_nats::connect(url).await.unwrap());
    js.create_stream(stream::Config {
        name: names.stream.clone(),
        subjects: vec![names.subject.clone()],
        ..Default::default()
    })
    .await
    .unwrap();
    (ledger, names, js)
}

fn consumer(ledger: &Ledger, url: &str, names: &Names) -> Child {
    Command::new(TALLY)
        .args(["ingest", "nats", "--nats-url", url])
        .args(["--stream", &names.stream, "--subject", &names.subject])
        .args([
            "--durable",
            &names.durable,
            "--tenant",
            "acme",
            "--batch",
            "100",
        ])
        .args(["--dead-letter-subject", &names.dead_letter])
        .args(["--database-url", &ledger.database_url])
        .env("TALLY_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

async fn wait_for_entries(ledger: &Ledger, at_least: i64, child: &mut Child) -> i64 {
    let started = Instant::now();
    loop {
        let n = ledger.count("entries").await;
        if n >= at_least {
            return n;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the consumer exited at {n}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "stuck at {n} entries"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn duplicates_and_kills_make_exactly_one_entry_per_record(engine: Engine) {
    let Some(url) = nats_url() else {
        return;
    };
    let (ledger, names, js) = ledger_and_stream(engine, &url, "test").await;

    // 10,000 records, every fifth sent twice (2,000 duplicates), and 50
    // invalid bodies among them.
    let mut invalid = Vec::new();
    let mut published = 0;
    for i in 0..10_000 {
        let body = debit(&format!("ur_{i}"), &format!("cust_{}", i % 25), "0.01").to_string();
        let copies = if i % 5 == 0 { 2 } else { 1 };
        for _ in 0..copies {
            js.publish(names.subject.clone(), body.clone().into())
                .await
                .unwrap();
            published += 1;
        }
        if i % 200 == 0 {
            let bad = if i % 400 == 0 {
                format!("{{\"usage_record_id\": \"bad_{i}\", \"account\": \"c\", \"amount\": \"-1\", \"unit\": \"USD\"}}")
            } else {
                format!("not json {i}")
            };
            js.publish(names.subject.clone(), bad.clone().into())
                .await
                .unwrap();
            invalid.push(bad);
            published += 1;
        }
    }
    assert_eq!((published, invalid.len()), (12_050, 50));

    let mut first = consumer(&ledger, &url, &names);
    let n = wait_for_entries(&ledger, 2_000, &mut first).await;
    first.start_kill().unwrap();
    first.wait().await.unwrap();
    let mut second = consumer(&ledger, &url, &names);
    let m = wait_for_entries(&ledger, 5_000, &mut second).await;
    second.start_kill().unwrap();
    second.wait().await.unwrap();
    assert!(n < 10_000 && m < 10_000, "killed after the end: {n}, {m}");

    let mut third = consumer(&ledger, &url, &names);
    let started = Instant::now();
    let mut stream_handle = js.get_stream(&names.stream).await.unwrap();
    loop {
        let entries = ledger.count("entries").await;
        let mut c: jetstream::consumer::PullConsumer =
            stream_handle.get_consumer(&names.durable).await.unwrap();
        let info = c.info().await.unwrap().clone();
        if entries == 10_000 && info.num_pending == 0 && info.num_ack_pending == 0 {
            break;
        }
        assert!(third.try_wait().unwrap().is_none(), "the consumer exited");
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{entries} entries, {} pending, {} unacknowledged",
            info.num_pending,
            info.num_ack_pending
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stream_handle.info().await.unwrap();
    third.start_kill().unwrap();
    third.wait().await.unwrap();
    assert_eq!(ledger.count("entries").await, 10_000);

    // The dead letters: exactly the invalid bodies, each once.
    let dead = js
        .get_stream(format!("{}_DEAD_LETTER", names.stream))
        .await
        .unwrap();
    let letters: jetstream::consumer::PullConsumer = dead
        .create_consumer(jetstream::consumer::pull::Config::default())
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut batch = letters
        .fetch()
        .max_messages(1_000)
        .messages()
        .await
        .unwrap();
    while let Some(m) = batch.next().await {
        let m = m.unwrap();
        let letter: Value = serde_json::from_slice(&m.payload).unwrap();
        got.push(letter["body"].as_str().unwrap().to_owned());
    }
    got.sort();
    invalid.sort();
    assert_eq!(got, invalid);

    let (ok, out, err) = ledger.tally(&["verify"]).await;
    assert!(ok, "tally verify: {out} {err}");
    js.delete_stream(&names.stream).await.unwrap();
    js.delete_stream(format!("{}_DEAD_LETTER", names.stream))
        .await
        .unwrap();
}

/// `tally serve --ingest-nats`, every setting from the TOML file of
/// `tally serve`: the consumer runs inside the server and `GET /metrics`
/// counts what it did.
async fn the_server_runs_the_consumer_from_its_settings_file_and_counts_it(engine: Engine) {
    let Some(url) = nats_url() else {
        return;
    };
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "read").await;
    let id = uuid::Uuid::now_v7().simple().to_string();
    let (stream_name, subject) = (format!("TALLY_SERVE_{id}"), format!("tally.serve.{id}"));
    let client = async_nats::connect(&url).await.unwrap();
    let js = jetstream::new(client);
    js.create_stream(stream::Config {
        name: stream_name.clone(),
        subjects: vec![subject.clone()],
        ..Default::default()
    })
    .await
    .unwrap();
    for i in 0..20 {
        let body = debit(&format!("s_{}", i % 15), "cust_s", "1").to_string();
        js.publish(subject.clone(), body.into()).await.unwrap();
    }
    js.publish(subject.clone(), "{\"operations\": []}".into())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tally.toml");
    std::fs::write(
        &config,
        format!(
            "ingest_nats = true\ningest_nats_url = \"{url}\"\ningest_nats_stream = \"{stream_name}\"\n\
             ingest_nats_subject = \"{subject}\"\ningest_nats_durable = \"serve_{id}\"\n\
             ingest_nats_tenant = \"acme\"\ningest_nats_dead_letter_subject = \"tally.serve.{id}.dead\"\n"
        ),
    )
    .unwrap();
    let server = Server::start(
        &ledger.database_url,
        &["--config", config.to_str().unwrap()],
    )
    .await;
    let started = Instant::now();
    loop {
        let m = scrape(&server).await;
        let consumed = m
            .value("tally_ingest_nats_consumed_total", &[])
            .unwrap_or(0.0);
        if consumed >= 21.0 && m.value("tally_ingest_nats_dead_lettered_total", &[]) == Some(1.0) {
            assert_eq!(m.get("tally_ingest_nats_committed_total", &[]), 15.0);
            assert_eq!(m.get("tally_ingest_nats_replayed_total", &[]), 5.0);
            assert_eq!(m.get("tally_ingest_nats_lag_messages", &[]), 0.0);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "consumed {consumed}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(server.all_entries(&key).await.len(), 15);
    drop(server);
    js.delete_stream(&stream_name).await.unwrap();
    js.delete_stream(format!("{stream_name}_DEAD_LETTER"))
        .await
        .unwrap();
}

/// The state a consumer killed between storing a dead letter and
/// terminating its message leaves: the letter is in the dead-letter stream
/// and the message is still to be delivered. The next consumer refuses it
/// again and terminates it, and the stream still holds one letter, because
/// both carry the message id `<stream>:<durable>:<stream_sequence>`.
async fn a_letter_stored_before_a_kill_is_stored_once(engine: Engine) {
    let Some(url) = nats_url() else {
        return;
    };
    let (ledger, names, js) = ledger_and_stream(engine, &url, "letter").await;
    // A stream of the user's own for the letters, at NATS's defaults.
    let dead_stream = format!("{}_DEAD_LETTER", names.stream);
    js.create_stream(stream::Config {
        name: dead_stream.clone(),
        subjects: vec![names.dead_letter.clone()],
        ..Default::default()
    })
    .await
    .unwrap();
    let bad = js
        .publish(names.subject.clone(), "not json".into())
        .await
        .unwrap()
        .await
        .unwrap();
    js.publish(
        names.subject.clone(),
        debit("ur_after", "cust", "1").to_string().into(),
    )
    .await
    .unwrap();
    // What the killed consumer stored.
    js.send_publish(
        names.dead_letter.clone(),
        jetstream::message::PublishMessage::build()
            .message_id(format!(
                "{}:{}:{}",
                names.stream, names.durable, bad.sequence
            ))
            .payload("{\"body\": \"not json\"}".into()),
    )
    .await
    .unwrap()
    .await
    .unwrap();

    let mut next = consumer(&ledger, &url, &names);
    let started = Instant::now();
    let source = js.get_stream(&names.stream).await.unwrap();
    loop {
        let consumer: Result<jetstream::consumer::PullConsumer, _> =
            source.get_consumer(&names.durable).await;
        let settled = match consumer {
            Ok(mut c) => {
                let info = c.info().await.unwrap().clone();
                ledger.count("entries").await == 1
                    && info.num_pending == 0
                    && info.num_ack_pending == 0
            }
            // Not made yet.
            Err(_) => false,
        };
        if settled {
            break;
        }
        assert!(next.try_wait().unwrap().is_none(), "the consumer exited");
        assert!(started.elapsed() < Duration::from_secs(60), "not settled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    next.start_kill().unwrap();
    next.wait().await.unwrap();
    let mut dead = js.get_stream(&dead_stream).await.unwrap();
    assert_eq!(dead.info().await.unwrap().state.messages, 1);
    js.delete_stream(&names.stream).await.unwrap();
    js.delete_stream(&dead_stream).await.unwrap();
}

//! Operating tally: configuration (flags > env > file > defaults, bad files
//! refused before anything is opened), per-key rate limits, request
//! timeouts, the cap on requests in flight, and `/readyz` (up, database
//! gone, shutdown drain). Real `tally serve` processes, both engines where
//! the database matters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{debit, Engine, Ledger, Server, TALLY};
use serde_json::{json, Value};
use sqlx::Connection;
use tokio::process::Command;

engine_tests!(
    a_config_file_configures_the_server_and_env_and_flags_override_it,
    a_key_over_its_rate_limit_gets_429_and_other_keys_do_not,
    a_request_over_its_timeout_answers_503_and_its_retry_is_a_replay,
    requests_beyond_max_in_flight_are_shed_but_probes_are_not,
    readyz_is_503_while_the_database_is_unreachable,
    readyz_turns_503_first_when_shutdown_begins,
    a_deleted_key_stops_working_without_a_restart,
    keys_are_listed_and_revoked_from_the_command_line,
    every_instance_refuses_a_revoked_key_within_the_recheck_interval,
    no_answer_carries_cors_headers,
);

/// `tally serve` that is expected to stop by itself: (exit code, stdout, stderr).
/// The test's own `TALLY_…` environment is not passed on.
async fn serve_once(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut command = Command::new(TALLY);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("TALLY_") {
            command.env_remove(name);
        }
    }
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        command
            .arg("serve")
            .args(args)
            .envs(env.iter().copied())
            .env("TALLY_LOG", "warn")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("tally serve should stop by itself")
    .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(path: &Path, text: &str) -> String {
    std::fs::write(path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The line of `--check-config` output for `key`, spaces collapsed.
fn line_of(out: &str, key: &str) -> String {
    out.lines()
        .find(|l| l.starts_with(&format!("{key} = ")) || l.starts_with(&format!("# {key} ")))
        .unwrap_or_else(|| panic!("no line for {key} in\n{out}"))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `tally keys` command with a bad argument exits 2 before it opens the
/// database: an SQLite file named by `--database-url` is not even created.
#[tokio::test]
async fn keys_commands_with_bad_arguments_open_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.db");
    let url = format!("sqlite://{}", path.display());
    for args in [
        &["create", "--tenant", "bad tenant", "--scopes", "read"][..],
        &["create", "--tenant", "acme", "--scopes", "read,write"],
        &["list", "--tenant", ""],
        &["revoke", "--tenant", "acme", "--sha256", "abc"],
        &["revoke", "--tenant", "acme", "--sha256", "not-hex-digits"],
        &[
            "revoke",
            "--tenant",
            "bad tenant",
            "--sha256",
            "0123456789abcdef",
        ],
    ] {
        let out = Command::new(TALLY)
            .arg("keys")
            .args(args)
            .args(["--database-url", &url])
            .env("TALLY_LOG", "warn")
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(!path.exists(), "{args:?} created the database");
    }
}

#[tokio::test]
async fn check_config_shows_each_value_and_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        &dir.path().join("tally.toml"),
        r#"
# every key is a long flag name, with _ or -
database_url = "postgres://tally:hunter2@db.internal:5432/ledger"
listen = "0.0.0.0:9000"
max_group = 5
pool-size = 4
linger_ms = 7
rate_limit_per_second = 2.5
"#,
    );
    let (code, out, err) = serve_once(
        &["--config", &file, "--check-config", "--pool-size", "3"],
        &[("TALLY_MAX_GROUP", "77"), ("TALLY_POOL_SIZE", "2")],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let file_src = format!("# file {file}");
    // file > default
    assert_eq!(
        line_of(&out, "linger_ms"),
        format!("linger_ms = 7 {file_src}")
    );
    assert_eq!(
        line_of(&out, "listen"),
        format!("listen = \"0.0.0.0:9000\" {file_src}")
    );
    assert_eq!(
        line_of(&out, "rate_limit_per_second"),
        format!("rate_limit_per_second = 2.5 {file_src}")
    );
    // env > file
    assert_eq!(
        line_of(&out, "max_group"),
        "max_group = 77 # env TALLY_MAX_GROUP"
    );
    // flag > env > file
    assert_eq!(line_of(&out, "pool_size"), "pool_size = 3 # flag");
    // defaults, and an optional setting nobody set
    assert_eq!(
        line_of(&out, "request_timeout_ms"),
        "request_timeout_ms = 30000 # default"
    );
    assert_eq!(
        line_of(&out, "max_in_flight"),
        "max_in_flight = 1024 # default"
    );
    assert_eq!(
        line_of(&out, "signing_key_file"),
        "# signing_key_file # not set"
    );
    assert_eq!(
        line_of(&out, "config"),
        format!("config = \"{file}\" # flag")
    );
    // The password never leaves the process.
    assert!(!out.contains("hunter2"), "{out}");
    assert!(
        line_of(&out, "database_url").contains("tally:…@db.internal:5432/ledger"),
        "{out}"
    );

    // The file may be named by TALLY_CONFIG too.
    let (code, out, err) = serve_once(&["--check-config"], &[("TALLY_CONFIG", &file)]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        line_of(&out, "config"),
        format!("config = \"{file}\" # env TALLY_CONFIG")
    );
    assert_eq!(
        line_of(&out, "max_group"),
        format!("max_group = 5 {file_src}")
    );

    // Without a file: defaults (and nothing was created or bound).
    let (code, out, _) = serve_once(&["--check-config"], &[]).await;
    assert_eq!(code, Some(0));
    assert_eq!(line_of(&out, "max_group"), "max_group = 1000 # default");
    assert_eq!(line_of(&out, "config"), "# config # not set");
}

#[tokio::test]
async fn the_example_file_is_valid_and_its_defaults_are_the_real_ones() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/tally.example.toml");
    let (code, from_file, err) = serve_once(&["--config", example, "--check-config"], &[]).await;
    assert_eq!(code, Some(0), "{err}");
    let (code, defaults, err) = serve_once(&["--check-config"], &[]).await;
    assert_eq!(code, Some(0), "{err}");
    let text = std::fs::read_to_string(example).unwrap();
    let keys: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains(" = "))
        .map(|l| l.split(" = ").next().unwrap())
        .collect();
    assert!(keys.len() >= 13, "{keys:?}");
    for key in keys {
        let line = line_of(&from_file, key);
        assert!(line.ends_with(&format!("# file {example}")), "{line}");
        let value = line.split(" # ").next().unwrap();
        assert_eq!(
            line_of(&defaults, key),
            format!("{value} # default"),
            "the example's {key} is not the default"
        );
    }
}

#[tokio::test]
async fn every_setting_is_listed_by_help_with_its_env_var_and_default() {
    let out = Command::new(TALLY)
        .args(["serve", "--help"])
        .env_remove("TALLY_DATABASE_URL")
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for (flag, env, default) in [
        ("--config", "TALLY_CONFIG", None),
        (
            "--database-url",
            "TALLY_DATABASE_URL",
            Some("sqlite://tally.db"),
        ),
        ("--listen", "TALLY_LISTEN", Some("127.0.0.1:8080")),
        ("--max-group", "TALLY_MAX_GROUP", Some("1000")),
        ("--queue-capacity", "TALLY_QUEUE_CAPACITY", Some("10000")),
        ("--linger-ms", "TALLY_LINGER_MS", Some("0")),
        ("--writer-idle-ms", "TALLY_WRITER_IDLE_MS", Some("60000")),
        (
            "--skip-look-ups-after",
            "TALLY_SKIP_LOOK_UPS_AFTER",
            Some("1000"),
        ),
        (
            "--recent-entries-mib",
            "TALLY_RECENT_ENTRIES_MIB",
            Some("64"),
        ),
        ("--committers", "TALLY_COMMITTERS", None),
        ("--key-recheck-ms", "TALLY_KEY_RECHECK_MS", Some("10000")),
        ("--pool-size", "TALLY_POOL_SIZE", Some("16")),
        ("--hold-sweep-ms", "TALLY_HOLD_SWEEP_MS", Some("1000")),
        (
            "--usage-interval-ms",
            "TALLY_USAGE_INTERVAL_MS",
            Some("200"),
        ),
        (
            "--rate-limit-per-second",
            "TALLY_RATE_LIMIT_PER_SECOND",
            Some("0"),
        ),
        ("--rate-limit-burst", "TALLY_RATE_LIMIT_BURST", Some("100")),
        (
            "--request-timeout-ms",
            "TALLY_REQUEST_TIMEOUT_MS",
            Some("30000"),
        ),
        ("--max-in-flight", "TALLY_MAX_IN_FLIGHT", Some("1024")),
        ("--drain-ms", "TALLY_DRAIN_MS", Some("0")),
        (
            "--webhook-allow-insecure",
            "TALLY_WEBHOOK_ALLOW_INSECURE",
            Some("false"),
        ),
        (
            "--webhook-timeout-ms",
            "TALLY_WEBHOOK_TIMEOUT_MS",
            Some("10000"),
        ),
        (
            "--webhook-retry-base-ms",
            "TALLY_WEBHOOK_RETRY_BASE_MS",
            Some("5000"),
        ),
        (
            "--webhook-retry-max-ms",
            "TALLY_WEBHOOK_RETRY_MAX_MS",
            Some("3600000"),
        ),
        (
            "--webhook-max-age-s",
            "TALLY_WEBHOOK_MAX_AGE_S",
            Some("259200"),
        ),
    ] {
        assert!(help.contains(flag), "{flag} missing from\n{help}");
        assert!(
            help.contains(&format!("[env: {env}")),
            "{env} missing from\n{help}"
        );
        if let Some(default) = default {
            assert!(
                help.contains(&format!("[default: {default}]")),
                "default {default} of {flag} missing from\n{help}"
            );
        }
    }
}

#[tokio::test]
async fn a_bad_config_file_exits_2_naming_the_setting_before_opening_anything() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("never.db");
    let db_line = format!("database_url = \"sqlite://{}\"\n", db.display());
    let cases: &[(&str, &str, &[&str])] = &[
        ("range", "max_group = 0", &["max_group = 0", "1..=10000"]),
        (
            "range-dash",
            "queue-capacity = 2000000",
            &["queue-capacity = 2000000", "1..=1000000"],
        ),
        (
            "negative-rate",
            "rate_limit_per_second = -1",
            &["rate_limit_per_second = -1", "0..=1000000"],
        ),
        (
            "unknown",
            "max_groups = 5",
            &["unknown setting `max_groups`", "max_group"],
        ),
        (
            "type-int",
            "max_group = \"5\"",
            &["max_group = \"5\" must be an integer"],
        ),
        (
            "type-string",
            "listen = 8080",
            &["listen = 8080 must be a string"],
        ),
        (
            "table",
            "[limits]\nmax_group = 5",
            &["unknown setting `limits`"],
        ),
        (
            "twice",
            "max_group = 5\nmax-group = 6",
            &["are the same setting"],
        ),
        ("syntax", "max_group = ", &["not valid TOML"]),
        (
            "config-in-file",
            "config = \"other.toml\"",
            &["unknown setting `config`"],
        ),
    ];
    for (name, body, expected) in cases {
        let path = dir.path().join(format!("{name}.toml"));
        // The database line goes first, where it is a top-level key.
        let file = write(&path, &format!("{db_line}{body}\n"));
        let (code, out, err) = serve_once(&["--config", &file], &[]).await;
        assert_eq!(code, Some(2), "{name}: {out} {err}");
        assert!(
            err.contains(&format!("config file {file}")),
            "{name}: {err}"
        );
        for e in *expected {
            assert!(err.contains(e), "{name}: {e:?} not in {err}");
        }
        assert!(out.is_empty(), "{name}: nothing is served: {out}");
    }
    // A file that cannot be read.
    let missing = dir.path().join("missing.toml");
    let (code, _, err) = serve_once(&["--config", missing.to_str().unwrap()], &[]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("missing.toml") && err.contains("cannot read"),
        "{err}"
    );
    // A bad value is refused even where a flag overrides it: the file is
    // checked as a whole.
    let file = write(
        &dir.path().join("overridden.toml"),
        &format!("{db_line}max_group = 0\n"),
    );
    let (code, _, err) = serve_once(&["--config", &file, "--max-group", "5"], &[]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("max_group = 0"), "{err}");
    // Fail fast: the database was never opened (SQLite would create it).
    assert!(!db.exists(), "the database file was created");
}

/// A batch of ten fills a queue of ten while the writer lingers; the
/// status of one more request sent meanwhile (429 if the capacity is ten).
async fn late_request_status(server: &Arc<Server>, key: &str, tag: &str) -> u16 {
    let ops: Vec<Value> = (0..10)
        .map(|i| {
            let mut b = debit(&format!("{tag}-b{i}"), "cust", "1");
            b["type"] = json!("usage_debit");
            b
        })
        .collect();
    let batch = {
        let server = server.clone();
        let key = key.to_owned();
        tokio::spawn(async move {
            server
                .post("/v1/batch", &key, &json!({"operations": ops}))
                .await
        })
    };
    common::wait::until_queued(server, 10.0).await;
    let late = server
        .post(
            "/v1/usage-debits",
            key,
            &debit(&format!("{tag}-late"), "cust", "1"),
        )
        .await;
    assert_eq!(batch.await.unwrap().status, 200);
    if late.status == 429 {
        assert_eq!(late.code(), "rate_limited");
    } else {
        assert_eq!(late.status, 201, "{late:?}");
    }
    late.status
}

async fn a_config_file_configures_the_server_and_env_and_flags_override_it(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let dir = tempfile::tempdir().unwrap();
    // The database and the address come from the file alone.
    let file = write(
        &dir.path().join("tally.toml"),
        &format!(
            "database_url = \"{}\"\nlisten = \"127.0.0.1:0\"\nqueue-capacity = 10\nlinger_ms = 800\n",
            ledger.database_url
        ),
    );
    let server = Arc::new(Server::start_args(&["--config", &file], &[]).await);
    assert_eq!(late_request_status(&server, &key, "file").await, 429);
    drop(server);

    // env > file
    let server = Arc::new(
        Server::start_args(&["--config", &file], &[("TALLY_QUEUE_CAPACITY", "1000")]).await,
    );
    assert_eq!(late_request_status(&server, &key, "env").await, 201);
    drop(server);

    // flag > env > file
    let server = Arc::new(
        Server::start_args(
            &["--config", &file, "--queue-capacity", "10"],
            &[("TALLY_QUEUE_CAPACITY", "1000")],
        )
        .await,
    );
    assert_eq!(late_request_status(&server, &key, "flag").await, 429);
    assert_eq!(ledger.count("entries").await, 31);
}

/// Revoking a key is deleting its row: the running server stops taking
/// it once its cached copy is older than `--key-recheck-ms`, with no
/// restart, while the tenant's other keys keep working.
async fn a_deleted_key_stops_working_without_a_restart(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let revoked = ledger.key("acme", "post,read").await;
    let kept = ledger.key("acme", "post,read").await;
    let server = ledger.server_with(&["--key-recheck-ms", "200"]).await;
    for key in [&revoked, &kept] {
        assert_eq!(server.get("/v1/entries", key).await.status, 200);
    }
    let hash = tally_ledger::keys::hash_secret(&revoked);
    ledger
        .sql(&[&format!("DELETE FROM api_keys WHERE key_hash = '{hash}'")])
        .await;
    until_refused(&server, &revoked).await;
    assert_eq!(server.get("/v1/entries", &kept).await.status, 200);
    let r = server
        .post("/v1/usage-debits", &revoked, &debit("u1", "cust", "1"))
        .await;
    assert_eq!(r.status, 401, "{r:?}");
}

/// Waits until `server` answers 401 `unauthenticated` to `key`, which until
/// then must keep working; fails after 10 s.
async fn until_refused(server: &Server, key: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = server.get("/v1/entries", key).await;
        if r.status == 401 {
            assert_eq!(r.code(), "unauthenticated", "{r:?}");
            return;
        }
        assert_eq!(r.status, 200, "{r:?}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "the revoked key still works"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `tally keys …` against the ledger with `input` on standard input:
/// (exit code, stdout, stderr).
async fn keys_command(
    ledger: &Ledger,
    args: &[&str],
    input: &str,
) -> (Option<i32>, String, String) {
    use tokio::io::AsyncWriteExt;
    let mut child = Command::new(TALLY)
        .arg("keys")
        .args(args)
        .args(["--database-url", &ledger.database_url])
        .env("TALLY_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `tally keys list` shows every key by tenant, the first 16 hex digits of
/// its sha256, its scopes and its creation, never the key; `tally keys
/// revoke` deletes the one key of the tenant that its digits (or the key
/// itself, on standard input) name, and the running server refuses that
/// key from then on while the others keep working. Digits of another
/// tenant's key, or malformed ones, change nothing.
async fn keys_are_listed_and_revoked_from_the_command_line(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let first = ledger.key("acme", "post,read").await;
    let second = ledger.key("acme", "read").await;
    let other = ledger.key("globex", "post,read").await;
    let digits = |key: &str| tally_ledger::keys::hash_secret(key)[..16].to_owned();

    let (code, all, err) = keys_command(&ledger, &["list"], "").await;
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<Vec<&str>> = all.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines.len(), 3, "{all}");
    let expected = [
        ("acme", &first, "post,read"),
        ("acme", &second, "read"),
        ("globex", &other, "post,read"),
    ];
    for (line, (tenant, key, scopes)) in lines.iter().zip(expected) {
        assert_eq!(line[..3], [tenant, digits(key).as_str(), scopes], "{all}");
        assert!(
            line[3].len() == 27 && line[3].ends_with('Z'),
            "created_at as RFC 3339 UTC: {all}"
        );
        // The secret part of a key, after its `tally_` prefix.
        assert!(!all.contains(&key[6..]), "a key was printed: {all}");
    }
    let (code, acme, _) = keys_command(&ledger, &["list", "--tenant", "acme"], "").await;
    assert_eq!(code, Some(0));
    assert_eq!(acme.lines().count(), 2, "{acme}");
    assert!(!acme.contains("globex"), "{acme}");

    let server = ledger.server_with(&["--key-recheck-ms", "200"]).await;
    for key in [&first, &second, &other] {
        assert_eq!(server.get("/v1/entries", key).await.status, 200);
    }

    let ledger = &ledger;
    let revoke = |tenant: &'static str, hex: String| async move {
        keys_command(
            ledger,
            &["revoke", "--tenant", tenant, "--sha256", &hex],
            "",
        )
        .await
    };
    let (code, _, err) = revoke("acme", digits(&other)).await;
    assert_eq!(code, Some(1), "another tenant's key: {err}");
    assert!(err.contains("no key"), "{err}");
    let (code, _, err) = revoke("acme", "abc".into()).await;
    assert_eq!(code, Some(2), "too few digits: {err}");
    assert!(err.contains("hex digits"), "{err}");
    assert_eq!(ledger.count("api_keys").await, 3, "nothing revoked yet");

    // Ten digits, upper case, are enough to name the first key.
    let (code, out, err) = revoke("acme", digits(&first)[..10].to_uppercase()).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with(&format!("acme\t{}\tpost,read\t", digits(&first))),
        "{out}"
    );
    assert_eq!(ledger.count("api_keys").await, 2);
    until_refused(&server, &first).await;
    for key in [&second, &other] {
        assert_eq!(server.get("/v1/entries", key).await.status, 200);
    }
    let (code, _, _) = revoke("acme", digits(&first)).await;
    assert_eq!(code, Some(1), "already revoked");

    // The key itself on standard input, for the tenant it belongs to only.
    let by_key = ["revoke", "--tenant", "acme", "--key-stdin"];
    let (code, _, err) = keys_command(ledger, &by_key, &format!("{other}\n")).await;
    assert_eq!(code, Some(1), "{err}");
    let by_key = ["revoke", "--tenant", "globex", "--key-stdin"];
    let (code, out, err) = keys_command(ledger, &by_key, &format!("{other}\n")).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with(&format!("globex\t{}", digits(&other))),
        "{out}"
    );
    until_refused(&server, &other).await;
    assert_eq!(server.get("/v1/entries", &second).await.status, 200);
    let (_, left, _) = keys_command(ledger, &["list"], "").await;
    assert_eq!(left.lines().count(), 1, "{left}");
    assert!(
        left.starts_with(&format!("acme\t{}\tread\t", digits(&second))),
        "{left}"
    );
}

async fn a_key_over_its_rate_limit_gets_429_and_other_keys_do_not(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let a = ledger.key("acme", "post,read").await;
    let b = ledger.key("acme", "post,read").await;
    // One request every 5 s after a burst of 2.
    let server = ledger
        .server_with(&["--rate-limit-per-second", "0.2", "--rate-limit-burst", "2"])
        .await;
    assert_eq!(server.get("/v1/entries", &a).await.status, 200);
    assert_eq!(
        server
            .post("/v1/usage-debits", &a, &debit("u1", "cust", "1"))
            .await
            .status,
        201
    );
    let over = server
        .post("/v1/usage-debits", &a, &debit("u2", "cust", "1"))
        .await;
    assert_eq!(
        (over.status, over.code().as_str()),
        (429, "rate_limited"),
        "{over:?}"
    );
    let retry_after: u64 = over.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((4..=5).contains(&retry_after), "Retry-After {retry_after}");
    // Refused at the door: nothing written.
    assert_eq!(ledger.count("entries").await, 1);
    // Another key of the same tenant has its own bucket.
    assert_eq!(server.get("/v1/entries", &b).await.status, 200);
    assert_eq!(
        server
            .post("/v1/usage-debits", &b, &debit("u2", "cust", "1"))
            .await
            .status,
        201
    );
    // Unauthenticated requests are not counted against anyone.
    assert_eq!(server.get("/v1/entries", "tally_nope").await.status, 401);
    // Probes are never limited.
    assert_eq!(server.get("/healthz", &a).await.status, 200);
    drop(server);

    // The bucket refills: after Retry-After the key is served again.
    let server = ledger
        .server_with(&["--rate-limit-per-second", "2", "--rate-limit-burst", "1"])
        .await;
    assert_eq!(server.get("/v1/entries", &a).await.status, 200);
    let over = server.get("/v1/entries", &a).await;
    assert_eq!(over.status, 429, "{over:?}");
    assert_eq!(over.headers["retry-after"], "1");
    // The refill over time is the behaviour under test: wait the
    // Retry-After the server asked for.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(server.get("/v1/entries", &a).await.status, 200);
}

async fn a_request_over_its_timeout_answers_503_and_its_retry_is_a_replay(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    // The writer waits 1 s for company before committing: a real slow path.
    let slow = ledger
        .server_with(&["--request-timeout-ms", "200", "--linger-ms", "1000"])
        .await;
    // A read is unaffected by the writer's linger. The first reads of a
    // cold pool open its connections (on Citus, the coordinator's to each
    // worker too), which on a loaded machine can take longer than the
    // 200 ms budget itself; so the read is asked until the pool is warm.
    let mut read_statuses = Vec::new();
    for _ in 0..20 {
        let status = slow.get("/v1/entries", &key).await.status;
        read_statuses.push(status);
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "{read_statuses:?}");
    }
    assert_eq!(read_statuses.last(), Some(&200), "{read_statuses:?}");
    let started = Instant::now();
    let r = slow
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "1.50"))
        .await;
    let took = started.elapsed();
    assert_eq!((r.status, r.code().as_str()), (503, "unavailable"), "{r:?}");
    assert_eq!(r.headers["retry-after"], "1");
    assert!(
        r.json()["detail"]
            .as_str()
            .unwrap()
            .contains("same upstream ID"),
        "{r:?}"
    );
    assert!(took < Duration::from_millis(900), "answered after {took:?}");
    // The request was handed to the writer before the timeout: it commits.
    let deadline = Instant::now() + Duration::from_secs(15);
    while ledger.count("entries").await < 1 {
        assert!(
            Instant::now() < deadline,
            "the timed-out request never committed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The client's retry with the same upstream ID (here through another
    // process, as a load balancer would) is a replay, not a second entry.
    let other = ledger.server().await;
    let retry = other
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "1.50"))
        .await;
    assert_eq!(retry.status, 200, "{retry:?}");
    assert!(retry.replayed());
    assert_eq!(ledger.count("entries").await, 1);
    let (ok, out, _) = ledger.tally(&["verify"]).await;
    assert!(ok, "{out}");
}

async fn requests_beyond_max_in_flight_are_shed_but_probes_are_not(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = Arc::new(
        ledger
            .server_with(&["--max-in-flight", "1", "--linger-ms", "800"])
            .await,
    );
    // One slow request holds the only slot.
    let first = {
        let server = server.clone();
        let key = key.clone();
        tokio::spawn(async move {
            server
                .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
                .await
        })
    };
    common::wait::until_queued(&server, 1.0).await;
    let shed = server.get("/v1/entries", &key).await;
    assert_eq!(
        (shed.status, shed.code().as_str()),
        (503, "unavailable"),
        "{shed:?}"
    );
    assert_eq!(shed.headers["retry-after"], "1");
    let shed = server
        .post("/v1/usage-debits", &key, &debit("u2", "cust", "1"))
        .await;
    assert_eq!(shed.status, 503, "{shed:?}");
    // Probes still answer.
    assert_eq!(server.get("/healthz", "").await.status, 200);
    assert_eq!(server.get("/readyz", "").await.status, 200);
    assert_eq!(first.await.unwrap().status, 201);
    // The slot is free again; the shed request was never queued.
    assert_eq!(
        server
            .post("/v1/usage-debits", &key, &debit("u2", "cust", "1"))
            .await
            .status,
        201
    );
}

async fn readyz_status(server: &Server) -> (u16, Value) {
    let r = server.get("/readyz", "").await;
    let body = r.json();
    if r.status == 503 {
        assert_eq!(r.code(), "unavailable");
        assert_eq!(r.headers["retry-after"], "1");
    }
    (r.status, body)
}

/// Polls `/readyz` until it answers `status` (at most 20 s).
async fn wait_ready_status(server: &Server, status: u16) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (s, body) = readyz_status(server).await;
        if s == status {
            return body;
        }
        assert!(Instant::now() < deadline, "/readyz stayed {s}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Makes the ledger's database unreachable for the server until the
/// returned guard is given back to [`restore`].
enum Outage {
    /// PostgreSQL: the database refuses connections and its sessions were
    /// terminated.
    Postgres { admin_url: String, name: String },
    /// SQLite: the file was moved away (the server's open connections go
    /// on working on its inode; a fresh one finds nothing).
    Sqlite { path: String },
}

async fn cut(ledger: &Ledger) -> Outage {
    match &ledger.engine {
        Engine::Postgres { admin_url, .. } => {
            let name = ledger
                .database_url
                .rsplit('/')
                .next()
                .unwrap()
                .split('?')
                .next()
                .unwrap()
                .to_owned();
            let mut admin = sqlx::PgConnection::connect(admin_url).await.unwrap();
            sqlx::raw_sql(&format!(
                "ALTER DATABASE {name} ALLOW_CONNECTIONS false; \
                 SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}';"
            ))
            .execute(&mut admin)
            .await
            .unwrap();
            Outage::Postgres {
                admin_url: admin_url.clone(),
                name,
            }
        }
        Engine::Sqlite => {
            let path = ledger
                .database_url
                .strip_prefix("sqlite://")
                .unwrap()
                .to_owned();
            std::fs::rename(&path, format!("{path}.away")).unwrap();
            Outage::Sqlite { path }
        }
    }
}

async fn restore(outage: Outage) {
    match outage {
        Outage::Postgres { admin_url, name } => {
            let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
            sqlx::raw_sql(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
                .execute(&mut admin)
                .await
                .unwrap();
        }
        Outage::Sqlite { path } => {
            std::fs::rename(format!("{path}.away"), &path).unwrap();
        }
    }
}

async fn readyz_is_503_while_the_database_is_unreachable(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let server = ledger.server().await;
    let (status, body) = readyz_status(&server).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ready");
    // The latest migration of the engine. PostgreSQL has three more: the
    // partial index of its migration 6, which SQLite's rebuild has no use
    // for, the byte-order collation of its migration 7, SQLite's default,
    // and the amount check widened for intents (migration 11; SQLite has
    // no such check).
    let schema = if ledger.engine.is_postgres() { 12 } else { 9 };
    assert_eq!(body["schema_version"], schema);
    assert_eq!(server.get("/healthz", "").await.status, 200);

    let outage = cut(&ledger).await;
    let started = Instant::now();
    let body = wait_ready_status(&server, 503).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "noticed after {:?}",
        started.elapsed()
    );
    // The cause is logged, not shown to an unauthenticated caller.
    assert!(
        body["detail"].as_str().unwrap().contains("database"),
        "{body}"
    );

    restore(outage).await;
    let body = wait_ready_status(&server, 200).await;
    assert_eq!(body["status"], "ready");
    assert_eq!(server.get("/healthz", "").await.status, 200);

    // A schema behind the binary (the last migration not applied) is not
    // ready either.
    let last = format!("UPDATE _sqlx_migrations SET success = false WHERE version = {schema}");
    ledger.sql(&[&last]).await;
    let body = wait_ready_status(&server, 503).await;
    let behind = format!(
        "the schema is at migration {}; this tally needs {schema}",
        schema - 1
    );
    assert!(body["detail"].as_str().unwrap().contains(&behind), "{body}");
    let restored = format!("UPDATE _sqlx_migrations SET success = true WHERE version = {schema}");
    ledger.sql(&[&restored]).await;
    wait_ready_status(&server, 200).await;
}

async fn readyz_turns_503_first_when_shutdown_begins(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server_with(&["--drain-ms", "3000"]).await;
    assert_eq!(readyz_status(&server).await.0, 200);
    // A first write warms the pools: on a cold Citus coordinator of a
    // loaded machine it alone took seconds, which the drain below must not
    // be measuring.
    let r = server
        .post("/v1/usage-debits", &key, &debit("u0", "cust", "1"))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let signalled = Instant::now();
    let body = wait_ready_status(&server, 503).await;
    assert!(
        body["detail"].as_str().unwrap().contains("shutting down"),
        "{body}"
    );
    // While the load balancer drains, everything else is still served.
    assert_eq!(server.get("/healthz", "").await.status, 200);
    let r = server
        .post("/v1/usage-debits", &key, &debit("u1", "cust", "1"))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    assert!(signalled.elapsed() < Duration::from_secs(3));
    // Then the listener closes, in-flight requests finish, and it exits 0.
    assert_eq!(server.wait().await, Some(0));
    assert!(signalled.elapsed() >= Duration::from_secs(3));
    assert_eq!(ledger.count("entries").await, 2);
}

/// Without `--listen` (flag, environment or file) the server binds the
/// loopback interface only: nothing outside the host reaches it until the
/// operator says so.
#[tokio::test]
async fn by_default_the_server_listens_on_loopback_only() {
    let (code, out, err) = serve_once(&["--check-config"], &[]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        line_of(&out, "listen"),
        "listen = \"127.0.0.1:8080\" # default"
    );
}

/// A revoked key stops working on every instance sharing the database no
/// later than `--key-recheck-ms` after its row is deleted, although each
/// instance had just confirmed it.
async fn every_instance_refuses_a_revoked_key_within_the_recheck_interval(engine: Engine) {
    const RECHECK_MS: u64 = 1_500;
    let ledger = Ledger::new(engine).await;
    let revoked = ledger.key("acme", "read").await;
    let recheck = RECHECK_MS.to_string();
    let servers = [
        ledger.server_with(&["--key-recheck-ms", &recheck]).await,
        ledger.server_with(&["--key-recheck-ms", &recheck]).await,
    ];
    for server in &servers {
        assert_eq!(server.get("/v1/entries", &revoked).await.status, 200);
    }
    let hash = tally_ledger::keys::hash_secret(&revoked);
    ledger
        .sql(&[&format!("DELETE FROM api_keys WHERE key_hash = '{hash}'")])
        .await;
    let deleted = Instant::now();
    let mut refused_after = Vec::new();
    for server in &servers {
        until_refused(server, &revoked).await;
        refused_after.push(deleted.elapsed());
    }
    // Polling steps of 50 ms, and a loaded CI machine's scheduling, on top.
    let bound = Duration::from_millis(RECHECK_MS + 1_500);
    assert!(
        refused_after.iter().all(|t| *t <= bound),
        "refused after {refused_after:?}, more than {bound:?}"
    );
}

/// No answer, to a preflight or to a request that names an Origin, carries
/// an `Access-Control-*` header: a browser page of another origin cannot
/// send an authenticated request (its preflight is not allowed) nor read
/// an answer.
async fn no_answer_carries_cors_headers(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let origin = "https://attacker.example";
    let url = |path: &str| format!("{}{path}", server.base);
    let mut answers = Vec::new();
    for path in ["/v1/usage-debits", "/v1/entries", "/healthz", "/nowhere"] {
        answers.push(
            server
                .send(
                    server
                        .client
                        .request(reqwest::Method::OPTIONS, url(path))
                        .header("origin", origin)
                        .header("access-control-request-method", "POST")
                        .header(
                            "access-control-request-headers",
                            "authorization, content-type",
                        ),
                )
                .await,
        );
    }
    answers.push(
        server
            .send(
                server
                    .client
                    .get(url("/v1/entries"))
                    .bearer_auth(&key)
                    .header("origin", origin),
            )
            .await,
    );
    answers.push(
        server
            .send(
                server
                    .client
                    .post(url("/v1/usage-debits"))
                    .bearer_auth(&key)
                    .header("origin", origin)
                    .json(&debit("u1", "cust", "1")),
            )
            .await,
    );
    assert_eq!(answers[4].status, 200, "{:?}", answers[4]);
    assert_eq!(answers[5].status, 201, "{:?}", answers[5]);
    for preflight in &answers[..4] {
        assert!(
            preflight.status >= 400,
            "a preflight was answered: {preflight:?}"
        );
    }
    for r in &answers {
        let cors: Vec<_> = r
            .headers
            .keys()
            .filter(|h| h.as_str().starts_with("access-control-"))
            .collect();
        assert!(cors.is_empty(), "CORS headers {cors:?} in {r:?}");
    }
}

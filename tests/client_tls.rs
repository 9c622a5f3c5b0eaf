//! `tally-client` reaches an `https://` server through rustls: a certificate
//! generated at test time, a TLS front (tokio-rustls) before a real
//! `tally serve`, and a client that trusts that certificate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{Engine, Ledger};
use rust_decimal::Decimal;
use tally_client::{Client, ClientError, RetryPolicy, UsageDebit};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

engine_tests!(the_client_reaches_tally_over_https);

/// Terminates TLS on a local port and relays the plain bytes to `target`.
struct TlsFront {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl TlsFront {
    async fn start(target: SocketAddr, cert: CertificateDer<'static>, key: Vec<u8>) -> TlsFront {
        // ring, the provider reqwest's rustls uses (no aws-lc build); a local
        // test server needs no post-quantum key exchange.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
            )
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return; // e.g. a client that does not trust the certificate
                    };
                    let Ok(mut upstream) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
                });
            }
        });
        TlsFront { addr, accept }
    }
}

async fn the_client_reaches_tally_over_https(engine: Engine) {
    let ledger = Ledger::new(engine).await;
    let key = ledger.key("acme", "post,read").await;
    let server = ledger.server().await;
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    let pem = generated.cert.pem();
    let front = TlsFront::start(
        server.addr(),
        generated.cert.der().clone(),
        generated.key_pair.serialize_der(),
    )
    .await;
    let policy = RetryPolicy {
        max_attempts: 2,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(20),
        total_budget: Duration::from_secs(10),
        request_timeout: Duration::from_secs(10),
    };

    for base in [
        format!("https://127.0.0.1:{}", front.addr.port()),
        format!("https://localhost:{}", front.addr.port()),
    ] {
        let client = Client::builder(&base, &key)
            .policy(policy)
            .add_root_certificate(pem.as_bytes())
            .build()
            .unwrap();
        assert_eq!(client.healthz().await.unwrap().status, "ok", "{base}");
        let debit = UsageDebit::new("ur_tls", "cust", Decimal::ONE, "USD");
        let posted = client.post_usage_debit(&debit).await.unwrap();
        assert_eq!(posted.attempts, 1);
        assert_eq!(
            client.get_entry(&posted.entry.id).await.unwrap(),
            posted.entry
        );
    }
    // Only the added certificate trusted: still reached.
    let only_ours = Client::builder(format!("https://127.0.0.1:{}", front.addr.port()), &key)
        .policy(policy)
        .built_in_roots(false)
        .add_root_certificate(pem.as_bytes())
        .build()
        .unwrap();
    let replay = only_ours
        .post_usage_debit(&UsageDebit::new("ur_tls", "cust", Decimal::ONE, "USD"))
        .await
        .unwrap();
    assert!(replay.replayed);

    // Without the certificate the handshake fails: no answer, never an entry.
    let untrusting = Client::builder(format!("https://127.0.0.1:{}", front.addr.port()), &key)
        .policy(policy)
        .build()
        .unwrap();
    let err = untrusting
        .post_usage_debit(&UsageDebit::new(
            "ur_untrusted",
            "cust",
            Decimal::ONE,
            "USD",
        ))
        .await
        .unwrap_err();
    match &err {
        ClientError::Exhausted { last, .. } => match &**last {
            ClientError::Transport { message, .. } => {
                assert!(message.to_lowercase().contains("certificate"), "{message}")
            }
            other => panic!("expected Transport, got {other:?}"),
        },
        other => panic!("expected Exhausted, got {other:?}"),
    }
    assert_eq!(server.all_entries(&key).await.len(), 1);

    // A root that is not PEM is refused when the client is built.
    let bad = Client::builder("https://127.0.0.1:1", &key)
        .add_root_certificate(b"not a certificate")
        .build();
    assert!(
        matches!(bad, Err(ClientError::Config(_))),
        "{:?}",
        bad.err()
    );
}

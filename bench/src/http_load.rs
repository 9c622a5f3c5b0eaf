//! Drives a real `tally serve` over HTTP from many client tasks.
//!
//! Each client task owns one keep-alive HTTP/1.1 connection and speaks to it
//! through hyper directly. The load generator shares the two cores with the
//! server and the database, so every microsecond it spends per request is
//! taken from what it measures: a pooled general-purpose client (reqwest:
//! URL parsing, a pool checkout and a timer per request) cost about 43 µs of
//! CPU per request here, a quarter of the machine under 100 % replays.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper_util::rt::TokioIo;

use crate::stats::{self, Stats};
use crate::workload::Rng;

/// Where the load goes: the server's base URL and the API key's header.
#[derive(Clone)]
pub struct Target {
    /// For the few requests that are not load (metrics polling).
    pub client: reqwest::Client,
    pub base: String,
    authority: HeaderValue,
    bearer: HeaderValue,
}

/// The single usage-debit endpoint: 201 when it posted, 200 when it replayed.
pub const SINGLE_PATH: &str = "/v1/usage-debits";

/// One request to send: path, body, and how many entries it carries.
pub struct Request {
    pub path: &'static str,
    pub body: Bytes,
    pub rows: u64,
}

/// A client task's own keep-alive connection.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
}

/// No request of the benchmark may take longer than this; one that does is
/// counted as an error, like a client timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

impl Target {
    pub fn new(base: String, key: String) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()?;
        let authority = base
            .strip_prefix("http://")
            .context("the server's address is not http://")?;
        Ok(Self {
            client,
            authority: HeaderValue::from_str(authority)?,
            bearer: HeaderValue::from_str(&format!("Bearer {key}"))?,
            base,
        })
    }

    /// The server's `GET /metrics` text.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        Ok(self
            .client
            .get(format!("{}/metrics", self.base))
            .send()
            .await?
            .text()
            .await?)
    }

    pub async fn connect(&self) -> anyhow::Result<Connection> {
        let stream = tokio::net::TcpStream::connect(self.authority.to_str()?).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(Connection { sender })
    }

    /// Sends `req` on `conn`, reading the whole answer; returns its status.
    pub async fn send(&self, conn: &mut Connection, req: &Request) -> anyhow::Result<u16> {
        let mut request = hyper::Request::post(req.path).body(Full::new(req.body.clone()))?;
        let headers = request.headers_mut();
        headers.insert(HOST, self.authority.clone());
        headers.insert(AUTHORIZATION, self.bearer.clone());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let exchange = async {
            conn.sender.ready().await?;
            let response = conn.sender.send_request(request).await?;
            let status = response.status().as_u16();
            response.into_body().collect().await?;
            anyhow::Ok(status)
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .context("request timed out")?
    }
}

/// Runs `clients` tasks for `duration`, each on its own connection sending
/// `make(rng)` in a loop. A connection that fails is replaced.
pub async fn run<F>(target: &Target, clients: usize, duration: Duration, make: F) -> Stats
where
    F: Fn(&mut Rng) -> Request + Send + Sync + 'static,
{
    let make = Arc::new(make);
    stats::drive(clients, duration, |mut rng, deadline| {
        let target = target.clone();
        let make = make.clone();
        async move {
            let mut stats = Stats::default();
            let mut conn = None;
            while Instant::now() < deadline {
                let req = make(&mut rng);
                let t0 = Instant::now();
                // A connection that failed is dropped; the next request opens another.
                let status = async {
                    let mut c = match conn.take() {
                        Some(c) => c,
                        None => target.connect().await?,
                    };
                    let status = target.send(&mut c, &req).await?;
                    conn = Some(c);
                    anyhow::Ok(status)
                }
                .await;
                let micros = t0.elapsed().as_micros() as u64;
                match status {
                    Ok(200 | 201) => stats.rows += req.rows,
                    _ => stats.errors += 1,
                }
                // Only the single endpoint tells a post (201) from a
                // replay (200); a batch always answers 200.
                if req.path == SINGLE_PATH {
                    match status {
                        Ok(201) => stats.posted_us.push(micros),
                        Ok(200) => stats.replayed_us.push(micros),
                        _ => {}
                    }
                }
                stats.requests += 1;
                stats.latencies_us.push(micros);
            }
            stats
        }
    })
    .await
}

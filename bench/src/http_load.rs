//! Drives a real `tally serve` over HTTP from many client tasks.
//!
//! Each client task owns one keep-alive HTTP/1.1 connection and speaks to it
//! itself: the request is one `write` of bytes prepared once per request
//! line and headers, the answer is read into the task's buffer and parsed
//! with `httparse`. The load generator shares the two cores with the server
//! and the database, so every microsecond it spends per request is taken
//! from what it measures. A pooled general-purpose client (reqwest: URL
//! parsing, a pool checkout and a timer per request) cost about 43 µs of
//! CPU per request here, a quarter of the machine under 100 % replays;
//! hyper's client connection (a task of its own per connection, woken
//! through a channel for every request) 25–44 µs (measured on the 2-core
//! machine of docs/performance.md).

use std::borrow::Cow;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::stats::{self, Stats};
use crate::workload::Rng;

/// Where the load goes: the server's base URL and the API key's header.
#[derive(Clone)]
pub struct Target {
    /// For the few requests that are not load (metrics polling).
    pub client: reqwest::Client,
    pub base: String,
    authority: String,
    /// `Host` and `Content-Type` lines, the same for every request of the run.
    headers: Arc<str>,
    /// The `Authorization` line of a request that names no key of its own.
    auth: Arc<str>,
}

/// The single usage-debit endpoint: 201 when it posted, 200 when it replayed.
pub const SINGLE_PATH: &str = "/v1/usage-debits";

/// One request to send: path, body, and how many entries it carries.
pub struct Request {
    pub path: Cow<'static, str>,
    pub body: Bytes,
    pub rows: u64,
    /// Its own `Authorization` line ([`auth_line`]), e.g. another tenant's
    /// key; the run's key if `None`.
    pub auth: Option<Arc<str>>,
    /// A request made from this one's 2xx answer body, sent next on the
    /// same connection (an intent's `complete` after its claim); `rows`
    /// count once the last of the chain succeeds.
    pub then: Option<FollowUp>,
}

/// Builds the next request of a chain from an answer body.
pub type FollowUp = fn(&[u8]) -> Option<Request>;

/// The `Authorization` header line of `key`, as [`Request::auth`] takes it.
pub fn auth_line(key: &str) -> Arc<str> {
    format!("Authorization: Bearer {key}\r\n").into()
}

/// A client task's own keep-alive connection and the buffers it reuses.
pub struct Connection {
    stream: TcpStream,
    /// Bytes read and not yet consumed by an answer.
    read: Vec<u8>,
    write: Vec<u8>,
    /// The last answer's body, when its request asked for it.
    body: Vec<u8>,
}

/// No request of the benchmark may take longer than this; one that does is
/// counted as an error, like a client timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest answer head (status line and headers) accepted.
const MAX_HEAD: usize = 64 * 1024;

impl Target {
    pub fn new(base: String, key: String) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()?;
        let authority = base
            .strip_prefix("http://")
            .context("the server's address is not http://")?
            .to_owned();
        let headers = format!("Host: {authority}\r\nContent-Type: application/json\r\n");
        Ok(Self {
            client,
            authority,
            headers: headers.into(),
            auth: auth_line(&key),
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
        let stream = TcpStream::connect(self.authority.as_str()).await?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            read: Vec::with_capacity(8 * 1024),
            write: Vec::with_capacity(4 * 1024),
            body: Vec::new(),
        })
    }

    /// Sends `req` on `conn`, reading the whole answer; returns its status
    /// (and, for a request with a follow-up, keeps its body in
    /// `conn.body`). An error leaves the connection unusable: the caller
    /// drops it.
    pub async fn send(&self, conn: &mut Connection, req: &Request) -> anyhow::Result<u16> {
        conn.write.clear();
        conn.write.extend_from_slice(b"POST ");
        conn.write.extend_from_slice(req.path.as_bytes());
        conn.write.extend_from_slice(b" HTTP/1.1\r\n");
        conn.write.extend_from_slice(self.headers.as_bytes());
        conn.write
            .extend_from_slice(req.auth.as_deref().unwrap_or(&self.auth).as_bytes());
        // Writing to a Vec cannot fail.
        let _ = write!(conn.write, "Content-Length: {}\r\n\r\n", req.body.len());
        conn.write.extend_from_slice(&req.body);
        let keep = req.then.is_some().then_some(&mut conn.body);
        let exchange = async {
            conn.stream.write_all(&conn.write).await?;
            read_answer(&mut conn.stream, &mut conn.read, keep).await
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .context("request timed out")?
    }
}

/// Reads one HTTP/1.1 answer from `stream` (bytes already in `buf` first),
/// its body whole (`Content-Length` or chunked), copied into `keep` if
/// given; returns its status and leaves in `buf` whatever followed it.
async fn read_answer(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    mut keep: Option<&mut Vec<u8>>,
) -> anyhow::Result<u16> {
    if let Some(k) = keep.as_deref_mut() {
        k.clear();
    }
    let (status, head_len, body) = loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut answer = httparse::Response::new(&mut headers);
        match answer.parse(buf).context("malformed HTTP answer")? {
            httparse::Status::Complete(head_len) => {
                let status = answer.code.context("HTTP answer without a status")?;
                let body = if matches!(status, 100..=199 | 204 | 304) {
                    Body::Length(0)
                } else {
                    body_length(answer.headers)?
                };
                break (status, head_len, body);
            }
            httparse::Status::Partial => {
                if buf.len() > MAX_HEAD {
                    bail!("HTTP answer head over {MAX_HEAD} bytes");
                }
                fill(stream, buf).await?;
            }
        }
    };
    buf.drain(..head_len);
    match body {
        Body::Length(n) => {
            while buf.len() < n {
                fill(stream, buf).await?;
            }
            if let Some(k) = keep.as_deref_mut() {
                k.extend_from_slice(&buf[..n]);
            }
            buf.drain(..n);
        }
        Body::Chunked => loop {
            // A chunk: its size in hex (extensions after `;`), CRLF, data, CRLF.
            let line_end = loop {
                if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                    break i;
                }
                fill(stream, buf).await?;
            };
            let line = std::str::from_utf8(&buf[..line_end]).context("chunk size")?;
            let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                .context("chunk size")?;
            let whole = line_end + 2 + size + 2;
            while buf.len() < whole {
                fill(stream, buf).await?;
            }
            if let Some(k) = keep.as_deref_mut() {
                k.extend_from_slice(&buf[line_end + 2..line_end + 2 + size]);
            }
            buf.drain(..whole);
            if size == 0 {
                // No trailers are sent by tally: the last chunk ends the body.
                break;
            }
        },
    }
    Ok(status)
}

enum Body {
    Length(usize),
    Chunked,
}

fn body_length(headers: &[httparse::Header<'_>]) -> anyhow::Result<Body> {
    for h in headers {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)?.trim().parse()?;
            return Ok(Body::Length(n));
        }
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Ok(Body::Chunked);
        }
    }
    bail!("HTTP answer with neither Content-Length nor Transfer-Encoding")
}

/// Reads more of the answer into `buf`.
async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<()> {
    buf.reserve(8 * 1024);
    if stream.read_buf(buf).await? == 0 {
        bail!("the server closed the connection mid-answer");
    }
    Ok(())
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
                // A connection that failed is dropped; the next request opens
                // another. A chain's requests go one after the other, and
                // its time and status are the whole chain's.
                let status = async {
                    let mut c = match conn.take() {
                        Some(c) => c,
                        None => target.connect().await?,
                    };
                    let mut status = target.send(&mut c, &req).await?;
                    let mut then = req.then;
                    while let (Some(follow), 200 | 201) = (then, status) {
                        let Some(next) = follow(&c.body) else {
                            break;
                        };
                        stats.requests += 1;
                        status = target.send(&mut c, &next).await?;
                        then = next.then;
                    }
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

//! The accept loop: HTTP/1.1 connections served by hyper, at most
//! `--max-connections` at once, each closed when its client stalls
//! (docs/operations.md, "Slow clients").
//!
//! - A new connection, or one whose next request has begun to arrive, has
//!   `--header-read-timeout-ms` to deliver the whole request head; one that
//!   sends half its headers, or nothing, is closed then.
//! - A kept-alive connection waiting for its next request is closed after
//!   `--idle-timeout-ms` without a byte; so is one whose client accepts no
//!   byte of its answer for that long.
//! - Past `--max-connections` a connection is not refused: it waits in the
//!   kernel's accept queue, unread, until a served one closes.
//!
//! hyper has a header read timeout, but its clock starts as soon as it
//! waits for a request head, so on a kept-alive connection it is also the
//! idle timeout; and it has no idle timeout of its own. Both clocks are
//! therefore kept here, around the socket ([`Watched`]), which knows
//! whether a request is in flight from the service wrapper around the router.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use futures_util::task::AtomicWaker;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};
use tower::ServiceExt as _;

/// Default of `--header-read-timeout-ms`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of `--idle-timeout-ms`.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of `--max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1_024;

/// The connection limits of one process.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    /// 0: no cap.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves; then stops
/// accepting and waits for the open connections to finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let slots =
        (limits.max_connections > 0).then(|| Arc::new(Semaphore::new(limits.max_connections)));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // The slot first: past the cap, connections wait unaccepted.
        let slot = match &slots {
            Some(slots) => tokio::select! {
                slot = slots.clone().acquire_owned() => slot.ok(),
                () = &mut shutdown => break,
            },
            None => None,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let activity = Arc::new(Activity::default());
        let io = TokioIo::new(Watched::new(stream, limits, activity.clone()));
        let router = router.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let in_flight = InFlight::begin(activity.clone());
            let router = router.clone();
            async move {
                let response = router.oneshot(request.map(Body::new)).await?;
                // The request is in flight until its answer's body is sent
                // (or dropped): the guard goes with the body.
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _ = &in_flight;
                        frame
                    }))
                }))
            }
        });
        let connection = hyper::server::conn::http1::Builder::new()
            // The clocks of `Watched` instead (see the module comment).
            .header_read_timeout(None)
            .serve_connection(io, service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection closed with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// An accept error: one of the connection that was being accepted is
/// nothing to wait for; any other (out of file descriptors) is retried
/// after a pause instead of spinning.
async fn accept_failed(e: io::Error) {
    use io::ErrorKind as K;
    if matches!(
        e.kind(),
        K::ConnectionRefused | K::ConnectionAborted | K::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// What the service tells the socket about a connection's requests.
#[derive(Debug, Default)]
struct Activity {
    in_flight: AtomicUsize,
    finished: AtomicU64,
    /// The connection's task, woken when a request finishes: hyper last
    /// polled the socket while the request was in flight (no clock ran
    /// then), and would not poll it again before the client sent a byte.
    reader: AtomicWaker,
}

/// One request in flight, from its head until its answer is sent.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        Self(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.finished.fetch_add(1, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.reader.wake();
    }
}

/// A socket with the header-read and idle clocks (see the module comment).
struct Watched {
    io: TcpStream,
    limits: ConnectionLimits,
    activity: Arc<Activity>,
    /// Requests finished when the current wait for a request began.
    finished_seen: u64,
    /// When the connection began to wait for its next request.
    waiting_since: Instant,
    /// When the first byte of the next request head arrived; a new
    /// connection counts from its accept.
    head_since: Option<Instant>,
    read_clock: Pin<Box<Sleep>>,
    /// Since when writes have found the client's window full.
    write_stalled_since: Option<Instant>,
    write_clock: Pin<Box<Sleep>>,
}

impl Watched {
    fn new(io: TcpStream, limits: ConnectionLimits, activity: Arc<Activity>) -> Self {
        let now = Instant::now();
        Self {
            io,
            limits,
            activity,
            finished_seen: 0,
            waiting_since: now,
            head_since: Some(now),
            read_clock: Box::pin(tokio::time::sleep_until(now + limits.header_read_timeout)),
            write_stalled_since: None,
            write_clock: Box::pin(tokio::time::sleep_until(now + limits.idle_timeout)),
        }
    }
}

/// Polls `clock` set to `deadline`: ready once it has passed.
fn expired(clock: &mut Pin<Box<Sleep>>, deadline: Instant, cx: &mut Context<'_>) -> bool {
    if clock.deadline() != deadline {
        clock.as_mut().reset(deadline);
    }
    clock.as_mut().poll(cx).is_ready()
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.activity.reader.register(cx.waker());
        let busy = this.activity.in_flight.load(Ordering::SeqCst) > 0;
        let finished = this.activity.finished.load(Ordering::SeqCst);
        if !busy && finished != this.finished_seen {
            // A request was answered since: the wait for the next begins.
            this.finished_seen = finished;
            this.waiting_since = Instant::now();
            this.head_since = None;
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if !busy && this.head_since.is_none() && buf.filled().len() > before {
                    this.head_since = Some(Instant::now());
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if !busy => {
                let (deadline, what) = match this.head_since {
                    Some(t) => (t + this.limits.header_read_timeout, "request head"),
                    None => (
                        this.waiting_since + this.limits.idle_timeout,
                        "next request",
                    ),
                };
                if expired(&mut this.read_clock, deadline, cx) {
                    tracing::debug!(waiting_for = what, "closing a stalled connection");
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no {what} in time"),
                    )));
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl Watched {
    /// A write that finds the client's window full starts the idle clock;
    /// any progress stops it.
    fn watch_write<T>(
        &mut self,
        polled: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending => {
                let since = *self.write_stalled_since.get_or_insert_with(Instant::now);
                if expired(&mut self.write_clock, since + self.limits.idle_timeout, cx) {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client read nothing in time",
                    )));
                }
                Poll::Pending
            }
            ready => {
                self.write_stalled_since = None;
                ready
            }
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch_write(polled, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch_write(polled, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

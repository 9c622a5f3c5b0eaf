//! A TCP proxy that injects faults between a client and a server (or
//! between tally and its database): drop a response after the server has
//! sent it (so the work is committed but the answer is lost), delay it past
//! the client's timeout, or refuse and cut every connection.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything.
    None,
    /// Every `n`-th response chunk from the server is swallowed and both
    /// connections are cut: the server did the work, the client never hears.
    DropResponse(u64),
    /// Every `n`-th response chunk is held for `ms` before it is forwarded.
    Delay(u64, u64),
    /// New connections are closed at once (and `down()` cuts open ones).
    Down,
    /// The next response chunk is swallowed and its connections cut, once;
    /// then everything is forwarded again (`Fault::None`).
    DropOnce,
}

struct State {
    target: Mutex<SocketAddr>,
    fault: Mutex<Fault>,
    chunks: AtomicU64,
    injected: AtomicU64,
    conns: Mutex<Vec<JoinHandle<()>>>,
    mode: AtomicU8,
}

pub struct Proxy {
    pub addr: SocketAddr,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        for c in self.state.conns.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            target: Mutex::new(target),
            fault: Mutex::new(Fault::None),
            chunks: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            conns: Mutex::new(Vec::new()),
            mode: AtomicU8::new(0),
        });
        let s = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *s.fault.lock().unwrap() == Fault::Down {
                    drop(client);
                    continue;
                }
                let s2 = s.clone();
                let handle = tokio::spawn(async move { relay(client, s2).await });
                let mut conns = s.conns.lock().unwrap();
                conns.retain(|h| !h.is_finished());
                conns.push(handle);
            }
        });
        Proxy {
            addr,
            state,
            accept,
        }
    }

    pub fn set_target(&self, target: SocketAddr) {
        *self.state.target.lock().unwrap() = target;
    }

    pub fn set_fault(&self, fault: Fault) {
        *self.state.fault.lock().unwrap() = fault;
    }

    /// Refuse new connections and cut every open one.
    pub fn down(&self) {
        self.set_fault(Fault::Down);
        for c in self.state.conns.lock().unwrap().drain(..) {
            c.abort();
        }
        self.state.injected.fetch_add(1, Ordering::Relaxed);
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.state.injected.load(Ordering::Relaxed)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

async fn relay(client: TcpStream, state: Arc<State>) {
    let target = *state.target.lock().unwrap();
    let Ok(upstream) = TcpStream::connect(target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut up_read, mut up_write) = upstream.into_split();
    let forward = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut up_write).await;
        let _ = up_write.shutdown().await;
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match up_read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let fault = {
            let mut fault = state.fault.lock().unwrap();
            let now = *fault;
            if now == Fault::DropOnce {
                *fault = Fault::None;
            }
            now
        };
        let count = state.chunks.fetch_add(1, Ordering::Relaxed) + 1;
        match fault {
            Fault::DropResponse(every) if count.is_multiple_of(every) => {
                state.injected.fetch_add(1, Ordering::Relaxed);
                forward.abort();
                return; // both halves dropped: the client sees a reset
            }
            Fault::Delay(every, ms) if count.is_multiple_of(every) => {
                state.injected.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Fault::Down => {
                forward.abort();
                return;
            }
            Fault::DropOnce => {
                state.injected.fetch_add(1, Ordering::Relaxed);
                forward.abort();
                return;
            }
            _ => {}
        }
        if client_write.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    forward.abort();
}

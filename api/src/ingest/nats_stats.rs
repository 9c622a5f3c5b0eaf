//! What the NATS consumer did, counted for `GET /metrics` and its log
//! lines: a leaf, so that the server's state can hold it without
//! depending on the consumer.

use std::sync::atomic::AtomicU64;

/// What the consumer did, for `/metrics` and its log lines.
#[derive(Debug, Default)]
pub struct NatsStats {
    /// Messages pulled.
    pub consumed: AtomicU64,
    /// Entries created.
    pub committed: AtomicU64,
    /// Operations that were replays of committed entries.
    pub replayed: AtomicU64,
    /// Messages published to the dead-letter subject and terminated.
    pub dead_lettered: AtomicU64,
    /// Messages negatively acknowledged for a transient failure.
    pub redelivered: AtomicU64,
    /// Messages of the stream not yet delivered to the consumer, as the
    /// server last said.
    pub lag: AtomicU64,
}

//! Where log lines go and how they look: standard error, filtered by
//! `TALLY_LOG` (an `EnvFilter` directive, default `info`), as human text or
//! one JSON object per line (`--log-format` / `TALLY_LOG_FORMAT`).
//!
//! Inside a request every line carries the `request` span with its
//! `request_id` (`crate::observe`). No secret is ever a field: API keys
//! (the `Authorization` header) and the signing key seed are never logged.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The format of log lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For humans: `time level span{fields}: target: message fields`.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields`
    /// (with `message`), `span` (the innermost, e.g. `request` with
    /// `request_id`) and `spans` (all of them, outermost first).
    Json,
}

/// Installs the global subscriber. Call once, before anything logs.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_env("TALLY_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only for a person at a terminal: a file, a pipe or journald
    // gets plain text (and `NO_COLOR` is honoured).
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
}

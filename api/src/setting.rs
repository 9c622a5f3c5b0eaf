//! One effective setting of `tally serve` and where its value came from:
//! what `crate::config` resolves and `crate::cli` carries to the server.

use std::path::PathBuf;

/// Where the effective value of one setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env(String),
    File(PathBuf),
    Default,
    /// No value at all (an optional setting nobody set).
    Unset,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag => write!(f, "flag"),
            Source::Env(var) => write!(f, "env {var}"),
            Source::File(path) => write!(f, "file {}", path.display()),
            Source::Default => write!(f, "default"),
            Source::Unset => write!(f, "not set"),
        }
    }
}

/// One setting of `tally serve` as it will be used.
#[derive(Debug, Clone)]
pub struct Setting {
    /// The file key: the long flag name with `_` (`max_group`).
    pub key: String,
    /// The value as a TOML value (`1000`, `"127.0.0.1:8080"`), passwords in
    /// URLs redacted; `None` when unset.
    pub value: Option<String>,
    pub source: Source,
}

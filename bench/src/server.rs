//! The `tally` binary the benchmark drives: found next to `tally-bench`,
//! started as a real `tally serve` on port 0, or run as a one-off command.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The `tally` binary built beside this one.
pub fn tally_binary() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let path = me.with_file_name("tally");
    if !path.exists() {
        bail!(
            "{} not found: build it first with `cargo build --release --workspace`",
            path.display()
        );
    }
    Ok(path)
}

/// A running `tally serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub base: String,
}

/// Starts `tally serve` on `url`; with `log`, its log at that filter goes to
/// `tally-bench-server.log` in the current directory.
pub async fn start_server(tally: &Path, url: &str, log: Option<&str>) -> anyhow::Result<Server> {
    let stderr = match log {
        Some(_) => Stdio::from(std::fs::File::create("tally-bench-server.log")?),
        None => Stdio::inherit(),
    };
    let mut child = Command::new(tally)
        .args(["serve", "--database-url", url, "--listen", "127.0.0.1:0"])
        .env("TALLY_LOG", log.unwrap_or("warn"))
        .stderr(stderr)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await??
        .context("tally serve exited")?;
    let base = line
        .strip_prefix("tally listening on ")
        .context("unexpected output")?
        .to_owned();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Server { child, base })
}

/// Runs `tally ARGS --database-url URL`; its standard output.
pub async fn tally_cmd(tally: &Path, args: &[&str], url: &str) -> anyhow::Result<String> {
    let out = Command::new(tally)
        .args(args)
        .args(["--database-url", url])
        .env("TALLY_LOG", "warn")
        .output()
        .await?;
    if !out.status.success() {
        bail!(
            "tally {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

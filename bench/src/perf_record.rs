//! An on-demand `perf record` of the whole machine while a scenario runs
//! (`--perf-dir`), so a figure can be read with the profile taken in the
//! same run: which functions of the server, the database and the load
//! generator the CPU went to.
//!
//! System-wide (`-a`) because on PostgreSQL the work is split between the
//! server and the database's backends; `perf report --sort comm,dso,sym`
//! separates them again. Sampled on the `cpu-clock` software event, which
//! every machine has (virtual machines often expose no hardware counters),
//! at 499 Hz, without call graphs: release builds keep no frame pointers,
//! so the self time of each function is what can be trusted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::{Child, Command};

/// A recording in progress; [`PerfRecording::finish`] waits for it.
pub struct PerfRecording {
    child: Child,
    file: PathBuf,
}

/// Starts recording for `length` into `dir/{engine}-{scenario}.data`.
/// `None` (with a line on stderr) when `perf` cannot start: the figures
/// are still measured.
pub fn start(dir: &Path, engine: &str, scenario: &str, length: Duration) -> Option<PerfRecording> {
    let file = dir.join(format!("{engine}-{scenario}.data"));
    let spawned = Command::new("perf")
        .args(["record", "-q", "-a", "-e", "cpu-clock", "-F", "499", "-o"])
        .arg(&file)
        .arg("--")
        .arg("sleep")
        .arg(format!("{:.3}", length.as_secs_f64()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn();
    match spawned {
        Ok(child) => Some(PerfRecording { child, file }),
        Err(e) => {
            eprintln!("  perf record did not start ({e}); no profile of {scenario}");
            None
        }
    }
}

impl PerfRecording {
    /// Waits for the recording to end and names its file.
    pub async fn finish(mut self) -> String {
        match self.child.wait().await {
            Ok(status) if status.success() => format!(
                "profile: {} (perf report -i FILE --sort comm,dso,sym)",
                self.file.display()
            ),
            Ok(status) => format!("profile: perf record failed ({status})"),
            Err(e) => format!("profile: perf record failed ({e})"),
        }
    }
}

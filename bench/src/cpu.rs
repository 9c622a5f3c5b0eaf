//! Where a scenario's CPU went: the server, the database, the load
//! generator, the rest of the machine, and how busy the machine was.
//!
//! The three share two cores, so a figure is limited either by CPU (the
//! machine is busy nearly all the time) or by waiting (commit flushes, the
//! writer's one group at a time) with cores left idle. Reading it off every
//! run, per row, says which, instead of guessing from one profile taken on
//! another day. Linux only (`/proc`); elsewhere nothing is printed.

use std::time::Instant;

/// CPU time read at one moment, in clock ticks.
#[derive(Debug, Clone)]
pub struct CpuSample {
    at: Instant,
    /// Ticks of every CPU, and of those idle (idle + iowait).
    machine_total: u64,
    machine_idle: u64,
    machine_steal: u64,
    server: u64,
    database: u64,
    load_generator: u64,
}

/// Which processes to count.
#[derive(Debug, Clone, Copy)]
pub struct Watched {
    /// The `tally serve` under load (with SQLite, the database runs in it).
    pub server: Option<u32>,
    /// Count every `postgres` process of the machine as the database.
    pub postgres: bool,
}

/// CPU per row of a scenario, in microseconds, and the machine's busy share.
#[derive(Debug, Clone, Copy)]
pub struct CpuPerRow {
    pub server_us: f64,
    pub database_us: f64,
    pub load_generator_us: f64,
    pub other_us: f64,
    /// Busy share of all cores over the scenario, 0–1, stolen time included.
    pub busy: f64,
    /// Share of all cores the hypervisor gave to other machines while
    /// this one wanted them, 0–1 (`steal` of `/proc/stat`).
    pub stolen: f64,
    pub cores: usize,
}

/// Clock ticks per second of `/proc` times (USER_HZ): asked of `getconf`,
/// since reading it directly needs `sysconf`, an unsafe call; 100 is what
/// Linux uses on every architecture it is likely to run on here.
pub fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime of a process (all its threads), from `/proc/<pid>/stat`.
fn process_ticks(stat: &str) -> Option<u64> {
    // The command name may hold spaces and parentheses: fields are
    // counted after its closing parenthesis. utime and stime are fields
    // 14 and 15 of the line, the 12th and 13th after the name.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// (parent pid, utime + stime) of a process, from `/proc/<pid>/stat`.
pub(crate) fn parent_and_ticks(stat: &str) -> Option<(u32, u64)> {
    // After the name: state, then the parent's pid.
    let rest = &stat[stat.rfind(')')? + 1..];
    let parent = rest.split_whitespace().nth(1)?.parse().ok()?;
    Some((parent, process_ticks(stat)?))
}

fn ticks_of(pid: &str) -> Option<u64> {
    process_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Ticks of every process named `postgres` (the postmaster, its backends
/// and background workers).
fn postgres_ticks() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim_end() == "postgres")
        })
        .filter_map(|pid| ticks_of(&pid))
        .sum()
}

/// (all ticks, idle ticks, stolen ticks) of the machine, from the first
/// line of `/proc/stat`.
fn machine_ticks(stat: &str) -> Option<(u64, u64, u64)> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]:
    // guest time is already counted in user, so only the first eight add up.
    let total = ticks.iter().take(8).sum();
    let idle = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0);
    // Time the hypervisor ran something else while this machine wanted
    // its CPU: counted as busy, since nothing here could use it.
    let steal = ticks.get(7).copied().unwrap_or(0);
    Some((total, idle, steal))
}

impl CpuSample {
    /// Now; `None` where `/proc` cannot be read.
    pub fn take(watched: Watched) -> Option<Self> {
        let (machine_total, machine_idle, machine_steal) =
            machine_ticks(&std::fs::read_to_string("/proc/stat").ok()?)?;
        Some(Self {
            at: Instant::now(),
            machine_total,
            machine_idle,
            machine_steal,
            server: watched
                .server
                .and_then(|pid| ticks_of(&pid.to_string()))
                .unwrap_or(0),
            database: if watched.postgres {
                postgres_ticks()
            } else {
                0
            },
            load_generator: ticks_of("self").unwrap_or(0),
        })
    }

    /// What was spent from `self` to `later`, per row of `rows`.
    pub fn per_row(&self, later: &CpuSample, rows: u64, ticks_per_second: f64) -> CpuPerRow {
        let us = |ticks: u64| ticks as f64 / ticks_per_second * 1e6 / rows.max(1) as f64;
        let total = later.machine_total.saturating_sub(self.machine_total);
        let idle = later.machine_idle.saturating_sub(self.machine_idle);
        let busy_ticks = total.saturating_sub(idle);
        let steal = later.machine_steal.saturating_sub(self.machine_steal);
        let server = later.server.saturating_sub(self.server);
        let database = later.database.saturating_sub(self.database);
        let load_generator = later.load_generator.saturating_sub(self.load_generator);
        let seconds = later.at.duration_since(self.at).as_secs_f64().max(1e-9);
        CpuPerRow {
            server_us: us(server),
            database_us: us(database),
            load_generator_us: us(load_generator),
            other_us: us(busy_ticks.saturating_sub(server + database + load_generator + steal)),
            busy: if total == 0 {
                0.0
            } else {
                busy_ticks as f64 / total as f64
            },
            stolen: if total == 0 {
                0.0
            } else {
                steal as f64 / total as f64
            },
            // Every core ticks ticks_per_second times a second.
            cores: ((total as f64 / ticks_per_second / seconds).round() as usize).max(1),
        }
    }
}

impl CpuPerRow {
    /// One line: µs of CPU per row by process, and the machine's busy share.
    pub fn describe(&self, server: &str, database: Option<&str>) -> String {
        let database = match database {
            Some(name) => format!(", {name} {:.0}", self.database_us),
            None => String::new(),
        };
        format!(
            "cpu µs/row: {server} {:.0}{database}, load generator {:.0}, other {:.0}; \
             machine {:.0}% busy of {} cores{}",
            self.server_us,
            self.load_generator_us,
            self.other_us,
            self.busy * 100.0,
            self.cores,
            if self.stolen >= 0.005 {
                format!(" ({:.0}% stolen by the host)", self.stolen * 100.0)
            } else {
                String::new()
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_line_is_read_after_its_name_whatever_the_name_holds() {
        // Fields as in proc(5); utime 1187 and stime 368.
        let line =
            "25812 (tally (x) y) S 25801 25797 4290 0 -1 4194304 13563 0 1 0 1187 368 0 0 20 0 3";
        assert_eq!(process_ticks(line), Some(1187 + 368));
        assert_eq!(process_ticks("25812 (tally) S 1 2"), None);
    }

    #[test]
    fn the_machine_line_counts_idle_and_iowait_as_idle_and_guest_once() {
        let stat = "cpu  100 5 50 800 20 1 2 3 40 0\ncpu0 50 2 25 400 10 0 1 1 20 0\n";
        assert_eq!(
            machine_ticks(stat),
            Some((100 + 5 + 50 + 800 + 20 + 1 + 2 + 3, 820, 3))
        );
        assert_eq!(machine_ticks("intr 1 2 3"), None);
    }

    #[test]
    fn per_row_divides_each_share_by_the_rows() {
        let at = Instant::now();
        let before = CpuSample {
            at,
            machine_total: 0,
            machine_idle: 0,
            machine_steal: 0,
            server: 0,
            database: 0,
            load_generator: 0,
        };
        let after = CpuSample {
            at: at + std::time::Duration::from_secs(1),
            machine_total: 200,
            machine_idle: 40,
            machine_steal: 10,
            server: 60,
            database: 70,
            load_generator: 15,
        };
        // 100 ticks a second: 60 ticks over 1,000 rows is 0.6 s / 1,000.
        let r = before.per_row(&after, 1_000, 100.0);
        assert!((r.server_us - 600.0).abs() < 1e-9);
        assert!((r.database_us - 700.0).abs() < 1e-9);
        assert!((r.load_generator_us - 150.0).abs() < 1e-9);
        assert!(
            (r.other_us - 50.0).abs() < 1e-9,
            "stolen time is no process's"
        );
        assert!((r.busy - 0.8).abs() < 1e-9);
        assert!((r.stolen - 0.05).abs() < 1e-9);
        assert_eq!(r.cores, 2, "two cores' worth of ticks in a second");
    }
}

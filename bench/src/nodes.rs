//! Database CPU of each node of a Citus cluster running on this machine:
//! which node a request's cost lands on says what one more worker would
//! take off (docs/scaling.md). A node is its postmaster and the processes
//! it started (backends, background workers), found from its data
//! directory's `postmaster.pid`. Linux only (`/proc`); a cluster whose
//! nodes are elsewhere is not measured.

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};

/// One node of the cluster.
#[derive(Debug, Clone)]
pub struct Node {
    /// "coordinator", or the worker's host:port.
    name: String,
    postmaster: u32,
}

/// The coordinator of `coordinator_url` and its primary workers, or
/// `None` when a node's postmaster can't be found on this machine.
pub async fn of_cluster(coordinator_url: &str) -> anyhow::Result<Option<Vec<Node>>> {
    let options = PgConnectOptions::from_str(coordinator_url)?;
    let mut coordinator = options.connect().await?;
    let workers: Vec<(String, i32)> = sqlx::query_as(
        "SELECT nodename::text, nodeport FROM pg_dist_node \
         WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeid",
    )
    .fetch_all(&mut coordinator)
    .await?;
    let mut nodes = Vec::with_capacity(workers.len() + 1);
    let Some(postmaster) = postmaster_of(&mut coordinator).await? else {
        return Ok(None);
    };
    coordinator.close().await?;
    nodes.push(Node {
        name: "coordinator".to_owned(),
        postmaster,
    });
    for (host, port) in workers {
        let port = u16::try_from(port)?;
        let mut worker = options
            .clone()
            .host(&host)
            .port(port)
            .database("postgres")
            .connect()
            .await?;
        let Some(postmaster) = postmaster_of(&mut worker).await? else {
            return Ok(None);
        };
        worker.close().await?;
        nodes.push(Node {
            name: format!("{host}:{port}"),
            postmaster,
        });
    }
    Ok(Some(nodes))
}

/// The postmaster's pid of the server `conn` speaks to: the first line of
/// `postmaster.pid` in its data directory.
async fn postmaster_of(conn: &mut sqlx::PgConnection) -> anyhow::Result<Option<u32>> {
    let data_directory: String = sqlx::query_scalar("SHOW data_directory")
        .fetch_one(conn)
        .await?;
    let Ok(pid_file) = std::fs::read_to_string(format!("{data_directory}/postmaster.pid")) else {
        return Ok(None);
    };
    Ok(pid_file.lines().next().and_then(|l| l.trim().parse().ok()))
}

/// CPU ticks of each node (in the order of [`of_cluster`]) at one moment.
#[derive(Debug, Clone)]
pub struct NodeTicks(Vec<u64>);

impl NodeTicks {
    pub fn take(nodes: &[Node]) -> Self {
        let mut ticks = vec![0; nodes.len()];
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Self(ticks);
        };
        for entry in dir.filter_map(Result::ok) {
            let Ok(pid) = entry.file_name().into_string() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let (Ok(pid), Some((ppid, used))) =
                (pid.parse::<u32>(), crate::cpu::parent_and_ticks(&stat))
            else {
                continue;
            };
            if let Some(i) = nodes
                .iter()
                .position(|n| n.postmaster == pid || n.postmaster == ppid)
            {
                ticks[i] += used;
            }
        }
        Self(ticks)
    }

    /// "coordinator 1,234, 127.0.0.1:9701 456, …" µs per row from `self`
    /// to `later`.
    pub fn describe(
        &self,
        later: &NodeTicks,
        nodes: &[Node],
        rows: u64,
        ticks_per_second: f64,
    ) -> String {
        let per_row = |ticks: u64| ticks as f64 / ticks_per_second * 1e6 / rows.max(1) as f64;
        let parts: Vec<String> = nodes
            .iter()
            .zip(self.0.iter().zip(&later.0))
            .map(|(node, (a, b))| format!("{} {:.0}", node.name, per_row(b.saturating_sub(*a))))
            .collect();
        format!("database CPU by node, µs/row: {}", parts.join(", "))
    }
}

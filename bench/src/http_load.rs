//! Drives a real `tally serve` over HTTP from many client tasks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::stats::{self, Stats};
use crate::workload::Rng;

#[derive(Clone)]
pub struct Target {
    pub client: reqwest::Client,
    pub base: String,
    pub key: String,
}

/// One request to send: path, body, and how many entries it carries.
pub struct Request {
    pub path: &'static str,
    pub body: Vec<u8>,
    pub rows: u64,
}

impl Target {
    pub fn new(base: String, key: String) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .timeout(Duration::from_secs(60))
            .build()?;
        Ok(Self { client, base, key })
    }

    pub async fn send(&self, req: &Request) -> anyhow::Result<u16> {
        let r = self
            .client
            .post(format!("{}{}", self.base, req.path))
            .bearer_auth(&self.key)
            .header("content-type", "application/json")
            .body(req.body.clone())
            .send()
            .await?;
        let status = r.status().as_u16();
        r.bytes().await?;
        Ok(status)
    }
}

/// Runs `clients` tasks for `duration`, each sending `make(rng)` in a loop.
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
            while Instant::now() < deadline {
                let req = make(&mut rng);
                let t0 = Instant::now();
                match target.send(&req).await {
                    Ok(200 | 201) => stats.rows += req.rows,
                    _ => stats.errors += 1,
                }
                stats.requests += 1;
                stats.latencies_us.push(t0.elapsed().as_micros() as u64);
            }
            stats
        }
    })
    .await
}

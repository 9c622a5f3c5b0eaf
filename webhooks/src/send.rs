//! One delivery attempt over HTTP.

use std::sync::Arc;
use std::time::Duration;

use crate::signature::sign;
use crate::store::{DeliveryRow, EndpointRow, Outcome};
use crate::url_guard::GuardedResolver;

/// The HTTP client of a process's deliveries: rustls, no redirects, no
/// proxy from the environment, names resolved through the SSRF guard
/// unless insecure endpoints are allowed.
pub fn client(allow_insecure: bool, timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(concat!("tally-webhooks/", env!("CARGO_PKG_VERSION")));
    if !allow_insecure {
        builder = builder
            .dns_resolver(Arc::new(GuardedResolver))
            .https_only(true);
    }
    builder.build()
}

/// What an attempt came to, and the receiver's `Retry-After`, if any.
pub struct Sent {
    pub outcome: Outcome,
    pub retry_after: Option<Duration>,
}

/// Sends `d` to `endpoint`, signed with its secrets at `now_seconds`.
pub async fn attempt(
    client: &reqwest::Client,
    endpoint: &EndpointRow,
    d: &DeliveryRow,
    now_micros: i64,
    allow_insecure: bool,
) -> Sent {
    let timestamp = now_micros.div_euclid(1_000_000);
    // An IP literal never reaches the resolver: checked here, at every send.
    if !allow_insecure {
        if let Some(why) = literal_refused(&endpoint.url) {
            return Sent {
                outcome: Outcome::Connection { error: why },
                retry_after: None,
            };
        }
    }
    let signature = sign(
        &endpoint.signing_secrets(now_micros),
        &d.event_id,
        timestamp,
        &d.payload,
    );
    let request = client
        .post(&endpoint.url)
        .header("content-type", "application/json")
        .header("webhook-id", &d.event_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(d.payload.clone());
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let outcome = match status {
                200..=299 => Outcome::Delivered { status },
                410 => Outcome::Gone,
                _ => Outcome::HttpStatus { status },
            };
            Sent {
                outcome,
                retry_after,
            }
        }
        Err(e) if e.is_timeout() => Sent {
            outcome: Outcome::Timeout,
            retry_after: None,
        },
        Err(e) => Sent {
            outcome: Outcome::Connection {
                error: error_chain(&e),
            },
            retry_after: None,
        },
    }
}

/// The error and its causes, one line (never the secret: it is in no URL).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn literal_refused(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let ip: std::net::IpAddr = match parsed.host()? {
        url::Host::Ipv4(ip) => ip.into(),
        url::Host::Ipv6(ip) => ip.into(),
        url::Host::Domain(_) => return None,
    };
    (!crate::url_guard::is_public(ip)).then(|| format!("{ip} is not a public address (SSRF guard)"))
}

//! Where a delivery may go (SSRF): an endpoint is `https://` and never
//! reaches a loopback, private, link-local, shared, multicast or metadata
//! address, unless the operator allows insecure endpoints
//! (`--webhook-allow-insecure`: tests, on-premises receivers).
//!
//! The address is checked where the connection is made, not only when the
//! endpoint is created: deliveries resolve names through [`GuardedResolver`],
//! which drops forbidden addresses, so a name that later resolves to
//! `127.0.0.1` (DNS rebinding) reaches nothing. Redirects are not followed
//! ([`crate::send`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether a delivery may connect to `ip`.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254/16: cloud metadata (169.254.169.254) too
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local (fd00:ec2::254, metadata)
        || (first & 0xffc0) == 0xfe80 // link-local
        || (first & 0xffc0) == 0xfec0 // site-local (deprecated)
        || first == 0x2001 && ip.segments()[1] == 0x0db8 // documentation
        || first == 0x0064 && ip.segments()[1] == 0xff9b) // NAT64 of any v4
}

/// Why an endpoint URL is refused; `None` if it is acceptable.
/// `allow_insecure` admits `http://` and any address. A name is not
/// resolved here (it may resolve elsewhere tomorrow): every connection of a
/// delivery resolves it through [`GuardedResolver`]; an address literal and
/// `localhost` are refused at once.
pub fn refuse_url(url: &str, allow_insecure: bool) -> Option<String> {
    if url.len() > 2048 {
        return Some("must be at most 2048 bytes".into());
    }
    let parsed = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(e) => return Some(format!("is not an absolute URL ({e})")),
    };
    match parsed.scheme() {
        "https" => {}
        "http" if allow_insecure => {}
        "http" => {
            return Some(
                "must be https:// (http:// only with the server's --webhook-allow-insecure)".into(),
            )
        }
        other => return Some(format!("has scheme {other}: must be https://")),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Some("must not carry credentials".into());
    }
    if parsed.fragment().is_some() {
        return Some("must not have a fragment".into());
    }
    let Some(host) = parsed.host() else {
        return Some("has no host".into());
    };
    if allow_insecure {
        return None;
    }
    let ip: IpAddr = match host {
        url::Host::Ipv4(ip) => ip.into(),
        url::Host::Ipv6(ip) => ip.into(),
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.');
            if name.eq_ignore_ascii_case("localhost")
                || name.to_ascii_lowercase().ends_with(".localhost")
            {
                return Some("must not name this host (localhost)".into());
            }
            return None;
        }
    };
    (!is_public(ip)).then(|| {
        format!("names {ip}, a loopback, private, link-local or reserved address (refused: SSRF)")
    })
}

/// Resolves names for deliveries, keeping public addresses only.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver;

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0))
                .await?
                .filter(|a| is_public(a.ip()))
                .collect();
            if found.is_empty() {
                return Err(format!(
                    "{} resolves to no public address (refused: SSRF guard)",
                    name.as_str()
                )
                .into());
            }
            Ok(Box::new(found.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn urls_are_refused_unless_https_to_a_public_address() {
        for url in [
            "http://example.com/hook",
            "https://127.0.0.1/hook",
            "https://10.0.0.5:8443/hook",
            "https://[::1]/hook",
            "https://169.254.169.254/latest/meta-data",
            "https://localhost/hook",
            "https://user:pw@example.com/hook",
            "ftp://example.com/",
            "not a url",
        ] {
            assert!(refuse_url(url, false).is_some(), "{url}");
        }
        assert_eq!(refuse_url("https://93.184.216.34/hook", false), None);
        assert_eq!(refuse_url("https://hooks.example.com/tally", false), None);
        // The insecure setting admits http:// and loopback (tests, on-premises).
        assert_eq!(refuse_url("http://127.0.0.1:9/hook", true), None);
        assert!(refuse_url("ftp://127.0.0.1/", true).is_some());
    }
}

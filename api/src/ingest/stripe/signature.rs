//! Stripe's webhook signature: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=…]`,
//! each `v1` an HMAC-SHA256 of `"<t>.<raw body>"` under an endpoint's
//! signing secret (Stripe's "Check the webhook signatures"). Any `v1` made
//! with any configured secret is accepted, so secrets can rotate; the
//! comparison is constant-time (`Mac::verify_slice`).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How old a signature may be, by default (Stripe's own libraries: 300 s).
pub const DEFAULT_TOLERANCE_SECONDS: i64 = 300;

/// Why a delivery is refused; nothing about the secrets is said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the Stripe-Signature header is missing")]
    Missing,
    #[error("the Stripe-Signature header is not t=<unix>,v1=<hex>")]
    Malformed,
    #[error("the signature is {age} s old, more than the tolerance of {tolerance} s")]
    Stale { age: i64, tolerance: i64 },
    #[error("no v1 signature matches a signing secret of this endpoint")]
    NoMatch,
}

/// Checks `header` over `body` against `secrets` at `now` (unix seconds).
pub fn verify(
    header: Option<&str>,
    body: &[u8],
    secrets: &[String],
    now: i64,
    tolerance: i64,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let mut timestamp: Option<&str> = None;
    let mut signatures: Vec<Vec<u8>> = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = Some(t),
            // A v1 that is not hex cannot match; other schemes (v0) are
            // Stripe's test-only signatures and are ignored, as its
            // libraries do.
            Some(("v1", hex_digits)) => {
                if let Ok(bytes) = hex::decode(hex_digits) {
                    signatures.push(bytes);
                }
            }
            _ => {}
        }
    }
    let t = timestamp.ok_or(SignatureError::Malformed)?;
    let seconds: i64 = t.parse().map_err(|_| SignatureError::Malformed)?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed);
    }
    let age = now - seconds;
    // A timestamp from the future is as suspect as an old one.
    if age.abs() > tolerance {
        return Err(SignatureError::Stale { age, tolerance });
    }
    for secret in secrets {
        for signature in &signatures {
            let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
                continue;
            };
            mac.update(t.as_bytes());
            mac.update(b".");
            mac.update(body);
            if mac.verify_slice(signature).is_ok() {
                return Ok(());
            }
        }
    }
    Err(SignatureError::NoMatch)
}

/// The header Stripe would send for `body` at `t` under `secret` (tests and
/// the documentation's examples).
pub fn sign(body: &[u8], secret: &str, t: i64) -> String {
    // HMAC takes a key of any length.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;

    fn secrets() -> Vec<String> {
        vec!["whsec_old".into(), "whsec_new".into()]
    }

    #[test]
    fn any_configured_secret_signs() {
        let body = br#"{"id":"evt_1"}"#;
        for secret in ["whsec_old", "whsec_new"] {
            let header = sign(body, secret, NOW);
            assert_eq!(verify(Some(&header), body, &secrets(), NOW, 300), Ok(()));
        }
        // Several v1 values: one matching is enough.
        let header = format!("{},v1=00ff,v0=abc", sign(body, "whsec_new", NOW));
        assert_eq!(verify(Some(&header), body, &secrets(), NOW, 300), Ok(()));
    }

    #[test]
    fn a_wrong_secret_an_altered_body_or_a_stale_time_is_refused() {
        let body = br#"{"id":"evt_1"}"#;
        let wrong = sign(body, "whsec_other", NOW);
        assert_eq!(
            verify(Some(&wrong), body, &secrets(), NOW, 300),
            Err(SignatureError::NoMatch)
        );
        let good = sign(body, "whsec_new", NOW);
        assert_eq!(
            verify(Some(&good), br#"{"id":"evt_2"}"#, &secrets(), NOW, 300),
            Err(SignatureError::NoMatch)
        );
        assert_eq!(
            verify(Some(&good), body, &secrets(), NOW + 300, 300),
            Ok(())
        );
        assert!(matches!(
            verify(Some(&good), body, &secrets(), NOW + 301, 300),
            Err(SignatureError::Stale { age: 301, .. })
        ));
        // Signed in the future, by a clock ahead of this one: the same bound.
        assert_eq!(
            verify(Some(&good), body, &secrets(), NOW - 300, 300),
            Ok(())
        );
        assert!(matches!(
            verify(Some(&good), body, &secrets(), NOW - 301, 300),
            Err(SignatureError::Stale { age: -301, .. })
        ));
        assert_eq!(
            verify(None, body, &secrets(), NOW, 300),
            Err(SignatureError::Missing)
        );
        for header in ["", "t=abc,v1=00", "v1=00", &format!("t={NOW}")] {
            assert_eq!(
                verify(Some(header), body, &secrets(), NOW, 300),
                Err(SignatureError::Malformed),
                "{header}"
            );
        }
    }
}

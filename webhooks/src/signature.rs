//! Secrets and signatures per the Standard Webhooks specification:
//! `webhook-signature: v1,<base64 HMAC-SHA256 over "{id}.{timestamp}.{body}">`,
//! keyed with the secret's decoded bytes; several space-separated during a
//! rotation.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Random bytes of a new secret (the specification allows 24–64).
pub const SECRET_BYTES: usize = 32;
pub const SECRET_PREFIX: &str = "whsec_";

/// A new secret: `whsec_` + base64 of [`SECRET_BYTES`] random bytes.
pub fn new_secret() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes)))
}

/// The key bytes of a secret; `None` if it is not `whsec_` + base64.
fn key_bytes(secret: &str) -> Option<Vec<u8>> {
    STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()
}

/// `v1,<signature>` of one message under each secret, space-separated.
/// Secrets that do not decode (never written by tally) are skipped.
pub fn sign(secrets: &[&str], id: &str, timestamp: i64, body: &str) -> String {
    let mut out = Vec::with_capacity(secrets.len());
    for secret in secrets {
        let Some(key) = key_bytes(secret) else {
            continue;
        };
        // HMAC takes a key of any length: `new_from_slice` cannot fail here.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key) else {
            continue;
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body.as_bytes());
        out.push(format!(
            "v1,{}",
            STANDARD.encode(mac.finalize().into_bytes())
        ));
    }
    out.join(" ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_vector_of_the_specification() {
        let signature = sign(
            &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_rotation_signs_with_both_and_secrets_are_random() {
        let a = new_secret().unwrap();
        let b = new_secret().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("whsec_"));
        assert_eq!(key_bytes(&a).unwrap().len(), SECRET_BYTES);
        let both = sign(&[&a, &b], "evt_1", 1, "{}");
        let parts: Vec<&str> = both.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], sign(&[&a], "evt_1", 1, "{}"));
        assert_eq!(parts[1], sign(&[&b], "evt_1", 1, "{}"));
    }
}

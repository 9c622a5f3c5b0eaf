//! Lower-case hex text of hashes and fingerprints, written into a string of
//! the right size and compared without allocating.
//!
//! Every answer, appended entry and verified entry carries such text; the
//! `hex` crate builds it one `char` at a time through an iterator, which
//! was ~1 % of the server's CPU under 100 % replays in the benchmark.
//! The text is the same.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends the lower-case hex text of `bytes` to `out`.
pub fn push_lower_hex(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
}

/// The lower-case hex text of `bytes`.
pub fn lower_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_lower_hex(&mut out, bytes);
    out
}

/// Whether `text` is exactly the lower-case hex text of `bytes`, as
/// `lower_hex(bytes) == text` would say.
pub fn is_lower_hex_of(text: &str, bytes: &[u8]) -> bool {
    text.len() == bytes.len() * 2
        && text.as_bytes().chunks_exact(2).zip(bytes).all(|(pair, b)| {
            pair[0] == DIGITS[usize::from(b >> 4)] && pair[1] == DIGITS[usize::from(b & 0x0f)]
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_text_as_the_hex_crate() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(lower_hex(&bytes), hex::encode(&bytes));
        assert_eq!(lower_hex(&[]), "");
    }

    #[test]
    fn comparison_is_exact() {
        let bytes = [0x00, 0xab, 0xff, 0x10];
        assert!(is_lower_hex_of("00abff10", &bytes));
        assert!(
            !is_lower_hex_of("00ABFF10", &bytes),
            "upper case is other text"
        );
        assert!(!is_lower_hex_of("00abff1", &bytes));
        assert!(!is_lower_hex_of("00abff100", &bytes));
        assert!(!is_lower_hex_of("00abff11", &bytes));
        assert!(is_lower_hex_of("", &[]));
    }
}

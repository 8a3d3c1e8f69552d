//! Avro "bombs" for the poison-record tests: small datums that claim millions of items, with
//! the writer schemas to register for them, and the zigzag varints they are written in.

/// `{"type":"array","items":{"type":"array","items":"null"}}`: arrays of items that take
/// no bytes, which the dispatcher's schema check refuses.
pub const NULLS_SCHEMA: &str = r#"{"type":"array","items":{"type":"array","items":"null"}}"#;

/// `{"type":"array","items":{"type":"array","items":"boolean"}}`: the same shape with
/// items of a byte, which only the decoding budget refuses.
pub const BOOLEANS_SCHEMA: &str = r#"{"type":"array","items":{"type":"array","items":"boolean"}}"#;

/// The zigzag varint of `n`, as Avro writes longs and counts.
pub fn zigzag(n: i64) -> Vec<u8> {
    let mut zigzag = ((n << 1) ^ (n >> 63)) as u64;
    let mut out = Vec::new();
    loop {
        let byte = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// The reviewer's bomb, a [`NULLS_SCHEMA`] datum: 20,000 arrays of 290,000 nulls in 80 KB.
pub fn nulls_bomb() -> Vec<u8> {
    let nothing = [zigzag(290_000), zigzag(0)].concat();
    [zigzag(20_000), nothing.repeat(20_000), zigzag(0)].concat()
}

/// A [`BOOLEANS_SCHEMA`] datum: 9,000 arrays of 100 booleans, 920 KB, over 50 MB decoded.
pub fn booleans_bomb() -> Vec<u8> {
    let inner = [zigzag(100), vec![1; 100], zigzag(0)].concat();
    [zigzag(9_000), inner.repeat(9_000), zigzag(0)].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_zigzag_encoded() {
        assert_eq!(zigzag(0), [0]);
        assert_eq!(zigzag(-1), [1]);
        assert_eq!(zigzag(1), [2]);
        assert_eq!(zigzag(64), [0x80, 0x01]);
        assert_eq!(zigzag(290_000), [0xa0, 0xb3, 0x23]);
        assert!(nulls_bomb().len() < 81_000);
        assert!(booleans_bomb().len() < 1_000_000);
    }
}

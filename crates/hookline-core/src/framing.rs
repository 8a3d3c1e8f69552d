//! The Confluent wire format of a registry-framed value: the magic byte 0, the writer
//! schema's id as 4 big-endian bytes, then the Avro datum. Every framed value hookline
//! writes or reads goes through these three functions.

/// The first byte of a framed value.
pub const MAGIC: u8 = 0;

/// Length of the prefix before the datum: the magic byte and the schema id.
pub const FRAMING_LEN: usize = 5;

/// Starts a framed value for schema `schema_id` in a buffer with room for `datum_len` bytes
/// of datum, which the caller appends.
pub fn start(schema_id: u32, datum_len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAMING_LEN.saturating_add(datum_len));
    out.push(MAGIC);
    out.extend_from_slice(&schema_id.to_be_bytes());
    out
}

/// `datum` framed for schema `schema_id`.
pub fn frame(schema_id: u32, datum: &[u8]) -> Vec<u8> {
    let mut out = start(schema_id, datum.len());
    out.extend_from_slice(datum);
    out
}

/// The schema id and the datum of a framed value; `None` when `bytes` is shorter than the
/// prefix or does not start with the magic byte.
pub fn split(bytes: &[u8]) -> Option<(u32, &[u8])> {
    match bytes {
        [MAGIC, a, b, c, d, datum @ ..] => Some((u32::from_be_bytes([*a, *b, *c, *d]), datum)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_magic_zero_a_big_endian_id_and_the_datum() {
        assert_eq!(frame(258, b"ab"), [0, 0, 0, 1, 2, b'a', b'b']);
        assert_eq!(split(&[0, 0, 0, 1, 2, 9, 9]), Some((258, &[9, 9][..])));
        assert_eq!(split(&[0, 0, 0, 0, 7]), Some((7, &[][..])));
        for bytes in [
            &b""[..],
            &[0],
            &[0, 0, 0, 1],
            &[1, 0, 0, 0, 1, 2],
            b"{\"a\":1}",
        ] {
            assert_eq!(split(bytes), None, "{bytes:?}");
        }
        let started = start(7, 3);
        assert_eq!(
            (started.len(), started.capacity() >= FRAMING_LEN + 3),
            (5, true)
        );
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzz::config(256))]

        #[test]
        fn split_reads_what_frame_writes(datum in crate::fuzz::bytes(), id in proptest::prelude::any::<u32>()) {
            let framed = frame(id, &datum);
            proptest::prop_assert_eq!(split(&framed), Some((id, &datum[..])));
            let is_framed = datum.len() >= FRAMING_LEN && datum[0] == MAGIC;
            proptest::prop_assert_eq!(split(&datum).is_some(), is_framed);
        }
    }
}

//! An attempt record's Avro datum, written field by field in the order of the attempt
//! schema (`webhook_attempt.v2.avsc`). One record is written per attempt, and apache-avro's
//! schema-aware serialiser looked every field up by name (2.5% of the dispatcher's CPU in
//! the pipeline's profile); the schema is ours and fixed, so its binary form is written
//! here directly: ints and longs zig-zag varints, strings length-prefixed, the enum its
//! index, a nullable field its union branch (0 null, 1 the value) then the value. The
//! tests check the bytes against apache-avro's encoding of the same record.

use super::{AttemptRecord, avro_int};

/// Appends `record`'s datum to `out`.
pub(super) fn write(record: &AttemptRecord, out: &mut Vec<u8>) {
    string(out, &record.event_id);
    opt_string(out, record.tenant_id.as_deref());
    opt_string(out, record.endpoint_id.as_deref());
    long(out, i64::from(record.kind.index()));
    long(out, i64::from(avro_int(record.attempt)));
    long(out, record.timestamp_ms);
    opt_long(out, record.duration_ms);
    opt_long(out, record.http_status.map(i64::from));
    opt_string(out, record.error_kind.as_deref());
    opt_string(out, record.response_excerpt.as_deref());
    opt_string(out, record.tier.as_deref());
    opt_string(out, record.reason.as_deref());
    opt_long(out, record.deliveries.map(|n| i64::from(avro_int(n))));
    string(out, &record.dispatcher_id);
    opt_string(out, record.trace_id.as_deref());
    opt_long(out, record.published_at_ms);
    opt_string(out, record.redriven_from.as_deref());
}

/// An Avro `int` or `long`: zig-zag, then 7 bits a byte, lowest first.
fn long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)).cast_unsigned();
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn string(out: &mut Vec<u8>, s: &str) {
    long(out, i64::try_from(s.len()).unwrap_or(i64::MAX));
    out.extend_from_slice(s.as_bytes());
}

fn opt_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => long(out, 0),
        Some(s) => {
            long(out, 1);
            string(out, s);
        }
    }
}

fn opt_long(out: &mut Vec<u8>, n: Option<i64>) {
    match n {
        None => long(out, 0),
        Some(n) => {
            long(out, 1);
            long(out, n);
        }
    }
}

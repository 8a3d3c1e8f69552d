use super::*;
use crate::framing::FRAMING_LEN;
use crate::schema::{WEBHOOK_ATTEMPT_V1, WEBHOOK_ATTEMPT_V2};

fn full() -> AttemptRecord {
    AttemptRecord {
        event_id: "evt-1".to_owned(),
        tenant_id: Some("acme".to_owned()),
        endpoint_id: Some("ep-1".to_owned()),
        kind: AttemptKind::Attempt,
        attempt: 2,
        timestamp_ms: 1_700_000_000_123,
        duration_ms: Some(37),
        http_status: Some(500),
        error_kind: Some("http_5xx".to_owned()),
        response_excerpt: Some("boom".to_owned()),
        tier: Some("5s".to_owned()),
        reason: Some("http_5xx".to_owned()),
        deliveries: Some(3),
        dispatcher_id: "d-1".to_owned(),
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".to_owned()),
        published_at_ms: Some(1_700_000_000_000),
        redriven_from: Some("ev.dlq/0/7".to_owned()),
    }
}

fn minimal() -> AttemptRecord {
    AttemptRecord {
        event_id: "evt-2".to_owned(),
        tenant_id: None,
        endpoint_id: None,
        kind: AttemptKind::FannedOut,
        attempt: 0,
        timestamp_ms: 5,
        duration_ms: None,
        http_status: None,
        error_kind: None,
        response_excerpt: None,
        tier: None,
        reason: None,
        deliveries: None,
        dispatcher_id: "d-1".to_owned(),
        trace_id: None,
        published_at_ms: None,
        redriven_from: None,
    }
}

#[test]
fn records_round_trip_through_the_schema_file() {
    let file = Schema::parse_str(WEBHOOK_ATTEMPT_V2).expect("the schema file parses");
    for kind in AttemptKind::ALL {
        for record in [full(), minimal()] {
            let record = AttemptRecord { kind, ..record };
            assert!(record.to_avro_value().validate(&file), "{kind:?}");
            let framed = record.to_framed_avro(0x0102_0304).expect("encodes");
            let (id, datum) = AttemptRecord::split_framed(&framed).expect("framed");
            assert_eq!(id, 0x0102_0304);
            assert_eq!(
                AttemptRecord::from_avro_datum(datum, &file).expect("decodes"),
                record
            );
        }
    }
}

proptest::proptest! {
    #[test]
    fn the_written_datum_is_apache_avros(
        event_id in ".*",
        strings in proptest::collection::vec(proptest::option::of(".*"), 7),
        kind in 0..5usize,
        attempt in proptest::prelude::any::<u32>(),
        timestamp_ms in proptest::prelude::any::<i64>(),
        duration_ms in proptest::option::of(proptest::prelude::any::<i64>()),
        http_status in proptest::option::of(proptest::prelude::any::<u16>()),
        deliveries in proptest::option::of(proptest::prelude::any::<u32>()),
        dispatcher_id in ".*",
        published_at_ms in proptest::option::of(proptest::prelude::any::<i64>()),
    ) {
        let record = AttemptRecord {
            event_id,
            tenant_id: strings[0].clone(),
            endpoint_id: strings[1].clone(),
            kind: AttemptKind::ALL[kind],
            attempt,
            timestamp_ms,
            duration_ms,
            http_status,
            error_kind: strings[2].clone(),
            response_excerpt: strings[3].clone(),
            tier: strings[4].clone(),
            reason: strings[5].clone(),
            deliveries,
            dispatcher_id,
            trace_id: strings[6].clone(),
            published_at_ms,
            redriven_from: strings[0].clone().map(|s| s + "/0/1"),
        };
        let framed = record.to_framed_avro(7).expect("encodes");
        let by_apache_avro =
            crate::avro_util::encode(webhook_attempt_schema(), record.to_avro_value())
                .expect("the value encodes");
        proptest::prop_assert_eq!(&framed[FRAMING_LEN..], &by_apache_avro[..]);
    }
}

#[test]
fn the_written_datum_is_the_value_datum() {
    let schema = crate::schema::webhook_attempt_schema();
    for kind in AttemptKind::ALL {
        for record in [full(), minimal()] {
            let record = AttemptRecord { kind, ..record };
            let framed = record.to_framed_avro(7).expect("encodes");
            let by_value = crate::avro_util::encode(schema, record.to_avro_value())
                .expect("the value encodes");
            assert_eq!(&framed[FRAMING_LEN..], by_value, "{kind:?}");
        }
    }
}

#[test]
fn every_field_and_kind_is_documented() {
    let Schema::Record(record) = Schema::parse_str(WEBHOOK_ATTEMPT_V2).expect("parses") else {
        panic!("not a record");
    };
    assert_eq!(record.name.fullname(None), "dev.hookline.WebhookAttempt");
    for field in &record.fields {
        assert!(field.doc.is_some(), "field {} has no doc", field.name);
    }
    let kind = record
        .fields
        .iter()
        .find(|f| f.name == "kind")
        .expect("kind");
    let Schema::Enum(symbols) = &kind.schema else {
        panic!("kind is not an enum");
    };
    let ours: Vec<&str> = AttemptKind::ALL.iter().map(|k| k.symbol()).collect();
    assert_eq!(symbols.symbols, ours, "the enum's order is the index order");
}

#[test]
fn bad_bytes_are_errors_not_panics() {
    let file = webhook_attempt_schema();
    for bytes in [
        &b""[..],
        b"\x02",
        b"\xff\xff\xff\xff\xff\xff",
        b"\x00\x00\x00",
    ] {
        assert!(AttemptRecord::from_avro_datum(bytes, file).is_err());
    }
    assert!(AttemptRecord::split_framed(b"\x01\x00\x00\x00\x01x").is_err());
    assert!(AttemptRecord::split_framed(b"\x00\x00").is_err());
    let mut datum = full().to_framed_avro(1).expect("encodes");
    datum.push(0);
    assert!(matches!(
        AttemptRecord::from_avro_datum(&datum[FRAMING_LEN..], file),
        Err(AttemptLogError::TrailingBytes(1))
    ));
}

#[test]
fn the_excerpt_is_bounded_at_a_char_boundary() {
    assert_eq!(excerpt(b"", 1024), None);
    assert_eq!(excerpt(b"abc", 0), None);
    assert_eq!(excerpt(b"short", 1024).as_deref(), Some("short"));
    let body = "é".repeat(2000);
    let cut = excerpt(body.as_bytes(), 1023).expect("an excerpt");
    assert_eq!(cut.len(), 1022, "a whole number of two-byte chars");
    assert!(body.starts_with(&cut));
    let big = vec![b'x'; 1_000_000];
    assert_eq!(excerpt(&big, 1024).map(|s| s.len()), Some(1024));
    assert_eq!(
        excerpt(b"\xff\xfeok", 64).as_deref(),
        Some("\u{fffd}\u{fffd}ok")
    );
}

#[test]
fn the_excerpt_never_holds_a_query_string_or_user_info() {
    let body = br#"{"error":"bad","next":"https://u:pw@api.example.com/retry?token=s3cret#frag", "docs": HTTP://example.org/x?sig=abc}"#;
    let text = excerpt(body, 1024).expect("an excerpt");
    for secret in ["s3cret", "token=", "pw@", "frag", "sig=abc"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(
        text.contains("https://api.example.com/retry?redacted"),
        "{text}"
    );
    assert!(text.starts_with(r#"{"error":"bad""#), "{text}");
    // A URL that the bound cuts is still redacted before the cut.
    let long = format!("see https://example.com/p?token={}", "t".repeat(3000));
    let text = excerpt(long.as_bytes(), 40).expect("an excerpt");
    assert!(!text.contains("token"), "{text}");
}

#[test]
fn murmur2_matches_kafka() {
    // The vectors of Kafka's own UtilsTest.testMurmur2.
    for (key, hash) in [
        ("21", -973_932_308_i32),
        ("foobar", -790_332_482),
        ("a-little-bit-long-string", -985_981_536),
        ("a-little-bit-longer-string", -1_486_304_829),
        (
            "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            -58_897_971,
        ),
        ("abc", 479_470_107),
    ] {
        assert_eq!(murmur2(key.as_bytes()).cast_signed(), hash, "{key}");
    }
}

#[test]
fn partitions_are_in_range() {
    assert_eq!(partition_for(b"x", 0), None);
    assert_eq!(partition_for(b"x", -1), None);
    for n in [1, 3, 6, 7] {
        for key in ["evt-1", "evt-2", "", "a-little-bit-long-string"] {
            let p = partition_for(key.as_bytes(), n).expect("a partition");
            assert!((0..n).contains(&p));
        }
    }
    // 21 hashes to -973932308: positive part 1173551340, % 6 = 0.
    assert_eq!(partition_for(b"21", 6), Some(0));
}

/// A record written with version 1 (by a dispatcher from before version 2) reads as version
/// 2 with the new fields `None`, from its datum and from the registry's decoded value.
#[test]
fn version_1_records_stay_readable() {
    let v1 = Schema::parse_str(WEBHOOK_ATTEMPT_V1).expect("v1 parses");
    let record = AttemptRecord {
        published_at_ms: None,
        redriven_from: None,
        ..full()
    };
    let mut value = record.to_avro_value();
    if let Value::Record(fields) = &mut value {
        fields.retain(|(name, _)| name != "published_at" && name != "redriven_from");
    }
    assert!(value.validate(&v1), "a version 1 value");
    let datum = crate::avro_util::encode(&v1, value.clone()).expect("encodes with v1");
    assert_eq!(
        AttemptRecord::from_avro_datum(&datum, &v1).expect("decodes"),
        record
    );
    assert_eq!(
        AttemptRecord::from_avro_value(value).expect("reads"),
        record
    );
}

/// Version 2 only adds nullable fields with a null default to version 1, so that records of
/// both versions read with either schema (the registry's BACKWARD and FORWARD rules).
#[test]
fn version_2_is_version_1_plus_nullable_fields() {
    let fields = |text: &str| match Schema::parse_str(text).expect("parses") {
        Schema::Record(record) => record.fields,
        _ => panic!("not a record"),
    };
    let (v1, v2) = (fields(WEBHOOK_ATTEMPT_V1), fields(WEBHOOK_ATTEMPT_V2));
    for (old, new) in v1.iter().zip(&v2) {
        assert_eq!(old.name, new.name);
        assert_eq!(old.schema, new.schema, "{}", old.name);
    }
    let added: Vec<&str> = v2[v1.len()..].iter().map(|f| f.name.as_str()).collect();
    assert_eq!(added, ["published_at", "redriven_from"]);
    for field in &v2[v1.len()..] {
        assert_eq!(
            field.default,
            Some(serde_json::Value::Null),
            "{}",
            field.name
        );
        assert!(matches!(field.schema, Schema::Union(_)), "{}", field.name);
    }
    let full = full();
    let datum = crate::avro_util::encode(webhook_attempt_schema(), full.to_avro_value())
        .expect("encodes with v2");
    let v1 = Schema::parse_str(WEBHOOK_ATTEMPT_V1).expect("v1 parses");
    let (old, _) = crate::avro_util::decode(&datum, webhook_attempt_schema(), &v1)
        .expect("a v1 reader reads a v2 record");
    assert!(old.validate(&v1));
}

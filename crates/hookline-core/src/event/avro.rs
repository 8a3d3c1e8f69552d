//! The Avro encoding of [`WebhookEvent`] (schema `schemas/webhook_event.v3.avsc`, which
//! also reads records written with `v1` and `v2`).

use std::collections::{BTreeMap, HashMap};

use apache_avro::Schema;
use apache_avro::types::Value;

use super::{DEFAULT_CONTENT_TYPE, EventError, WebhookEvent};
use crate::avro_util::{CachedWriter, RecordFields, decode, nullable, strip_union};

/// The event schema's writer, built once.
static WRITER: CachedWriter = CachedWriter::new();
use crate::schema::webhook_event_schema;

impl WebhookEvent {
    /// The event as an Avro value of the `WebhookEvent` v3 schema.
    pub fn to_avro_value(&self) -> Value {
        let headers: HashMap<String, Value> = self
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        Value::Record(vec![
            ("event_id".into(), Value::String(self.event_id.clone())),
            ("event_type".into(), Value::String(self.event_type.clone())),
            (
                "endpoint_id".into(),
                nullable(self.endpoint_id.clone().map(Value::String)),
            ),
            (
                "endpoint_url".into(),
                nullable(self.endpoint_url.clone().map(Value::String)),
            ),
            ("payload".into(), Value::Bytes(self.payload.clone())),
            (
                "content_type".into(),
                Value::String(self.content_type.clone()),
            ),
            ("headers".into(), Value::Map(headers)),
            (
                "created_at".into(),
                Value::TimestampMillis(self.created_at_ms),
            ),
            (
                "tenant_id".into(),
                nullable(self.tenant_id.clone().map(Value::String)),
            ),
            (
                "channels".into(),
                Value::Array(self.channels.iter().cloned().map(Value::String).collect()),
            ),
            (
                "expires_at".into(),
                nullable(self.expires_at_ms.map(Value::TimestampMillis)),
            ),
        ])
    }

    /// Reads an event from an Avro record value. Unions may be wrapped or not; `created_at`
    /// may be a `long` or a `timestamp-millis`; absent `endpoint_url`, `content_type`,
    /// `headers`, `tenant_id`, `channels` and `expires_at` take their schema defaults (so a
    /// version 1 or 2 value reads). Does not [`validate`](Self::validate).
    pub fn from_avro_value(value: Value) -> Result<Self, EventError> {
        let mut f = RecordFields::new(value)?;
        let headers = match f.take("headers") {
            None => BTreeMap::new(),
            Some(Value::Map(map)) => map
                .into_iter()
                .map(|(k, v)| match strip_union(v) {
                    Value::String(s) => Ok((k, s)),
                    _ => Err(EventError::WrongType {
                        field: "headers",
                        expected: "a map of strings",
                    }),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(EventError::WrongType {
                    field: "headers",
                    expected: "a map of strings",
                });
            }
        };
        let channels = match f.take("channels") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|v| match strip_union(v) {
                    Value::String(s) => Ok(s),
                    _ => Err(EventError::WrongType {
                        field: "channels",
                        expected: "an array of strings",
                    }),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(EventError::WrongType {
                    field: "channels",
                    expected: "an array of strings",
                });
            }
        };
        Ok(WebhookEvent {
            event_id: f.string("event_id")?,
            event_type: f.string("event_type")?,
            endpoint_id: f.opt_string("endpoint_id")?,
            tenant_id: f.opt_string("tenant_id")?,
            channels,
            endpoint_url: f.opt_string("endpoint_url")?,
            payload: f.bytes("payload")?,
            content_type: f
                .opt_string("content_type")?
                .unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_owned()),
            headers,
            created_at_ms: f.long("created_at")?,
            expires_at_ms: f.opt_long("expires_at")?,
        })
    }

    /// The event as an Avro datum (no container, no registry framing) of the v3 schema.
    pub fn to_avro_datum(&self) -> Result<Vec<u8>, EventError> {
        WRITER
            .encode(webhook_event_schema(), self.to_avro_value())
            .map_err(EventError::Avro)
    }

    /// Decodes an Avro datum written with `writer_schema` (e.g. fetched from the registry
    /// by the framed schema id), resolving it into the v3 schema.
    pub fn from_avro_datum(datum: &[u8], writer_schema: &Schema) -> Result<Self, EventError> {
        let (value, rest) =
            decode(datum, writer_schema, webhook_event_schema()).map_err(EventError::Avro)?;
        if rest > 0 {
            return Err(EventError::TrailingBytes(rest));
        }
        Self::from_avro_value(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avro_util::encode;
    use crate::event::tests::sample;

    #[test]
    fn datum_round_trip() {
        let event = sample();
        let datum = event.to_avro_datum().expect("encode");
        let back = WebhookEvent::from_avro_datum(&datum, webhook_event_schema()).expect("decode");
        assert_eq!(back, event);
    }

    #[test]
    fn round_trip_without_url_and_headers() {
        let event = WebhookEvent {
            endpoint_url: None,
            headers: BTreeMap::new(),
            payload: vec![0, 159, 146, 150],
            content_type: "application/octet-stream".into(),
            ..sample()
        };
        let datum = event.to_avro_datum().expect("encode");
        let back = WebhookEvent::from_avro_datum(&datum, webhook_event_schema()).expect("decode");
        assert_eq!(back, event);
    }

    #[test]
    fn value_validates_against_schema() {
        assert!(sample().to_avro_value().validate(webhook_event_schema()));
    }

    #[test]
    fn accepts_plain_long_bare_optionals_and_defaults() {
        let value = Value::Record(vec![
            ("event_id".into(), Value::String("e".into())),
            ("event_type".into(), Value::String("t".into())),
            ("endpoint_id".into(), Value::String("ep".into())),
            (
                "endpoint_url".into(),
                Value::String("https://x.test/".into()),
            ),
            ("payload".into(), Value::Bytes(b"{}".to_vec())),
            ("created_at".into(), Value::Long(5)),
        ]);
        let event = WebhookEvent::from_avro_value(value).expect("decode");
        assert_eq!(event.created_at_ms, 5);
        assert_eq!(event.endpoint_url.as_deref(), Some("https://x.test/"));
        assert_eq!(event.content_type, DEFAULT_CONTENT_TYPE);
        assert!(event.headers.is_empty());
    }

    /// A datum written with the version 1 schema reads as a delivery without tenant or
    /// channels; a tenant event round-trips.
    #[test]
    fn version_1_datums_read_and_tenant_events_round_trip() {
        let v1 = Schema::parse_str(crate::schema::WEBHOOK_EVENT_V1).expect("v1");
        let Value::Record(fields) = sample().to_avro_value() else {
            panic!("not a record");
        };
        let v1_value = Value::Record(
            fields
                .into_iter()
                .filter(|(name, _)| {
                    !["tenant_id", "channels", "expires_at"].contains(&name.as_str())
                })
                .map(|(name, value)| match (name.as_str(), value) {
                    ("endpoint_id", Value::Union(_, inner)) => (name, *inner),
                    (_, value) => (name, value),
                })
                .collect(),
        );
        let datum = encode(&v1, v1_value).expect("a v1 datum");
        let event = WebhookEvent::from_avro_datum(&datum, &v1).expect("v1 reads");
        assert_eq!(event.endpoint_id.as_deref(), Some("ep_1"));
        assert_eq!(
            (event.tenant_id, event.channels),
            (None, Vec::<String>::new())
        );
        let tenant_event = WebhookEvent {
            endpoint_id: None,
            channels: vec!["eu".into(), "beta".into()],
            ..sample()
        };
        let datum = tenant_event.to_avro_datum().expect("encode");
        let back = WebhookEvent::from_avro_datum(&datum, webhook_event_schema()).expect("decode");
        assert_eq!(back, tenant_event);
    }

    /// A datum written with the version 2 schema (a producer not yet upgraded) reads with
    /// the v3 reader without a deadline; a v2 reader reads a v3 datum, the deadline aside.
    #[test]
    fn version_2_datums_read_without_a_deadline_and_v2_reads_v3() {
        let v2 = Schema::parse_str(crate::schema::WEBHOOK_EVENT_V2).expect("v2");
        let Value::Record(fields) = sample().to_avro_value() else {
            panic!("not a record");
        };
        let v2_value = Value::Record(
            fields
                .into_iter()
                .filter(|(name, _)| name != "expires_at")
                .collect(),
        );
        let datum = encode(&v2, v2_value).expect("a v2 datum");
        let event = WebhookEvent::from_avro_datum(&datum, &v2).expect("v2 reads");
        assert_eq!(
            event,
            WebhookEvent {
                expires_at_ms: None,
                ..sample()
            }
        );
        let v3_datum = sample().to_avro_datum().expect("encode");
        let (value, rest) = decode(&v3_datum, webhook_event_schema(), &v2).expect("resolve");
        assert_eq!(rest, 0);
        let old = WebhookEvent::from_avro_value(value).expect("a v2 reader's value");
        assert_eq!(old.expires_at_ms, None);
        assert_eq!(old.event_id, sample().event_id);
        let back = WebhookEvent::from_avro_datum(&v3_datum, webhook_event_schema()).expect("v3");
        assert_eq!(back.expires_at_ms, Some(1_700_000_600_000));
    }

    #[test]
    fn reader_schema_fills_defaults_of_an_older_writer() {
        let writer = Schema::parse_str(
            r#"{"type":"record","name":"WebhookEvent","namespace":"dev.hookline","fields":[
                {"name":"event_id","type":"string"},
                {"name":"event_type","type":"string"},
                {"name":"endpoint_id","type":"string"},
                {"name":"payload","type":"bytes"},
                {"name":"created_at","type":"long"}]}"#,
        )
        .expect("writer schema");
        let value = Value::Record(vec![
            ("event_id".into(), Value::String("e".into())),
            ("event_type".into(), Value::String("t".into())),
            ("endpoint_id".into(), Value::String("ep".into())),
            ("payload".into(), Value::Bytes(b"{}".to_vec())),
            ("created_at".into(), Value::Long(9)),
        ]);
        let datum = encode(&writer, value).expect("encode");
        let event = WebhookEvent::from_avro_datum(&datum, &writer).expect("decode");
        assert_eq!(event.endpoint_url, None);
        assert_eq!(event.content_type, DEFAULT_CONTENT_TYPE);
        assert_eq!(event.created_at_ms, 9);
    }

    #[test]
    fn errors_name_the_field() {
        let missing = Value::Record(vec![("event_id".into(), Value::String("e".into()))]);
        assert!(matches!(
            WebhookEvent::from_avro_value(missing),
            Err(EventError::MissingField {
                field: "event_type"
            })
        ));
        let Value::Record(mut fields) = sample().to_avro_value() else {
            panic!("not a record");
        };
        fields[4].1 = Value::String("not bytes".into());
        assert!(matches!(
            WebhookEvent::from_avro_value(Value::Record(fields)),
            Err(EventError::WrongType {
                field: "payload",
                ..
            })
        ));
        assert!(matches!(
            WebhookEvent::from_avro_value(Value::Null),
            Err(EventError::NotARecord)
        ));
    }

    #[test]
    fn garbage_and_trailing_bytes_are_errors() {
        let mut datum = sample().to_avro_datum().expect("encode");
        datum.push(0);
        assert!(matches!(
            WebhookEvent::from_avro_datum(&datum, webhook_event_schema()),
            Err(EventError::TrailingBytes(1))
        ));
        assert!(WebhookEvent::from_avro_datum(&[0xff; 3], webhook_event_schema()).is_err());
    }
}

/// Outside input never panics the Avro decoder nor makes it allocate what the datum only
/// claims: arbitrary bytes, valid datums with bytes edited and huge lengths spliced in, and
/// record values of any shape. A decoded event survives its own datum.
#[cfg(test)]
mod fuzz {
    use apache_avro::error::Details;
    use proptest::prelude::*;

    use super::*;
    use crate::event::tests::sample;
    use crate::fuzz::{
        avro_record, byte_edits, bytes, config, edited_bytes, edited_record, zigzag,
    };
    use crate::schema::MAX_AVRO_ALLOCATION_BYTES;

    const FIELDS: &[&str] = &[
        "event_id",
        "event_type",
        "endpoint_id",
        "endpoint_url",
        "payload",
        "content_type",
        "headers",
        "created_at",
        "tenant_id",
        "channels",
        "expires_at",
    ];

    fn check_datum(datum: &[u8]) -> Result<(), TestCaseError> {
        if let Ok(event) = WebhookEvent::from_avro_datum(datum, webhook_event_schema()) {
            let again = event.to_avro_datum().expect("a decoded event encodes");
            let back = WebhookEvent::from_avro_datum(&again, webhook_event_schema());
            prop_assert_eq!(back.ok(), Some(event));
        }
        Ok(())
    }

    fn check_value(value: Value) {
        if let Ok(event) = WebhookEvent::from_avro_value(value) {
            let _ = event.validate(1 << 20);
            let _ = event.to_avro_datum();
        }
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn arbitrary_bytes(datum in bytes()) {
            check_datum(&datum)?;
        }

        #[test]
        fn valid_datums_with_edited_bytes(edits in byte_edits(4)) {
            let datum = sample().to_avro_datum().expect("encode");
            check_datum(&edited_bytes(&datum, &edits))?;
        }

        #[test]
        fn records_of_any_shape(value in avro_record(FIELDS)) {
            check_value(value);
        }

        #[test]
        fn valid_records_with_edited_fields(value in edited_record(sample().to_avro_value())) {
            check_value(value);
        }
    }

    fn allocation_refused(error: &EventError) -> bool {
        matches!(
            error,
            EventError::Avro(e) if matches!(
                e.details(),
                Details::MemoryAllocation { maximum, .. } if *maximum == MAX_AVRO_ALLOCATION_BYTES
            )
        )
    }

    /// A 10-byte datum claiming a 2^60-byte `event_id`, a 64 MiB one (under apache-avro's
    /// own default bound of 512 MiB) or 2^40 headers is refused before anything is allocated.
    #[test]
    fn claimed_lengths_past_the_bound_are_refused_before_allocating() {
        for claimed in [1i64 << 60, 64 << 20, MAX_AVRO_ALLOCATION_BYTES as i64 + 1] {
            let datum = [zigzag(claimed), b"e".to_vec()].concat();
            assert!(datum.len() <= 10);
            let error =
                WebhookEvent::from_avro_datum(&datum, webhook_event_schema()).expect_err("refused");
            assert!(allocation_refused(&error), "{claimed}: {error:?}");
        }
        let mut datum = Vec::new();
        for text in ["e", "t"] {
            datum.extend(zigzag(text.len() as i64));
            datum.extend(text.as_bytes());
        }
        datum.extend(zigzag(1)); // endpoint_id: the string branch
        datum.extend(zigzag(2));
        datum.extend(b"ep");
        datum.extend([0, 0, 0]); // no URL, empty payload, default content type
        datum.extend(zigzag(1 << 40)); // the headers map's first block count
        let error =
            WebhookEvent::from_avro_datum(&datum, webhook_event_schema()).expect_err("refused");
        assert!(allocation_refused(&error), "{error:?}");
    }
}

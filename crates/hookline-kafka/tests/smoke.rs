//! Smoke tests against the real local stack: the chosen clients work with the real broker
//! and the real registry. Run `deploy/local/stack up` first (the README's test command does).

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::panic::AssertUnwindSafe;
use std::process::{Command, Stdio};
use std::time::Duration;

use apache_avro::types::Value;
use hookline_core::secret::Secret;
use hookline_kafka::{
    Compatibility, Error, FutureProducer, RawHeader, Registry, RegistrySettings, SchemaRefusal,
    TopicSpec, ensure_topics, read_headers,
};
use hookline_testkit::{AuthProxy, Credentials, kafka_settings, registry_settings, unique_name};
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn produce_and_consume_in_a_group_with_manual_offset_storage() {
    let settings = kafka_settings();
    let topic = unique_name("smoke-kafka");
    let group = unique_name("smoke-group");
    ensure_topics(&settings, &[TopicSpec::new(&topic, 2, 1)])
        .await
        .expect("create topic");

    let producer: FutureProducer = settings.producer_config().create().expect("producer");
    for i in 0..10 {
        let key = format!("endpoint-{}", i % 3);
        let payload = format!("event-{i}");
        let record = FutureRecord::to(&topic)
            .key(&key)
            .payload(&payload)
            .headers(OwnedHeaders::new().insert(Header {
                key: "webhook-id",
                value: Some(&payload),
            }));
        producer
            .send(record, Duration::from_secs(10))
            .await
            .expect("acknowledged by the broker");
    }

    // Consume all ten, storing each offset only after "processing" it.
    let consumer: StreamConsumer = settings.consumer_config(&group).create().expect("consumer");
    consumer.subscribe(&[&topic]).expect("subscribe");
    let mut seen = Vec::new();
    while seen.len() < 10 {
        let message = tokio::time::timeout(DEADLINE, consumer.recv())
            .await
            .expect("a record before the deadline")
            .expect("no consumer error");
        let payload =
            String::from_utf8(message.payload().expect("payload").to_vec()).expect("utf8");
        let header = message.headers().expect("headers").get(0);
        assert_eq!(header.key, "webhook-id");
        assert_eq!(header.value, Some(payload.as_bytes()));
        seen.push(payload);
        consumer
            .store_offset_from_message(&message)
            .expect("store offset");
    }
    seen.sort();
    let mut expected: Vec<String> = (0..10).map(|i| format!("event-{i}")).collect();
    expected.sort();
    assert_eq!(seen, expected);
    consumer
        .commit_consumer_state(CommitMode::Sync)
        .expect("commit stored offsets");

    // The group's committed offsets cover all ten records.
    let mut partitions = TopicPartitionList::new();
    partitions.add_partition(&topic, 0);
    partitions.add_partition(&topic, 1);
    let committed = consumer
        .committed_offsets(partitions, Duration::from_secs(10))
        .expect("committed");
    let total: i64 = committed
        .elements()
        .iter()
        .map(|e| match e.offset() {
            Offset::Offset(n) => n,
            _ => 0,
        })
        .sum();
    assert_eq!(total, 10, "committed offsets add up to the ten records");
}

#[tokio::test]
async fn a_full_producer_queue_gives_the_record_back_then_delivers_once_there_is_room() {
    let settings = kafka_settings();
    let topic = unique_name("smoke-full-queue");
    ensure_topics(&settings, &[TopicSpec::new(&topic, 1, 1)])
        .await
        .expect("create topic");
    let mut config = settings.producer_config();
    config
        .set("queue.buffering.max.messages", "1")
        .set("linger.ms", "200");
    let producer: FutureProducer = config.create().expect("producer");
    let first = producer
        .send_result(FutureRecord::<str, str>::to(&topic).payload("first"))
        .expect("room for one");
    let Err((error, back)) = producer.send_result(
        FutureRecord::<str, str>::to(&topic)
            .key("k")
            .payload("second"),
    ) else {
        panic!("a second record fits a queue of one");
    };
    assert_eq!(
        error,
        KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
    );
    assert_eq!((back.key, back.payload), (Some("k"), Some("second")));
    let (error, message) = producer
        .send(back, Duration::ZERO)
        .await
        .expect_err("no waiting for room");
    assert_eq!(
        error,
        KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
    );
    assert_eq!(message.payload(), Some(&b"second"[..]));
    assert_eq!(message.topic(), topic);
    // Waiting for room: the first record is written, then the second.
    let second = FutureRecord::<str, str>::to(&topic).payload("second");
    let written = producer
        .send(second, DEADLINE)
        .await
        .expect("written once there is room");
    let first = first.await.expect("a report").expect("written");
    assert_eq!((first.offset, written.offset), (0, 1));
}

#[tokio::test]
async fn avro_round_trips_through_the_registry_with_confluent_framing() {
    let registry = Registry::new(&registry_settings()).expect("registry client");
    let topic = unique_name("smoke-avro");
    let schema = r#"{"type":"record","name":"Greeting","namespace":"dev.hookline.smoke",
        "fields":[{"name":"id","type":"string"},{"name":"count","type":"long"}]}"#;
    let value = Value::Record(vec![
        ("id".to_owned(), Value::String("evt-1".to_owned())),
        ("count".to_owned(), Value::Long(42)),
    ]);
    let bytes = registry
        .encode_value(&topic, schema, value.clone())
        .await
        .expect("encode");
    assert_eq!(bytes[0], 0, "magic byte");
    let id = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);
    // The id in the frame is the one the registry gives for this subject's schema.
    let registered = registry
        .register(&format!("{topic}-value"), schema)
        .await
        .expect("register");
    assert_eq!(id, registered);

    // A fresh client (no cache) resolves the id through the registry and decodes.
    let fresh = Registry::new(&registry_settings()).expect("registry client");
    assert_eq!(fresh.decode(&bytes).await.expect("decode"), value);

    // And the bytes go through Kafka untouched.
    let settings = kafka_settings();
    ensure_topics(&settings, &[TopicSpec::new(&topic, 1, 1)])
        .await
        .expect("topic");
    let producer: FutureProducer = settings.producer_config().create().expect("producer");
    producer
        .send(
            FutureRecord::to(&topic).key("k").payload(&bytes),
            Duration::from_secs(10),
        )
        .await
        .expect("acknowledged");
    let consumer: StreamConsumer = settings
        .consumer_config(&unique_name("smoke-avro-group"))
        .create()
        .expect("consumer");
    consumer.subscribe(&[&topic]).expect("subscribe");
    let message = tokio::time::timeout(DEADLINE, consumer.recv())
        .await
        .expect("in time")
        .expect("ok");
    let decoded = fresh
        .decode(message.payload().expect("payload"))
        .await
        .expect("decode");
    assert_eq!(decoded, value);
}

#[tokio::test]
async fn backward_compatibility_refuses_an_incompatible_schema() {
    let registry = Registry::new(&registry_settings()).expect("registry client");
    let subject = format!("{}-value", unique_name("smoke-compat"));
    let v1 = r#"{"type":"record","name":"Thing","fields":[{"name":"a","type":"string"}]}"#;
    // Adding a field with a default is backward compatible.
    let v2 = r#"{"type":"record","name":"Thing","fields":[{"name":"a","type":"string"},
        {"name":"b","type":["null","string"],"default":null}]}"#;
    // Changing a field's type is not.
    let bad = r#"{"type":"record","name":"Thing","fields":[{"name":"a","type":"int"}]}"#;

    let id1 = registry.register(&subject, v1).await.expect("v1 registers");
    registry
        .set_compatibility(&subject, Compatibility::Backward)
        .await
        .expect("set compat");
    let id2 = registry
        .register(&subject, v2)
        .await
        .expect("a compatible v2 registers");
    assert_ne!(id1, id2);
    assert_eq!(
        registry
            .register(&subject, v1)
            .await
            .expect("same schema again"),
        id1
    );

    let refused = registry
        .register(&subject, bad)
        .await
        .expect_err("incompatible schema refused");
    match refused {
        Error::RegistryRefused { status, .. } => assert_eq!(status, 409, "{refused}"),
        other => panic!("expected a refusal, got {other}"),
    }

    // Nothing new was registered by the refusal.
    let versions: Vec<u32> =
        reqwest::get(format!("{}/subjects/{subject}/versions", registry.url()))
            .await
            .expect("list versions")
            .json()
            .await
            .expect("a JSON list");
    assert_eq!(versions, vec![1, 2]);
}

#[tokio::test]
async fn header_names_that_are_not_utf8_are_read_as_bytes() {
    let settings = kafka_settings();
    let topic = unique_name("smoke-headers");
    ensure_topics(&settings, &[TopicSpec::new(&topic, 1, 1)])
        .await
        .expect("create topic");

    // A raw client writes a header whose name is the bytes ff fe, then a normal one.
    let mut kcat = Command::new("kcat")
        .arg("-P")
        .args(["-b", &settings.bootstrap_servers, "-t", &topic, "-k", "k"])
        .arg("-H")
        .arg(OsStr::from_bytes(b"\xff\xfe=1"))
        .args(["-H", "webhook-id=evt-1"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("kcat runs");
    kcat.stdin
        .take()
        .expect("stdin")
        .write_all(b"payload\n")
        .expect("write to kcat");
    let status = kcat.wait().expect("kcat ends");
    assert!(status.success(), "kcat failed: {status}");

    let consumer: StreamConsumer = settings
        .consumer_config(&unique_name("smoke-headers-group"))
        .create()
        .expect("consumer");
    consumer.subscribe(&[&topic]).expect("subscribe");
    let message = tokio::time::timeout(DEADLINE, consumer.recv())
        .await
        .expect("a record before the deadline")
        .expect("no consumer error");
    assert_eq!(message.payload(), Some(&b"payload"[..]));

    let expected = vec![
        RawHeader {
            name: vec![0xff, 0xfe],
            value: Some(b"1".to_vec()),
        },
        RawHeader {
            name: b"webhook-id".to_vec(),
            value: Some(b"evt-1".to_vec()),
        },
    ];
    assert_eq!(
        read_headers(&message),
        expected,
        "from the borrowed message"
    );
    let owned = message.detach();
    assert_eq!(read_headers(&owned), expected, "from the owned copy");
    assert_eq!(expected[0].name_lossy(), "\u{fffd}\u{fffd}");

    // What this guards against: rdkafka's own accessor panics on this record.
    let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| {
        message.headers().map(|headers| headers.iter().count())
    }));
    assert!(
        panicked.is_err(),
        "rdkafka's Headers::iter no longer panics on a name that is not UTF-8"
    );
}

const GREETING: &str = r#"{"type":"record","name":"Greeting","namespace":"dev.hookline.smoke",
    "fields":[{"name":"id","type":"string"},{"name":"count","type":"long"}]}"#;

fn greeting() -> Value {
    Value::Record(vec![
        ("id".to_owned(), Value::String("evt-1".to_owned())),
        ("count".to_owned(), Value::Long(42)),
    ])
}

fn framed(id: u32, datum: &[u8]) -> Vec<u8> {
    hookline_core::framing::frame(id, datum)
}

/// A cold start: many records of one schema decoded at once by a client that has not seen
/// it. They wait for one fetch rather than each asking the registry.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_decodes_of_a_cold_schema_fetch_it_once() {
    let writer = Registry::new(&registry_settings()).expect("registry client");
    let topic = unique_name("smoke-cold");
    let bytes = writer
        .encode_value(&topic, GREETING, greeting())
        .await
        .expect("encode");
    let credentials = Credentials::Basic {
        username: "hookline".to_owned(),
        password: "cold-start-pw".to_owned(),
    };
    let proxy = AuthProxy::start(&registry_settings().url, credentials).await;
    let counted = Registry::new(&RegistrySettings {
        url: proxy.url().to_owned(),
        ca_file: Some(proxy.ca_file().to_owned()),
        username: Some("hookline".to_owned()),
        password: Some(Secret::new("cold-start-pw")),
        ..registry_settings()
    })
    .expect("registry client");
    let decodes = (0..64).map(|_| counted.decode(&bytes));
    for decoded in futures::future::join_all(decodes).await {
        assert_eq!(decoded.expect("decodes"), greeting());
    }
    assert_eq!(proxy.authorized(), 1, "one fetch of the writer schema");
    assert_eq!(counted.decode(&bytes).await.expect("decodes"), greeting());
    assert_eq!(proxy.authorized(), 1, "then from the cache");
}

#[tokio::test]
async fn a_recursive_writer_schema_is_refused_before_a_deep_value_is_decoded() {
    let registry = Registry::new(&registry_settings()).expect("registry client");
    let subject = format!("{}-value", unique_name("smoke-recursive"));
    let node =
        r#"{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}"#;
    let id = registry.register(&subject, node).await.expect("registers");

    // A million links, then the end: apache-avro would recurse a million times.
    let mut datum = vec![0x02; 1_000_000];
    datum.push(0x00);
    let error = registry
        .decode(&framed(id, &datum))
        .await
        .expect_err("refused");
    assert!(!error.is_transient(), "{error}");
    match &error {
        Error::UnsupportedSchema {
            id: refused,
            reason: SchemaRefusal::Recursive { name },
        } => {
            assert_eq!(*refused, id);
            assert_eq!(name, "Node");
        }
        other => panic!("expected a recursive schema refused, got {other}"),
    }
    // And again: refusals are not cached, the registry is asked each time.
    assert!(matches!(
        registry.decode(&framed(id, &[0x00])).await,
        Err(Error::UnsupportedSchema { .. })
    ));

    // The same client still decodes a good value.
    let topic = unique_name("smoke-good");
    let bytes = registry
        .encode_value(&topic, GREETING, greeting())
        .await
        .expect("encode");
    assert_eq!(registry.decode(&bytes).await.expect("decodes"), greeting());
    // From its cache too.
    assert_eq!(registry.decode(&bytes).await.expect("decodes"), greeting());
}

#[tokio::test]
async fn values_that_cannot_decode_are_permanent_errors() {
    let registry = Registry::new(&registry_settings()).expect("registry client");
    let topic = unique_name("smoke-bad");
    let bytes = registry
        .encode_value(&topic, GREETING, greeting())
        .await
        .expect("encode");
    let id = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]);

    let not_framed = registry
        .decode(b"{\"id\":\"evt-1\"}")
        .await
        .expect_err("refused");
    assert!(
        matches!(not_framed, Error::NotFramed { .. }),
        "{not_framed}"
    );
    let truncated = registry
        .decode(&bytes[..bytes.len() - 1])
        .await
        .expect_err("refused");
    assert!(
        matches!(truncated, Error::Undecodable { .. }),
        "{truncated}"
    );
    // An id the registry does not know: 404.
    let unknown = registry
        .decode(&framed(u32::MAX - 7, &bytes[5..]))
        .await
        .expect_err("refused");
    assert!(
        matches!(unknown, Error::RegistryRefused { status: 404, .. }),
        "{unknown}"
    );
    for error in [not_framed, truncated, unknown] {
        assert!(!error.is_transient(), "{error}");
    }
    assert_eq!(
        registry
            .decode(&framed(id, &bytes[5..]))
            .await
            .expect("decodes"),
        greeting()
    );
}

/// A "registry" on 127.0.0.1:0 that answers every request with `status`, or never answers
/// when `status` is `None`.
async fn fixed_registry(status: Option<u16>) -> Registry {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let Some(status) = status else {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return;
                };
                let body = r#"{"error_code":0,"message":"fixed answer"}"#;
                let answer = format!(
                    "HTTP/1.1 {status} Fixed\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Registry::new(&RegistrySettings {
        url: format!("http://{addr}/apis/ccompat/v7"),
        timeout_ms: 500,
        ..RegistrySettings::default()
    })
    .expect("registry client")
}

#[tokio::test]
async fn registry_answers_are_transient_or_permanent_by_status() {
    let value = framed(1, &[0x00]);
    for (status, transient) in [
        (401, true),
        (403, true),
        (408, true),
        (429, true),
        (500, true),
        (502, true),
        (503, true),
        (504, true),
        (400, false),
        (404, false),
        (422, false),
    ] {
        let error = fixed_registry(Some(status))
            .await
            .decode(&value)
            .await
            .expect_err("no schema");
        assert!(
            matches!(error, Error::RegistryRefused { status: s, .. } if s == status),
            "{error}"
        );
        assert_eq!(error.is_transient(), transient, "HTTP {status}: {error}");
    }

    // A registry that does not answer in time, and one that is not there.
    let silent = fixed_registry(None)
        .await
        .decode(&value)
        .await
        .expect_err("timeout");
    assert!(matches!(silent, Error::RegistryHttp { .. }), "{silent}");
    assert!(silent.is_transient());
    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind")
        .local_addr()
        .expect("address")
        .port();
    let gone = Registry::new(&RegistrySettings {
        url: format!("http://127.0.0.1:{port}"),
        timeout_ms: 2_000,
        ..RegistrySettings::default()
    })
    .expect("registry client")
    .decode(&value)
    .await
    .expect_err("refused connection");
    assert!(matches!(gone, Error::RegistryHttp { .. }), "{gone}");
    assert!(gone.is_transient());
}

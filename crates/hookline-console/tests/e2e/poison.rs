//! Poison records in the DLQ topic, written with a raw producer: Avro "bombs", small records
//! that claim millions of items, are listed as records that could not be decoded, each with
//! its reason, and the console goes on serving.

use hookline_core::framing::frame;
use hookline_kafka::Registry;
use hookline_testkit::{bombs, registry_settings, unique_name};
use rdkafka::producer::{FutureProducer, FutureRecord};
use reqwest::StatusCode;

use crate::support::{Console, DEADLINE, OPERATOR_TOKEN, Parked, console_config};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn avro_bombs_in_the_dlq_are_shown_undecodable_and_the_console_stays_up() {
    let parked = Parked::new("console-bomb", 0).await;
    let registry = Registry::new(&registry_settings()).expect("registry");
    let subject = |name: &str| format!("{}-{name}-value", unique_name("console-bomb"));
    // 20,000 arrays of 290,000 nulls (which take no bytes), 80 KB; 9,000 arrays of 100
    // booleans, 920 KB, over 50 MB decoded.
    let nulls_id = registry
        .register(&subject("nulls"), bombs::NULLS_SCHEMA)
        .await
        .expect("registered");
    let booleans_id = registry
        .register(&subject("booleans"), bombs::BOOLEANS_SCHEMA)
        .await
        .expect("registered");
    let (bomb, ones) = (bombs::nulls_bomb(), bombs::booleans_bomb());

    let producer: FutureProducer = parked.kafka.producer_config().create().expect("producer");
    let mut places = Vec::new();
    for value in [frame(nulls_id, &bomb), frame(booleans_id, &ones)] {
        let record = FutureRecord::to(&parked.topics.dlq)
            .partition(0)
            .key("ep-broken")
            .payload(value.as_slice());
        let written = producer.send(record, DEADLINE).await.expect("written");
        places.push(format!("/dlq/records/0/{}", written.offset));
    }

    let settings = console_config().into_settings().expect("valid");
    let console = Console::start(settings, parked.names()).await;
    let mut alice = console.browser();
    let login = alice.login("alice", OPERATOR_TOKEN).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER, "{}", login.body);

    let list = alice.get("/dlq").await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert!(
        list.body.contains("2 records could not be decoded"),
        "{}",
        list.body
    );
    let broken = &parked.events[0].event_id;
    assert!(
        list.body.contains(broken.as_str()),
        "the good record is listed"
    );
    for (place, says) in places.iter().zip(["zero bytes", "the most one record may"]) {
        let page = alice.get(place).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        assert!(page.body.contains("could not be decoded"), "{}", page.body);
        assert!(page.body.contains(says), "{place}: {}", page.body);
    }
    // Still serving.
    assert_eq!(alice.get("/dlq").await.status, StatusCode::OK);
}

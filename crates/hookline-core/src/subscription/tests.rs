use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;
use crate::fuzz::config;

fn sub(tenant: &str, types: &[&str], channels: &[&str]) -> Subscription {
    Subscription {
        tenant: tenant.to_owned(),
        event_types: types.iter().map(|t| (*t).to_owned()).collect(),
        channels: channels.iter().map(|c| (*c).to_owned()).collect(),
    }
}

fn chans(channels: &[&str]) -> Vec<String> {
    channels.iter().map(|c| (*c).to_owned()).collect()
}

fn ids(found: &[Arc<str>]) -> Vec<&str> {
    found.iter().map(|id| &**id).collect()
}

/// `index.matches` with no channels, as plain strings.
fn m(index: &SubscriptionIndex, tenant: &str, event_type: &str) -> Vec<String> {
    let found = index.matches(tenant, event_type, &[]);
    found.iter().map(|id| id.to_string()).collect()
}

#[test]
fn exact_types_match_only_themselves() {
    let mut index = SubscriptionIndex::new();
    index.upsert("e1", &sub("t", &["invoice.paid", "invoice.voided"], &[]));
    index.upsert("e2", &sub("t", &["invoice.paid"], &[]));
    assert_eq!(m(&index, "t", "invoice.paid"), ["e1", "e2"]);
    assert_eq!(m(&index, "t", "invoice.voided"), ["e1"]);
    assert!(m(&index, "t", "invoice").is_empty());
    assert!(m(&index, "t", "invoice.paid.late").is_empty());
    assert!(m(&index, "t", "Invoice.paid").is_empty());
}

#[test]
fn a_wildcard_matches_longer_types_under_its_prefix() {
    let mut index = SubscriptionIndex::new();
    index.upsert("e1", &sub("t", &["invoice.*"], &[]));
    index.upsert("e2", &sub("t", &["invoice.line.*"], &[]));
    assert_eq!(m(&index, "t", "invoice.paid"), ["e1"]);
    assert_eq!(m(&index, "t", "invoice.line.added"), ["e1", "e2"]);
    assert_eq!(m(&index, "t", "invoice.line"), ["e1"]);
    assert!(m(&index, "t", "invoice").is_empty());
    assert!(m(&index, "t", "invoice.").is_empty());
    assert!(m(&index, "t", "invoices.paid").is_empty());
    assert!(m(&index, "t", "customer.created").is_empty());
}

#[test]
fn star_and_empty_types_match_every_type() {
    let mut index = SubscriptionIndex::new();
    index.upsert("e1", &sub("t", &["*"], &[]));
    index.upsert("e2", &sub("t", &[], &[]));
    index.upsert("e3", &sub("t", &["invoice.paid", "*"], &[]));
    for event_type in ["invoice.paid", "a", "", ".", "x.y.z"] {
        assert_eq!(
            m(&index, "t", event_type),
            ["e1", "e2", "e3"],
            "{event_type:?}"
        );
    }
}

#[test]
fn channels_follow_svix() {
    let mut index = SubscriptionIndex::new();
    index.upsert("any", &sub("t", &["a"], &[]));
    index.upsert("eu", &sub("t", &["a"], &["eu"]));
    index.upsert("eu-us", &sub("t", &["a"], &["eu", "us"]));
    let found = |channels: &[&str]| index.matches("t", "a", &chans(channels));
    assert_eq!(ids(&found(&[])), ["any"]);
    assert_eq!(ids(&found(&["eu"])), ["any", "eu", "eu-us"]);
    assert_eq!(ids(&found(&["us"])), ["any", "eu-us"]);
    assert_eq!(ids(&found(&["ap"])), ["any"]);
    assert_eq!(ids(&found(&["ap", "us"])), ["any", "eu-us"]);
    // Many event channels take the set path.
    let many: Vec<String> = (0..40)
        .map(|i| format!("c{i}"))
        .chain(["us".into()])
        .collect();
    assert_eq!(ids(&index.matches("t", "a", &many)), ["any", "eu-us"]);
}

#[test]
fn upsert_replaces_types_channels_and_tenant() {
    let mut index = SubscriptionIndex::new();
    index.upsert("e1", &sub("t1", &["a", "b.*"], &["x"]));
    index.upsert("e2", &sub("t1", &["a"], &[]));
    index.upsert("e1", &sub("t1", &["c"], &[]));
    assert_eq!(m(&index, "t1", "a"), ["e2"]);
    assert!(m(&index, "t1", "b.x").is_empty());
    assert_eq!(m(&index, "t1", "c"), ["e1"]);

    index.upsert("e1", &sub("t2", &["a"], &[]));
    assert_eq!(m(&index, "t1", "a"), ["e2"]);
    assert!(m(&index, "t1", "c").is_empty());
    assert_eq!(m(&index, "t2", "a"), ["e1"]);
    assert_eq!((index.len(), index.tenants()), (2, 2));

    index.upsert("e2", &sub("t2", &["*"], &[]));
    assert_eq!((index.len(), index.tenants()), (2, 1), "t1 emptied");
    assert_eq!(m(&index, "t2", "a"), ["e1", "e2"]);
}

#[test]
fn remove_forgets_an_endpoint_and_its_empty_tenant() {
    let mut index = SubscriptionIndex::new();
    index.upsert("e1", &sub("t1", &["a", "a.*", "*"], &["x"]));
    index.upsert("e2", &sub("t2", &["a.*"], &[]));
    index.remove("e1");
    index.remove("e1");
    index.remove("never");
    assert!(m(&index, "t1", "a").is_empty());
    assert_eq!((index.len(), index.tenants()), (1, 1));
    index.remove("e2");
    assert!(index.is_empty());
    assert_eq!(index.tenants(), 0);
    assert!(index.is_drained());
}

#[test]
fn an_endpoint_matching_through_two_patterns_is_returned_once() {
    let mut index = SubscriptionIndex::new();
    index.upsert(
        "e1",
        &sub("t", &["a.b.c", "a.*", "a.b.*", "a.b.c", "a.*"], &["x", "x"]),
    );
    index.upsert("e0", &sub("t", &["a.b.*"], &[]));
    assert_eq!(m(&index, "t", "a.b.c"), ["e0"]);
    let found = index.matches("t", "a.b.c", &chans(&["x", "x"]));
    assert_eq!(ids(&found), ["e0", "e1"]);
}

#[test]
fn other_tenants_endpoints_are_never_returned() {
    let mut index = SubscriptionIndex::new();
    index.upsert("e1", &sub("t1", &["*"], &[]));
    index.upsert("e2", &sub("t2", &["a"], &[]));
    assert_eq!(m(&index, "t1", "a"), ["e1"]);
    assert_eq!(m(&index, "t2", "a"), ["e2"]);
    assert!(m(&index, "t3", "a").is_empty());
    assert!(m(&index, "", "a").is_empty());
}

#[test]
fn ids_are_interned_and_sorted_by_bytes() {
    let mut index = SubscriptionIndex::new();
    for id in ["b", "a", "B", "é", "aa"] {
        index.upsert(id, &sub("t", &["x.*"], &[]));
    }
    index.upsert("c", &sub("t", &["x.y"], &[]));
    assert_eq!(m(&index, "t", "x.y"), ["B", "a", "aa", "b", "c", "é"]);
    let first = index.matches("t", "x.z", &[]);
    let again = index.matches("t", "x.z", &[]);
    assert!(Arc::ptr_eq(&first[0], &again[0]));
}

#[test]
fn invalid_patterns_match_only_their_own_spelling() {
    let mut index = SubscriptionIndex::new();
    index.upsert(
        "e1",
        &sub("t", &["inv*", "*.paid", "a.*.b", "a.*.*", ".*", ""], &[]),
    );
    assert!(m(&index, "t", "invoice").is_empty());
    assert!(m(&index, "t", "x.paid").is_empty());
    assert_eq!(m(&index, "t", "inv*"), ["e1"]);
    assert!(m(&index, "t", "a.x.b").is_empty());
    assert_eq!(m(&index, "t", "a.*.b"), ["e1"]);
    assert_eq!(
        m(&index, "t", "a.*.c"),
        ["e1"],
        "`a.*.*` reads as the prefix `a.*.`"
    );
    assert!(m(&index, "t", "a.x.c").is_empty());
    assert_eq!(m(&index, "t", ".x"), ["e1"]);
    assert_eq!(m(&index, "t", ""), ["e1"]);
}

#[test]
fn a_long_event_type_of_many_dots_is_cheap_and_safe() {
    let mut index = SubscriptionIndex::new();
    index.upsert("e1", &sub("t", &["a.a.*"], &[]));
    let long = "a.".repeat(200_000) + "é";
    assert_eq!(m(&index, "t", &long), ["e1"]);
    assert!(m(&index, "t", &"é.".repeat(1000)).is_empty());
}

#[test]
fn pattern_checks() {
    for ok in [
        "invoice.paid",
        "invoice.*",
        "*",
        "a",
        "a.b.c.*",
        "é.ü",
        "a-b_c:d",
    ] {
        assert_eq!(check_pattern(ok), Ok(()), "{ok:?}");
    }
    assert_eq!(check_pattern(""), Err(PatternError::Empty));
    assert_eq!(
        check_pattern(&"a".repeat(MAX_PATTERN_LEN + 1)),
        Err(PatternError::TooLong { len: 257 })
    );
    assert_eq!(check_pattern(&"a".repeat(MAX_PATTERN_LEN)), Ok(()));
    assert_eq!(
        check_pattern("a.\u{7}"),
        Err(PatternError::ControlCharacter { at: 2 })
    );
    assert_eq!(
        check_pattern("a\nb"),
        Err(PatternError::ControlCharacter { at: 1 })
    );
    assert_eq!(
        check_pattern("a b"),
        Err(PatternError::Whitespace { at: 1 })
    );
    assert_eq!(
        check_pattern("a\u{3000}"),
        Err(PatternError::Whitespace { at: 1 })
    );
    for empty_segment in ["a..b", "a.", ".a", ".", ".*", "a..*"] {
        assert_eq!(
            check_pattern(empty_segment),
            Err(PatternError::EmptySegment {
                pattern: empty_segment.to_owned()
            }),
            "{empty_segment:?}"
        );
    }
    for misplaced in ["inv*", "*.paid", "a.*.b", "**", "a.**", "*.*", "a*.*"] {
        assert_eq!(
            check_pattern(misplaced),
            Err(PatternError::MisplacedWildcard {
                pattern: misplaced.to_owned()
            }),
            "{misplaced:?}"
        );
    }
    let message = check_pattern("inv*").map_err(|e| e.to_string());
    assert_eq!(
        message,
        Err(
            "event type pattern `inv*` has a `*` that is not the whole last dot-segment \
             (write `invoice.*` or `*`)"
                .to_owned()
        )
    );
}

#[test]
fn channel_checks() {
    assert_eq!(check_channel("project_1"), Ok(()));
    assert_eq!(check_channel(&"c".repeat(MAX_CHANNEL_LEN)), Ok(()));
    assert_eq!(check_channel(""), Err(PatternError::ChannelEmpty));
    assert_eq!(
        check_channel(&"c".repeat(MAX_CHANNEL_LEN + 1)),
        Err(PatternError::ChannelTooLong { len: 129 })
    );
    assert_eq!(
        check_channel("a b"),
        Err(PatternError::ChannelCharacter { at: 1 })
    );
    assert_eq!(
        check_channel("aé"),
        Err(PatternError::ChannelCharacter { at: 1 })
    );
    assert_eq!(
        check_channel("a\0"),
        Err(PatternError::ChannelCharacter { at: 1 })
    );
    assert_eq!(
        check_channel("eu*"),
        Err(PatternError::ChannelWildcard { at: 2 })
    );
}

#[test]
fn subscription_validation_counts_and_checks_each_part() {
    assert_eq!(sub("t", &["a", "b.*"], &["x"]).validate(), Ok(()));
    let many: Vec<String> = (0..=MAX_EVENT_TYPES).map(|i| format!("t{i}")).collect();
    let too_many_types = Subscription {
        event_types: many,
        ..sub("t", &[], &[])
    };
    assert_eq!(
        too_many_types.validate(),
        Err(PatternError::TooManyEventTypes { count: 65 })
    );
    let channels: Vec<String> = (0..=MAX_CHANNELS).map(|i| format!("c{i}")).collect();
    let too_many_channels = Subscription {
        channels,
        ..sub("t", &[], &[])
    };
    assert_eq!(
        too_many_channels.validate(),
        Err(PatternError::TooManyChannels { count: 11 })
    );
    assert_eq!(
        sub("t", &["a", "a*"], &[]).validate(),
        Err(PatternError::MisplacedWildcard {
            pattern: "a*".to_owned()
        })
    );
    assert_eq!(
        sub("t", &["a"], &["x", "*"]).validate(),
        Err(PatternError::ChannelWildcard { at: 0 })
    );
}

/// The rules of the module's doc, written out again for one subscription.
fn reference_wants(sub: &Subscription, event_type: &str, channels: &[String]) -> bool {
    let type_ok = sub.event_types.is_empty()
        || sub.event_types.iter().any(|pattern| {
            if pattern == "*" {
                return true;
            }
            if let Some(prefix) = pattern.strip_suffix('*')
                && prefix.ends_with('.')
            {
                return event_type.starts_with(prefix) && event_type.len() > prefix.len();
            }
            pattern == event_type
        });
    let channels_ok = sub.channels.is_empty() || sub.channels.iter().any(|c| channels.contains(c));
    type_ok && channels_ok
}

/// The naive table: scan every endpoint.
fn reference_matches(
    table: &BTreeMap<String, Subscription>,
    tenant: &str,
    event_type: &str,
    channels: &[String],
) -> Vec<String> {
    table
        .iter()
        .filter(|(_, sub)| sub.tenant == tenant && reference_wants(sub, event_type, channels))
        .map(|(id, _)| id.clone())
        .collect()
}

fn pick(words: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(words).prop_map(str::to_owned)
}

fn tenant() -> impl Strategy<Value = String> {
    prop_oneof![8 => pick(&["t1", "t2", "t3"]), 1 => any::<String>()]
}

fn event_type() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => pick(&["a", "b", "a.b", "a.c", "b.a", "a.b.c", "a.b.c.d", "a.bc"]),
        2 => pick(&["", ".", "a.", "a..b", ".a", "*", "a.*", "a.*.b", "é.a"]),
        1 => any::<String>(),
    ]
}

fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => event_type(),
        3 => pick(&["*", "a.*", "a.b.*", "b.*", "a.b.c.*", "é.*"]),
        1 => pick(&["a*", "*.a", "a.*.*", ".*", "", "a.", "**", "a.**"]),
    ]
}

fn channel() -> impl Strategy<Value = String> {
    prop_oneof![8 => pick(&["x", "y", "z"]), 1 => any::<String>()]
}

fn subscription() -> impl Strategy<Value = Subscription> {
    (tenant(), vec(pattern(), 0..4), vec(channel(), 0..3)).prop_map(
        |(tenant, event_types, channels)| Subscription {
            tenant,
            event_types,
            channels,
        },
    )
}

#[derive(Clone, Debug)]
enum Op {
    Upsert(String, Subscription),
    Remove(String),
}

fn op() -> impl Strategy<Value = Op> {
    let id = prop_oneof![
        8 => pick(&["e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"]),
        1 => any::<String>(),
    ];
    prop_oneof![
        3 => (id.clone(), subscription()).prop_map(|(id, sub)| Op::Upsert(id, sub)),
        1 => id.prop_map(Op::Remove),
    ]
}

fn query() -> impl Strategy<Value = (String, String, Vec<String>)> {
    (tenant(), event_type(), vec(channel(), 0..3))
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn matches_agree_with_a_scan_of_every_endpoint(
        ops in vec(op(), 1..40),
        queries in vec(query(), 1..10),
    ) {
        let mut index = SubscriptionIndex::new();
        let mut table = BTreeMap::new();
        for op in ops {
            match op {
                Op::Upsert(id, sub) => {
                    index.upsert(&id, &sub);
                    table.insert(id, sub);
                }
                Op::Remove(id) => {
                    index.remove(&id);
                    table.remove(&id);
                }
            }
            prop_assert_eq!(index.len(), table.len());
            let tenants: std::collections::BTreeSet<&str> =
                table.values().map(|sub| sub.tenant.as_str()).collect();
            prop_assert_eq!(index.tenants(), tenants.len());
            for (tenant, event_type, channels) in &queries {
                let found = index.matches(tenant, event_type, channels);
                let expected = reference_matches(&table, tenant, event_type, channels);
                let expected_ids: Vec<&str> = expected.iter().map(String::as_str).collect();
                prop_assert_eq!(ids(&found), expected_ids);
                for (id, sub) in &table {
                    let wants = sub.tenant == *tenant && sub.wants(event_type, channels);
                    prop_assert_eq!(wants, expected.contains(id));
                }
            }
        }
        for id in table.keys() {
            index.remove(id);
        }
        prop_assert!(index.is_empty());
        prop_assert!(index.is_drained());
    }

    #[test]
    fn checks_never_panic(input in any::<String>()) {
        let pattern = check_pattern(&input);
        if pattern.is_ok() {
            prop_assert!(!input.is_empty() && input.len() <= MAX_PATTERN_LEN);
        }
        let channel = check_channel(&input);
        if channel.is_ok() {
            prop_assert!(input.bytes().all(|b| b.is_ascii_graphic() && b != b'*'));
        }
    }
}

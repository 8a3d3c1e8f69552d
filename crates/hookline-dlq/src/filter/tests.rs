use hookline_core::envelope::ErrorReason;

use super::*;
use crate::record::fixtures::record;

const NOW: i64 = 1_714_564_800_000;

fn spec() -> FilterSpec {
    FilterSpec::default()
}

#[test]
fn an_empty_filter_selects_everything() {
    let filter = spec().build(NOW).expect("valid");
    assert!(filter.matches(&record(0, 0, "a", ErrorReason::BlockedUrl, NOW)));
    assert!(filter.is_place_only());
}

#[test]
fn reasons_accept_codes_symbols_and_lists() {
    let filter = FilterSpec {
        reasons: vec!["retries_exhausted,BLOCKED_URL".into()],
        ..spec()
    }
    .build(NOW)
    .expect("valid");
    assert_eq!(
        filter.reasons,
        [ErrorReason::RetriesExhausted, ErrorReason::BlockedUrl]
    );
    assert!(filter.matches(&record(0, 0, "a", ErrorReason::BlockedUrl, NOW)));
    assert!(!filter.matches(&record(0, 0, "a", ErrorReason::MalformedEvent, NOW)));
}

#[test]
fn an_unknown_reason_lists_the_valid_ones() {
    let error = FilterSpec {
        reasons: vec!["timeout".into()],
        ..spec()
    }
    .build(NOW)
    .expect_err("unknown");
    let text = error.to_string();
    assert!(text.contains("`timeout`"), "{text}");
    for reason in ErrorReason::ALL {
        assert!(text.contains(reason.code()), "{text}");
    }
}

#[test]
fn endpoint_type_and_id_criteria_combine() {
    let filter = FilterSpec {
        endpoints: vec!["a".into(), "b".into()],
        event_types: vec!["invoice.paid".into()],
        ..spec()
    }
    .build(NOW)
    .expect("valid");
    assert!(filter.matches(&record(0, 0, "a", ErrorReason::BlockedUrl, NOW)));
    assert!(filter.matches(&record(0, 0, "b", ErrorReason::BlockedUrl, NOW)));
    assert!(!filter.matches(&record(0, 0, "c", ErrorReason::BlockedUrl, NOW)));
    let mut other_type = record(0, 0, "a", ErrorReason::BlockedUrl, NOW);
    other_type.envelope.event_type = Some("invoice.void".into());
    assert!(!filter.matches(&other_type));
    let mut no_endpoint = record(0, 0, "a", ErrorReason::MalformedEvent, NOW);
    no_endpoint.envelope.endpoint_id = None;
    assert!(!filter.matches(&no_endpoint));

    let by_id = FilterSpec {
        event_ids: vec![format!("evt-a-{NOW}")],
        ..spec()
    }
    .build(NOW)
    .expect("valid");
    assert!(by_id.matches(&record(0, 0, "a", ErrorReason::BlockedUrl, NOW)));
    assert!(!by_id.matches(&record(0, 0, "b", ErrorReason::BlockedUrl, NOW)));
}

#[test]
fn tenants_select_by_the_envelopes_tenant() {
    let filter = FilterSpec {
        tenants: vec!["acme, globex".into(), "initech".into()],
        ..spec()
    }
    .build(NOW)
    .expect("valid");
    assert_eq!(filter.tenants, ["acme", "globex", "initech"]);
    assert!(!filter.is_place_only());
    let of = |tenant: Option<&str>| {
        let mut r = record(0, 0, "a", ErrorReason::RetriesExhausted, NOW);
        r.envelope.tenant_id = tenant.map(str::to_owned);
        r
    };
    assert!(filter.matches(&of(Some("acme"))));
    assert!(filter.matches(&of(Some("initech"))));
    assert!(!filter.matches(&of(Some("acme-eu"))), "exact ids only");
    assert!(!filter.matches(&of(Some("ACME"))), "case matters");
    assert!(
        !filter.matches(&of(None)),
        "a direct delivery has no tenant"
    );

    // With --endpoint too, both must hold.
    let both = FilterSpec {
        tenants: vec!["acme".into()],
        endpoints: vec!["a".into()],
        ..spec()
    }
    .build(NOW)
    .expect("valid");
    assert!(both.matches(&of(Some("acme"))));
    let mut other_endpoint = of(Some("acme"));
    other_endpoint.envelope.endpoint_id = Some("b".into());
    assert!(!both.matches(&other_endpoint));

    // Empty items are dropped; a list of nothing selects everything.
    let blank = FilterSpec {
        tenants: vec![" , ".into()],
        ..spec()
    }
    .build(NOW)
    .expect("valid");
    assert!(blank.tenants.is_empty());
    assert!(blank.matches(&of(None)));
}

#[test]
fn time_range_is_half_open() {
    let filter = FilterSpec {
        since: Some("2h".into()),
        until: Some("1h".into()),
        ..spec()
    }
    .build(NOW)
    .expect("valid");
    let at = |ms| record(0, 0, "a", ErrorReason::BlockedUrl, ms);
    assert!(filter.matches(&at(NOW - 2 * 3_600_000)));
    assert!(filter.matches(&at(NOW - 3_600_001)));
    assert!(!filter.matches(&at(NOW - 3_600_000)));
    assert!(!filter.matches(&at(NOW - 2 * 3_600_000 - 1)));
    assert!(!filter.is_place_only());
}

#[test]
fn bad_ranges_are_refused() {
    let empty = FilterSpec {
        since: Some("1h".into()),
        until: Some("2h".into()),
        ..spec()
    }
    .build(NOW);
    assert!(matches!(empty, Err(FilterError::EmptyTimeRange { .. })));
    let malformed = FilterSpec {
        since: Some("yesterday".into()),
        ..spec()
    }
    .build(NOW);
    assert!(matches!(
        malformed,
        Err(FilterError::InvalidTime {
            flag: "--since",
            ..
        })
    ));
    let offsets = FilterSpec {
        from_offset: Some(5),
        to_offset: Some(4),
        ..spec()
    }
    .build(NOW);
    assert!(matches!(
        offsets,
        Err(FilterError::EmptyOffsetRange { from: 5, to: 4 })
    ));
    let negative = FilterSpec {
        from_offset: Some(-1),
        ..spec()
    }
    .build(NOW);
    assert!(matches!(negative, Err(FilterError::Negative { .. })));
    let bad_ref = FilterSpec {
        records: vec!["0:5".into()],
        ..spec()
    }
    .build(NOW);
    assert!(matches!(bad_ref, Err(FilterError::RecordRef(_))));
}

#[test]
fn places_offsets_and_explicit_records() {
    let filter = FilterSpec {
        partitions: vec![1],
        from_offset: Some(10),
        to_offset: Some(20),
        ..spec()
    }
    .build(NOW)
    .expect("valid");
    let at = |p, o| record(p, o, "a", ErrorReason::BlockedUrl, NOW);
    assert!(filter.matches(&at(1, 10)));
    assert!(filter.matches(&at(1, 20)));
    assert!(!filter.matches(&at(1, 21)));
    assert!(!filter.matches(&at(0, 15)));
    assert_eq!(filter.first_offset(1), Some(10));
    assert!(!filter.wants_partition(0));

    let explicit = FilterSpec {
        records: vec!["0/3,2/9".into()],
        ..spec()
    }
    .build(NOW)
    .expect("valid");
    assert!(explicit.matches(&at(0, 3)));
    assert!(explicit.matches(&at(2, 9)));
    assert!(!explicit.matches(&at(0, 9)));
    assert_eq!(explicit.first_offset(2), Some(9));
    assert_eq!(explicit.first_offset(1), None);
    assert!(!explicit.wants_partition(1));
}

/// Outside input never panics the selection flags: times, reasons, places and offsets of any
/// text and value, resolved against any clock; a filter that builds is then applied.
mod fuzz {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;
    use crate::fuzz::config;
    use crate::reader::start_for;

    fn time() -> impl Strategy<Value = String> {
        prop_oneof![
            "[0-9]{1,25} ?(ms|s|m|min|h|d|w|x)?( ago)?",
            "[+-]?[0-9]{1,20}(\\.[0-9]{1,10})? ?(ms|s|m|h|d|w|mo|y)( [0-9]{1,8}(m|s))?( ago)?",
            "[Pp]([0-9]{1,8}[YMWD]){0,2}(T([0-9]{1,12}(\\.[0-9]{1,9})?[HMS]){0,3})?",
            "[0-9]{1,6}-[0-9]{1,2}-[0-9]{1,2}(T[0-9]{1,2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]{1,12})?)?(Z|[+-][0-9]{2}:?[0-9]{2})?)?",
            Just("now".to_owned()),
            Just("-9999-01-01T00:00:00Z".to_owned()),
            Just("9999-12-31T23:59:59.999999999Z".to_owned()),
            Just("18446744073709551615w".to_owned()),
            any::<String>(),
        ]
    }

    fn list() -> impl Strategy<Value = Vec<String>> {
        vec(
            prop_oneof![
                "[a-z_,]{0,24}",
                "[A-Z_,]{0,24}",
                "-?[0-9]{1,20}/-?[0-9]{1,20}(,[0-9]{1,3}/[0-9]{1,3})?",
                any::<String>(),
            ],
            0..3,
        )
    }

    fn edge() -> impl Strategy<Value = i64> {
        prop_oneof![
            Just(0),
            Just(-1),
            Just(i64::MAX),
            Just(i64::MIN),
            any::<i64>()
        ]
    }

    prop_compose! {
        fn spec()(
            reasons in list(),
            endpoints in list(),
            tenants in list(),
            event_types in list(),
            event_ids in list(),
            since in proptest::option::of(time()),
            until in proptest::option::of(time()),
            partitions in vec(prop_oneof![Just(0), Just(-1), any::<i32>()], 0..3),
            from_offset in proptest::option::of(edge()),
            to_offset in proptest::option::of(edge()),
            records in list(),
        ) -> FilterSpec {
            FilterSpec {
                reasons, endpoints, tenants, event_types, event_ids, since, until, partitions,
                from_offset, to_offset, records,
            }
        }
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn times_of_any_text(text in time(), now in edge()) {
            if let Ok(bound) = TimeBound::parse("--since", &text) {
                let _ = format_ms(bound.to_ms(now));
            }
        }

        #[test]
        fn places_of_any_text(text in prop_oneof!["-?[0-9]{0,20}/-?[0-9]{0,20}", any::<String>()]) {
            if let Ok(place) = text.parse::<RecordRef>() {
                prop_assert_eq!(place.to_string().parse::<RecordRef>(), Ok(place));
            }
        }

        #[test]
        fn specs_of_any_values(spec in spec(), now in edge(), at in edge(), partition in any::<i32>()) {
            if let Ok(filter) = spec.build(now) {
                let mut r = record(partition, 0, "ep", ErrorReason::BlockedUrl, 0);
                r.offset = at;
                r.envelope.error_timestamp_ms = at;
                let _ = filter.matches(&r);
                let _ = filter.is_place_only();
                let _ = start_for(&filter, partition);
            }
        }
    }
}

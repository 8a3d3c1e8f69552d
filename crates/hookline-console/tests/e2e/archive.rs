//! Archiving a filtered selection of the DLQ from the console to object storage (a local
//! `file://` directory), read back as `hookline dlq inspect --file` reads it; per role.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hookline_dlq::archive::store::{ArchiveRecords, ArchiveUrl, StoreSettings};
use hookline_dlq::filter::format_ms;
use reqwest::StatusCode;

use crate::support::{Console, OPERATOR_TOKEN, Parked, VIEWER_TOKEN, console_config, count};

/// Every `.avro` file under `dir`, sorted.
fn objects_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_owned()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "avro") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The records of one archive object, as `(place, event id, park time)`.
async fn read_back(object: &Path) -> Vec<(String, String, i64)> {
    let url = ArchiveUrl::parse(&object.display().to_string()).expect("a local path");
    let mut records = ArchiveRecords::open(&url, &StoreSettings::default())
        .await
        .expect("the object reads");
    let mut read = Vec::new();
    while let Some(s) = records.next().await.expect("a record") {
        let e = &s.record.envelope;
        read.push((
            s.record.place().to_string(),
            e.event_id.clone(),
            e.error_timestamp_ms,
        ));
    }
    read
}

fn without_csrf(fields: &[(String, String)]) -> Vec<(String, String)> {
    fields
        .iter()
        .filter(|(n, _)| n != "csrf")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operators_archive_a_filtered_selection_that_reads_back_exactly_and_viewers_cannot() {
    let parked = Parked::new("console-archive", 2).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("archive");
    let archive_to = format!("file://{}/", root.display());
    let mut config = console_config();
    config.archive_to = Some(archive_to.clone());
    let console = Console::start(config.into_settings().expect("valid"), parked.names()).await;
    let dlq_topic = parked.names().dlq();
    let flaky: BTreeSet<String> = parked.events[..2]
        .iter()
        .map(|e| e.event_id.clone())
        .collect();
    let broken = parked.events[2].event_id.clone();

    // The operator filters by endpoint; the list offers the archive of what matches.
    let mut alice = console.browser();
    assert_eq!(
        alice.login("alice", OPERATOR_TOKEN).await.status,
        StatusCode::SEE_OTHER
    );
    let list = alice.get("/dlq?endpoint=ep-flaky").await;
    assert!(list.body.contains("2 records match"), "{}", list.body);
    assert!(list.body.contains("id=\"archive-button\""), "{}", list.body);
    let selected: BTreeSet<(String, String)> = flaky
        .iter()
        .map(|id| (Parked::place_in(&list, id), id.clone()))
        .collect();
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in list.form("archive-form") {
        query.append_pair(&name, &value);
    }

    // The confirmation: what and where, nothing written yet.
    let (confirm, fields) = alice
        .confirm(&format!("/dlq/confirm/archive?{}", query.finish()))
        .await;
    assert!(
        confirm
            .body
            .contains("This will archive <strong>2</strong> records"),
        "{}",
        confirm.body
    );
    assert!(
        confirm
            .body
            .contains(&format!("{}/", root.join(&dlq_topic).display()))
    );
    for id in &flaky {
        assert!(confirm.body.contains(id.as_str()), "{id} previewed");
    }
    assert!(!confirm.body.contains(broken.as_str()));
    assert!(
        fields.iter().any(|(n, v)| n == "until" && !v.is_empty()),
        "the selection is pinned: {fields:?}"
    );
    assert!(
        objects_under(&root).is_empty(),
        "a confirmation writes nothing"
    );

    // A POST without the CSRF token, or with another one, is refused and writes nothing.
    let bare = without_csrf(&fields);
    let refused = alice.post("/dlq/act/archive", &bare).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let mut wrong = bare.clone();
    wrong.push(("csrf".into(), "0".repeat(64)));
    let refused = alice.post("/dlq/act/archive", &wrong).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(objects_under(&root).is_empty());

    // Confirmed: objects under <prefix>/<topic>/<yyyy>/<mm>/<dd>/, listed on the result page.
    let done = alice.post("/dlq/act/archive", &fields).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert!(
        done.body.contains("Archived <strong>2</strong> records"),
        "{}",
        done.body
    );
    assert!(done.body.contains("alice (operator)"));
    let objects = objects_under(&root);
    assert!(
        !objects.is_empty(),
        "objects written under {}",
        root.display()
    );
    let mut archived = Vec::new();
    for object in &objects {
        assert!(
            done.body.contains(&object.display().to_string()),
            "{} listed: {}",
            object.display(),
            done.body
        );
        let relative = object.strip_prefix(&root).expect("under the root");
        let parts: Vec<String> = relative
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            parts.len(),
            5,
            "<topic>/<yyyy>/<mm>/<dd>/<run>.avro: {parts:?}"
        );
        assert_eq!(parts[0], dlq_topic);
        let folder_day = parts[1..4].join("-");
        let records = read_back(object).await;
        assert!(!records.is_empty(), "{} holds records", object.display());
        for (place, event_id, parked_ms) in records {
            assert_eq!(
                format_ms(parked_ms)[..10],
                folder_day,
                "{event_id} is in the folder of the UTC day it was parked"
            );
            archived.push((place, event_id));
        }
    }
    assert_eq!(archived.len(), 2, "each selected record once: {archived:?}");
    let archived: BTreeSet<(String, String)> = archived.into_iter().collect();
    assert_eq!(archived, selected, "exactly the selected records");
    // The same prefix read as `hookline dlq inspect --file` reads it.
    let url = ArchiveUrl::parse(&archive_to).expect("the destination");
    let mut all = ArchiveRecords::open(&url, &StoreSettings::default())
        .await
        .expect("the prefix reads");
    let mut ids = BTreeSet::new();
    while let Some(s) = all.next().await.expect("a record") {
        ids.insert(s.record.envelope.event_id);
    }
    assert_eq!(ids, flaky);
    // Archiving changes no record: both stay open.
    let after = alice.get("/dlq?endpoint=ep-flaky").await;
    assert!(after.body.contains("2 records match"), "{}", after.body);

    // A viewer sees no archive button and is refused the confirmation and the POST.
    let mut victor = console.browser();
    assert_eq!(
        victor.login("victor", VIEWER_TOKEN).await.status,
        StatusCode::SEE_OTHER
    );
    let seen = victor.get("/dlq?endpoint=ep-flaky").await;
    assert_eq!(seen.status, StatusCode::OK);
    for absent in ["archive-button", "/dlq/confirm/archive"] {
        assert_eq!(count(&seen.body, absent), 0, "{absent} shown to a viewer");
    }
    let confirm = victor.get("/dlq/confirm/archive?endpoint=ep-flaky").await;
    assert_eq!(confirm.status, StatusCode::FORBIDDEN);
    let mut post = bare.clone();
    post.push(("csrf".into(), seen.csrf()));
    let refused = victor.post("/dlq/act/archive", &post).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert_eq!(objects_under(&root), objects, "nothing more written");

    // Without `archive_to`: no button, and the POST says archiving is not set up.
    let plain = Console::start(
        console_config().into_settings().expect("valid"),
        parked.names(),
    )
    .await;
    let mut operator = plain.browser();
    assert_eq!(
        operator.login("alice", OPERATOR_TOKEN).await.status,
        StatusCode::SEE_OTHER
    );
    let list = operator.get("/dlq?endpoint=ep-flaky").await;
    assert!(list.body.contains("2 records match"), "{}", list.body);
    assert!(list.body.contains("id=\"redrive-button\""));
    assert_eq!(count(&list.body, "archive-button"), 0);
    let mut post = bare;
    post.push(("csrf".into(), list.csrf()));
    let off = operator.post("/dlq/act/archive", &post).await;
    assert_eq!(off.status, StatusCode::NOT_FOUND, "{}", off.body);
    assert!(off.body.contains("Archiving is not set up"), "{}", off.body);
    assert!(off.body.contains("archive_to"));
    assert_eq!(objects_under(&root), objects);
}

//! The audit trail of operator actions on DLQ records (redrive, resolve, note), kept in the
//! compacted `<events>.dlq-actions` topic keyed by `<dlq partition>/<offset>`.
//!
//! Compaction keeps only a key's latest record, so each record carries the key's earlier
//! actions too (`earlier`): the latest record alone is the full history.

mod log;

use serde::{Deserialize, Serialize};

pub use log::{ActionLog, ActionWriter};

use crate::filter::format_ms;

/// What an operator did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// The record was re-published (to `target`).
    Redriven,
    /// The record was marked handled without a redrive.
    Resolved,
    /// A note was added; the status does not change.
    Note,
}

impl ActionKind {
    /// The name written in the action record.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::Redriven => "redriven",
            ActionKind::Resolved => "resolved",
            ActionKind::Note => "note",
        }
    }
}

/// One action: the value of an action record, less the earlier actions it carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// What was done.
    pub action: ActionKind,
    /// When, RFC 3339 UTC.
    pub at: String,
    /// Who did it.
    pub by: String,
    /// The role they acted in (`operator`, `admin`: the console's roles); `None` for
    /// actions from the command line, and for records written before roles were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The operator's note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Where a redrive sent the record (`<topic>/<partition>/<offset>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The event id of the record acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
}

impl Action {
    /// An action done now (`now_ms`) by `by`.
    pub fn new(action: ActionKind, now_ms: i64, by: &str) -> Action {
        Action {
            action,
            at: format_ms(now_ms),
            by: by.to_owned(),
            role: None,
            note: None,
            target: None,
            event_id: None,
        }
    }
}

/// The JSON value written to the actions topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StoredAction {
    #[serde(flatten)]
    pub action: Action,
    /// The key's actions before this one, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<Action>,
}

/// A record's status, from its actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// No redrive or resolve yet.
    Open,
    /// Redriven last.
    Redriven,
    /// Resolved last.
    Resolved,
}

impl Status {
    /// The name shown to people.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::Redriven => "redriven",
            Status::Resolved => "resolved",
        }
    }
}

/// A record's actions, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History(pub Vec<Action>);

impl History {
    /// The status the actions leave the record in: that of the latest redrive or resolve.
    pub fn status(&self) -> Status {
        self.0
            .iter()
            .rev()
            .find_map(|a| match a.action {
                ActionKind::Redriven => Some(Status::Redriven),
                ActionKind::Resolved => Some(Status::Resolved),
                ActionKind::Note => None,
            })
            .unwrap_or(Status::Open)
    }

    /// Whether the record was ever redriven.
    pub fn was_redriven(&self) -> bool {
        self.0.iter().any(|a| a.action == ActionKind::Redriven)
    }

    /// Merges a stored action record read from the topic: its earlier actions and itself,
    /// skipping those already known (records of a key arrive oldest first).
    pub(crate) fn merge(&mut self, stored: StoredAction) {
        for action in stored.earlier.into_iter().chain([stored.action]) {
            if !self.0.contains(&action) {
                self.0.push(action);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(kind: ActionKind, ms: i64) -> Action {
        Action::new(kind, ms, "ops")
    }

    #[test]
    fn status_is_the_latest_redrive_or_resolve() {
        let mut history = History::default();
        assert_eq!(history.status(), Status::Open);
        history.0.push(action(ActionKind::Note, 1));
        assert_eq!(history.status(), Status::Open);
        history.0.push(action(ActionKind::Resolved, 2));
        history.0.push(action(ActionKind::Note, 3));
        assert_eq!(history.status(), Status::Resolved);
        history.0.push(action(ActionKind::Redriven, 4));
        assert_eq!(history.status(), Status::Redriven);
        assert!(history.was_redriven());
    }

    #[test]
    fn stored_records_carry_earlier_actions_and_merge_once() {
        let first = StoredAction {
            action: action(ActionKind::Note, 1),
            earlier: vec![],
        };
        let second = StoredAction {
            action: Action {
                target: Some("t/0/5".into()),
                ..action(ActionKind::Redriven, 2)
            },
            earlier: vec![action(ActionKind::Note, 1)],
        };
        let json = serde_json::to_value(&second).expect("json");
        assert_eq!(json["action"], "redriven");
        assert_eq!(json["target"], "t/0/5");
        assert_eq!(json["earlier"][0]["action"], "note");
        assert!(json.get("note").is_none());
        let back: StoredAction = serde_json::from_value(json).expect("parse");
        assert_eq!(back, second);

        // With the first record still in the log, and after compaction removed it.
        let mut full = History::default();
        full.merge(first);
        full.merge(second.clone());
        let mut compacted = History::default();
        compacted.merge(second);
        assert_eq!(full, compacted);
        assert_eq!(full.0.len(), 2);
        assert_eq!(full.status(), Status::Redriven);
    }

    #[test]
    fn the_role_is_written_when_known_and_records_without_one_still_read() {
        let with_role = StoredAction {
            action: Action {
                role: Some("operator".into()),
                ..action(ActionKind::Resolved, 1)
            },
            earlier: vec![],
        };
        let json = serde_json::to_value(&with_role).expect("json");
        assert_eq!(json["role"], "operator");
        let back: StoredAction = serde_json::from_value(json).expect("parse");
        assert_eq!(back, with_role);
        // As written by a hookline without roles (and by the CLI): no `role` key.
        let old: StoredAction = serde_json::from_str(
            r#"{"action":"note","at":"2024-05-01T00:00:00.000Z","by":"ops","note":"n"}"#,
        )
        .expect("an action without a role");
        assert_eq!(old.action.role, None);
        assert!(
            serde_json::to_value(&old)
                .expect("json")
                .get("role")
                .is_none(),
            "no role key is written for an action without one"
        );
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzz::config(512))]

        /// Any value of an action record (the actions topic is written by any client): read
        /// or refused, and what is read merges into a history.
        #[test]
        fn action_records_of_any_value(
            value in proptest::prop_oneof![
                crate::fuzz::json_value(),
                crate::fuzz::edited_object(serde_json::json!({
                    "action": "redriven", "at": "2024-05-01T00:00:00.000Z", "by": "ops",
                    "target": "t/0/5", "earlier": [{"action": "note", "at": "x", "by": "y"}],
                })),
            ],
        ) {
            if let Ok(stored) = serde_json::from_slice::<StoredAction>(value.to_string().as_bytes()) {
                let mut history = History::default();
                history.merge(stored);
                let _ = history.status();
            }
        }
    }
}

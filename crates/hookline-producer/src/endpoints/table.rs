//! Folding the records of the endpoint table into its current state, without I/O.

use std::collections::BTreeMap;

use hookline_core::endpoint::EndpointConfig;

/// The endpoint table as of the moment it was read: for each id, its latest record.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndpointList {
    /// The endpoints, by id.
    pub endpoints: BTreeMap<String, EndpointConfig>,
    /// Ids whose latest record is not a valid config, with why (never showing a secret).
    pub unreadable: BTreeMap<String, String>,
    /// Records skipped because their key is missing or not UTF-8.
    pub skipped_keys: usize,
}

impl EndpointList {
    /// Applies one record of the table: a value replaces the id's config, a tombstone
    /// (no value) removes it. A value that is not a valid config hides the id's previous
    /// one, as it would for the dispatcher.
    pub(crate) fn apply(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) {
        let Some(id) = key.and_then(|k| std::str::from_utf8(k).ok()) else {
            self.skipped_keys += 1;
            return;
        };
        self.endpoints.remove(id);
        self.unreadable.remove(id);
        let Some(value) = value else {
            return;
        };
        match EndpointConfig::from_json(value) {
            Ok(config) => {
                self.endpoints.insert(id.to_owned(), config);
            }
            Err(error) => {
                self.unreadable.insert(id.to_owned(), error.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> Vec<u8> {
        serde_json::json!({ "url": url, "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"] })
            .to_string()
            .into_bytes()
    }

    #[test]
    fn last_value_wins_and_tombstones_remove() {
        let mut list = EndpointList::default();
        list.apply(Some(b"a"), Some(&config("https://a.example/1")));
        list.apply(Some(b"b"), Some(&config("https://b.example/")));
        list.apply(Some(b"a"), Some(&config("https://a.example/2")));
        list.apply(Some(b"b"), None);
        assert_eq!(list.endpoints.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(list.endpoints["a"].url, "https://a.example/2");
    }

    #[test]
    fn unreadable_values_and_keys_are_reported() {
        let mut list = EndpointList::default();
        list.apply(Some(b"a"), Some(&config("https://a.example/")));
        list.apply(Some(b"a"), Some(b"{not json"));
        list.apply(Some(b"b"), Some(br#"{"url":"ftp://x","secrets":[]}"#));
        list.apply(None, Some(&config("https://x.example/")));
        list.apply(Some(&[0xff, 0xfe]), None);
        assert!(list.endpoints.is_empty());
        assert_eq!(list.unreadable.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(list.skipped_keys, 2);
        list.apply(Some(b"a"), None);
        list.apply(Some(b"b"), Some(&config("https://b.example/")));
        assert!(list.unreadable.is_empty());
        assert_eq!(list.endpoints.keys().collect::<Vec<_>>(), ["b"]);
    }
}

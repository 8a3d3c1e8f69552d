//! The subscription index: which endpoints of a tenant want an event of some type with
//! some channels, at a cost in proportion to the matches, not to the table.
//!
//! # Semantics
//!
//! An endpoint belongs to one tenant and holds one [`Subscription`]; an event for a tenant
//! goes to every endpoint of that tenant whose subscription wants it, and to no other.
//!
//! Event types (`event_types`):
//! - an exact name, `invoice.paid`, matches that type only;
//! - `prefix.*` (`*` as the whole last dot-segment) matches every type that starts with
//!   `prefix.` and has at least one more character: `invoice.*` matches `invoice.paid` and
//!   `invoice.line.added`, not `invoice`;
//! - `*` alone matches every type, and so does an empty list.
//!
//! Channels (`channels`, as in Svix): an endpoint without channels receives events whatever
//! their channels; an endpoint with channels receives only the events that carry at least
//! one of them, so an event without channels does not reach it.
//!
//! [`check_pattern`] and [`check_channel`] (or [`Subscription::validate`]) say which
//! subscriptions are well-formed; check before indexing. The index itself takes any
//! strings and never panics: a pattern that is `*` is a wildcard, one that ends in `.*` is
//! a prefix, and any other is an exact name, so an invalid pattern such as `inv*` matches
//! only an event type spelled the same way.
//!
//! [`SubscriptionIndex::matches`] returns each matching endpoint id once, sorted by bytes:
//! the fan-out writes its records in that order.
//!
//! # Cost
//!
//! A lookup costs one hash of the tenant, one of the event type, one per dot-segment of the
//! event type (bounded by the tenant's longest prefix pattern), and then in proportion to
//! the matches; never to the tenant's or the table's size. Each endpoint remembers what it
//! is indexed under, so [`SubscriptionIndex::upsert`] and [`SubscriptionIndex::remove`]
//! touch only its own entries. Ids, tenants and event types are interned as `Arc<str>`.

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The longest event type pattern, in bytes.
pub const MAX_PATTERN_LEN: usize = 256;
/// The most event type patterns in one subscription.
pub const MAX_EVENT_TYPES: usize = 64;
/// The most channels in one subscription.
pub const MAX_CHANNELS: usize = 10;
/// The longest channel name, in bytes.
pub const MAX_CHANNEL_LEN: usize = 128;

/// Event channels above this count are put in a set before filtering the candidates.
const CHANNEL_SET_THRESHOLD: usize = 16;

/// What one endpoint subscribes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// The tenant the endpoint belongs to.
    pub tenant: String,
    /// Event type patterns: exact names, `prefix.*` or `*`; empty means every type.
    pub event_types: Vec<String>,
    /// Channels; empty means events whatever their channels.
    pub channels: Vec<String>,
}

impl Subscription {
    /// Checks every pattern and channel and their counts.
    pub fn validate(&self) -> Result<(), PatternError> {
        if self.event_types.len() > MAX_EVENT_TYPES {
            return Err(PatternError::TooManyEventTypes {
                count: self.event_types.len(),
            });
        }
        if self.channels.len() > MAX_CHANNELS {
            return Err(PatternError::TooManyChannels {
                count: self.channels.len(),
            });
        }
        self.event_types.iter().try_for_each(|p| check_pattern(p))?;
        self.channels.iter().try_for_each(|c| check_channel(c))
    }

    /// Whether this subscription wants an event of `event_type` carrying `channels`
    /// (the tenant left aside): the rules of the index, one subscription at a time.
    pub fn wants(&self, event_type: &str, channels: &[String]) -> bool {
        let type_ok = self.event_types.is_empty()
            || self
                .event_types
                .iter()
                .any(|pattern| pattern_matches(pattern, event_type));
        let channels_ok =
            self.channels.is_empty() || self.channels.iter().any(|c| channels.contains(c));
        type_ok && channels_ok
    }
}

/// Whether `pattern` (read as the index reads it) matches `event_type`.
pub fn pattern_matches(pattern: &str, event_type: &str) -> bool {
    match Pattern::parse(pattern) {
        Pattern::All => true,
        Pattern::Prefix(prefix) => {
            event_type.len() > prefix.len() && event_type.starts_with(prefix)
        }
        Pattern::Exact(name) => name == event_type,
    }
}

/// Why an event type pattern or a channel name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The pattern is empty.
    #[error("event type pattern is empty")]
    Empty,
    /// The pattern is longer than [`MAX_PATTERN_LEN`].
    #[error("event type pattern is {len} bytes, over the limit of {MAX_PATTERN_LEN}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The pattern holds a control character.
    #[error("event type pattern has a control character at byte {at}")]
    ControlCharacter {
        /// Where, in bytes from the start.
        at: usize,
    },
    /// The pattern holds whitespace.
    #[error("event type pattern has whitespace at byte {at}")]
    Whitespace {
        /// Where, in bytes from the start.
        at: usize,
    },
    /// A dot-segment is empty: `a..b`, `.a` or `a.`.
    #[error("event type pattern `{pattern}` has an empty dot-segment (as in `a..b`, `.a` or `a.`)")]
    EmptySegment {
        /// The pattern.
        pattern: String,
    },
    /// A `*` that is not the whole last dot-segment: `inv*`, `*.paid`, `a.*.b`.
    #[error(
        "event type pattern `{pattern}` has a `*` that is not the whole last dot-segment \
         (write `invoice.*` or `*`)"
    )]
    MisplacedWildcard {
        /// The pattern.
        pattern: String,
    },
    /// More than [`MAX_EVENT_TYPES`] patterns in one subscription.
    #[error("subscription has {count} event type patterns, over the limit of {MAX_EVENT_TYPES}")]
    TooManyEventTypes {
        /// How many.
        count: usize,
    },
    /// The channel name is empty.
    #[error("channel name is empty")]
    ChannelEmpty,
    /// The channel name is longer than [`MAX_CHANNEL_LEN`].
    #[error("channel name is {len} bytes, over the limit of {MAX_CHANNEL_LEN}")]
    ChannelTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The channel name holds a character that is not visible ASCII.
    #[error("channel name has a character that is not visible ASCII at byte {at}")]
    ChannelCharacter {
        /// Where, in bytes from the start.
        at: usize,
    },
    /// The channel name holds a `*`.
    #[error("channel name must not contain `*` (at byte {at})")]
    ChannelWildcard {
        /// Where, in bytes from the start.
        at: usize,
    },
    /// More than [`MAX_CHANNELS`] channels in one subscription.
    #[error("subscription has {count} channels, over the limit of {MAX_CHANNELS}")]
    TooManyChannels {
        /// How many.
        count: usize,
    },
}

/// Checks one event type pattern: an exact name, `prefix.*` or `*`.
pub fn check_pattern(pattern: &str) -> Result<(), PatternError> {
    if pattern.is_empty() {
        return Err(PatternError::Empty);
    }
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(PatternError::TooLong { len: pattern.len() });
    }
    if let Some((at, _)) = pattern.char_indices().find(|(_, c)| c.is_control()) {
        return Err(PatternError::ControlCharacter { at });
    }
    if let Some((at, _)) = pattern.char_indices().find(|(_, c)| c.is_whitespace()) {
        return Err(PatternError::Whitespace { at });
    }
    if pattern.split('.').any(str::is_empty) {
        return Err(PatternError::EmptySegment {
            pattern: pattern.to_owned(),
        });
    }
    let body = match pattern.strip_suffix(".*") {
        Some(prefix) => prefix,
        None if pattern == "*" => "",
        None => pattern,
    };
    if body.contains('*') {
        return Err(PatternError::MisplacedWildcard {
            pattern: pattern.to_owned(),
        });
    }
    Ok(())
}

/// Checks one channel name: 1 to [`MAX_CHANNEL_LEN`] bytes of visible ASCII, no `*`.
pub fn check_channel(name: &str) -> Result<(), PatternError> {
    if name.is_empty() {
        return Err(PatternError::ChannelEmpty);
    }
    if name.len() > MAX_CHANNEL_LEN {
        return Err(PatternError::ChannelTooLong { len: name.len() });
    }
    if let Some(at) = name.bytes().position(|b| !b.is_ascii_graphic()) {
        return Err(PatternError::ChannelCharacter { at });
    }
    if let Some(at) = name.bytes().position(|b| b == b'*') {
        return Err(PatternError::ChannelWildcard { at });
    }
    Ok(())
}

/// A pattern as the index reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Pattern<'a> {
    /// `*`.
    All,
    /// `prefix.*`, holding `prefix.` (with its dot).
    Prefix(&'a str),
    /// Anything else.
    Exact(&'a str),
}

impl<'a> Pattern<'a> {
    fn parse(pattern: &'a str) -> Self {
        if pattern == "*" {
            return Pattern::All;
        }
        match pattern.strip_suffix('*') {
            Some(prefix) if prefix.ends_with('.') => Pattern::Prefix(prefix),
            _ => Pattern::Exact(pattern),
        }
    }
}

/// Endpoint ids, sorted by bytes, each once.
type Ids = Vec<Arc<str>>;

/// Which endpoints of which tenants want which events; see the module's doc.
#[derive(Debug, Default)]
pub struct SubscriptionIndex {
    tenants: HashMap<Arc<str>, TenantSubs>,
    endpoints: HashMap<Arc<str>, Indexed>,
}

/// One tenant's endpoints, by what they subscribe to.
#[derive(Debug, Default)]
struct TenantSubs {
    /// By exact event type.
    exact: HashMap<Arc<str>, Ids>,
    /// By prefix, with its dot (`invoice.` for `invoice.*`).
    prefixes: HashMap<Arc<str>, Ids>,
    /// Those that want every type.
    all: Ids,
    /// At least the longest key of `prefixes` (it only shrinks when they are all gone): a
    /// lookup tries no longer prefix, so a long event type of many dots stays cheap.
    longest_prefix: usize,
    /// How many of the tenant's endpoints have channels; at 0 a lookup skips the filter.
    with_channels: usize,
}

impl TenantSubs {
    fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefixes.is_empty() && self.all.is_empty()
    }
}

/// What one endpoint is indexed under.
#[derive(Debug)]
struct Indexed {
    tenant: Arc<str>,
    keys: Box<[Key]>,
    channels: Box<[Box<str>]>,
}

/// One place an endpoint's id is listed in its tenant's [`TenantSubs`].
#[derive(Debug)]
enum Key {
    All,
    Exact(Arc<str>),
    Prefix(Arc<str>),
}

impl SubscriptionIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Indexes `endpoint_id` under `subscription`, replacing whatever it had (its tenant
    /// included).
    pub fn upsert(&mut self, endpoint_id: &str, subscription: &Subscription) {
        let id = match self.endpoints.get_key_value(endpoint_id) {
            Some((id, _)) => id.clone(),
            None => Arc::from(endpoint_id),
        };
        self.remove(endpoint_id);
        let tenant = match self.tenants.get_key_value(subscription.tenant.as_str()) {
            Some((tenant, _)) => tenant.clone(),
            None => Arc::from(subscription.tenant.as_str()),
        };
        let subs = self.tenants.entry(tenant.clone()).or_default();

        let mut patterns: Vec<Pattern<'_>> = subscription
            .event_types
            .iter()
            .map(|p| Pattern::parse(p))
            .collect();
        // `*` (or no pattern) subsumes the others: list the endpoint once, under `all`.
        if patterns.is_empty() || patterns.contains(&Pattern::All) {
            patterns = vec![Pattern::All];
        }
        patterns.sort_unstable();
        patterns.dedup();
        let keys = patterns
            .into_iter()
            .map(|pattern| match pattern {
                Pattern::All => {
                    insert_sorted(&mut subs.all, &id);
                    Key::All
                }
                Pattern::Prefix(prefix) => {
                    subs.longest_prefix = subs.longest_prefix.max(prefix.len());
                    Key::Prefix(list_under(&mut subs.prefixes, prefix, &id))
                }
                Pattern::Exact(name) => Key::Exact(list_under(&mut subs.exact, name, &id)),
            })
            .collect();

        let channels: Box<[Box<str>]> = subscription
            .channels
            .iter()
            .map(|c| Box::from(c.as_str()))
            .collect();
        if !channels.is_empty() {
            subs.with_channels += 1;
        }
        self.endpoints.insert(
            id,
            Indexed {
                tenant,
                keys,
                channels,
            },
        );
    }

    /// Forgets `endpoint_id` (nothing happens if it is not indexed).
    pub fn remove(&mut self, endpoint_id: &str) {
        let Some(indexed) = self.endpoints.remove(endpoint_id) else {
            return;
        };
        let Some(subs) = self.tenants.get_mut(&*indexed.tenant) else {
            return;
        };
        for key in indexed.keys {
            match key {
                Key::All => remove_sorted(&mut subs.all, endpoint_id),
                Key::Exact(name) => unlist_under(&mut subs.exact, &name, endpoint_id),
                Key::Prefix(prefix) => unlist_under(&mut subs.prefixes, &prefix, endpoint_id),
            }
        }
        if !indexed.channels.is_empty() {
            subs.with_channels = subs.with_channels.saturating_sub(1);
        }
        if subs.prefixes.is_empty() {
            subs.longest_prefix = 0;
        }
        if subs.is_empty() {
            self.tenants.remove(&*indexed.tenant);
        }
    }

    /// The endpoints of `tenant` that want an event of `event_type` carrying `channels`,
    /// each once, sorted by bytes.
    pub fn matches(&self, tenant: &str, event_type: &str, channels: &[String]) -> Vec<Arc<str>> {
        let Some(subs) = self.tenants.get(tenant) else {
            return Vec::new();
        };
        let mut lists: Vec<&[Arc<str>]> = Vec::new();
        if let Some(ids) = subs.exact.get(event_type) {
            lists.push(ids);
        }
        if !subs.prefixes.is_empty() {
            // `prefix.` matches when at least one character follows it.
            let tried = event_type.len().saturating_sub(1).min(subs.longest_prefix);
            for (at, _) in event_type
                .bytes()
                .take(tried)
                .enumerate()
                .filter(|(_, b)| *b == b'.')
            {
                if let Some(ids) = event_type.get(..=at).and_then(|p| subs.prefixes.get(p)) {
                    lists.push(ids);
                }
            }
        }
        if !subs.all.is_empty() {
            lists.push(&subs.all);
        }

        let mut found: Vec<&Arc<str>> = lists.iter().flat_map(|ids| ids.iter()).collect();
        // Each list is sorted and holds an id once; only a union needs sorting.
        if lists.len() > 1 {
            found.sort_unstable();
            found.dedup();
        }
        if subs.with_channels > 0 {
            let filter = ChannelFilter::new(channels);
            found.retain(|id| {
                self.endpoints
                    .get(&***id)
                    .is_some_and(|indexed| filter.admits(&indexed.channels))
            });
        }
        found.into_iter().cloned().collect()
    }

    /// How many endpoints are indexed.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Whether no endpoint is indexed.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// How many tenants have at least one endpoint indexed.
    pub fn tenants(&self) -> usize {
        self.tenants.len()
    }
}

/// An event's channels, as a slice or (when there are many) a set.
enum ChannelFilter<'a> {
    Few(&'a [String]),
    Many(HashSet<&'a str>),
}

impl<'a> ChannelFilter<'a> {
    fn new(channels: &'a [String]) -> Self {
        if channels.len() > CHANNEL_SET_THRESHOLD {
            ChannelFilter::Many(channels.iter().map(String::as_str).collect())
        } else {
            ChannelFilter::Few(channels)
        }
    }

    /// Whether an endpoint with `wanted` channels receives the event.
    fn admits(&self, wanted: &[Box<str>]) -> bool {
        wanted.is_empty()
            || wanted.iter().any(|c| match self {
                ChannelFilter::Few(channels) => channels.iter().any(|e| **e == **c),
                ChannelFilter::Many(set) => set.contains(&**c),
            })
    }
}

/// Lists `id` under `key` in `map` and returns the interned key.
fn list_under(map: &mut HashMap<Arc<str>, Ids>, key: &str, id: &Arc<str>) -> Arc<str> {
    if let Some((interned, _)) = map.get_key_value(key) {
        let interned = interned.clone();
        if let Some(ids) = map.get_mut(key) {
            insert_sorted(ids, id);
        }
        return interned;
    }
    let interned: Arc<str> = Arc::from(key);
    map.insert(interned.clone(), vec![id.clone()]);
    interned
}

/// Takes `id` off the list under `key`, and the list off `map` when it empties.
fn unlist_under(map: &mut HashMap<Arc<str>, Ids>, key: &str, id: &str) {
    if let Some(ids) = map.get_mut(key) {
        remove_sorted(ids, id);
        if ids.is_empty() {
            map.remove(key);
        }
    }
}

fn insert_sorted(ids: &mut Ids, id: &Arc<str>) {
    if let Err(at) = ids.binary_search_by(|probe| (**probe).cmp(&**id)) {
        // Grow by half, from one: most lists hold a few ids, and Vec's own first step is 4.
        if ids.len() == ids.capacity() {
            ids.reserve_exact(ids.len() / 2 + 1);
        }
        ids.insert(at, id.clone());
    }
}

fn remove_sorted(ids: &mut Ids, id: &str) {
    if let Ok(at) = ids.binary_search_by(|probe| (**probe).cmp(id)) {
        ids.remove(at);
        if ids.len() * 4 <= ids.capacity() {
            ids.shrink_to(ids.len() * 2);
        }
    }
}

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
//! the matches (every list is kept sorted by id, so their union is a merge); never to the
//! tenant's or the table's size. Each endpoint remembers what it
//! is indexed under, so [`SubscriptionIndex::upsert`] and [`SubscriptionIndex::remove`]
//! touch only its own entries. Ids, tenants and event types are interned as `Arc<str>`.

mod index;
mod pattern;
#[cfg(test)]
mod tests;

pub use index::SubscriptionIndex;
pub use pattern::{
    MAX_CHANNEL_LEN, MAX_CHANNELS, MAX_EVENT_TYPES, MAX_PATTERN_LEN, PatternError, check_channel,
    check_pattern, pattern_matches,
};

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

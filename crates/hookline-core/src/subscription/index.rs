//! [`SubscriptionIndex`]: per tenant, endpoints by exact type, by prefix, and those that
//! want every type; and per endpoint where it is listed.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::Subscription;
use super::pattern::Pattern;

/// Event channels above this count are put in a set before filtering the candidates.
const CHANNEL_SET_THRESHOLD: usize = 16;

/// An indexed endpoint: its id and channels, shared by every list it is in, so a lookup
/// filters by channels without another hash.
#[derive(Debug)]
struct Endpoint {
    id: Arc<str>,
    channels: Box<[Box<str>]>,
}

/// Endpoints, sorted by id (bytes), each once: one inline (most lists of a small tenant),
/// or an exact-size slice, so a list costs 16 bytes in its map plus 8 per endpoint.
#[derive(Debug)]
enum Postings {
    One(Arc<Endpoint>),
    Many(Box<[Arc<Endpoint>]>),
}

// The 16 bytes (two words) the doc above counts on.
const _: () = assert!(std::mem::size_of::<Postings>() == 2 * std::mem::size_of::<usize>());

impl Default for Postings {
    fn default() -> Self {
        Postings::Many(Box::default())
    }
}

impl Postings {
    fn as_slice(&self) -> &[Arc<Endpoint>] {
        match self {
            Postings::One(endpoint) => std::slice::from_ref(endpoint),
            Postings::Many(endpoints) => endpoints,
        }
    }

    fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// Adds `endpoint` in its place, unless it is there.
    fn insert(&mut self, endpoint: &Arc<Endpoint>) {
        let found = self
            .as_slice()
            .binary_search_by(|probe| probe.id.cmp(&endpoint.id));
        let Err(at) = found else {
            return;
        };
        *self = match std::mem::take(self) {
            Postings::Many(endpoints) if endpoints.is_empty() => Postings::One(endpoint.clone()),
            other => {
                // One reallocation per change, as the shift already costs as much.
                let mut endpoints = match other {
                    Postings::One(first) => vec![first],
                    Postings::Many(endpoints) => endpoints.into_vec(),
                };
                endpoints.reserve_exact(1);
                endpoints.insert(at, endpoint.clone());
                Postings::Many(endpoints.into_boxed_slice())
            }
        };
    }

    /// Takes the endpoint `id` off, if it is there.
    fn remove(&mut self, id: &str) {
        let Ok(at) = self
            .as_slice()
            .binary_search_by(|probe| (*probe.id).cmp(id))
        else {
            return;
        };
        *self = match std::mem::take(self) {
            Postings::One(_) => Postings::default(),
            Postings::Many(endpoints) => {
                let mut endpoints = endpoints.into_vec();
                endpoints.remove(at);
                if endpoints.len() == 1
                    && let Some(only) = endpoints.pop()
                {
                    Postings::One(only)
                } else {
                    Postings::Many(endpoints.into_boxed_slice())
                }
            }
        };
    }
}

/// The reverse map's key: an endpoint, hashed and compared by its id (as a `str` is, so
/// the map is searched by `&str`).
#[derive(Debug)]
struct ById(Arc<Endpoint>);

impl Borrow<str> for ById {
    fn borrow(&self) -> &str {
        &self.0.id
    }
}

impl Hash for ById {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (*self.0.id).hash(state);
    }
}

impl PartialEq for ById {
    fn eq(&self, other: &Self) -> bool {
        self.0.id == other.0.id
    }
}

impl Eq for ById {}

/// Which endpoints of which tenants want which events; see the module's doc.
#[derive(Debug, Default)]
pub struct SubscriptionIndex {
    tenants: HashMap<Arc<str>, TenantSubs>,
    endpoints: HashMap<ById, Indexed>,
    /// Event types and prefixes, interned across tenants; one goes when no list uses it.
    names: HashSet<Arc<str>>,
}

/// One tenant's endpoints, by what they subscribe to.
#[derive(Debug, Default)]
struct TenantSubs {
    /// By exact event type.
    exact: HashMap<Arc<str>, Postings>,
    /// By prefix, with its dot (`invoice.` for `invoice.*`).
    prefixes: HashMap<Arc<str>, Postings>,
    /// Those that want every type.
    all: Postings,
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

/// Where one endpoint is listed.
#[derive(Debug)]
struct Indexed {
    tenant: Arc<str>,
    keys: Box<[Key]>,
}

/// One place an endpoint is listed in its tenant's [`TenantSubs`].
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
            Some((known, _)) => known.0.id.clone(),
            None => Arc::from(endpoint_id),
        };
        self.remove(endpoint_id);
        let endpoint = Arc::new(Endpoint {
            id,
            channels: subscription
                .channels
                .iter()
                .map(|c| Box::from(c.as_str()))
                .collect(),
        });
        let tenant = match self.tenants.get_key_value(subscription.tenant.as_str()) {
            Some((tenant, _)) => tenant.clone(),
            None => Arc::from(subscription.tenant.as_str()),
        };
        let subs = self.tenants.entry(tenant.clone()).or_default();
        if !endpoint.channels.is_empty() {
            subs.with_channels += 1;
        }

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
                    subs.all.insert(&endpoint);
                    Key::All
                }
                Pattern::Prefix(prefix) => {
                    subs.longest_prefix = subs.longest_prefix.max(prefix.len());
                    let prefix = intern(&mut self.names, prefix);
                    subs.prefixes
                        .entry(prefix.clone())
                        .or_default()
                        .insert(&endpoint);
                    Key::Prefix(prefix)
                }
                Pattern::Exact(name) => {
                    let name = intern(&mut self.names, name);
                    subs.exact
                        .entry(name.clone())
                        .or_default()
                        .insert(&endpoint);
                    Key::Exact(name)
                }
            })
            .collect();
        self.endpoints
            .insert(ById(endpoint), Indexed { tenant, keys });
    }

    /// Forgets `endpoint_id` (nothing happens if it is not indexed).
    pub fn remove(&mut self, endpoint_id: &str) {
        let Some((ById(endpoint), indexed)) = self.endpoints.remove_entry(endpoint_id) else {
            return;
        };
        let Some(subs) = self.tenants.get_mut(&*indexed.tenant) else {
            return;
        };
        for key in indexed.keys {
            let name = match key {
                Key::All => {
                    subs.all.remove(endpoint_id);
                    continue;
                }
                Key::Exact(name) => {
                    unlist_under(&mut subs.exact, &name, endpoint_id);
                    name
                }
                Key::Prefix(prefix) => {
                    unlist_under(&mut subs.prefixes, &prefix, endpoint_id);
                    prefix
                }
            };
            // Held by `names` and by this key alone: no list uses it any more.
            if Arc::strong_count(&name) == 2 {
                self.names.remove(&name);
            }
        }
        if !endpoint.channels.is_empty() {
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
        let mut lists: Vec<&[Arc<Endpoint>]> = Vec::new();
        if let Some(endpoints) = subs.exact.get(event_type) {
            lists.push(endpoints.as_slice());
        }
        if !subs.prefixes.is_empty() {
            // `prefix.` matches when at least one character follows it.
            let tried = event_type.len().saturating_sub(1).min(subs.longest_prefix);
            let dots = event_type
                .bytes()
                .take(tried)
                .enumerate()
                .filter(|(_, b)| *b == b'.');
            for (at, _) in dots {
                if let Some(endpoints) = event_type.get(..=at).and_then(|p| subs.prefixes.get(p)) {
                    lists.push(endpoints.as_slice());
                }
            }
        }
        if !subs.all.is_empty() {
            lists.push(subs.all.as_slice());
        }

        // Each list is sorted and holds an endpoint once: merge them, in linear time.
        let found = lists.into_iter().fold(Vec::new(), merge);
        let filter = (subs.with_channels > 0).then(|| ChannelFilter::new(channels));
        found
            .into_iter()
            .filter(|endpoint| filter.as_ref().is_none_or(|f| f.admits(&endpoint.channels)))
            .map(|endpoint| endpoint.id.clone())
            .collect()
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

    /// Whether nothing is left, not even an interned name.
    #[cfg(test)]
    pub(super) fn is_drained(&self) -> bool {
        self.tenants.is_empty() && self.endpoints.is_empty() && self.names.is_empty()
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

/// The sorted union of two sorted lists of endpoints.
fn merge<'a>(a: Vec<&'a Endpoint>, b: &'a [Arc<Endpoint>]) -> Vec<&'a Endpoint> {
    if a.is_empty() {
        return b.iter().map(|e| &**e).collect();
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut a = a.into_iter().peekable();
    let mut b = b.iter().map(|e| &**e).peekable();
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => match x.id.cmp(&y.id) {
                Ordering::Less => a.next(),
                Ordering::Greater => b.next(),
                // The same id is the same endpoint.
                Ordering::Equal => {
                    b.next();
                    a.next()
                }
            },
            (Some(_), None) => a.next(),
            (None, Some(_)) => b.next(),
            (None, None) => return out,
        };
        out.extend(next);
    }
}

/// `name`, shared through `names`.
fn intern(names: &mut HashSet<Arc<str>>, name: &str) -> Arc<str> {
    if let Some(interned) = names.get(name) {
        return interned.clone();
    }
    let interned: Arc<str> = Arc::from(name);
    names.insert(interned.clone());
    interned
}

/// Takes the endpoint `id` off the list under `key`, and the list off `map` when it empties.
fn unlist_under(map: &mut HashMap<Arc<str>, Postings>, key: &str, id: &str) {
    if let Some(endpoints) = map.get_mut(key) {
        endpoints.remove(id);
        if endpoints.is_empty() {
            map.remove(key);
        }
    }
}

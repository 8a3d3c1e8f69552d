//! The hash map and set of the lookups on the delivery path, with a faster hasher than
//! std's.

/// The hash map of the lookups on the delivery path (partitions, strict-order chains,
/// endpoints by id), several per delivery: foldhash's hasher, seeded per process, instead
/// of std's SipHash.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The hash set beside [`FastMap`], with the same hasher.
pub(crate) type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

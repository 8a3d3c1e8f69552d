//! `hookline-bench index`: heap bytes and lookup time of the subscription index, against a
//! plain `HashMap<String, Subscription>` of the same subscriptions measured in the same
//! run. No Kafka.
//!
//! Heap bytes are counted by [`CountingAlloc`], the binary's global allocator: `System`,
//! adding and subtracting the requested sizes with relaxed atomics while counting is on.
//! Only this subcommand turns it on; otherwise (the throughput benchmark, and the baseline
//! forwarder, which is this binary too) each allocation costs one relaxed load more.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use hookline_core::subscription::{Subscription, SubscriptionIndex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::machine::Machine;
use crate::report::Spread;
use crate::text_table;

static COUNTING: AtomicBool = AtomicBool::new(false);
/// Live bytes allocated since counting began (wrapping: frees of earlier blocks subtract).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// `System`, counting live heap bytes while [`start_counting`] is in effect.
pub struct CountingAlloc;

// SAFETY: every call forwards to `System` with the same arguments; the counters never touch
// the memory.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `GlobalAlloc::alloc`; the caller's contract is passed on.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            counted(layout.size(), 0);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `GlobalAlloc::alloc_zeroed`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            counted(layout.size(), 0);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as `GlobalAlloc::dealloc`: `ptr` came from this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        counted(0, layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `GlobalAlloc::realloc`.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            counted(new_size, layout.size());
        }
        new
    }
}

fn counted(added: usize, freed: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE.fetch_add(added.wrapping_sub(freed), Ordering::Relaxed);
    }
}

/// Turns the counting on, for the rest of the process.
fn start_counting() {
    COUNTING.store(true, Ordering::Relaxed);
}

/// The live-bytes counter, to subtract from a later reading.
fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Options of `hookline-bench index`.
#[derive(Debug, clap::Args)]
pub struct IndexArgs {
    /// Endpoints to index.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub endpoints: u64,
    /// Tenants they are spread across (each gets one; the rest go more to the first ones).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub tenants: u64,
    /// Lookups per round on each side, for tenants picked uniformly (and a twentieth as
    /// many for the largest tenant).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub lookups: u64,
    /// Timed rounds, each side in turn; the figures are the medians.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Seed of the generated subscriptions and lookups.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A measure of both sides.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Compared {
    /// `SubscriptionIndex`.
    pub index: f64,
    /// `HashMap<String, Subscription>`.
    pub naive: f64,
    /// `index / naive`.
    pub ratio: f64,
}

impl Compared {
    fn new(index: f64, naive: f64) -> Self {
        Compared {
            index,
            naive,
            ratio: index / naive,
        }
    }
}

/// Lookups of one kind, timed on both sides.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Timed {
    /// Lookups per round, on each side.
    pub lookups: u64,
    /// Endpoints a lookup returned, on average.
    pub mean_matches: f64,
    /// The index's mean time of one lookup, in nanoseconds, over the rounds.
    pub index_ns: Spread,
    /// The naive table's, in nanoseconds: a scan of the tenant's endpoints (grouped by
    /// tenant and sorted by id beforehand, outside its heap bytes).
    pub naive_ns: Spread,
    /// The index's median over the naive table's.
    pub ratio: f64,
}

/// What `hookline-bench index` found.
#[derive(Clone, Debug, Serialize)]
pub struct IndexReport {
    /// Where.
    pub machine: Machine,
    /// Endpoints indexed.
    pub endpoints: u64,
    /// Tenants with at least one endpoint.
    pub tenants: u64,
    /// Endpoints of the largest tenant.
    pub largest_tenant: u64,
    /// Timed rounds.
    pub rounds: u32,
    /// Heap bytes held once built (requested sizes, live).
    pub heap_bytes: Compared,
    /// `heap_bytes` over the endpoints.
    pub bytes_per_endpoint: Compared,
    /// Lookups for tenants picked uniformly (most are small).
    pub lookup: Timed,
    /// Lookups for the largest tenant.
    pub largest_tenant_lookup: Timed,
}

impl IndexReport {
    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let (u, l) = (&self.lookup, &self.largest_tenant_lookup);
        let _ = writeln!(out, "hookline-bench index");
        let _ = writeln!(
            out,
            "machine:   {} CPUs ({}), {:.1} GiB, {}",
            m.nproc, m.cpu, m.memory_gib, m.kernel
        );
        let _ = writeln!(
            out,
            "workload:  {} endpoints across {} tenants (largest {}); per round {} lookups for \
             tenants picked uniformly ({:.2} matches each) and {} for the largest ({:.1} \
             matches each); {} rounds",
            self.endpoints,
            self.tenants,
            self.largest_tenant,
            u.lookups,
            u.mean_matches,
            l.lookups,
            l.mean_matches,
            self.rounds
        );
        let _ = writeln!(out);
        let mut table = text_table::new(&["", "index", "naive table", "index / naive"]);
        let (h, b) = (&self.heap_bytes, &self.bytes_per_endpoint);
        let rows = [
            (
                "heap bytes",
                format!("{:.0}", h.index),
                format!("{:.0}", h.naive),
                h.ratio,
            ),
            (
                "bytes per endpoint",
                format!("{:.1}", b.index),
                format!("{:.1}", b.naive),
                b.ratio,
            ),
            (
                "lookup (ns, any tenant)",
                u.index_ns.cell(),
                u.naive_ns.cell(),
                u.ratio,
            ),
            (
                "lookup (ns, largest tenant)",
                l.index_ns.cell(),
                l.naive_ns.cell(),
                l.ratio,
            ),
        ];
        for (name, index, naive, ratio) in rows {
            table.add_row([name.to_owned(), index, naive, format!("{ratio:.2}")]);
        }
        out.push_str(&text_table::render(&table));
        let _ = writeln!(
            out,
            "(naive: HashMap<String, Subscription>, its lookup a scan of the tenant's endpoints \
             grouped and sorted beforehand; times: median ±half the range over the rounds)"
        );
        out
    }
}

/// Event types' first segments and last segments: every pair is a type of the catalog.
const RESOURCES: &[&str] = &[
    "invoice",
    "customer",
    "subscription",
    "payment",
    "charge",
    "refund",
    "order",
    "shipment",
    "user",
    "account",
    "payout",
    "dispute",
    "product",
    "price",
    "coupon",
    "checkout",
];
const ACTIONS: &[&str] = &[
    "created",
    "updated",
    "deleted",
    "paid",
    "failed",
    "succeeded",
    "canceled",
    "completed",
];
/// Three-segment types, also in the catalog.
const DEEP: &[&str] = &[
    "invoice.line.added",
    "invoice.line.removed",
    "subscription.trial.ending",
    "payment.intent.succeeded",
    "payment.intent.failed",
    "order.item.shipped",
];
const REGIONS: &[&str] = &["eu", "us", "ap"];
const PROJECTS: usize = 50;

/// Runs the measurement and prints the table or the JSON.
pub fn run(args: IndexArgs) -> anyhow::Result<()> {
    start_counting();
    let mut rng = StdRng::seed_from_u64(args.seed);
    let catalog = catalog();
    let tenants: Vec<String> = (0..args.tenants)
        .map(|t| format!("tenant_{t:06}"))
        .collect();
    let subs = subscriptions(&mut rng, &catalog, &tenants, args.endpoints);

    let before = live();
    let mut index = SubscriptionIndex::new();
    for (id, sub) in &subs {
        index.upsert(id, sub);
    }
    let index_bytes = live().wrapping_sub(before);

    let before = live();
    let mut naive: HashMap<String, Subscription> = HashMap::new();
    for (id, sub) in &subs {
        naive.insert(id.clone(), sub.clone());
    }
    let naive_bytes = live().wrapping_sub(before);

    let by_tenant = group_by_tenant(&naive);
    let (largest, largest_size) = by_tenant
        .iter()
        .map(|(tenant, endpoints)| (*tenant, endpoints.len()))
        .max_by_key(|(tenant, len)| (*len, std::cmp::Reverse(*tenant)))
        .context("no endpoint to look up")?;
    let uniform = lookups(&mut rng, &catalog, &tenants, args.lookups);
    let lookup = time(&index, &by_tenant, &uniform, args.rounds)?;
    let largest = lookups(
        &mut rng,
        &catalog,
        &[largest.to_owned()],
        (args.lookups / 20).max(1),
    );
    let largest_tenant_lookup = time(&index, &by_tenant, &largest, args.rounds)?;

    let endpoints = index.len() as u64;
    let (index_bytes, naive_bytes) = (index_bytes as f64, naive_bytes as f64);
    let report = IndexReport {
        machine: Machine::detect(),
        endpoints,
        tenants: index.tenants() as u64,
        largest_tenant: largest_size as u64,
        rounds: args.rounds,
        heap_bytes: Compared::new(index_bytes, naive_bytes),
        bytes_per_endpoint: Compared::new(
            index_bytes / endpoints as f64,
            naive_bytes / endpoints as f64,
        ),
        lookup,
        largest_tenant_lookup,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).context("encoding the report")?
        );
    } else {
        print!("{}", report.table());
    }
    Ok(())
}

/// Every event type of the catalog.
fn catalog() -> Vec<String> {
    let pairs = RESOURCES
        .iter()
        .flat_map(|r| ACTIONS.iter().map(move |a| format!("{r}.{a}")));
    pairs.chain(DEEP.iter().map(|t| (*t).to_owned())).collect()
}

/// `count` endpoints with ids like Svix's (`ep_` and 27 characters), each tenant given one
/// and the rest skewed to the first tenants (the first of 10 000 gets about 1% of them).
/// Types: 10% none, 5% `*`, 25% one or two `resource.*` (some with an exact type too), 60%
/// one to six exact types; 30% have one to three channels (a region or `project_N`).
fn subscriptions(
    rng: &mut StdRng,
    catalog: &[String],
    tenants: &[String],
    count: u64,
) -> Vec<(String, Subscription)> {
    (0..count)
        .map(|i| {
            let tenant = match usize::try_from(i) {
                Ok(i) if i < tenants.len() => i,
                _ => {
                    let u: f64 = rng.random();
                    ((u * u) * tenants.len() as f64) as usize
                }
            };
            let tenant = tenants[tenant.min(tenants.len() - 1)].clone();
            let id: String = (0..27)
                .map(|_| char::from(rng.sample(rand::distr::Alphanumeric)))
                .collect();
            let pick =
                |rng: &mut StdRng, from: &[String]| from[rng.random_range(0..from.len())].clone();
            let event_types = match rng.random_range(0..100) {
                0..10 => Vec::new(),
                10..15 => vec!["*".to_owned()],
                15..40 => {
                    let mut types: Vec<String> = (0..rng.random_range(1..=2))
                        .map(|_| format!("{}.*", RESOURCES[rng.random_range(0..RESOURCES.len())]))
                        .collect();
                    if rng.random_bool(0.3) {
                        types.push(pick(rng, catalog));
                    }
                    types
                }
                _ => (0..rng.random_range(1..=6))
                    .map(|_| pick(rng, catalog))
                    .collect(),
            };
            let channels = if rng.random_bool(0.3) {
                (0..rng.random_range(1..=3)).map(|_| channel(rng)).collect()
            } else {
                Vec::new()
            };
            let sub = Subscription {
                tenant,
                event_types,
                channels,
            };
            (format!("ep_{id}"), sub)
        })
        .collect()
}

fn channel(rng: &mut StdRng) -> String {
    if rng.random_bool(0.3) {
        REGIONS[rng.random_range(0..REGIONS.len())].to_owned()
    } else {
        format!("project_{}", rng.random_range(0..PROJECTS))
    }
}

/// One event to route.
struct Lookup<'a> {
    tenant: String,
    event_type: &'a str,
    channels: Vec<String>,
}

/// `count` events: a tenant picked uniformly (whatever its size), a type of the catalog,
/// and no channel or one.
fn lookups<'a>(
    rng: &mut StdRng,
    catalog: &'a [String],
    tenants: &[String],
    count: u64,
) -> Vec<Lookup<'a>> {
    (0..count)
        .map(|_| Lookup {
            tenant: tenants[rng.random_range(0..tenants.len())].clone(),
            event_type: &catalog[rng.random_range(0..catalog.len())],
            channels: if rng.random_bool(0.4) {
                vec![channel(rng)]
            } else {
                Vec::new()
            },
        })
        .collect()
}

type ByTenant<'a> = HashMap<&'a str, Vec<(&'a str, &'a Subscription)>>;

/// The naive table's endpoints by tenant, each tenant's sorted by id (the naive lookup's
/// best case: it needs no sort).
fn group_by_tenant(naive: &HashMap<String, Subscription>) -> ByTenant<'_> {
    let mut by_tenant: ByTenant<'_> = HashMap::new();
    for (id, sub) in naive {
        by_tenant
            .entry(sub.tenant.as_str())
            .or_default()
            .push((id.as_str(), sub));
    }
    for endpoints in by_tenant.values_mut() {
        endpoints.sort_unstable_by_key(|(id, _)| *id);
    }
    by_tenant
}

/// The naive lookup: every endpoint of the tenant, through [`Subscription::wants`].
fn naive_matches<'a>(by_tenant: &ByTenant<'a>, lookup: &Lookup<'_>) -> Vec<&'a str> {
    by_tenant
        .get(lookup.tenant.as_str())
        .map(|endpoints| {
            endpoints
                .iter()
                .filter(|(_, sub)| sub.wants(lookup.event_type, &lookup.channels))
                .map(|(id, _)| *id)
                .collect()
        })
        .unwrap_or_default()
}

/// Checks that both sides agree on every lookup (which warms both up), then times them
/// in `rounds`, each side in turn.
fn time(
    index: &SubscriptionIndex,
    by_tenant: &ByTenant<'_>,
    lookups: &[Lookup<'_>],
    rounds: u32,
) -> anyhow::Result<Timed> {
    let matched = check_agreement(index, by_tenant, lookups)?;
    let (mut index_ns, mut naive_ns) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        index_ns.push(mean_ns(lookups, |l| {
            index.matches(&l.tenant, l.event_type, &l.channels).len()
        }));
        naive_ns.push(mean_ns(lookups, |l| naive_matches(by_tenant, l).len()));
    }
    let (index_ns, naive_ns) = (
        Spread::of(index_ns.into_iter()),
        Spread::of(naive_ns.into_iter()),
    );
    Ok(Timed {
        lookups: lookups.len() as u64,
        mean_matches: matched as f64 / lookups.len() as f64,
        index_ns,
        naive_ns,
        ratio: index_ns.median / naive_ns.median,
    })
}

/// The mean time of `lookup` over `lookups`, in nanoseconds.
fn mean_ns(lookups: &[Lookup<'_>], lookup: impl Fn(&Lookup<'_>) -> usize) -> f64 {
    let start = Instant::now();
    for l in lookups {
        black_box(lookup(black_box(l)));
    }
    start.elapsed().as_nanos() as f64 / lookups.len() as f64
}

/// Checks that both sides return the same endpoints for every lookup; returns how many.
fn check_agreement(
    index: &SubscriptionIndex,
    by_tenant: &ByTenant<'_>,
    lookups: &[Lookup<'_>],
) -> anyhow::Result<usize> {
    let mut matched = 0;
    for l in lookups {
        let found: Vec<Arc<str>> = index.matches(&l.tenant, l.event_type, &l.channels);
        let found: Vec<&str> = found.iter().map(|id| &**id).collect();
        let expected = naive_matches(by_tenant, l);
        if found != expected {
            bail!(
                "the index and the naive table disagree on {} {} {:?}: {found:?} vs {expected:?}",
                l.tenant,
                l.event_type,
                l.channels
            );
        }
        matched += found.len();
    }
    Ok(matched)
}

//! The probe cache (the key cache): a process-wide, bounded map from a data file to the
//! keys it holds. Delta data files never change once written, so what a probe learned
//! about a file stays true for as long as the file lives; a later upsert (through any
//! handle of the process) that finds the file among its candidates decides it without
//! reading it.
//!
//! An entry is one of:
//!
//! - [`FileKeys::Ints`], for a key of one integer column: every non-NULL key of the file
//!   with its row position, exact. An upsert without a cursor answers such a file
//!   entirely from the entry: which stored rows its keys replace and where (a file with a
//!   deletion vector drops the positions its vector deletes), so a repeated upsert into
//!   a hot table, where every file holds a key of the batch, opens no file to probe it.
//!   4 bytes a key when the file's keys ascend in file order (the position is the
//!   index) and span less than 2^32 (stored as offsets from the smallest), 8 otherwise;
//!   4 more when they do not ascend in file order.
//! - [`FileKeys::Hashes`], for any other key: the distinct hashes of its key tuples,
//!   sorted (8 bytes a key). When none of the source's key hashes is among them, no
//!   source key is in the file and it is carried over unread; equal hashes are only
//!   candidates, and the file is then probed as if nothing were cached.
//!
//! The answer never depends on the cache: entries are complete or absent, exact where
//! they answer and candidates where they do not, and a missing or evicted entry means a
//! read. An entry may hold keys the file's deletion vector removed (a file keeps its name
//! and size when it gets a vector): the upsert reads the vector and skips them.
//!
//! Filled by probes that happened to read every key of a file (no row group or page
//! skipped), by the writer of an upsert's own rows (its inserts, in one file, from keys
//! it holds anyway), and, when background filling is on
//! ([`ProbeCache::set_background_fill`], the server's default), by a task after an
//! upsert that reads the keys of the files it probed without learning all of their keys
//! (page-index pruning reads a few pages of each). A background fill never evicts: it
//! stops when the cache is full, so a table larger than the cache costs one read of
//! what fits, not a read per upsert. A file that an upsert rewrites loses its entry.
//!
//! Bounded by `max_bytes` (`DELTALITE_PROBE_CACHE_BYTES`, 128 MiB by default; `0` turns
//! the cache off), least recently used entries evicted first. Entries are keyed by the
//! file's full location, its size and the key columns' names and types (hashes depend on
//! the types the keys were read as).

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// What identifies one file's cached keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Full location: table URL joined with the file's path.
    pub location: String,
    /// Size in bytes, a second guard on identity.
    pub size: u64,
    /// Key columns and their types, e.g. `id:Int64,day:Utf8`.
    pub keys: String,
}

/// The keys of one file (see the module documentation).
#[derive(Debug)]
pub enum FileKeys {
    /// The distinct hashes of the file's non-NULL key tuples, ascending.
    Hashes(Vec<u64>),
    /// Every non-NULL key of a one-integer-column key with its position.
    Ints(IntKeys),
}

impl Default for FileKeys {
    fn default() -> Self {
        FileKeys::Hashes(Vec::new())
    }
}

/// The integer keys of a file and where each is stored.
#[derive(Debug, Default)]
pub struct IntKeys {
    /// Ascending (a key stored twice appears twice).
    keys: Sorted,
    /// `keys[i]` is at row `positions[i]`; empty when that row is `i` (the file's keys
    /// ascend and none is NULL).
    positions: Vec<u32>,
}

/// Ascending integers: as offsets from the smallest when they span less than 2^32 (4
/// bytes a key; a file's keys usually lie close together), else as they are.
#[derive(Debug)]
enum Sorted {
    Narrow { base: i64, offsets: Vec<u32> },
    Wide(Vec<i64>),
}

impl Default for Sorted {
    fn default() -> Self {
        Sorted::Wide(Vec::new())
    }
}

impl Sorted {
    fn new(keys: impl ExactSizeIterator<Item = i64> + Clone) -> Self {
        let (Some(first), Some(last)) = (keys.clone().next(), keys.clone().last()) else {
            return Sorted::default();
        };
        if i128::from(last) - i128::from(first) <= i128::from(u32::MAX) {
            Sorted::Narrow {
                base: first,
                offsets: keys
                    .map(|k| (i128::from(k) - i128::from(first)) as u32)
                    .collect(),
            }
        } else {
            Sorted::Wide(keys.collect())
        }
    }

    fn len(&self) -> usize {
        match self {
            Sorted::Narrow { offsets, .. } => offsets.len(),
            Sorted::Wide(keys) => keys.len(),
        }
    }

    fn get(&self, i: usize) -> i64 {
        match self {
            Sorted::Narrow { base, offsets } => base + i64::from(offsets[i]),
            Sorted::Wide(keys) => keys[i],
        }
    }

    /// The first index at or after `from` whose key is not below `key`.
    fn first_at_least(&self, from: usize, key: i64) -> usize {
        match self {
            Sorted::Narrow { base, offsets } => {
                let offset = i128::from(key) - i128::from(*base);
                if offset <= 0 {
                    from
                } else if offset > i128::from(u32::MAX) {
                    offsets.len()
                } else {
                    from + offsets[from..].partition_point(|&o| i128::from(o) < offset)
                }
            }
            Sorted::Wide(keys) => from + keys[from..].partition_point(|&k| k < key),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Sorted::Narrow { offsets, .. } => offsets.capacity() * 4,
            Sorted::Wide(keys) => keys.capacity() * 8,
        }
    }
}

impl FileKeys {
    /// Keys from hashes in any order, with repeats.
    pub fn new(mut hashes: Vec<u64>) -> Self {
        hashes.sort_unstable();
        hashes.dedup();
        hashes.shrink_to_fit();
        FileKeys::Hashes(hashes)
    }

    /// Integer keys from `(key, position)` pairs in any order: every non-NULL key of the
    /// file, each position once.
    pub fn ints(mut pairs: Vec<(i64, u32)>) -> Self {
        pairs.sort_unstable();
        let in_place = pairs.iter().enumerate().all(|(i, &(_, p))| p as usize == i);
        let keys = Sorted::new(pairs.iter().map(|&(k, _)| k));
        let positions = if in_place {
            Vec::new()
        } else {
            pairs.iter().map(|&(_, p)| p).collect()
        };
        FileKeys::Ints(IntKeys { keys, positions })
    }

    /// For hash entries: whether any key of the file hashes to one of `wanted` (integer
    /// entries answer through [`FileKeys::int_matches`] instead, and say `true` here).
    pub fn any_of(&self, wanted: &std::collections::HashSet<u64, impl BuildHasher>) -> bool {
        let FileKeys::Hashes(hashes) = self else {
            return true;
        };
        // Few source keys against many stored ones: binary search each source hash.
        if wanted.len() * 8 < hashes.len() {
            wanted.iter().any(|h| hashes.binary_search(h).is_ok())
        } else {
            hashes.iter().any(|h| wanted.contains(h))
        }
    }

    /// For integer entries: call `found(position, source_row)` for every stored row whose
    /// key is one of `source` (`(key, source_row)`, ascending by key), in no particular
    /// order; `None` for a hash entry, which cannot say.
    pub fn int_matches(
        &self,
        source: &[(i64, u32)],
        mut found: impl FnMut(u32, u32),
    ) -> Option<()> {
        let FileKeys::Ints(ints) = self else {
            return None;
        };
        let n = ints.keys.len();
        if n == 0 {
            return Some(());
        }
        let (first, last) = (ints.keys.get(0), ints.keys.get(n - 1));
        let lo = source.partition_point(|&(k, _)| k < first);
        let hi = source.partition_point(|&(k, _)| k <= last);
        let mut from = 0;
        for &(key, source_row) in &source[lo..hi] {
            from = ints.keys.first_at_least(from, key);
            let mut i = from;
            while i < n && ints.keys.get(i) == key {
                let position = ints.positions.get(i).copied().unwrap_or(i as u32);
                found(position, source_row);
                i += 1;
            }
        }
        Some(())
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        match self {
            FileKeys::Hashes(hashes) => hashes.len(),
            FileKeys::Ints(ints) => ints.keys.len(),
        }
    }

    /// Whether the file holds no non-NULL key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn bytes(&self) -> usize {
        match self {
            FileKeys::Hashes(hashes) => hashes.capacity() * 8,
            FileKeys::Ints(ints) => ints.keys.bytes() + ints.positions.capacity() * 4,
        }
    }
}

/// The hasher every key hash of this process is made with: seeded once per process (so
/// crafted keys cannot aim at collisions), the same for fills and lookups.
pub fn key_hasher() -> &'static foldhash::quality::RandomState {
    static HASHER: OnceLock<foldhash::quality::RandomState> = OnceLock::new();
    HASHER.get_or_init(foldhash::quality::RandomState::default)
}

/// Counters and sizes, as `probe_cache_stats()` reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeCacheStats {
    pub entries: usize,
    pub bytes: usize,
    pub max_bytes: usize,
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
    /// Whether upserts fill the cache in the background.
    pub background_fill: bool,
    /// Files whose keys background fills read.
    pub filled: u64,
}

struct Entry {
    keys: Arc<FileKeys>,
    bytes: usize,
    tick: u64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<CacheKey, Entry>,
    /// Use order: tick -> key, oldest first.
    order: BTreeMap<u64, CacheKey>,
    bytes: usize,
    tick: u64,
}

impl Inner {
    /// Drop `key`'s entry, if any, from the map, the use order and the byte count.
    fn remove(&mut self, key: &CacheKey) {
        if let Some(old) = self.entries.remove(key) {
            self.order.remove(&old.tick);
            self.bytes -= old.bytes;
        }
    }
}

/// The cache (see the module documentation).
pub struct ProbeCache {
    inner: Mutex<Inner>,
    max_bytes: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    evictions: AtomicU64,
    background_fill: AtomicBool,
    /// A background fill is running (at most one at a time).
    filling: AtomicBool,
    /// Woken when a background fill ends.
    fill_done: tokio::sync::Notify,
    filled: AtomicU64,
}

/// A running background fill: while it lives, no other starts; dropping it wakes
/// [`ProbeCache::settle`].
pub struct FillGuard<'a>(&'a ProbeCache);

impl Drop for FillGuard<'_> {
    fn drop(&mut self) {
        self.0.filling.store(false, Ordering::Release);
        self.0.fill_done.notify_waiters();
    }
}

/// Overhead counted per entry besides its keys (the map slot, the key strings).
fn entry_overhead(key: &CacheKey) -> usize {
    128 + key.location.len() + key.keys.len()
}

impl ProbeCache {
    /// An empty cache holding at most `max_bytes`.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            max_bytes: AtomicUsize::new(max_bytes),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            background_fill: AtomicBool::new(false),
            filling: AtomicBool::new(false),
            fill_done: tokio::sync::Notify::new(),
            filled: AtomicU64::new(0),
        }
    }

    /// The process's cache, sized by `DELTALITE_PROBE_CACHE_BYTES` (128 MiB), filled in
    /// the background when `DELTALITE_PROBE_CACHE_FILL=1`.
    pub fn global() -> &'static ProbeCache {
        static CACHE: OnceLock<ProbeCache> = OnceLock::new();
        CACHE.get_or_init(|| {
            let env = crate::options::EnvDefaults::get();
            let cache = ProbeCache::new(env.probe_cache_bytes);
            cache.set_background_fill(env.probe_cache_fill);
            cache
        })
    }

    /// Whether upserts read, after they are done, the keys of files they probed without
    /// learning all of them, unless a call's `Knobs::fill_probe_cache` says otherwise
    /// (off by default: it costs reads a one-off caller never profits from; a
    /// long-running process with hot tables turns it on).
    pub fn set_background_fill(&self, on: bool) {
        self.background_fill.store(on, Ordering::Relaxed);
    }

    /// The process's setting of [`ProbeCache::set_background_fill`].
    pub fn background_fill(&self) -> bool {
        self.background_fill.load(Ordering::Relaxed)
    }

    /// The right to run a background fill now: `None` when the cache is off or full, or
    /// another fill is running (its upsert's files are most likely this one's too).
    pub fn begin_fill(&self) -> Option<FillGuard<'_>> {
        let max = self.max_bytes.load(Ordering::Relaxed);
        if max == 0 || self.lock().bytes >= max {
            return None;
        }
        self.filling
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| FillGuard(self))
    }

    /// Keep the keys a background fill read, unless that would evict an entry: returns
    /// whether they were kept (a fill stops at the first that is not, so that a table
    /// larger than the cache is read once, not once per upsert).
    pub fn insert_filled(&self, key: CacheKey, keys: FileKeys) -> bool {
        let max = self.max_bytes.load(Ordering::Relaxed);
        let bytes = keys.bytes() + entry_overhead(&key);
        if self.lock().bytes.saturating_add(bytes) > max {
            return false;
        }
        self.filled.fetch_add(1, Ordering::Relaxed);
        self.insert(key, keys);
        true
    }

    /// Whether an entry for `key` exists (no hit or miss counted).
    pub fn contains(&self, key: &CacheKey) -> bool {
        self.lock().entries.contains_key(key)
    }

    /// Wait until no background fill is running (tests and benchmarks that want the
    /// cache warm before their next call).
    pub async fn settle(&self) {
        loop {
            let done = self.fill_done.notified();
            if !self.filling.load(Ordering::Acquire) {
                return;
            }
            done.await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The map is consistent after every statement that changes it; a panic elsewhere
        // while the lock was held leaves a usable cache.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached keys of a file, counting a hit or a miss.
    pub fn get(&self, key: &CacheKey) -> Option<Arc<FileKeys>> {
        if self.max_bytes.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let found = inner.entries.get_mut(key).map(|entry| {
            let old = std::mem::replace(&mut entry.tick, tick);
            (old, Arc::clone(&entry.keys))
        });
        match found {
            Some((old, keys)) => {
                inner.order.remove(&old);
                inner.order.insert(tick, key.clone());
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(keys)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Remember a file's keys, evicting the least recently used entries to make room; an
    /// entry larger than the whole cache is not kept.
    pub fn insert(&self, key: CacheKey, keys: FileKeys) {
        let max = self.max_bytes.load(Ordering::Relaxed);
        let bytes = keys.bytes() + entry_overhead(&key);
        if bytes > max {
            return;
        }
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        inner.remove(&key);
        inner.order.insert(tick, key.clone());
        inner.entries.insert(
            key,
            Entry {
                keys: Arc::new(keys),
                bytes,
                tick,
            },
        );
        inner.bytes += bytes;
        self.inserts.fetch_add(1, Ordering::Relaxed);
        let evicted = evict(&mut inner, max);
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
    }

    /// Whether the keys of a file of `rows` rows are worth collecting to cache them: an
    /// entry (at most 12 bytes a key) may take an eighth of the cache at most, so that
    /// one large file does not evict many small ones (and its transient list stays small).
    pub fn admits(&self, rows: u64) -> bool {
        let max = self.max_bytes.load(Ordering::Relaxed) as u64;
        rows.saturating_mul(12) <= max / 8
    }

    /// Drop the entry of `key`, if any: its file is leaving the table.
    pub fn forget(&self, key: &CacheKey) {
        self.lock().remove(key);
    }

    /// Change the bound (evicting down to it at once); `0` empties and disables the cache.
    pub fn set_max_bytes(&self, max_bytes: usize) {
        self.max_bytes.store(max_bytes, Ordering::Relaxed);
        let mut inner = self.lock();
        let evicted = evict(&mut inner, max_bytes);
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
    }

    /// Forget every entry (the counters stay).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.order.clear();
        inner.bytes = 0;
    }

    /// Sizes and counters now.
    pub fn stats(&self) -> ProbeCacheStats {
        let inner = self.lock();
        ProbeCacheStats {
            entries: inner.entries.len(),
            bytes: inner.bytes,
            max_bytes: self.max_bytes.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            background_fill: self.background_fill.load(Ordering::Relaxed),
            filled: self.filled.load(Ordering::Relaxed),
        }
    }
}

/// Drop the oldest entries until `inner` holds at most `max` bytes; returns how many.
fn evict(inner: &mut Inner, max: usize) -> u64 {
    let mut evicted = 0;
    while inner.bytes > max {
        let Some((_, key)) = inner.order.pop_first() else {
            break;
        };
        if let Some(entry) = inner.entries.remove(&key) {
            inner.bytes -= entry.bytes;
            evicted += 1;
        }
    }
    evicted
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::options::MIB;

    fn key(name: &str) -> CacheKey {
        CacheKey {
            location: format!("file:///t/{name}"),
            size: 10,
            keys: "id:Int64".into(),
        }
    }

    fn keys(n: u64) -> FileKeys {
        FileKeys::new((0..n).map(|i| i * 7).collect())
    }

    #[test]
    fn a_file_is_a_candidate_only_when_a_wanted_hash_is_among_its_own() {
        let file = FileKeys::new(vec![30, 10, 20, 10]);
        assert_eq!(file.len(), 3, "repeats are kept once");
        assert_eq!(file.bytes(), 3 * 8);
        let wanted: HashSet<u64> = [10, 99].into();
        assert!(file.any_of(&wanted));
        let none: HashSet<u64> = [11, 99].into();
        assert!(!file.any_of(&none));
        // The binary-search path (few wanted, many stored) agrees.
        let many = keys(1000);
        assert!(many.any_of(&HashSet::from([7 * 500])));
        assert!(!many.any_of(&HashSet::from([7 * 500 + 1])));
    }

    fn int_matches(keys: &FileKeys, source: &[(i64, u32)]) -> Vec<(u32, u32)> {
        let mut found = Vec::new();
        keys.int_matches(source, |p, s| found.push((p, s))).unwrap();
        found.sort_unstable();
        found
    }

    #[test]
    fn integer_entries_say_where_each_source_key_is_stored() {
        // Stored in file order: 10, 30, 20, 30 (a key twice); NULL at 4 is left out.
        let keys = FileKeys::ints(vec![(10, 0), (30, 1), (20, 2), (30, 3), (40, 5)]);
        assert_eq!(keys.len(), 5);
        assert_eq!(
            keys.bytes(),
            5 * 4 + 5 * 4,
            "positions kept: not in file order"
        );
        let source = [(5, 0), (20, 1), (30, 2), (41, 3)];
        assert_eq!(int_matches(&keys, &source), vec![(1, 2), (2, 1), (3, 2)]);
        assert_eq!(int_matches(&keys, &[(11, 0), (39, 1)]), vec![]);
        assert!(
            keys.any_of(&HashSet::from([1])),
            "integers never rule out by hash"
        );

        // Ascending and gap-free in file order: the position is the index.
        let ascending = FileKeys::ints((0..100).map(|i| (i * 2, i as u32)).rev().collect());
        assert_eq!(
            ascending.bytes(),
            100 * 4,
            "offsets, and no positions stored"
        );
        assert_eq!(
            int_matches(&ascending, &[(0, 7), (98, 8), (99, 9)]),
            vec![(0, 7), (49, 8)]
        );
        assert!(
            FileKeys::new(vec![1, 2])
                .int_matches(&[(1, 0)], |_, _| ())
                .is_none()
        );
        assert!(int_matches(&FileKeys::ints(vec![]), &[(1, 0)]).is_empty());

        // Keys spanning more than 2^32 are kept as they are; lookups at the extremes.
        let wide = FileKeys::ints(vec![(i64::MIN, 0), (0, 1), (i64::MAX, 2)]);
        assert_eq!(wide.bytes(), 3 * 8);
        let source = [(i64::MIN, 0), (-1, 1), (0, 2), (i64::MAX, 3)];
        assert_eq!(int_matches(&wide, &source), vec![(0, 0), (1, 2), (2, 3)]);
        // Offsets near the ends of their range, and source keys far outside it.
        let base = i64::MAX - i64::from(u32::MAX);
        let narrow = FileKeys::ints(vec![(base, 0), (base + 1, 1), (i64::MAX, 2)]);
        assert_eq!(narrow.bytes(), 3 * 4);
        let source = [(i64::MIN, 0), (base, 1), (base + 2, 2), (i64::MAX, 3)];
        assert_eq!(int_matches(&narrow, &source), vec![(0, 1), (2, 3)]);
        let negative = FileKeys::ints(vec![(-5, 0), (-5, 1), (3, 2)]);
        assert_eq!(
            int_matches(&negative, &[(-6, 0), (-5, 1), (3, 2)]),
            vec![(0, 1), (1, 1), (2, 2)]
        );
    }

    #[tokio::test]
    async fn background_fills_run_one_at_a_time_and_never_evict() {
        let one = keys(100).bytes() + entry_overhead(&key("a"));
        let cache: &'static ProbeCache = Box::leak(Box::new(ProbeCache::new(2 * one + one / 2)));
        let guard = cache.begin_fill().expect("nothing runs");
        assert!(cache.begin_fill().is_none(), "one fill at a time");
        assert!(cache.insert_filled(key("a"), keys(100)));
        assert!(cache.insert_filled(key("b"), keys(100)));
        assert!(!cache.insert_filled(key("c"), keys(100)), "would evict");
        assert!(cache.contains(&key("a")) && cache.contains(&key("b")));
        assert!(!cache.contains(&key("c")));
        assert_eq!(cache.stats().filled, 2);
        // An upsert's own insert may still evict.
        cache.insert(key("c"), keys(100));
        assert_eq!(cache.stats().evictions, 1);
        // `settle` waits for the running fill.
        let waiting = tokio::spawn(cache.settle());
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a fill is running");
        drop(guard);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("settles once the fill ends")
            .unwrap();
        assert!(cache.begin_fill().is_some(), "free again");
        assert!(
            ProbeCache::new(0).begin_fill().is_none(),
            "a cache that is off fills nothing"
        );
    }

    #[test]
    fn least_recently_used_entries_go_first_and_the_bound_holds() {
        let one = keys(100).bytes() + entry_overhead(&key("a"));
        let cache = ProbeCache::new(2 * one + one / 2);
        cache.insert(key("a"), keys(100));
        cache.insert(key("b"), keys(100));
        assert!(cache.get(&key("a")).is_some(), "a is now the most recent");
        cache.insert(key("c"), keys(100));
        assert!(cache.get(&key("b")).is_none(), "b was the least recent");
        assert!(cache.get(&key("a")).is_some());
        assert!(cache.get(&key("c")).is_some());
        let s = cache.stats();
        assert_eq!((s.entries, s.inserts, s.evictions), (2, 3, 1));
        assert_eq!((s.hits, s.misses), (3, 1));
        assert!(s.bytes <= s.max_bytes);

        // Shrinking evicts at once; zero disables.
        cache.set_max_bytes(one);
        assert_eq!(cache.stats().entries, 1);
        cache.set_max_bytes(0);
        assert_eq!(cache.stats().entries, 0);
        cache.insert(key("d"), keys(1));
        assert!(cache.get(&key("d")).is_none());
    }

    #[test]
    fn an_entry_larger_than_the_cache_is_not_kept_and_clear_forgets_all() {
        let cache = ProbeCache::new(64);
        cache.insert(key("big"), keys(100));
        assert_eq!(cache.stats().entries, 0);
        let cache = ProbeCache::new(MIB);
        cache.insert(key("a"), keys(3));
        cache.insert(key("a"), keys(5));
        assert_eq!(cache.stats().entries, 1, "re-inserting replaces");
        assert_eq!(cache.get(&key("a")).unwrap().len(), 5);
        cache.insert(key("b"), keys(2));
        cache.forget(&key("a"));
        assert!(cache.get(&key("a")).is_none(), "forgotten");
        assert!(cache.get(&key("b")).is_some(), "the others stay");
        cache.forget(&key("a"));
        assert_eq!(
            cache.stats().bytes,
            keys(2).bytes() + entry_overhead(&key("b"))
        );
        cache.clear();
        assert_eq!((cache.stats().entries, cache.stats().bytes), (0, 0));
    }
}

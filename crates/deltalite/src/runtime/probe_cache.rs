//! The probe cache: a process-wide, bounded map from a data file to the hashes of the keys
//! it holds. Delta data files never change once written, so what a probe learned about a
//! file stays true for as long as the file lives; a later upsert (through any handle of the
//! process) that finds the file among its candidates can rule it out without reading it:
//! when none of the source's key hashes is in the file's list, no source key is in the file.
//!
//! The answer never depends on the cache: equal hashes are only candidates (an upsert
//! then reads the file as if nothing were cached), and a missing or evicted entry means a
//! read. Entries are complete or absent (a file with a deletion vector may hold keys its
//! vector removed: a superset only costs a read, and a file keeps its name and size when
//! it gets a vector). They are filled by probes that happened to read
//! every key of a file (no row group or page skipped) and found no source key in it: a
//! file the upsert is about to rewrite leaves the table with its commit, so its keys are
//! not worth keeping, and collecting stops at its first match. The writer of an upsert's
//! own rows (its inserts, in one file) fills an entry too, from keys it holds anyway. A
//! file that an upsert rewrites loses its entry.
//!
//! Each entry is the file's distinct key hashes, sorted: 8 bytes a key. Bounded by
//! `max_bytes` (`DELTALITE_PROBE_CACHE_BYTES`, 128 MiB by default; `0` turns the cache
//! off), least recently used entries evicted first. Entries are keyed by the file's full
//! location, its size and the key columns' names and types (the hashes depend on the types
//! the keys were read as).

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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

/// The keys of one file: the distinct hashes of its non-NULL key tuples, ascending.
#[derive(Debug, Default)]
pub struct FileKeys {
    hashes: Vec<u64>,
}

impl FileKeys {
    /// Keys from hashes in any order, with repeats.
    pub fn new(mut hashes: Vec<u64>) -> Self {
        hashes.sort_unstable();
        hashes.dedup();
        hashes.shrink_to_fit();
        Self { hashes }
    }

    /// Whether any key of the file hashes to one of `wanted`.
    pub fn any_of(&self, wanted: &std::collections::HashSet<u64, impl BuildHasher>) -> bool {
        // Few source keys against many stored ones: binary search each source hash.
        if wanted.len() * 8 < self.hashes.len() {
            wanted.iter().any(|h| self.hashes.binary_search(h).is_ok())
        } else {
            self.hashes.iter().any(|h| wanted.contains(h))
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether the file holds no non-NULL key.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    fn bytes(&self) -> usize {
        self.hashes.capacity() * 8
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
        }
    }

    /// The process's cache, sized by `DELTALITE_PROBE_CACHE_BYTES` (128 MiB).
    pub fn global() -> &'static ProbeCache {
        static CACHE: OnceLock<ProbeCache> = OnceLock::new();
        CACHE.get_or_init(|| ProbeCache::new(crate::options::EnvDefaults::get().probe_cache_bytes))
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
    /// entry may take an eighth of the cache at most, so that one large file does not
    /// evict many small ones (and its transient list stays small).
    pub fn admits(&self, rows: u64) -> bool {
        let max = self.max_bytes.load(Ordering::Relaxed) as u64;
        rows.saturating_mul(8) <= max / 8
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

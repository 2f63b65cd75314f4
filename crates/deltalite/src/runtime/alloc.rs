//! Allocator tuning for the processes that embed the engine (the CLI server, the Python
//! module, the benchmark).
//!
//! glibc's default (8 arenas per core) keeps freed row-group buffers spread over many
//! arenas, so a process's RSS tracks how many files it has touched rather than what is
//! live: the engine benchmark measured 119 MB at 1M rows vs 356 MB at 16M with defaults
//! and a flat profile with two arenas; a 3-minute server soak peaked at 728 MB with
//! defaults and 395 MB with two.

/// What a process embedding the engine mostly does, which decides how malloc is tuned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// A few large upserts at a time (the Python module, the benchmarks): fixed mmap and
    /// trim thresholds, so the buffers a rewrite frees are reused.
    Bulk,
    /// Many concurrent small requests (the server): glibc's dynamic thresholds, which
    /// measured better there (see [`tune_malloc`]).
    Service,
}

/// Tune glibc malloc for the engine, leaving alone whatever the user set through
/// glibc's own variables (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`,
/// `MALLOC_TRIM_THRESHOLD_`, `GLIBC_TUNABLES`):
///
/// - arenas: `DELTALITE_MALLOC_ARENA_MAX` (default 2; `0` leaves glibc's default);
/// - for [`Workload::Bulk`] only, `DELTALITE_MALLOC_MMAP_THRESHOLD` (default 32 MiB) and
///   `DELTALITE_MALLOC_TRIM_THRESHOLD` (default 64 MiB), in bytes; `0` leaves glibc's
///   dynamic thresholds. A large upsert allocates and frees buffers of a few MiB over and
///   over (read windows, pages, the row group a writer flushes). Under glibc's defaults
///   many of them are mapped fresh from the kernel and unmapped when freed, or trimmed
///   off the heap, so every reuse pays page faults and zeroing: the 16M-row engine
///   benchmark took ~180k page faults and spent about a third of its CPU in the kernel;
///   with these thresholds ~40k faults and ~25% less CPU, for ~20 MB more RSS at 1M rows.
///   The server soak went the other way (18.8-21.7 vs 27.0 req/s, upsert p50 ~900 vs
///   475 ms, 357 vs 317 MB), so [`Workload::Service`] keeps glibc's thresholds.
///
/// A no-op on other platforms. Call it early, before the process's threads have
/// allocated much.
pub fn tune_malloc(workload: Workload) {
    for (setting, value) in settings(workload, |name| std::env::var(name).ok()) {
        set(setting, value);
    }
}

/// The `mallopt` calls [`tune_malloc`] makes, given how to read an environment variable.
fn settings(workload: Workload, env: impl Fn(&str) -> Option<String>) -> Vec<(Setting, usize)> {
    let glibc_tunables = env("GLIBC_TUNABLES").unwrap_or_default();
    let user_set = |glibc_var: &str, tunable: &str| {
        env(glibc_var).is_some() || glibc_tunables.contains(tunable)
    };
    let count = |name: &str, default: usize| {
        env(name)
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(default)
    };
    let mut settings = Vec::new();
    if !user_set("MALLOC_ARENA_MAX", "glibc.malloc.arena_max") {
        let arenas = count("DELTALITE_MALLOC_ARENA_MAX", 2);
        if arenas > 0 {
            settings.push((Setting::ArenaMax, arenas));
        }
    }
    if workload == Workload::Bulk
        && !user_set("MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold")
        && !user_set("MALLOC_TRIM_THRESHOLD_", "glibc.malloc.trim_threshold")
    {
        let mmap = count("DELTALITE_MALLOC_MMAP_THRESHOLD", 32 * MIB);
        let trim = count("DELTALITE_MALLOC_TRIM_THRESHOLD", 64 * MIB);
        if mmap > 0 && trim > 0 {
            settings.push((Setting::MmapThreshold, mmap));
            settings.push((Setting::TrimThreshold, trim));
        }
    }
    settings
}

use crate::options::MIB;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setting {
    ArenaMax,
    MmapThreshold,
    TrimThreshold,
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set(setting: Setting, value: usize) {
    let param = match setting {
        Setting::ArenaMax => libc::M_ARENA_MAX,
        Setting::MmapThreshold => libc::M_MMAP_THRESHOLD,
        Setting::TrimThreshold => libc::M_TRIM_THRESHOLD,
    };
    let value = i32::try_from(value).unwrap_or(i32::MAX);
    // SAFETY: mallopt only adjusts allocator tuning; it is thread-safe in glibc.
    if unsafe { libc::mallopt(param, value) } != 1 {
        tracing::warn!(param, value, "glibc refused a malloc setting");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set(_setting: Setting, _value: usize) {}

/// Hand the free memory malloc holds back to the operating system (`malloc_trim(0)`):
/// glibc returns freed memory only from the top of each heap, so after a burst of large
/// short-lived buffers (decoded row groups, log replays of big tables) the freed pages in
/// the middle stay resident until something trims them. Returns whether memory was
/// released; a no-op returning false on other platforms.
///
/// The call walks every arena's free lists holding its lock, so it costs time in
/// proportion to the heap (milliseconds for hundreds of MB); call it from a background
/// thread at an interval, not per allocation.
pub fn release_free_memory() -> bool {
    trim()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() -> bool {
    // SAFETY: malloc_trim only returns free pages to the kernel; it is thread-safe.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    #[test]
    fn freed_heap_pages_below_a_live_block_are_released() {
        // 32 MiB in 64 KiB blocks (under the mmap threshold, so from the heap), then a
        // small block that stays live after them: free() alone can only return the top
        // of a heap, so these pages stay with malloc until a trim.
        // black_box: the optimizer may not elide these heap allocations.
        let blocks: Vec<Vec<u8>> = (0..512)
            .map(|i| std::hint::black_box(vec![(i % 250 + 1) as u8; 64 * 1024]))
            .collect();
        let pin = std::hint::black_box(Box::new([1u8; 64]));
        drop(blocks);
        assert!(super::release_free_memory());
        assert_eq!(pin[0], 1);
    }
}

#[cfg(test)]
mod settings_tests {
    use super::{MIB, Setting, Workload, settings};

    fn with(vars: &[(&str, &str)], workload: Workload) -> Vec<(Setting, usize)> {
        settings(workload, |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn bulk_fixes_thresholds_and_service_only_caps_arenas() {
        assert_eq!(
            with(&[], Workload::Bulk),
            vec![
                (Setting::ArenaMax, 2),
                (Setting::MmapThreshold, 32 * MIB),
                (Setting::TrimThreshold, 64 * MIB)
            ]
        );
        assert_eq!(with(&[], Workload::Service), vec![(Setting::ArenaMax, 2)]);
    }

    #[test]
    fn the_users_glibc_settings_and_zero_overrides_win() {
        assert_eq!(
            with(&[("MALLOC_ARENA_MAX", "8")], Workload::Service),
            vec![]
        );
        assert_eq!(
            with(&[("DELTALITE_MALLOC_ARENA_MAX", "0")], Workload::Service),
            vec![]
        );
        let tunables = [("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=4096")];
        assert_eq!(
            with(&tunables, Workload::Bulk),
            vec![(Setting::ArenaMax, 2)]
        );
        let trim = [("MALLOC_TRIM_THRESHOLD_", "1")];
        assert_eq!(with(&trim, Workload::Bulk), vec![(Setting::ArenaMax, 2)]);
        let off = [("DELTALITE_MALLOC_MMAP_THRESHOLD", "0")];
        assert_eq!(with(&off, Workload::Bulk), vec![(Setting::ArenaMax, 2)]);
        let own = [("DELTALITE_MALLOC_TRIM_THRESHOLD", "1048576")];
        assert_eq!(
            with(&own, Workload::Bulk),
            vec![
                (Setting::ArenaMax, 2),
                (Setting::MmapThreshold, 32 * MIB),
                (Setting::TrimThreshold, MIB)
            ]
        );
    }
}

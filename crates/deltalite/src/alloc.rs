//! Allocator tuning for the processes that embed the engine (the CLI server, the Python
//! module, the benchmark).
//!
//! glibc's default (8 arenas per core) keeps freed row-group buffers spread over many
//! arenas, so a process's RSS tracks how many files it has touched rather than what is
//! live: the engine benchmark measured 119 MB at 1M rows vs 356 MB at 16M with defaults
//! and a flat profile with two arenas; a 3-minute server soak peaked at 728 MB with
//! defaults and 395 MB with two.

/// Cap glibc's malloc arenas, unless the user chose otherwise: `MALLOC_ARENA_MAX` (glibc
/// applies it itself) or `DELTALITE_MALLOC_ARENA_MAX` (a count; `0` leaves malloc
/// alone). The default is two. A no-op on other platforms. Call it early, before the
/// process's threads have allocated much.
pub fn cap_malloc_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    let arenas = std::env::var("DELTALITE_MALLOC_ARENA_MAX")
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
        .unwrap_or(2);
    if arenas > 0 {
        set_arena_max(arenas);
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_arena_max(arenas: i32) {
    // SAFETY: mallopt only adjusts allocator tuning; it is thread-safe in glibc.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_arenas: i32) {}

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

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

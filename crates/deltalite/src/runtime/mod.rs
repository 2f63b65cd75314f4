//! Process resources: budgets shared by concurrent calls, the allocator settings, the
//! probe cache (what probes learned about files, shared by every call), and what a
//! caller's batches hold in memory.

pub mod alloc;
pub mod budget;
pub mod held;
pub mod probe_cache;

//! Process resources: budgets shared by concurrent calls, the allocator settings, and
//! the probe cache (what probes learned about files, shared by every call).

pub mod alloc;
pub mod budget;
pub mod probe_cache;

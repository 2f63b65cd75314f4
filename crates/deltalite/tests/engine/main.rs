//! The engine's integration tests, one module per concern, linked into one test binary:
//! each binary links all of DataFusion and delta-rs (about 300 MB unoptimised), so one
//! binary instead of fifteen saves gigabytes of disk and minutes of linking in CI.
//! `global_budgets.rs` stays a binary of its own: it sets the process environment
//! before the engine first reads it.

#[path = "../common/mod.rs"]
mod common;

mod commits;
mod concurrency;
mod contract;
mod crash;
mod degenerate;
mod deletes;
mod deletion_vectors;
mod faults;
mod layout;
mod model;
mod nullability;
mod probe_cache;
mod s3;
mod smoke;
mod writes;

//! The server crate's integration tests, one module per concern, linked into one test
//! binary (each links DataFusion and delta-rs: one binary saves disk and linking in CI).

mod bounded_state;
mod catalog_listings;
mod fuzz_readers;
mod kept_tables;
mod transient;

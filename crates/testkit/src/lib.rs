//! Test support shared by the workspace's suites (a dev-dependency only).
//!
//! - [`store::TestStore`]: the one delegating object-store wrapper of the tests. It counts
//!   the write calls that reach the real store and injects faults into chosen calls:
//!   failures, lost responses, retried lost responses, delays. The engine's fault suite,
//!   its multipart unit tests and the server's transient-failure tests all use it.

//! - [`moto::Moto`]: a real S3-compatible server (`moto_server`) with a bucket, for the
//!   suites that run against an object store.

pub mod moto;
pub mod store;

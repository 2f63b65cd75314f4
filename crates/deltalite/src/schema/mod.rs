//! Schemas and what they allow: conforming batches, partition values, table features.

pub(crate) mod conform;
pub(crate) mod features;
pub(crate) mod partition;

//! Operations on a table, each an `impl DeltaLiteTable` method and one commit.

pub mod compact;
pub mod create;
pub mod metadata;
pub mod publish;
pub(crate) mod rearrange;
pub mod replace;
pub mod restore;
mod retype;
pub(crate) mod upsert;
pub mod write;

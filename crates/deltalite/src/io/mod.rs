//! Reading and writing Parquet files of a table: read windows, the writer, multipart
//! uploads, statistics from footers, deletion vectors, bloom filter checks by block.

pub(crate) mod bloom;
pub(crate) mod dv;
pub(crate) mod footer_stats;
pub(crate) mod read;
pub(crate) mod upload;
pub(crate) mod writer;

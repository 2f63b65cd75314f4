//! Bloom filter checks that read only the blocks they need.
//!
//! A Parquet bloom filter (split-block, the only kind the format has) answers a value
//! from one 32-byte block: the one the value's hash selects. Parquet readers fetch the
//! whole filter to check anything (128-512 KiB per row group of 250,000 keys), so a
//! probe that checks a few dozen keys of each of hundreds of files copied far more
//! filter than data. Here the blocks of the wanted values are fetched in one request
//! and each value is checked in its block by parquet's own [`Sbbf`] (a filter of one
//! block answers exactly as the whole filter does for a value that hashes to it).
//!
//! The block of a value is `((hash >> 32) * blocks) >> 32`, with `hash` the XXH64 (seed
//! 0) of its plain encoding, as the format specifies. The bitset's size comes from the
//! column chunk's `bloom_filter_length`: the header before the bitset is a small Thrift
//! struct (under 32 bytes) and the bitset a multiple of 32 bytes, so the header is
//! `length % 32` bytes. Its first field, the bitset's size, is read with the blocks and
//! must agree; a filter that does not fit that shape is not used (the values stay
//! candidates), which only costs a read.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Int32Type, Int64Type};
use deltalake::parquet::basic::Type as PhysicalType;
use deltalake::parquet::bloom_filter::Sbbf;
use deltalake::parquet::file::metadata::ColumnChunkMetaData;
use object_store::ObjectStore;
use object_store::path::Path;
use twox_hash::XxHash64;

use crate::error::Result;

/// Bytes of one block of a split-block bloom filter.
const BLOCK: u64 = 32;

/// The rows of `rows` whose value in `values` the bloom filter of `column` may hold, or
/// `None` when the column has no usable filter or the value type has no bloom encoding
/// we check (then every row stays a candidate).
pub(crate) async fn may_hold(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    column: &ColumnChunkMetaData,
    values: &ArrayRef,
    rows: &[u32],
) -> Result<Option<Vec<u32>>> {
    let (Some(offset), Some(length)) = (column.bloom_filter_offset(), column.bloom_filter_length())
    else {
        return Ok(None);
    };
    let (Ok(offset), Ok(length)) = (u64::try_from(offset), u64::try_from(length)) else {
        return Ok(None);
    };
    // A filter hashes the values as the file stores them: a column stored as another
    // type than the values (a file from before a type change) cannot answer for them.
    let stored = match values.data_type() {
        DataType::Int64 => PhysicalType::INT64,
        DataType::Int32 => PhysicalType::INT32,
        DataType::Utf8 | DataType::Binary => PhysicalType::BYTE_ARRAY,
        _ => return Ok(None),
    };
    if column.column_type() != stored {
        return Ok(None);
    }
    let header = length % BLOCK;
    let bitset = length - header;
    if header == 0 || bitset == 0 {
        return Ok(None);
    }
    let blocks = bitset / BLOCK;
    let Some(probes) = rows
        .iter()
        .map(|&row| Probe::of(values, row as usize))
        .collect::<Option<Vec<Probe>>>()
    else {
        return Ok(None);
    };
    let mut wanted: Vec<u64> = probes.iter().map(|p| p.block(blocks)).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let start = offset + header;
    // The header first (to check the size it declares), then the blocks.
    let ranges: Vec<Range<u64>> = std::iter::once(offset..start)
        .chain(
            wanted
                .iter()
                .map(|b| start + b * BLOCK..start + (b + 1) * BLOCK),
        )
        .collect();
    let fetched = store.get_ranges(path, &ranges).await?;
    if declared_bitset(&fetched[0]) != Some(bitset) {
        return Ok(None);
    }
    Ok(Some(
        rows.iter()
            .zip(&probes)
            .filter(|(_, probe)| {
                let at = wanted.partition_point(|&b| b < probe.block(blocks));
                probe.check(&fetched[1 + at])
            })
            .map(|(&row, _)| row)
            .collect(),
    ))
}

/// Whether the bloom filter of `column` (a chunk of the file at `path`) may hold any of
/// `values`: `Some(false)` only when it holds none of them, `None` when the column has
/// no usable filter or a value has no bloom encoding we check (then assume it may).
/// Only the blocks the values hash to are read. For readers outside the engine that
/// skip whole files by their keys (the server's scans of files with deletion vectors).
pub async fn may_hold_any(
    store: &Arc<dyn ObjectStore>,
    path: &Path,
    column: &ColumnChunkMetaData,
    values: &ArrayRef,
) -> Result<Option<bool>> {
    let rows: Vec<u32> = (0..values.len() as u32).collect();
    Ok(may_hold(store, path, column, values, &rows)
        .await?
        .map(|held| !held.is_empty()))
}

/// The bitset size a bloom filter header declares: its first field (id 1, a zigzag
/// varint `i32`, compact Thrift), `None` if the header does not start so.
fn declared_bitset(header: &[u8]) -> Option<u64> {
    // Field header: delta 1, compact type i32 (5).
    let (&0x15, rest) = header.split_first()? else {
        return None;
    };
    let mut value: u64 = 0;
    for (i, &byte) in rest.iter().enumerate().take(5) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let zigzag = (value >> 1) as i64 ^ -((value & 1) as i64);
            return u64::try_from(zigzag).ok();
        }
    }
    None
}

/// One value to check: its hash and how to check it in a block.
enum Probe<'a> {
    Int64(i64),
    Int32(i32),
    Bytes(&'a [u8]),
}

impl<'a> Probe<'a> {
    fn of(values: &'a ArrayRef, row: usize) -> Option<Self> {
        if values.is_null(row) {
            return None;
        }
        Some(match values.data_type() {
            DataType::Int64 => Probe::Int64(values.as_primitive::<Int64Type>().value(row)),
            DataType::Int32 => Probe::Int32(values.as_primitive::<Int32Type>().value(row)),
            DataType::Utf8 => Probe::Bytes(values.as_string::<i32>().value(row).as_bytes()),
            DataType::Binary => Probe::Bytes(values.as_binary::<i32>().value(row)),
            _ => return None,
        })
    }

    /// The hash parquet's filters use: XXH64, seed 0, of the plain encoding (parquet's
    /// `AsBytes`: native-endian integers, the bytes of strings).
    fn hash(&self) -> u64 {
        match self {
            Probe::Int64(v) => XxHash64::oneshot(0, &v.to_ne_bytes()),
            Probe::Int32(v) => XxHash64::oneshot(0, &v.to_ne_bytes()),
            Probe::Bytes(b) => XxHash64::oneshot(0, b),
        }
    }

    fn block(&self, blocks: u64) -> u64 {
        ((self.hash() >> 32) * blocks) >> 32
    }

    /// Whether the filter may hold the value, given the block it hashes to.
    fn check(&self, block: &[u8]) -> bool {
        let one = Sbbf::new(block);
        match self {
            Probe::Int64(v) => one.check(v),
            Probe::Int32(v) => one.check(v),
            Probe::Bytes(b) => one.check(*b),
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int32Array, Int64Array, StringArray};

    use super::*;

    /// A filter as parquet writes it (header, then bitset) holding `values`.
    fn written(values: &[i64], ndv: u64) -> (Vec<u8>, Sbbf) {
        let mut filter = Sbbf::new_with_ndv_fpp(ndv, 0.01).unwrap();
        for v in values {
            filter.insert(v);
        }
        let mut bytes = Vec::new();
        filter.write(&mut bytes).unwrap();
        (bytes, filter)
    }

    #[test]
    fn one_block_answers_as_the_whole_filter() {
        let stored: Vec<i64> = (0..5_000).map(|i| i * 3).collect();
        let (bytes, whole) = written(&stored, 5_000);
        let header = bytes.len() as u64 % BLOCK;
        let bitset = &bytes[header as usize..];
        let blocks = bitset.len() as u64 / BLOCK;
        assert_eq!(declared_bitset(&bytes), Some(bitset.len() as u64));
        let probes: ArrayRef = Arc::new(Int64Array::from_iter_values(0..20_000));
        let mut present = 0;
        for row in 0..probes.len() {
            let probe = Probe::of(&probes, row).unwrap();
            let b = probe.block(blocks) as usize;
            let block = &bitset[b * BLOCK as usize..(b + 1) * BLOCK as usize];
            let v = probes.as_primitive::<Int64Type>().value(row);
            assert_eq!(probe.check(block), whole.check(&v), "value {v}");
            present += usize::from(probe.check(block));
        }
        assert!(present >= stored.len(), "every stored value is found");
        assert!(present < 6_000, "and few others: {present}");
    }

    #[test]
    fn strings_and_int32_hash_as_parquet_does() {
        let mut filter = Sbbf::new_with_ndv_fpp(100, 0.01).unwrap();
        filter.insert("k1");
        filter.insert(&7i32);
        let mut bytes = Vec::new();
        filter.write(&mut bytes).unwrap();
        let header = (bytes.len() as u64 % BLOCK) as usize;
        let bitset = &bytes[header..];
        let blocks = bitset.len() as u64 / BLOCK;
        let block = |p: &Probe| {
            let b = p.block(blocks) as usize;
            bitset[b * 32..b * 32 + 32].to_vec()
        };
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["k1"]));
        let p = Probe::of(&strings, 0).unwrap();
        assert!(p.check(&block(&p)));
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![7]));
        let p = Probe::of(&ints, 0).unwrap();
        assert!(p.check(&block(&p)));
    }

    #[test]
    fn a_header_that_does_not_declare_the_size_first_is_not_trusted() {
        assert_eq!(declared_bitset(&[0x15, 0x80, 0x80, 0x20]), Some(262_144));
        assert_eq!(declared_bitset(&[0x16, 0x80]), None);
        assert_eq!(declared_bitset(&[0x15, 0x80, 0x80]), None);
        assert_eq!(declared_bitset(&[]), None);
    }
}

//! The source side of an upsert: conform the batch to the table, split it by partition,
//! resolve in-batch duplicates and build the key index. Everything that is held in memory
//! for the whole call lives here, and it is sized by the source alone.

use std::collections::HashMap;

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::SchemaRef;

use crate::error::{DeltaLiteError, Result};
use crate::ops::upsert::keys::{KeyIndex, TupleEncoder, Tuples};
use crate::options::{OmittedColumns, OnDuplicate, UpsertOptions};
use crate::schema::conform::{conform_source, without_columns};
use crate::schema::partition::PartitionKey;

/// Column roles resolved against the table.
pub(crate) struct Layout {
    /// Full table schema (Arrow).
    pub table_schema: SchemaRef,
    /// Table schema without partition columns: the layout of data files.
    pub data_schema: SchemaRef,
    /// Partition columns in table order.
    pub partition_columns: Vec<String>,
    /// Key columns that are not partition columns, as indices into `data_schema`.
    pub key_columns: Vec<usize>,
    /// Key columns that are partition columns, as indices into `partition_columns`: a
    /// NULL partition value there makes every key of the partition NULL.
    pub partition_key_columns: Vec<usize>,
    /// Cursor columns that are not partition columns, as indices into `data_schema`.
    pub cursor_columns: Vec<usize>,
    /// Whether a cursor was requested at all (even one made only of partition columns).
    pub has_cursor: bool,
    /// The delete marker column, as an index into `data_schema`.
    pub delete_column: Option<usize>,
}

impl Layout {
    pub(crate) fn key_encoder(&self) -> Result<TupleEncoder> {
        self.encoder(&self.key_columns)
    }

    pub(crate) fn cursor_encoder(&self) -> Result<TupleEncoder> {
        self.encoder(&self.cursor_columns)
    }

    fn encoder(&self, columns: &[usize]) -> Result<TupleEncoder> {
        let types = columns
            .iter()
            .map(|&i| self.data_schema.field(i).data_type().clone())
            .collect();
        TupleEncoder::new(columns.to_vec(), types)
    }

    /// Resolve the caller's column names against the table.
    pub(crate) fn resolve(
        table_schema: SchemaRef,
        partition_columns: Vec<String>,
        options: &UpsertOptions,
    ) -> Result<Self> {
        if options.primary_keys.is_empty() {
            return Err(DeltaLiteError::invalid(
                "primary_keys must name at least one column",
            ));
        }
        // The table's metadata decides the partitioning. A hint on an unpartitioned table
        // is dropped (identity is then the keys alone, over the whole table), as PostHog's
        // deltalite does; a hint naming other columns than the table's is refused.
        if let Some(hint) = &options.partition_key
            && !partition_columns.is_empty()
        {
            let mut expected = hint.clone();
            let mut actual = partition_columns.clone();
            expected.sort();
            actual.sort();
            if expected != actual {
                return Err(DeltaLiteError::invalid(format!(
                    "table is partitioned by {} but upsert was called with partition_key {}",
                    quoted(&partition_columns),
                    quoted(hint)
                )));
            }
        }
        let data_schema = without_columns(&table_schema, &partition_columns);
        let resolve = |names: &[String], what: &str| -> Result<Vec<usize>> {
            let mut out = Vec::new();
            for name in names {
                if table_schema.index_of(name).is_err() {
                    return Err(DeltaLiteError::schema(format!(
                        "{what} column {name:?} is not in the table"
                    )));
                }
                if partition_columns.contains(name) {
                    // Constant within a partition, and identity is per partition anyway.
                    continue;
                }
                out.push(data_schema.index_of(name)?);
            }
            Ok(out)
        };
        let delete_column = match &options.delete_column {
            None => None,
            Some(name) => {
                if table_schema.index_of(name).is_err() {
                    return Err(DeltaLiteError::schema(format!(
                        "delete column {name:?} is not in the table"
                    )));
                }
                if partition_columns.contains(name)
                    || options.primary_keys.contains(name)
                    || options.cursor_fields.contains(name)
                {
                    return Err(DeltaLiteError::invalid(format!(
                        "delete column {name:?} must not be a partition, key or cursor column"
                    )));
                }
                Some(data_schema.index_of(name)?)
            }
        };
        let key_columns = resolve(&options.primary_keys, "primary key")?;
        let cursor_columns = resolve(&options.cursor_fields, "cursor")?;
        let partition_key_columns = partition_columns
            .iter()
            .enumerate()
            .filter(|(_, p)| options.primary_keys.contains(p))
            .map(|(i, _)| i)
            .collect();
        Ok(Self {
            table_schema,
            data_schema,
            partition_columns,
            key_columns,
            partition_key_columns,
            cursor_columns,
            has_cursor: !options.cursor_fields.is_empty(),
            delete_column,
        })
    }
}

/// `'a'` for one name, `['a', 'b']` for several.
fn quoted(names: &[String]) -> String {
    match names {
        [one] => format!("'{one}'"),
        many => format!(
            "[{}]",
            many.iter()
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One partition's share of the source, deduplicated and indexed.
pub(crate) struct SourcePartition {
    /// The partition, typed and serialized.
    pub key: PartitionKey,
    /// Winning rows in batch order, in the data schema.
    pub batch: RecordBatch,
    /// Rows whose key has a NULL: never matched, always inserted.
    pub null_key: Vec<bool>,
    /// Encoded cursor of each row, when a cursor is in use.
    pub cursors: Option<Tuples>,
    /// Key -> row of `batch`, over non-NULL keys.
    pub index: KeyIndex,
    /// Rows marked in the delete column (all false without one): they remove their key
    /// and are never written.
    pub deleted: Vec<bool>,
}

impl SourcePartition {
    pub(crate) fn is_deleted(&self, row: usize) -> bool {
        self.deleted.get(row).copied().unwrap_or(false)
    }
}

/// The delete marks of `column`: a boolean `true`, or any non-NULL value of another type.
fn delete_marks(column: &ArrayRef) -> Vec<bool> {
    use arrow::array::{Array, AsArray};
    match column.data_type() {
        arrow::datatypes::DataType::Boolean => {
            let flags = column.as_boolean();
            (0..flags.len())
                .map(|i| flags.is_valid(i) && flags.value(i))
                .collect()
        }
        _ => (0..column.len()).map(|i| column.is_valid(i)).collect(),
    }
}

/// The whole prepared source.
pub(crate) struct PreparedSource {
    pub partitions: Vec<SourcePartition>,
    /// Which data-schema columns the caller's batch carried.
    pub carried: Vec<bool>,
    /// Whether a winning match changes the stored row at all. False for
    /// `omitted_columns = keep` with a batch of key (and partition) columns only.
    pub match_changes_row: bool,
    pub source_rows: usize,
    pub null_pk_rows: usize,
    pub duplicates_resolved: usize,
}

/// Conform, split, deduplicate and index the source.
pub(crate) fn prepare(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    layout: &Layout,
    options: &UpsertOptions,
) -> Result<PreparedSource> {
    let combined = concat_batches(schema, batches)?;
    let source_rows = combined.num_rows();
    for name in options.primary_keys.iter().chain(&layout.partition_columns) {
        if schema.index_of(name).is_err() {
            return Err(DeltaLiteError::schema(format!(
                "the batch must carry column {name:?} (primary key or partition column)"
            )));
        }
    }
    if let Some(name) = &options.delete_column
        && schema.index_of(name).is_err()
    {
        return Err(DeltaLiteError::schema(format!(
            "the batch must carry column {name:?} (delete column)"
        )));
    }
    let conformed = conform_source(&combined, &layout.table_schema)?;
    drop(combined);
    let full = conformed.batch;

    // Split by partition, keeping first-seen order of partitions and batch order of rows.
    let groups = crate::schema::partition::group_rows(&full, &layout.partition_columns)?;
    let data_indices: Vec<usize> = layout
        .data_schema
        .fields()
        .iter()
        .map(|f| layout.table_schema.index_of(f.name()))
        .collect::<std::result::Result<_, _>>()?;
    let data_full = full.project(&data_indices)?;
    let carried: Vec<bool> = data_indices.iter().map(|&i| conformed.carried[i]).collect();
    let payload_carried = carried
        .iter()
        .enumerate()
        .any(|(i, &c)| c && !layout.key_columns.contains(&i));
    let match_changes_row = options.omitted_columns == OmittedColumns::Null || payload_carried;

    let key_enc = layout.key_encoder()?;
    let cursor_enc = layout.cursor_encoder()?;
    let mut partitions = Vec::with_capacity(groups.len());
    let mut null_pk_rows = 0;
    let mut duplicates_resolved = 0;
    for (key, rows) in groups {
        // A partition of no rows (the one group of an empty batch into an unpartitioned
        // table) touches nothing.
        if rows.is_empty() {
            continue;
        }
        // One partition with every row (an unpartitioned table): `group_rows` keeps batch
        // order, so the rows are the batch itself and copying them would double the source.
        let part_batch = if rows.len() == data_full.num_rows() {
            data_full.clone()
        } else {
            take_record_batch(&data_full, &UInt32Array::from(rows))?
        };
        let columns: Vec<ArrayRef> = part_batch.columns().to_vec();
        let keys = key_enc.encode(&columns)?;
        // A key column that is a partition column holds the partition's value in every row:
        // a NULL there is a NULL in every key of the partition, and NULL keys never match.
        let null_partition_key = layout
            .partition_key_columns
            .iter()
            .any(|&i| key.serialized.get(i).is_some_and(Option::is_none));
        let null_key = if null_partition_key {
            vec![true; part_batch.num_rows()]
        } else {
            key_enc.any_null(&columns, part_batch.num_rows())
        };
        let cursors = if layout.has_cursor {
            Some(cursor_enc.encode(&columns)?)
        } else {
            None
        };

        // Winner per key: with a cursor the greatest cursor (ties: later row); without,
        // the later row when duplicates are allowed.
        let mut winner: HashMap<&[u8], u32, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(part_batch.num_rows(), Default::default());
        let mut duplicates = 0usize;
        for (row, _) in null_key.iter().enumerate().filter(|(_, null)| !**null) {
            match winner.entry(keys.row(row)) {
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(row as u32);
                }
                std::collections::hash_map::Entry::Occupied(mut e) => {
                    let current = e.get_mut();
                    duplicates += 1;
                    let replace = match &cursors {
                        Some(c) => c.row(row) >= c.row(*current as usize),
                        None => true,
                    };
                    if replace {
                        *current = row as u32;
                    }
                }
            }
        }
        if duplicates > 0 && cursors.is_none() && options.on_duplicate == OnDuplicate::Error {
            return Err(DeltaLiteError::DuplicateKeys {
                partition: key.label(),
                count: duplicates,
            });
        }
        duplicates_resolved += duplicates;

        // Keep winners and NULL-key rows, in batch order.
        let mut keep: Vec<u32> = winner.values().copied().collect();
        keep.extend(
            null_key
                .iter()
                .enumerate()
                .filter(|(_, n)| **n)
                .map(|(i, _)| i as u32),
        );
        keep.sort_unstable();
        let nulls_here = null_key.iter().filter(|n| **n).count();
        null_pk_rows += nulls_here;
        drop(winner);

        drop(keys);
        let (batch, null_key, cursors) = if keep.len() == part_batch.num_rows() {
            (part_batch, null_key, cursors)
        } else {
            let batch = take_record_batch(&part_batch, &UInt32Array::from(keep))?;
            let columns: Vec<ArrayRef> = batch.columns().to_vec();
            let null_key = if null_partition_key {
                vec![true; batch.num_rows()]
            } else {
                key_enc.any_null(&columns, batch.num_rows())
            };
            let cursors = match cursors {
                Some(_) => Some(cursor_enc.encode(&columns)?),
                None => None,
            };
            (batch, null_key, cursors)
        };
        let index = key_enc.index(batch.columns(), &null_key)?;
        let deleted = match layout.delete_column {
            Some(i) => delete_marks(batch.column(i)),
            None => vec![false; batch.num_rows()],
        };
        partitions.push(SourcePartition {
            key,
            batch,
            null_key,
            cursors,
            index,
            deleted,
        });
    }
    Ok(PreparedSource {
        partitions,
        carried,
        match_changes_row,
        source_rows,
        null_pk_rows,
        duplicates_resolved,
    })
}

/// Size in memory of the caller's batches, for the source guard.
pub(crate) fn source_bytes(batches: &[RecordBatch]) -> usize {
    crate::runtime::held::batches_bytes(batches)
}

/// Check the source guard.
pub(crate) fn check_source_size(batches: &[RecordBatch], limit: usize) -> Result<()> {
    let actual = source_bytes(batches);
    if limit > 0 && actual > limit {
        return Err(DeltaLiteError::SourceTooLarge { actual, limit });
    }
    Ok(())
}

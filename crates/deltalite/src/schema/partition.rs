//! Partition values: typed for the writer, serialized (Delta's partition-value
//! serialization) for matching against `Add` actions, and printable for messages.

use std::collections::HashMap;

use arrow::array::RecordBatch;
use arrow::row::{RowConverter, SortField};
use delta_kernel::expressions::Scalar;
use delta_kernel::schema::{DataType as KernelType, StructType};
use deltalake::kernel::scalars::ScalarExt;
use indexmap::IndexMap;

use crate::error::{DeltaLiteError, Result};

/// One partition of a table: its typed values and their canonical serialization.
#[derive(Debug, Clone)]
pub(crate) struct PartitionKey {
    /// Values in table partition-column order, for the writer.
    pub values: IndexMap<String, Scalar>,
    /// Canonical serialized values (`None` for NULL), for matching files.
    pub serialized: Vec<Option<String>>,
}

fn serialize(scalar: &Scalar) -> Option<String> {
    if scalar.is_null() {
        None
    } else {
        Some(scalar.serialize())
    }
}

impl PartitionKey {
    pub(crate) fn new(values: IndexMap<String, Scalar>) -> Self {
        let serialized = values.values().map(serialize).collect();
        Self { values, serialized }
    }

    /// `a=1/b=x`, or `<unpartitioned>`.
    pub(crate) fn label(&self) -> String {
        if self.values.is_empty() {
            return "<unpartitioned>".to_string();
        }
        self.values
            .keys()
            .zip(&self.serialized)
            .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("NULL")))
            .collect::<Vec<_>>()
            .join("/")
    }

    /// SQL-ish predicate selecting this partition, recorded as the read predicate.
    pub(crate) fn predicate(&self) -> String {
        self.values
            .keys()
            .zip(&self.serialized)
            .map(|(k, v)| match v {
                Some(v) => format!("{k} = '{}'", v.replace('\'', "''")),
                None => format!("{k} IS NULL"),
            })
            .collect::<Vec<_>>()
            .join(" AND ")
    }
}

/// Canonical serialization of a file's raw partition values, so that files written by
/// other tools (which may spell a value differently) still match.
pub(crate) fn normalize_raw(
    raw: &HashMap<String, Option<String>>,
    partition_columns: &[String],
    schema: &StructType,
) -> Result<Vec<Option<String>>> {
    partition_columns
        .iter()
        .map(|name| {
            let value = raw.get(name).cloned().flatten();
            let Some(value) = value.filter(|v| !v.is_empty()) else {
                return Ok(None);
            };
            let field = schema.field(name).ok_or_else(|| {
                DeltaLiteError::Other(format!("partition column {name} missing from schema"))
            })?;
            match field.data_type() {
                KernelType::Primitive(p) => Ok(p
                    .parse_scalar(&value)
                    .map_or(Some(value), |s| serialize(&s))),
                other => Err(DeltaLiteError::UnsupportedTable(format!(
                    "partition column {name} has non-primitive type {other:?}"
                ))),
            }
        })
        .collect()
}

/// Group the rows of `batch` by partition, in first-seen order.
pub(crate) fn group_rows(
    batch: &RecordBatch,
    partition_columns: &[String],
) -> Result<Vec<(PartitionKey, Vec<u32>)>> {
    if partition_columns.is_empty() {
        let rows = (0..batch.num_rows() as u32).collect();
        return Ok(vec![(PartitionKey::new(IndexMap::new()), rows)]);
    }
    let columns = partition_columns
        .iter()
        .map(|name| Ok(batch.column(batch.schema().index_of(name)?).clone()))
        .collect::<Result<Vec<_>>>()?;
    let converter = RowConverter::new(
        columns
            .iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect(),
    )?;
    let rows = converter.convert_columns(&columns)?;
    let mut position: HashMap<&[u8], usize> = HashMap::new();
    let mut groups: Vec<(usize, Vec<u32>)> = Vec::new();
    for row in 0..batch.num_rows() {
        let k = rows.row(row).data();
        match position.get(k) {
            Some(&g) => groups[g].1.push(row as u32),
            None => {
                position.insert(k, groups.len());
                groups.push((row, vec![row as u32]));
            }
        }
    }
    groups
        .into_iter()
        .map(|(first, rows)| {
            let values = scalar_values(batch, partition_columns, first)?;
            Ok((PartitionKey::new(values), rows))
        })
        .collect()
}

/// Typed partition values of one row, as the writer wants them.
pub(crate) fn scalar_values(
    batch: &RecordBatch,
    partition_columns: &[String],
    row: usize,
) -> Result<IndexMap<String, Scalar>> {
    let mut out = IndexMap::new();
    for name in partition_columns {
        let col = batch.column(batch.schema().index_of(name)?);
        let scalar = Scalar::from_array(col.as_ref(), row).ok_or_else(|| {
            DeltaLiteError::schema(format!(
                "partition column {name:?} has type {} which cannot be a partition value",
                col.data_type()
            ))
        })?;
        out.insert(name.clone(), scalar);
    }
    Ok(out)
}

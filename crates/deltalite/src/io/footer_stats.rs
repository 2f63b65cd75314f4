//! Delta `Add` statistics computed from a Parquet footer, for files stored as they are.
//!
//! Min/max are emitted only where they are exact bounds that Delta readers parse the
//! same way (integers, strings, booleans, dates, timestamps); other columns get null
//! counts only, which is always valid (missing bounds mean "unknown").

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::{SortOptions, sort_to_indices};
use arrow::datatypes::Schema;
use deltalake::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use deltalake::parquet::file::metadata::ParquetMetaData;
use serde_json::{Map, Value, json};

use crate::error::Result;

/// `{"numRecords", "minValues", "maxValues", "nullCount"}` for the first `max_columns`
/// top-level columns of `schema` (the file's Arrow schema).
pub(crate) fn stats_json(
    metadata: &ParquetMetaData,
    schema: &Schema,
    max_columns: usize,
) -> Result<String> {
    let mut mins = Map::new();
    let mut maxes = Map::new();
    let mut nulls = Map::new();
    let groups = metadata.row_groups();
    for field in schema.fields().iter().take(max_columns) {
        let Ok(converter) = StatisticsConverter::try_new(
            field.name(),
            schema,
            metadata.file_metadata().schema_descr(),
        ) else {
            continue;
        };
        let Ok(null_counts) = converter.row_group_null_counts(groups.iter()) else {
            continue;
        };
        if null_counts.null_count() > 0 {
            continue;
        }
        let total_nulls: u64 = null_counts.values().iter().sum();
        nulls.insert(field.name().clone(), json!(total_nulls));
        let (Ok(min), Ok(max)) = (
            converter.row_group_mins(groups.iter()),
            converter.row_group_maxes(groups.iter()),
        ) else {
            continue;
        };
        // A row group with values but no statistic makes the bound unknown.
        let missing = (0..groups.len()).any(|rg| {
            let has_values = (null_counts.value(rg) as i64) < groups[rg].num_rows();
            has_values && (min.is_null(rg) || max.is_null(rg))
        });
        if missing {
            continue;
        }
        if let (Some(lo), Some(hi)) = (extreme(&min, false)?, extreme(&max, true)?) {
            mins.insert(field.name().clone(), lo);
            maxes.insert(field.name().clone(), hi);
        }
    }
    Ok(json!({
        "numRecords": metadata.file_metadata().num_rows(),
        "minValues": mins,
        "maxValues": maxes,
        "nullCount": nulls,
    })
    .to_string())
}

/// The smallest (or largest) non-null value of `values` as a Delta stats JSON value.
fn extreme(values: &ArrayRef, largest: bool) -> Result<Option<Value>> {
    if values.null_count() == values.len() {
        return Ok(None);
    }
    let order = sort_to_indices(
        values,
        Some(SortOptions {
            descending: largest,
            nulls_first: false,
        }),
        Some(1),
    )?;
    let i = order.value(0) as usize;
    Ok(json_value(values, i))
}

fn json_value(values: &ArrayRef, i: usize) -> Option<Value> {
    use arrow::datatypes::*;
    let v = match values.data_type() {
        DataType::Int8 => json!(values.as_primitive::<Int8Type>().value(i)),
        DataType::Int16 => json!(values.as_primitive::<Int16Type>().value(i)),
        DataType::Int32 => json!(values.as_primitive::<Int32Type>().value(i)),
        DataType::Int64 => json!(values.as_primitive::<Int64Type>().value(i)),
        DataType::Boolean => json!(values.as_boolean().value(i)),
        DataType::Utf8 => json!(values.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => json!(values.as_string::<i64>().value(i)),
        DataType::Date32 => {
            let days = values.as_primitive::<Date32Type>().value(i);
            let date = chrono::NaiveDate::from_num_days_from_ce_opt(days + 719_163)?;
            json!(date.format("%Y-%m-%d").to_string())
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            let micros = values.as_primitive::<TimestampMicrosecondType>().value(i);
            let ts = chrono::DateTime::from_timestamp_micros(micros)?;
            json!(ts.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        }
        _ => return None,
    };
    Some(v)
}

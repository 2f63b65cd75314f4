//! Helpers shared by the integration tests: build batches, read a table back in full
//! (through the Delta log and plain Parquet reads, independent of the engine's own
//! read path), and compare contents as sorted rows.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use deltalite::arrow::array::{ArrayRef, RecordBatch, StringArray};
use deltalite::arrow::compute::concat_batches;
use deltalite::arrow::datatypes::{Schema, SchemaRef};
use deltalite::arrow::util::display::{ArrayFormatter, FormatOptions};
use deltalite::deltalake::DeltaTableBuilder;
use deltalite::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use deltalite::{DeltaLiteTable, UpsertOptions};

pub fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns.into_iter().map(|(n, a)| (n.to_string(), a))).unwrap()
}

pub fn strings(values: &[Option<&str>]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

pub fn tmp_uri(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).to_str().unwrap().to_string()
}

pub async fn create(uri: &str, schema: &Schema, partitions: &[&str]) -> DeltaLiteTable {
    DeltaLiteTable::create(
        uri,
        HashMap::new(),
        schema,
        &partitions.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        HashMap::new(),
    )
    .await
    .unwrap()
}

pub async fn upsert(
    table: &mut DeltaLiteTable,
    b: &RecordBatch,
    opts: &UpsertOptions,
) -> deltalite::Result<deltalite::UpsertStats> {
    table
        .upsert(&b.schema(), std::slice::from_ref(b), opts)
        .await
}

/// Every row of the table as display strings in table column order, sorted.
/// Reads the files directly with the parquet crate and fills partition columns from
/// the log, so it does not share code with the engine.
pub async fn rows(uri: &str) -> Vec<Vec<String>> {
    let mut table = DeltaTableBuilder::from_url(deltalite::table::table_url(uri).unwrap())
        .unwrap()
        .build()
        .unwrap();
    table.load().await.unwrap();
    let state = table.snapshot().unwrap();
    let schema: SchemaRef = state.snapshot().arrow_schema();
    let root = table.table_url().to_file_path().unwrap();
    let mut out = Vec::new();
    for file in state.log_data().iter() {
        let pv = file.partition_values_map();
        let f = std::fs::File::open(root.join(file.path().as_ref())).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        for b in reader {
            let b = b.unwrap();
            for row in 0..b.num_rows() {
                let mut values = Vec::new();
                for field in schema.fields() {
                    let v = if let Some(p) = pv.get(field.name()) {
                        p.clone().unwrap_or_else(|| "NULL".into())
                    } else if let Ok(i) = b.schema().index_of(field.name()) {
                        display(b.column(i), row)
                    } else {
                        "NULL".into()
                    };
                    values.push(v);
                }
                out.push(values);
            }
        }
    }
    out.sort();
    out
}

pub fn display(array: &ArrayRef, row: usize) -> String {
    if array.is_null(row) {
        return "NULL".into();
    }
    let opts = FormatOptions::default();
    ArrayFormatter::try_new(array.as_ref(), &opts)
        .unwrap()
        .value(row)
        .to_string()
}

/// Rows of a batch in the same shape as [`rows`], for expected values.
pub fn batch_rows(b: &RecordBatch) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = (0..b.num_rows())
        .map(|r| b.columns().iter().map(|c| display(c, r)).collect())
        .collect();
    out.sort();
    out
}

pub fn concat(bs: &[RecordBatch]) -> RecordBatch {
    concat_batches(&bs[0].schema(), bs).unwrap()
}

use deltalite::arrow::array::Array;

/// Vacuum everything the log does not reference, now (retention 0, the table's rule
/// waived): how the suites check what a call left behind. The deleted paths, sorted.
pub async fn vacuum_now(t: &mut DeltaLiteTable) -> Vec<String> {
    t.vacuum(&deltalite::VacuumOptions {
        retention: Some(std::time::Duration::ZERO),
        enforce_retention: false,
        dry_run: false,
    })
    .await
    .unwrap()
    .files
}

//! A tour of the engine on a local table: create, append, upsert with a cursor, print.
//! `cargo run -p deltalite --example upsert_demo -- ./lakehouse/demo`

use std::collections::HashMap;
use std::sync::Arc;

use deltalite::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::arrow::util::pretty::pretty_format_batches;
use deltalite::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use deltalite::write::WriteOptions;
use deltalite::{DeltaLiteTable, UpsertOptions};

fn contacts(ids: &[i64], days: &[&str], emails: &[&str], modified: &[i64]) -> RecordBatch {
    RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        (
            "day",
            Arc::new(StringArray::from(days.to_vec())) as ArrayRef,
        ),
        (
            "email",
            Arc::new(StringArray::from(emails.to_vec())) as ArrayRef,
        ),
        (
            "modified",
            Arc::new(Int64Array::from(modified.to_vec())) as ArrayRef,
        ),
    ])
    .expect("valid batch")
}

#[tokio::main]
async fn main() -> deltalite::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "./lakehouse/demo".into());
    let _ = std::fs::remove_dir_all(&path);
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("email", DataType::Utf8, true),
        Field::new("modified", DataType::Int64, true),
    ]);
    let mut table = DeltaLiteTable::create(
        &path,
        HashMap::new(),
        &schema,
        &["day".into()],
        HashMap::new(),
    )
    .await?;
    let first = contacts(
        &[1, 2, 3],
        &["2026-01-01", "2026-01-01", "2026-01-02"],
        &["ada@old", "grace@old", "linus@old"],
        &[100, 100, 100],
    );
    table.append([Ok(first)], &WriteOptions::default()).await?;
    println!("created {path} at version {}", table.version());

    // id 1 is newer, id 2 is stale (loses to the stored cursor), id 4 is new.
    let change = contacts(
        &[1, 2, 4],
        &["2026-01-01", "2026-01-01", "2026-01-02"],
        &["ada@new", "grace@stale", "margaret@new"],
        &[200, 50, 200],
    );
    let mut options = UpsertOptions::new(["id"]);
    options.partition_key = Some(vec!["day".into()]);
    options.cursor_fields = vec!["modified".into()];
    let stats = table.upsert(&change.schema(), &[change], &options).await?;
    println!("{stats:#?}");

    let mut batches = Vec::new();
    for file in table.files()? {
        let f = std::fs::File::open(std::path::Path::new(&path).join(&file.path))
            .map_err(|e| deltalite::DeltaLiteError::Other(e.to_string()))?;
        for b in ParquetRecordBatchReaderBuilder::try_new(f)?.build()? {
            batches.push(b?);
        }
    }
    println!("{}", pretty_format_batches(&batches)?);
    Ok(())
}

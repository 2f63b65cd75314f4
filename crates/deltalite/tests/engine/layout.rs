//! How an upsert lays out what it writes: rewritten files of a partition coalesce up to
//! the target size, `isolate_source_rows` keeps the batch's rows in their own file,
//! `max_row_group_bytes` closes row groups early.

use crate::common;

use std::sync::Arc;

use common::*;
use deltalite::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::parquet::file::reader::{FileReader, SerializedFileReader};
use deltalite::write::WriteOptions;
use deltalite::{DeltaLiteTable, PruneStrategy, UpsertOptions};

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("val", DataType::Utf8, true),
    ])
}

fn rows(ids: std::ops::Range<i64>, val: &str) -> RecordBatch {
    let n = (ids.end - ids.start) as usize;
    let id: ArrayRef = Arc::new(Int64Array::from(ids.collect::<Vec<_>>()));
    batch(vec![
        ("id", id),
        ("day", strings(&vec![Some("d"); n])),
        ("val", strings(&vec![Some(val); n])),
    ])
}

/// A table partitioned by `day` whose partition holds `files` files of 10 rows each.
async fn fragmented(dir: &tempfile::TempDir, files: i64) -> (String, DeltaLiteTable) {
    let uri = tmp_uri(dir, "t");
    let mut t = create(&uri, &schema(), &["day"]).await;
    for f in 0..files {
        t.append(
            [Ok(rows(f * 10..f * 10 + 10, "old"))],
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    }
    (uri, t)
}

/// `(rows, row groups, vals)` of each live file, sorted.
fn file_contents(dir: &tempfile::TempDir, t: &DeltaLiteTable) -> Vec<(i64, usize, Vec<String>)> {
    let mut out: Vec<(i64, usize, Vec<String>)> = t
        .files()
        .unwrap()
        .iter()
        .map(|f| {
            let path = dir.path().join("t").join(&f.path);
            let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
            let meta = reader.metadata();
            let file = std::fs::File::open(&path).unwrap();
            let batches =
                deltalite::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                    file,
                )
                .unwrap()
                .build()
                .unwrap();
            let mut vals: Vec<String> = Vec::new();
            for b in batches {
                let b = b.unwrap();
                let col = b.column(b.schema().index_of("val").unwrap());
                vals.extend((0..b.num_rows()).map(|r| display(col, r)));
            }
            vals.sort();
            vals.dedup();
            (meta.file_metadata().num_rows(), meta.num_row_groups(), vals)
        })
        .collect();
    out.sort();
    out
}

/// Rewriting every file of a partition of small files writes them back as one file (the
/// target is far above their total), not one file per input.
#[tokio::test]
async fn rewritten_files_of_a_partition_coalesce_up_to_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = fragmented(&dir, 6).await;
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.prune_strategy = PruneStrategy::None;
    let s = upsert(&mut t, &rows(0..1, "new"), &o).await.unwrap();
    assert_eq!(
        (
            s.files_removed,
            s.files_added,
            s.rows_updated,
            s.rows_copied
        ),
        (6, 1, 1, 59),
        "{s:?}"
    );
    assert_eq!(rows_of(&uri).await.len(), 60);

    // A target below two files' size: each file is its own group again.
    let one_file = t.files().unwrap()[0].size;
    let small_dir = tempfile::tempdir().unwrap();
    let (_, mut small) = fragmented(&small_dir, 3).await;
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.prune_strategy = PruneStrategy::None;
    o.knobs.target_file_size = Some(one_file / 10);
    let s = upsert(&mut small, &rows(0..1, "new"), &o).await.unwrap();
    assert_eq!((s.files_removed, s.files_added), (3, 3), "{s:?}");
}

/// `isolate_source_rows`: the rewritten file holds only rows that were there (copied), and
/// the batch's rows (the replacement and the insert) are in one file of their own.
#[tokio::test]
async fn isolated_source_rows_go_to_their_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, mut t) = fragmented(&dir, 2).await;
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.isolate_source_rows = true;
    let b = batch(vec![
        ("id", Arc::new(Int64Array::from(vec![3, 100])) as ArrayRef),
        ("day", strings(&[Some("d"), Some("d")])),
        ("val", strings(&[Some("new"), Some("new")])),
    ]);
    let s = upsert(&mut t, &b, &o).await.unwrap();
    assert_eq!(
        (
            s.files_removed,
            s.files_added,
            s.rows_updated,
            s.rows_inserted
        ),
        (1, 2, 1, 1),
        "{s:?}"
    );
    assert_eq!(
        file_contents(&dir, &t),
        vec![
            (2, 1, vec!["new".to_string()]),
            (9, 1, vec!["old".to_string()]),
            (10, 1, vec!["old".to_string()]),
        ]
    );
    assert_eq!(rows_of(&uri).await.len(), 21);

    // Without it, the replacement follows the copied rows in the rewritten file.
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.isolate_source_rows = false;
    let s = upsert(&mut t, &rows(12..13, "again"), &o).await.unwrap();
    assert_eq!((s.files_removed, s.files_added), (1, 1), "{s:?}");
    assert!(
        file_contents(&dir, &t).contains(&(10, 1, vec!["again".to_string(), "old".to_string()])),
        "{:?}",
        file_contents(&dir, &t)
    );
}

/// `max_row_group_bytes = 1` closes a row group after every written batch.
#[tokio::test]
async fn a_tiny_row_group_limit_makes_a_row_group_per_written_batch() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema(), &["day"]).await;
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.max_row_group_bytes = Some(1);
    o.knobs.read_batch_size = 10;
    let s = upsert(&mut t, &rows(0..50, "v"), &o).await.unwrap();
    assert_eq!(s.files_added, 1);
    let contents = file_contents(&dir, &t);
    assert_eq!(contents.len(), 1);
    assert_eq!(contents[0].0, 50);
    assert_eq!(contents[0].1, 5, "one row group per batch of 10 rows");

    let mut o = UpsertOptions::new(["id"]);
    o.knobs.max_row_group_bytes = Some(0);
    let err = upsert(&mut t, &rows(0..1, "v"), &o).await.unwrap_err();
    assert_eq!(err.kind(), deltalite::ErrorKind::InvalidInput);
}

async fn rows_of(uri: &str) -> Vec<Vec<String>> {
    common::rows(uri).await
}

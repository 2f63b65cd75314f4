//! Table writes the server needs, and interop with tables delta-rs wrote itself.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use deltalite::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::deltalake::writer::{DeltaWriter as _, RecordBatchWriter};
use deltalite::parquet::arrow::ArrowWriter;
use deltalite::write::WriteOptions;
use deltalite::{DeltaLiteTable, ErrorKind, UpsertOptions};

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ])
}

fn id_name(ids: &[i64], names: &[&str]) -> RecordBatch {
    batch(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        (
            "name",
            strings(&names.iter().map(|n| Some(*n)).collect::<Vec<_>>()),
        ),
    ])
}

fn write_parquet(path: &std::path::Path, b: &RecordBatch) {
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), b.schema(), None).unwrap();
    w.write(b).unwrap();
    w.close().unwrap();
}

#[tokio::test]
async fn a_matching_parquet_file_is_stored_byte_for_byte_with_footer_stats() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema(), &[]).await;
    let src = dir.path().join("in.parquet");
    let b = id_name(&[10, 20, 30], &["a", "b", "c"]);
    // The table's own Arrow schema, so the file matches exactly.
    let b = RecordBatch::try_new(t.schema().unwrap(), b.columns().to_vec()).unwrap();
    write_parquet(&src, &b);
    let s = t
        .append_parquet_file(&src, &WriteOptions::default())
        .await
        .unwrap();
    assert!(s.stored_as_is, "{s:?}");
    assert_eq!((s.files_added, s.rows_written), (1, 3));
    let files = t.files().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].num_records, Some(3), "numRecords from the footer");
    let stored = std::fs::read(dir.path().join("t").join(&files[0].path)).unwrap();
    assert_eq!(
        stored,
        std::fs::read(&src).unwrap(),
        "no decode, no re-encode"
    );
    // Footer min/max let the next upsert skip the file without probing it.
    let s = upsert(&mut t, &id_name(&[99], &["z"]), &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!((s.files_probed, s.files_carried_over), (0, 1), "{s:?}");
    assert_eq!(rows(&uri).await.len(), 4);
}

#[tokio::test]
async fn an_adopted_parquet_file_moves_into_a_local_table() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema(), &[]).await;
    let src = dir.path().join("spooled.parquet");
    let b = id_name(&[1, 2], &["a", "b"]);
    let b = RecordBatch::try_new(t.schema().unwrap(), b.columns().to_vec()).unwrap();
    write_parquet(&src, &b);
    let bytes = std::fs::read(&src).unwrap();
    let s = t
        .adopt_parquet_file(&src, &WriteOptions::default())
        .await
        .unwrap();
    assert!(s.stored_as_is, "{s:?}");
    assert!(!src.exists(), "moved, not copied");
    let files = t.files().unwrap();
    let stored = dir.path().join("t").join(&files[0].path);
    assert_eq!(std::fs::read(&stored).unwrap(), bytes);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&stored).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
    }
    assert_eq!(rows(&uri).await, vec![vec!["1", "a"], vec!["2", "b"]]);
}

#[tokio::test]
async fn a_parquet_file_with_another_shape_is_decoded_and_cast() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema(), &[]).await;
    let src = dir.path().join("in.parquet");
    // int32 ids and no name column: widened, and name becomes NULL.
    let b = batch(vec![(
        "id",
        Arc::new(deltalite::arrow::array::Int32Array::from(vec![1, 2])) as ArrayRef,
    )]);
    write_parquet(&src, &b);
    let s = t
        .append_parquet_file(&src, &WriteOptions::default())
        .await
        .unwrap();
    assert!(!s.stored_as_is);
    assert_eq!(rows(&uri).await, vec![vec!["1", "NULL"], vec!["2", "NULL"]]);
    // A column the table lacks is refused and nothing is committed.
    let bad = batch(vec![(
        "other",
        Arc::new(Int64Array::from(vec![1])) as ArrayRef,
    )]);
    write_parquet(&src, &bad);
    let v = t.version();
    let err = t
        .append_parquet_file(&src, &WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaMismatch);
    assert_eq!(t.version(), v);
    // Not Parquet at all.
    std::fs::write(&src, b"id,name\n1,a\n").unwrap();
    let err = t
        .append_parquet_file(&src, &WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaMismatch, "{err}");
}

#[tokio::test]
async fn overwrite_replaces_rows_and_schema_and_keeps_history() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema(), &[]).await;
    t.append(
        [Ok(id_name(&[1, 2], &["a", "b"]))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    let wider = batch(vec![
        ("id", Arc::new(Int64Array::from(vec![7])) as ArrayRef),
        ("name", strings(&[Some("g")])),
        ("extra", Arc::new(Int64Array::from(vec![70])) as ArrayRef),
    ]);
    let s = t
        .overwrite(
            &wider.schema(),
            [Ok(wider.clone())],
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!((s.files_removed, s.files_added), (1, 1));
    assert_eq!(t.schema().unwrap().fields().len(), 3);
    assert_eq!(rows(&uri).await, vec![vec!["7", "g", "70"]]);
    assert_eq!(
        t.history(None).await.unwrap().len(),
        3,
        "create, append, overwrite"
    );
}

#[tokio::test]
async fn app_transactions_are_recorded_in_the_same_commit() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema(), &[]).await;
    let w = WriteOptions {
        app_transaction: Some(deltalite::AppTransaction {
            app_id: "load-1".into(),
            version: 1,
        }),
        ..Default::default()
    };
    t.append([Ok(id_name(&[1], &["a"]))], &w).await.unwrap();
    assert_eq!(t.app_transaction_version("load-1").await.unwrap(), Some(1));
    // An upsert carrying an already-applied transaction is a no-op.
    let mut o = UpsertOptions::new(["id"]);
    o.app_transaction = w.app_transaction.clone();
    let v = t.version();
    let s = upsert(&mut t, &id_name(&[2], &["b"]), &o).await.unwrap();
    assert_eq!((s.version, s.rows_inserted), (v, 0));
    assert_eq!(rows(&uri).await, vec![vec!["1", "a"]]);
}

/// A `txn` record carries its time, so `delta.setTransactionRetentionDuration` expires
/// it: a retry inside the window is recognised and writes nothing, one after it is a new
/// write; a checkpoint written after the expiry no longer holds the record.
#[tokio::test]
async fn app_transactions_expire_after_the_tables_retention() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = DeltaLiteTable::create(
        &uri,
        HashMap::new(),
        &schema(),
        &[],
        HashMap::from([(
            "delta.setTransactionRetentionDuration".to_string(),
            "interval 2 seconds".to_string(),
        )]),
    )
    .await
    .unwrap();
    let w = WriteOptions {
        app_transaction: Some(deltalite::AppTransaction {
            app_id: "load-1".into(),
            version: 1,
        }),
        ..Default::default()
    };
    let first = t.append([Ok(id_name(&[1], &["a"]))], &w).await.unwrap();
    assert_eq!((first.version, first.already_applied), (1, false));
    let retry = t.append([Ok(id_name(&[1], &["a"]))], &w).await.unwrap();
    assert!(retry.already_applied);
    assert_eq!(t.version(), 1);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    t.reload().await.unwrap();
    assert_eq!(t.app_transaction_version("load-1").await.unwrap(), None);
    let late = t.append([Ok(id_name(&[1], &["a"]))], &w).await.unwrap();
    assert_eq!((late.version, late.already_applied), (2, false));
    assert_eq!(rows(&uri).await, vec![vec!["1", "a"], vec!["1", "a"]]);
    // The record the late write made is fresh again; after another expiry a checkpoint
    // leaves it out, and a reader of the checkpoint sees no record either.
    assert_eq!(t.app_transaction_version("load-1").await.unwrap(), Some(1));
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    t.reload().await.unwrap();
    deltalite::deltalake::checkpoints::create_checkpoint(t.delta_table(), None)
        .await
        .unwrap();
    let reopened = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    assert_eq!(
        reopened.app_transaction_version("load-1").await.unwrap(),
        None
    );
    let checkpoint = std::fs::read_dir(dir.path().join("t/_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".checkpoint.parquet"))
        .expect("a checkpoint file");
    let txns: usize =
        deltalite::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(checkpoint).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            let txn = b.column_by_name("txn").expect("a txn column");
            txn.len() - txn.null_count()
        })
        .sum();
    assert_eq!(txns, 0);
}

#[tokio::test]
async fn tables_written_by_delta_rs_with_checkpoints_are_upserted_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("name", DataType::Utf8, true),
    ]);
    let _ = create(&uri, &schema, &["day"]).await;
    // delta-rs's own RecordBatchWriter does the writes, then a checkpoint.
    let mut dt = deltalite::deltalake::open_table(deltalite::table::table_url(&uri).unwrap())
        .await
        .unwrap();
    for round in 0..3i64 {
        let mut writer = RecordBatchWriter::for_table(&dt).unwrap();
        let b = batch(vec![
            (
                "id",
                Arc::new(Int64Array::from(vec![round * 10, round * 10 + 1])) as ArrayRef,
            ),
            ("day", strings(&[Some("d1"), Some("d2")])),
            ("name", strings(&[Some("orig"), Some("orig")])),
        ]);
        writer.write(b).await.unwrap();
        writer.flush_and_commit(&mut dt).await.unwrap();
    }
    deltalite::deltalake::checkpoints::create_checkpoint(&dt, None)
        .await
        .unwrap();

    let mut t = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    assert_eq!(t.version(), 3);
    let b = batch(vec![
        ("id", Arc::new(Int64Array::from(vec![10, 99])) as ArrayRef),
        ("day", strings(&[Some("d1"), Some("d1")])),
        ("name", strings(&[Some("upd"), Some("new")])),
    ]);
    let s = upsert(&mut t, &b, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!(
        (s.rows_updated, s.rows_inserted, s.files_removed),
        (1, 1, 1),
        "{s:?}"
    );
    // delta-rs reads our commit back.
    let mut dt = deltalite::deltalake::open_table(deltalite::table::table_url(&uri).unwrap())
        .await
        .unwrap();
    dt.load().await.unwrap();
    assert_eq!(dt.version(), Some(4));
    let got = rows(&uri).await;
    assert_eq!(got.len(), 7);
    assert!(got.contains(&vec!["10".into(), "d1".into(), "upd".into()]));
    assert!(got.contains(&vec!["99".into(), "d1".into(), "new".into()]));
}

#[tokio::test]
async fn append_adds_new_columns_in_the_same_commit_as_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let mut t = create(&uri, &schema(), &[]).await;
    t.append([Ok(id_name(&[1], &["a"]))], &WriteOptions::default())
        .await
        .unwrap();
    let before = t.version();
    let wider = batch(vec![
        ("id", Arc::new(Int64Array::from(vec![2])) as ArrayRef),
        ("name", strings(&[Some("b")])),
        ("extra", strings(&[Some("x")])),
    ]);
    // Without new_columns an unknown column is a schema mismatch.
    let err = t
        .append([Ok(wider.clone())], &WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaMismatch, "{err}");
    assert_eq!(t.version(), before);

    // A failing append that would add a column leaves neither rows nor the column.
    let options = WriteOptions {
        new_columns: vec![Field::new("extra", DataType::Utf8, false)],
        ..Default::default()
    };
    let failing = [
        Ok(wider.clone()),
        Err(deltalite::DeltaLiteError::Other("cut".into())),
    ];
    assert!(t.append(failing, &options).await.is_err());
    let reopened = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    assert_eq!(reopened.version(), before);
    assert!(reopened.schema().unwrap().index_of("extra").is_err());

    // It succeeds in one commit: the schema and the rows arrive together.
    let s = t.append([Ok(wider)], &options).await.unwrap();
    assert_eq!(s.version, before + 1);
    let extra = t
        .schema()
        .unwrap()
        .field_with_name("extra")
        .unwrap()
        .clone();
    assert!(
        extra.is_nullable(),
        "added columns are nullable: old rows lack them"
    );
    assert_eq!(
        rows(&uri).await,
        vec![vec!["1", "a", "NULL"], vec!["2", "b", "x"]]
    );
    // A column that exists is refused, not silently re-added.
    let err = t
        .append([Ok(id_name(&[3], &["c"]))], &options)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaMismatch, "{err}");
}

#[tokio::test]
async fn changing_a_column_type_rewrites_every_file_in_one_commit() {
    use deltalite::arrow::array::Int32Array;
    use deltalite::compact::CompactOptions;
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let narrow = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("n", DataType::Int32, true),
    ]);
    let mut t = create(&uri, &narrow, &["day"]).await;
    for round in 0..2 {
        let b = batch(vec![
            (
                "id",
                Arc::new(Int64Array::from(vec![round, round + 10])) as ArrayRef,
            ),
            ("day", strings(&[Some("d1"), Some("d2")])),
            (
                "n",
                Arc::new(Int32Array::from(vec![Some(i32::MAX), None])) as ArrayRef,
            ),
        ]);
        t.append([Ok(b)], &WriteOptions::default()).await.unwrap();
    }
    let before_rows = rows(&uri).await;
    let before_version = t.version();
    let old_files: Vec<String> = t.files().unwrap().into_iter().map(|f| f.path).collect();

    let s = t
        .change_column_types(
            &[Field::new("n", DataType::Int64, true)],
            &CompactOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(s.version, before_version + 1, "one commit");
    assert_eq!((s.files_removed, s.rows_rewritten), (4, 4), "{s:?}");
    assert_eq!(
        t.schema()
            .unwrap()
            .field_with_name("n")
            .unwrap()
            .data_type(),
        &DataType::Int64
    );
    assert_eq!(rows(&uri).await, before_rows, "values survive the widening");
    // Every live file now stores the new type, so any Delta reader agrees with the schema.
    let root = dir.path().join("t");
    for f in t.files().unwrap() {
        assert!(!old_files.contains(&f.path));
        let file = std::fs::File::open(root.join(&f.path)).unwrap();
        let reader =
            deltalite::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                .unwrap();
        assert_eq!(
            reader.schema().field_with_name("n").unwrap().data_type(),
            &DataType::Int64
        );
    }

    // Narrowing a value that does not fit fails and commits nothing.
    let v = t.version();
    let big = batch(vec![
        ("id", Arc::new(Int64Array::from(vec![99])) as ArrayRef),
        ("day", strings(&[Some("d1")])),
        ("n", Arc::new(Int64Array::from(vec![i64::MAX])) as ArrayRef),
    ]);
    t.append([Ok(big)], &WriteOptions::default()).await.unwrap();
    let err = t
        .change_column_types(
            &[Field::new("n", DataType::Int32, true)],
            &CompactOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaMismatch, "{err}");
    assert_eq!(t.version(), v + 1);
    let reopened = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
    assert_eq!(reopened.version(), v + 1);
    // Partition columns and unknown columns are refused up front.
    for field in [
        Field::new("day", DataType::LargeUtf8, true),
        Field::new("nope", DataType::Int64, true),
    ] {
        let err = t
            .change_column_types(&[field], &CompactOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::SchemaMismatch, "{err}");
    }
}

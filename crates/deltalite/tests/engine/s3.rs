//! The engine on `s3://` tables, against a real S3-compatible server (moto's standalone
//! server, started by the test on a free loopback port).

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::*;
use deltalite::arrow::array::{Array, ArrayRef, BinaryArray, Int64Array, RecordBatch};
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::compact::CompactOptions;
use deltalite::write::WriteOptions;
use deltalite::{DeltaLiteTable, Knobs, UpsertOptions};
use deltalite_testkit::moto::Moto;
use futures::TryStreamExt;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use rand::{RngCore, SeedableRng};

fn ids_batch(ids: &[i64], day: &str, val: &str) -> RecordBatch {
    batch(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        ("day", strings(&vec![Some(day); ids.len()])),
        ("val", strings(&vec![Some(val); ids.len()])),
    ])
}

/// All rows through the table's own object store (sorted display strings).
async fn s3_rows(t: &DeltaLiteTable) -> Vec<Vec<String>> {
    #[allow(deprecated)]
    use deltalite::parquet::arrow::async_reader::ParquetObjectReader;
    use deltalite::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
    let store = t.delta_table().object_store();
    let mut out = Vec::new();
    for f in t.files().unwrap() {
        #[allow(deprecated)]
        let reader = ParquetObjectReader::new(
            store.clone(),
            object_store::path::Path::from(f.path.as_str()),
        );
        let batches: Vec<RecordBatch> = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .unwrap()
            .build()
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let day = f.partition_values[0].1.clone().unwrap();
        for b in batches {
            for r in 0..b.num_rows() {
                out.push(vec![
                    display(b.column(0), r),
                    day.clone(),
                    display(b.column(1), r),
                ]);
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upserts_on_s3_commit_once_and_race_correctly() {
    let moto = Moto::start("lake");
    let opts = moto.options();
    let uri = "s3://lake/tables/events";

    // The server must honour conditional creates, or concurrent commits could both win.
    let probe = DeltaLiteTable::create(
        "s3://lake/probe",
        opts.clone(),
        &Schema::new(vec![Field::new("x", DataType::Int64, true)]),
        &[],
        HashMap::new(),
    )
    .await
    .unwrap();
    let store = probe.delta_table().object_store();
    let key = object_store::path::Path::from("_delta_log/00000000000000000099.json");
    let create = PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    store
        .put_opts(&key, PutPayload::from_static(b"a"), create.clone())
        .await
        .unwrap();
    let second = store
        .put_opts(&key, PutPayload::from_static(b"b"), create)
        .await;
    assert!(
        matches!(
            second,
            Err(object_store::Error::AlreadyExists { .. })
                | Err(object_store::Error::Precondition { .. })
        ),
        "a second conditional create must lose: {second:?}"
    );

    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("day", DataType::Utf8, true),
        Field::new("val", DataType::Utf8, true),
    ]);
    let mut t = DeltaLiteTable::create(uri, opts.clone(), &schema, &["day".into()], HashMap::new())
        .await
        .unwrap();
    t.append(
        [Ok(ids_batch(&[1, 2, 3], "d1", "a"))],
        &WriteOptions::default(),
    )
    .await
    .unwrap();
    assert!(
        DeltaLiteTable::is_deltatable(uri, opts.clone())
            .await
            .unwrap()
    );

    let mut a = DeltaLiteTable::open(uri, opts.clone()).await.unwrap();
    let mut b = DeltaLiteTable::open(uri, opts.clone()).await.unwrap();
    let s = upsert(
        &mut a,
        &ids_batch(&[2, 4], "d1", "from-a"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!(
        (s.rows_updated, s.rows_inserted, s.files_removed),
        (1, 1, 1)
    );
    // B read the old snapshot: it loses the race, re-plans, and still ends with one row per key.
    let s = upsert(
        &mut b,
        &ids_batch(&[4, 5], "d1", "from-b"),
        &UpsertOptions::new(["id"]),
    )
    .await
    .unwrap();
    assert_eq!(
        (s.replans, s.rows_updated, s.rows_inserted),
        (1, 1, 1),
        "{s:?}"
    );
    let got = s3_rows(&b).await;
    assert_eq!(
        got,
        vec![
            vec!["1", "d1", "a"],
            vec!["2", "d1", "from-a"],
            vec!["3", "d1", "a"],
            vec!["4", "d1", "from-b"],
            vec!["5", "d1", "from-b"],
        ]
    );
}

const MIB: usize = 1024 * 1024;

/// `rows` random (incompressible) blobs of `size` bytes keyed by `ids`.
fn blobs_batch(ids: &[i64], size: usize, rng: &mut rand::rngs::StdRng) -> RecordBatch {
    let blobs: Vec<Vec<u8>> = ids
        .iter()
        .map(|_| {
            let mut blob = vec![0u8; size];
            rng.fill_bytes(&mut blob);
            blob
        })
        .collect();
    batch(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        (
            "blob",
            Arc::new(BinaryArray::from_iter_values(blobs.iter())) as ArrayRef,
        ),
    ])
}

/// Every (id, blob) of the table, read through its own object store.
async fn s3_blobs(t: &DeltaLiteTable) -> std::collections::BTreeMap<i64, Vec<u8>> {
    #[allow(deprecated)]
    use deltalite::parquet::arrow::async_reader::ParquetObjectReader;
    use deltalite::parquet::arrow::async_reader::ParquetRecordBatchStreamBuilder;
    let store = t.delta_table().object_store();
    let mut out = std::collections::BTreeMap::new();
    for f in t.files().unwrap() {
        #[allow(deprecated)]
        let reader = ParquetObjectReader::new(
            store.clone(),
            object_store::path::Path::from(f.path.as_str()),
        );
        let batches: Vec<RecordBatch> = ParquetRecordBatchStreamBuilder::new(reader)
            .await
            .unwrap()
            .build()
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        for b in batches {
            let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            let blobs = b.column(1).as_any().downcast_ref::<BinaryArray>().unwrap();
            for r in 0..b.num_rows() {
                let previous = out.insert(ids.value(r), blobs.value(r).to_vec());
                assert!(previous.is_none(), "id {} stored twice", ids.value(r));
            }
        }
    }
    out
}

/// The one data file of the table: its size and its ETag as S3 reports it (quotes off).
async fn only_file_etag(t: &DeltaLiteTable) -> (u64, String) {
    let files = t.files().unwrap();
    assert_eq!(files.len(), 1, "expected one data file: {files:?}");
    let meta = t
        .delta_table()
        .object_store()
        .head(&object_store::path::Path::from(files[0].path.as_str()))
        .await
        .unwrap();
    let etag = meta.e_tag.expect("S3 reports an ETag");
    (meta.size, etag.trim_matches('"').to_string())
}

/// An upsert's output file follows the call's multipart knobs on S3: above a small
/// threshold it is a multipart upload (S3's ETag for one ends in `-<number of parts>`)
/// with parts of the call's size; under the default 64 MiB threshold the same kind of
/// file goes up in one PUT (a plain MD5 ETag), and so does a compaction's. Without the
/// engine's store wrapper all three would be multipart uploads of delta-rs's fixed 5 MiB
/// parts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_outputs_follow_the_calls_multipart_threshold_and_part_size() {
    let moto = Moto::start("parts");
    let opts = moto.options();
    let uri = "s3://parts/tables/blobs";
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("blob", DataType::Binary, true),
    ]);
    let mut t = DeltaLiteTable::create(uri, opts.clone(), &schema, &[], HashMap::new())
        .await
        .unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let ids: Vec<i64> = (0..120).collect();
    // 120 x 128 KiB of random bytes: a 15 MiB file that Snappy cannot shrink.
    let first = blobs_batch(&ids, 128 * 1024, &mut rng);

    let part_size = 7 * MIB;
    let mut small = UpsertOptions::new(["id"]);
    small.knobs.multipart_threshold = 6 * MIB;
    small.knobs.multipart_part_size = part_size;
    let s = upsert(&mut t, &first, &small).await.unwrap();
    assert_eq!(s.rows_inserted, 120);
    let (size, etag) = only_file_etag(&t).await;
    assert!(
        size > 2 * part_size as u64,
        "the file must need several parts: {size}"
    );
    let parts = size.div_ceil(part_size as u64);
    assert!(
        etag.ends_with(&format!("-{parts}")),
        "a {size}-byte file in {part_size}-byte parts must be a {parts}-part upload, ETag {etag}"
    );

    // The same rows again under the default threshold: rewritten in one PUT.
    let defaults = Knobs::default();
    assert!(
        defaults.multipart_threshold as u64 > size,
        "the default threshold ({}) must exceed the file ({size}) for this check",
        defaults.multipart_threshold
    );
    let changed: Vec<i64> = (0..120).step_by(10).collect();
    let second = blobs_batch(&changed, 128 * 1024, &mut rng);
    let s = upsert(&mut t, &second, &UpsertOptions::new(["id"]))
        .await
        .unwrap();
    assert_eq!((s.rows_updated, s.files_removed, s.files_added), (12, 1, 1));
    let (size, etag) = only_file_etag(&t).await;
    assert!(size > 6 * MIB as u64, "{size}");
    assert!(
        !etag.contains('-'),
        "a file under the threshold must go up in one PUT, ETag {etag}"
    );

    // Compaction writes through the same wrapper (with the process defaults): a small
    // appended file and the upserted one merge into one file, still one PUT.
    let third = blobs_batch(&[200, 201, 202], 128 * 1024, &mut rng);
    t.append([Ok(third.clone())], &WriteOptions::default())
        .await
        .unwrap();
    let c = t.compact(&CompactOptions::default()).await.unwrap();
    assert_eq!((c.files_removed, c.files_added), (2, 1), "{c:?}");
    let (size, etag) = only_file_etag(&t).await;
    assert!(size > 6 * MIB as u64, "{size}");
    assert!(
        !etag.contains('-'),
        "a compacted file under the threshold must go up in one PUT, ETag {etag}"
    );

    // Every blob reads back as last written: no part lost, doubled or out of order.
    let mut expected = std::collections::BTreeMap::new();
    for b in [&first, &second, &third] {
        let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let blobs = b.column(1).as_any().downcast_ref::<BinaryArray>().unwrap();
        for r in 0..b.num_rows() {
            expected.insert(ids.value(r), blobs.value(r).to_vec());
        }
    }
    let got = s3_blobs(&DeltaLiteTable::open(uri, opts).await.unwrap()).await;
    assert_eq!(got.len(), expected.len());
    assert!(
        got == expected,
        "table content differs from what was written"
    );
}

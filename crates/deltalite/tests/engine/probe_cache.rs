//! The probe cache: files a probe read in full, and files an upsert wrote from its own
//! rows, are ruled out unread by later upserts (through any handle) when none of their
//! keys is a source key; every answer equals the answer without the cache.

use crate::common;

use std::collections::HashMap;

use common::*;
use deltalite::arrow::datatypes::{DataType, Field, Schema};
use deltalite::runtime::probe_cache::ProbeCache;
use deltalite::write::WriteOptions;
use deltalite::{DeltaLiteTable, UpsertOptions};

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("val", DataType::Utf8, true),
    ])
}

/// Keys that interleave across files, so log min/max statistics rule no file out and
/// every file is a probe candidate: file `f` holds `k{i}{f}` for i in 0..10.
fn file_rows(f: usize, val: &str) -> deltalite::arrow::array::RecordBatch {
    let ids: Vec<String> = (0..10).map(|i| format!("k{i}{f}")).collect();
    let ids: Vec<Option<&str>> = ids.iter().map(|s| Some(s.as_str())).collect();
    batch(vec![
        ("id", strings(&ids)),
        ("val", strings(&vec![Some(val); ids.len()])),
    ])
}

fn one(id: &str, val: &str) -> deltalite::arrow::array::RecordBatch {
    batch(vec![
        ("id", strings(&[Some(id)])),
        ("val", strings(&[Some(val)])),
    ])
}

async fn four_files(dir: &tempfile::TempDir, name: &str) -> String {
    let uri = tmp_uri(dir, name);
    let mut t = create(&uri, &schema(), &[]).await;
    for f in 0..4 {
        t.append([Ok(file_rows(f, "old"))], &WriteOptions::default())
            .await
            .unwrap();
    }
    uri
}

fn options(use_cache: bool) -> UpsertOptions {
    let mut o = UpsertOptions::new(["id"]);
    o.knobs.use_probe_cache = use_cache;
    o
}

#[tokio::test]
async fn cached_files_are_ruled_out_unread_and_the_table_is_the_same() {
    assert!(
        ProbeCache::global().stats().max_bytes > 0,
        "the cache is on by default"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut results = Vec::new();
    for use_cache in [true, false] {
        let uri = four_files(&dir, &format!("t-{use_cache}")).await;
        // A fresh handle per call, as a pipeline opening the table for each batch: what
        // the first probe learned serves the second handle.
        let mut t = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
        let s = upsert(&mut t, &one("k03", "first"), &options(use_cache))
            .await
            .unwrap();
        assert_eq!(
            (s.files_probed, s.files_probe_cached, s.files_removed),
            (4, 0, 1),
            "{use_cache}: {s:?}"
        );
        let mut t = DeltaLiteTable::open(&uri, HashMap::new()).await.unwrap();
        let s = upsert(&mut t, &one("k51", "second"), &options(use_cache))
            .await
            .unwrap();
        if use_cache {
            // Files 0, 2 and 3 were read in full before (file 3 was rewritten since: its
            // new file is unknown); file 1 holds k51, so its hash is a candidate and the
            // file is probed exactly.
            assert_eq!(
                (
                    s.files_probed,
                    s.files_probe_cached,
                    s.files_removed,
                    s.rows_updated
                ),
                (2, 2, 1, 1),
                "{s:?}"
            );
        } else {
            assert_eq!(
                (
                    s.files_probed,
                    s.files_probe_cached,
                    s.files_removed,
                    s.rows_updated
                ),
                (4, 0, 1, 1),
                "{s:?}"
            );
        }
        // Keys in no file but within every file's bounds ("k4a", "k4z" sort between k4f
        // and k5f): with the cache every file a probe read in full is ruled out unread;
        // the two rewritten files (written with bloom filters, which rule the key out
        // without reading it) are probed.
        let two = batch(vec![
            ("id", strings(&[Some("k4a"), Some("k4z")])),
            ("val", strings(&[Some("third"), Some("third")])),
        ]);
        let s = upsert(&mut t, &two, &options(use_cache)).await.unwrap();
        let cached = if use_cache { 2 } else { 0 };
        assert_eq!(
            (s.files_probed, s.files_probe_cached, s.rows_inserted),
            (4 - cached, cached, 2),
            "{use_cache}: {s:?}"
        );
        // The file of those inserts was cached by its writer: a key within its bounds
        // ("k4m") that it does not hold rules it out unread too.
        let s = upsert(&mut t, &one("k4m", "fourth"), &options(use_cache))
            .await
            .unwrap();
        let cached = if use_cache { 3 } else { 0 };
        assert_eq!(
            (s.files_probed, s.files_probe_cached, s.rows_inserted),
            (5 - cached, cached, 1),
            "{use_cache}: {s:?}"
        );
        results.push(common::rows(&uri).await);
    }
    assert_eq!(results[0], results[1], "the cache changes no answer");
    assert_eq!(results[0].len(), 43);
    let stats = ProbeCache::global().stats();
    assert!(
        stats.entries > 0 && stats.inserts > 0 && stats.hits > 0,
        "{stats:?}"
    );
}

/// A file the writer cached is found again by a later probe, also in a partition whose
/// value the log's paths percent-encode (`day=a%20b%2F%C3%BC/...`).
#[tokio::test]
async fn written_files_are_found_again_under_encoded_partition_paths() {
    let dir = tempfile::tempdir().unwrap();
    let uri = tmp_uri(&dir, "t");
    let schema = Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("day", DataType::Utf8, true),
    ]);
    let mut t = create(&uri, &schema, &["day"]).await;
    let rows = |ids: &[&str]| {
        let ids: Vec<Option<&str>> = ids.iter().map(|i| Some(*i)).collect();
        batch(vec![
            ("id", strings(&ids)),
            ("day", strings(&vec![Some("a b/ü"); ids.len()])),
        ])
    };
    let s = upsert(&mut t, &rows(&["k1", "k9"]), &options(true))
        .await
        .unwrap();
    assert_eq!(s.files_added, 1);
    assert!(
        t.files().unwrap()[0]
            .path
            .starts_with("day=a%20b%2F%C3%BC/")
    );
    // "k5" is within the file's bounds and not in it: ruled out from the cache, unread.
    let s = upsert(&mut t, &rows(&["k5"]), &options(true))
        .await
        .unwrap();
    assert_eq!(
        (s.files_probed, s.files_probe_cached, s.rows_inserted),
        (0, 1, 1),
        "{s:?}"
    );
}

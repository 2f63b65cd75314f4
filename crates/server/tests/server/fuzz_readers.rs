//! Property tests of the ingest body decoders: format detection (`Format::detect`) and
//! `open_source` plus the full batch stream, for Parquet, CSV and JSON bodies.
//!
//! Inputs: random bytes, valid bodies mutated by byte flips, truncation and splicing, and
//! hand-made adversarial bodies (deep nesting, huge numbers, invalid UTF-8, ragged CSV,
//! Parquet footers that lie). The property is always the same: the decoder returns `Ok` or
//! a clean error, and never panics (a panic fails the test).
//!
//! The number of cases per property is 256 by default, so the file runs in seconds in a
//! debug build; `PROPTEST_CASES=100000 cargo test -p deltalite-server --test server fuzz_readers`
//! runs a longer campaign.

use std::io::Write;
use std::sync::{Arc, OnceLock};

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Float64Array, Int32Array, Int64Array, ListArray,
    StringArray, StructArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use arrow::record_batch::RecordBatch;
use deltalite_server::ApiError;
use deltalite_server::ingest::{Format, open_source};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use proptest::prelude::*;
use tempfile::NamedTempFile;

/// Rows decoded before a case stops reading: every valid seed is far below this, so a
/// mutated body that decodes to more rows than that has inflated a count.
const MAX_ROWS: usize = 10_000_000;

fn spool(bytes: &[u8]) -> NamedTempFile {
    let mut f = NamedTempFile::new().expect("temp file");
    f.write_all(bytes).expect("write");
    f.flush().expect("flush");
    f
}

/// Decode `bytes` as `format` to the end. Errors must be client errors (400): a decoder
/// that cannot read a body must not report a server fault.
fn decode(bytes: &[u8], format: Format) -> Result<usize, String> {
    let spool = spool(bytes);
    let source = match open_source(spool.path(), format, None) {
        Ok(s) => s,
        Err(e) => return Err(check_clean(e)),
    };
    // Every column of the declared schema can be turned into a table schema.
    let _ = deltalite_server::types::storable_schema(&source.schema);
    let mut rows = 0usize;
    for batch in source.batches {
        match batch {
            Ok(b) => {
                assert_eq!(b.schema().fields().len(), source.schema.fields().len());
                rows += b.num_rows();
                assert!(rows <= MAX_ROWS, "decoded more rows than any seed holds");
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(rows)
}

fn check_clean(e: ApiError) -> String {
    match e {
        ApiError::BadRequest(msg) => {
            assert!(
                msg.starts_with(deltalite_server::ingest::INGEST_ERR),
                "{msg}"
            );
            msg
        }
        other => panic!("a malformed body must be a 400, got {other:?}"),
    }
}

/// Sniffing with no content type, then decoding in the sniffed format.
fn detect_and_decode(bytes: &[u8], content_type: Option<&str>) {
    let spool = spool(bytes);
    let mut file = spool.reopen().expect("reopen");
    let format = Format::detect(content_type, None, &mut file).expect("detect never fails");
    let _ = decode(bytes, format);
}

fn sample_batch() -> RecordBatch {
    let n: i32 = 300;
    let ids: Int64Array = (0..n as i64).collect();
    let names: StringArray = (0..n)
        .map(|i| (i % 7 != 0).then(|| format!("name-{i}-é")))
        .collect();
    let floats: Float64Array = (0..n).map(|i| Some(i as f64 * 0.5 - 3.0)).collect();
    let flags: BooleanArray = (0..n).map(|i| Some(i % 3 == 0)).collect();
    let days: Date32Array = (0..n).map(|i| Some(19_000 + i)).collect();
    let ts = TimestampMicrosecondArray::from_iter_values((0..n as i64).map(|i| i * 1_000_000))
        .with_timezone("UTC");
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>(
        (0..n).map(|i| Some(vec![Some(i), None, Some(i * 2)])),
    );
    let inner: Int32Array = (0..n).map(Some).collect();
    let st = StructArray::from(vec![(
        Arc::new(Field::new("x", DataType::Int32, true)),
        Arc::new(inner) as ArrayRef,
    )]);
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(ids)),
        ("name", Arc::new(names)),
        ("f", Arc::new(floats)),
        ("b", Arc::new(flags)),
        ("d", Arc::new(days)),
        ("ts", Arc::new(ts)),
        ("l", Arc::new(list)),
        ("s", Arc::new(st)),
    ];
    RecordBatch::try_from_iter(columns).expect("batch")
}

/// A valid Parquet file: several row groups, page statistics, dictionary pages.
fn parquet_seed() -> &'static [u8] {
    static SEED: OnceLock<Vec<u8>> = OnceLock::new();
    SEED.get_or_init(|| {
        let batch = sample_batch();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(100))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_data_page_row_count_limit(40)
            .build();
        let mut buf = Vec::new();
        let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props)).expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
        buf
    })
}

fn csv_seed() -> &'static [u8] {
    b"id,name,f,b,d,ts\n\
      1,alpha,1.5,true,2024-01-02,2024-01-02T03:04:05Z\n\
      2,\"be,ta\",-2e3,false,2024-02-29,2024-02-29T00:00:00.123456Z\n\
      3,\"quo\"\"te\",,true,,\n\
      4,\xc3\xa9t\xc3\xa9,1e308,false,1970-01-01,1970-01-01T00:00:00Z\n"
}

fn json_array_seed() -> &'static [u8] {
    br#"[{"id": 1, "name": "a", "f": 1.5, "b": true, "l": [1, 2], "s": {"x": 1}},
 {"id": 2, "name": "b\"q\\", "f": -2e3, "b": false, "l": [], "s": {"x": null}},
 {"id": 3, "name": null, "f": 1e308, "b": null, "l": null, "s": null},
 {"id": 4, "name": "\u00e9\ud83d\ude00", "extra": "new"}]"#
}

fn ndjson_seed() -> &'static [u8] {
    b"{\"id\": 1, \"name\": \"a\", \"v\": [1, 2, 3]}\n\
      {\"id\": 2, \"name\": \"b\", \"v\": []}\n\
      {\"id\": 3, \"o\": {\"p\": {\"q\": \"deep\"}}}\n"
}

/// One mutation of a byte string.
#[derive(Debug, Clone)]
enum Mutation {
    /// XOR the byte at (position fraction) with a mask.
    Flip(f64, u8),
    /// Flip a byte within the last 64 bytes (Parquet footers live there).
    FlipTail(usize, u8),
    /// Keep only the first fraction of the bytes.
    Truncate(f64),
    /// Remove a range.
    Delete(f64, usize),
    /// Insert random bytes at a position.
    Insert(f64, Vec<u8>),
    /// Copy a range of the body over another position (splicing with itself).
    Splice(f64, f64, usize),
    /// Overwrite 4 bytes at a position with an extreme little-endian integer.
    Int(f64, u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let frac = 0.0..1.0f64;
    prop_oneof![
        (frac.clone(), 1..=255u8).prop_map(|(p, m)| Mutation::Flip(p, m)),
        (0..64usize, 1..=255u8).prop_map(|(p, m)| Mutation::FlipTail(p, m)),
        frac.clone().prop_map(Mutation::Truncate),
        (frac.clone(), 1..64usize).prop_map(|(p, n)| Mutation::Delete(p, n)),
        (frac.clone(), proptest::collection::vec(any::<u8>(), 1..32))
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
        (frac.clone(), frac.clone(), 1..256usize).prop_map(|(a, b, n)| Mutation::Splice(a, b, n)),
        (
            frac,
            prop_oneof![
                Just(0u32),
                Just(u32::MAX),
                Just(i32::MAX as u32),
                Just(0x8000_0000u32),
                any::<u32>()
            ]
        )
            .prop_map(|(p, v)| Mutation::Int(p, v)),
    ]
}

fn at(len: usize, frac: f64) -> usize {
    ((len as f64) * frac) as usize
}

fn apply(mut b: Vec<u8>, m: &Mutation) -> Vec<u8> {
    let len = b.len();
    if len == 0 {
        return b;
    }
    match m {
        Mutation::Flip(p, mask) => {
            let i = at(len, *p).min(len - 1);
            b[i] ^= mask;
        }
        Mutation::FlipTail(p, mask) => {
            let i = len - 1 - (*p).min(len - 1);
            b[i] ^= mask;
        }
        Mutation::Truncate(p) => b.truncate(at(len, *p)),
        Mutation::Delete(p, n) => {
            let i = at(len, *p).min(len - 1);
            let end = (i + n).min(len);
            b.drain(i..end);
        }
        Mutation::Insert(p, bytes) => {
            let i = at(len, *p);
            b.splice(i..i, bytes.iter().copied());
        }
        Mutation::Splice(src, dst, n) => {
            let s = at(len, *src).min(len - 1);
            let d = at(len, *dst).min(len - 1);
            let n = (*n).min(len - s).min(len - d);
            let chunk = b[s..s + n].to_vec();
            b[d..d + n].copy_from_slice(&chunk);
        }
        Mutation::Int(p, v) => {
            let i = at(len, *p).min(len.saturating_sub(4));
            let end = (i + 4).min(len);
            b[i..end].copy_from_slice(&v.to_le_bytes()[..end - i]);
        }
    }
    b
}

fn mutated(seed: &'static [u8]) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(mutation(), 1..6)
        .prop_map(move |ms| ms.iter().fold(seed.to_vec(), apply))
}

fn config() -> ProptestConfig {
    // `PROPTEST_CASES` in the environment overrides this default.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const FORMATS: [Format; 3] = [Format::Parquet, Format::Csv, Format::Json];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_bytes_in_every_format(body in proptest::collection::vec(any::<u8>(), 0..2048)) {
        for f in FORMATS {
            let _ = decode(&body, f);
        }
        detect_and_decode(&body, None);
    }

    #[test]
    fn random_text_in_every_format(body in "[a-z0-9,\"\\[\\]{}:\n\r\t \\\\.eE+-]{0,512}") {
        for f in FORMATS {
            let _ = decode(body.as_bytes(), f);
        }
    }

    #[test]
    fn random_bytes_behind_magic(body in proptest::collection::vec(any::<u8>(), 0..1024)) {
        // Starts and ends like Parquet, so the footer parser runs on random bytes.
        let mut b = b"PAR1".to_vec();
        b.extend_from_slice(&body);
        b.extend_from_slice(&(body.len() as u32 / 2).to_le_bytes());
        b.extend_from_slice(b"PAR1");
        let _ = decode(&b, Format::Parquet);
        detect_and_decode(&b, None);
    }

    #[test]
    fn mutated_parquet(body in mutated(parquet_seed())) {
        let _ = decode(&body, Format::Parquet);
    }

    #[test]
    fn mutated_csv(body in mutated(csv_seed())) {
        let _ = decode(&body, Format::Csv);
        detect_and_decode(&body, Some("text/csv"));
    }

    #[test]
    fn mutated_json_array(body in mutated(json_array_seed())) {
        let _ = decode(&body, Format::Json);
        detect_and_decode(&body, None);
    }

    #[test]
    fn mutated_ndjson(body in mutated(ndjson_seed())) {
        let _ = decode(&body, Format::Json);
    }

    #[test]
    fn content_types_never_fail_detection(ct in "\\PC{0,64}", hint in "\\PC{0,16}") {
        let spool = spool(b"a\n1\n");
        let mut file = spool.reopen().expect("reopen");
        prop_assert!(Format::detect(Some(&ct), Some(&hint), &mut file).is_ok());
    }
}

#[test]
fn seeds_decode() {
    assert_eq!(decode(parquet_seed(), Format::Parquet), Ok(300));
    assert_eq!(decode(csv_seed(), Format::Csv), Ok(4));
    assert_eq!(decode(json_array_seed(), Format::Json), Ok(4));
    assert_eq!(decode(ndjson_seed(), Format::Json), Ok(3));
}

#[test]
fn deeply_nested_json() {
    for depth in [100usize, 1_000, 100_000] {
        let mut s = String::from("[{\"a\": ");
        s.push_str(&"[".repeat(depth));
        s.push_str(&"]".repeat(depth));
        s.push_str("}]");
        assert!(decode(s.as_bytes(), Format::Json).is_err() || depth <= 100);
        let mut o = String::from("{\"a\": ");
        o.push_str(&"{\"b\": ".repeat(depth));
        o.push('1');
        o.push_str(&"}".repeat(depth));
        o.push('}');
        let _ = decode(o.as_bytes(), Format::Json);
        // Unbalanced: only openers.
        let _ = decode("[".repeat(depth).as_bytes(), Format::Json);
        let _ = decode("{\"a\":[".repeat(depth).as_bytes(), Format::Json);
    }
}

#[test]
fn huge_numbers_and_odd_values() {
    for body in [
        r#"[{"a": 1e999999}]"#.to_string(),
        r#"[{"a": -1e999999}]"#.to_string(),
        format!(r#"[{{"a": {}}}]"#, "9".repeat(100_000)),
        format!(r#"[{{"a": 0.{}1}}]"#, "0".repeat(100_000)),
        r#"[{"a": 18446744073709551616}, {"a": -9223372036854775809}]"#.to_string(),
        r#"[{"a": 1}, {"a": 1.5}, {"a": "x"}, {"a": true}, {"a": [1]}, {"a": {"b": 1}}]"#
            .to_string(),
        r#"[{"a": NaN}, {"a": Infinity}]"#.to_string(),
        r#"[{"": 1, "": 2}]"#.to_string(),
        r#"[{"a": "\ud800"}]"#.to_string(),
        r#"[{"a": "\u0000"}]"#.to_string(),
        "[{}, {}, {}]".to_string(),
        "[]".to_string(),
        "[1, 2]".to_string(),
        "[{\"a\": 1}] trailing".to_string(),
        "\u{feff}[{\"a\": 1}]".to_string(),
    ] {
        let _ = decode(body.as_bytes(), Format::Json);
    }
    for body in [
        format!("a\n{}\n", "9".repeat(100_000)),
        "a\n1e999999\n-1e999999\n".to_string(),
        "a\n9223372036854775808\n".to_string(),
        "a,b\n1,2000-13-45\n".to_string(),
        "a\n2024-01-01T25:61:61Z\n".to_string(),
    ] {
        let _ = decode(body.as_bytes(), Format::Csv);
    }
}

#[test]
fn invalid_utf8() {
    let bodies: [&[u8]; 6] = [
        b"a,b\n\xff\xfe,1\n",
        b"\xff\xfe\xfd\n1\n",
        b"[{\"a\": \"\xff\xfe\"}]",
        b"{\"\xc3\x28\": 1}\n",
        b"a\n\xed\xa0\x80\n",
        b"\x00\x00\x00\x00",
    ];
    for body in bodies {
        for f in FORMATS {
            let _ = decode(body, f);
        }
    }
}

#[test]
fn ragged_and_quoted_csv() {
    for body in [
        "a,b\n1,2,3\n",
        "a,b,c\n1\n",
        "a,b\n1,2\n3\n4,5,6,7\n",
        "a,b\n\"unterminated,2\n",
        "a,b\n\"x\"\"y,2\n",
        "a,b\n\"x\"y\",2\n",
        "\"a\nb\",c\n1,2\n",
        "a,a,a\n1,2,3\n",
        ",,\n1,2,3\n",
        "\n\n\n",
        "a\r\n1\r\n2\r",
        "a\n\"",
        "\"",
        "a,b\n1,2\n",
    ] {
        let _ = decode(body.as_bytes(), Format::Csv);
    }
    // A very wide header and a very long field.
    let wide = (0..20_000)
        .map(|i| format!("c{i}"))
        .collect::<Vec<_>>()
        .join(",");
    let _ = decode(format!("{wide}\n1\n").as_bytes(), Format::Csv);
    let _ = decode(
        format!("a\n\"{}\"\n", "x".repeat(1 << 20)).as_bytes(),
        Format::Csv,
    );
}

/// The footer of a Parquet file is `metadata ‖ len (u32 LE) ‖ "PAR1"`.
fn with_footer_len(mut b: Vec<u8>, len: u32) -> Vec<u8> {
    let n = b.len();
    b[n - 8..n - 4].copy_from_slice(&len.to_le_bytes());
    b
}

#[test]
fn parquet_footer_lies() {
    let seed = parquet_seed().to_vec();
    let n = seed.len() as u32;
    let real = u32::from_le_bytes(seed[seed.len() - 8..seed.len() - 4].try_into().unwrap());
    for len in [
        0,
        1,
        real - 1,
        real + 1,
        n - 8,
        n - 7,
        n,
        n + 1,
        u32::MAX / 2,
        u32::MAX,
    ] {
        assert!(
            decode(&with_footer_len(seed.clone(), len), Format::Parquet).is_err(),
            "footer length {len}"
        );
    }
    // Footers only, and tiny files.
    for body in [
        &b"PAR1"[..],
        b"PAR1PAR1",
        b"PAR1\x00\x00\x00\x00PAR1",
        b"PAR1\xff\xff\xff\xffPAR1",
        b"\x00\x00\x00\x00PAR1",
    ] {
        assert!(decode(body, Format::Parquet).is_err());
    }
}

/// Thrift compact-protocol varints of the footer's `num_rows` fields, rewritten to a huge
/// value: find the encoded row counts and replace them in place when the widths allow.
#[test]
fn parquet_huge_declared_row_counts() {
    let seed = parquet_seed().to_vec();
    let footer_len =
        u32::from_le_bytes(seed[seed.len() - 8..seed.len() - 4].try_into().unwrap()) as usize;
    let start = seed.len() - 8 - footer_len;
    // Row groups hold 100 rows (zigzag varint 200 = 0xC8 0x01), the file 300 (0xD8 0x04).
    let patterns: [&[u8]; 2] = [&[0xC8, 0x01], &[0xD8, 0x04]];
    let mut tried = 0;
    for pat in patterns {
        for i in start..seed.len() - 9 {
            if &seed[i..i + 2] == pat {
                for repl in [[0xFE, 0x7F], [0xFF, 0x7F], [0x80, 0x00], [0x01, 0x00]] {
                    let mut b = seed.clone();
                    b[i..i + 2].copy_from_slice(&repl);
                    let _ = decode(&b, Format::Parquet);
                    tried += 1;
                }
            }
        }
    }
    assert!(tried > 0, "no row-count fields found in the footer");
    // A footer whose varints are all maximal.
    let mut b = seed.clone();
    for byte in &mut b[start..seed.len() - 8] {
        if *byte & 0x80 != 0 {
            *byte = 0xFF;
        }
    }
    let _ = decode(&b, Format::Parquet);
}

/// Body halves of two different valid files glued together.
#[test]
fn cross_format_splices() {
    let seeds = [parquet_seed(), csv_seed(), json_array_seed(), ndjson_seed()];
    for a in seeds {
        for b in seeds {
            for cut in [1usize, 4, 8, 64] {
                let mut body = a[..a.len().saturating_sub(cut)].to_vec();
                body.extend_from_slice(&b[b.len().min(cut)..]);
                for f in FORMATS {
                    let _ = decode(&body, f);
                }
                let mut body = a[..a.len().min(cut)].to_vec();
                body.extend_from_slice(b);
                for f in FORMATS {
                    let _ = decode(&body, f);
                }
            }
        }
    }
}

#[test]
fn schema_is_fine_for_every_valid_seed() {
    let spool = spool(parquet_seed());
    let source = open_source(spool.path(), Format::Parquet, None).expect("open");
    let storable = deltalite_server::types::storable_schema(&source.schema);
    assert_eq!(storable.fields().len(), 8);
    let _: &Schema = &storable;
}

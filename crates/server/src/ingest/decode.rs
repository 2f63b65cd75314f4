//! Body formats: detection, and decoding into Arrow batches (panic-guarded readers).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use deltalite::DeltaLiteError;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tempfile::NamedTempFile;

use crate::error::{ApiError, ApiResult};

use super::{bad, io_err};
use crate::spool::spool_file;

/// File formats the server reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Apache Parquet.
    Parquet,
    /// CSV with a header row.
    Csv,
    /// A JSON array of objects, or NDJSON.
    Json,
}

impl Format {
    fn from_hint(s: &str) -> Option<Self> {
        let s = s
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match s.as_str() {
            "parquet"
            | "application/parquet"
            | "application/x-parquet"
            | "application/vnd.apache.parquet" => Some(Self::Parquet),
            "csv" | "text/csv" | "application/csv" => Some(Self::Csv),
            "json"
            | "jsonl"
            | "ndjson"
            | "application/json"
            | "application/x-ndjson"
            | "application/jsonl" => Some(Self::Json),
            other if other.ends_with("+json") => Some(Self::Json),
            _ => None,
        }
    }

    /// Content type first, then the legacy `format=` hint, then the bytes themselves.
    pub fn detect(
        content_type: Option<&str>,
        hint: Option<&str>,
        file: &mut File,
    ) -> ApiResult<Self> {
        if let Some(f) = content_type.and_then(Self::from_hint) {
            return Ok(f);
        }
        if let Some(f) = hint.and_then(Self::from_hint) {
            return Ok(f);
        }
        let mut head = [0u8; 512];
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        let n = file.read(&mut head).map_err(io_err)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        if head[..n].starts_with(b"PAR1") {
            return Ok(Self::Parquet);
        }
        let first = head[..n]
            .iter()
            .copied()
            .find(|b| !(b.is_ascii_whitespace() || *b == 0xEF || *b == 0xBB || *b == 0xBF));
        Ok(match first {
            Some(b'{') | Some(b'[') => Self::Json,
            _ => Self::Csv,
        })
    }
}

/// Rewrite a JSON array of objects as NDJSON, streaming, so arrow-json can read it.
/// NDJSON input is copied as it is.
/// `schema`'s columns in the order their keys first appear in the NDJSON `lines` (arrow's
/// inference parses objects into sorted maps, which would sort a new table's columns).
fn in_written_order(
    schema: arrow::datatypes::Schema,
    lines: impl std::io::BufRead,
) -> ApiResult<arrow::datatypes::Schema> {
    use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};

    /// Appends an object's keys not seen before, skipping the values.
    struct Keys<'a>(&'a mut Vec<String>);
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                if !self.0.contains(&key) {
                    self.0.push(key);
                }
            }
            Ok(())
        }
    }

    let mut order: Vec<String> = Vec::new();
    for line in lines.lines() {
        let line = line.map_err(io_err)?;
        if line.trim().is_empty() {
            continue;
        }
        serde_json::Deserializer::from_str(&line)
            .deserialize_map(Keys(&mut order))
            .map_err(|e| bad(format!("invalid JSON: {e}")))?;
        if order.len() == schema.fields().len() {
            break;
        }
    }
    let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
    fields.sort_by_key(|f| {
        order
            .iter()
            .position(|k| k == f.name())
            .unwrap_or(usize::MAX)
    });
    Ok(arrow::datatypes::Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    ))
}

fn json_to_ndjson(src: &mut File, dir: Option<&Path>) -> ApiResult<NamedTempFile> {
    let out = spool_file(dir).map_err(io_err)?;
    src.seek(SeekFrom::Start(0)).map_err(io_err)?;
    let mut reader = BufReader::new(&mut *src);
    let mut writer = BufWriter::new(out.reopen().map_err(io_err)?);
    let mut buf = [0u8; 64 * 1024];
    // State: before the first significant byte we decide array vs NDJSON.
    let mut mode: Option<bool> = None; // Some(true) = array
    let mut depth: usize = 0;
    let mut in_string = false;
    let mut escaped = false;
    let mut closed = false;
    loop {
        let n = reader.read(&mut buf).map_err(io_err)?;
        if n == 0 {
            break;
        }
        for &b in &buf[..n] {
            if mode.is_none() {
                if b.is_ascii_whitespace() || b == 0xEF || b == 0xBB || b == 0xBF {
                    continue;
                }
                if b == b'[' {
                    mode = Some(true);
                    depth = 1;
                    continue;
                }
                mode = Some(false);
            }
            if mode == Some(false) {
                writer.write_all(&[b]).map_err(io_err)?;
                continue;
            }
            if in_string {
                writer.write_all(&[b]).map_err(io_err)?;
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                }
                continue;
            }
            if closed {
                if !b.is_ascii_whitespace() {
                    return Err(bad("invalid JSON: data after the closing ']'"));
                }
                continue;
            }
            match (depth, b) {
                (1, b) if b.is_ascii_whitespace() || b == b',' => {}
                (1, b']') => {
                    closed = true;
                    depth = 0;
                }
                (1, b'{') => {
                    depth = 2;
                    writer.write_all(b"{").map_err(io_err)?;
                }
                (1, _) => return Err(bad("invalid JSON: array elements must be objects")),
                (_, b'"') => {
                    in_string = true;
                    writer.write_all(&[b]).map_err(io_err)?;
                }
                (_, b'{') | (_, b'[') => {
                    depth += 1;
                    writer.write_all(&[b]).map_err(io_err)?;
                }
                (_, b'}') | (_, b']') => {
                    depth -= 1;
                    writer.write_all(&[b]).map_err(io_err)?;
                    if depth == 1 {
                        writer.write_all(b"\n").map_err(io_err)?;
                    }
                }
                _ => writer.write_all(&[b]).map_err(io_err)?,
            }
        }
    }
    if mode == Some(true) && !closed {
        return Err(bad("invalid JSON: unterminated array"));
    }
    writer.flush().map_err(io_err)?;
    Ok(out)
}

/// Run a decoder step, turning a panic into an error message. The Arrow and Parquet
/// readers can panic on malformed input (a corrupt run length in a data page, found by
/// `tests/fuzz_readers.rs`); for a client's body that is a bad request, not a server fault.
fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
        let detail = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown failure".into());
        tracing::warn!(%detail, "{what}: reader panicked on malformed input");
        format!("{what}: the reader failed on malformed data ({detail})")
    })
}

/// A batch iterator whose panics become one error item, after which it ends (the reader's
/// state is unknown after a panic).
fn guard_batches(
    what: &'static str,
    mut inner: impl Iterator<Item = deltalite::Result<RecordBatch>> + Send + 'static,
) -> Box<dyn Iterator<Item = deltalite::Result<RecordBatch>> + Send> {
    let mut failed = false;
    Box::new(std::iter::from_fn(move || {
        if failed {
            return None;
        }
        match guarded(what, || inner.next()) {
            Ok(item) => item,
            Err(msg) => {
                failed = true;
                Some(Err(DeltaLiteError::SchemaMismatch(msg)))
            }
        }
    }))
}

/// Decode a spooled Parquet body to the end (panic-guarded) without keeping anything: a
/// file the engine may store as it is must be readable, or every later read of the table
/// would fail on it. Row groups are decoded in parallel, one reader per core, on blocking
/// threads (not the async workers); memory is one decoded batch per thread.
pub async fn validate_parquet(path: &Path) -> ApiResult<()> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || validate_parquet_file(&path))
        .await
        .map_err(|e| ApiError::Internal(format!("Parquet validation task failed: {e}")))?
}

fn validate_parquet_file(path: &Path) -> ApiResult<()> {
    const WHAT: &str = "not a readable Parquet file";
    let reader = |row_groups: Option<Vec<usize>>| -> ApiResult<_> {
        let file = File::open(path).map_err(io_err)?;
        guarded(WHAT, || {
            let mut builder = ParquetRecordBatchReaderBuilder::try_new(file)?.with_batch_size(8192);
            let row_group_count = builder.metadata().num_row_groups();
            if let Some(groups) = row_groups {
                builder = builder.with_row_groups(groups);
            }
            Ok::<_, parquet::errors::ParquetError>((row_group_count, builder.build()?))
        })
        .map_err(bad)?
        .map_err(|e| bad(format!("{WHAT}: {e}")))
    };
    let (row_groups, _) = reader(Some(Vec::new()))?;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, row_groups.max(1));
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                scope.spawn(move || -> ApiResult<()> {
                    let groups: Vec<usize> = (worker..row_groups).step_by(threads).collect();
                    let (_, batches) = reader(Some(groups))?;
                    let batches = guard_batches(WHAT, batches.map(|b| b.map_err(Into::into)));
                    for batch in batches {
                        batch.map_err(|e| bad(format!("{WHAT}: {e}")))?;
                    }
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|worker| {
            worker
                .join()
                .map_err(|_| bad(format!("{WHAT}: the reader failed on malformed data")))?
        })
    })
}

/// A decoded source: schema plus a streaming batch iterator.
pub struct Source {
    /// Schema of the file.
    pub schema: SchemaRef,
    /// Batches, decoded lazily.
    pub batches: Box<dyn Iterator<Item = deltalite::Result<RecordBatch>> + Send>,
    /// Kept alive so a converted spool file outlives the reader.
    _spool: Option<NamedTempFile>,
}

/// Open a file (a spooled body, or the CLI's input file) in the given format; `dir` is
/// where a JSON array's NDJSON copy is written.
pub fn open_source(path: &Path, format: Format, dir: Option<&Path>) -> ApiResult<Source> {
    let file = File::open(path).map_err(io_err)?;
    match format {
        Format::Parquet => {
            let (schema, reader) = guarded("not a readable Parquet file", || {
                let builder = ParquetRecordBatchReaderBuilder::try_new(file)?;
                let schema = Arc::clone(builder.schema());
                Ok::<_, parquet::errors::ParquetError>((
                    schema,
                    builder.with_batch_size(8192).build()?,
                ))
            })
            .map_err(bad)?
            .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
            Ok(Source {
                schema,
                batches: guard_batches(
                    "invalid Parquet",
                    reader.map(|b| b.map_err(DeltaLiteError::from)),
                ),
                _spool: None,
            })
        }
        Format::Csv => {
            let mut file = file;
            let format = arrow_csv::reader::Format::default().with_header(true);
            let (schema, _) = format
                .infer_schema(BufReader::new(&mut file), None)
                .map_err(|e| bad(format!("invalid CSV: {e}")))?;
            if schema.fields().is_empty() {
                return Err(bad("invalid CSV: no header row"));
            }
            file.seek(SeekFrom::Start(0)).map_err(io_err)?;
            let schema = Arc::new(schema);
            let reader = arrow_csv::ReaderBuilder::new(Arc::clone(&schema))
                .with_header(true)
                .with_batch_size(8192)
                .build(BufReader::new(file))
                .map_err(|e| bad(format!("invalid CSV: {e}")))?;
            Ok(Source {
                schema,
                batches: guard_batches(
                    "invalid CSV",
                    reader.map(|b| {
                        b.map_err(|e| DeltaLiteError::SchemaMismatch(format!("invalid CSV: {e}")))
                    }),
                ),
                _spool: None,
            })
        }
        Format::Json => {
            let mut file = file;
            let nd = json_to_ndjson(&mut file, dir)?;
            let mut nd_file = nd.reopen().map_err(io_err)?;
            let (schema, _) = arrow_json::reader::infer_json_schema_from_seekable(
                BufReader::new(&mut nd_file),
                None,
            )
            .map_err(|e| bad(format!("invalid JSON: {e}")))?;
            if schema.fields().is_empty() {
                return Err(bad("invalid JSON: no objects with fields"));
            }
            nd_file.seek(SeekFrom::Start(0)).map_err(io_err)?;
            let schema = in_written_order(schema, BufReader::new(&mut nd_file))?;
            nd_file.seek(SeekFrom::Start(0)).map_err(io_err)?;
            let schema = Arc::new(schema);
            let reader = arrow_json::ReaderBuilder::new(Arc::clone(&schema))
                .with_batch_size(8192)
                .build(BufReader::new(nd_file))
                .map_err(|e| bad(format!("invalid JSON: {e}")))?;
            Ok(Source {
                schema,
                batches: guard_batches(
                    "invalid JSON",
                    reader.map(|b| {
                        b.map_err(|e| DeltaLiteError::SchemaMismatch(format!("invalid JSON: {e}")))
                    }),
                ),
                _spool: Some(nd),
            })
        }
    }
}

//! The console's results: a statement runs once and its result is spooled to an Arrow
//! IPC file on the server; the page then reads it page by page as the user scrolls (and
//! downloads it as CSV or Parquet), so every page comes from the same execution, the
//! browser holds only the pages on screen, and a statement with side effects never runs
//! twice.
//!
//! Bounded: a few results per user and in all (oldest out), each up to
//! [`MAX_RESULT_BYTES`] on disk (a longer result is cut there and says so), dropped an
//! hour after it was made. A result's file is deleted when it leaves the store.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow::record_batch::RecordBatch;

use crate::error::ApiError;
use crate::spool::spool_file;

/// Results kept per user.
pub const MAX_RESULTS_PER_USER: usize = 4;
/// Results kept in all.
pub const MAX_RESULTS: usize = 64;
/// Spooled bytes one result may take (Arrow IPC); past it the result is cut.
pub const MAX_RESULT_BYTES: usize = 1024 * deltalite::MIB;
/// How long a result is kept.
pub const RESULT_TTL: Duration = Duration::from_secs(3600);
/// Rows one page request answers at most.
pub const MAX_PAGE_ROWS: usize = 5_000;

/// A result being written.
pub struct Spooler {
    writer: FileWriter<File>,
    file: tempfile::NamedTempFile,
    schema: SchemaRef,
    starts: Vec<u64>,
    rows: u64,
    bytes: usize,
    truncated: bool,
}

impl Spooler {
    /// A new spool file (in `dir`, else the system's temporary folder) for `schema`.
    pub fn new(dir: Option<&std::path::Path>, schema: SchemaRef) -> Result<Self, ApiError> {
        let spool_err = |e: &dyn std::fmt::Display| ApiError::Internal(format!("spool: {e}"));
        let file = spool_file(dir).map_err(|e| spool_err(&e))?;
        let handle = file.reopen().map_err(|e| spool_err(&e))?;
        let writer = FileWriter::try_new(handle, &schema).map_err(|e| spool_err(&e))?;
        Ok(Self {
            writer,
            file,
            schema,
            starts: Vec::new(),
            rows: 0,
            bytes: 0,
            truncated: false,
        })
    }

    /// Add a batch; `false` when the result is full (the batch was not added).
    pub fn push(&mut self, batch: &RecordBatch) -> Result<bool, ApiError> {
        if batch.num_rows() == 0 {
            return Ok(true);
        }
        let size = batch.get_array_memory_size();
        if self.bytes.saturating_add(size) > MAX_RESULT_BYTES {
            self.truncated = true;
            return Ok(false);
        }
        self.writer
            .write(batch)
            .map_err(|e| ApiError::Internal(format!("spool: {e}")))?;
        self.starts.push(self.rows);
        self.rows += batch.num_rows() as u64;
        self.bytes += size;
        Ok(true)
    }

    /// The finished result of `user`.
    pub fn finish(mut self, user: &str) -> Result<Spooled, ApiError> {
        self.writer
            .finish()
            .map_err(|e| ApiError::Internal(format!("spool: {e}")))?;
        Ok(Spooled {
            user: user.to_string(),
            file: self.file,
            schema: self.schema,
            starts: self.starts,
            rows: self.rows,
            truncated: self.truncated,
            made: Instant::now(),
        })
    }
}

/// A finished result.
pub struct Spooled {
    user: String,
    file: tempfile::NamedTempFile,
    schema: SchemaRef,
    /// The first row of each batch.
    starts: Vec<u64>,
    rows: u64,
    truncated: bool,
    made: Instant,
}

impl Spooled {
    /// Rows held.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Whether the result was cut at [`MAX_RESULT_BYTES`].
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The result's schema.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// Rows `offset..offset + limit`, as slices of the batches holding them.
    pub fn read(&self, offset: u64, limit: usize) -> Result<Vec<RecordBatch>, ApiError> {
        let err = |e: &dyn std::fmt::Display| ApiError::Internal(format!("result spool: {e}"));
        let end = offset.saturating_add(limit as u64).min(self.rows);
        if offset >= end {
            return Ok(Vec::new());
        }
        let first = self
            .starts
            .partition_point(|s| *s <= offset)
            .saturating_sub(1);
        let file = self.file.reopen().map_err(|e| err(&e))?;
        let mut reader = FileReader::try_new(file, None).map_err(|e| err(&e))?;
        reader.set_index(first).map_err(|e| err(&e))?;
        let mut out = Vec::new();
        for (i, batch) in (first..).zip(reader.by_ref()) {
            let batch = batch.map_err(|e| err(&e))?;
            let start = self.starts[i];
            if start >= end {
                break;
            }
            let from = offset.saturating_sub(start) as usize;
            let to = ((end - start) as usize).min(batch.num_rows());
            out.push(batch.slice(from, to - from));
        }
        Ok(out)
    }

    /// Every batch, in order (downloads).
    pub fn batches(&self) -> Result<FileReader<File>, ApiError> {
        let err = |e: &dyn std::fmt::Display| ApiError::Internal(format!("result spool: {e}"));
        let file = self.file.reopen().map_err(|e| err(&e))?;
        FileReader::try_new(file, None).map_err(|e| err(&e))
    }
}

/// The results held, by id.
#[derive(Default)]
pub struct Results {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, Arc<Spooled>>,
    /// Ids, oldest first.
    order: VecDeque<String>,
}

impl Results {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A few map operations per update: a poisoned lock holds consistent data.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keep `result`; its id.
    pub fn insert(&self, result: Spooled) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let mut inner = self.lock();
        let now = Instant::now();
        let user = result.user.clone();
        inner.by_id.insert(id.clone(), Arc::new(result));
        inner.order.push_back(id.clone());
        // Out: expired ones, then the user's oldest past their share, then the oldest.
        let mut mine = inner
            .order
            .iter()
            .filter(|i| inner.by_id.get(*i).is_some_and(|r| r.user == user))
            .count();
        let ids: Vec<String> = inner.order.iter().cloned().collect();
        for old in ids {
            let Some(r) = inner.by_id.get(&old) else {
                continue;
            };
            let expired = now.duration_since(r.made) > RESULT_TTL;
            let over_share = r.user == user && mine > MAX_RESULTS_PER_USER;
            let over_all = inner.by_id.len() > MAX_RESULTS;
            if old != id && (expired || over_share || over_all) {
                if r.user == user {
                    mine -= 1;
                }
                inner.by_id.remove(&old);
                inner.order.retain(|i| *i != old);
            }
        }
        id
    }

    /// The result `id` of `user` (another user's is answered as missing).
    pub fn get(&self, id: &str, user: &str) -> Option<Arc<Spooled>> {
        let inner = self.lock();
        inner
            .by_id
            .get(id)
            .filter(|r| r.user == user && r.made.elapsed() <= RESULT_TTL)
            .cloned()
    }

    /// Results held (for `/metrics`).
    pub fn len(&self) -> usize {
        self.lock().by_id.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    /// A result of `user` whose batches hold the values `start..end` of each pair.
    fn spooled(user: &str, batches: &[(i64, i64)]) -> Spooled {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let mut s = Spooler::new(None, Arc::clone(&schema)).expect("spool");
        for &(start, end) in batches {
            let batch = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::new(Int64Array::from_iter_values(start..end))],
            )
            .expect("batch");
            assert!(s.push(&batch).expect("push"));
        }
        s.finish(user).expect("finish")
    }

    fn values(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .expect("ints")
                    .values()
                    .to_vec()
            })
            .collect()
    }

    #[test]
    fn pages_cross_batch_boundaries() {
        let r = spooled("a", &[(0, 3), (3, 10), (10, 11), (11, 20)]);
        assert_eq!(r.rows(), 20);
        assert_eq!(
            values(&r.read(0, 5).expect("read")),
            (0..5).collect::<Vec<_>>()
        );
        assert_eq!(
            values(&r.read(2, 9).expect("read")),
            (2..11).collect::<Vec<_>>()
        );
        assert_eq!(values(&r.read(10, 1).expect("read")), vec![10]);
        assert_eq!(
            values(&r.read(15, 100).expect("read")),
            (15..20).collect::<Vec<_>>()
        );
        assert!(r.read(20, 5).expect("read").is_empty());
    }

    #[test]
    fn results_are_their_users_and_bounded_per_user() {
        let store = Results::default();
        let theirs = store.insert(spooled("bob", &[(0, 1)]));
        let mine: Vec<String> = (0..MAX_RESULTS_PER_USER + 2)
            .map(|_| store.insert(spooled("alice", &[(0, 1)])))
            .collect();
        assert!(store.get(&theirs, "alice").is_none());
        assert!(store.get(&theirs, "bob").is_some());
        // Alice's two oldest are gone, Bob's stays.
        assert!(store.get(&mine[0], "alice").is_none());
        assert!(store.get(&mine[1], "alice").is_none());
        assert!(mine[2..].iter().all(|id| store.get(id, "alice").is_some()));
        assert_eq!(store.len(), MAX_RESULTS_PER_USER + 1);
    }
}

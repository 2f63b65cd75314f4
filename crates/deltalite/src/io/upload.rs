//! The call's multipart knobs applied to output files on object stores.
//!
//! delta-rs's `PartitionWriter` (see `writer.rs`) uploads each output file through
//! `object_store::buffered::BufWriter`, whose buffer is a process-wide size
//! (`DELTARS_UPLOAD_PART_SIZE`, 5 MiB): a file up to that size goes up in one PUT, a
//! larger one always becomes a multipart upload of buffer-sized parts. Neither the call's
//! `multipart_threshold` nor its `multipart_part_size` reaches it. So the writer is handed
//! a [`ThresholdStore`]: it delegates everything to the table's store except
//! `put_multipart_opts`, whose upload re-chunks and defers:
//!
//! - Parts `BufWriter` sends are buffered while the object's bytes so far are below the
//!   threshold; nothing is started. If the object ends below it, `complete` sends the
//!   whole buffer with one PUT (threshold `0`: always one PUT).
//! - Once the bytes reach the threshold, the real multipart upload starts and gets parts of
//!   exactly `part_size` bytes (the last may be smaller).
//!
//! Part numbers are assigned by the order of the inner `put_part` calls (S3 counts them at
//! call time), but the futures this upload returns are polled by `WriteMultipart`'s task
//! set in any order. Each batch of parts therefore takes a ticket when it is cut (in
//! order, synchronously) and is handed to the inner upload only when its ticket comes up;
//! issuing them in poll order would silently reorder the file's bytes.
//!
//! Memory: an open output file holds up to the threshold (plus what `BufWriter` holds)
//! before its first part leaves; [`MultipartPolicy::held_bytes`] is the bound the byte
//! budgets reserve.
//!
//! Local tables are not wrapped (see [`MultipartPolicy::for_table`]).

use std::collections::VecDeque;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, UploadPart,
};
use tokio::sync::{Mutex, watch};
use url::Url;

use crate::options::MIB;
/// S3's (and GCS's) smallest part other than the last.
pub(crate) const MIN_PART_SIZE: usize = 5 * MIB;
/// S3's largest part.
pub(crate) const MAX_PART_SIZE: usize = 5 * 1024 * MIB;

/// The part size the object stores accept for `requested`: parts below 5 MiB are refused
/// by S3 (except the last), so a smaller request is raised, as the process default is.
pub(crate) fn effective_part_size(requested: usize) -> usize {
    requested.clamp(MIN_PART_SIZE, MAX_PART_SIZE)
}

/// The buffer delta-rs's writer fills before it starts a multipart upload, and the size of
/// the parts it then hands over: `DELTARS_UPLOAD_PART_SIZE`, read and clamped the way
/// delta-rs does (5 MiB..5 GiB, default 5 MiB). Objects up to this size never reach the
/// wrapper's upload, so it is also the smallest threshold that can take effect.
pub(crate) fn delta_rs_buffer_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var("DELTARS_UPLOAD_PART_SIZE")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .map_or(MIN_PART_SIZE, effective_part_size)
    })
}

/// When an output file goes up in parts, and how large they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MultipartPolicy {
    threshold: usize,
    part_size: usize,
}

impl MultipartPolicy {
    /// `threshold` `0` means never multipart; `part_size` is clamped to what stores accept.
    pub(crate) fn new(threshold: usize, part_size: usize) -> Self {
        Self {
            threshold,
            part_size: effective_part_size(part_size),
        }
    }

    /// The policy for a table at `url`, or `None` to leave its store as it is. A local
    /// file system has no multipart requests to size and nothing to gain from a single
    /// PUT: its multipart upload already streams parts into a staging file on disk, so
    /// buffering up to the threshold in memory would only cost memory. Every other scheme
    /// (S3, GCS, Azure, `memory://`) is wrapped.
    pub(crate) fn for_table(url: &Url, threshold: usize, part_size: usize) -> Option<Self> {
        (url.scheme() != "file").then(|| Self::new(threshold, part_size))
    }

    /// Upper bound on the upload bytes one open output file holds in memory, for the byte
    /// budgets, given the writer's row group bytes, its upload concurrency and an estimate
    /// of the largest file it writes.
    ///
    /// With `B` = delta-rs's buffer ([`delta_rs_buffer_bytes`]) and `R` = row group bytes:
    /// `BufWriter`'s `WriteMultipart` keeps under `B` of its own. This upload keeps what it
    /// has not cut yet (under the threshold before the start, under one part after) plus
    /// the parts its unresolved futures carry. Before the start every future resolves at
    /// once; `BufWriter` lets at most `concurrency - 1` futures stay unresolved before each
    /// write, and one write (a flushed row group) brings at most `R + B`. A future carries
    /// at most what was pending plus one payload: the one that crosses the threshold under
    /// `threshold + B`, later ones under `part + B`. Summed, at most
    /// `max(threshold, part) + part + (concurrency - 1) * (part + B) + R + 2 * B`.
    ///
    /// A file never holds more than its own size, so the bound is capped by `file_bytes`;
    /// with threshold `0` the whole file is held before its single PUT.
    pub(crate) fn held_bytes(
        &self,
        row_group_bytes: usize,
        concurrency: usize,
        file_bytes: usize,
    ) -> usize {
        if self.threshold == 0 {
            return file_bytes;
        }
        let buffer = delta_rs_buffer_bytes();
        let bound = self
            .threshold
            .max(self.part_size)
            .saturating_add(self.part_size)
            .saturating_add(
                concurrency
                    .saturating_sub(1)
                    .saturating_mul(self.part_size.saturating_add(buffer)),
            )
            .saturating_add(row_group_bytes)
            .saturating_add(buffer.saturating_mul(2));
        bound.min(file_bytes)
    }

    /// `store` with this policy applied to its multipart uploads.
    pub(crate) fn wrap(self, store: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        Arc::new(ThresholdStore {
            inner: store,
            policy: self,
        })
    }
}

/// An object store whose multipart uploads follow a [`MultipartPolicy`]; everything else
/// goes to `inner` unchanged.
#[derive(Debug)]
pub(crate) struct ThresholdStore {
    inner: Arc<dyn ObjectStore>,
    policy: MultipartPolicy,
}

impl fmt::Display for ThresholdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ThresholdStore(threshold={}, part_size={}, {})",
            self.policy.threshold, self.policy.part_size, self.inner
        )
    }
}

type Fut<'a, T> = BoxFuture<'a, object_store::Result<T>>;

// The trait is declared with `async_trait`; these are its desugared signatures (the crate
// does not depend on `async_trait` itself).
impl ObjectStore for ThresholdStore {
    fn put_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Fut<'async_trait, PutResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.put_opts(location, payload, opts)
    }

    fn put_multipart_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        opts: PutMultipartOptions,
    ) -> Fut<'async_trait, Box<dyn MultipartUpload>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        // Nothing is sent yet: whether this becomes a multipart upload at all is decided
        // by the bytes that arrive.
        let upload =
            DeferredUpload::new(Arc::clone(&self.inner), location.clone(), opts, self.policy);
        Box::pin(futures::future::ready(Ok(
            Box::new(upload) as Box<dyn MultipartUpload>
        )))
    }

    fn get_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        options: GetOptions,
    ) -> Fut<'async_trait, GetResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.get_opts(location, options)
    }

    fn get_ranges<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        ranges: &'life2 [Range<u64>],
    ) -> Fut<'async_trait, Vec<Bytes>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.get_ranges(location, ranges)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    fn list_with_delimiter<'life0, 'life1, 'async_trait>(
        &'life0 self,
        prefix: Option<&'life1 Path>,
    ) -> Fut<'async_trait, ListResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.list_with_delimiter(prefix)
    }

    fn copy_opts<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        from: &'life1 Path,
        to: &'life2 Path,
        options: CopyOptions,
    ) -> Fut<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.copy_opts(from, to, options)
    }

    fn rename_opts<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        from: &'life1 Path,
        to: &'life2 Path,
        options: RenameOptions,
    ) -> Fut<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.rename_opts(from, to, options)
    }
}

fn upload_error(message: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "deltalite",
        source: message.into(),
    }
}

/// What the part futures of one upload share: the turn (the ticket whose parts may be
/// handed to the inner upload next) and the inner upload, created by whichever ticket
/// first has parts to send.
struct Sequencer {
    store: Arc<dyn ObjectStore>,
    location: Path,
    turn: watch::Sender<u64>,
    state: Mutex<InnerState>,
}

struct InnerState {
    /// Taken by whichever request goes out: the inner multipart upload or the single PUT.
    opts: Option<PutMultipartOptions>,
    upload: Option<Box<dyn MultipartUpload>>,
    /// Starting the inner upload failed; later tickets fail instead of retrying it.
    failed: bool,
}

impl Sequencer {
    /// Hand `chunks` to the inner upload once every earlier ticket has, then wait for them.
    async fn send(
        self: Arc<Self>,
        ticket: u64,
        chunks: Vec<PutPayload>,
    ) -> object_store::Result<()> {
        let mut turn = self.turn.subscribe();
        // The sender lives in `self`, so it cannot close while this waits.
        if turn.wait_for(|next| *next == ticket).await.is_err() {
            return Err(upload_error("multipart sequencer closed"));
        }
        let parts = {
            let mut state = self.state.lock().await;
            let parts = self.issue(&mut state, chunks).await;
            // Advance even on failure, so later tickets are not left waiting; they see
            // `failed` (or the task set is torn down by the error first). Only a future
            // dropped while it starts the upload leaves the turn where it is, and futures
            // are dropped only when `WriteMultipart` tears down all of them at once.
            self.turn.send_replace(ticket + 1);
            parts?
        };
        // Only the issuing is ordered; the requests themselves run concurrently.
        futures::future::try_join_all(parts).await?;
        Ok(())
    }

    async fn issue(
        &self,
        state: &mut InnerState,
        chunks: Vec<PutPayload>,
    ) -> object_store::Result<Vec<UploadPart>> {
        if state.failed {
            return Err(upload_error("the multipart upload could not be started"));
        }
        let upload = match &mut state.upload {
            Some(upload) => upload,
            None => {
                let opts = state.opts.take().unwrap_or_default();
                match self.store.put_multipart_opts(&self.location, opts).await {
                    Ok(upload) => state.upload.insert(upload),
                    Err(e) => {
                        state.failed = true;
                        return Err(e);
                    }
                }
            }
        };
        Ok(chunks
            .into_iter()
            .map(|chunk| upload.put_part(chunk))
            .collect())
    }
}

/// The upload [`ThresholdStore::put_multipart_opts`] returns.
struct DeferredUpload {
    policy: MultipartPolicy,
    /// Bytes received and not yet cut into a part, in order.
    pending: VecDeque<Bytes>,
    pending_len: usize,
    /// Bytes received in total: the object's size so far.
    received: usize,
    /// The threshold was reached: bytes go out in parts.
    multipart: bool,
    /// Tickets handed out so far (the next one's number).
    tickets: u64,
    sequencer: Arc<Sequencer>,
}

impl fmt::Debug for DeferredUpload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeferredUpload")
            .field("location", &self.sequencer.location)
            .field("policy", &self.policy)
            .field("received", &self.received)
            .field("multipart", &self.multipart)
            .finish()
    }
}

impl DeferredUpload {
    fn new(
        store: Arc<dyn ObjectStore>,
        location: Path,
        opts: PutMultipartOptions,
        policy: MultipartPolicy,
    ) -> Self {
        let (turn, _) = watch::channel(0);
        Self {
            policy,
            pending: VecDeque::new(),
            pending_len: 0,
            received: 0,
            multipart: false,
            tickets: 0,
            sequencer: Arc::new(Sequencer {
                store,
                location,
                turn,
                state: Mutex::new(InnerState {
                    opts: Some(opts),
                    upload: None,
                    failed: false,
                }),
            }),
        }
    }

    /// The first `n` pending bytes (or all, if fewer), without copying.
    fn cut(&mut self, n: usize) -> PutPayload {
        let mut out = Vec::new();
        let mut need = n;
        while need > 0 {
            let Some(mut front) = self.pending.pop_front() else {
                break;
            };
            if front.len() > need {
                out.push(front.split_to(need));
                self.pending.push_front(front);
                need = 0;
            } else {
                need -= front.len();
                out.push(front);
            }
        }
        self.pending_len -= n - need;
        out.into_iter().collect()
    }

    fn take_ticket(&mut self) -> u64 {
        let ticket = self.tickets;
        self.tickets += 1;
        ticket
    }
}

impl MultipartUpload for DeferredUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        for bytes in data {
            if !bytes.is_empty() {
                self.pending_len += bytes.len();
                self.received += bytes.len();
                self.pending.push_back(bytes);
            }
        }
        if !self.multipart && self.policy.threshold > 0 && self.received >= self.policy.threshold {
            self.multipart = true;
        }
        if !self.multipart {
            return Box::pin(futures::future::ready(Ok(())));
        }
        let mut chunks = Vec::new();
        while self.pending_len >= self.policy.part_size {
            chunks.push(self.cut(self.policy.part_size));
        }
        if chunks.is_empty() {
            return Box::pin(futures::future::ready(Ok(())));
        }
        // The ticket is taken here, in call order; the future may be polled in any order.
        let ticket = self.take_ticket();
        Box::pin(Arc::clone(&self.sequencer).send(ticket, chunks))
    }

    fn complete<'life0, 'async_trait>(&'life0 mut self) -> Fut<'async_trait, PutResult>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let rest = self.cut(self.pending_len);
            if !self.multipart {
                let opts = self
                    .sequencer
                    .state
                    .lock()
                    .await
                    .opts
                    .take()
                    .unwrap_or_default();
                let put = PutOptions {
                    tags: opts.tags,
                    attributes: opts.attributes,
                    extensions: opts.extensions,
                    ..Default::default()
                };
                return self
                    .sequencer
                    .store
                    .put_opts(&self.sequencer.location, rest, put)
                    .await;
            }
            if rest.content_length() > 0 {
                let ticket = self.take_ticket();
                Arc::clone(&self.sequencer).send(ticket, vec![rest]).await?;
            }
            // `WriteMultipart::finish` calls this only after every part future resolved,
            // so every ticket has been issued and acknowledged.
            let mut state = self.sequencer.state.lock().await;
            match state.upload.as_mut() {
                Some(upload) => upload.complete().await,
                None => Err(upload_error(
                    "multipart upload completed before any part was sent",
                )),
            }
        })
    }

    fn abort<'life0, 'async_trait>(&'life0 mut self) -> Fut<'async_trait, ()>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            self.pending.clear();
            self.pending_len = 0;
            let upload = self.sequencer.state.lock().await.upload.take();
            match upload {
                Some(mut upload) => upload.abort().await,
                None => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use deltalite_testkit::store::{Fault, Op, Target, TestStore};
    use object_store::ObjectStoreExt;
    use object_store::buffered::BufWriter;
    use tokio::io::AsyncWriteExt;

    use super::*;

    /// A counting store under a [`ThresholdStore`] with `threshold` and `part_size`.
    fn wrapped(threshold: usize, part_size: usize) -> (Arc<dyn ObjectStore>, Arc<TestStore>) {
        let counting = TestStore::memory();
        let inner: Arc<dyn ObjectStore> = counting.clone();
        (
            MultipartPolicy::new(threshold, part_size).wrap(inner),
            counting,
        )
    }

    /// `n` bytes in which no 8-byte word repeats (splitmix64 of the word's index), so a
    /// part stored out of order or twice cannot compare equal.
    fn content(n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        let mut i = 0u64;
        while out.len() < n {
            let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
            i += 1;
        }
        out.truncate(n);
        out
    }

    /// Upload `data` the way delta-rs's writer does: a `BufWriter` with a 5 MiB buffer and
    /// two parts in flight, fed in `write_size` pieces.
    async fn write_like_delta_rs(
        store: &Arc<dyn ObjectStore>,
        path: &Path,
        data: &[u8],
        write_size: usize,
    ) {
        let mut writer = BufWriter::with_capacity(Arc::clone(store), path.clone(), 5 * MIB)
            .with_max_concurrency(2);
        for piece in data.chunks(write_size) {
            writer.put(Bytes::copy_from_slice(piece)).await.unwrap();
        }
        writer.shutdown().await.unwrap();
    }

    async fn read_back(store: &Arc<dyn ObjectStore>, path: &Path) -> Vec<u8> {
        store
            .get(path)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
            .to_vec()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn objects_below_the_threshold_go_up_in_one_put() {
        // Larger than delta-rs's 5 MiB buffer (so the multipart path is taken above the
        // wrapper), one byte short of the threshold.
        let (store, counting) = wrapped(12 * MIB, 5 * MIB);
        let path = Path::from("below.bin");
        let data = content(12 * MIB - 1);
        write_like_delta_rs(&store, &path, &data, MIB + 7).await;
        {
            let calls = counting.calls();
            assert_eq!((calls.puts, calls.multiparts), (1, 0), "{calls:?}");
        }
        assert!(read_back(&store, &path).await == data);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn objects_at_or_above_the_threshold_go_up_in_parts_of_exactly_part_size() {
        let cases = [
            // (threshold, part size, object size, bytes per write)
            (6 * MIB, 5 * MIB, 23 * MIB + 123, MIB + 7),
            // Exactly the threshold is "at least this large".
            (12 * MIB, 7 * MIB, 12 * MIB, 3 * MIB + 1),
            // Parts larger than delta-rs's buffer and a threshold above one part.
            (20 * MIB, 8 * MIB, 33 * MIB + 1, 6 * MIB),
            // A part size below what S3 accepts is raised to 5 MiB.
            (6 * MIB, 1, 11 * MIB, MIB),
        ];
        for (threshold, part_size, size, write_size) in cases {
            let (store, counting) = wrapped(threshold, part_size);
            let path = Path::from("above.bin");
            let data = content(size);
            write_like_delta_rs(&store, &path, &data, write_size).await;
            let part_size = part_size.max(5 * MIB);
            {
                let calls = counting.calls();
                let case =
                    format!("threshold {threshold}, part {part_size}, size {size}: {calls:?}");
                assert_eq!(
                    (calls.puts, calls.multiparts, calls.completes),
                    (0, 1, 1),
                    "{case}"
                );
                assert_eq!(calls.parts.len(), size.div_ceil(part_size), "{case}");
                let (last, full) = calls.parts.split_last().unwrap();
                assert!(full.iter().all(|&p| p == part_size), "{case}");
                assert_eq!(*last, size - full.len() * part_size, "{case}");
            }
            assert!(
                read_back(&store, &path).await == data,
                "bytes differ for size {size}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn threshold_zero_is_always_one_put() {
        let (store, counting) = wrapped(0, 5 * MIB);
        let path = Path::from("zero.bin");
        let data = content(21 * MIB + 5);
        write_like_delta_rs(&store, &path, &data, 2 * MIB).await;
        {
            let calls = counting.calls();
            assert_eq!((calls.puts, calls.multiparts), (1, 0), "{calls:?}");
        }
        assert!(read_back(&store, &path).await == data);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parts_reach_the_store_in_order_whatever_order_they_are_polled_in() {
        let (store, counting) = wrapped(5 * MIB, 5 * MIB);
        let path = Path::from("ordered.bin");
        let data = content(8 * (3 * MIB + 17));
        let mut upload = store.put_multipart(&path).await.unwrap();
        let futures: Vec<UploadPart> = data
            .chunks(3 * MIB + 17)
            .map(|piece| upload.put_part(Bytes::copy_from_slice(piece).into()))
            .collect();
        // The last future is polled first: a part issued on first poll would go first.
        tokio::time::timeout(
            Duration::from_secs(10),
            futures::future::try_join_all(futures.into_iter().rev()),
        )
        .await
        .expect("waiting parts must not block the ones before them")
        .unwrap();
        upload.complete().await.unwrap();
        {
            let calls = counting.calls();
            assert_eq!(calls.parts.len(), data.len().div_ceil(5 * MIB), "{calls:?}");
            assert!(
                calls.parts[..calls.parts.len() - 1]
                    .iter()
                    .all(|&p| p == 5 * MIB)
            );
        }
        assert!(
            read_back(&store, &path).await == data,
            "parts were stored out of order"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn abort_leaves_nothing_behind() {
        // Started: parts were sent, then the writer gives up.
        let (store, counting) = wrapped(5 * MIB, 5 * MIB);
        let path = Path::from("aborted.bin");
        let mut writer = BufWriter::with_capacity(Arc::clone(&store), path.clone(), 5 * MIB)
            .with_max_concurrency(2);
        for piece in content(17 * MIB).chunks(MIB) {
            writer.put(Bytes::copy_from_slice(piece)).await.unwrap();
        }
        writer.abort().await.unwrap();
        {
            let calls = counting.calls();
            assert_eq!(
                (calls.multiparts, calls.aborts, calls.completes),
                (1, 1, 0),
                "{calls:?}"
            );
            assert!(
                !calls.parts.is_empty(),
                "parts must have been sent before the abort"
            );
        }
        assert!(matches!(
            store.head(&path).await,
            Err(object_store::Error::NotFound { .. })
        ));

        // Not started: nothing ever reached the store.
        let (store, counting) = wrapped(64 * MIB, 5 * MIB);
        let mut writer = BufWriter::with_capacity(Arc::clone(&store), path.clone(), 5 * MIB)
            .with_max_concurrency(2);
        for piece in content(17 * MIB).chunks(MIB) {
            writer.put(Bytes::copy_from_slice(piece)).await.unwrap();
        }
        writer.abort().await.unwrap();
        {
            let calls = counting.calls();
            assert_eq!((calls.puts, calls.multiparts), (0, 0), "{calls:?}");
        }
        assert!(matches!(
            store.head(&path).await,
            Err(object_store::Error::NotFound { .. })
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_multipart_that_cannot_start_fails_every_part_instead_of_hanging() {
        let counting = TestStore::memory();
        counting.inject(Op::MultipartStart, Target::Any, 1, usize::MAX, Fault::Fail);
        let inner: Arc<dyn ObjectStore> = counting.clone();
        let store = MultipartPolicy::new(5 * MIB, 5 * MIB).wrap(inner);
        let mut upload = store
            .put_multipart(&Path::from("refused.bin"))
            .await
            .unwrap();
        let futures: Vec<UploadPart> = content(15 * MIB)
            .chunks(5 * MIB)
            .map(|piece| upload.put_part(Bytes::copy_from_slice(piece).into()))
            .collect();
        let results = tokio::time::timeout(
            Duration::from_secs(10),
            futures::future::join_all(futures.into_iter().rev()),
        )
        .await
        .expect("later parts must not wait forever for a failed start");
        assert!(results.iter().all(Result::is_err), "{results:?}");
        assert_eq!(counting.calls().multiparts, 1, "the start is not retried");
    }

    #[test]
    fn held_bytes_cover_the_threshold_and_stop_at_the_file_size() {
        let policy = MultipartPolicy::new(64 * MIB, 16 * MIB);
        let held = policy.held_bytes(10 * MIB, 2, usize::MAX);
        assert!(held >= 64 * MIB + 10 * MIB, "{held}");
        assert_eq!(policy.held_bytes(10 * MIB, 2, 3 * MIB), 3 * MIB);
        // Threshold 0 holds the whole file before its single PUT.
        assert_eq!(
            MultipartPolicy::new(0, 16 * MIB).held_bytes(MIB, 2, 200 * MIB),
            200 * MIB
        );
    }

    #[test]
    fn local_tables_are_not_wrapped() {
        let local = Url::parse("file:///tmp/t").unwrap();
        let s3 = Url::parse("s3://bucket/t").unwrap();
        assert_eq!(MultipartPolicy::for_table(&local, MIB, MIB), None);
        assert_eq!(
            MultipartPolicy::for_table(&s3, 6 * MIB, MIB),
            Some(MultipartPolicy::new(6 * MIB, 5 * MIB))
        );
    }
}

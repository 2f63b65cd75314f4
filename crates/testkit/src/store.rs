//! [`TestStore`]: a store that delegates to a real one, counts what reaches it and injects
//! faults into chosen calls.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
};

/// Which store call a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `put_opts` (small data files, commit JSON, checkpoints).
    Put,
    /// Starting a multipart upload.
    MultipartStart,
    /// Completing a multipart upload.
    Multipart,
    /// `get_opts` and `get_ranges` (every read).
    Get,
}

/// Which paths a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Data files: `*.parquet` outside `_delta_log`.
    Data,
    /// Commit entries: `_delta_log/*.json`.
    Commit,
    /// Deletion vector files: `deletion_vector_*.bin`.
    Vectors,
    /// Every path.
    Any,
    /// The one file whose path ends with this name.
    File(String),
}

impl Target {
    /// Whether `path` is one of this target's.
    pub fn matches(&self, path: &Path) -> bool {
        let p = path.as_ref();
        match self {
            Target::Data => p.ends_with(".parquet") && !p.contains("_delta_log/"),
            Target::Commit => p.contains("_delta_log/") && p.ends_with(".json"),
            Target::Vectors => p.ends_with(".bin") && p.contains("deletion_vector_"),
            Target::Any => true,
            Target::File(name) => p.ends_with(&format!("/{name}")),
        }
    }
}

/// What happens to a matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The call fails before it reaches storage.
    Fail,
    /// The call succeeds in storage, then the caller gets an error (response lost).
    LostResponse,
    /// The call succeeds in storage, its response is lost and the client retries it once,
    /// returning the retry's result (a conditional PUT then finds "already exists").
    LostAndRetried,
    /// The call is delayed, then runs normally.
    Delay(Duration),
}

/// What reached the real store.
#[derive(Debug, Default, Clone)]
pub struct Calls {
    /// `put_opts` calls.
    pub puts: usize,
    /// Multipart uploads started.
    pub multiparts: usize,
    /// Sizes of the parts, in the order `put_part` was called.
    pub parts: Vec<usize>,
    /// Multipart uploads completed.
    pub completes: usize,
    /// Multipart uploads aborted.
    pub aborts: usize,
}

#[derive(Debug)]
struct Rule {
    op: Op,
    target: Target,
    /// Matching calls to let through before the fault applies.
    skip: usize,
    /// How many matching calls (after `skip`) get the fault.
    times: usize,
    fault: Fault,
    seen: usize,
    fired: usize,
}

/// The instrumented store.
#[derive(Debug)]
pub struct TestStore {
    inner: Arc<dyn ObjectStore>,
    rules: Mutex<Vec<Rule>>,
    calls: Arc<Mutex<Calls>>,
    /// Data-file PUTs in flight now, and the most seen at once.
    data_puts_in_flight: AtomicUsize,
    max_data_puts_in_flight: AtomicUsize,
}

impl std::fmt::Display for TestStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TestStore({})", self.inner)
    }
}

/// The error an injected fault answers: a generic store error, as a store gives after its
/// own retries (a 5xx, a reset connection).
pub fn injected(path: &Path, what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "TestStore",
        source: format!("injected fault: {what} ({path})").into(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

struct InFlight<'a>(Option<&'a TestStore>);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.0 {
            s.data_puts_in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl TestStore {
    /// Over `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            rules: Mutex::new(Vec::new()),
            calls: Arc::new(Mutex::new(Calls::default())),
            data_puts_in_flight: AtomicUsize::new(0),
            max_data_puts_in_flight: AtomicUsize::new(0),
        })
    }

    /// Over the local file system's root (`LocalFileSystem::new()`), as tables opened
    /// through a store expect for local paths.
    pub fn local() -> Arc<Self> {
        Self::new(Arc::new(LocalFileSystem::new()))
    }

    /// Over an in-memory store.
    pub fn memory() -> Arc<Self> {
        Self::new(Arc::new(InMemory::new()))
    }

    /// Apply `fault` to the `nth` (1-based) matching call from now on, and `times` calls
    /// in all.
    pub fn inject(&self, op: Op, target: Target, nth: usize, times: usize, fault: Fault) {
        lock(&self.rules).push(Rule {
            op,
            target,
            skip: nth.saturating_sub(1),
            times,
            fault,
            seen: 0,
            fired: 0,
        });
    }

    /// How often the injected faults fired; clears the rules.
    pub fn take_fired(&self) -> usize {
        let mut rules = lock(&self.rules);
        let fired = rules.iter().map(|r| r.fired).sum();
        rules.clear();
        fired
    }

    /// What reached the real store so far.
    pub fn calls(&self) -> Calls {
        lock(&self.calls).clone()
    }

    /// The most data-file PUTs that were in flight at once.
    pub fn max_data_puts_in_flight(&self) -> usize {
        self.max_data_puts_in_flight.load(Ordering::SeqCst)
    }

    fn fault(&self, op: Op, path: &Path) -> Option<Fault> {
        let mut rules = lock(&self.rules);
        let mut chosen = None;
        for rule in rules.iter_mut() {
            if rule.op != op || !rule.target.matches(path) {
                continue;
            }
            rule.seen += 1;
            if chosen.is_none() && rule.seen > rule.skip && rule.fired < rule.times {
                rule.fired += 1;
                chosen = Some(rule.fault);
            }
        }
        chosen
    }

    fn track(&self, op: Op, path: &Path) -> InFlight<'_> {
        if op == Op::Put && Target::Data.matches(path) {
            let now = self.data_puts_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_data_puts_in_flight
                .fetch_max(now, Ordering::SeqCst);
            InFlight(Some(self))
        } else {
            InFlight(None)
        }
    }

    async fn read<T, F>(&self, location: &Path, call: F) -> object_store::Result<T>
    where
        F: std::future::Future<Output = object_store::Result<T>>,
    {
        match self.fault(Op::Get, location) {
            None | Some(Fault::LostAndRetried) => call.await,
            Some(Fault::Delay(d)) => {
                tokio::time::sleep(d).await;
                call.await
            }
            Some(Fault::Fail) | Some(Fault::LostResponse) => Err(injected(location, "get failed")),
        }
    }
}

#[async_trait]
impl ObjectStore for TestStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let fault = self.fault(Op::Put, location);
        let _in_flight = self.track(Op::Put, location);
        lock(&self.calls).puts += 1;
        match fault {
            None => self.inner.put_opts(location, payload, opts).await,
            Some(Fault::Delay(d)) => {
                tokio::time::sleep(d).await;
                self.inner.put_opts(location, payload, opts).await
            }
            Some(Fault::Fail) => Err(injected(location, "put failed")),
            Some(Fault::LostResponse) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(injected(location, "put response lost"))
            }
            Some(Fault::LostAndRetried) => {
                self.inner
                    .put_opts(location, payload.clone(), opts.clone())
                    .await?;
                self.inner.put_opts(location, payload, opts).await
            }
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        lock(&self.calls).multiparts += 1;
        if let Some(Fault::Fail | Fault::LostResponse) = self.fault(Op::MultipartStart, location) {
            return Err(injected(location, "multipart upload refused"));
        }
        let fault = self.fault(Op::Multipart, location);
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(TestUpload {
            inner,
            fault,
            path: location.clone(),
            calls: Arc::clone(&self.calls),
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.read(location, self.inner.get_opts(location, options))
            .await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.read(location, self.inner.get_ranges(location, ranges))
            .await
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

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

#[derive(Debug)]
struct TestUpload {
    inner: Box<dyn MultipartUpload>,
    fault: Option<Fault>,
    path: Path,
    calls: Arc<Mutex<Calls>>,
}

#[async_trait]
impl MultipartUpload for TestUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        lock(&self.calls).parts.push(data.content_length());
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        lock(&self.calls).completes += 1;
        match self.fault {
            None => self.inner.complete().await,
            Some(Fault::Delay(d)) => {
                tokio::time::sleep(d).await;
                self.inner.complete().await
            }
            Some(Fault::Fail) => {
                self.inner.abort().await?;
                Err(injected(&self.path, "multipart completion failed"))
            }
            Some(Fault::LostResponse) | Some(Fault::LostAndRetried) => {
                self.inner.complete().await?;
                Err(injected(&self.path, "multipart completion response lost"))
            }
        }
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        lock(&self.calls).aborts += 1;
        self.inner.abort().await
    }
}

//! A Flight SQL transaction's view of the tables it writes.
//!
//! The store every table of a transaction is opened through. A table the transaction
//! writes is *pinned* at the version it had before the first write (`None`: no table).
//! Through this store, a pinned table's Delta log is the real log up to that version plus
//! the transaction's own commits, which are written to a private folder of the data root
//! (`.deltalite_txn/<transaction id>/<catalog>/<schema>/<table>/`, a hidden name that no
//! listing shows and no statement can spell) instead of the table's `_delta_log`. Data
//! files, deletion vectors and every other table's log go to the real store. So the
//! engine, delta-rs and the SQL layer run unchanged inside a transaction: the session
//! reads its own writes, and no other session sees a commit of it. COMMIT publishes each
//! pinned table's difference as one real commit (`deltalite::TableLocation::publish`);
//! ROLLBACK deletes the private folder and the files the private commits added.
//!
//! Versions above the pin in the real log are hidden (another session's commits since:
//! the transaction keeps the snapshot it started writing from), and so is the real
//! `_last_checkpoint` when it names such a version; the log is then listed from the
//! start, and a checkpoint at or below the pin is still found in the listing.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// The folder of the data root holding open transactions' private logs.
pub const PRIVATE_FOLDER: &str = ".deltalite_txn";

const DELTA_LOG: &str = "_delta_log";

/// The log's checkpoint hint: which checkpoint to start reading from.
const LAST_CHECKPOINT: &str = "_last_checkpoint";

/// See the module documentation.
#[derive(Debug)]
pub struct StagedLog {
    inner: Arc<dyn ObjectStore>,
    /// The data root, in `inner`'s paths.
    root: Path,
    /// This transaction's private folder, in `inner`'s paths.
    private: Path,
    /// Pinned tables (their folders, in `inner`'s paths) and their versions at the pin.
    pins: RwLock<HashMap<Path, Option<u64>>>,
}

/// Where a path of a pinned table's log is served from.
enum Route {
    /// Not a pinned table's log: the real store.
    Pass,
    /// A pinned table's log entry `name` (the part after `_delta_log/`, empty for the
    /// folder itself).
    Log {
        table: Path,
        base: Option<u64>,
        name: String,
    },
}

/// The version a log file is for (`00000000000000000012.json` → 12), if it is one.
fn version_of(name: &str) -> Option<u64> {
    let digits = name.get(..20)?;
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse().ok())
        .flatten()
}

fn join(base: &Path, rest: &str) -> Path {
    rest.split('/')
        .filter(|p| !p.is_empty())
        .fold(base.clone(), |p, part| p.join(part))
}

impl std::fmt::Display for StagedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StagedLog({}, {})", self.inner, self.private)
    }
}

impl StagedLog {
    /// The view of transaction `id` over `inner`, whose paths have the data root at `root`.
    pub fn new(inner: Arc<dyn ObjectStore>, root: Path, id: &str) -> Self {
        let private = root.clone().join(PRIVATE_FOLDER).join(id);
        Self {
            inner,
            root,
            private,
            pins: RwLock::new(HashMap::new()),
        }
    }

    fn pins(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Path, Option<u64>>> {
        match self.pins.read() {
            Ok(p) => p,
            Err(p) => p.into_inner(),
        }
    }

    fn pins_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Path, Option<u64>>> {
        match self.pins.write() {
            Ok(p) => p,
            Err(p) => p.into_inner(),
        }
    }

    /// Pin `table` (its folder) at `version`, unless it is pinned already.
    pub fn pin(&self, table: Path, version: Option<u64>) {
        self.pins_mut().entry(table).or_insert(version);
    }

    /// The version `table` was pinned at: `None` when it is not pinned.
    pub fn base(&self, table: &Path) -> Option<Option<u64>> {
        self.pins().get(table).copied()
    }

    /// Every pinned table and its version at the pin.
    pub fn pinned(&self) -> Vec<(Path, Option<u64>)> {
        let mut out: Vec<_> = self.pins().iter().map(|(p, v)| (p.clone(), *v)).collect();
        out.sort();
        out
    }

    /// Forget the pins of the tables at or under `folder` (dropped). Returns their
    /// private folders, for [`Self::delete_folders`]: a table made again under the name
    /// must not find the old one's commits.
    pub fn unpin_under(&self, folder: &Path) -> Vec<Path> {
        let mut pins = self.pins_mut();
        let gone: Vec<Path> = pins
            .keys()
            .filter(|p| p.prefix_matches(folder))
            .cloned()
            .collect();
        for p in &gone {
            pins.remove(p);
        }
        gone.iter().map(|t| self.private_dir(t)).collect()
    }

    /// Delete private folders [`Self::unpin_under`] returned.
    pub async fn delete_folders(&self, folders: Vec<Path>) -> object_store::Result<()> {
        for folder in folders {
            self.delete_under(&folder).await?;
        }
        Ok(())
    }

    /// `from` was renamed `to`: its pin and private commits follow it.
    pub async fn follow_rename(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        let Some(base) = self.pins_mut().remove(from) else {
            return Ok(());
        };
        let (old, new) = (self.private_dir(from), self.private_dir(to));
        let entries: Vec<ObjectMeta> = self.inner.list(Some(&old)).try_collect().await?;
        for meta in entries {
            let rest: Vec<_> = meta
                .location
                .prefix_match(&old)
                .map(|parts| parts.map(|p| p.as_ref().to_string()).collect())
                .unwrap_or_default();
            let target = join(&new, &rest.join("/"));
            self.inner
                .copy_opts(&meta.location, &target, CopyOptions::default())
                .await?;
            self.inner
                .delete_stream(futures::stream::once(async move { Ok(meta.location) }).boxed())
                .try_collect::<Vec<_>>()
                .await?;
        }
        self.pins_mut().insert(to.clone(), base);
        Ok(())
    }

    /// Whether a pinned table has a log to read: `None` when `table` is not pinned.
    pub async fn has_log(&self, table: &Path) -> object_store::Result<Option<bool>> {
        match self.base(table) {
            None => Ok(None),
            Some(Some(_)) => Ok(Some(true)),
            Some(None) => {
                let mut private = self.inner.list(Some(&self.private_dir(table)));
                while let Some(meta) = private.try_next().await? {
                    if meta.location.filename().and_then(version_of).is_some() {
                        return Ok(Some(true));
                    }
                }
                Ok(Some(false))
            }
        }
    }

    async fn delete_under(&self, folder: &Path) -> object_store::Result<()> {
        let paths = self.inner.list(Some(folder)).map_ok(|m| m.location).boxed();
        self.inner
            .delete_stream(paths)
            .try_collect::<Vec<_>>()
            .await
            .map(|_| ())
    }

    /// The private folder of `table`'s commits.
    fn private_dir(&self, table: &Path) -> Path {
        match table.prefix_match(&self.root) {
            Some(parts) => parts.fold(self.private.clone(), |p, part| p.join(part)),
            None => self.private.clone(),
        }
    }

    fn route(&self, location: &Path) -> Route {
        let parts: Vec<_> = location.parts().collect();
        let Some(at) = parts.iter().position(|p| p.as_ref() == DELTA_LOG) else {
            return Route::Pass;
        };
        let table = Path::from_iter(parts[..at].iter().cloned());
        let Some(base) = self.base(&table) else {
            return Route::Pass;
        };
        let name = parts[at + 1..]
            .iter()
            .map(|p| p.as_ref())
            .collect::<Vec<_>>()
            .join("/");
        Route::Log { table, base, name }
    }

    /// Where a pinned log's entry `name` lives: the real path when it is part of the
    /// pinned version, else the private one.
    fn resolve(&self, location: &Path, table: &Path, base: Option<u64>, name: &str) -> Path {
        match (version_of(name), base) {
            (Some(v), Some(b)) if v <= b => location.clone(),
            _ => join(&self.private_dir(table), name),
        }
    }

    fn map(&self, location: &Path) -> Path {
        match self.route(location) {
            Route::Pass => location.clone(),
            Route::Log { table, base, name } => {
                if name == LAST_CHECKPOINT {
                    // Written privately; read by `Self::last_checkpoint`.
                    return join(&self.private_dir(&table), &name);
                }
                self.resolve(location, &table, base, &name)
            }
        }
    }

    /// A pinned table's checkpoint hint: the transaction's own (written with a private
    /// checkpoint), else the real one when it names a version the pin includes; without
    /// either, not found (the kernel then lists the log from its start).
    async fn last_checkpoint(
        &self,
        location: &Path,
        table: &Path,
        base: u64,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let private = join(&self.private_dir(table), LAST_CHECKPOINT);
        match self.inner.get_opts(&private, options.clone()).await {
            Ok(mut result) => {
                result.meta.location = location.clone();
                return Ok(result);
            }
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        let real = self.inner.get_opts(location, options).await?;
        let (meta, range, attributes) = (
            real.meta.clone(),
            real.range.clone(),
            real.attributes.clone(),
        );
        let bytes = real.bytes().await?;
        let version = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v.get("version")?.as_u64());
        if version.is_none_or(|v| v > base) {
            return Err(object_store::Error::NotFound {
                path: location.to_string(),
                source: "the checkpoint hint names a version after the transaction's pin".into(),
            });
        }
        Ok(GetResult {
            payload: GetResultPayload::Stream(
                futures::stream::once(async move { Ok(bytes) }).boxed(),
            ),
            meta,
            range,
            attributes,
        })
    }

    /// A pinned log's listing: the real entries of the pinned version, then the private
    /// ones under their log names.
    async fn list_log(
        &self,
        prefix: &Path,
        table: &Path,
        base: Option<u64>,
        offset: Option<&Path>,
    ) -> object_store::Result<Vec<ObjectMeta>> {
        let mut out = Vec::new();
        if let Some(b) = base {
            let real = match offset {
                Some(o) => self.inner.list_with_offset(Some(prefix), o),
                None => self.inner.list(Some(prefix)),
            };
            let real: Vec<ObjectMeta> = real.try_collect().await?;
            out.extend(real.into_iter().filter(|m| {
                m.location
                    .filename()
                    .and_then(version_of)
                    .is_some_and(|v| v <= b)
            }));
        }
        let dir = self.private_dir(table);
        let log = table.clone().join(DELTA_LOG);
        let private: Vec<ObjectMeta> = self.inner.list(Some(&dir)).try_collect().await?;
        for mut meta in private {
            let rest: Vec<String> = meta
                .location
                .prefix_match(&dir)
                .map(|parts| parts.map(|p| p.as_ref().to_string()).collect())
                .unwrap_or_default();
            let location = join(&log, &rest.join("/"));
            if location.prefix_matches(prefix) && offset.is_none_or(|o| &location > o) {
                meta.location = location;
                out.push(meta);
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl ObjectStore for StagedLog {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner
            .put_opts(&self.map(location), payload, opts)
            .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner
            .put_multipart_opts(&self.map(location), opts)
            .await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if let Route::Log {
            table,
            base: Some(base),
            name,
        } = self.route(location)
            && name == LAST_CHECKPOINT
            && !options.head
            && options.range.is_none()
        {
            return self.last_checkpoint(location, &table, base, options).await;
        }
        let mapped = self.map(location);
        let mut result = self.inner.get_opts(&mapped, options).await?;
        result.meta.location = location.clone();
        Ok(result)
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(&self.map(location), ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        // Map each path now (the routes depend on the pins at the call), delete through
        // the real store, answer with the caller's paths.
        let this = self.map_fn();
        let inner = Arc::clone(&self.inner);
        locations
            .and_then(move |original| {
                let target = this(&original);
                let inner = Arc::clone(&inner);
                async move {
                    inner
                        .delete_stream(futures::stream::once(async move { Ok(target) }).boxed())
                        .try_collect::<Vec<_>>()
                        .await?;
                    Ok(original)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let Some(prefix) = prefix else {
            return self.inner.list(None);
        };
        match self.route(prefix) {
            Route::Pass => self.inner.list(Some(prefix)),
            Route::Log { table, base, .. } => {
                let view = self.snapshot();
                let prefix = prefix.clone();
                futures::stream::once(
                    async move { view.list_log(&prefix, &table, base, None).await },
                )
                .map_ok(|entries| futures::stream::iter(entries.into_iter().map(Ok)))
                .try_flatten()
                .boxed()
            }
        }
    }

    /// A log listed from a version on (how the kernel reads one after its checkpoint)
    /// asks the real store from that offset too.
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let Some(prefix) = prefix else {
            return self.inner.list_with_offset(None, offset);
        };
        match self.route(prefix) {
            Route::Pass => self.inner.list_with_offset(Some(prefix), offset),
            Route::Log { table, base, .. } => {
                let view = self.snapshot();
                let (prefix, offset) = (prefix.clone(), offset.clone());
                futures::stream::once(async move {
                    view.list_log(&prefix, &table, base, Some(&offset)).await
                })
                .map_ok(|entries| futures::stream::iter(entries.into_iter().map(Ok)))
                .try_flatten()
                .boxed()
            }
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let Some(p) = prefix else {
            return self.inner.list_with_delimiter(None).await;
        };
        match self.route(p) {
            Route::Pass => self.inner.list_with_delimiter(Some(p)).await,
            Route::Log { table, base, .. } => {
                let objects = self
                    .list_log(p, &table, base, None)
                    .await?
                    .into_iter()
                    .filter(|m| m.location.prefix_match(p).is_some_and(|r| r.count() == 1))
                    .collect();
                Ok(ListResult {
                    common_prefixes: Vec::new(),
                    objects,
                })
            }
        }
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner
            .copy_opts(&self.map(from), &self.map(to), options)
            .await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.inner
            .rename_opts(&self.map(from), &self.map(to), options)
            .await
    }
}

impl StagedLog {
    /// A copy sharing the store and the current pins, for work that outlives a borrow
    /// (listing streams).
    fn snapshot(&self) -> Arc<StagedLog> {
        Arc::new(StagedLog {
            inner: Arc::clone(&self.inner),
            root: self.root.clone(),
            private: self.private.clone(),
            pins: RwLock::new(self.pins().clone()),
        })
    }

    /// [`Self::map`] as an owned function, for streams.
    fn map_fn(&self) -> impl Fn(&Path) -> Path + Send + Sync + 'static {
        let view = self.snapshot();
        move |p: &Path| view.map(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::local::LocalFileSystem;

    /// Through the view, a pinned log is the real one up to the pin plus the private
    /// commits, listed whole or from an offset, and the real checkpoint hint is served
    /// only when it names a version the pin includes.
    #[tokio::test]
    async fn a_pinned_log_hides_later_versions_and_hints() {
        use object_store::memory::InMemory;
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let root = Path::from("lake");
        let t = root.clone().join("c").join("s").join("t");
        let log = t.clone().join(DELTA_LOG);
        let entry = |v: u64| log.clone().join(format!("{v:020}.json").as_str());
        for v in 0..10 {
            inner
                .put(&entry(v), Bytes::from_static(b"real").into())
                .await
                .expect("put");
        }
        inner
            .put(
                &log.clone().join(LAST_CHECKPOINT),
                Bytes::from_static(br#"{"version":5,"size":1}"#).into(),
            )
            .await
            .expect("put");
        let staged = StagedLog::new(Arc::clone(&inner), root.clone(), "x");
        staged.pin(t.clone(), Some(7));
        staged
            .put(&entry(8), Bytes::from_static(b"private").into())
            .await
            .expect("put");
        let versions = |metas: Vec<ObjectMeta>| {
            let mut v: Vec<u64> = metas
                .iter()
                .filter_map(|m| m.location.filename().and_then(version_of))
                .collect();
            v.sort();
            v
        };
        let all: Vec<ObjectMeta> = staged.list(Some(&log)).try_collect().await.expect("list");
        assert_eq!(versions(all), (0..=8).collect::<Vec<_>>());
        let from: Vec<ObjectMeta> = staged
            .list_with_offset(Some(&log), &entry(4))
            .try_collect()
            .await
            .expect("list");
        assert_eq!(versions(from), [5, 6, 7, 8]);
        async fn read(store: &dyn ObjectStore, path: Path) -> Bytes {
            let got = store.get(&path).await.expect("get");
            got.bytes().await.expect("bytes")
        }
        assert_eq!(read(&staged, entry(8)).await.as_ref(), b"private");
        assert_eq!(read(inner.as_ref(), entry(8)).await.as_ref(), b"real");
        assert_eq!(read(&staged, entry(3)).await.as_ref(), b"real");
        assert!(matches!(
            staged.get(&entry(9)).await,
            Err(object_store::Error::NotFound { .. })
        ));
        let hint = log.clone().join(LAST_CHECKPOINT);
        let served = staged
            .get(&hint)
            .await
            .expect("hint")
            .bytes()
            .await
            .expect("bytes");
        assert_eq!(served.as_ref(), br#"{"version":5,"size":1}"#);
        let early = StagedLog::new(Arc::clone(&inner), root, "y");
        early.pin(t, Some(3));
        assert!(matches!(
            early.get(&hint).await,
            Err(object_store::Error::NotFound { .. })
        ));
    }

    #[tokio::test]
    async fn rename_moves_private_commits() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = Path::from_absolute_path(dir.path()).expect("root");
        let inner: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new());
        let log = StagedLog::new(inner, root.clone(), "x");
        let a = root.clone().join("c").join("s").join("a");
        let b = root.clone().join("c").join("s").join("b");
        log.pin(a.clone(), None);
        let commit = a.clone().join(DELTA_LOG).join("00000000000000000000.json");
        log.put(&commit, Bytes::from_static(b"{}").into())
            .await
            .expect("put");
        assert_eq!(log.has_log(&a).await.expect("has"), Some(true));
        log.follow_rename(&a, &b).await.expect("rename");
        assert_eq!(log.has_log(&a).await.expect("has"), None);
        assert_eq!(log.has_log(&b).await.expect("has"), Some(true));
    }

    /// The engine's writes through a transaction's view go to its private log: the data
    /// root's table is untouched until the view is published; an overwrite published
    /// after someone else's commit is a conflict; an append is rebased over it; and
    /// discarding deletes every file the staged commits added.
    #[tokio::test]
    async fn staged_writes_publish_rebase_conflict_and_discard() {
        use crate::catalog::{Storage, TableName};
        use deltalite::arrow::array::{ArrayRef, Int64Array};
        use deltalite::arrow::datatypes::{DataType, Field, Schema};
        use deltalite::arrow::record_batch::RecordBatch;

        let dir = tempfile::tempdir().expect("tmp");
        let real = Storage::open(dir.path().to_str().expect("utf8"), HashMap::new()).expect("open");
        let name = TableName::new("c", "s", "t").expect("name");
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        let batch = |values: &[i64]| {
            let column: ArrayRef = Arc::new(Int64Array::from(values.to_vec()));
            RecordBatch::try_new(Arc::clone(&schema), vec![column]).map_err(Into::into)
        };
        let spec = real.table_spec((*schema).clone(), Vec::new(), HashMap::new());
        real.location(&name)
            .expect("loc")
            .create(
                &spec,
                deltalite::InitialData::Rows(Box::new(vec![batch(&[1])].into_iter())),
                &Default::default(),
            )
            .await
            .expect("create");
        let rows = |t: &deltalite::DeltaLiteTable| {
            t.delta_table()
                .snapshot()
                .expect("snapshot")
                .log_data()
                .iter()
                .map(|f| f.num_records().unwrap_or(0))
                .sum::<usize>()
        };
        let files = |root: &std::path::Path| {
            let mut out = Vec::new();
            let mut stack = vec![root.to_path_buf()];
            while let Some(d) = stack.pop() {
                for e in std::fs::read_dir(&d).expect("dir").flatten() {
                    if e.path().is_dir() {
                        stack.push(e.path());
                    } else {
                        out.push(e.path());
                    }
                }
            }
            out.sort();
            out
        };
        let table_dir = dir.path().join("c/s/t");

        // An append staged, published after another writer's append: rebased.
        let (view, staged) = real.for_transaction("a").expect("txn");
        staged.pin(view.table_path(&name).expect("path"), Some(0));
        let mut t = view.open_table(&name).await.expect("open").expect("exists");
        t.append(vec![batch(&[2, 3])], &Default::default())
            .await
            .expect("append");
        assert_eq!(rows(&t), 3);
        let mut r = real.open_table(&name).await.expect("open").expect("exists");
        assert_eq!((r.version(), rows(&r)), (0, 1));
        r.append(vec![batch(&[4])], &Default::default())
            .await
            .expect("append");
        let published = real
            .location(&name)
            .expect("loc")
            .publish(Some(0), &t, &HashMap::new(), 3)
            .await
            .expect("publish");
        assert!(published.blind_append);
        assert_eq!((published.version, published.files_added), (2, 1));
        r.reload().await.expect("reload");
        assert_eq!(rows(&r), 4);

        // An overwrite staged at version 2, another writer commits version 3: a conflict,
        // nothing committed; discarding leaves the folder as the real table left it.
        let (view, staged) = real.for_transaction("b").expect("txn");
        staged.pin(view.table_path(&name).expect("path"), Some(2));
        let mut t = view.open_table(&name).await.expect("open").expect("exists");
        t.overwrite(&schema, vec![batch(&[9])], &Default::default())
            .await
            .expect("overwrite");
        t.append(vec![batch(&[10])], &Default::default())
            .await
            .expect("append");
        r.append(vec![batch(&[5])], &Default::default())
            .await
            .expect("append");
        let before = files(&table_dir);
        let err = real
            .location(&name)
            .expect("loc")
            .publish(Some(2), &t, &HashMap::new(), 3)
            .await
            .expect_err("conflict");
        assert!(
            matches!(err, deltalite::DeltaLiteError::CommitConflict(_)),
            "{err}"
        );
        r.reload().await.expect("reload");
        assert_eq!((r.version(), rows(&r)), (3, 5));
        let deleted = real
            .location(&name)
            .expect("loc")
            .discard_staged(Some(2), &t)
            .await
            .expect("discard");
        // The failed publish deleted the files it would have added already.
        assert_eq!(deleted, 0);
        let after = files(&table_dir);
        assert_eq!(before.len() - after.len(), 2, "{before:?} vs {after:?}");
        assert!(after.iter().all(|f| before.contains(f)));
    }
}

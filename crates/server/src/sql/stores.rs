//! The query runtime's object stores: only the granted tables' folders, read only.
//!
//! DataFusion resolves every file a plan reads through the runtime's
//! [`ObjectStoreRegistry`]; its default registry knows the whole local filesystem. Each SQL
//! session instead gets a [`GrantedStores`] registry that starts empty and learns, per table
//! the session resolved from a granted catalog, that table's folder ([`GrantedStores::grant`]).
//! Every other URL is refused, and inside a known store every path outside the granted
//! folders is refused too (a local table's store is the filesystem root, so the scheme alone
//! would say nothing). Nothing registers itself: registrations from DataFusion or delta-rs
//! are ignored. Writes are refused outright: the query runtime only reads; DDL and DML
//! write through the engine.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::common::{DataFusionError, Result as DfResult};
use datafusion::execution::object_store::ObjectStoreRegistry;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use url::Url;

/// What a refused URL or path answers; clients see it inside the SQL error.
pub const REFUSED: &str = "Permission Error: no access outside the granted tables";

/// The registry key of a URL: scheme and authority, as DataFusion's default registry keys
/// its stores.
pub(crate) fn store_key(url: &Url) -> String {
    format!(
        "{}://{}",
        url.scheme(),
        &url[url::Position::BeforeHost..url::Position::AfterPort]
    )
}

/// A session's registry: the granted tables' folders, nothing else.
#[derive(Debug, Default)]
pub struct GrantedStores {
    stores: RwLock<HashMap<String, Arc<ScopedStore>>>,
}

impl GrantedStores {
    /// Allow reads under `table_url` (a table's root), through `root_store`, the store
    /// rooted at the URL's scheme and authority.
    pub fn grant(&self, table_url: &Url, root_store: Arc<dyn ObjectStore>) {
        let prefix = Path::from_url_path(table_url.path()).unwrap_or_default();
        let key = store_key(table_url);
        let mut stores = match self.stores.write() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        let scoped = stores
            .entry(key)
            .or_insert_with(|| Arc::new(ScopedStore::new(root_store)));
        scoped.allow(prefix);
    }
}

impl ObjectStoreRegistry for GrantedStores {
    fn register_store(
        &self,
        url: &Url,
        _store: Arc<dyn ObjectStore>,
    ) -> Option<Arc<dyn ObjectStore>> {
        // Only `grant` adds stores; a registration from below would widen the session.
        tracing::debug!(%url, "ignored an object store registration in a SQL session");
        None
    }

    fn get_store(&self, url: &Url) -> DfResult<Arc<dyn ObjectStore>> {
        let stores = match self.stores.read() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        match stores.get(&store_key(url)) {
            Some(store) => Ok(Arc::clone(store) as Arc<dyn ObjectStore>),
            None => Err(DataFusionError::Plan(format!("{REFUSED}: {url}"))),
        }
    }
}

/// A store limited to some folders of an inner store, for reads only.
#[derive(Debug)]
pub struct ScopedStore {
    inner: Arc<dyn ObjectStore>,
    allowed: RwLock<Vec<Path>>,
}

impl std::fmt::Display for ScopedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ScopedStore({})", self.inner)
    }
}

fn refused(path: &str) -> object_store::Error {
    object_store::Error::PermissionDenied {
        path: path.to_string(),
        source: REFUSED.into(),
    }
}

fn read_only(path: &str) -> object_store::Error {
    object_store::Error::PermissionDenied {
        path: path.to_string(),
        source: "Permission Error: the query runtime does not write".into(),
    }
}

impl ScopedStore {
    fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            allowed: RwLock::new(Vec::new()),
        }
    }

    fn allow(&self, prefix: Path) {
        let mut allowed = match self.allowed.write() {
            Ok(a) => a,
            Err(p) => p.into_inner(),
        };
        if !allowed.contains(&prefix) {
            allowed.push(prefix);
        }
    }

    /// Whether `path` lies inside a granted folder (segment-wise: `t` does not grant `t2`).
    fn permits(&self, path: &Path) -> bool {
        let allowed = match self.allowed.read() {
            Ok(a) => a,
            Err(p) => p.into_inner(),
        };
        allowed.iter().any(|prefix| path.prefix_matches(prefix))
    }

    fn check(&self, path: &Path) -> object_store::Result<()> {
        if self.permits(path) {
            Ok(())
        } else {
            Err(refused(path.as_ref()))
        }
    }
}

#[async_trait]
impl ObjectStore for ScopedStore {
    async fn put_opts(
        &self,
        location: &Path,
        _payload: PutPayload,
        _opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        Err(read_only(location.as_ref()))
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(read_only(location.as_ref()))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.check(location)?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.check(location)?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        locations
            .map(|l| l.and_then(|path| Err(read_only(path.as_ref()))))
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        match prefix {
            Some(p) if self.permits(p) => self.inner.list(Some(p)),
            other => {
                let path = other.map(|p| p.to_string()).unwrap_or_default();
                futures::stream::once(async move { Err(refused(&path)) }).boxed()
            }
        }
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        match prefix {
            Some(p) if self.permits(p) => self.inner.list_with_delimiter(Some(p)).await,
            other => Err(refused(other.map(|p| p.as_ref()).unwrap_or_default())),
        }
    }

    async fn copy_opts(
        &self,
        _from: &Path,
        to: &Path,
        _options: CopyOptions,
    ) -> object_store::Result<()> {
        Err(read_only(to.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    #[tokio::test]
    async fn only_granted_folders_are_readable() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        for p in [
            "lake/c/s/t/a.parquet",
            "lake/c/s/t2/b.parquet",
            "etc/passwd",
        ] {
            inner
                .put(&Path::from(p), Bytes::from_static(b"x").into())
                .await
                .expect("put");
        }
        let registry = GrantedStores::default();
        let table = Url::parse("file:///lake/c/s/t/").expect("url");
        registry.grant(&table, Arc::clone(&inner));
        let store = registry
            .get_store(&Url::parse("file:///").expect("url"))
            .expect("file store granted");
        assert!(store.get(&Path::from("lake/c/s/t/a.parquet")).await.is_ok());
        for p in ["lake/c/s/t2/b.parquet", "etc/passwd", "lake/c/s"] {
            let err = store.get(&Path::from(p)).await.expect_err(p);
            assert!(
                matches!(err, object_store::Error::PermissionDenied { .. }),
                "{p}: {err}"
            );
        }
        assert!(
            store
                .put(&Path::from("lake/c/s/t/new"), Bytes::new().into())
                .await
                .is_err()
        );
        let err = registry
            .get_store(&Url::parse("s3://bucket/").expect("url"))
            .expect_err("s3 not granted");
        assert!(err.to_string().contains(REFUSED), "{err}");
        // A registration from below is ignored.
        registry.register_store(&Url::parse("s3://bucket/").expect("url"), inner);
        assert!(
            registry
                .get_store(&Url::parse("s3://bucket/").expect("url"))
                .is_err()
        );
    }
}

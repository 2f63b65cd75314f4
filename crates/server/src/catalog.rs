//! Names and storage layout: `<root>/<catalog>/<schema>/<table>/`, one Delta table per
//! folder. Names are validated before any path is built from them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use deltalite::{DeltaLiteTable, TableLocation};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::error::ApiError;
use crate::snapshots::Snapshots;
use crate::staged_log::StagedLog;

/// The schema every catalog has and a session starts in (DuckDB's `main`).
pub const DEFAULT_SCHEMA: &str = "main";

/// Marker object that makes an empty schema visible on object stores, which have no
/// directories.
const SCHEMA_MARKER: &str = ".deltalite_schema";

/// Marker object of a scratch catalog (`ATTACH ':memory:' AS name` over Flight SQL): such
/// a catalog lives as long as the session that attached it, so one found at startup is
/// what a stopped server left, and is removed. Only folders carrying it are ever removed
/// as scratch catalogs.
const SCRATCH_MARKER: &str = ".deltalite_scratch";

/// Hidden folder of a schema that holds its views' definitions.
const VIEWS_FOLDER: &str = ".deltalite_views";

/// Reject names that could escape their folder or confuse the layout.
pub fn validate_name(kind: &str, name: &str) -> Result<(), ApiError> {
    // A folder of that name makes its parent look like a Delta table (delta-rs then finds
    // no table below it): reserved at every level.
    if name == "_delta_log" {
        return Err(ApiError::BadRequest(format!(
            "Invalid {kind} name {name:?}: the name is reserved for Delta's transaction log"
        )));
    }
    let bad = name.is_empty()
        || name.len() > 255
        || name == "."
        || name == ".."
        || name.starts_with('.')
        || name
            .chars()
            // '%': storage paths pass through URLs, and a decoded `%2e%2e` is `..`.
            .any(|c| c == '/' || c == '\\' || c == '%' || c.is_control() || c == '\u{0}');
    if bad {
        return Err(ApiError::BadRequest(format!(
            "Invalid {kind} name {name:?}: names are identifiers and may not contain '/', '\\', \
             '%', control characters or start with '.'"
        )));
    }
    Ok(())
}

/// A fresh name for a table or schema folder that a transaction drops: the folder is
/// moved there (`Storage::rename_folder`) and deleted at `COMMIT`, or moved back at
/// `ROLLBACK`. It starts with '.', so no statement can name it ([`validate_name`]) and no
/// listing shows it.
pub fn set_aside_name() -> String {
    format!(".dropped-{}", uuid::Uuid::new_v4().simple())
}

/// A fully qualified, validated table name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableName {
    /// Catalog.
    pub catalog: String,
    /// Schema.
    pub schema: String,
    /// Table.
    pub table: String,
}

impl TableName {
    /// Validate the three parts.
    pub fn new(catalog: &str, schema: &str, table: &str) -> Result<Self, ApiError> {
        validate_name("catalog", catalog)?;
        validate_name("schema", schema)?;
        validate_name("table", table)?;
        Ok(Self {
            catalog: catalog.to_string(),
            schema: schema.to_string(),
            table: table.to_string(),
        })
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.catalog, self.schema, self.table)
    }
}

/// The data root and how to reach it.
pub struct Storage {
    /// Root URI without trailing slash (local absolute path or `scheme://...`).
    root: String,
    /// Local root when the data lives on the local filesystem.
    local: Option<PathBuf>,
    store: Arc<dyn ObjectStore>,
    /// Base path of `store` for the root (object stores only).
    base: ObjectPath,
    /// Storage options for delta-rs.
    pub options: HashMap<String, String>,
    /// One writer per table at a time inside this process; Delta's optimistic concurrency
    /// still protects against other processes.
    locks: Arc<Mutex<TableLocks>>,
    /// When set, every table is opened and created through this store (rooted at the
    /// storage root) instead of one built from the URI: instrumentation, fault injection.
    table_store: Option<Arc<dyn ObjectStore>>,
    /// Scratch catalogs this process created and has not removed: two sessions attaching
    /// the same name at once cannot both get it.
    scratch: Arc<Mutex<std::collections::HashSet<String>>>,
    /// Properties every table this server creates gets, unless its statement sets them.
    new_table_properties: HashMap<String, String>,
    /// Set in a transaction's storage ([`Storage::for_transaction`]): the tables it
    /// writes are read and committed through this view.
    staged: Option<Arc<StagedLog>>,
    /// Tables kept open between queries ([`Storage::with_snapshot_cache`]); never in a
    /// transaction's storage.
    snapshots: Option<Arc<Snapshots>>,
}

/// The per-table writer locks. Entries are weak: a lock lives as long as a request holds
/// or waits for it, so the map does not keep one entry per table name ever written to
/// (names of tables that do not exist included: the lock is taken before the check).
#[derive(Default)]
struct TableLocks {
    map: HashMap<String, Weak<tokio::sync::Mutex<()>>>,
    /// Map size at which dead entries are swept next; doubling it after each sweep
    /// keeps the sweeps' cost constant per lock taken.
    sweep_at: usize,
}

/// Smallest [`TableLocks::sweep_at`]: sweeping a handful of entries is not worth a pass.
const MIN_LOCK_SWEEP: usize = 64;

/// Tables opened at once when a listing opens many (their logs are read concurrently).
const OPEN_AT_ONCE: usize = 8;

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage").field("root", &self.root).finish()
    }
}

/// A storage failure: retryable (`503`) when transient, else the operator's problem.
fn internal(e: impl std::error::Error + 'static) -> ApiError {
    ApiError::from_failure(&e, e.to_string(), ApiError::Internal)
}

impl Storage {
    /// Open the data root, creating a local one when missing.
    pub fn open(root: &str, options: HashMap<String, String>) -> Result<Self, ApiError> {
        // Make sure delta-rs' S3 handlers are registered before any URL is parsed.
        let _ = deltalite::table::table_url("/");
        if root.contains("://") && !root.starts_with("file://") {
            let url = url::Url::parse(root).map_err(internal)?;
            // object_store spells its keys in lower case (`aws_endpoint`, `allow_http`);
            // delta-rs users write `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`. Offer every spelling,
            // unknown keys are ignored.
            let mut store_options: Vec<(String, String)> = Vec::new();
            for (k, v) in &options {
                let lower = k.to_ascii_lowercase();
                store_options.push((k.clone(), v.clone()));
                store_options.push((lower.clone(), v.clone()));
                if let Some(stripped) = lower.strip_prefix("aws_") {
                    store_options.push((stripped.to_string(), v.clone()));
                }
            }
            let (store, base) = object_store::parse_url_opts(&url, store_options)
                .map_err(|e| ApiError::Internal(format!("cannot open data root {root}: {e}")))?;
            Ok(Self {
                root: root.trim_end_matches('/').to_string(),
                local: None,
                store: Arc::from(store),
                base,
                options,
                locks: Arc::default(),
                table_store: None,
                scratch: Arc::default(),
                new_table_properties: HashMap::new(),
                staged: None,
                snapshots: None,
            })
        } else {
            let path = PathBuf::from(root.trim_start_matches("file://"));
            std::fs::create_dir_all(&path).map_err(|e| {
                ApiError::Internal(format!("cannot create data root {}: {e}", path.display()))
            })?;
            let path = path.canonicalize().map_err(internal)?;
            let store =
                object_store::local::LocalFileSystem::new_with_prefix(&path).map_err(internal)?;
            Ok(Self {
                root: path.to_string_lossy().trim_end_matches('/').to_string(),
                local: Some(path),
                store: Arc::new(store),
                base: ObjectPath::from(""),
                options,
                locks: Arc::default(),
                table_store: None,
                scratch: Arc::default(),
                new_table_properties: HashMap::new(),
                staged: None,
                snapshots: None,
            })
        }
    }

    /// Give every table created from now on `key = value`, unless its statement sets it.
    pub fn with_new_table_property(mut self, key: &str, value: &str) -> Self {
        self.new_table_properties
            .insert(key.to_string(), value.to_string());
        self
    }

    /// The spec of a new table: the server's default properties under the statement's.
    pub fn table_spec(
        &self,
        schema: arrow::datatypes::Schema,
        partition_columns: Vec<String>,
        mut configuration: HashMap<String, String>,
    ) -> deltalite::TableSpec {
        for (key, value) in &self.new_table_properties {
            configuration
                .entry(key.clone())
                .or_insert_with(|| value.clone());
        }
        deltalite::TableSpec {
            schema,
            partition_columns,
            configuration,
        }
    }

    /// Reach every table through `store` (rooted at the storage root, e.g.
    /// `LocalFileSystem::new()` for a local data root) instead of a store built from each
    /// table's URI. Listings of catalogs and schemas still use the root's own store.
    pub fn with_table_store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.table_store = Some(store);
        self
    }

    /// Reach the data root's own objects (listings of catalogs and schemas, views'
    /// definitions) through `store`, rooted at the data root; tests inject faults so.
    pub fn with_root_store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.store = store;
        self
    }

    /// Keep tables open between queries, holding at most `limit_files` active files
    /// together (`crate::snapshots`); 0 keeps none.
    pub fn with_snapshot_cache(mut self, limit_files: usize) -> Self {
        self.snapshots = (limit_files > 0).then(|| Arc::new(Snapshots::new(limit_files)));
        self
    }

    /// What the query snapshot cache holds, when there is one.
    pub fn snapshot_stats(&self) -> Option<crate::snapshots::SnapshotStats> {
        self.snapshots.as_ref().map(|s| s.stats())
    }

    /// The same data root as seen by the Flight SQL transaction `id`: every table is
    /// opened through a [`StagedLog`] (returned too), so commits to the tables the
    /// transaction pins go to its private log. Locks and scratch catalogs are shared with
    /// `self`.
    pub fn for_transaction(&self, id: &str) -> Result<(Self, Arc<StagedLog>), ApiError> {
        let (inner, root): (Arc<dyn ObjectStore>, ObjectPath) = match &self.local {
            Some(local) => (
                match &self.table_store {
                    Some(store) => Arc::clone(store),
                    None => Arc::new(object_store::local::LocalFileSystem::new()),
                },
                ObjectPath::from_absolute_path(local).map_err(internal)?,
            ),
            None => (
                self.table_store
                    .clone()
                    .unwrap_or_else(|| Arc::clone(&self.store)),
                self.base.clone(),
            ),
        };
        let staged = Arc::new(StagedLog::new(inner, root, id));
        let storage = Self {
            root: self.root.clone(),
            local: self.local.clone(),
            store: Arc::clone(&self.store),
            base: self.base.clone(),
            options: self.options.clone(),
            locks: Arc::clone(&self.locks),
            table_store: Some(Arc::clone(&staged) as Arc<dyn ObjectStore>),
            scratch: Arc::clone(&self.scratch),
            new_table_properties: self.new_table_properties.clone(),
            staged: Some(Arc::clone(&staged)),
            snapshots: None,
        };
        Ok((storage, staged))
    }

    /// A table's folder in the paths of the store tables are opened through.
    pub fn table_path(&self, name: &TableName) -> Result<ObjectPath, ApiError> {
        let parts = [name.catalog.as_str(), &name.schema, &name.table];
        match &self.local {
            Some(local) => {
                let root = ObjectPath::from_absolute_path(local).map_err(internal)?;
                Ok(parts.iter().fold(root, |p, part| p.join(*part)))
            }
            None => Ok(self.object_path(&parts)),
        }
    }

    /// A schema's folder in the paths of the store tables are opened through.
    pub fn schema_path(&self, catalog: &str, schema: &str) -> Result<ObjectPath, ApiError> {
        match &self.local {
            Some(local) => {
                let root = ObjectPath::from_absolute_path(local).map_err(internal)?;
                Ok(root.join(catalog).join(schema))
            }
            None => Ok(self.object_path(&[catalog, schema])),
        }
    }

    /// Where a table is, for the engine to open or create it.
    pub fn location(&self, name: &TableName) -> Result<TableLocation, ApiError> {
        let uri = self.table_uri(name);
        let location = match &self.table_store {
            Some(store) => TableLocation::with_store(&uri, Arc::clone(store)),
            None => TableLocation::new(&uri, self.options.clone()),
        };
        location.map_err(|e| ApiError::from_engine(&format!("cannot open table {name}"), e))
    }

    fn join(&self, parts: &[&str]) -> String {
        let mut out = self.root.clone();
        for p in parts {
            out.push('/');
            out.push_str(p);
        }
        out
    }

    fn object_path(&self, parts: &[&str]) -> ObjectPath {
        let mut path = self.base.clone();
        for p in parts {
            path = path.clone().join(*p);
        }
        path
    }

    /// URI of a table folder, as the engine takes it.
    pub fn table_uri(&self, name: &TableName) -> String {
        self.join(&[&name.catalog, &name.schema, &name.table])
    }

    /// One cheap call to the data root, for the readiness probe: the root's metadata on
    /// a local disk, a listing of one level on an object store.
    pub async fn ping(&self) -> Result<(), ApiError> {
        if let Some(local) = &self.local {
            let local = local.clone();
            return tokio::task::spawn_blocking(move || std::fs::metadata(&local))
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))?
                .map(|_| ())
                .map_err(internal);
        }
        self.store
            .list_with_delimiter(Some(&self.base))
            .await
            .map(|_| ())
            .map_err(internal)
    }

    /// Create a catalog folder (startup).
    pub async fn ensure_catalog(&self, catalog: &str) -> Result<(), ApiError> {
        if let Some(local) = &self.local {
            std::fs::create_dir_all(local.join(catalog)).map_err(internal)?;
        }
        Ok(())
    }

    /// Create the scratch catalog `name` with its `main` schema; `false` (nothing made)
    /// when a catalog or any other folder of that name exists.
    pub async fn create_scratch_catalog(&self, name: &str) -> Result<bool, ApiError> {
        validate_name("catalog", name)?;
        if !self.scratch_names().insert(name.to_string()) {
            return Ok(false);
        }
        let made = self.make_scratch_catalog(name).await;
        if !matches!(made, Ok(true)) {
            self.scratch_names().remove(name);
        }
        made
    }

    async fn make_scratch_catalog(&self, name: &str) -> Result<bool, ApiError> {
        if let Some(local) = &self.local {
            // `create_dir` fails on anything that exists: the check and the claim are one
            // step.
            match std::fs::create_dir(local.join(name)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
                Err(e) => return Err(internal(e)),
            }
            let dir = local.join(name);
            let filled = std::fs::write(dir.join(SCRATCH_MARKER), b"")
                .and_then(|()| std::fs::create_dir(dir.join(DEFAULT_SCHEMA)));
            if let Err(e) = filled {
                // The folder is this call's own: leave nothing behind.
                let _ = std::fs::remove_dir_all(&dir);
                return Err(internal(e));
            }
            return Ok(true);
        }
        let mut list = self.store.list(Some(&self.object_path(&[name])));
        if list.try_next().await.map_err(internal)?.is_some() {
            return Ok(false);
        }
        drop(list);
        let marker = self.object_path(&[name, SCRATCH_MARKER]);
        let create = object_store::PutOptions {
            mode: object_store::PutMode::Create,
            ..Default::default()
        };
        match self
            .store
            .put_opts(&marker, bytes::Bytes::new().into(), create)
            .await
        {
            Ok(_) => {}
            Err(object_store::Error::AlreadyExists { .. }) => return Ok(false),
            Err(e) => return Err(internal(e)),
        }
        self.create_schema(name, DEFAULT_SCHEMA).await?;
        Ok(true)
    }

    /// Remove the scratch catalog `name` and everything in it. A folder without the
    /// scratch marker is left alone (an error): it is not a scratch catalog.
    pub async fn drop_scratch_catalog(&self, name: &str) -> Result<(), ApiError> {
        validate_name("catalog", name)?;
        if !self.is_scratch(name).await? {
            return Err(ApiError::Internal(format!(
                "{name} is not a scratch catalog; left in place"
            )));
        }
        self.delete_prefix(&[name]).await?;
        self.scratch_names().remove(name);
        Ok(())
    }

    /// Remove every scratch catalog under the root but the configured catalogs `keep`
    /// (startup: what a stopped server left); the names removed.
    pub async fn sweep_scratch_catalogs(&self, keep: &[String]) -> Result<Vec<String>, ApiError> {
        let mut removed = Vec::new();
        for name in self.list_children(&[]).await? {
            if !keep.contains(&name)
                && validate_name("catalog", &name).is_ok()
                && self.is_scratch(&name).await?
            {
                self.delete_prefix(&[&name]).await?;
                removed.push(name);
            }
        }
        Ok(removed)
    }

    async fn is_scratch(&self, name: &str) -> Result<bool, ApiError> {
        if let Some(local) = &self.local {
            return Ok(local.join(name).join(SCRATCH_MARKER).is_file());
        }
        match self
            .store
            .head(&self.object_path(&[name, SCRATCH_MARKER]))
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(internal(e)),
        }
    }

    fn scratch_names(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        // A set of names stays consistent if a holder panicked.
        match self.scratch.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        }
    }

    /// Whether a schema exists.
    pub async fn schema_exists(&self, catalog: &str, schema: &str) -> Result<bool, ApiError> {
        if let Some(local) = &self.local {
            return Ok(local.join(catalog).join(schema).is_dir());
        }
        let prefix = self.object_path(&[catalog, schema]);
        let mut list = self.store.list(Some(&prefix));
        Ok(list.try_next().await.map_err(internal)?.is_some())
    }

    /// Create a schema (idempotent); true when it did not exist before.
    pub async fn create_schema(&self, catalog: &str, schema: &str) -> Result<bool, ApiError> {
        let existed = self.schema_exists(catalog, schema).await?;
        if let Some(local) = &self.local {
            std::fs::create_dir_all(local.join(catalog).join(schema)).map_err(internal)?;
            return Ok(!existed);
        }
        let marker = self.object_path(&[catalog, schema, SCHEMA_MARKER]);
        self.store
            .put(&marker, bytes::Bytes::new().into())
            .await
            .map_err(internal)?;
        Ok(!existed)
    }

    /// Schemas of a catalog, sorted.
    pub async fn list_schemas(&self, catalog: &str) -> Result<Vec<String>, ApiError> {
        self.list_children(&[catalog]).await
    }

    /// The schemas a listing shows for a catalog, sorted: its schemas and `main`, which
    /// every catalog has (DuckDB's default schema; its folder is made by its first table).
    pub async fn shown_schemas(&self, catalog: &str) -> Result<Vec<String>, ApiError> {
        let mut schemas = self.list_schemas(catalog).await?;
        if let Err(at) = schemas.binary_search_by(|s| s.as_str().cmp(DEFAULT_SCHEMA)) {
            schemas.insert(at, DEFAULT_SCHEMA.to_string());
        }
        Ok(schemas)
    }

    /// Tables (folders with a `_delta_log`) of a schema, sorted; the folders are asked a
    /// few at once (on an object store each ask is a request).
    pub async fn list_tables(&self, catalog: &str, schema: &str) -> Result<Vec<String>, ApiError> {
        let children = self.list_children(&[catalog, schema]).await?;
        let names = children
            .into_iter()
            .map(|table| TableName {
                catalog: catalog.to_string(),
                schema: schema.to_string(),
                table,
            })
            .collect();
        Ok(self
            .existing_tables(names)
            .await?
            .into_iter()
            .map(|name| name.table)
            .collect())
    }

    async fn has_delta_log(&self, name: &TableName) -> Result<bool, ApiError> {
        if let Some(staged) = &self.staged
            && let Some(has) = staged
                .has_log(&self.table_path(name)?)
                .await
                .map_err(internal)?
        {
            return Ok(has);
        }
        if let Some(local) = &self.local {
            return Ok(local
                .join(&name.catalog)
                .join(&name.schema)
                .join(&name.table)
                .join("_delta_log")
                .is_dir());
        }
        let prefix = self.object_path(&[&name.catalog, &name.schema, &name.table, "_delta_log"]);
        let mut list = self.store.list(Some(&prefix));
        Ok(list.try_next().await.map_err(internal)?.is_some())
    }

    /// Folders inside a schema (tables or leftovers), sorted.
    pub async fn list_schema_children(
        &self,
        catalog: &str,
        schema: &str,
    ) -> Result<Vec<String>, ApiError> {
        self.list_children(&[catalog, schema]).await
    }

    /// Whether a table exists.
    pub async fn table_exists(&self, name: &TableName) -> Result<bool, ApiError> {
        self.has_delta_log(name).await
    }

    async fn list_children(&self, parts: &[&str]) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        if let Some(local) = &self.local {
            let mut p = local.clone();
            for part in parts {
                p.push(part);
            }
            let Ok(entries) = std::fs::read_dir(&p) else {
                return Ok(out);
            };
            for entry in entries.flatten() {
                if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    let name = entry.file_name().to_string_lossy().to_string();
                    if !name.starts_with('.') {
                        out.push(name);
                    }
                }
            }
        } else {
            let prefix = self.object_path(parts);
            let listing = self
                .store
                .list_with_delimiter(Some(&prefix))
                .await
                .map_err(internal)?;
            for p in listing.common_prefixes {
                if let Some(name) = p.filename()
                    && !name.starts_with('.')
                {
                    out.push(name.to_string());
                }
            }
        }
        out.sort();
        Ok(out)
    }

    async fn delete_prefix(&self, parts: &[&str]) -> Result<(), ApiError> {
        if let Some(local) = &self.local {
            let mut p = local.clone();
            for part in parts {
                p.push(part);
            }
            return match std::fs::remove_dir_all(&p) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(internal(e)),
            };
        }
        let prefix = self.object_path(parts);
        let paths: Vec<ObjectPath> = self
            .store
            .list(Some(&prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(internal)?;
        for path in paths {
            match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(internal(e)),
            }
        }
        Ok(())
    }

    /// Remove a table folder and everything in it.
    pub async fn drop_table(&self, name: &TableName) -> Result<(), ApiError> {
        self.delete_prefix(&[&name.catalog, &name.schema, &name.table])
            .await
    }

    /// Give a table folder another name in its schema (`ALTER TABLE … RENAME TO`). The
    /// caller holds both names' table locks and has checked that `to` is free. On a local
    /// disk this is one directory rename (atomic); on an object store every object is
    /// copied, then the originals deleted (a reader in between sees the table under both
    /// names). The Delta log names its files relative to the table, so the copy is the
    /// same table.
    pub async fn rename_table(&self, from: &TableName, to: &TableName) -> Result<(), ApiError> {
        self.rename_folder(
            &[&from.catalog, &from.schema, &from.table],
            &[&to.catalog, &to.schema, &to.table],
        )
        .await?;
        // A transaction's staged commits follow the table.
        if let Some(staged) = &self.staged {
            staged
                .follow_rename(&self.table_path(from)?, &self.table_path(to)?)
                .await
                .map_err(internal)?;
        }
        Ok(())
    }

    /// Move the folder `from` (catalog, schema or table parts) to `to`, which the caller
    /// has checked is free: as [`Storage::rename_table`] does, for any folder.
    pub async fn rename_folder(&self, from: &[&str], to: &[&str]) -> Result<(), ApiError> {
        if let Some(local) = &self.local {
            let path = |parts: &[&str]| {
                let mut p = local.clone();
                p.extend(parts);
                p
            };
            let (src, dst) = (path(from), path(to));
            return tokio::task::spawn_blocking(move || std::fs::rename(src, dst))
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))?
                .map_err(internal);
        }
        let src = self.object_path(from);
        let dst = self.object_path(to);
        let objects: Vec<ObjectPath> = self
            .store
            .list(Some(&src))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(internal)?;
        for object in &objects {
            let rest: Vec<_> = object.prefix_match(&src).into_iter().flatten().collect();
            let target = rest.into_iter().fold(dst.clone(), |p, part| p.join(part));
            self.store.copy(object, &target).await.map_err(internal)?;
        }
        self.delete_prefix(from).await
    }

    /// Remove a table's folder if nothing is in it (a local data root's directory left by
    /// a table that was never committed); object stores have no empty folders.
    pub async fn remove_empty_table_folder(&self, name: &TableName) {
        if let Some(local) = &self.local {
            let path = local
                .join(&name.catalog)
                .join(&name.schema)
                .join(&name.table);
            // Fails, and is meant to, when anything is in it.
            let _ = tokio::fs::remove_dir(path).await;
        }
    }

    /// Remove a folder set aside by [`set_aside_name`] (catalog, schema or table parts).
    pub async fn delete_folder(&self, parts: &[&str]) -> Result<(), ApiError> {
        self.delete_prefix(parts).await
    }

    /// The definition stored for view `name` (`None`: no such view). Views are JSON
    /// objects in a hidden folder of their schema (`<schema>/.deltalite_views/<view>.json`),
    /// next to the tables, so they last as long as the data and move with it.
    pub async fn get_view(&self, name: &TableName) -> Result<Option<Vec<u8>>, ApiError> {
        match self.store.get(&self.view_path(name)).await {
            Ok(r) => Ok(Some(r.bytes().await.map_err(internal)?.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(internal(e)),
        }
    }

    /// Store (or replace) a view's definition: one object put, atomic.
    pub async fn put_view(&self, name: &TableName, definition: Vec<u8>) -> Result<(), ApiError> {
        self.store
            .put(&self.view_path(name), definition.into())
            .await
            .map(|_| ())
            .map_err(internal)
    }

    /// Remove a view's definition (a missing one is fine).
    pub async fn delete_view(&self, name: &TableName) -> Result<(), ApiError> {
        match self.store.delete(&self.view_path(name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(internal(e)),
        }
    }

    /// The views of a schema, sorted.
    pub async fn list_views(&self, catalog: &str, schema: &str) -> Result<Vec<String>, ApiError> {
        let prefix = self.object_path(&[catalog, schema, VIEWS_FOLDER]);
        let objects: Vec<ObjectPath> = self
            .store
            .list(Some(&prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(internal)?;
        let mut out: Vec<String> = objects
            .iter()
            .filter_map(|p| p.filename()?.strip_suffix(".json").map(str::to_string))
            .collect();
        out.sort();
        Ok(out)
    }

    fn view_path(&self, name: &TableName) -> ObjectPath {
        self.object_path(&[&name.catalog, &name.schema, VIEWS_FOLDER])
            .join(format!("{}.json", name.table))
    }

    /// Remove a schema that holds nothing (no table, no view, no other folder): what a
    /// failed request that created it leaves. Returns whether it was removed.
    pub async fn drop_empty_schema(&self, catalog: &str, schema: &str) -> Result<bool, ApiError> {
        if !self.schema_is_empty(catalog, schema).await? {
            return Ok(false);
        }
        self.drop_schema(catalog, schema).await?;
        Ok(true)
    }

    /// Whether a schema holds no table, no view and no other folder (hidden folders, such
    /// as the views' own, do not count).
    pub async fn schema_is_empty(&self, catalog: &str, schema: &str) -> Result<bool, ApiError> {
        Ok(self.list_tables(catalog, schema).await?.is_empty()
            && self.list_views(catalog, schema).await?.is_empty()
            && self.list_schema_children(catalog, schema).await?.is_empty())
    }

    /// Remove a schema folder and everything in it.
    pub async fn drop_schema(&self, catalog: &str, schema: &str) -> Result<(), ApiError> {
        self.delete_prefix(&[catalog, schema]).await
    }

    /// Open a table for a query: kept open from an earlier query when the storage keeps
    /// tables ([`Storage::with_snapshot_cache`]), brought up to date; `Ok(None)` when it
    /// does not exist.
    pub async fn open_table_for_query(
        &self,
        name: &TableName,
    ) -> Result<Option<DeltaLiteTable>, ApiError> {
        let Some(snapshots) = &self.snapshots else {
            return self.open_table(name).await;
        };
        let uri = self.table_uri(name);
        if !self.table_exists(name).await? {
            snapshots.forget(&uri);
            return Ok(None);
        }
        if let Some(table) = snapshots.refreshed(&uri).await {
            return Ok(Some(table));
        }
        let opened = self.open_existing(name).await?;
        if let Some(table) = &opened {
            snapshots.keep(&uri, table).await;
        }
        Ok(opened)
    }

    /// [`Storage::open_table_for_query`] for each of `names`, a few at once; in the order
    /// of `names`, each with `None` when it is no table (any more).
    pub async fn open_tables_for_query(
        &self,
        names: Vec<TableName>,
    ) -> Result<Vec<(TableName, Option<DeltaLiteTable>)>, ApiError> {
        futures::stream::iter(names)
            .map(|name| async move {
                let table = self.open_table_for_query(&name).await?;
                Ok::<_, ApiError>((name, table))
            })
            .buffered(OPEN_AT_ONCE)
            .try_collect()
            .await
    }

    /// Those of `names` that are tables (have a Delta log), asked a few at once, in the
    /// order of `names`.
    pub async fn existing_tables(&self, names: Vec<TableName>) -> Result<Vec<TableName>, ApiError> {
        let exists: Vec<bool> = futures::stream::iter(names.clone())
            .map(|name| async move { self.table_exists(&name).await })
            .buffered(OPEN_AT_ONCE)
            .try_collect()
            .await?;
        Ok(names
            .into_iter()
            .zip(exists)
            .filter_map(|(name, is)| is.then_some(name))
            .collect())
    }

    /// Open a table; `Ok(None)` when it does not exist.
    pub async fn open_table(&self, name: &TableName) -> Result<Option<DeltaLiteTable>, ApiError> {
        if !self.table_exists(name).await? {
            return Ok(None);
        }
        self.open_existing(name).await
    }

    /// Open a table whose log was just found; `Ok(None)` when it is gone by now.
    async fn open_existing(&self, name: &TableName) -> Result<Option<DeltaLiteTable>, ApiError> {
        match self.location(name)?.open().await {
            Ok(t) => Ok(Some(t)),
            Err(deltalite::DeltaLiteError::TableNotFound(_)) => Ok(None),
            // Dropped between the check and the read of its log (a concurrent `DROP`):
            // gone, not broken, so listings (information_schema) skip it.
            Err(_) if !self.table_exists(name).await? => Ok(None),
            Err(e) => Err(ApiError::from_engine(
                &format!("cannot open table {name}"),
                e,
            )),
        }
    }

    /// The per-table writer lock: every request that holds the returned handle at the
    /// same time gets the same lock.
    pub fn table_lock(&self, name: &TableName) -> Arc<tokio::sync::Mutex<()>> {
        let key = name.to_string();
        let mut locks = self.table_locks();
        if let Some(lock) = locks.map.get(&key).and_then(Weak::upgrade) {
            return lock;
        }
        if locks.map.len() >= locks.sweep_at {
            locks.map.retain(|_, lock| lock.strong_count() > 0);
            locks.sweep_at = (2 * locks.map.len()).max(MIN_LOCK_SWEEP);
        }
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        locks.map.insert(key, Arc::downgrade(&lock));
        lock
    }

    /// Entries in the writer-lock map (live or not yet swept), for `/metrics`.
    pub fn table_lock_count(&self) -> usize {
        self.table_locks().map.len()
    }

    fn table_locks(&self) -> std::sync::MutexGuard<'_, TableLocks> {
        // The map stays consistent if a holder panicked: use it rather than fail.
        match self.locks.lock() {
            Ok(l) => l,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_staged_table_renames_with_its_private_log() {
        let dir = tempfile::tempdir().expect("tmp");
        let real = Storage::open(dir.path().to_str().expect("utf8"), HashMap::new()).expect("open");
        let (txn, staged) = real.for_transaction("t1").expect("txn");
        let a = TableName::new("c", "s", "a").expect("a");
        let b = TableName::new("c", "s", "b").expect("b");
        staged.pin(txn.table_path(&a).expect("path"), None);
        let schema = arrow::datatypes::Schema::new(vec![arrow::datatypes::Field::new(
            "x",
            arrow::datatypes::DataType::Int64,
            true,
        )]);
        let spec = txn.table_spec(schema, Vec::new(), HashMap::new());
        txn.location(&a)
            .expect("loc")
            .create(&spec, deltalite::InitialData::Empty, &Default::default())
            .await
            .expect("create");
        assert!(txn.table_exists(&a).await.expect("exists"));
        assert!(!real.table_exists(&a).await.expect("exists"));
        txn.rename_table(&a, &b).await.expect("rename");
        assert!(!txn.table_exists(&a).await.expect("exists"));
        assert!(txn.table_exists(&b).await.expect("exists"));
        assert!(txn.open_table(&b).await.expect("open").is_some());
    }

    #[test]
    fn names_that_escape_are_rejected() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            "x\0y",
            "a\nb",
            ".hidden",
            "%2e%2e",
            "a%2Fb",
            "_delta_log",
        ] {
            assert!(validate_name("table", bad).is_err(), "{bad:?}");
        }
        for good in ["items", "_dlt_loads", "Ünïcode", "with space", "a.b"] {
            assert!(validate_name("table", good).is_ok(), "{good:?}");
        }
    }
}

//! Flight SQL transactions (`BeginTransaction` / `EndTransaction`).
//!
//! Writes to tables are staged: before a statement of the transaction writes a table, the
//! transaction pins it at its current version (or at "no table"), and from then on the
//! session reads and commits that table through the transaction's [`StagedLog`], whose
//! commits go to a private folder. The session reads its own writes; no other session
//! sees any of them. COMMIT publishes each pinned table's staged changes as one Delta
//! commit (`deltalite::TableLocation::publish`), table by table in name order, under the
//! engine's conflict rule with the pinned version as the read version: changes that only
//! add rows are rebased over commits others made since, any other change aborts when
//! someone else changed the table since it was pinned. ROLLBACK (or a session that
//! closes or expires with the transaction open) deletes the private commits and the
//! files they added: nothing of them was ever visible.
//!
//! Namespace changes are not staged (they are folder moves, not Delta commits). A rename
//! happens at once; a staged table's commits follow it, and ROLLBACK renames it back.
//! `DROP TABLE` and `DROP SCHEMA` move the folder aside under a name no statement can
//! spell (`catalog::set_aside_name`): others see it gone at once, COMMIT deletes it,
//! ROLLBACK moves it back whole (a dropped table's staged commits are discarded at the
//! drop). A dropped table or schema whose name someone took meanwhile stays dropped and
//! is named in the rollback's error. `VACUUM` and `DETACH` are refused inside a
//! transaction: nothing could bring back what they delete.

use std::collections::BTreeMap;
use std::sync::Arc;

use tonic::Status;

use super::result::status;
use super::session::Session;
use crate::catalog::{Storage, TableName};
use crate::sql::targets::{Dropped, Write};
use crate::staged_log::{PRIVATE_FOLDER, StagedLog};

/// Lost races a COMMIT rebases over per table before it gives up.
const PUBLISH_RETRIES: usize = 10;

/// One open transaction of a session.
#[derive(Debug)]
pub struct Transaction {
    /// The id the client sends with each statement of the transaction.
    pub id: Vec<u8>,
    /// The same id in hex: the name of its private folder.
    folder: String,
    /// The data root as the transaction sees it: pinned tables through `staged`.
    storage: Arc<Storage>,
    staged: Arc<StagedLog>,
    /// Namespace changes to undo, oldest first.
    steps: Vec<Step>,
    /// The tables pinned, by current name, and their versions at the pin.
    tables: BTreeMap<TableName, Option<u64>>,
}

#[derive(Debug)]
enum Step {
    /// `from` was renamed `to`.
    Renamed { from: TableName, to: TableName },
    /// A table or schema was dropped by moving it aside.
    SetAside(Dropped),
}

/// Why a table could not be published.
enum Failure {
    /// Others changed it since the pin: the COMMIT is refused (`ABORTED`).
    Conflict(String),
    /// Reading or writing it failed.
    Error(crate::error::ApiError),
}

impl Failure {
    fn engine(name: &TableName, base: Option<u64>, e: deltalite::DeltaLiteError) -> Self {
        match e {
            deltalite::DeltaLiteError::CommitConflict(_) => Failure::Conflict(conflict(base)),
            e => Failure::Error(crate::error::ApiError::from_engine(&name.to_string(), e)),
        }
    }
}

/// Why a table's staged changes conflict, for the COMMIT's error.
fn conflict(base: Option<u64>) -> String {
    match base {
        Some(_) => "another session changed the table since this transaction first wrote it",
        None => "another session created the table since this transaction did",
    }
    .to_string()
}

/// The text of a statement sent with a transaction id that is not the session's open
/// transaction.
pub fn unknown_transaction() -> Status {
    Status::not_found(
        "TransactionContext Error: unknown transaction (committed, rolled back, or another session's); begin a new one",
    )
}

impl Transaction {
    /// A new transaction over the data root `storage`.
    pub fn new(storage: &Storage) -> Result<Self, Status> {
        let id = uuid::Uuid::new_v4();
        let folder = id.simple().to_string();
        let (view, staged) = storage.for_transaction(&folder).map_err(status)?;
        Ok(Self {
            id: id.as_bytes().to_vec(),
            folder,
            storage: Arc::new(view),
            staged,
            steps: Vec::new(),
            tables: BTreeMap::new(),
        })
    }

    /// The data root as the transaction's statements see it.
    pub fn storage(&self) -> Arc<Storage> {
        Arc::clone(&self.storage)
    }

    /// The tables of `writes` that are written by Delta commits and not pinned yet.
    pub fn unpinned(&self, writes: &[Write]) -> Vec<TableName> {
        writes
            .iter()
            .filter_map(|w| match w {
                Write::Table(name) if !self.tables.contains_key(name) => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    /// Pin `name` at `version` (its real version now; `None`: no table).
    pub fn pin(&mut self, name: TableName, version: Option<u64>) -> Result<(), Status> {
        let path = self.storage.table_path(&name).map_err(status)?;
        self.staged.pin(path, version);
        self.tables.entry(name).or_insert(version);
        Ok(())
    }

    /// Note what a statement did to the namespace: the renames it made (`renamed`: the
    /// writes' renames that happened) and the tables and schemas it dropped by moving them
    /// aside. Returns the private folders of dropped staged tables, to delete.
    pub fn after(
        &mut self,
        renamed: Vec<(TableName, TableName)>,
        dropped: Vec<Dropped>,
    ) -> Result<Vec<object_store::path::Path>, Status> {
        for (from, to) in renamed {
            if let Some(version) = self.tables.remove(&from) {
                self.tables.insert(to.clone(), version);
            }
            self.steps.push(Step::Renamed { from, to });
        }
        let mut folders = Vec::new();
        for d in dropped {
            let path = match &d {
                Dropped::Table { name, .. } => self.storage.table_path(name),
                Dropped::Schema {
                    catalog, schema, ..
                } => self.storage.schema_path(catalog, schema),
            }
            .map_err(status)?;
            folders.extend(self.staged.unpin_under(&path));
            self.tables.retain(|name, _| !d.covers(name));
            self.steps.push(Step::SetAside(d));
        }
        Ok(folders)
    }

    /// The transaction's view of the pinned tables' logs.
    pub fn staged_log(&self) -> Arc<StagedLog> {
        Arc::clone(&self.staged)
    }

    /// Publish every staged table (see the module documentation), then delete what the
    /// drops set aside. Every table is planned and checked against what others committed
    /// since its pin before any is committed, so a conflict seen then commits nothing; a
    /// conflict that arises between two tables' commits leaves the tables published
    /// before it, named in the error. What is not published is deleted.
    pub async fn commit(self, real: &Storage) -> Result<(), Status> {
        let locks: Vec<_> = self.tables.keys().map(|n| real.table_lock(n)).collect();
        let mut guards = Vec::with_capacity(locks.len());
        for lock in &locks {
            guards.push(lock.lock().await);
        }
        let mut failure: Option<(TableName, Failure)> = None;
        let mut plans = Vec::new();
        for (name, base) in &self.tables {
            match self.plan(real, name, *base).await {
                Ok(Some(plan)) => plans.push((name.clone(), *base, plan)),
                Ok(None) => {}
                Err(e) => {
                    failure = Some((name.clone(), e));
                    break;
                }
            }
        }
        if failure.is_none() {
            for (name, base, plan) in &plans {
                match plan.conflicts().await {
                    Ok(false) => {}
                    Ok(true) => {
                        failure = Some((name.clone(), Failure::Conflict(conflict(*base))));
                        break;
                    }
                    Err(e) => {
                        failure = Some((name.clone(), Failure::engine(name, *base, e)));
                        break;
                    }
                }
            }
        }
        let mut published = Vec::new();
        if failure.is_none() {
            for (name, base, plan) in plans {
                match plan.commit(&Default::default(), PUBLISH_RETRIES).await {
                    Ok(_) => published.push(name),
                    Err(e) => {
                        let why = Failure::engine(&name, base, e);
                        failure = Some((name, why));
                        break;
                    }
                }
            }
        }
        drop(guards);
        if failure.is_some() {
            let rest: Vec<_> = self
                .tables
                .iter()
                .filter(|(n, _)| !published.contains(n))
                .map(|(n, v)| (n.clone(), *v))
                .collect();
            self.discard_files(real, rest).await;
        }
        self.discard_log(real).await;
        for step in &self.steps {
            if let Step::SetAside(dropped) = step
                && let Err(e) = real.delete_folder(&dropped.aside()).await
            {
                tracing::warn!(
                    folder = dropped.aside().join("/"),
                    error = %e,
                    "transaction commit: a dropped folder set aside was not deleted"
                );
            }
        }
        let Some((failed, e)) = failure else {
            return Ok(());
        };
        let kept = if published.is_empty() {
            "nothing of the transaction was committed".to_string()
        } else {
            let names: Vec<String> = published.iter().map(|n| n.to_string()).collect();
            format!("already committed: {}", names.join(", "))
        };
        Err(match e {
            Failure::Conflict(why) => Status::aborted(format!(
                "TransactionContext Error: Conflict on {failed}: {why}; {kept}"
            )),
            // A storage failure keeps its own status (UNAVAILABLE when transient: the
            // client may run the transaction again).
            Failure::Error(e) => {
                let s = status(e);
                Status::new(
                    s.code(),
                    format!(
                        "TransactionContext Error: COMMIT of {failed} failed: {}; {kept}",
                        s.message()
                    ),
                )
            }
        })
    }

    /// `name`'s staged changes as a plan to publish; `None` when there are none.
    async fn plan(
        &self,
        real: &Storage,
        name: &TableName,
        base: Option<u64>,
    ) -> Result<Option<deltalite::PublishPlan>, Failure> {
        let staged = match self.storage.open_table(name).await {
            Ok(Some(t)) => t,
            // Never created (its CREATE failed): nothing to publish.
            Ok(None) => return Ok(None),
            Err(e) => return Err(Failure::Error(e)),
        };
        if base == Some(staged.version()) {
            return Ok(None);
        }
        let location = real.location(name).map_err(Failure::Error)?;
        location
            .plan_publish(base, &staged)
            .await
            .map(Some)
            .map_err(|e| Failure::engine(name, base, e))
    }

    /// Delete the files the staged commits of `tables` added (best effort: what is left
    /// is an orphan that vacuum removes).
    async fn discard_files(&self, real: &Storage, tables: Vec<(TableName, Option<u64>)>) {
        for (name, base) in tables {
            let staged = match self.storage.open_table(&name).await {
                Ok(Some(t)) => t,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(table = %name, error = %e, "transaction: cannot read a staged table to discard it");
                    continue;
                }
            };
            if base == Some(staged.version()) {
                continue;
            }
            let discarded = match real.location(&name) {
                Ok(location) => location
                    .discard_staged(base, &staged)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = discarded {
                tracing::warn!(table = %name, error = %e, "transaction: staged files were not deleted");
            }
            if base.is_none() {
                real.remove_empty_table_folder(&name).await;
            }
        }
    }

    /// Delete the private commits (the whole private folder).
    async fn discard_log(&self, real: &Storage) {
        if let Err(e) = real.delete_folder(&[PRIVATE_FOLDER, &self.folder]).await {
            tracing::warn!(error = %e, "transaction: its private log was not deleted");
        }
    }

    /// Discard the staged writes, then undo the namespace changes, newest first.
    pub async fn rollback(self, real: &Storage) -> Result<(), Status> {
        let tables: Vec<_> = self.tables.iter().map(|(n, v)| (n.clone(), *v)).collect();
        self.discard_files(real, tables).await;
        self.discard_log(real).await;
        let storage = real;
        let mut untouched: Vec<String> = Vec::new();
        let mut skip = std::collections::HashSet::new();
        let mut taken = Vec::new();
        for step in self.steps.into_iter().rev() {
            match step {
                Step::SetAside(dropped) => {
                    if let Some(name) = put_back(storage, &dropped).await? {
                        taken.push(name);
                    }
                }
                Step::Renamed { from, to } => {
                    if skip.contains(&to) {
                        skip.insert(from);
                        continue;
                    }
                    let (a, b) = (storage.table_lock(&from), storage.table_lock(&to));
                    let (_a, _b) = (a.lock().await, b.lock().await);
                    // A table the transaction created (discarded above) has nothing to
                    // move back.
                    if !storage.table_exists(&to).await.map_err(status)? {
                        continue;
                    }
                    if storage.table_exists(&from).await.map_err(status)? {
                        untouched.push(to.to_string());
                        skip.insert(from);
                        continue;
                    }
                    storage.rename_table(&to, &from).await.map_err(status)?;
                }
            }
        }
        untouched.retain(|n| !taken.contains(n));
        untouched.sort();
        untouched.dedup();
        let mut except = Vec::new();
        if !untouched.is_empty() {
            except.push(format!(
                "{}: renamed by this transaction, and another table took the old name since, so it keeps the new one",
                untouched.join(", ")
            ));
        }
        if !taken.is_empty() {
            except.push(format!(
                "{}: dropped by this transaction and its name taken by another session since, so it stays dropped",
                taken.join(", ")
            ));
        }
        if except.is_empty() {
            return Ok(());
        }
        Err(Status::aborted(format!(
            "TransactionContext Error: rolled back, except {}",
            except.join("; ")
        )))
    }
}

/// Move a dropped table or schema back where it was; the name, when someone has taken it
/// meanwhile (the drop then stands: the folder set aside is deleted). A schema this transaction made again
/// (`DROP SCHEMA s; CREATE SCHEMA s`) and left empty does not count as taken.
async fn put_back(storage: &Storage, dropped: &Dropped) -> Result<Option<String>, Status> {
    let taken = match dropped {
        Dropped::Table { name, .. } => {
            let lock = storage.table_lock(name);
            let _guard = lock.lock().await;
            storage
                .table_exists(name)
                .await
                .map_err(super::result::status)?
                || storage
                    .get_view(name)
                    .await
                    .map_err(super::result::status)?
                    .is_some()
        }
        Dropped::Schema {
            catalog, schema, ..
        } => {
            let exists = storage
                .schema_exists(catalog, schema)
                .await
                .map_err(super::result::status)?;
            if exists
                && storage
                    .schema_is_empty(catalog, schema)
                    .await
                    .map_err(super::result::status)?
            {
                storage
                    .drop_schema(catalog, schema)
                    .await
                    .map_err(super::result::status)?;
                false
            } else {
                exists
            }
        }
    };
    if taken {
        // What COMMIT would have done with it.
        storage
            .delete_folder(&dropped.aside())
            .await
            .map_err(super::result::status)?;
        return Ok(Some(dropped.folder().join(".")));
    }
    storage
        .rename_folder(&dropped.aside(), &dropped.folder())
        .await
        .map_err(super::result::status)?;
    Ok(None)
}

/// The current version of a table; `None` when there is no such table.
pub async fn version(storage: &Storage, name: &TableName) -> Result<Option<u64>, Status> {
    Ok(storage
        .open_table(name)
        .await
        .map_err(status)?
        .map(|t| t.version()))
}

/// Before a statement of the open transaction `id` runs with `writes`: pin the tables it
/// writes at their current versions. Returns the storage the statement runs on.
pub async fn before_statement(
    real: &Storage,
    session: &Session,
    id: &[u8],
    writes: &[Write],
) -> Result<Arc<Storage>, Status> {
    let (storage, unpinned) =
        session.with_transaction(id, |t| (t.storage(), t.unpinned(writes)))?;
    let mut versions = Vec::with_capacity(unpinned.len());
    for name in unpinned {
        let v = version(real, &name).await?;
        versions.push((name, v));
    }
    session.with_transaction(id, |t| {
        versions
            .into_iter()
            .try_for_each(|(name, v)| t.pin(name, v))
    })??;
    Ok(storage)
}

/// After a statement of the open transaction `id` ran (also after a failure: what it did
/// to the namespace before failing stays done): note its renames and what its drops set
/// aside.
pub async fn after_statement(
    session: &Session,
    id: &[u8],
    storage: &Storage,
    writes: &[Write],
    dropped: Vec<Dropped>,
) -> Result<(), Status> {
    let mut renamed = Vec::new();
    for write in writes {
        if let Write::Rename(from, to) = write
            && !storage.table_exists(from).await.map_err(status)?
            && storage.table_exists(to).await.map_err(status)?
        {
            renamed.push((from.clone(), to.clone()));
        }
    }
    let (folders, staged) = session.with_transaction(id, |t| {
        t.after(renamed, dropped).map(|f| (f, t.staged_log()))
    })??;
    staged
        .delete_folders(folders)
        .await
        .map_err(|e| Status::internal(format!("transaction: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A conflict refuses the COMMIT (`ABORTED`); a storage failure keeps its own,
    /// retryable status instead of passing for a conflict.
    #[test]
    fn publish_failures_are_conflicts_or_storage_errors() {
        let name = TableName::new("c", "s", "t").expect("name");
        let conflict = Failure::engine(
            &name,
            Some(3),
            deltalite::DeltaLiteError::CommitConflict("lost".into()),
        );
        assert!(
            matches!(conflict, Failure::Conflict(ref why) if why == "another session changed the table since this transaction first wrote it")
        );
        let transient = Failure::engine(
            &name,
            Some(3),
            deltalite::DeltaLiteError::ObjectStore(object_store::Error::Generic {
                store: "S3",
                source: "503 Slow Down".into(),
            }),
        );
        let Failure::Error(e) = transient else {
            panic!("a storage failure is not a conflict");
        };
        assert_eq!(status(e).code(), tonic::Code::Unavailable);
    }
}

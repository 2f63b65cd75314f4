//! Flight SQL transactions (`BeginTransaction` / `EndTransaction`).
//!
//! What they mean here: Delta commits one table at a time, so a transaction is an undo
//! record, not a private workspace. Each statement carrying the transaction's id runs
//! and commits as it comes (the session reads its own writes at once; so do other
//! sessions). Before its first write to a table the transaction notes the table's
//! version (or that it did not exist), and it notes each rename. `DROP TABLE` and `DROP
//! SCHEMA` move the folder aside under a name no statement can spell
//! (`catalog::set_aside_name`) instead of deleting it. COMMIT keeps everything and deletes
//! what was set aside. ROLLBACK undoes the steps in reverse: a dropped table or schema is
//! moved back, a rename is renamed back, a table it created is dropped, any other is
//! restored to the noted version by one Delta restore commit (the history keeps the
//! undone commits; time travel still sees them). A table someone else wrote since the
//! transaction's last write to it is left alone and named in the rollback's error,
//! because restoring it would undo their commit too; so is a dropped table or schema whose
//! name someone has taken meanwhile. `VACUUM` and `DETACH` are refused inside a
//! transaction: nothing could bring back what they delete. A session that ends (closed,
//! expired, evicted) with a transaction open rolls it back.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tonic::Status;

use crate::catalog::{Storage, TableName};
use crate::sql::targets::{Dropped, Write};

/// One open transaction of a session.
#[derive(Debug)]
pub struct Transaction {
    /// The id the client sends with each statement of the transaction.
    pub id: Vec<u8>,
    /// What to undo, oldest first.
    steps: Vec<Step>,
    /// The version each table the transaction wrote should have now (`None`: no table),
    /// by its current name.
    expect: HashMap<TableName, Option<u64>>,
    /// Tables someone else wrote after this transaction did: never touched by a rollback.
    foreign: HashSet<TableName>,
}

#[derive(Debug)]
enum Step {
    /// The first write to `name` (since it got that name): its version before
    /// (`None`: the transaction created it).
    Written {
        name: TableName,
        before: Option<u64>,
    },
    /// `from` was renamed `to`.
    Renamed { from: TableName, to: TableName },
    /// A table or schema was dropped by moving it aside.
    SetAside(Dropped),
}

/// The text of a statement sent with a transaction id that is not the session's open
/// transaction.
pub fn unknown_transaction() -> Status {
    Status::not_found(
        "TransactionContext Error: unknown transaction (committed, rolled back, or another session's); begin a new one",
    )
}

impl Transaction {
    pub fn new() -> Self {
        Self {
            id: uuid::Uuid::new_v4().as_bytes().to_vec(),
            steps: Vec::new(),
            expect: HashMap::new(),
            foreign: HashSet::new(),
        }
    }

    /// The version `name` had before the transaction first wrote it under that name:
    /// `Some(None)` when the transaction created it, `None` when it has not written it
    /// (or not since a rename gave it that name).
    fn written_before(&self, name: &TableName) -> Option<Option<u64>> {
        for step in self.steps.iter().rev() {
            match step {
                Step::Written { name: n, before } if n == name => return Some(*before),
                Step::Renamed { from, to } if from == name || to == name => return None,
                // Dropped since: a table of that name now is a new one.
                Step::SetAside(dropped) if dropped.covers(name) => return None,
                _ => {}
            }
        }
        None
    }

    /// Note what the tables of `writes` are now (`versions`: one per name of
    /// `Write::names`, in order), before a statement of the transaction writes them.
    pub fn before(&mut self, writes: &[Write], versions: &[Option<u64>]) -> Result<(), Status> {
        let names: Vec<&TableName> = writes.iter().flat_map(Write::names).collect();
        for (name, version) in names.iter().zip(versions) {
            if let Some(expected) = self.expect.get(*name)
                && expected != version
            {
                self.foreign.insert((*name).clone());
            }
        }
        for (write, version) in writes.iter().zip(Self::per_write(writes, versions)) {
            if let Write::Table(name) | Write::Drop(name) = write
                && self.written_before(name).is_none()
            {
                self.steps.push(Step::Written {
                    name: name.clone(),
                    before: version[0],
                });
            }
        }
        Ok(())
    }

    /// The versions of each write's names.
    fn per_write<'a>(
        writes: &'a [Write],
        versions: &'a [Option<u64>],
    ) -> impl Iterator<Item = &'a [Option<u64>]> {
        let mut at = 0;
        writes.iter().map(move |w| {
            let n = w.names().len();
            let slice = &versions[at..at + n];
            at += n;
            slice
        })
    }

    /// Note what the tables of `writes` are after the statement ran.
    pub fn after(&mut self, writes: &[Write], versions: &[Option<u64>]) {
        for (write, version) in writes.iter().zip(Self::per_write(writes, versions)) {
            match write {
                Write::Table(name) | Write::Drop(name) => {
                    self.expect.insert(name.clone(), version[0]);
                }
                Write::Rename(from, to) => {
                    // Done when the table is under its new name only.
                    if version[0].is_none() && version[1].is_some() {
                        self.steps.push(Step::Renamed {
                            from: from.clone(),
                            to: to.clone(),
                        });
                        if self.foreign.remove(from) {
                            self.foreign.insert(to.clone());
                        }
                    }
                    self.expect.insert(from.clone(), version[0]);
                    self.expect.insert(to.clone(), version[1]);
                }
                // Its tables went with it: none of them is there now, as it should be.
                Write::DropSchema { catalog, schema } => {
                    for (name, version) in self.expect.iter_mut() {
                        if &name.catalog == catalog && &name.schema == schema {
                            *version = None;
                        }
                    }
                }
            }
        }
    }

    /// Note the tables and schemas a statement dropped by moving them aside.
    pub fn set_aside(&mut self, dropped: Vec<Dropped>) {
        self.steps.extend(dropped.into_iter().map(Step::SetAside));
    }

    /// Keep everything: delete what the transaction's drops set aside. The statements
    /// committed as they ran, so a failure here (logged) leaves a hidden folder behind,
    /// never a visible change.
    pub async fn commit(self, storage: &Storage) {
        for step in self.steps {
            if let Step::SetAside(dropped) = step
                && let Err(e) = storage.delete_folder(&dropped.aside()).await
            {
                tracing::warn!(
                    folder = dropped.aside().join("/"),
                    error = %e,
                    "transaction commit: a dropped folder set aside was not deleted"
                );
            }
        }
    }

    /// Undo the transaction's steps, newest first. Tables someone else wrote since the
    /// transaction did are left alone (with everything that happened to them under
    /// other names before) and named in the error.
    pub async fn rollback(mut self, storage: &Storage) -> Result<(), Status> {
        for (name, expected) in &self.expect {
            if version(storage, name).await? != *expected {
                self.foreign.insert(name.clone());
            }
        }
        let mut untouched: Vec<String> = self.foreign.iter().map(|n| n.to_string()).collect();
        let mut skip = self.foreign;
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
                    if storage
                        .table_exists(&from)
                        .await
                        .map_err(super::result::status)?
                    {
                        untouched.push(to.to_string());
                        skip.insert(from);
                        continue;
                    }
                    storage
                        .rename_table(&to, &from)
                        .await
                        .map_err(super::result::status)?;
                }
                Step::Written { name, before } => {
                    if skip.contains(&name) {
                        continue;
                    }
                    let lock = storage.table_lock(&name);
                    let _guard = lock.lock().await;
                    let now = version(storage, &name).await?;
                    match (before, now) {
                        (None, Some(_)) => storage
                            .drop_table(&name)
                            .await
                            .map_err(super::result::status)?,
                        (Some(before), Some(now)) if now != before => {
                            let table = storage
                                .open_table(&name)
                                .await
                                .map_err(super::result::status)?
                                .ok_or_else(|| Status::internal(format!("{name} vanished")))?;
                            table
                                .delta_table()
                                .clone()
                                .restore()
                                .with_version_to_restore(before)
                                .await
                                .map_err(|e| {
                                    Status::internal(format!(
                                        "TransactionContext Error: cannot restore {name} to version {before}: {e}"
                                    ))
                                })?;
                        }
                        _ => {}
                    }
                }
            }
        }
        // A name taken after this transaction dropped it shows as written by another
        // session too: it is said once, for the drop.
        untouched.retain(|n| !taken.contains(n));
        untouched.sort();
        untouched.dedup();
        let mut except = Vec::new();
        if !untouched.is_empty() {
            except.push(format!(
                "{}: written by another session since this transaction wrote it, so restoring it would undo that write too",
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
        .map_err(super::result::status)?
        .map(|t| t.version()))
}

/// The versions of the tables `writes` names (`Write::names`), in order.
pub async fn versions(
    storage: &Arc<Storage>,
    writes: &[Write],
) -> Result<Vec<Option<u64>>, Status> {
    let mut out = Vec::new();
    for w in writes {
        for n in w.names() {
            out.push(version(storage, n).await?);
        }
    }
    Ok(out)
}

//! Flight SQL transactions (`BeginTransaction` / `EndTransaction`).
//!
//! What they mean here: Delta commits one table at a time, so a transaction is an undo
//! record, not a private workspace. Each statement carrying the transaction's id runs
//! and commits as it comes (the session reads its own writes at once; so do other
//! sessions). Before its first write to a table the transaction notes the table's
//! version (or that it did not exist). COMMIT keeps everything. ROLLBACK puts every
//! table it wrote back as it was: a table it created is dropped, any other is restored
//! to the noted version by one Delta restore commit (the history keeps the undone
//! commits; time travel still sees them). A table someone else wrote since the
//! transaction's last write to it is left alone and named in the rollback's error,
//! because restoring it would undo their commit too. `DROP TABLE` of a table that
//! existed before, `DROP SCHEMA` and `DETACH` are refused inside a transaction: nothing
//! could bring them back. A session that ends (closed, expired, evicted) with a
//! transaction open rolls it back.

use std::sync::Arc;

use tonic::Status;

use crate::catalog::{Storage, TableName};
use crate::sql::targets::Write;

/// One open transaction of a session.
#[derive(Debug)]
pub struct Transaction {
    /// The id the client sends with each statement of the transaction.
    pub id: Vec<u8>,
    /// Tables written, in the order of their first write.
    tables: Vec<(TableName, Entry)>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The table's version before the transaction's first write (`None`: no table).
    before: Option<u64>,
    /// The version the transaction's last statement left.
    last: Option<u64>,
    /// Someone else committed to the table in between: not restorable.
    foreign: bool,
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
            tables: Vec::new(),
        }
    }

    fn entry(&mut self, name: &TableName) -> Option<&mut Entry> {
        self.tables
            .iter_mut()
            .find(|(n, _)| n == name)
            .map(|(_, e)| e)
    }

    /// Note the versions the tables of `writes` have now, before a statement of the
    /// transaction writes them (`versions` in the same order).
    pub fn before(&mut self, writes: &[Write], versions: &[Option<u64>]) -> Result<(), Status> {
        for (write, version) in writes.iter().zip(versions) {
            let (name, drop) = match write {
                Write::Table(n) => (n, false),
                Write::Drop(n) => (n, true),
            };
            let existed_before = match self.entry(name) {
                Some(e) => {
                    if e.last != *version {
                        e.foreign = true;
                    }
                    e.before.is_some()
                }
                None => version.is_some(),
            };
            if drop && existed_before && version.is_some() {
                return Err(Status::failed_precondition(format!(
                    "TransactionContext Error: DROP TABLE {name} cannot be rolled back (its files go with it); run it outside the transaction"
                )));
            }
        }
        for (write, version) in writes.iter().zip(versions) {
            let name = match write {
                Write::Table(n) | Write::Drop(n) => n,
            };
            if self.entry(name).is_none() {
                self.tables.push((
                    name.clone(),
                    Entry {
                        before: *version,
                        last: *version,
                        foreign: false,
                    },
                ));
            }
        }
        Ok(())
    }

    /// Note the versions the tables of `writes` have after the statement ran.
    pub fn after(&mut self, writes: &[Write], versions: &[Option<u64>]) {
        for (write, version) in writes.iter().zip(versions) {
            let name = match write {
                Write::Table(n) | Write::Drop(n) => n,
            };
            if let Some(e) = self.entry(name) {
                e.last = *version;
            }
        }
    }

    /// Put every table the transaction wrote back as it was before; the tables it could
    /// not restore (written by someone else since) are named in the error.
    pub async fn rollback(self, storage: &Storage) -> Result<(), Status> {
        let mut refused = Vec::new();
        for (name, entry) in self.tables.into_iter().rev() {
            let lock = storage.table_lock(&name);
            let _guard = lock.lock().await;
            let now = version(storage, &name).await?;
            if entry.foreign || now != entry.last {
                refused.push(name.to_string());
                continue;
            }
            match (entry.before, now) {
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
        if refused.is_empty() {
            Ok(())
        } else {
            Err(Status::aborted(format!(
                "TransactionContext Error: rolled back, except {}: written by another session since this transaction wrote it, so restoring it would undo that write too",
                refused.join(", ")
            )))
        }
    }
}

/// The current version of a table; `None` when there is no such table.
pub async fn version(storage: &Storage, name: &TableName) -> Result<Option<u64>, Status> {
    Ok(storage
        .open_table(name)
        .await
        .map_err(super::result::status)?
        .map(|t| t.version()))
}

/// The versions of the tables `writes` names, in order.
pub async fn versions(
    storage: &Arc<Storage>,
    writes: &[Write],
) -> Result<Vec<Option<u64>>, Status> {
    let mut out = Vec::with_capacity(writes.len());
    for w in writes {
        let (Write::Table(n) | Write::Drop(n)) = w;
        out.push(version(storage, n).await?);
    }
    Ok(out)
}

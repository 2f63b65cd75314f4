//! `ALTER TABLE … RENAME TO` and `TRUNCATE`, which dbt's table materialization and seeds
//! send (`t__dbt_tmp` renamed over `t`, a seed truncated before it is loaded again).

use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{ObjectName, Statement, Truncate};

use super::{Output, SqlSession, name_parts, sql_err, table_missing};
use crate::catalog::TableName;
use crate::error::ApiError;

impl SqlSession {
    /// `ALTER TABLE from RENAME TO to`: the table keeps its schema; `to` is a bare name
    /// (or `from`'s own qualifiers with another table name).
    pub(super) async fn rename_table(
        &mut self,
        from: &[String],
        if_exists: bool,
        to: &ObjectName,
    ) -> Result<Output, ApiError> {
        let from = self.resolve(from)?;
        let to_parts = name_parts(to)?;
        let to = match to_parts.as_slice() {
            [t] => TableName::new(&from.catalog, &from.schema, t)?,
            _ => {
                let to = self.resolve(&to_parts)?;
                if (to.catalog.as_str(), to.schema.as_str())
                    != (from.catalog.as_str(), from.schema.as_str())
                {
                    return Err(sql_err(
                        "Not implemented Error: RENAME TO moves a table within its schema only",
                    ));
                }
                to
            }
        };
        // Both locks, always in the same order, so two renames cannot wait on each other.
        let (first, second) = if from.to_string() <= to.to_string() {
            (&from, &to)
        } else {
            (&to, &from)
        };
        let first_lock = self.storage.table_lock(first);
        let _first = first_lock.lock().await;
        let second_lock = (first != second).then(|| self.storage.table_lock(second));
        let _second = match &second_lock {
            Some(l) => Some(l.lock().await),
            None => None,
        };
        if !self.storage.table_exists(&from).await? {
            if self.rename_view(&from, &to).await? {
                return Ok(Self::ok_status());
            }
            if if_exists {
                return Ok(Self::ok_status());
            }
            return Err(table_missing(&from.table));
        }
        if self.storage.table_exists(&to).await? {
            return Err(sql_err(format!(
                "Catalog Error: Could not rename \"{}\" to \"{}\": another entry with this name already exists!",
                from.table, to.table
            )));
        }
        self.storage.rename_table(&from, &to).await?;
        Ok(Self::ok_status())
    }

    /// `TRUNCATE [TABLE] t, …`: every row deleted, as `DELETE FROM t` does (one commit per
    /// table); answers the rows deleted.
    pub(super) async fn truncate(&mut self, truncate: &Truncate) -> Result<Output, ApiError> {
        if truncate.partitions.is_some() {
            return Err(sql_err(
                "Not implemented Error: TRUNCATE … PARTITION is not supported",
            ));
        }
        let mut deleted = 0;
        for target in &truncate.table_names {
            if truncate.if_exists {
                let name = self.resolve(&name_parts(&target.name)?)?;
                if !self.storage.table_exists(&name).await? {
                    continue;
                }
            }
            let mut parsed = Self::parse(&format!("DELETE FROM {}", target.name))?;
            let (Some(statement), true) = (parsed.pop(), parsed.is_empty()) else {
                return Err(sql_err("Parser Error: TRUNCATE names one table at a time"));
            };
            let DFStatement::Statement(s) = &statement else {
                return Err(sql_err("Parser Error: TRUNCATE needs a table"));
            };
            let Statement::Delete(delete) = s.as_ref() else {
                return Err(sql_err("Parser Error: TRUNCATE needs a table"));
            };
            self.register_references(&statement).await?;
            deleted += self.delete(delete).await?.affected_rows().unwrap_or(0);
        }
        Ok(Self::count(deleted))
    }
}

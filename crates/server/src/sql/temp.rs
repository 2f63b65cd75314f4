//! Temporary tables (`CREATE TEMPORARY TABLE t …`), for a session that spans calls (Flight
//! SQL; over HTTP, where a session is one request, they stay refused). dbt's incremental
//! models build their new rows in one (`create temporary table "m__dbt_tmp…" as (…)`) and
//! merge from it by its bare name in later calls.
//!
//! A session's temporary tables live in one scratch catalog of its own (`temp_<hex>`,
//! made on first use; `catalog::Storage::create_scratch_catalog`), which goes with the
//! session like any catalog it attached. A bare name that is one of them resolves there
//! first, as DuckDB's `temp` schema comes first in its search path. (`CREATE TEMPORARY
//! TABLE temp.t` is accepted; reading `temp.t` is not: a temporary table is read by its
//! bare name.)

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{CreateTable, Ident, ObjectName};

use super::{Attached, Output, SqlSession, name_parts, sql_err};
use crate::catalog::TableName;
use crate::error::ApiError;

/// The temporary tables of a session.
#[derive(Debug, Default)]
pub(crate) struct TempTables {
    /// Their catalog, once made.
    catalog: Option<String>,
    tables: HashSet<String>,
}

impl Attached {
    fn temp(&self) -> std::sync::MutexGuard<'_, TempTables> {
        match self.temp.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

impl SqlSession {
    /// The catalog and schema a bare table name resolves in when it is a temporary table.
    pub(super) fn temp_table(&self, table: &str) -> Option<(String, String)> {
        let attached = self.attached.as_ref()?;
        let temp = attached.temp();
        if !temp.tables.contains(table) {
            return None;
        }
        temp.catalog.clone().map(|c| (c, "main".to_string()))
    }

    /// A dropped table is no longer one of the session's temporary tables.
    pub(super) fn forget_temp(&self, name: &TableName) {
        if let Some(attached) = &self.attached {
            let mut temp = attached.temp();
            if temp.catalog.as_deref() == Some(name.catalog.as_str()) {
                temp.tables.remove(&name.table);
            }
        }
    }

    /// `CREATE TEMPORARY TABLE t …`: the same statement, in the session's temporary
    /// catalog.
    pub(super) async fn create_temp_table(
        &mut self,
        create: &CreateTable,
    ) -> Result<Output, ApiError> {
        let Some(attached) = self.attached.clone() else {
            return Err(sql_err(
                "Permission Error: temporary tables need a session (Flight SQL); over HTTP each request is its own",
            ));
        };
        let parts = name_parts(&create.name)?;
        let table = match parts.as_slice() {
            [t] => t.clone(),
            [s, t] if s == "temp" => t.clone(),
            [c, s, t] if c == "temp" && s == "main" => t.clone(),
            _ => {
                return Err(sql_err(
                    "Binder Error: Temporary tables can only be created in the temporary schema",
                ));
            }
        };
        let catalog = self.ensure_temp_catalog(&attached).await?;
        let mut inner = create.clone();
        inner.temporary = false;
        inner.name = ObjectName::from(vec![
            Ident::with_quote('"', catalog.clone()),
            Ident::with_quote('"', "main"),
            Ident::with_quote('"', table.clone()),
        ]);
        let out = Box::pin(self.create_table(&inner)).await?;
        attached.temp().tables.insert(table);
        Ok(out)
    }

    async fn ensure_temp_catalog(&mut self, attached: &Arc<Attached>) -> Result<String, ApiError> {
        if let Some(c) = attached.temp().catalog.clone() {
            return Ok(c);
        }
        if attached.names().len() >= Attached::MAX {
            return Err(sql_err(format!(
                "Invalid Input Error: a session may attach at most {} catalogs (its temporary tables take one); DETACH one first",
                Attached::MAX
            )));
        }
        let name = format!("temp_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
        if !self.storage.create_scratch_catalog(&name).await? {
            return Err(ApiError::Internal(format!(
                "cannot make the temporary catalog {name}: the name is taken"
            )));
        }
        attached.lock().push(name.clone());
        attached.temp().catalog = Some(name.clone());
        let mut catalogs = self.user.catalogs.as_ref().clone();
        catalogs.push(name.clone());
        self.user.catalogs = Arc::new(catalogs);
        self.forget_tables();
        Ok(name)
    }
}

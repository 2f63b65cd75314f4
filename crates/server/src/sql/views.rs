//! Views: `CREATE [OR REPLACE] VIEW`, `DROP VIEW`, `ALTER VIEW … RENAME TO` (spliced into
//! the table form by `sql/dialect.rs`, and taken here when the name is a view's), read
//! wherever a table can be.
//!
//! A view is durable: its definition is stored next to the tables of its schema
//! (`catalog::Storage::put_view`), as JSON `{"sql": …}` with every table name in the query
//! qualified at creation (with the creating session's catalog and schema), so it reads
//! the same tables whoever queries it and from wherever. It is expanded when a statement
//! names it: its query is planned as the querying user (the grants are checked again, so
//! a view never reaches a table its reader could not), up to [`MAX_VIEW_DEPTH`] views
//! deep. A view over a temporary table is refused (the table would not outlive the
//! session).

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::catalog::view::ViewTable;
use datafusion::sql::sqlparser::ast::{CreateView, Ident, ObjectName, ObjectNamePart, Query};

use super::{Output, SqlSession, name_parts, sql_err};
use crate::catalog::TableName;
use crate::error::ApiError;

/// Views expanded inside one another, at most.
pub const MAX_VIEW_DEPTH: usize = 16;

#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Definition {
    pub(super) sql: String,
    /// `COMMENT ON VIEW`; replacing the view drops it, as in DuckDB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) comment: Option<String>,
}

impl Definition {
    /// A stored definition (`None`: not one this server wrote).
    pub(super) fn read(body: &[u8]) -> Option<Self> {
        serde_json::from_slice(body).ok()
    }

    fn bytes(&self) -> Result<Vec<u8>, ApiError> {
        serde_json::to_vec(self).map_err(|e| ApiError::Internal(e.to_string()))
    }
}

impl SqlSession {
    /// `CREATE [OR REPLACE] VIEW [IF NOT EXISTS] name AS query`.
    pub(super) async fn create_view(&mut self, create: &CreateView) -> Result<Output, ApiError> {
        if create.materialized || !create.columns.is_empty() {
            return Err(sql_err(
                "Not implemented Error: materialized views and view column lists are not supported",
            ));
        }
        let name = self.resolve(&name_parts(&create.name)?)?;
        let mut query: Query = (*create.query).clone();
        self.qualify(&mut query)?;
        let sql = query.to_string();
        // Planned now: a view over something missing or not granted fails here.
        self.plan_sql(&sql).await?;
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        if self.storage.table_exists(&name).await? {
            return Err(sql_err(format!(
                "Catalog Error: Existing object {} is of type Table, trying to replace with type View",
                name.table
            )));
        }
        if self.storage.get_view(&name).await?.is_some() {
            if create.if_not_exists {
                return Ok(Self::ok_status());
            }
            if !create.or_replace {
                return Err(sql_err(format!(
                    "Catalog Error: View with name \"{}\" already exists!",
                    name.table
                )));
            }
        }
        let body = Definition { sql, comment: None }.bytes()?;
        self.storage.put_view(&name, body).await?;
        Ok(Self::ok_status())
    }

    /// Every table a view's query names, qualified with this session's catalog and
    /// schema; names of the query's own CTEs, and calls of built-in table functions
    /// (`generate_series(…)`, which read no storage), are left alone.
    fn qualify(&self, query: &mut Query) -> Result<(), ApiError> {
        use datafusion::sql::sqlparser::ast::{TableFactor, VisitMut, VisitorMut};
        struct Qualify<'a> {
            session: &'a SqlSession,
            ctes: HashSet<String>,
            functions: HashSet<String>,
            failure: Option<ApiError>,
        }
        impl VisitorMut for Qualify<'_> {
            type Break = ();
            fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
                let TableFactor::Table { name, args, .. } = factor else {
                    return ControlFlow::Continue(());
                };
                let parts = match name_parts(name) {
                    Ok(p) => p,
                    Err(e) => {
                        self.failure = Some(e);
                        return ControlFlow::Break(());
                    }
                };
                if let [t] = parts.as_slice() {
                    let bare = t.to_lowercase();
                    let function = args.is_some() && self.functions.contains(&bare);
                    if function || self.ctes.contains(&bare) {
                        return ControlFlow::Continue(());
                    }
                    if self.session.temp_table(t).is_some() {
                        self.failure = Some(sql_err(format!(
                            "Binder Error: view can not reference temporary table \"{t}\""
                        )));
                        return ControlFlow::Break(());
                    }
                }
                let full = match parts.as_slice() {
                    [t] => [
                        self.session.catalog.clone(),
                        self.session.schema.clone(),
                        t.clone(),
                    ],
                    [s, t] => [self.session.catalog.clone(), s.clone(), t.clone()],
                    _ => return ControlFlow::Continue(()),
                };
                *name = ObjectName(
                    full.into_iter()
                        .map(|p| ObjectNamePart::Identifier(Ident::with_quote('"', p)))
                        .collect(),
                );
                ControlFlow::Continue(())
            }
        }
        let mut qualify = Qualify {
            session: self,
            ctes: cte_names(query),
            functions: self.ctx.state().table_functions().keys().cloned().collect(),
            failure: None,
        };
        let _ = query.visit(&mut qualify);
        match qualify.failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The columns of view `name` as its query plans now (as this session's user), for a
    /// listing of relations: `None` when there is no such view or it no longer plans (a
    /// table it reads was dropped), which listings leave out. A failure a retry may get
    /// past (storage unavailable, a timeout) is the listing's own: leaving the view out
    /// would tell a client it does not exist.
    pub async fn listed_view_schema(
        &mut self,
        name: &TableName,
    ) -> Result<Option<arrow::datatypes::SchemaRef>, ApiError> {
        match self.view_table(name).await {
            Ok(view) => Ok(view.map(|v| datafusion::catalog::TableProvider::schema(v.as_ref()))),
            Err(e) if e.is_transient() || matches!(e, ApiError::Timeout(_)) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// The view `name` as a table DataFusion can read, if there is such a view.
    pub(super) async fn view_table(
        &mut self,
        name: &TableName,
    ) -> Result<Option<Arc<ViewTable>>, ApiError> {
        let Some(body) = self.storage.get_view(name).await? else {
            return Ok(None);
        };
        let definition: Definition = serde_json::from_slice(&body).map_err(|e| {
            ApiError::Internal(format!("the definition of view {name} is unreadable: {e}"))
        })?;
        if self.view_depth >= MAX_VIEW_DEPTH {
            return Err(sql_err(format!(
                "Binder Error: views nest more than {MAX_VIEW_DEPTH} deep (a view that reads itself?)"
            )));
        }
        self.view_depth += 1;
        let plan = Box::pin(self.plan_sql(&definition.sql)).await;
        self.view_depth -= 1;
        Ok(Some(Arc::new(ViewTable::new(plan?, Some(definition.sql)))))
    }

    /// `DROP VIEW [IF EXISTS] name`.
    pub(super) async fn drop_view(
        &mut self,
        name: &ObjectName,
        if_exists: bool,
    ) -> Result<(), ApiError> {
        let name = self.resolve(&name_parts(name)?)?;
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        if self.storage.get_view(&name).await?.is_none() {
            if if_exists {
                return Ok(());
            }
            return Err(sql_err(format!(
                "Catalog Error: View with name {} does not exist!",
                name.table
            )));
        }
        self.storage.delete_view(&name).await
    }

    /// `ALTER VIEW from RENAME TO to` (the caller holds both names' locks and found no
    /// table at `from`); `false` when `from` is no view either.
    pub(super) async fn rename_view(
        &self,
        from: &TableName,
        to: &TableName,
    ) -> Result<bool, ApiError> {
        let Some(body) = self.storage.get_view(from).await? else {
            return Ok(false);
        };
        if self.storage.table_exists(to).await? || self.storage.get_view(to).await?.is_some() {
            return Err(sql_err(format!(
                "Catalog Error: Could not rename \"{}\" to \"{}\": another entry with this name already exists!",
                from.table, to.table
            )));
        }
        self.storage.put_view(to, body).await?;
        self.storage.delete_view(from).await?;
        Ok(true)
    }

    /// `COMMENT ON VIEW name IS …` (`NULL` clears); `false` when there is no such view.
    pub(super) async fn comment_view(
        &self,
        name: &TableName,
        comment: Option<String>,
    ) -> Result<bool, ApiError> {
        let lock = self.storage.table_lock(name);
        let _guard = lock.lock().await;
        let Some(body) = self.storage.get_view(name).await? else {
            return Ok(false);
        };
        let mut definition = Definition::read(&body).ok_or_else(|| {
            ApiError::Internal(format!("view {}: unreadable definition", name.table))
        })?;
        definition.comment = comment;
        self.storage.put_view(name, definition.bytes()?).await?;
        Ok(true)
    }
}

/// The names every `WITH` of a query defines, at any depth (a view's body in parentheses
/// and dbt's ephemeral models nest them), lowercased.
fn cte_names(query: &Query) -> HashSet<String> {
    use datafusion::sql::sqlparser::ast::{Visit, Visitor};
    struct Names(HashSet<String>);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
            if let Some(with) = &query.with {
                for cte in &with.cte_tables {
                    self.0.insert(cte.alias.name.value.to_lowercase());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut names = Names(HashSet::new());
    let _ = query.visit(&mut names);
    names.0
}

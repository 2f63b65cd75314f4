//! Name resolution: which tables a statement names, registered for DataFusion from the
//! granted catalogs only; planning of reads.

use std::sync::Arc;

use datafusion::catalog::{MemorySchemaProvider, SchemaProvider, TableProvider};
use datafusion::common::TableReference;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{ObjectName, SetExpr, Statement, TableWithJoins, With};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use super::catalog_view::{CatalogView, Listing};
use super::time_travel;
use super::{Output, SqlSession, delta_err, name_parts, sql_err, sql_error, table_missing};
use crate::catalog::{DEFAULT_SCHEMA, TableName, validate_name};
use crate::error::ApiError;

impl SqlSession {
    pub(super) fn resolve(&self, parts: &[String]) -> Result<TableName, ApiError> {
        // Names a statement writes or drops; reads of a marked name are resolved in
        // `register_references`.
        if let Some((table, as_of)) = parts.last().and_then(|t| time_travel::unmark(t)) {
            return Err(sql_err(format!(
                "Binder Error: {table} {as_of} can only be read: writes go to the table's latest version"
            )));
        }
        if let [t] = parts
            && let Some((c, s)) = self.temp_table(t)
        {
            return TableName::new(&c, &s, t);
        }
        let (c, s, t) = match parts {
            [t] => (self.catalog.as_str(), self.schema.as_str(), t.as_str()),
            [s, t] => (self.catalog.as_str(), s.as_str(), t.as_str()),
            [c, s, t] => (c.as_str(), s.as_str(), t.as_str()),
            _ => {
                return Err(sql_err(
                    "Parser Error: a table name has at most three parts",
                ));
            }
        };
        self.check_catalog(c)?;
        TableName::new(c, s, t)
    }

    pub(super) fn check_catalog(&self, catalog: &str) -> Result<(), ApiError> {
        // Catalogs that exist but are not granted look exactly like missing ones.
        if !self.user.can_see(catalog) {
            return Err(sql_err(format!(
                "Catalog Error: Catalog with name {catalog} does not exist!"
            )));
        }
        Ok(())
    }

    pub(super) fn schema_provider(
        &self,
        catalog: &str,
        schema: &str,
    ) -> Result<Arc<dyn SchemaProvider>, ApiError> {
        let cat = self.ctx.catalog(catalog).ok_or_else(|| {
            sql_err(format!(
                "Catalog Error: Catalog with name {catalog} does not exist!"
            ))
        })?;
        if let Some(s) = cat.schema(schema) {
            return Ok(s);
        }
        let provider: Arc<dyn SchemaProvider> = Arc::new(MemorySchemaProvider::new());
        cat.register_schema(schema, Arc::clone(&provider))
            .map_err(sql_error)?;
        Ok(provider)
    }

    /// Register every table a statement reads, so that DataFusion sees exactly those; the
    /// catalog listings among them are loaded whole.
    pub(super) async fn register_references(
        &mut self,
        statement: &DFStatement,
    ) -> Result<(), ApiError> {
        let listings = self
            .register_references_deferring_listings(statement)
            .await?;
        self.load_catalog_views(None, listings).await
    }

    /// Register every table a statement reads, so that DataFusion sees exactly those.
    /// The catalog listings among them are returned unloaded, for
    /// [`Self::load_catalog_views`] once the statement is planned.
    async fn register_references_deferring_listings(
        &mut self,
        statement: &DFStatement,
    ) -> Result<Vec<Arc<CatalogView>>, ApiError> {
        let mut listings = Vec::new();
        let refs = self
            .ctx
            .state()
            .resolve_table_references(statement)
            .map_err(sql_error)?;
        let table_functions: Vec<String> =
            self.ctx.state().table_functions().keys().cloned().collect();
        for r in refs {
            // Built-in table functions (generate_series, range) read no storage.
            if let TableReference::Bare { table } = &r
                && table_functions.iter().any(|f| f.as_str() == table.as_ref())
            {
                continue;
            }
            // A name marked by a time-travel clause (`sql/time_travel.rs`) reads its base
            // table as of that state, under the marked name.
            let as_of = time_travel::unmark(r.table()).map(|(base, a)| (base.to_string(), a));
            let base = as_of
                .as_ref()
                .map_or(r.table(), |(b, _)| b.as_str())
                .to_string();
            // A bare name of a temporary table: registered where DataFusion looks for
            // the bare name (the default schema), read from the temporary catalog.
            let temp = match &r {
                TableReference::Bare { .. } => self.temp_table(&base),
                _ => None,
            };
            let (c, s, t) = match &r {
                TableReference::Bare { table } => {
                    (self.catalog.clone(), self.schema.clone(), table.to_string())
                }
                TableReference::Partial { schema, table } => {
                    (self.catalog.clone(), schema.to_string(), table.to_string())
                }
                TableReference::Full {
                    catalog,
                    schema,
                    table,
                } => (catalog.to_string(), schema.to_string(), table.to_string()),
            };
            self.check_catalog(&c)?;
            let provider = self.schema_provider(&c, &s)?;
            if provider.table_exist(&t) {
                continue;
            }
            let not_delta = |what: &str| {
                sql_err(format!(
                    "Binder Error: {} reads Delta tables; {base} is {what}",
                    as_of.as_ref().map_or(String::new(), |(_, a)| a.to_string())
                ))
            };
            if s == "information_schema" {
                if as_of.is_some() {
                    return Err(not_delta("a catalog view"));
                }
                let table: Arc<dyn TableProvider> = match Listing::named(&t) {
                    Some(listing) => {
                        let view = Arc::new(CatalogView::unloaded(listing)?);
                        listings.push(Arc::clone(&view));
                        view
                    }
                    None => self.information_schema(&t).await?,
                };
                provider.register_table(t, table).map_err(sql_error)?;
                continue;
            }
            let name = match &temp {
                Some((tc, ts)) => TableName::new(tc, ts, &base)?,
                None => TableName::new(&c, &s, &base)?,
            };
            let opened = self.storage.open_table_for_query(&name).await?;
            if opened.is_none()
                && let Some(view) = self.view_table(&name).await?
            {
                if as_of.is_some() {
                    return Err(not_delta("a view"));
                }
                let provider = self.schema_provider(&c, &s)?;
                provider.register_table(t, view).map_err(sql_error)?;
                continue;
            }
            let Some(table) = opened else {
                // An unqualified name in a default schema that does not exist fails the way
                // DuckDB's implicit `SET schema` does; clients match on that message.
                if matches!(r, TableReference::Bare { .. })
                    && s != DEFAULT_SCHEMA
                    && !self.storage.schema_exists(&c, &s).await?
                {
                    return Err(sql_err(format!(
                        "Catalog Error: SET schema: No catalog + schema named \"{s}\" found."
                    )));
                }
                return Err(table_missing(&base));
            };
            let delta = match &as_of {
                Some((_, a)) => &time_travel::load(table.delta_table(), &base, a).await?,
                None => table.delta_table(),
            };
            // With the session: delta-rs then reads strings and binaries as the session
            // says (plain, not views), so results need no cast on their way out.
            let scan = delta
                .table_provider()
                .with_session(Arc::new(self.ctx.state()))
                .await
                .map_err(delta_err)?;
            let table_provider =
                super::scan::DeltaScan::of_table(delta, scan).map_err(delta_err)?;
            // The session's registry learns this table's folder, and nothing more.
            self.grant_table(delta);
            provider
                .register_table(t, table_provider)
                .map_err(sql_error)?;
        }
        Ok(listings)
    }

    pub(super) async fn plan_query(
        &mut self,
        statement: DFStatement,
    ) -> Result<LogicalPlan, ApiError> {
        let listings = self
            .register_references_deferring_listings(&statement)
            .await?;
        let statement = self.summarize(statement).await?;
        let statement = self.list_pivot_values(statement).await?;
        let statement = self.spell_columns(statement).await;
        let statement = self.expand_star_columns(statement).await?;
        let statement = self.substitute_aliases(statement).await?;
        let statement = self.order_by_all(statement).await?;
        let plan = self
            .ctx
            .state()
            .statement_to_plan(statement)
            .await
            .map_err(sql_error)?;
        self.load_catalog_views(Some(&plan), listings).await?;
        // Only reads are executed by DataFusion; writes go through the engine.
        super::guard::check_plan(&plan)?;
        Ok(plan)
    }

    /// DuckDB's `ORDER BY ALL` of a statement's query whose select list has a wildcard
    /// (`FROM t ORDER BY ALL`): its width is the number of columns the query answers
    /// without the ordering, planned once for that. (Lists without a wildcard are
    /// numbered at parse time: `normalize.rs::OrderByAll`.)
    async fn order_by_all(&self, mut statement: DFStatement) -> Result<DFStatement, ApiError> {
        let Some(Statement::Query(query)) = super::sql_statement(&mut statement) else {
            return Ok(statement);
        };
        if !super::normalize::orders_by_all(query) {
            return Ok(statement);
        }
        let mut unordered = query.clone();
        unordered.order_by = None;
        unordered.limit_clause = None;
        unordered.fetch = None;
        let unordered = DFStatement::Statement(Box::new(Statement::Query(unordered)));
        let plan = self
            .ctx
            .state()
            .statement_to_plan(unordered)
            .await
            .map_err(sql_error)?;
        super::normalize::order_by_positions(query, plan.schema().fields().len());
        Ok(statement)
    }

    /// The columns `SELECT * FROM from` answers under the statement's `with`, each with
    /// its table's qualifier (`COLUMNS(…)` and lateral aliases over joins, subqueries and
    /// CTEs); `None` when that does not plan alone (a correlated subquery).
    pub(super) async fn columns_of_from(
        &self,
        from: Vec<TableWithJoins>,
        with: Option<With>,
    ) -> Option<Vec<(Option<Vec<String>>, String)>> {
        let mut query = Parser::new(&GenericDialect {})
            .try_with_sql("SELECT *")
            .ok()?
            .parse_query()
            .ok()?;
        if let SetExpr::Select(select) = query.body.as_mut() {
            select.from = from;
        }
        query.with = with;
        let probe = DFStatement::Statement(Box::new(Statement::Query(query)));
        let plan = self.ctx.state().statement_to_plan(probe).await.ok()?;
        Some(
            plan.schema()
                .iter()
                .map(|(qualifier, field)| (qualifier.map(|q| q.to_vec()), field.name().clone()))
                .collect(),
        )
    }

    /// Let this session's queries read `table`'s folder.
    pub(super) fn grant_table(&self, table: &deltalite::deltalake::DeltaTable) {
        let log_store = table.log_store();
        self.stores
            .grant(log_store.root_url(), log_store.root_object_store(None));
    }

    /// Plan SQL text the server wrote, through the same guards as a client's.
    pub(super) async fn plan_sql(&mut self, sql: &str) -> Result<LogicalPlan, ApiError> {
        let mut statements = Self::parse(sql)?;
        let statement = statements
            .pop()
            .ok_or_else(|| sql_err("Parser Error: no statement to execute"))?;
        self.plan_query(statement).await
    }

    /// Plan SQL text the server wrote and start it.
    pub(super) async fn stream_sql(
        &mut self,
        sql: &str,
    ) -> Result<datafusion::execution::SendableRecordBatchStream, ApiError> {
        let plan = self.plan_sql(sql).await?;
        let df = self
            .ctx
            .execute_logical_plan(plan)
            .await
            .map_err(sql_error)?;
        df.execute_stream().await.map_err(sql_error)
    }

    /// Like [`Self::stream_sql`], collected.
    pub(super) async fn collect_sql(
        &mut self,
        sql: &str,
    ) -> Result<Vec<arrow::record_batch::RecordBatch>, ApiError> {
        use futures::TryStreamExt;
        self.stream_sql(sql)
            .await?
            .try_collect()
            .await
            .map_err(sql_error)
    }

    pub(super) async fn query_stream(
        &mut self,
        statement: DFStatement,
    ) -> Result<Output, ApiError> {
        let plan = self.plan_query(statement).await?;
        let df = self
            .ctx
            .execute_logical_plan(plan)
            .await
            .map_err(sql_error)?;
        Ok(Output::Stream(
            df.execute_stream().await.map_err(sql_error)?,
        ))
    }

    pub(super) fn schema_parts(&self, name: &ObjectName) -> Result<(String, String), ApiError> {
        let parts = name_parts(name)?;
        let (c, s) = match parts.as_slice() {
            [s] => (self.catalog.clone(), s.clone()),
            [c, s] => (c.clone(), s.clone()),
            _ => return Err(sql_err("Parser Error: a schema name has at most two parts")),
        };
        self.check_catalog(&c)?;
        validate_name("schema", &s)?;
        Ok((c, s))
    }
}

//! SQL over the Delta tables through DataFusion, DuckDB-flavoured.
//!
//! Queries are planned by DataFusion against a per-request catalog that holds only the
//! tables the statement names (resolved before planning, so only granted catalogs are
//! reachable and nothing else: no URL tables, no external tables, no COPY). DDL and DML are
//! executed here, each as one Delta commit through the engine or delta-rs.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use base64::Engine;
use datafusion::catalog::{MemoryCatalogProvider, MemorySchemaProvider, SchemaProvider};
use datafusion::common::{Column, TableReference};
use datafusion::datasource::MemTable;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::{ColumnarValue, LogicalPlan, Volatility, cast, create_udf};
use datafusion::prelude::{Expr, SessionConfig, SessionContext};
use datafusion::sql::parser::{DFParser, Statement as DFStatement};
use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTableOperation, AssignmentTarget, ColumnOption, CreateTable, Delete,
    FromTable, Insert, ObjectName, ObjectNamePart, ObjectType, SchemaName, Statement, TableFactor,
    TableObject, Update, Use,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use deltalake::kernel::StructField;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalite::DeltaLiteTable;
use deltalite::compact::CompactOptions;
use deltalite::write::WriteOptions;
use futures::TryStreamExt;

use crate::auth::User;
use crate::catalog::{Storage, TableName, validate_name};
use crate::error::ApiError;
use crate::types::{duckdb_field_type, field_for_sql_type, is_widening, numeric_precision_scale};

/// The result of the last statement of a request.
pub enum Output {
    /// A query's record-batch stream (bounded memory).
    Stream(SendableRecordBatchStream),
    /// A small materialized result (DDL/DML status).
    Batches(SchemaRef, Vec<RecordBatch>),
}

impl Output {
    /// Schema of the result.
    pub fn schema(&self) -> SchemaRef {
        match self {
            Output::Stream(s) => s.schema(),
            Output::Batches(s, _) => Arc::clone(s),
        }
    }
}

fn sql_err(msg: impl Into<String>) -> ApiError {
    ApiError::BadRequest(msg.into())
}

fn df_err(e: datafusion::error::DataFusionError) -> ApiError {
    use datafusion::error::DataFusionError as E;
    let msg = match e.find_root() {
        E::SQL(err, _) => format!("Parser Error: {err}"),
        E::Plan(m) => format!("Binder Error: {m}"),
        E::SchemaError(err, _) => format!("Binder Error: {err}"),
        E::NotImplemented(m) => format!("Not implemented Error: {m}"),
        E::Execution(m) => format!("Invalid Input Error: {m}"),
        E::ArrowError(err, _) => format!("Conversion Error: {err}"),
        other => other.to_string(),
    };
    ApiError::BadRequest(msg)
}

fn delta_err(e: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(format!("Invalid Input Error: {e}"))
}

/// Whether a table name is a `Catalog Error` for the given name.
pub fn table_missing(table: &str) -> ApiError {
    sql_err(format!(
        "Catalog Error: Table with name {table} does not exist!"
    ))
}

/// Identifier parts of an object name; unquoted parts are folded to lower case, the way
/// DataFusion (and DuckDB's case-insensitive lookup) treats them.
fn name_parts(name: &ObjectName) -> Result<Vec<String>, ApiError> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(id) => Ok(if id.quote_style.is_some() {
                id.value.clone()
            } else {
                id.value.to_lowercase()
            }),
            other => Err(sql_err(format!(
                "Parser Error: unsupported name part {other}"
            ))),
        })
        .collect()
}

/// One request's SQL session.
pub struct SqlSession {
    ctx: SessionContext,
    storage: Arc<Storage>,
    user: User,
    catalog: String,
    schema: String,
}

impl SqlSession {
    /// A session with the user's catalogs and the request's defaults.
    pub fn new(
        storage: Arc<Storage>,
        runtime: Arc<RuntimeEnv>,
        user: User,
        catalog: Option<&str>,
        schema: Option<&str>,
    ) -> Result<Self, ApiError> {
        let catalog = match catalog {
            Some(c) if !c.is_empty() => c.to_string(),
            _ => user
                .catalogs
                .first()
                .cloned()
                .ok_or_else(|| ApiError::NotFound("no catalog granted".into()))?,
        };
        if !user.can_see(&catalog) {
            return Err(sql_err(format!(
                "Catalog Error: SET schema: No catalog + schema named \"{catalog}\" found."
            )));
        }
        let schema = schema
            .filter(|s| !s.is_empty())
            .unwrap_or("main")
            .to_string();
        validate_name("schema", &schema)?;
        let mut config = SessionConfig::new()
            .with_default_catalog_and_schema(&catalog, &schema)
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(false);
        // Plain Utf8/Binary in results: clients and the Parquet output expect them.
        config
            .options_mut()
            .execution
            .parquet
            .schema_force_view_types = false;
        // `TIMESTAMP WITH TIME ZONE` literals and casts are UTC, as the tables store them.
        config.options_mut().execution.time_zone = Some("+00:00".to_string());
        let ctx = SessionContext::new_with_config_rt(config, runtime);
        for c in user.catalogs.iter() {
            ctx.register_catalog(c.as_str(), Arc::new(MemoryCatalogProvider::new()));
        }
        ctx.register_udf(from_base64_udf());
        capped::register(&ctx);
        Ok(Self {
            ctx,
            storage,
            user,
            catalog,
            schema,
        })
    }

    /// Parse a request's statements (one or more, `;`-separated).
    pub fn parse(sql: &str) -> Result<Vec<DFStatement>, ApiError> {
        let statements = DFParser::parse_sql_with_dialect(sql, &GenericDialect {})
            .map_err(|e| sql_err(format!("Parser Error: {e}")))?;
        if statements.is_empty() {
            return Err(sql_err("Parser Error: no statement to execute"));
        }
        for s in &statements {
            check_allowed(s)?;
            check_depth(s)?;
        }
        Ok(statements.into_iter().collect())
    }

    /// Run every statement; the result is the last one's.
    pub async fn run(&mut self, sql: &str) -> Result<Output, ApiError> {
        let statements = Self::parse(sql)?;
        let count = statements.len();
        let mut last = None;
        for (i, statement) in statements.into_iter().enumerate() {
            let out = self.execute(statement).await?;
            if i + 1 == count {
                last = Some(out);
            } else if let Output::Stream(stream) = out {
                // Earlier statements run for their effects; drain without keeping rows.
                stream
                    .try_for_each(|_| async { Ok(()) })
                    .await
                    .map_err(df_err)?;
            }
        }
        last.ok_or_else(|| sql_err("Parser Error: no statement to execute"))
    }

    /// Plan (but do not run) every statement; used by `/validate`.
    pub async fn validate(&mut self, sql: &str) -> Result<(), ApiError> {
        for statement in Self::parse(sql)? {
            if let DFStatement::Statement(s) = &statement
                && matches!(s.as_ref(), Statement::Query(_))
            {
                self.plan_query(statement).await?;
            }
        }
        Ok(())
    }

    fn resolve(&self, parts: &[String]) -> Result<TableName, ApiError> {
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

    fn check_catalog(&self, catalog: &str) -> Result<(), ApiError> {
        // Catalogs that exist but are not granted look exactly like missing ones.
        if !self.user.can_see(catalog) {
            return Err(sql_err(format!(
                "Catalog Error: Catalog with name {catalog} does not exist!"
            )));
        }
        Ok(())
    }

    fn schema_provider(
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
            .map_err(df_err)?;
        Ok(provider)
    }

    /// Register every table a statement reads, so that DataFusion sees exactly those.
    async fn register_references(&mut self, statement: &DFStatement) -> Result<(), ApiError> {
        let refs = self
            .ctx
            .state()
            .resolve_table_references(statement)
            .map_err(df_err)?;
        let table_functions: Vec<String> =
            self.ctx.state().table_functions().keys().cloned().collect();
        for r in refs {
            // Built-in table functions (generate_series, range) read no storage.
            if let TableReference::Bare { table } = &r
                && table_functions.iter().any(|f| f.as_str() == table.as_ref())
            {
                continue;
            }
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
            if s == "information_schema" {
                let table = self.information_schema(&t).await?;
                provider.register_table(t, table).map_err(df_err)?;
                continue;
            }
            let name = TableName::new(&c, &s, &t)?;
            let Some(table) = self.storage.open_table(&name).await? else {
                // An unqualified name in a default schema that does not exist fails the way
                // DuckDB's implicit `SET schema` does; clients match on that message.
                if matches!(r, TableReference::Bare { .. })
                    && s != "main"
                    && !self.storage.schema_exists(&c, &s).await?
                {
                    return Err(sql_err(format!(
                        "Catalog Error: SET schema: No catalog + schema named \"{s}\" found."
                    )));
                }
                return Err(table_missing(&t));
            };
            let delta = table.delta_table();
            let table_provider = delta.table_provider().await.map_err(delta_err)?;
            delta
                .update_datafusion_session(&self.ctx.state())
                .map_err(delta_err)?;
            provider.register_table(t, table_provider).map_err(df_err)?;
        }
        Ok(())
    }

    async fn plan_query(&mut self, statement: DFStatement) -> Result<LogicalPlan, ApiError> {
        self.register_references(&statement).await?;
        let plan = self
            .ctx
            .state()
            .statement_to_plan(statement)
            .await
            .map_err(df_err)?;
        // Only reads are planned by DataFusion; writes go through the Delta paths below.
        match &plan {
            LogicalPlan::Dml(_) | LogicalPlan::Ddl(_) | LogicalPlan::Copy(_) => {
                Err(sql_err("Permission Error: statement not allowed"))
            }
            _ => Ok(plan),
        }
    }

    async fn query_stream(&mut self, statement: DFStatement) -> Result<Output, ApiError> {
        let plan = self.plan_query(statement).await?;
        let df = self.ctx.execute_logical_plan(plan).await.map_err(df_err)?;
        Ok(Output::Stream(df.execute_stream().await.map_err(df_err)?))
    }

    async fn execute(&mut self, statement: DFStatement) -> Result<Output, ApiError> {
        let DFStatement::Statement(stmt) = &statement else {
            return match statement {
                DFStatement::Explain(_) => self.query_stream(statement).await,
                _ => Err(sql_err("Permission Error: statement not allowed")),
            };
        };
        match stmt.as_ref() {
            Statement::Query(_) => self.query_stream(statement).await,
            Statement::CreateSchema {
                schema_name,
                if_not_exists,
                ..
            } => self.create_schema(schema_name, *if_not_exists).await,
            Statement::CreateTable(create) => self.create_table(create).await,
            Statement::AlterTable(alter) => {
                let parts = name_parts(&alter.name)?;
                self.alter_table(&parts, alter.if_exists, &alter.operations)
                    .await
            }
            Statement::Drop {
                object_type,
                if_exists,
                names,
                cascade,
                ..
            } => self.drop(*object_type, *if_exists, names, *cascade).await,
            Statement::Insert(insert) => self.insert(insert).await,
            Statement::Delete(delete) => self.delete(delete).await,
            Statement::Update(update) => self.update(update).await,
            Statement::Use(u) => self.use_schema(u).await,
            Statement::Set(_) => self.set(stmt).await,
            _ => Err(sql_err("Permission Error: statement not allowed")),
        }
    }

    fn ok_status() -> Output {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "Success",
            DataType::Boolean,
            false,
        )]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(arrow::array::BooleanArray::from(vec![true])) as ArrayRef],
        );
        match batch {
            Ok(b) => Output::Batches(schema, vec![b]),
            Err(_) => Output::Batches(schema, vec![]),
        }
    }

    fn count(n: i64) -> Output {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "Count",
            DataType::Int64,
            false,
        )]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(arrow::array::Int64Array::from(vec![n])) as ArrayRef],
        );
        match batch {
            Ok(b) => Output::Batches(schema, vec![b]),
            Err(_) => Output::Batches(schema, vec![]),
        }
    }

    fn schema_parts(&self, name: &ObjectName) -> Result<(String, String), ApiError> {
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

    async fn create_schema(
        &mut self,
        name: &SchemaName,
        if_not_exists: bool,
    ) -> Result<Output, ApiError> {
        let SchemaName::Simple(name) = name else {
            return Err(sql_err(
                "Not implemented Error: CREATE SCHEMA AUTHORIZATION",
            ));
        };
        let (c, s) = self.schema_parts(name)?;
        if self.storage.schema_exists(&c, &s).await? {
            if if_not_exists {
                return Ok(Self::ok_status());
            }
            return Err(sql_err(format!(
                "Catalog Error: Schema with name \"{s}\" already exists!"
            )));
        }
        self.storage.create_schema(&c, &s).await?;
        Ok(Self::ok_status())
    }

    async fn create_table(&mut self, create: &CreateTable) -> Result<Output, ApiError> {
        if create.external || create.temporary || create.location.is_some() {
            return Err(sql_err(
                "Permission Error: external and temporary tables are not allowed",
            ));
        }
        let name = self.resolve(&name_parts(&create.name)?)?;
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        if self.storage.table_exists(&name).await? {
            if create.if_not_exists {
                return Ok(Self::ok_status());
            }
            if !create.or_replace {
                return Err(sql_err(format!(
                    "Catalog Error: Table with name \"{}\" already exists!",
                    name.table
                )));
            }
            self.storage.drop_table(&name).await?;
        }
        let (schema, batches) = if let Some(query) = &create.query {
            let statement = DFStatement::Statement(Box::new(Statement::Query(query.clone())));
            let plan = self.plan_query(statement).await?;
            let df = self.ctx.execute_logical_plan(plan).await.map_err(df_err)?;
            let schema: Schema = df.schema().as_arrow().clone();
            let batches = df.collect().await.map_err(df_err)?;
            (crate::ingest::storable_schema(&schema), batches)
        } else {
            let mut fields = Vec::new();
            for col in &create.columns {
                let not_null = col
                    .options
                    .iter()
                    .any(|o| matches!(o.option, ColumnOption::NotNull));
                let col_name = if col.name.quote_style.is_some() {
                    col.name.value.clone()
                } else {
                    col.name.value.to_lowercase()
                };
                fields.push(field_for_sql_type(
                    &col_name,
                    &col.data_type.to_string(),
                    !not_null,
                )?);
            }
            if fields.is_empty() {
                return Err(sql_err(
                    "Parser Error: CREATE TABLE needs at least one column",
                ));
            }
            (Schema::new(fields), vec![])
        };
        self.storage
            .create_schema(&name.catalog, &name.schema)
            .await?;
        let created = DeltaLiteTable::create(
            &self.storage.table_uri(&name),
            self.storage.options.clone(),
            &schema,
            &[],
            HashMap::new(),
        )
        .await;
        let mut table = match created {
            Ok(t) => t,
            Err(e) => {
                // A half-created folder must not linger.
                let _ = self.storage.drop_table(&name).await;
                return Err(delta_err(e));
            }
        };
        if !batches.is_empty() {
            let written = table
                .append(batches.into_iter().map(Ok), &WriteOptions::default())
                .await;
            if let Err(e) = written {
                let _ = self.storage.drop_table(&name).await;
                return Err(delta_err(e));
            }
        }
        Ok(Self::ok_status())
    }

    async fn open_for_write(&self, name: &TableName) -> Result<DeltaLiteTable, ApiError> {
        self.storage
            .open_table(name)
            .await?
            .ok_or_else(|| table_missing(&name.table))
    }

    async fn alter_table(
        &mut self,
        parts: &[String],
        if_exists: bool,
        operations: &[AlterTableOperation],
    ) -> Result<Output, ApiError> {
        let name = self.resolve(parts)?;
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        let mut table = match self.storage.open_table(&name).await? {
            Some(t) => t,
            None if if_exists => return Ok(Self::ok_status()),
            None => return Err(table_missing(&name.table)),
        };
        for op in operations {
            let schema = table.schema().map_err(delta_err)?;
            match op {
                AlterTableOperation::AddColumn {
                    if_not_exists,
                    column_def,
                    ..
                } => {
                    let col = if column_def.name.quote_style.is_some() {
                        column_def.name.value.clone()
                    } else {
                        column_def.name.value.to_lowercase()
                    };
                    if schema.index_of(&col).is_ok() {
                        if *if_not_exists {
                            continue;
                        }
                        return Err(sql_err(format!(
                            "Catalog Error: Column with name {col} already exists!"
                        )));
                    }
                    let field = field_for_sql_type(&col, &column_def.data_type.to_string(), true)?;
                    add_columns(&mut table, &[field]).await?;
                }
                AlterTableOperation::AlterColumn {
                    column_name,
                    op: AlterColumnOperation::SetDataType { data_type, .. },
                } => {
                    let col = if column_name.quote_style.is_some() {
                        column_name.value.clone()
                    } else {
                        column_name.value.to_lowercase()
                    };
                    let Ok(idx) = schema.index_of(&col) else {
                        return Err(sql_err(format!(
                            "Binder Error: Table \"{}\" does not have a column with name \"{col}\"",
                            name.table
                        )));
                    };
                    let current = schema.field(idx);
                    let wanted =
                        field_for_sql_type(&col, &data_type.to_string(), current.is_nullable())?;
                    if !is_widening(current.data_type(), wanted.data_type()) {
                        return Err(sql_err(format!(
                            "Conversion Error: cannot change column \"{col}\" from {} to {}: only widening type changes are supported",
                            duckdb_field_type(current),
                            duckdb_field_type(&wanted)
                        )));
                    }
                    if current.data_type() != wanted.data_type() {
                        change_column_type(&mut table, wanted).await?;
                    }
                }
                other => {
                    return Err(sql_err(format!(
                        "Not implemented Error: ALTER TABLE {other} is not supported"
                    )));
                }
            }
        }
        Ok(Self::ok_status())
    }

    async fn drop(
        &mut self,
        object_type: ObjectType,
        if_exists: bool,
        names: &[ObjectName],
        cascade: bool,
    ) -> Result<Output, ApiError> {
        for name in names {
            match object_type {
                ObjectType::Table => {
                    let name = self.resolve(&name_parts(name)?)?;
                    let lock = self.storage.table_lock(&name);
                    let _guard = lock.lock().await;
                    if !self.storage.table_exists(&name).await? {
                        if if_exists {
                            continue;
                        }
                        return Err(table_missing(&name.table));
                    }
                    self.storage.drop_table(&name).await?;
                }
                ObjectType::Schema => {
                    let (c, s) = self.schema_parts(name)?;
                    if !self.storage.schema_exists(&c, &s).await? {
                        if if_exists {
                            continue;
                        }
                        return Err(sql_err(format!(
                            "Catalog Error: Schema with name {s} does not exist!"
                        )));
                    }
                    let tables = self.storage.list_tables(&c, &s).await?;
                    if !tables.is_empty() && !cascade {
                        return Err(sql_err(format!(
                            "Dependency Error: Cannot drop schema \"{s}\" because there are entries that depend on it. Use DROP...CASCADE to drop all dependents."
                        )));
                    }
                    self.storage.drop_schema(&c, &s).await?;
                }
                other => {
                    return Err(sql_err(format!(
                        "Not implemented Error: DROP {other} is not supported"
                    )));
                }
            }
        }
        Ok(Self::ok_status())
    }

    async fn insert(&mut self, insert: &Insert) -> Result<Output, ApiError> {
        let TableObject::TableName(table_name) = &insert.table else {
            return Err(sql_err(
                "Permission Error: INSERT INTO a table function is not allowed",
            ));
        };
        let name = self.resolve(&name_parts(table_name)?)?;
        let Some(source) = &insert.source else {
            return Err(sql_err("Parser Error: INSERT needs VALUES or a query"));
        };
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        let mut table = self.open_for_write(&name).await?;
        let table_schema = table.schema().map_err(delta_err)?;
        let columns: Vec<String> = if insert.columns.is_empty() {
            table_schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect()
        } else {
            let mut cols = Vec::new();
            for c in &insert.columns {
                let parts = name_parts(c)?;
                let col = parts.last().cloned().unwrap_or_default();
                if table_schema.index_of(&col).is_err() {
                    return Err(sql_err(format!(
                        "Binder Error: Table \"{}\" does not have a column with name \"{col}\"",
                        name.table
                    )));
                }
                cols.push(col);
            }
            cols
        };
        let statement = DFStatement::Statement(Box::new(Statement::Query(source.clone())));
        let plan = self.plan_query(statement).await?;
        let df = self.ctx.execute_logical_plan(plan).await.map_err(df_err)?;
        let source_fields: Vec<String> = df
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        if source_fields.len() != columns.len() {
            return Err(sql_err(format!(
                "Binder Error: table {} has {} columns but {} values were supplied",
                name.table,
                columns.len(),
                source_fields.len()
            )));
        }
        // Cast with DataFusion's rules (e.g. '2024-01-01 10:00' to TIMESTAMP) to the
        // table's types, then let the engine append by name.
        let mut exprs: Vec<Expr> = Vec::new();
        for (i, (src, dst)) in source_fields.iter().zip(&columns).enumerate() {
            let target = table_schema
                .field_with_name(dst)
                .map_err(|e| sql_err(e.to_string()))?
                .data_type()
                .clone();
            let (qualifier, _) = df.schema().qualified_field(i);
            let column = Column::new(qualifier.cloned(), src.clone());
            exprs.push(cast(Expr::Column(column), target).alias(dst.as_str()));
        }
        let batches = df
            .select(exprs)
            .map_err(df_err)?
            .collect()
            .await
            .map_err(df_err)?;
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        table
            .append(batches.into_iter().map(Ok), &WriteOptions::default())
            .await
            .map_err(delta_err)?;
        Ok(Self::count(rows as i64))
    }

    async fn delete(&mut self, delete: &Delete) -> Result<Output, ApiError> {
        let tables = match &delete.from {
            FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
        };
        let [twj] = tables.as_slice() else {
            return Err(sql_err("Not implemented Error: DELETE from several tables"));
        };
        let TableFactor::Table { name, .. } = &twj.relation else {
            return Err(sql_err("Not implemented Error: DELETE from a non-table"));
        };
        if delete.using.is_some() || !twj.joins.is_empty() {
            return Err(sql_err("Not implemented Error: DELETE ... USING"));
        }
        let name = self.resolve(&name_parts(name)?)?;
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        let table = self.open_for_write(&name).await?;
        let before: usize = table
            .files()
            .map_err(delta_err)?
            .iter()
            .filter_map(|f| f.num_records)
            .sum();
        let mut builder = table.delta_table().clone().delete();
        if let Some(selection) = &delete.selection {
            builder = builder.with_predicate(selection.to_string());
        }
        let (after_table, metrics) = builder.await.map_err(delta_err)?;
        let deleted = match metrics.num_deleted_rows {
            Some(n) => n,
            None => {
                let after = DeltaLiteTable::open(
                    &self.storage.table_uri(&name),
                    self.storage.options.clone(),
                )
                .await
                .ok()
                .and_then(|t| t.files().ok())
                .map(|f| f.iter().filter_map(|f| f.num_records).sum::<usize>())
                .unwrap_or(before);
                drop(after_table);
                before.saturating_sub(after)
            }
        };
        Ok(Self::count(deleted as i64))
    }

    async fn update(&mut self, update: &Update) -> Result<Output, ApiError> {
        let TableFactor::Table { name, .. } = &update.table.relation else {
            return Err(sql_err("Not implemented Error: UPDATE of a non-table"));
        };
        if update.from.is_some() || !update.table.joins.is_empty() {
            return Err(sql_err("Not implemented Error: UPDATE ... FROM"));
        }
        let name = self.resolve(&name_parts(name)?)?;
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        let table = self.open_for_write(&name).await?;
        let schema = table.schema().map_err(delta_err)?;
        let mut builder = table.delta_table().clone().update();
        for assignment in &update.assignments {
            let AssignmentTarget::ColumnName(column) = &assignment.target else {
                return Err(sql_err("Not implemented Error: tuple assignments"));
            };
            let parts = name_parts(column)?;
            let col = parts.last().cloned().unwrap_or_default();
            if schema.index_of(&col).is_err() {
                return Err(sql_err(format!(
                    "Binder Error: Table \"{}\" does not have a column with name \"{col}\"",
                    name.table
                )));
            }
            builder = builder.with_update(col, assignment.value.to_string());
        }
        if let Some(selection) = &update.selection {
            builder = builder.with_predicate(selection.to_string());
        }
        let (_, metrics) = builder.await.map_err(delta_err)?;
        Ok(Self::count(metrics.num_updated_rows as i64))
    }

    async fn use_schema(&mut self, u: &Use) -> Result<Output, ApiError> {
        let name = match u {
            Use::Object(n) | Use::Schema(n) | Use::Database(n) | Use::Catalog(n) => n,
            _ => return Err(sql_err("Not implemented Error: USE form not supported")),
        };
        let parts = name_parts(name)?;
        self.switch(&parts).await
    }

    async fn switch(&mut self, parts: &[String]) -> Result<Output, ApiError> {
        let not_found = |n: &str| {
            sql_err(format!(
                "Catalog Error: SET schema: No catalog + schema named \"{n}\" found."
            ))
        };
        let (c, s) = match parts {
            [s] if self.user.can_see(s) => (s.clone(), "main".to_string()),
            [s] => (self.catalog.clone(), s.clone()),
            [c, s] => (c.clone(), s.clone()),
            _ => return Err(not_found(&parts.join("."))),
        };
        if !self.user.can_see(&c)
            || validate_name("schema", &s).is_err()
            || !self.storage.schema_exists(&c, &s).await?
        {
            return Err(not_found(&parts.join(".")));
        }
        self.catalog = c.clone();
        self.schema = s.clone();
        let state = self.ctx.state_ref();
        let mut state = state.write();
        let options = state.config_mut().options_mut();
        options.catalog.default_catalog = c;
        options.catalog.default_schema = s;
        Ok(Self::ok_status())
    }

    async fn set(&mut self, stmt: &Statement) -> Result<Output, ApiError> {
        // Only `SET schema = 'x'` / `SET search_path = 'x'`: other settings could change how
        // the session reaches storage.
        let text = stmt.to_string();
        let lower = text.to_lowercase();
        let rest = lower
            .strip_prefix("set schema")
            .or_else(|| lower.strip_prefix("set search_path"))
            .ok_or_else(|| sql_err("Permission Error: only SET schema is allowed"))?;
        let offset = text.len() - rest.len();
        let value = text[offset..]
            .trim()
            .trim_start_matches(['=', ' '])
            .trim_start_matches("TO ")
            .trim()
            .trim_matches(['\'', '"']);
        let parts: Vec<String> = value
            .split('.')
            .map(|p| p.trim_matches('"').to_string())
            .collect();
        self.switch(&parts).await
    }

    async fn information_schema(&self, table: &str) -> Result<Arc<MemTable>, ApiError> {
        let utf8 = |n: &str| Field::new(n, DataType::Utf8, true);
        let mut catalogs: Vec<String> = self.user.catalogs.iter().cloned().collect();
        catalogs.sort();
        let table = match table {
            "schemata" => {
                let mut rows: Vec<[Option<String>; 7]> = Vec::new();
                for c in &catalogs {
                    for s in self.storage.list_schemas(c).await? {
                        rows.push([
                            Some(c.clone()),
                            Some(s),
                            Some("duckdb".into()),
                            None,
                            None,
                            None,
                            None,
                        ]);
                    }
                }
                let names = [
                    "catalog_name",
                    "schema_name",
                    "schema_owner",
                    "default_character_set_catalog",
                    "default_character_set_schema",
                    "default_character_set_name",
                    "sql_path",
                ];
                string_table(&names, rows.iter().map(|r| r.to_vec()).collect())?
            }
            "tables" => {
                let mut rows = Vec::new();
                for c in &catalogs {
                    for s in self.storage.list_schemas(c).await? {
                        for t in self.storage.list_tables(c, &s).await? {
                            rows.push(vec![
                                Some(c.clone()),
                                Some(s.clone()),
                                Some(t),
                                Some("BASE TABLE".to_string()),
                                None,
                                None,
                                None,
                                None,
                                None,
                                Some("YES".to_string()),
                                Some("NO".to_string()),
                                None,
                                None,
                            ]);
                        }
                    }
                }
                let names = [
                    "table_catalog",
                    "table_schema",
                    "table_name",
                    "table_type",
                    "self_referencing_column_name",
                    "reference_generation",
                    "user_defined_type_catalog",
                    "user_defined_type_schema",
                    "user_defined_type_name",
                    "is_insertable_into",
                    "is_typed",
                    "commit_action",
                    "TABLE_COMMENT",
                ];
                string_table(&names, rows)?
            }
            "columns" => {
                let schema = Arc::new(Schema::new(vec![
                    utf8("table_catalog"),
                    utf8("table_schema"),
                    utf8("table_name"),
                    utf8("column_name"),
                    Field::new("ordinal_position", DataType::Int32, false),
                    utf8("column_default"),
                    utf8("is_nullable"),
                    utf8("data_type"),
                    Field::new("character_maximum_length", DataType::Int32, true),
                    Field::new("character_octet_length", DataType::Int32, true),
                    Field::new("numeric_precision", DataType::Int32, true),
                    Field::new("numeric_precision_radix", DataType::Int32, true),
                    Field::new("numeric_scale", DataType::Int32, true),
                    Field::new("datetime_precision", DataType::Int32, true),
                    utf8("COLUMN_COMMENT"),
                ]));
                let mut text: Vec<Vec<Option<String>>> = vec![Vec::new(); 6];
                let (mut ordinal, mut precision, mut radix, mut scale, mut dt_precision) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for c in &catalogs {
                    for s in self.storage.list_schemas(c).await? {
                        for t in self.storage.list_tables(c, &s).await? {
                            let name = TableName::new(c, &s, &t)?;
                            let Some(table) = self.storage.open_table(&name).await? else {
                                continue;
                            };
                            let Ok(tschema) = table.schema() else {
                                continue;
                            };
                            for (i, f) in tschema.fields().iter().enumerate() {
                                text[0].push(Some(c.clone()));
                                text[1].push(Some(s.clone()));
                                text[2].push(Some(t.clone()));
                                text[3].push(Some(f.name().clone()));
                                text[4]
                                    .push(Some(if f.is_nullable() { "YES" } else { "NO" }.into()));
                                text[5].push(Some(duckdb_field_type(f)));
                                ordinal.push(i as i32 + 1);
                                let (p, sc) = numeric_precision_scale(f.data_type());
                                precision.push(p);
                                scale.push(sc);
                                radix.push(p.map(|_| {
                                    if matches!(f.data_type(), DataType::Decimal128(_, _)) {
                                        10
                                    } else {
                                        2
                                    }
                                }));
                                dt_precision.push(match f.data_type() {
                                    DataType::Timestamp(_, _) => Some(6),
                                    DataType::Date32 => Some(0),
                                    _ => None,
                                });
                            }
                        }
                    }
                }
                let n = ordinal.len();
                let none_i32 = || Arc::new(Int32Array::from(vec![None::<i32>; n])) as ArrayRef;
                let s =
                    |v: &Vec<Option<String>>| Arc::new(StringArray::from(v.clone())) as ArrayRef;
                let columns: Vec<ArrayRef> = vec![
                    s(&text[0]),
                    s(&text[1]),
                    s(&text[2]),
                    s(&text[3]),
                    Arc::new(Int32Array::from(ordinal)),
                    Arc::new(StringArray::from(vec![None::<String>; n])),
                    s(&text[4]),
                    s(&text[5]),
                    none_i32(),
                    none_i32(),
                    Arc::new(Int32Array::from(precision)),
                    Arc::new(Int32Array::from(radix)),
                    Arc::new(Int32Array::from(scale)),
                    Arc::new(Int32Array::from(dt_precision)),
                    Arc::new(StringArray::from(vec![None::<String>; n])),
                ];
                let batch = RecordBatch::try_new(Arc::clone(&schema), columns)
                    .map_err(|e| ApiError::Internal(e.to_string()))?;
                MemTable::try_new(schema, vec![vec![batch]]).map_err(df_err)?
            }
            other => return Err(table_missing(other)),
        };
        Ok(Arc::new(table))
    }
}

fn string_table(names: &[&str], rows: Vec<Vec<Option<String>>>) -> Result<MemTable, ApiError> {
    let schema = Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(*n, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let columns: Vec<ArrayRef> = (0..names.len())
        .map(|i| {
            Arc::new(StringArray::from(
                rows.iter()
                    .map(|r| r.get(i).cloned().flatten())
                    .collect::<Vec<_>>(),
            )) as ArrayRef
        })
        .collect();
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    MemTable::try_new(schema, vec![vec![batch]]).map_err(df_err)
}

/// Deepest expression nesting a statement may have. The parser builds chains of infix
/// operators (`1 + 1 + ...`, `x::INT::INT...`) without a recursion limit, and DataFusion
/// clones and plans expressions recursively on the worker's stack: a few thousand levels
/// overflowed it and aborted the whole server. Parenthesised nesting is already capped at
/// 50 by the parser.
pub const MAX_EXPR_DEPTH: usize = 256;
/// Longest chain of set operations (`SELECT .. UNION ALL SELECT .. UNION ALL ..`).
pub const MAX_SET_OPERATIONS: usize = 1000;

/// Refuse statements nested deeper than [`MAX_EXPR_DEPTH`] / [`MAX_SET_OPERATIONS`]. The walk
/// stops at the limit, so it never recurses deeper than that itself.
fn check_depth(statement: &DFStatement) -> Result<(), ApiError> {
    use datafusion::sql::sqlparser::ast::{self as sql, Visit};
    use std::ops::ControlFlow;

    struct Depth {
        current: usize,
        too_deep: Option<String>,
    }
    impl sql::Visitor for Depth {
        type Break = ();
        fn pre_visit_query(&mut self, query: &sql::Query) -> ControlFlow<()> {
            // Set operations nest through `left`/`right` without a visitor hook: count the
            // chain without recursion before the visitor descends into it.
            let mut longest = 0;
            let mut todo = vec![(query.body.as_ref(), 0usize)];
            while let Some((body, n)) = todo.pop() {
                longest = longest.max(n);
                if let sql::SetExpr::SetOperation { left, right, .. } = body {
                    todo.push((left.as_ref(), n + 1));
                    todo.push((right.as_ref(), n + 1));
                }
            }
            if longest > MAX_SET_OPERATIONS {
                self.too_deep = Some(format!(
                    "more than {MAX_SET_OPERATIONS} chained set operations (UNION/INTERSECT/EXCEPT)"
                ));
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, _: &sql::Expr) -> ControlFlow<()> {
            self.current += 1;
            if self.current > MAX_EXPR_DEPTH {
                self.too_deep = Some(format!(
                    "expressions nested more than {MAX_EXPR_DEPTH} levels deep"
                ));
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, _: &sql::Expr) -> ControlFlow<()> {
            self.current -= 1;
            ControlFlow::Continue(())
        }
    }

    let mut depth = Depth {
        current: 0,
        too_deep: None,
    };
    match statement {
        DFStatement::Statement(s) => {
            let _ = s.visit(&mut depth);
        }
        DFStatement::Explain(e) => return check_depth(&e.statement),
        _ => {}
    }
    match depth.too_deep {
        Some(what) => Err(sql_err(format!(
            "Parser Error: statement too complex: {what}"
        ))),
        None => Ok(()),
    }
}

/// Reject statements that could reach outside the granted catalogs.
fn check_allowed(statement: &DFStatement) -> Result<(), ApiError> {
    match statement {
        DFStatement::Statement(s) => match s.as_ref() {
            Statement::Query(_)
            | Statement::CreateSchema { .. }
            | Statement::AlterTable(_)
            | Statement::Drop { .. }
            | Statement::Insert(_)
            | Statement::Delete(_)
            | Statement::Update(_)
            | Statement::Use(_)
            | Statement::Set(_) => Ok(()),
            Statement::CreateTable(c) if !c.external && c.location.is_none() => Ok(()),
            Statement::Copy { .. } | Statement::CopyIntoSnowflake { .. } => {
                Err(sql_err("Permission Error: COPY is not allowed"))
            }
            other => Err(sql_err(format!(
                "Permission Error: statement not allowed: {}",
                other
                    .to_string()
                    .split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ")
            ))),
        },
        DFStatement::Explain(_) => Ok(()),
        DFStatement::CreateExternalTable(_) => {
            Err(sql_err("Permission Error: external tables are not allowed"))
        }
        DFStatement::CopyTo(_) => Err(sql_err("Permission Error: COPY is not allowed")),
        _ => Err(sql_err("Permission Error: statement not allowed")),
    }
}

/// Functions whose result size is an argument (`repeat('x', 1e9)`, `lpad`, `rpad`,
/// `array_repeat`): one such call allocated gigabytes that no memory pool accounts for
/// (a hostile-input run drove the server to 6.9 GB). Each is replaced, under its own name
/// and aliases, by a wrapper that refuses batches whose result could exceed
/// [`capped::MAX_VALUE_BYTES`].
mod capped {
    use datafusion::execution::FunctionRegistry;
    use std::sync::Arc;

    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, FieldRef, Int64Type};
    use datafusion::common::{Result, exec_err};
    use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
    use datafusion::logical_expr::{
        ColumnarValue, Documentation, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF,
        ScalarUDFImpl, Signature,
    };
    use datafusion::prelude::SessionContext;

    /// Largest result one call may produce for a batch of rows, in bytes (estimated from
    /// the largest count and the longest repeated value).
    pub const MAX_VALUE_BYTES: i64 = 256 * 1024 * 1024;

    #[derive(Debug, PartialEq, Eq, Hash)]
    struct Capped {
        inner: ScalarUDF,
        /// Argument holding the repeat count / target length.
        count_arg: usize,
        /// Argument whose length multiplies the count (`repeat`'s string), if any.
        unit_arg: Option<usize>,
    }

    /// Largest integer in an argument (NULLs and non-integers count as 0).
    fn max_int(value: &ColumnarValue) -> i64 {
        let array = match value {
            ColumnarValue::Scalar(s) => match s.to_array() {
                Ok(a) => a,
                Err(_) => return 0,
            },
            ColumnarValue::Array(a) => Arc::clone(a),
        };
        match arrow::compute::cast(&array, &DataType::Int64) {
            Ok(a) => arrow::compute::max(a.as_primitive::<Int64Type>()).unwrap_or(0),
            Err(_) => 0,
        }
    }

    /// Longest value of an argument in bytes (8 for fixed-width values).
    fn max_len(value: &ColumnarValue) -> i64 {
        let array = match value {
            ColumnarValue::Scalar(s) => match s.to_array() {
                Ok(a) => a,
                Err(_) => return 1,
            },
            ColumnarValue::Array(a) => Arc::clone(a),
        };
        match arrow::compute::kernels::length::length(&array) {
            Ok(l) => max_int(&ColumnarValue::Array(l)).max(1),
            Err(_) => 8,
        }
    }

    impl ScalarUDFImpl for Capped {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn aliases(&self) -> &[String] {
            self.inner.aliases()
        }
        fn signature(&self) -> &Signature {
            self.inner.signature()
        }
        fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
            self.inner.return_type(arg_types)
        }
        fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
            self.inner.return_field_from_args(args)
        }
        fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
            self.inner.coerce_types(arg_types)
        }
        fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
            self.inner.simplify(args, info)
        }
        fn documentation(&self) -> Option<&Documentation> {
            self.inner.documentation()
        }
        fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
            let count = args.args.get(self.count_arg).map(max_int).unwrap_or(0);
            let unit = match self.unit_arg.and_then(|i| args.args.get(i)) {
                Some(v) => max_len(v),
                // lpad/rpad count characters (up to 4 bytes); array elements ~8 bytes.
                None => 8,
            };
            // An upper bound of the batch's result: every row at the largest count and unit.
            let rows = args.number_rows.max(1) as i64;
            if count.saturating_mul(unit).saturating_mul(rows) > MAX_VALUE_BYTES {
                return exec_err!(
                    "{}: the result would exceed {} MiB",
                    self.inner.name(),
                    MAX_VALUE_BYTES / (1024 * 1024)
                );
            }
            self.inner.invoke_with_args(args)
        }
    }

    /// Replace the size-taking functions of `ctx` by capped versions.
    pub fn register(ctx: &SessionContext) {
        for (name, count_arg, unit_arg) in [
            ("repeat", 1, Some(0)),
            ("lpad", 1, None),
            ("rpad", 1, None),
            ("array_repeat", 1, Some(0)),
        ] {
            if let Ok(inner) = ctx.udf(name) {
                ctx.register_udf(ScalarUDF::new_from_impl(Capped {
                    inner: inner.as_ref().clone(),
                    count_arg,
                    unit_arg,
                }));
            }
        }
    }
}

/// `from_base64(text) -> BLOB`, as DuckDB has it.
fn from_base64_udf() -> datafusion::logical_expr::ScalarUDF {
    create_udf(
        "from_base64",
        vec![DataType::Utf8],
        DataType::Binary,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            let arrays = ColumnarValue::values_to_arrays(args)?;
            let input = arrays.first().ok_or_else(|| {
                datafusion::error::DataFusionError::Execution(
                    "from_base64 needs one argument".into(),
                )
            })?;
            let input = arrow::compute::cast(input, &DataType::Utf8)?;
            let strings = input
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| {
                    datafusion::error::DataFusionError::Execution("from_base64 expects text".into())
                })?;
            let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(strings.len());
            for v in strings.iter() {
                out.push(match v {
                    Some(s) => Some(base64::engine::general_purpose::STANDARD.decode(s.trim()).map_err(|e| {
                        datafusion::error::DataFusionError::Execution(format!(
                            "Conversion Error: Could not decode string \"{s}\" as base64: {e}"
                        ))
                    })?),
                    None => None,
                });
            }
            let array = BinaryArray::from_iter(out.iter().map(|o| o.as_deref()));
            Ok(ColumnarValue::Array(Arc::new(array)))
        }),
    )
}

/// Add nullable columns to a table in one commit (delta-rs `add_columns`).
pub async fn add_columns(table: &mut DeltaLiteTable, fields: &[Field]) -> Result<(), ApiError> {
    let mut kernel_fields: Vec<StructField> = Vec::new();
    for f in fields {
        let nullable = f.clone().with_nullable(true);
        let kf: StructField = (&nullable)
            .try_into_kernel()
            .map_err(|e| sql_err(format!("Conversion Error: {e}")))?;
        kernel_fields.push(kf);
    }
    table
        .delta_table()
        .clone()
        .add_columns()
        .with_fields(kernel_fields)
        .await
        .map_err(delta_err)?;
    table.reload().await.map_err(delta_err)?;
    Ok(())
}

/// Commit a widened column type. Every data file is re-encoded with the new type in the
/// same commit (`DeltaLiteTable::change_column_types`): Delta without the `typeWidening`
/// feature requires files to store the schema's types, so other readers stay correct.
async fn change_column_type(table: &mut DeltaLiteTable, wanted: Field) -> Result<(), ApiError> {
    table
        .change_column_types(&[wanted], &CompactOptions::default())
        .await
        .map_err(delta_err)?;
    Ok(())
}

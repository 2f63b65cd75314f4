//! DDL: schemas, tables, columns, `USE` / `SET schema`; each change one Delta commit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;

use arrow::datatypes::{Field, Schema};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTableOperation, ColumnDef, ColumnOption, CommentObject, CreateTable,
    Expr, ObjectName, ObjectType, SchemaName, SqlOption, Statement, Use, Value,
};
use deltalite::compact::CompactOptions;
use deltalite::options::DEFAULT_COMMIT_MAX_RETRIES;
use deltalite::write::WriteOptions;
use deltalite::{Created, DELETION_VECTORS_PROPERTY, DeltaLiteTable, InitialData, MetadataChange};

use super::defaults::default_value_sql;
use super::dialect::{PARTITIONED_BY, SORTED_BY};
use super::layout;
use super::targets::Dropped;
use super::{
    Output, SqlSession, column_named, delta_err, engine_rows, name_parts, sql_err, sql_error,
    table_missing, take_failure,
};
use crate::catalog::{DEFAULT_SCHEMA, validate_name};
use crate::error::ApiError;
use crate::types::{duckdb_field_type, field_for_sql_type, is_widening};

impl SqlSession {
    pub(super) async fn create_schema(
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

    pub(super) async fn create_table(&mut self, create: &CreateTable) -> Result<Output, ApiError> {
        if create.temporary && !create.external && create.location.is_none() {
            return self.create_temp_table(create).await;
        }
        if create.external || create.temporary || create.location.is_some() {
            return Err(sql_err(
                "Permission Error: external and temporary tables are not allowed",
            ));
        }
        let name = self.resolve(&name_parts(&create.name)?)?;
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        let existing = self.storage.open_table(&name).await?;
        if existing.is_some() {
            if create.if_not_exists {
                return Ok(Self::ok_status());
            }
            if !create.or_replace {
                return Err(sql_err(format!(
                    "Catalog Error: Table with name \"{}\" already exists!",
                    name.table
                )));
            }
        }
        // The rows of `AS query`, streamed into the table's commit.
        let (schema, rows) = match &create.query {
            Some(query) => {
                let statement = DFStatement::Statement(Box::new(Statement::Query(query.clone())));
                let plan = self.plan_query(statement).await?;
                let df = self
                    .ctx
                    .execute_logical_plan(plan)
                    .await
                    .map_err(sql_error)?;
                let stream = df.execute_stream().await.map_err(sql_error)?;
                // The stream's own schema, not the frame's: the frame's is the plan's
                // before type coercion (a `UNION` of a DATE and a TIMESTAMP said DATE
                // there, and then the rows were timestamps).
                let schema: Schema = stream.schema().as_ref().clone();
                (crate::types::storable_schema(&schema), Some(stream))
            }
            None => (self.column_schema(create).await?, None),
        };
        // `PARTITION BY (…)` (DuckLake's `PARTITIONED BY`): identity keys become the
        // table's partition columns, the whole list its layout property (`layout.rs`).
        let column_names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let layout_text = create.partition_by.as_deref().map(|e| match e {
            Expr::Tuple(items) => items
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            Expr::Nested(inner) => inner.to_string(),
            other => other.to_string(),
        });
        let layout_keys = match &layout_text {
            Some(text) => layout::parse_keys(text, &column_names)?,
            None => Vec::new(),
        };
        let partition_columns = layout::partition_columns(&layout_keys);
        let layout_text = layout_text.map(|_| layout::render(&layout_keys));
        let mut configuration = HashMap::new();
        if let Some(text) = &layout_text {
            configuration.insert(PARTITIONED_BY.to_string(), text.clone());
        }
        let failure = Arc::new(Mutex::new(None));
        let rows = rows.map(|stream| engine_rows(stream, Arc::clone(&failure)));
        let written = match existing {
            // `OR REPLACE` of an existing table: one overwrite commit, history kept.
            Some(mut table) => {
                let rows = rows.unwrap_or_else(|| futures::stream::empty().boxed());
                let options = WriteOptions {
                    partition_by: Some(partition_columns),
                    ..Default::default()
                };
                let replaced = table.overwrite_stream(&schema, rows, &options).await;
                match replaced {
                    Ok(_) => table
                        .change_metadata(
                            &[MetadataChange::Property {
                                key: PARTITIONED_BY.to_string(),
                                value: layout_text.clone(),
                            }],
                            15,
                        )
                        .await
                        .map(|_| ()),
                    Err(e) => Err(e),
                }
            }
            None => {
                let schema_created = self
                    .storage
                    .create_schema(&name.catalog, &name.schema)
                    .await?;
                let spec = self
                    .storage
                    .table_spec(schema, partition_columns, configuration);
                let data = match rows {
                    Some(rows) => InitialData::Stream(rows),
                    None => InitialData::Empty,
                };
                let created = self
                    .storage
                    .location(&name)?
                    .create(&spec, data, &WriteOptions::default())
                    .await;
                match created {
                    Ok(Created::New(_)) => Ok(()),
                    Ok(Created::Exists) => {
                        return Err(sql_err(format!(
                            "Catalog Error: Table with name \"{}\" already exists!",
                            name.table
                        )));
                    }
                    Err(e) => {
                        // A folder the failed create left must not linger.
                        if !self.storage.table_exists(&name).await.unwrap_or(true) {
                            let _ = self.storage.drop_table(&name).await;
                        }
                        if schema_created {
                            let _ = self
                                .storage
                                .drop_empty_schema(&name.catalog, &name.schema)
                                .await;
                        }
                        Err(e)
                    }
                }
            }
        };
        if let Err(e) = written {
            return Err(take_failure(&failure).unwrap_or_else(|| delta_err(e)));
        }
        Ok(Self::ok_status())
    }

    /// The schema of `CREATE TABLE t (col TYPE [NOT NULL] [DEFAULT v], …)`.
    async fn column_schema(&mut self, create: &CreateTable) -> Result<Schema, ApiError> {
        refuse_table_constraints(create)?;
        let mut fields = Vec::new();
        for col in &create.columns {
            refuse_unenforced(col)?;
            let not_null = col
                .options
                .iter()
                .any(|o| matches!(o.option, ColumnOption::NotNull));
            let col_name = &col.name.value;
            if fields
                .iter()
                .any(|f: &Field| f.name().eq_ignore_ascii_case(col_name))
            {
                return Err(sql_err(format!(
                    "Catalog Error: Column with name \"{col_name}\" already exists!"
                )));
            }
            let field = field_for_sql_type(col_name, &col.data_type.to_string(), !not_null)?;
            fields.push(self.with_default(field, col).await?);
        }
        if fields.is_empty() {
            return Err(sql_err(
                "Parser Error: CREATE TABLE needs at least one column",
            ));
        }
        Ok(Schema::new(fields))
    }

    pub(super) async fn alter_table(
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
            // Names are matched without regard to case, as DuckDB matches them; a new
            // name keeps the case it is written in.
            let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
            match op {
                AlterTableOperation::AddColumn {
                    if_not_exists,
                    column_def,
                    ..
                } => {
                    let col = column_def.name.value.clone();
                    if column_named(&columns, &col).is_some() {
                        if *if_not_exists {
                            continue;
                        }
                        return Err(sql_err(format!(
                            "Catalog Error: Column with name \"{col}\" already exists!"
                        )));
                    }
                    refuse_unenforced(column_def)?;
                    let field = field_for_sql_type(&col, &column_def.data_type.to_string(), true)?;
                    let field = self.with_default(field, column_def).await?;
                    match default_value_sql(&field) {
                        // The rows already there take the default, as in DuckDB: the
                        // table rewritten with the column, in one commit.
                        Some(value) => {
                            let mut fields: Vec<(Field, String)> = schema
                                .fields()
                                .iter()
                                .map(|f| (f.as_ref().clone(), super::rewrite::quote(f.name())))
                                .collect();
                            let read = format!("{value} AS {}", super::rewrite::quote(&col));
                            fields.push((field, read));
                            self.rewrite_columns(&name, &mut table, fields).await?;
                        }
                        None => add_columns(&mut table, &[field]).await?,
                    }
                }
                AlterTableOperation::AlterColumn {
                    column_name,
                    op: AlterColumnOperation::SetDataType { data_type, .. },
                } => {
                    let written = &column_name.value;
                    let Some(col) = column_named(&columns, written) else {
                        return Err(sql_err(format!(
                            "Binder Error: Table \"{}\" does not have a column with name \"{written}\"",
                            name.table
                        )));
                    };
                    let idx = schema.index_of(&col).map_err(|e| sql_err(e.to_string()))?;
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
                AlterTableOperation::SetTblProperties { table_properties } => {
                    for property in table_properties {
                        let (key, value) = table_property(property)?;
                        // Properties stored as they are (for deletion vectors the engine
                        // upgrades the protocol in the same commit); the rest are layout.
                        let plain = if key == DELETION_VECTORS_PROPERTY {
                            Some(key.clone())
                        } else {
                            super::maintenance::maintenance_property(&key, &value)
                                .transpose()?
                                .map(str::to_string)
                        };
                        if let Some(key) = plain {
                            table
                                .change_metadata(
                                    &[MetadataChange::Property {
                                        key,
                                        value: Some(value),
                                    }],
                                    DEFAULT_COMMIT_MAX_RETRIES,
                                )
                                .await
                                .map_err(delta_err)?;
                            continue;
                        }
                        let value = layout::render(&layout::parse_keys(&value, &columns)?);
                        if key == PARTITIONED_BY {
                            self.set_partitioning(&name, &mut table, &value).await?;
                        }
                        let value = (!value.is_empty()).then_some(value);
                        table
                            .change_metadata(
                                &[MetadataChange::Property { key, value }],
                                DEFAULT_COMMIT_MAX_RETRIES,
                            )
                            .await
                            .map_err(delta_err)?;
                    }
                }
                AlterTableOperation::DropColumn {
                    column_names,
                    if_exists,
                    ..
                } => {
                    let mut drop = Vec::new();
                    for ident in column_names {
                        match column_named(&columns, &ident.value) {
                            Some(col) => drop.push(col),
                            None if *if_exists => {}
                            None => {
                                return Err(sql_err(format!(
                                    "Catalog Error: Table \"{}\" does not have a column with name \"{}\"",
                                    name.table, ident.value
                                )));
                            }
                        }
                    }
                    if !drop.is_empty() {
                        self.drop_columns(&name, &mut table, &drop).await?;
                    }
                }
                AlterTableOperation::RenameColumn {
                    old_column_name,
                    new_column_name,
                } => {
                    let Some(old) = column_named(&columns, &old_column_name.value) else {
                        return Err(sql_err(format!(
                            "Binder Error: Table \"{}\" does not have a column with name \"{}\"",
                            name.table, old_column_name.value
                        )));
                    };
                    let new = new_column_name.value.clone();
                    if old == new {
                        continue;
                    }
                    let others: Vec<String> =
                        columns.iter().filter(|c| **c != old).cloned().collect();
                    if column_named(&others, &new).is_some() {
                        return Err(sql_err(format!(
                            "Catalog Error: Column with name \"{new}\" already exists!"
                        )));
                    }
                    self.rename_column(&name, &mut table, &old, &new).await?;
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

    /// `RENAME COLUMN`: as [`Self::drop_columns`], the table is rewritten in one overwrite
    /// commit, the column (its comment with it) under its new name. dbt's
    /// `alter_column_type` (an incremental model's `on_schema_change: sync_all_columns`)
    /// adds a column, copies, drops the old one and renames the new. A column the
    /// table's layout keys name (`PARTITIONED BY`, `SORTED BY`) keeps its name.
    async fn rename_column(
        &mut self,
        name: &crate::catalog::TableName,
        table: &mut DeltaLiteTable,
        old: &str,
        new: &str,
    ) -> Result<(), ApiError> {
        let schema = table.schema().map_err(delta_err)?;
        let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let configuration = table.configuration().map_err(delta_err)?;
        let mut keyed = table.partition_columns().map_err(delta_err)?;
        for property in [PARTITIONED_BY, SORTED_BY] {
            if let Some(text) = configuration.get(property) {
                keyed.extend(layout::parse_keys(text, &columns)?.iter().map(|k| match k {
                    layout::LayoutKey::Identity(c) => c.clone(),
                    layout::LayoutKey::Transform { column, .. } => column.clone(),
                }));
            }
        }
        if keyed.iter().any(|c| c == old) {
            return Err(sql_err(format!(
                "Catalog Error: cannot rename column \"{old}\": the table's layout keys name it"
            )));
        }
        let fields: Vec<(Field, String)> = schema
            .fields()
            .iter()
            .map(|f| {
                let read = super::rewrite::quote(f.name());
                if f.name() == old {
                    let renamed = f.as_ref().clone().with_name(new);
                    (renamed, format!("{read} AS {}", super::rewrite::quote(new)))
                } else {
                    (f.as_ref().clone(), read)
                }
            })
            .collect();
        self.rewrite_columns(name, table, fields).await
    }

    /// `DROP COLUMN`: Delta (without column mapping) has no way to drop a column from its
    /// files' schema in the log alone, so the table is rewritten without the columns in
    /// one overwrite commit (history kept; time travel still reads them), as `SET
    /// PARTITIONED BY` rewrites it. A partition column, or the last column, cannot go.
    async fn drop_columns(
        &mut self,
        name: &crate::catalog::TableName,
        table: &mut DeltaLiteTable,
        drop: &[String],
    ) -> Result<(), ApiError> {
        let schema = table.schema().map_err(delta_err)?;
        let partitions = table.partition_columns().map_err(delta_err)?;
        if let Some(col) = drop.iter().find(|c| partitions.contains(c)) {
            return Err(sql_err(format!(
                "Catalog Error: cannot drop column \"{col}\": the table is partitioned by it"
            )));
        }
        let kept: Vec<(Field, String)> = schema
            .fields()
            .iter()
            .filter(|f| !drop.contains(f.name()))
            .map(|f| (f.as_ref().clone(), super::rewrite::quote(f.name())))
            .collect();
        if kept.is_empty() {
            return Err(sql_err(format!(
                "Catalog Error: Cannot drop column: table \"{}\" only has one column remaining!",
                name.table
            )));
        }
        self.rewrite_columns(name, table, kept).await
    }

    /// Overwrite `table` with the rows of its latest version, as `fields` (each new field
    /// and the select item it is read as), in one commit: history kept, time travel still
    /// reads the old columns.
    async fn rewrite_columns(
        &mut self,
        name: &crate::catalog::TableName,
        table: &mut DeltaLiteTable,
        fields: Vec<(Field, String)>,
    ) -> Result<(), ApiError> {
        let metadata = table.schema().map_err(delta_err)?.metadata().clone();
        let real = [&name.catalog, &name.schema, &name.table]
            .map(|p| super::rewrite::quote(p))
            .join(".");
        let (fields, select): (Vec<Field>, Vec<String>) = fields.into_iter().unzip();
        let stream = self
            .stream_sql(&format!("SELECT {} FROM {real}", select.join(", ")))
            .await?;
        let failure = Arc::new(Mutex::new(None));
        table
            .overwrite_stream(
                &Schema::new_with_metadata(fields, metadata),
                engine_rows(stream, Arc::clone(&failure)),
                &WriteOptions::default(),
            )
            .await
            .map_err(|e| take_failure(&failure).unwrap_or_else(|| delta_err(e)))?;
        Ok(())
    }

    /// `SET PARTITIONED BY`: when the identity keys differ from the table's partition
    /// columns, rewrite the table into the new layout in one overwrite commit.
    async fn set_partitioning(
        &mut self,
        name: &crate::catalog::TableName,
        table: &mut DeltaLiteTable,
        keys: &str,
    ) -> Result<(), ApiError> {
        let schema = table.schema().map_err(delta_err)?;
        let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let wanted = layout::partition_columns(&layout::parse_keys(keys, &columns)?);
        if wanted == table.partition_columns().map_err(delta_err)? {
            return Ok(());
        }
        let real = [&name.catalog, &name.schema, &name.table]
            .map(|p| format!("\"{}\"", p.replace('"', "\"\"")))
            .join(".");
        let stream = self.stream_sql(&format!("SELECT * FROM {real}")).await?;
        let failure = Arc::new(Mutex::new(None));
        let options = WriteOptions {
            partition_by: Some(wanted),
            ..Default::default()
        };
        table
            .overwrite_stream(
                schema.as_ref(),
                engine_rows(stream, Arc::clone(&failure)),
                &options,
            )
            .await
            .map_err(|e| take_failure(&failure).unwrap_or_else(|| delta_err(e)))?;
        Ok(())
    }

    /// `COMMENT ON TABLE|COLUMN|VIEW … IS '…'` (`NULL` clears), stored in the Delta
    /// metadata (the table's description, the column's `comment` field metadata) or in the
    /// view's stored definition.
    pub(super) async fn comment(
        &mut self,
        object_type: &CommentObject,
        object_name: &ObjectName,
        comment: &Option<String>,
        if_exists: bool,
    ) -> Result<Output, ApiError> {
        let mut parts = name_parts(object_name)?;
        if *object_type == CommentObject::View {
            let name = self.resolve(&parts)?;
            if self.comment_view(&name, comment.clone()).await? || if_exists {
                return Ok(Self::ok_status());
            }
            return Err(sql_err(format!(
                "Catalog Error: View with name {} does not exist!",
                name.table
            )));
        }
        let column = match object_type {
            CommentObject::Table => None,
            CommentObject::Column => match parts.pop() {
                Some(c) if !parts.is_empty() => Some(c),
                _ => {
                    return Err(sql_err(
                        "Parser Error: COMMENT ON COLUMN needs table.column",
                    ));
                }
            },
            other => {
                return Err(sql_err(format!(
                    "Not implemented Error: COMMENT ON {other} is not supported"
                )));
            }
        };
        let name = self.resolve(&parts)?;
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        let mut table = match self.storage.open_table(&name).await? {
            Some(t) => t,
            None if if_exists => return Ok(Self::ok_status()),
            None => return Err(table_missing(&name.table)),
        };
        let change = match column {
            None => MetadataChange::TableComment(comment.clone()),
            Some(c) => {
                let schema = table.schema().map_err(delta_err)?;
                let columns: Vec<String> =
                    schema.fields().iter().map(|f| f.name().clone()).collect();
                let column = column_named(&columns, &c).ok_or_else(|| {
                    sql_err(format!(
                        "Binder Error: Table \"{}\" does not have a column with name \"{c}\"",
                        name.table
                    ))
                })?;
                MetadataChange::ColumnComment {
                    column,
                    comment: comment.clone(),
                }
            }
        };
        table
            .change_metadata(&[change], DEFAULT_COMMIT_MAX_RETRIES)
            .await
            .map_err(delta_err)?;
        Ok(Self::ok_status())
    }

    pub(super) async fn drop(
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
                    match &self.set_aside {
                        Some(sink) => {
                            let aside = crate::catalog::set_aside_name();
                            let dropped = Dropped::Table { name, aside };
                            self.storage
                                .rename_folder(&dropped.folder(), &dropped.aside())
                                .await?;
                            if let Dropped::Table { name, .. } = &dropped {
                                self.forget_temp(name);
                            }
                            note(sink, dropped);
                        }
                        None => {
                            self.storage.drop_table(&name).await?;
                            self.forget_temp(&name);
                        }
                    }
                }
                ObjectType::View => self.drop_view(name, if_exists).await?,
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
                    let entries = !self.storage.list_tables(&c, &s).await?.is_empty()
                        || !self.storage.list_views(&c, &s).await?.is_empty();
                    if entries && !cascade {
                        return Err(sql_err(format!(
                            "Dependency Error: Cannot drop schema \"{s}\" because there are entries that depend on it. Use DROP...CASCADE to drop all dependents."
                        )));
                    }
                    match &self.set_aside {
                        Some(sink) => {
                            let dropped = Dropped::Schema {
                                catalog: c,
                                schema: s,
                                aside: crate::catalog::set_aside_name(),
                            };
                            self.storage
                                .rename_folder(&dropped.folder(), &dropped.aside())
                                .await?;
                            note(sink, dropped);
                        }
                        None => self.storage.drop_schema(&c, &s).await?,
                    }
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

    pub(super) async fn use_schema(&mut self, u: &Use) -> Result<Output, ApiError> {
        let name = match u {
            Use::Object(n) | Use::Schema(n) | Use::Database(n) | Use::Catalog(n) => n,
            _ => return Err(sql_err("Not implemented Error: USE form not supported")),
        };
        let parts = name_parts(name)?;
        self.switch(&parts).await
    }

    pub(super) async fn switch(&mut self, parts: &[String]) -> Result<Output, ApiError> {
        let not_found = |n: &str| {
            sql_err(format!(
                "Catalog Error: SET schema: No catalog + schema named \"{n}\" found."
            ))
        };
        let (c, s) = match parts {
            [s] if self.user.can_see(s) => (s.clone(), DEFAULT_SCHEMA.to_string()),
            [s] => (self.catalog.clone(), s.clone()),
            [c, s] => (c.clone(), s.clone()),
            _ => return Err(not_found(&parts.join("."))),
        };
        if !self.user.can_see(&c)
            || validate_name("schema", &s).is_err()
            || (s != DEFAULT_SCHEMA && !self.storage.schema_exists(&c, &s).await?)
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
        drop(state);
        self.register_session_functions();
        Ok(Self::ok_status())
    }

    pub(super) async fn set(&mut self, stmt: &Statement) -> Result<Output, ApiError> {
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
}

/// Add nullable columns to a table in one metadata commit.
pub async fn add_columns(table: &mut DeltaLiteTable, fields: &[Field]) -> Result<(), ApiError> {
    table
        .change_metadata(
            &[MetadataChange::AddColumns(fields.to_vec())],
            DEFAULT_COMMIT_MAX_RETRIES,
        )
        .await
        .map_err(delta_err)?;
    Ok(())
}

/// A column option this server would accept and then not carry out: a `CHECK` or
/// foreign key (not enforced), a generated or computed value (not computed), a collation
/// (comparisons would not follow it). Refused, where it used to be ignored (a column
/// with `CHECK (a > 0)` took -1). `PRIMARY KEY` and `UNIQUE` stay accepted and
/// unenforced, as Delta's informational keys are: DDL scripts and dbt contracts declare
/// them.
fn refuse_unenforced(column: &ColumnDef) -> Result<(), ApiError> {
    let what = column.options.iter().find_map(|o| match &o.option {
        ColumnOption::Check(_) => Some("CHECK constraints"),
        ColumnOption::ForeignKey(_) => Some("foreign keys"),
        ColumnOption::Generated { .. }
        | ColumnOption::Materialized(_)
        | ColumnOption::Ephemeral(_)
        | ColumnOption::Alias(_)
        | ColumnOption::Identity(_)
        | ColumnOption::OnUpdate(_) => Some("generated columns"),
        ColumnOption::Collation(_) => Some("collations"),
        _ => None,
    });
    match what {
        Some(what) => Err(sql_err(format!(
            "Not implemented Error: {what} are not supported (column {}): they would not \
             be enforced",
            column.name
        ))),
        None => Ok(()),
    }
}

/// The table-level `CHECK` and `FOREIGN KEY` constraints, refused as
/// [`refuse_unenforced`] refuses a column's.
fn refuse_table_constraints(create: &CreateTable) -> Result<(), ApiError> {
    use datafusion::sql::sqlparser::ast::TableConstraint;
    let what = create.constraints.iter().find_map(|c| match c {
        TableConstraint::Check(_) => Some("CHECK constraints"),
        TableConstraint::ForeignKey(_) => Some("foreign keys"),
        _ => None,
    });
    match what {
        Some(what) => Err(sql_err(format!(
            "Not implemented Error: {what} are not supported (table {}): they would not be \
             enforced",
            create.name
        ))),
        None => Ok(()),
    }
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

/// A `SET TBLPROPERTIES` entry the server accepts: the layout properties `dialect.rs`
/// writes for `SET PARTITIONED BY` / `SET SORTED BY`, the maintenance ones
/// (`sql/maintenance.rs`) and `delta.enableDeletionVectors` (`true`/`false`); other
/// Delta properties could switch on features the engine does not honour.
fn table_property(option: &SqlOption) -> Result<(String, String), ApiError> {
    if let SqlOption::KeyValue { key, value } = option
        && let Expr::Value(v) = value
        && let Value::SingleQuotedString(text) | Value::Number(text, _) = &v.value
    {
        if key.value.eq_ignore_ascii_case(DELETION_VECTORS_PROPERTY)
            && (text.eq_ignore_ascii_case("true") || text.eq_ignore_ascii_case("false"))
        {
            return Ok((
                DELETION_VECTORS_PROPERTY.to_string(),
                text.to_ascii_lowercase(),
            ));
        }
        if key.value == PARTITIONED_BY || key.value == SORTED_BY {
            return Ok((key.value.clone(), text.clone()));
        }
        if super::maintenance::maintenance_property(&key.value, text).is_some() {
            return Ok((key.value.clone(), text.clone()));
        }
    }
    Err(sql_err(format!(
        "Not implemented Error: ALTER TABLE SET TBLPROPERTIES ({option}) is not supported"
    )))
}

/// Record a folder moved aside (a poisoned lock still holds a consistent list).
fn note(sink: &Mutex<Vec<Dropped>>, dropped: Dropped) {
    match sink.lock() {
        Ok(mut list) => list.push(dropped),
        Err(p) => p.into_inner().push(dropped),
    }
}

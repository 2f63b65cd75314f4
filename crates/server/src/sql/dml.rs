//! DML: INSERT, DELETE, UPDATE; each one Delta commit.

use arrow::datatypes::{Field, Schema};
use datafusion::common::Column;
use datafusion::logical_expr::cast;
use datafusion::prelude::Expr;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    ConflictTarget, Insert, OnConflict, OnConflictAction, OnInsert, Statement, TableObject,
};
use deltalite::DeltaLiteTable;
use deltalite::write::WriteOptions;

use std::sync::{Arc, Mutex};

use super::defaults::spell_out_defaults;
use super::dialect::BY_NAME;
use super::{
    Output, SqlSession, column_named, delta_err, engine_rows, name_parts, sql_err, sql_error,
    table_missing, take_failure,
};
use crate::catalog::TableName;
use crate::error::ApiError;

impl SqlSession {
    pub(super) async fn open_for_write(
        &self,
        name: &TableName,
    ) -> Result<DeltaLiteTable, ApiError> {
        self.storage
            .open_table(name)
            .await?
            .ok_or_else(|| table_missing(&name.table))
    }

    pub(super) async fn insert(&mut self, insert: &Insert) -> Result<Output, ApiError> {
        let TableObject::TableName(table_name) = &insert.table else {
            return Err(sql_err(
                "Permission Error: INSERT INTO a table function is not allowed",
            ));
        };
        let name = self.resolve(&name_parts(table_name)?)?;
        if insert.or.is_some() || insert.replace_into || insert.ignore {
            return Err(sql_err(
                "Binder Error: INSERT OR REPLACE / OR IGNORE need a primary key, and Delta tables have none: use ON CONFLICT (columns) DO UPDATE | DO NOTHING",
            ));
        }
        match (&insert.on, &insert.source) {
            (None, _) => {}
            (Some(OnInsert::OnConflict(conflict)), Some(source)) => {
                return self.insert_on_conflict(insert, source, conflict).await;
            }
            (Some(OnInsert::OnConflict(_)), None) => {
                return Err(sql_err(
                    "Not implemented Error: DEFAULT VALUES with ON CONFLICT",
                ));
            }
            (Some(_), _) => {
                return Err(sql_err(
                    "Not implemented Error: ON DUPLICATE KEY UPDATE (use ON CONFLICT)",
                ));
            }
        }
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        let mut table = self.open_for_write(&name).await?;
        let table_schema = table.schema().map_err(delta_err)?;
        let listed: Vec<String> = insert
            .columns
            .iter()
            .map(|c| name_parts(c).map(|p| p.last().cloned().unwrap_or_default()))
            .collect::<Result<_, _>>()?;
        let table_columns = table_columns_of(&table_schema);
        // The columns `VALUES` rows fill, in order, for `DEFAULT` in them (an unknown
        // name is refused below, before anything is written).
        let filled: Vec<&Field> = match listed.as_slice() {
            [] => table_schema.fields().iter().map(|f| f.as_ref()).collect(),
            [only] if only == BY_NAME => Vec::new(),
            _ => listed
                .iter()
                .filter_map(|c| {
                    let found = column_named(&table_columns, c)?;
                    table_schema.field_with_name(&found).ok()
                })
                .collect(),
        };
        let source = match spell_out_defaults(insert.source.as_deref(), &filled)? {
            Some(spelled) => Box::new(spelled),
            None => insert
                .source
                .clone()
                .ok_or_else(|| sql_err("Parser Error: INSERT needs VALUES or a query"))?,
        };
        let statement = DFStatement::Statement(Box::new(Statement::Query(source)));
        let plan = self.plan_query(statement).await?;
        let df = self
            .ctx
            .execute_logical_plan(plan)
            .await
            .map_err(sql_error)?;
        let source_fields: Vec<String> = df
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let binder = |col: &str| {
            sql_err(format!(
                "Binder Error: Table \"{}\" does not have a column with name \"{col}\"",
                name.table
            ))
        };
        let columns: Vec<String> = match listed.as_slice() {
            [] => table_columns,
            // `INSERT INTO t BY NAME`: the query's column names (see `dialect.rs`).
            [only] if only == BY_NAME => source_fields
                .iter()
                .map(|f| column_named(&table_columns, f).ok_or_else(|| binder(f)))
                .collect::<Result<_, _>>()?,
            _ => listed
                .iter()
                .map(|c| column_named(&table_columns, c).ok_or_else(|| binder(c)))
                .collect::<Result<_, _>>()?,
        };
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
                .map_err(|e| sql_err(e.to_string()))?;
            let (qualifier, _) = df.schema().qualified_field(i);
            let mut value = Expr::Column(Column::new(qualifier.cloned(), src.clone()));
            if crate::types::is_time(target) {
                value = cast(value, crate::types::TIME_VALUE_TYPE);
            }
            exprs.push(cast(value, target.data_type().clone()).alias(dst.as_str()));
        }
        // Streamed into the table's commit: memory is a batch, not the result.
        let stream = df
            .select(exprs)
            .map_err(sql_error)?
            .execute_stream()
            .await
            .map_err(sql_error)?;
        let failure = Arc::new(Mutex::new(None));
        let stats = table
            .append_stream(
                engine_rows(stream, Arc::clone(&failure)),
                &WriteOptions::default(),
            )
            .await
            .map_err(|e| take_failure(&failure).unwrap_or_else(|| delta_err(e)))?;
        Ok(Self::count(stats.rows_written as i64))
    }

    /// `INSERT … ON CONFLICT (keys) DO UPDATE SET … [WHERE …] | DO NOTHING` as the
    /// `MERGE` it means: the inserted rows are the source (named `excluded`, as in
    /// PostgreSQL and DuckDB), the conflict columns the `ON` equalities.
    async fn insert_on_conflict(
        &mut self,
        insert: &Insert,
        source: &datafusion::sql::sqlparser::ast::Query,
        conflict: &OnConflict,
    ) -> Result<Output, ApiError> {
        use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, Ident, visit_expressions_mut};
        let Some(ConflictTarget::Columns(keys)) = &conflict.conflict_target else {
            return Err(sql_err(
                "Binder Error: ON CONFLICT needs its conflict columns: Delta tables have no constraints",
            ));
        };
        let TableObject::TableName(table_name) = &insert.table else {
            return Err(sql_err(
                "Permission Error: INSERT INTO a table function is not allowed",
            ));
        };
        let name = self.resolve(&name_parts(table_name)?)?;
        let table = self.open_for_write(&name).await?;
        let table_schema = table.schema().map_err(delta_err)?;
        drop(table);
        let columns: Vec<String> = if insert.columns.is_empty() {
            table_schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect()
        } else {
            insert
                .columns
                .iter()
                .map(|c| name_parts(c).map(|p| p.last().cloned().unwrap_or_default()))
                .collect::<Result<_, _>>()?
        };
        let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        let target = quote(&name.table);
        let on: Vec<String> = keys
            .iter()
            .map(|k| format!("{target}.{key} = excluded.{key}", key = quote(&k.value)))
            .collect();
        let listed: Vec<String> = columns.iter().map(|c| quote(c)).collect();
        let values: Vec<String> = columns
            .iter()
            .map(|c| format!("excluded.{}", quote(c)))
            .collect();
        let insert_clause = format!(
            "WHEN NOT MATCHED THEN INSERT ({}) VALUES ({})",
            listed.join(", "),
            values.join(", ")
        );
        // Unqualified names in the update mean the target's row, as in PostgreSQL.
        let qualify = |e: &SqlExpr| {
            let mut e = e.clone();
            let _ = visit_expressions_mut(&mut e, |x| {
                if let SqlExpr::Identifier(i) = x {
                    *x = SqlExpr::CompoundIdentifier(vec![
                        Ident::with_quote('"', name.table.clone()),
                        i.clone(),
                    ]);
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
            e.to_string()
        };
        let update_clause = match &conflict.action {
            OnConflictAction::DoNothing => String::new(),
            OnConflictAction::DoUpdate(update) => {
                let set: Vec<String> = update
                    .assignments
                    .iter()
                    .map(|a| format!("{} = {}", a.target, qualify(&a.value)))
                    .collect();
                let condition = update
                    .selection
                    .as_ref()
                    .map(|w| format!(" AND ({})", qualify(w)))
                    .unwrap_or_default();
                format!(
                    "WHEN MATCHED{condition} THEN UPDATE SET {} ",
                    set.join(", ")
                )
            }
        };
        let real = [&name.catalog, &name.schema, &name.table]
            .map(|p| quote(p))
            .join(".");
        let sql = format!(
            "MERGE INTO {real} AS {target} USING (SELECT * FROM ({source}) AS __v({})) AS excluded ON {} {update_clause}{insert_clause}",
            listed.join(", "),
            on.join(" AND ")
        );
        self.merge_sql(&sql).await
    }
}

fn table_columns_of(schema: &Schema) -> Vec<String> {
    schema.fields().iter().map(|f| f.name().clone()).collect()
}

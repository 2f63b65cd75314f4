//! DML: INSERT, DELETE, UPDATE; each one Delta commit.

use datafusion::common::Column;
use datafusion::logical_expr::cast;
use datafusion::prelude::Expr;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{Insert, Statement, TableObject};
use deltalite::DeltaLiteTable;
use deltalite::write::WriteOptions;

use std::sync::{Arc, Mutex};

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
        let Some(source) = &insert.source else {
            return Err(sql_err("Parser Error: INSERT needs VALUES or a query"));
        };
        let lock = self.storage.table_lock(&name);
        let _guard = lock.lock().await;
        let mut table = self.open_for_write(&name).await?;
        let table_schema = table.schema().map_err(delta_err)?;
        let statement = DFStatement::Statement(Box::new(Statement::Query(source.clone())));
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
        let listed: Vec<String> = insert
            .columns
            .iter()
            .map(|c| name_parts(c).map(|p| p.last().cloned().unwrap_or_default()))
            .collect::<Result<_, _>>()?;
        let binder = |col: &str| {
            sql_err(format!(
                "Binder Error: Table \"{}\" does not have a column with name \"{col}\"",
                name.table
            ))
        };
        let table_columns: Vec<String> = table_schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
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
                .map_err(|e| sql_err(e.to_string()))?
                .data_type()
                .clone();
            let (qualifier, _) = df.schema().qualified_field(i);
            let column = Column::new(qualifier.cloned(), src.clone());
            exprs.push(cast(Expr::Column(column), target).alias(dst.as_str()));
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
}

//! DML: INSERT, DELETE, UPDATE; each one Delta commit.

use datafusion::common::Column;
use datafusion::logical_expr::cast;
use datafusion::prelude::Expr;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{Insert, Statement, TableObject};
use deltalite::DeltaLiteTable;
use deltalite::write::WriteOptions;

use std::sync::{Arc, Mutex};

use super::{
    Output, SqlSession, delta_err, engine_rows, name_parts, sql_err, sql_error, table_missing,
    take_failure,
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

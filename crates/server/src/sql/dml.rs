//! DML: INSERT, DELETE, UPDATE; each one Delta commit.

use datafusion::common::Column;
use datafusion::logical_expr::cast;
use datafusion::prelude::Expr;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, Delete, FromTable, Insert, Statement, TableFactor, TableObject, Update,
};
use deltalite::DeltaLiteTable;
use deltalite::write::WriteOptions;

use super::{Output, SqlSession, delta_err, name_parts, sql_err, sql_error, table_missing};
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
        let batches = df
            .select(exprs)
            .map_err(sql_error)?
            .collect()
            .await
            .map_err(sql_error)?;
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        table
            .append(batches.into_iter().map(Ok), &WriteOptions::default())
            .await
            .map_err(delta_err)?;
        Ok(Self::count(rows as i64))
    }

    pub(super) async fn delete(&mut self, delete: &Delete) -> Result<Output, ApiError> {
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

    pub(super) async fn update(&mut self, update: &Update) -> Result<Output, ApiError> {
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
}

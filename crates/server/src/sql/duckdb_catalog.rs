//! DuckDB's catalog functions, `duckdb_databases()`, `duckdb_schemas()`,
//! `duckdb_tables()`, `duckdb_views()` and `duckdb_columns()`, over the catalogs the
//! session sees, with the columns DuckDB gives them that clients read (dbt-duckdb's
//! macros, which dbt-altertable reuses, list relations and columns through them).
//! `sql/dialect.rs` splices `duckdb_x()` into `information_schema.duckdb_x`, which
//! `information_schema` answers from here; the listings of relations (`duckdb_tables`,
//! `_views`, `_columns`) load through `sql/catalog_view.rs`, and their rows are built here.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;

use super::catalog_view::{Relation, RelationKind};
use super::{SqlSession, sql_error};
use crate::error::ApiError;
use crate::types::{duckdb_field_type, numeric_precision_scale};
use deltalite::COLUMN_COMMENT_KEY;

/// One column of a catalog function's result.
enum Col {
    Text(&'static str, Vec<Option<String>>),
    Bool(&'static str, Vec<bool>),
    Int(&'static str, Vec<Option<i32>>),
}

impl Col {
    fn field(&self) -> Field {
        match self {
            Col::Text(n, _) => Field::new(*n, DataType::Utf8, true),
            Col::Bool(n, _) => Field::new(*n, DataType::Boolean, false),
            Col::Int(n, _) => Field::new(*n, DataType::Int32, true),
        }
    }

    fn array(self) -> ArrayRef {
        match self {
            Col::Text(_, v) => Arc::new(StringArray::from(v)),
            Col::Bool(_, v) => Arc::new(BooleanArray::from(v)),
            Col::Int(_, v) => Arc::new(Int32Array::from(v)),
        }
    }
}

fn batch(columns: Vec<Col>) -> Result<RecordBatch, ApiError> {
    let schema = Arc::new(Schema::new(
        columns.iter().map(Col::field).collect::<Vec<_>>(),
    ));
    let arrays: Vec<ArrayRef> = columns.into_iter().map(Col::array).collect();
    RecordBatch::try_new(schema, arrays).map_err(|e| ApiError::Internal(e.to_string()))
}

fn table(columns: Vec<Col>) -> Result<Arc<MemTable>, ApiError> {
    let batch = batch(columns)?;
    Ok(Arc::new(
        MemTable::try_new(batch.schema(), vec![vec![batch]]).map_err(sql_error)?,
    ))
}

fn text<'a>(v: impl IntoIterator<Item = &'a str>) -> Vec<Option<String>> {
    v.into_iter().map(|s| Some(s.to_string())).collect()
}

/// `duckdb_tables()`.
pub(super) fn tables_batch(relations: &[Relation]) -> Result<RecordBatch, ApiError> {
    let tables: Vec<(&Relation, Option<i32>, Option<String>)> = relations
        .iter()
        .filter_map(|r| match &r.kind {
            RelationKind::Table { details } => Some(match details {
                Some(d) => (r, Some(d.fields.len() as i32), d.comment.clone()),
                None => (r, None, None),
            }),
            RelationKind::View { .. } => None,
        })
        .collect();
    let n = tables.len();
    batch(vec![
        Col::Text(
            "database_name",
            text(tables.iter().map(|(r, ..)| r.catalog.as_str())),
        ),
        Col::Text(
            "schema_name",
            text(tables.iter().map(|(r, ..)| r.schema.as_str())),
        ),
        Col::Text(
            "table_name",
            text(tables.iter().map(|(r, ..)| r.name.as_str())),
        ),
        Col::Text("comment", tables.iter().map(|(.., c)| c.clone()).collect()),
        Col::Bool("internal", vec![false; n]),
        Col::Bool("temporary", vec![false; n]),
        Col::Bool("has_primary_key", vec![false; n]),
        Col::Int("column_count", tables.iter().map(|(_, k, _)| *k).collect()),
    ])
}

/// `duckdb_views()`.
pub(super) fn views_batch(relations: &[Relation]) -> Result<RecordBatch, ApiError> {
    let views: Vec<(&Relation, Option<String>, Option<String>)> = relations
        .iter()
        .filter_map(|r| match &r.kind {
            RelationKind::View { sql, comment, .. } => Some((r, sql.clone(), comment.clone())),
            RelationKind::Table { .. } => None,
        })
        .collect();
    let n = views.len();
    batch(vec![
        Col::Text(
            "database_name",
            text(views.iter().map(|(r, ..)| r.catalog.as_str())),
        ),
        Col::Text(
            "schema_name",
            text(views.iter().map(|(r, ..)| r.schema.as_str())),
        ),
        Col::Text(
            "view_name",
            text(views.iter().map(|(r, ..)| r.name.as_str())),
        ),
        Col::Text("comment", views.iter().map(|(.., c)| c.clone()).collect()),
        Col::Bool("internal", vec![false; n]),
        Col::Bool("temporary", vec![false; n]),
        Col::Text("sql", views.into_iter().map(|(_, sql, _)| sql).collect()),
    ])
}

/// `duckdb_columns()`: tables' and views' columns, as DuckDB lists them.
pub(super) fn columns_batch(relations: &[Relation]) -> Result<RecordBatch, ApiError> {
    let (mut db, mut schema, mut tbl, mut comment) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut column, mut index, mut nullable, mut data_type) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut precision, mut scale, mut default) = (Vec::new(), Vec::new(), Vec::new());
    for r in relations {
        for (i, f) in r.fields().into_iter().flatten().enumerate() {
            default.push(super::defaults::default_sql(f));
            db.push(Some(r.catalog.clone()));
            schema.push(Some(r.schema.clone()));
            tbl.push(Some(r.name.clone()));
            comment.push(f.metadata().get(COLUMN_COMMENT_KEY).cloned());
            column.push(Some(f.name().clone()));
            index.push(Some(i as i32 + 1));
            nullable.push(f.is_nullable());
            data_type.push(Some(duckdb_field_type(f)));
            let (p, sc) = numeric_precision_scale(f.data_type());
            precision.push(p);
            scale.push(sc);
        }
    }
    let n = db.len();
    batch(vec![
        Col::Text("database_name", db),
        Col::Text("schema_name", schema),
        Col::Text("table_name", tbl),
        Col::Text("column_name", column),
        Col::Int("column_index", index),
        Col::Text("comment", comment),
        Col::Bool("internal", vec![false; n]),
        Col::Text("column_default", default),
        Col::Bool("is_nullable", nullable),
        Col::Text("data_type", data_type),
        Col::Int("numeric_precision", precision),
        Col::Int("numeric_scale", scale),
    ])
}

impl SqlSession {
    /// The catalog function `name` (`duckdb_tables`, …); `None` for any other name.
    pub(super) async fn duckdb_catalog(
        &mut self,
        name: &str,
    ) -> Result<Option<Arc<MemTable>>, ApiError> {
        let mut catalogs: Vec<String> = self.user.catalogs.iter().cloned().collect();
        catalogs.sort();
        Ok(Some(match name {
            "duckdb_databases" => {
                let n = catalogs.len();
                table(vec![
                    Col::Text("database_name", text(catalogs.iter().map(String::as_str))),
                    Col::Text("path", vec![None; n]),
                    Col::Text("comment", vec![None; n]),
                    Col::Bool("internal", vec![false; n]),
                    Col::Text("type", vec![Some("duckdb".into()); n]),
                    Col::Bool("readonly", vec![false; n]),
                ])?
            }
            "duckdb_schemas" => {
                let (mut db, mut schema) = (Vec::new(), Vec::new());
                for c in &catalogs {
                    for s in self.storage.shown_schemas(c).await? {
                        db.push(c.clone());
                        schema.push(s);
                    }
                }
                let n = db.len();
                table(vec![
                    Col::Text("database_name", text(db.iter().map(String::as_str))),
                    Col::Text("schema_name", text(schema.iter().map(String::as_str))),
                    Col::Text("comment", vec![None; n]),
                    Col::Bool("internal", vec![false; n]),
                    Col::Bool("temporary", vec![false; n]),
                ])?
            }
            _ => return Ok(None),
        }))
    }
}

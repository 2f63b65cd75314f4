//! DuckDB's catalog functions, `duckdb_databases()`, `duckdb_schemas()`,
//! `duckdb_tables()`, `duckdb_views()` and `duckdb_columns()`, over the catalogs the
//! session sees, with the columns DuckDB gives them that clients read (dbt-duckdb's
//! macros, which dbt-altertable reuses, list relations and columns through them).
//! `sql/dialect.rs` splices `duckdb_x()` into `information_schema.duckdb_x`, which
//! `information_schema` answers from here. `duckdb_columns()` lists tables' and views'
//! columns.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;

use super::info_schema::table_comment;
use super::{SqlSession, sql_error};
use crate::catalog::TableName;
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

fn table(columns: Vec<Col>) -> Result<Arc<MemTable>, ApiError> {
    let schema = Arc::new(Schema::new(
        columns.iter().map(Col::field).collect::<Vec<_>>(),
    ));
    let arrays: Vec<ArrayRef> = columns.into_iter().map(Col::array).collect();
    let batch = RecordBatch::try_new(Arc::clone(&schema), arrays)
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(Arc::new(
        MemTable::try_new(schema, vec![vec![batch]]).map_err(sql_error)?,
    ))
}

impl SqlSession {
    /// The catalog function `name` (`duckdb_tables`, …); `None` for any other name.
    pub(super) async fn duckdb_catalog(
        &mut self,
        name: &str,
    ) -> Result<Option<Arc<MemTable>>, ApiError> {
        let mut catalogs: Vec<String> = self.user.catalogs.iter().cloned().collect();
        catalogs.sort();
        let text = |v: &[String]| v.iter().cloned().map(Some).collect::<Vec<_>>();
        Ok(Some(match name {
            "duckdb_databases" => {
                let n = catalogs.len();
                table(vec![
                    Col::Text("database_name", text(&catalogs)),
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
                    for s in self.storage.list_schemas(c).await? {
                        db.push(c.clone());
                        schema.push(s);
                    }
                }
                let n = db.len();
                table(vec![
                    Col::Text("database_name", text(&db)),
                    Col::Text("schema_name", text(&schema)),
                    Col::Text("comment", vec![None; n]),
                    Col::Bool("internal", vec![false; n]),
                    Col::Bool("temporary", vec![false; n]),
                ])?
            }
            "duckdb_views" => {
                let (mut db, mut schema, mut view, mut sql) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for c in &catalogs {
                    for s in self.storage.list_schemas(c).await? {
                        for v in self.storage.list_views(c, &s).await? {
                            let name = TableName::new(c, &s, &v)?;
                            // Dropped since the listing: skipped.
                            let Some(body) = self.storage.get_view(&name).await? else {
                                continue;
                            };
                            db.push(c.clone());
                            schema.push(s.clone());
                            view.push(v);
                            sql.push(super::views::view_sql(&body));
                        }
                    }
                }
                let n = db.len();
                table(vec![
                    Col::Text("database_name", text(&db)),
                    Col::Text("schema_name", text(&schema)),
                    Col::Text("view_name", text(&view)),
                    Col::Text("comment", vec![None; n]),
                    Col::Bool("internal", vec![false; n]),
                    Col::Bool("temporary", vec![false; n]),
                    Col::Text("sql", sql),
                ])?
            }
            "duckdb_tables" => {
                let (mut db, mut schema, mut tbl, mut comment, mut column_count) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for c in &catalogs {
                    for s in self.storage.list_schemas(c).await? {
                        for (name, table) in self.open_tables(c, &s).await? {
                            let Ok(tschema) = table.schema() else {
                                continue;
                            };
                            db.push(name.catalog);
                            schema.push(name.schema);
                            tbl.push(name.table);
                            comment.push(table_comment(&table));
                            column_count.push(Some(tschema.fields().len() as i32));
                        }
                    }
                }
                let n = db.len();
                table(vec![
                    Col::Text("database_name", text(&db)),
                    Col::Text("schema_name", text(&schema)),
                    Col::Text("table_name", text(&tbl)),
                    Col::Text("comment", comment),
                    Col::Bool("internal", vec![false; n]),
                    Col::Bool("temporary", vec![false; n]),
                    Col::Bool("has_primary_key", vec![false; n]),
                    Col::Int("column_count", column_count),
                ])?
            }
            // Tables' and views' columns, as DuckDB lists them.
            "duckdb_columns" => {
                let (mut db, mut schema, mut tbl, mut comment) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                let (mut column, mut index, mut nullable, mut data_type) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                let (mut precision, mut scale) = (Vec::new(), Vec::new());
                for r in self.relation_columns(&catalogs).await? {
                    for (i, f) in r.fields.iter().enumerate() {
                        db.push(r.catalog.clone());
                        schema.push(r.schema.clone());
                        tbl.push(r.name.clone());
                        comment.push(f.metadata().get(COLUMN_COMMENT_KEY).cloned());
                        column.push(f.name().clone());
                        index.push(Some(i as i32 + 1));
                        nullable.push(f.is_nullable());
                        data_type.push(duckdb_field_type(f));
                        let (p, sc) = numeric_precision_scale(f.data_type());
                        precision.push(p);
                        scale.push(sc);
                    }
                }
                let n = db.len();
                table(vec![
                    Col::Text("database_name", text(&db)),
                    Col::Text("schema_name", text(&schema)),
                    Col::Text("table_name", text(&tbl)),
                    Col::Text("column_name", text(&column)),
                    Col::Int("column_index", index),
                    Col::Text("comment", comment),
                    Col::Bool("internal", vec![false; n]),
                    Col::Text("column_default", vec![None; n]),
                    Col::Bool("is_nullable", nullable),
                    Col::Text("data_type", text(&data_type)),
                    Col::Int("numeric_precision", precision),
                    Col::Int("numeric_scale", scale),
                ])?
            }
            _ => return Ok(None),
        }))
    }
}

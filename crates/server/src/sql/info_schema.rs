//! `information_schema` over the granted catalogs, with DuckDB's column names. The
//! listings of relations (`tables`, `columns`) load through `sql/catalog_view.rs`; their
//! rows are built here.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::catalog::TableProvider;
use datafusion::datasource::MemTable;

use super::catalog_view::{Relation, RelationKind};
use super::{SqlSession, sql_error, table_missing};
use crate::error::ApiError;
use crate::types::{duckdb_field_type, numeric_precision_scale};
use deltalite::COLUMN_COMMENT_KEY;

impl SqlSession {
    pub(super) async fn information_schema(
        &mut self,
        table: &str,
    ) -> Result<Arc<dyn TableProvider>, ApiError> {
        let mut catalogs: Vec<String> = self.user.catalogs.iter().cloned().collect();
        catalogs.sort();
        let table = match table {
            "schemata" => {
                let mut rows: Vec<[Option<String>; 7]> = Vec::new();
                for c in &catalogs {
                    for s in self.storage.shown_schemas(c).await? {
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
            other => {
                return Ok(self
                    .duckdb_catalog(other)
                    .await?
                    .ok_or_else(|| table_missing(other))?);
            }
        };
        Ok(Arc::new(table))
    }
}

/// `information_schema.tables`: tables, then views.
pub(super) fn tables_batch(relations: &[Relation]) -> Result<RecordBatch, ApiError> {
    let (tables, views): (Vec<&Relation>, Vec<&Relation>) =
        relations.iter().partition(|r| !r.is_view());
    let rows = tables
        .into_iter()
        .chain(views)
        .map(|r| {
            let (kind, insertable, comment) = match &r.kind {
                RelationKind::Table { details } => (
                    "BASE TABLE",
                    "YES",
                    details.as_ref().and_then(|d| d.comment.clone()),
                ),
                RelationKind::View { .. } => ("VIEW", "NO", None),
            };
            vec![
                Some(r.catalog.clone()),
                Some(r.schema.clone()),
                Some(r.name.clone()),
                Some(kind.to_string()),
                None,
                None,
                None,
                None,
                None,
                Some(insertable.to_string()),
                Some("NO".to_string()),
                None,
                comment,
            ]
        })
        .collect();
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
        // Lower case: DuckDB's `TABLE_COMMENT` is matched case-insensitively there, and
        // clients write it unquoted.
        "table_comment",
    ];
    string_batch(&names, rows)
}

/// `information_schema.columns`: every listed relation's columns.
pub(super) fn columns_batch(relations: &[Relation]) -> Result<RecordBatch, ApiError> {
    let utf8 = |n: &str| Field::new(n, DataType::Utf8, true);
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
        utf8("column_comment"),
    ]));
    let mut text: Vec<Vec<Option<String>>> = vec![Vec::new(); 8];
    let (mut ordinal, mut precision, mut radix, mut scale, mut dt_precision) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in relations {
        for (i, f) in r.fields().into_iter().flatten().enumerate() {
            text[0].push(Some(r.catalog.clone()));
            text[1].push(Some(r.schema.clone()));
            text[2].push(Some(r.name.clone()));
            text[3].push(Some(f.name().clone()));
            text[4].push(Some(if f.is_nullable() { "YES" } else { "NO" }.into()));
            text[5].push(Some(duckdb_field_type(f)));
            text[6].push(f.metadata().get(COLUMN_COMMENT_KEY).cloned());
            text[7].push(super::defaults::default_sql(f));
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
    let n = ordinal.len();
    let none_i32 = || Arc::new(Int32Array::from(vec![None::<i32>; n])) as ArrayRef;
    let s = |v: &Vec<Option<String>>| Arc::new(StringArray::from(v.clone())) as ArrayRef;
    let columns: Vec<ArrayRef> = vec![
        s(&text[0]),
        s(&text[1]),
        s(&text[2]),
        s(&text[3]),
        Arc::new(Int32Array::from(ordinal)),
        s(&text[7]),
        s(&text[4]),
        s(&text[5]),
        none_i32(),
        none_i32(),
        Arc::new(Int32Array::from(precision)),
        Arc::new(Int32Array::from(radix)),
        Arc::new(Int32Array::from(scale)),
        Arc::new(Int32Array::from(dt_precision)),
        s(&text[6]),
    ];
    RecordBatch::try_new(schema, columns).map_err(|e| ApiError::Internal(e.to_string()))
}

impl SqlSession {
    /// DuckDB's `DESCRIBE <query>` / `DESCRIBE <table>`: one row per result column
    /// (`column_name`, `column_type` as DuckDB names it, `null`, `key`, `default`,
    /// `extra`). The query is planned, not run.
    pub(super) async fn describe(&mut self, query: &str) -> Result<super::Output, ApiError> {
        let plan = self.plan_sql(query).await?;
        let rows = plan
            .schema()
            .fields()
            .iter()
            .map(|f| {
                vec![
                    Some(f.name().clone()),
                    Some(duckdb_field_type(f)),
                    Some(if f.is_nullable() { "YES" } else { "NO" }.to_string()),
                    None,
                    super::defaults::default_sql(f),
                    None,
                ]
            })
            .collect();
        let names = [
            "column_name",
            "column_type",
            "null",
            "key",
            "default",
            "extra",
        ];
        let batch = string_batch(&names, rows)?;
        Ok(super::Output::Batches(batch.schema(), vec![batch]))
    }
}

/// A table's comment (its Delta description), if it has one.
pub(super) fn table_comment(table: &deltalite::DeltaLiteTable) -> Option<String> {
    let state = table.delta_table().snapshot().ok()?;
    state
        .metadata()
        .description()
        .filter(|d| !d.is_empty())
        .map(str::to_string)
}

fn string_table(names: &[&str], rows: Vec<Vec<Option<String>>>) -> Result<MemTable, ApiError> {
    let batch = string_batch(names, rows)?;
    MemTable::try_new(batch.schema(), vec![vec![batch]]).map_err(sql_error)
}

/// Text columns `names`, one row per `rows` entry.
fn string_batch(names: &[&str], rows: Vec<Vec<Option<String>>>) -> Result<RecordBatch, ApiError> {
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
    RecordBatch::try_new(schema, columns).map_err(|e| ApiError::Internal(e.to_string()))
}

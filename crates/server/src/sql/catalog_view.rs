//! The catalog views that list relations (`information_schema.tables` and `.columns`,
//! `duckdb_tables()`, `duckdb_views()`, `duckdb_columns()`) open only the relations a
//! statement's filters on their names leave.
//!
//! A row of such a view needs its table opened (schema, comment) or its view planned, and
//! clients ask for one relation at a time: dbt's `get_columns_in_relation` is
//! `duckdb_columns() WHERE table_name = '…' AND lower(schema_name) = lower('…')`. So name
//! resolution registers the view unloaded ([`CatalogView`]). Once the statement is
//! planned, DataFusion's optimizer has pushed the statement's filters into the view's
//! scans; the filters that read only names (catalog, schema, relation, and for
//! `information_schema.tables` the type) are evaluated over the names alone, schemas first
//! and then the relations of the schemas left. Only the relations left are opened, and
//! only they become rows. The pushdown is inexact, so every filter still runs above the
//! scan: the answer is exactly what filtering every relation's rows would give.

use std::sync::{Arc, OnceLock};

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DFSchema, Result as DFResult, TableReference};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source_as_provider;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{Expr, LogicalPlan, TableProviderFilterPushDown, TableType};
use datafusion::physical_expr::create_physical_expr;
use datafusion::physical_plan::ExecutionPlan;

use super::{SqlSession, sql_error};
use crate::catalog::TableName;
use crate::error::ApiError;

/// A catalog view that lists relations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Listing {
    InfoTables,
    InfoColumns,
    DuckdbTables,
    DuckdbViews,
    DuckdbColumns,
}

/// What a listing needs of each table it lists.
#[derive(Clone, Copy)]
enum TableNeeds {
    /// That it is one (its folder has a Delta log).
    Exists,
    /// It opened: its columns and comment.
    Opened,
}

/// What a listing needs of each view it lists.
#[derive(Clone, Copy)]
enum ViewNeeds {
    /// Its name only.
    Name,
    /// Its stored definition: SQL and comment (a view whose definition is gone by then is
    /// left out).
    Sql,
    /// Its columns as its query plans now (a view that no longer plans is left out).
    Columns,
}

impl Listing {
    /// The listing an `information_schema` table of this name is, if any.
    pub(super) fn named(table: &str) -> Option<Self> {
        Some(match table {
            "tables" => Self::InfoTables,
            "columns" => Self::InfoColumns,
            "duckdb_tables" => Self::DuckdbTables,
            "duckdb_views" => Self::DuckdbViews,
            "duckdb_columns" => Self::DuckdbColumns,
            _ => return None,
        })
    }

    /// Its columns that name a relation's catalog, schema and name.
    fn name_columns(self) -> [&'static str; 3] {
        match self {
            Self::InfoTables | Self::InfoColumns => ["table_catalog", "table_schema", "table_name"],
            Self::DuckdbTables | Self::DuckdbColumns => {
                ["database_name", "schema_name", "table_name"]
            }
            Self::DuckdbViews => ["database_name", "schema_name", "view_name"],
        }
    }

    /// Its column that tells tables from views, if it has one.
    fn type_column(self) -> Option<&'static str> {
        (self == Self::InfoTables).then_some("table_type")
    }

    /// What it needs of each table, when a statement reads the columns `reads` says
    /// (`None`: it lists no tables). Only a table's comment and column count need it
    /// opened; a listing of columns needs every table's.
    fn tables(self, reads: impl Fn(&str) -> bool) -> Option<TableNeeds> {
        let opened_if = |read: bool| match read {
            true => TableNeeds::Opened,
            false => TableNeeds::Exists,
        };
        match self {
            Self::DuckdbViews => None,
            Self::InfoTables => Some(opened_if(reads("table_comment"))),
            Self::DuckdbTables => Some(opened_if(reads("comment") || reads("column_count"))),
            Self::InfoColumns | Self::DuckdbColumns => Some(TableNeeds::Opened),
        }
    }

    /// What it needs of each view, as [`Listing::tables`] for tables.
    fn views(self, reads: impl Fn(&str) -> bool) -> Option<ViewNeeds> {
        match self {
            Self::DuckdbTables => None,
            Self::InfoTables => Some(ViewNeeds::Name),
            Self::DuckdbViews if reads("sql") || reads("comment") => Some(ViewNeeds::Sql),
            Self::DuckdbViews => Some(ViewNeeds::Name),
            Self::InfoColumns | Self::DuckdbColumns => Some(ViewNeeds::Columns),
        }
    }

    /// Its rows for `relations`.
    fn batch(self, relations: &[Relation]) -> Result<RecordBatch, ApiError> {
        match self {
            Self::InfoTables => super::info_schema::tables_batch(relations),
            Self::InfoColumns => super::info_schema::columns_batch(relations),
            Self::DuckdbTables => super::duckdb_catalog::tables_batch(relations),
            Self::DuckdbViews => super::duckdb_catalog::views_batch(relations),
            Self::DuckdbColumns => super::duckdb_catalog::columns_batch(relations),
        }
    }
}

/// A relation as a listing shows it.
pub(super) struct Relation {
    pub(super) catalog: String,
    pub(super) schema: String,
    pub(super) name: String,
    pub(super) kind: RelationKind,
}

pub(super) enum RelationKind {
    Table {
        /// What its log says, when the listing needs it ([`TableNeeds::Opened`]).
        details: Option<TableDetails>,
    },
    View {
        /// Its columns, when the listing needs them.
        fields: Option<Fields>,
        /// Its SQL, when the listing needs it.
        sql: Option<String>,
        /// Its `COMMENT ON VIEW`, read with its SQL.
        comment: Option<String>,
    },
}

/// A table as its log describes it now.
pub(super) struct TableDetails {
    pub(super) fields: Fields,
    /// Its Delta description, if it has one.
    pub(super) comment: Option<String>,
}

impl Relation {
    /// Its columns: a table's when it was opened, or a view's when they were planned.
    pub(super) fn fields(&self) -> Option<&Fields> {
        match &self.kind {
            RelationKind::Table { details } => details.as_ref().map(|d| &d.fields),
            RelationKind::View { fields, .. } => fields.as_ref(),
        }
    }

    pub(super) fn is_view(&self) -> bool {
        matches!(self.kind, RelationKind::View { .. })
    }
}

/// A listing registered for a statement, whose rows are loaded once the statement is
/// planned ([`SqlSession::load_catalog_views`]).
#[derive(Debug)]
pub(super) struct CatalogView {
    listing: Listing,
    schema: SchemaRef,
    rows: OnceLock<RecordBatch>,
}

impl CatalogView {
    pub(super) fn unloaded(listing: Listing) -> Result<Self, ApiError> {
        Ok(Self {
            listing,
            schema: listing.batch(&[])?.schema(),
            rows: OnceLock::new(),
        })
    }
}

#[async_trait]
impl TableProvider for CatalogView {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    /// Inexact: the filters pick the relations to load, and still run above the scan.
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DFResult<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let rows = self.rows.get().ok_or_else(|| {
            datafusion::error::DataFusionError::Internal(format!(
                "catalog view {:?} scanned before its rows were loaded",
                self.listing
            ))
        })?;
        MemorySourceConfig::try_new_exec(&[vec![rows.clone()]], self.schema(), projection.cloned())
            .map(|e| e as Arc<dyn ExecutionPlan>)
    }
}

/// One scan of a listing: the name it is read under, the filters pushed into it, and
/// the columns it reads (`None`: all).
struct Scan {
    qualifier: TableReference,
    filters: Vec<Expr>,
    projection: Option<Vec<usize>>,
}

impl SqlSession {
    /// Load the rows of the listings `pending` registered for `plan`: of each, only the
    /// relations that some scan of it may keep. `None` for the plan loads them whole (a
    /// caller that plans the statement itself).
    pub(super) async fn load_catalog_views(
        &mut self,
        plan: Option<&LogicalPlan>,
        pending: Vec<Arc<CatalogView>>,
    ) -> Result<(), ApiError> {
        if pending.is_empty() {
            return Ok(());
        }
        let mut scans: Vec<(Arc<CatalogView>, Vec<Scan>)> =
            pending.into_iter().map(|v| (v, Vec::new())).collect();
        if let Some(plan) = plan {
            // The optimizer is what moves filters into scans, through projections,
            // unions and joins; the plan that runs is optimized again, the same way.
            let optimized = self.ctx.state().optimize(plan).map_err(sql_error)?;
            optimized
                .apply_with_subqueries(|node| {
                    if let LogicalPlan::TableScan(scan) = node
                        && let Ok(provider) = source_as_provider(&scan.source)
                        && let Some(view) = provider.downcast_ref::<CatalogView>()
                        && let Some((_, found)) = scans
                            .iter_mut()
                            .find(|(v, _)| std::ptr::eq(v.as_ref(), view))
                    {
                        found.push(Scan {
                            qualifier: scan.table_name.clone(),
                            filters: scan.filters.clone(),
                            projection: scan.projection.clone(),
                        });
                    }
                    Ok(TreeNodeRecursion::Continue)
                })
                .map_err(sql_error)?;
        }
        for (view, found) in scans {
            // A column no scan reads is never seen: its values need not be loaded (the
            // plan that runs is optimized the same way, so it reads the same columns).
            let schema = view.schema();
            let reads = |column: &str| {
                found.is_empty()
                    || found.iter().any(|scan| {
                        scan.projection
                            .as_ref()
                            .is_none_or(|p| p.iter().any(|&i| schema.field(i).name() == column))
                    })
            };
            let needs = (view.listing.tables(reads), view.listing.views(reads));
            let relations = self.relations(view.listing, needs, &found).await?;
            let _ = view.rows.set(view.listing.batch(&relations)?);
        }
        Ok(())
    }

    /// The relations of `listing` that one of `scans` may keep (all of them without a
    /// scan: a listing the optimized plan does not scan is loaded whole, so that what runs
    /// is right whatever it scans), loaded as `needs` says: in each granted catalog and
    /// schema (sorted), its tables, then its views.
    async fn relations(
        &mut self,
        listing: Listing,
        (table_needs, view_needs): (Option<TableNeeds>, Option<ViewNeeds>),
        scans: &[Scan],
    ) -> Result<Vec<Relation>, ApiError> {
        let [catalog_col, schema_col, name_col] = listing.name_columns();
        let mut catalogs: Vec<String> = self.user.catalogs.iter().cloned().collect();
        catalogs.sort();
        let mut schemas: Vec<(String, String)> = Vec::new();
        for c in &catalogs {
            for s in self.storage.list_schemas(c).await? {
                schemas.push((c.clone(), s));
            }
        }
        let keep = kept(
            scans,
            &[
                (
                    catalog_col,
                    schemas.iter().map(|(c, _)| c.as_str()).collect(),
                ),
                (
                    schema_col,
                    schemas.iter().map(|(_, s)| s.as_str()).collect(),
                ),
            ],
        );
        let mut out = Vec::new();
        for ((c, s), _) in schemas.iter().zip(keep).filter(|(_, k)| *k) {
            // Candidates: every folder of the schema may be a table (whether it is, is
            // asked only of those the names keep), and its views.
            let tables = match table_needs {
                Some(_) => self.storage.list_schema_children(c, s).await?,
                None => Vec::new(),
            };
            let views = match view_needs {
                Some(_) => self.storage.list_views(c, s).await?,
                None => Vec::new(),
            };
            let names: Vec<&str> = tables.iter().chain(&views).map(String::as_str).collect();
            let types: Vec<&str> = std::iter::repeat_n("BASE TABLE", tables.len())
                .chain(std::iter::repeat_n("VIEW", views.len()))
                .collect();
            let mut columns = vec![
                (catalog_col, vec![c.as_str(); names.len()]),
                (schema_col, vec![s.as_str(); names.len()]),
                (name_col, names),
            ];
            if let Some(type_col) = listing.type_column() {
                columns.push((type_col, types));
            }
            let keep = kept(scans, &columns);
            let (keep_tables, keep_views) = keep.split_at(tables.len());
            // A folder whose name no statement could name (another writer's) is no
            // relation of ours.
            let picked = |all: &[String], keep: &[bool]| -> Vec<TableName> {
                all.iter()
                    .zip(keep)
                    .filter(|(_, k)| **k)
                    .filter_map(|(t, _)| TableName::new(c, s, t).ok())
                    .collect()
            };
            if let Some(needs) = table_needs {
                out.extend(
                    self.load_tables(picked(&tables, keep_tables), needs)
                        .await?,
                );
            }
            if let Some(needs) = view_needs {
                for name in picked(&views, keep_views) {
                    if let Some(view) = self.load_view(name, needs).await? {
                        out.push(view);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The tables of `names` (a few at once) as they are now, opened when `needs` says
    /// so; a name that is no table (a leftover folder, one dropped since the listing), or
    /// an opened one whose schema cannot be read, is left out.
    async fn load_tables(
        &self,
        names: Vec<TableName>,
        needs: TableNeeds,
    ) -> Result<Vec<Relation>, ApiError> {
        let relation = |name: TableName, details| Relation {
            kind: RelationKind::Table { details },
            catalog: name.catalog,
            schema: name.schema,
            name: name.table,
        };
        Ok(match needs {
            TableNeeds::Exists => self
                .storage
                .existing_tables(names)
                .await?
                .into_iter()
                .map(|name| relation(name, None))
                .collect(),
            TableNeeds::Opened => self
                .storage
                .open_tables_for_query(names)
                .await?
                .into_iter()
                .filter_map(|(name, table)| {
                    let table = table?;
                    let details = TableDetails {
                        fields: table.schema().ok()?.fields().clone(),
                        comment: super::info_schema::table_comment(&table),
                    };
                    Some(relation(name, Some(details)))
                })
                .collect(),
        })
    }

    async fn load_view(
        &mut self,
        name: TableName,
        needs: ViewNeeds,
    ) -> Result<Option<Relation>, ApiError> {
        let (fields, sql, comment) = match needs {
            ViewNeeds::Name => (None, None, None),
            ViewNeeds::Sql => match self.storage.get_view(&name).await? {
                Some(body) => match super::views::Definition::read(&body) {
                    Some(d) => (None, Some(d.sql), d.comment),
                    None => (None, None, None),
                },
                None => return Ok(None),
            },
            ViewNeeds::Columns => match self.listed_view_schema(&name).await? {
                Some(schema) => (Some(schema.fields().clone()), None, None),
                None => return Ok(None),
            },
        };
        Ok(Some(Relation {
            catalog: name.catalog,
            schema: name.schema,
            name: name.table,
            kind: RelationKind::View {
                fields,
                sql,
                comment,
            },
        }))
    }
}

/// Which candidates (rows of `columns`, each a column of the listing by name) one of
/// `scans` may keep; every one without a scan. A scan keeps a row unless a filter of it that reads only these
/// columns is false or null for it; a filter that reads other columns, or that cannot be
/// evaluated here (a parameter not bound yet, a subquery), keeps every row.
fn kept(scans: &[Scan], columns: &[(&str, Vec<&str>)]) -> Vec<bool> {
    let rows = columns.first().map_or(0, |(_, v)| v.len());
    if scans.is_empty() {
        return vec![true; rows];
    }
    let mut keep = vec![false; rows];
    for scan in scans {
        let mut this = vec![true; rows];
        for filter in &scan.filters {
            if let Some(mask) = evaluate(filter, &scan.qualifier, columns) {
                for (k, m) in this.iter_mut().zip(mask.iter()) {
                    *k &= m == Some(true);
                }
            }
        }
        for (k, t) in keep.iter_mut().zip(this) {
            *k |= t;
        }
    }
    keep
}

/// `filter` over `columns`, if it reads only them and can be evaluated here.
fn evaluate(
    filter: &Expr,
    qualifier: &TableReference,
    columns: &[(&str, Vec<&str>)],
) -> Option<BooleanArray> {
    if filter.is_volatile()
        || !filter.column_refs().iter().all(|c| {
            c.relation.as_ref().is_none_or(|r| r == qualifier)
                && columns.iter().any(|(n, _)| *n == c.name)
        })
    {
        return None;
    }
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(n, _)| Field::new(*n, DataType::Utf8, false))
            .collect::<Vec<_>>(),
    ));
    let arrays: Vec<ArrayRef> = columns
        .iter()
        .map(|(_, v)| Arc::new(StringArray::from(v.clone())) as ArrayRef)
        .collect();
    let batch = RecordBatch::try_new(Arc::clone(&schema), arrays).ok()?;
    let df_schema = DFSchema::try_from_qualified_schema(qualifier.clone(), &schema).ok()?;
    let expr = create_physical_expr(
        filter,
        &df_schema,
        &ExecutionProps::new(),
        &PhysicalPlanningContext::default(),
    )
    .ok()?;
    let value = expr
        .evaluate(&batch)
        .ok()?
        .into_array(batch.num_rows())
        .ok()?;
    value.as_any().downcast_ref::<BooleanArray>().cloned()
}

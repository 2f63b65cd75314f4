//! The table provider every Delta table is scanned through: delta-rs's own, with one
//! correction. delta-rs 1.1 claims to apply exactly any pushed-down filter that names no
//! column (it takes such a filter for a partition-only one), then drops it: a filter the
//! planner folded to a constant (`WHERE k NOT IN (1, NULL)` → `… AND NULL`, a MERGE
//! clause `AND FALSE`) returned rows it should not. Filters without columns stay above
//! the scan here, where DataFusion evaluates them.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::Result;
use datafusion::common::Statistics;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use deltalake::delta_datafusion::DeltaScanNext;

/// A Delta table as the session scans it (see the module documentation).
#[derive(Debug)]
pub(crate) struct DeltaScan {
    inner: Arc<dyn TableProvider>,
}

impl DeltaScan {
    pub(crate) fn wrap(inner: Arc<dyn TableProvider>) -> Arc<dyn TableProvider> {
        Arc::new(Self { inner })
    }

    /// Whether `provider` is a Delta table scanned through this wrapper.
    pub(crate) fn is_delta(provider: &dyn TableProvider) -> bool {
        provider
            .downcast_ref::<Self>()
            .is_some_and(|s| s.inner.is::<DeltaScanNext>())
    }
}

#[async_trait]
impl TableProvider for DeltaScan {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn table_type(&self) -> TableType {
        self.inner.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.inner.scan(state, projection, filters, limit).await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        let answers = self.inner.supports_filters_pushdown(filters)?;
        Ok(filters
            .iter()
            .zip(answers)
            .map(|(filter, answer)| {
                if filter.column_refs().is_empty() {
                    TableProviderFilterPushDown::Unsupported
                } else {
                    answer
                }
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        self.inner.statistics()
    }
}

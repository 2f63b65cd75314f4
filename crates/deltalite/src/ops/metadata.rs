//! Metadata-only changes (comments, table properties, added columns): one commit of a new
//! `metaData` action through the transaction path. A change that leaves the metadata as
//! it is commits nothing, so clients that re-send the same `COMMENT` or layout hint on
//! every load do not grow the log.

use std::collections::HashMap;

use arrow::datatypes::Field;
use delta_kernel::schema::{MetadataValue, StructField, StructType};
use deltalake::DeltaTable;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel;
use deltalake::kernel::{Action, MetadataExt, Protocol};
use deltalake::protocol::DeltaOperation;
use futures::future::BoxFuture;

use crate::error::{DeltaLiteError, Result};
use crate::schema::features::{DELETION_VECTORS_PROPERTY, check_supported};
use crate::table::DeltaLiteTable;
use crate::txn::{self, CommitSpec, Done, Policy, ReadSet, Staged};

/// Writer features implied by each legacy writer version (the protocol's table), and
/// whether the table uses them. The engine refuses tables that use any but `appendOnly`
/// and `invariants` (`schema/features.rs`), so those two are what an upgrade can find.
const LEGACY_WRITER_FEATURES: [(i32, &str); 7] = [
    (2, "appendOnly"),
    (2, "invariants"),
    (3, "checkConstraints"),
    (4, "changeDataFeed"),
    (4, "generatedColumns"),
    (5, "columnMapping"),
    (6, "identityColumns"),
];

/// Whether a legacy-implied writer feature is in use by the table.
fn in_use(feature: &str, metadata: &deltalake::kernel::Metadata, schema: &StructType) -> bool {
    match feature {
        "appendOnly" => metadata
            .configuration()
            .get("delta.appendOnly")
            .is_some_and(|v| v.eq_ignore_ascii_case("true")),
        "invariants" => schema
            .fields()
            .any(|f| f.metadata.contains_key("delta.invariants")),
        // Refused by the engine before any write (`schema/features.rs`): keep listed.
        _ => true,
    }
}

/// `protocol` with the `deletionVectors` reader and writer feature (reader 3, writer 7),
/// as `delta.enableDeletionVectors=true` requires; `None` when it has it already. Of the
/// features a legacy writer version implied, those the table uses are listed: listing
/// `invariants` unused would bar writers that cannot enforce invariants (delta-rs built
/// without DataFusion) for nothing. Built through the kernel's validated serde form: its
/// constructors are private.
fn with_deletion_vectors(
    protocol: &Protocol,
    metadata: &deltalake::kernel::Metadata,
    schema: &StructType,
) -> Result<Option<Protocol>> {
    let invalid = |e: serde_json::Error| DeltaLiteError::Other(format!("protocol: {e}"));
    let value = serde_json::to_value(protocol).map_err(invalid)?;
    let list = |key: &str| -> Vec<String> {
        value[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (mut readers, mut writers) = (list("readerFeatures"), list("writerFeatures"));
    if writers.iter().any(|f| f == "deletionVectors") {
        return Ok(None);
    }
    let reader_version = value["minReaderVersion"].as_i64().unwrap_or(1);
    let writer_version = value["minWriterVersion"].as_i64().unwrap_or(1) as i32;
    if reader_version == 2 {
        readers.push("columnMapping".into());
    }
    if writer_version < 7 {
        for (version, feature) in LEGACY_WRITER_FEATURES {
            if writer_version >= version && in_use(feature, metadata, schema) {
                writers.push(feature.to_string());
            }
        }
    }
    readers.push("deletionVectors".into());
    writers.push("deletionVectors".into());
    let upgraded = serde_json::json!({
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": readers,
        "writerFeatures": writers,
    });
    serde_json::from_value(upgraded).map(Some).map_err(invalid)
}

/// The field metadata key of a column's comment (Spark's and Databricks' convention).
pub const COLUMN_COMMENT_KEY: &str = "comment";

/// One change to a table's metadata.
#[derive(Debug, Clone, PartialEq)]
pub enum MetadataChange {
    /// The table's description (`COMMENT ON TABLE`); `None` clears it.
    TableComment(Option<String>),
    /// A top-level column's comment (`COMMENT ON COLUMN`); `None` clears it.
    ColumnComment {
        column: String,
        comment: Option<String>,
    },
    /// A table property set (`Some`) or removed (`None`).
    Property { key: String, value: Option<String> },
    /// Nullable columns appended to the schema (`ALTER TABLE … ADD COLUMN`); a name
    /// already in the table is refused.
    AddColumns(Vec<Field>),
}

impl DeltaLiteTable {
    /// Apply `changes` in order, in one commit (none when nothing changes). Returns the
    /// table's version afterwards.
    pub async fn change_metadata(
        &mut self,
        changes: &[MetadataChange],
        commit_max_retries: usize,
    ) -> Result<u64> {
        let spec = CommitSpec::new(&HashMap::new(), &None);
        let policy = Policy {
            max_retries: commit_max_retries,
            replan: true,
            hook: None,
        };
        let mut attempt = MetadataAttempt { changes };
        let version = match txn::run(self.delta_table_mut(), &spec, &policy, &mut attempt).await? {
            Done::Committed { version, .. }
            | Done::Unchanged { version, .. }
            | Done::AlreadyApplied { version } => version,
        };
        Ok(version)
    }
}

struct MetadataAttempt<'c> {
    changes: &'c [MetadataChange],
}

impl txn::Attempt for MetadataAttempt<'_> {
    type Output = ();

    fn stage<'a>(&'a mut self, table: &'a DeltaTable) -> BoxFuture<'a, Result<(Staged, ())>> {
        Box::pin(async move {
            let state = table.snapshot()?;
            check_supported(state)?;
            let current = state.metadata().clone();
            let mut metadata = current.clone();
            let mut fields: Vec<StructField> = state.schema().fields().cloned().collect();
            let mut schema_changed = false;
            let mut properties = HashMap::new();
            let mut added = Vec::new();
            for change in self.changes {
                match change {
                    MetadataChange::TableComment(comment) => {
                        metadata = metadata
                            .with_description(comment.clone().unwrap_or_default())
                            .map_err(|e| DeltaLiteError::invalid(e.to_string()))?;
                    }
                    MetadataChange::ColumnComment { column, comment } => {
                        let field =
                            fields
                                .iter_mut()
                                .find(|f| &f.name == column)
                                .ok_or_else(|| {
                                    DeltaLiteError::schema(format!(
                                        "column {column:?} is not in the table"
                                    ))
                                })?;
                        let before = field.metadata.get(COLUMN_COMMENT_KEY).cloned();
                        match comment {
                            Some(text) => {
                                field.metadata.insert(
                                    COLUMN_COMMENT_KEY.to_string(),
                                    MetadataValue::String(text.clone()),
                                );
                            }
                            None => {
                                field.metadata.remove(COLUMN_COMMENT_KEY);
                            }
                        }
                        schema_changed |= field.metadata.get(COLUMN_COMMENT_KEY) != before.as_ref();
                    }
                    MetadataChange::Property { key, value } => {
                        metadata = match value {
                            Some(v) => {
                                properties.insert(key.clone(), v.clone());
                                metadata.add_config_key(key.clone(), v.clone())
                            }
                            None => metadata.remove_config_key(key),
                        }
                        .map_err(|e| DeltaLiteError::invalid(e.to_string()))?;
                    }
                    MetadataChange::AddColumns(new) => {
                        for field in new {
                            if fields.iter().any(|f| &f.name == field.name()) {
                                return Err(DeltaLiteError::schema(format!(
                                    "column {:?} is already in the table",
                                    field.name()
                                )));
                            }
                            let nullable = field.clone().with_nullable(true);
                            let kernel: StructField =
                                (&nullable).try_into_kernel().map_err(|e| {
                                    DeltaLiteError::schema(format!(
                                        "column {:?} cannot be stored in a Delta table: {e}",
                                        field.name()
                                    ))
                                })?;
                            fields.push(kernel.clone());
                            added.push(kernel);
                            schema_changed = true;
                        }
                    }
                }
            }
            if schema_changed {
                let schema = StructType::try_new(fields)
                    .map_err(|e| DeltaLiteError::invalid(e.to_string()))?;
                metadata = metadata
                    .with_schema(&schema)
                    .map_err(|e| DeltaLiteError::invalid(e.to_string()))?;
            }
            let mut actions = if metadata == current && !schema_changed {
                Vec::new()
            } else {
                vec![Action::Metadata(metadata.clone())]
            };
            let dv_asked = metadata
                .configuration()
                .get(DELETION_VECTORS_PROPERTY)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));
            if dv_asked
                && let Some(protocol) =
                    with_deletion_vectors(state.protocol(), &metadata, state.schema().as_ref())?
            {
                actions.push(Action::Protocol(protocol));
            }
            // A metadata commit conflicts with any concurrent metadata change (the commit
            // rule's own check) and with nothing else: data files are not touched.
            let operation = if added.is_empty() {
                DeltaOperation::SetTableProperties { properties }
            } else {
                DeltaOperation::AddColumn { fields: added }
            };
            let staged = Staged::new(actions, operation, ReadSet::nothing());
            Ok((staged, ()))
        })
    }
}

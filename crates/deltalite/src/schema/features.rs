//! Table features the engine cannot honour are refused before anything is written.

use delta_kernel::table_features::TableFeature;
use deltalake::table::state::DeltaTableState;

use crate::error::{DeltaLiteError, Result};

/// Refuse tables whose semantics a file-rewriting upsert would silently break. Deletion
/// vectors are honoured everywhere (`io/dv.rs`).
pub(crate) fn check_supported(state: &DeltaTableState) -> Result<()> {
    let config = state.metadata().configuration();
    let enabled = |key: &str| {
        config
            .get(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    };
    let refuse = |what: &str| Err(DeltaLiteError::UnsupportedTable(what.to_string()));
    // The messages name the Delta features the way the protocol spells them
    // (`deletionVectors`, `columnMapping`): that is what users search for.
    if let Some(mode) = config.get("delta.columnMapping.mode")
        && !mode.eq_ignore_ascii_case("none")
    {
        return refuse(&format!(
            "columnMapping is enabled (delta.columnMapping.mode={mode}): physical column names \
             differ from logical ones"
        ));
    }
    if let Some(key) = config.keys().find(|k| k.starts_with("delta.constraints.")) {
        return refuse(&format!("the table has a CHECK constraint ({key})"));
    }
    if enabled("delta.enableChangeDataFeed") {
        return refuse("change data feed is enabled (delta.enableChangeDataFeed)");
    }
    if enabled("delta.appendOnly") {
        return refuse("the table is append-only (delta.appendOnly)");
    }
    for field in state.schema().fields() {
        let metadata = field.metadata();
        if metadata.contains_key("delta.generationExpression") {
            return refuse(&format!("column {} is a generated column", field.name()));
        }
        if metadata.contains_key("delta.identity.start") {
            return refuse(&format!("column {} is an identity column", field.name()));
        }
    }
    Ok(())
}

/// The property that lets writes mark rows deleted in deletion vectors.
pub const DELETION_VECTORS_PROPERTY: &str = "delta.enableDeletionVectors";

/// Whether writes may mark rows deleted with deletion vectors instead of rewriting their
/// files: the table asks for it (`delta.enableDeletionVectors=true`) and its protocol
/// has the `deletionVectors` writer feature (readers then know them too).
pub(crate) fn writes_deletion_vectors(state: &DeltaTableState) -> bool {
    let asked = state
        .metadata()
        .configuration()
        .get(DELETION_VECTORS_PROPERTY)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    asked
        && state
            .protocol()
            .writer_features()
            .is_some_and(|f| f.contains(&TableFeature::DeletionVectors))
}

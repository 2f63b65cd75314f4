//! Table features the engine cannot honour are refused before anything is written.

use deltalake::table::state::DeltaTableState;

use crate::error::{DeltaLiteError, Result};

/// Refuse tables whose semantics a file-rewriting upsert would silently break.
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
    if enabled("delta.enableDeletionVectors") {
        return refuse(
            "deletionVectors are enabled (delta.enableDeletionVectors=true): rewritten files \
             would resurrect deleted rows",
        );
    }
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

//! Reads of a table as it was: `t VERSION AS OF n` / `t TIMESTAMP AS OF '…'` (Databricks'
//! spelling) and DuckDB's `t AT (VERSION => n)` / `t AT (TIMESTAMP => '…')`.
//!
//! sqlparser's generic dialect parses none of them, so `sql/dialect.rs` splices the clause
//! into the table's name: `t VERSION AS OF 3` becomes `"t\u{1}v3" AS t`. A name cannot
//! hold `\u{1}` (`catalog::validate_name`), so no stored table is ever read this way by
//! accident; name resolution (`sql/resolve.rs`) finds the mark, checks the grants on the
//! base name, and opens the table at that version. `RESTORE` takes the same [`AsOf`].

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use deltalite::deltalake::DeltaTable;

use super::{delta_err, sql_err};
use crate::error::ApiError;

/// Separates a table name from its version in a spliced name.
const MARK: char = '\u{1}';

/// Which state of a table a statement reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AsOf {
    /// The table after commit `n`.
    Version(u64),
    /// The table after its latest commit at or before this time (text as written).
    Timestamp(String),
}

impl std::fmt::Display for AsOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AsOf::Version(v) => write!(f, "VERSION AS OF {v}"),
            AsOf::Timestamp(t) => write!(f, "TIMESTAMP AS OF '{}'", t.replace('\'', "''")),
        }
    }
}

/// The name `table` has when read as of `as_of` (unquoted text; the splice quotes it).
pub(super) fn mark(table: &str, as_of: &AsOf) -> String {
    match as_of {
        AsOf::Version(v) => format!("{table}{MARK}v{v}"),
        AsOf::Timestamp(t) => format!("{table}{MARK}t{t}"),
    }
}

/// A marked name's table and state; `None` for a plain name.
pub(super) fn unmark(name: &str) -> Option<(&str, AsOf)> {
    let (table, spec) = name.split_once(MARK)?;
    let as_of = match spec.split_at_checked(1)? {
        ("v", v) => AsOf::Version(v.parse().ok()?),
        ("t", t) => AsOf::Timestamp(t.to_string()),
        _ => return None,
    };
    Some((table, as_of))
}

/// `table` loaded as of `as_of`: an error naming the table when that version does not
/// exist (newer than the latest, or its log entries cleaned up) or the time precedes
/// the first commit.
pub(crate) async fn load(
    table: &DeltaTable,
    name: &str,
    as_of: &AsOf,
) -> Result<DeltaTable, ApiError> {
    let mut at = table.clone();
    let latest = table.version().unwrap_or(0);
    match as_of {
        AsOf::Version(v) => {
            if *v > latest {
                return Err(sql_err(format!(
                    "Invalid Input Error: table {name} has no version {v}: its latest is {latest}"
                )));
            }
            at.load_version(*v)
                .await
                .map_err(|e| delta_err_named(name, &format!("cannot read version {v}"), e))?;
        }
        AsOf::Timestamp(text) => {
            let when = parse_timestamp(text)?;
            at.load_with_datetime(when)
                .await
                .map_err(|e| delta_err_named(name, &format!("cannot read it as of {text:?}"), e))?;
            // delta-rs falls back to the oldest version it has; a time before that
            // version was written has no state to read.
            let version = at.version().unwrap_or(0);
            let written = at
                .snapshot()
                .ok()
                .and_then(|s| s.version_timestamp(version));
            if let Some(written) = written
                && written > when.timestamp_millis()
            {
                let first = DateTime::from_timestamp_millis(written).map_or_else(
                    || written.to_string(),
                    |t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
                );
                return Err(sql_err(format!(
                    "Invalid Input Error: table {name} has no version as of {text:?}: its oldest readable version, {version}, was written at {first} UTC"
                )));
            }
        }
    }
    if at.version() != table.version() {
        check_files_present(table, &at, name, as_of).await?;
    }
    Ok(at)
}

/// Fail with a clear error when a file of the old state is gone. Only files no longer in
/// the latest state can be (vacuum never deletes a live file), so only those are looked
/// up, 16 at a time.
async fn check_files_present(
    latest: &DeltaTable,
    at: &DeltaTable,
    name: &str,
    as_of: &AsOf,
) -> Result<(), ApiError> {
    use futures::{StreamExt, TryStreamExt};
    use object_store::ObjectStoreExt as _;
    let paths = |t: &DeltaTable| -> Result<Vec<object_store::path::Path>, ApiError> {
        Ok(t.snapshot()
            .map_err(delta_err)?
            .log_data()
            .into_iter()
            .map(|add| add.object_store_path())
            .collect())
    };
    let live: std::collections::HashSet<_> = paths(latest)?.into_iter().collect();
    let older: Vec<_> = paths(at)?
        .into_iter()
        .filter(|p| !live.contains(p))
        .collect();
    let store = at.log_store().object_store(None);
    let missing = futures::stream::iter(older)
        .map(|path| {
            let store = std::sync::Arc::clone(&store);
            async move {
                match store.head(&path).await {
                    Ok(_) => Ok(None),
                    Err(object_store::Error::NotFound { .. }) => Ok(Some(path)),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(16)
        .try_filter_map(|found| std::future::ready(Ok(found)))
        .try_next()
        .await
        .map_err(|e| {
            ApiError::from_failure(
                &e,
                format!("Invalid Input Error: {e}"),
                ApiError::BadRequest,
            )
        })?;
    match missing {
        Some(path) => Err(sql_err(format!(
            "Invalid Input Error: table {name} {as_of} cannot be read: its file {path} was deleted by VACUUM (files removed longer ago than the retention are)"
        ))),
        None => Ok(()),
    }
}

fn delta_err_named(name: &str, what: &str, e: deltalite::deltalake::DeltaTableError) -> ApiError {
    match delta_err(e) {
        ApiError::BadRequest(m) => ApiError::BadRequest(format!(
            "Invalid Input Error: table {name}: {what}: {}",
            m.trim_start_matches("Invalid Input Error: ")
        )),
        other => other,
    }
}

/// A timestamp as clients write it: RFC 3339 with an offset, or a date and time (or a
/// date alone) taken as UTC, as DuckDB reads a `TIMESTAMP` literal.
pub fn parse_timestamp(text: &str) -> Result<DateTime<Utc>, ApiError> {
    let t = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(t) {
        return Ok(at.with_timezone(&Utc));
    }
    for format in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(at) = NaiveDateTime::parse_from_str(t, format) {
            return Ok(at.and_utc());
        }
    }
    if let Ok(day) = NaiveDate::parse_from_str(t, "%Y-%m-%d")
        && let Some(at) = day.and_hms_opt(0, 0, 0)
    {
        return Ok(at.and_utc());
    }
    Err(sql_err(format!(
        "Conversion Error: invalid timestamp {text:?} for TIMESTAMP AS OF: expected YYYY-MM-DD[ HH:MM:SS[.fff]] (UTC) or RFC 3339"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_names_round_trip_and_plain_names_are_plain() {
        for as_of in [
            AsOf::Version(0),
            AsOf::Version(42),
            AsOf::Timestamp("2026-01-02 03:04:05".into()),
        ] {
            let name = mark("My Table", &as_of);
            assert_eq!(unmark(&name), Some(("My Table", as_of)));
        }
        assert_eq!(unmark("events"), None);
        assert_eq!(unmark("t\u{1}vx"), None);
        assert_eq!(unmark("t\u{1}q1"), None);
    }

    #[test]
    fn timestamps_are_utc_unless_they_say_otherwise() {
        let utc = |s: &str| parse_timestamp(s).map(|t| t.to_rfc3339()).ok();
        assert_eq!(
            utc("2026-01-02 03:04:05").as_deref(),
            Some("2026-01-02T03:04:05+00:00")
        );
        assert_eq!(
            utc("2026-01-02T03:04:05.5").as_deref(),
            Some("2026-01-02T03:04:05.500+00:00")
        );
        assert_eq!(
            utc("2026-01-02").as_deref(),
            Some("2026-01-02T00:00:00+00:00")
        );
        assert_eq!(
            utc("2026-01-02T03:04:05+02:00").as_deref(),
            Some("2026-01-02T01:04:05+00:00")
        );
        let err = parse_timestamp("yesterday").unwrap_err().to_string();
        assert!(err.contains("invalid timestamp \"yesterday\""), "{err}");
    }
}

//! Flight SQL metadata commands (`GetCatalogs`, `GetDbSchemas`, `GetTables`,
//! `GetTableTypes`, `GetSqlInfo`, `GetXdbcTypeInfo`) over the catalogs a session sees: the user's grants and
//! its scratch catalogs, nothing else. Results have the exact schemas the Flight SQL spec
//! gives (clients such as ADBC validate them), built by `arrow-flight`'s builders, which
//! also apply the commands' filters.

use std::sync::{Arc, LazyLock};

use arrow::record_batch::RecordBatch;
use arrow_flight::sql::metadata::{
    SqlInfoData, SqlInfoDataBuilder, XdbcTypeInfo, XdbcTypeInfoData, XdbcTypeInfoDataBuilder,
};
use arrow_flight::sql::{
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetSqlInfo, CommandGetTableTypes,
    CommandGetTables, CommandGetXdbcTypeInfo, Nullable, Searchable, SqlInfo,
    SqlSupportedTransaction, XdbcDataType, XdbcDatetimeSubcode,
};
use tonic::Status;

use super::result::status;
use crate::auth::User;
use crate::catalog::{Storage, TableName};
use crate::error::ApiError;
use crate::sql::SqlSession;
use crate::state::AppState;

/// A Delta table.
pub const TABLE_TYPE: &str = "TABLE";
/// A view (`sql/views.rs`).
pub const VIEW_TYPE: &str = "VIEW";

fn arrow_status(e: impl std::fmt::Display) -> Status {
    Status::internal(format!("metadata result: {e}"))
}

/// `GetCatalogs`: the catalogs the session sees, sorted.
pub fn catalogs(user: &User, cmd: CommandGetCatalogs) -> Result<RecordBatch, Status> {
    let mut builder = cmd.into_builder();
    for c in user.catalogs.iter() {
        builder.append(c);
    }
    builder.build().map_err(arrow_status)
}

/// The catalogs a command's catalog filter keeps (all of the session's without one).
fn catalogs_for<'a>(user: &'a User, filter: Option<&'a str>) -> impl Iterator<Item = &'a String> {
    user.catalogs
        .iter()
        .filter(move |c| filter.is_none_or(|f| f == c.as_str()))
}

/// `GetDbSchemas`: schemas of every catalog the session sees (or of the one asked for).
pub async fn schemas(
    storage: &Storage,
    user: &User,
    cmd: CommandGetDbSchemas,
) -> Result<RecordBatch, Status> {
    let filter = cmd.catalog.clone();
    let pattern = cmd.db_schema_filter_pattern.clone();
    let mut builder = cmd.into_builder();
    for c in catalogs_for(user, filter.as_deref()) {
        for s in storage.shown_schemas(c).await.map_err(status)? {
            if pattern.as_deref().is_none_or(|p| like(&s, p)) {
                builder.append(c, &s);
            }
        }
    }
    builder.build().map_err(arrow_status)
}

/// `GetTables`, with each table's Arrow schema when `include_schema` is set (the table's
/// current schema, as a scan returns it; a view's, as its query plans now for this user).
/// A table dropped meanwhile, or a view that no longer plans, is not listed.
pub async fn tables(
    state: &Arc<AppState>,
    user: &User,
    cmd: CommandGetTables,
) -> Result<RecordBatch, Status> {
    let storage = &state.storage;
    let filter = cmd.catalog.clone();
    let schema_pattern = cmd.db_schema_filter_pattern.clone();
    let table_pattern = cmd.table_name_filter_pattern.clone();
    let wants =
        |kind: &str| cmd.table_types.is_empty() || cmd.table_types.iter().any(|t| t == kind);
    let (wants_tables, wants_views) = (wants(TABLE_TYPE), wants(VIEW_TYPE));
    let include_schema = cmd.include_schema;
    let mut builder = cmd.into_builder();
    let empty = || Arc::new(arrow::datatypes::Schema::empty());
    let mut views_session = None;
    for c in catalogs_for(user, filter.as_deref()) {
        for s in storage.list_schemas(c).await.map_err(status)? {
            if !schema_pattern.as_deref().is_none_or(|p| like(&s, p)) {
                continue;
            }
            let matches = |t: &String| table_pattern.as_deref().is_none_or(|p| like(t, p));
            if wants_tables && include_schema {
                // Every folder the pattern keeps may be a table: opening it tells.
                let names = storage
                    .list_schema_children(c, &s)
                    .await
                    .map_err(status)?
                    .into_iter()
                    .filter(|t| matches(t))
                    .filter_map(|t| TableName::new(c, &s, &t).ok())
                    .collect();
                for (name, table) in storage.open_tables_for_query(names).await.map_err(status)? {
                    let Some(table) = table else { continue };
                    let schema = table.schema().map_err(|e| {
                        status(ApiError::from_engine(
                            &format!("cannot read table {name}"),
                            e,
                        ))
                    })?;
                    builder
                        .append(c, &s, &name.table, TABLE_TYPE, &schema)
                        .map_err(arrow_status)?;
                }
            } else if wants_tables {
                for t in storage.list_tables(c, &s).await.map_err(status)? {
                    // A folder whose name no statement could name is no table of ours.
                    if matches(&t) && TableName::new(c, &s, &t).is_ok() {
                        builder
                            .append(c, &s, &t, TABLE_TYPE, &empty())
                            .map_err(arrow_status)?;
                    }
                }
            }
            let views = match wants_views {
                true => storage.list_views(c, &s).await.map_err(status)?,
                false => Vec::new(),
            };
            for v in views.iter().filter(|v| matches(v)) {
                let schema = if include_schema {
                    let name = TableName::new(c, &s, v).map_err(status)?;
                    let session = match &mut views_session {
                        Some(session) => session,
                        None => views_session.insert(
                            SqlSession::new(
                                Arc::clone(storage),
                                Arc::clone(&state.query_runtime),
                                user.clone(),
                                Some(c),
                                None,
                            )
                            .map_err(status)?,
                        ),
                    };
                    // The types a query of it answers in (plain, not view types).
                    match session.listed_view_schema(&name).await.map_err(status)? {
                        Some(schema) => crate::sql::plain::plain_schema(&schema),
                        None => continue,
                    }
                } else {
                    empty()
                };
                builder
                    .append(c, &s, v, VIEW_TYPE, &schema)
                    .map_err(arrow_status)?;
            }
        }
    }
    builder.build().map_err(arrow_status)
}

/// `GetTableTypes`.
pub fn table_types(cmd: CommandGetTableTypes) -> Result<RecordBatch, Status> {
    let mut builder = cmd.into_builder();
    builder.append(TABLE_TYPE);
    builder.append(VIEW_TYPE);
    builder.build().map_err(arrow_status)
}

/// What `GetSqlInfo` answers: who the server is and what it supports. Transactions are
/// supported (ADBC then turns autocommit off, as DB-API wants); what they mean is in
/// `flight::transaction`.
pub static SQL_INFO: LazyLock<Result<SqlInfoData, String>> = LazyLock::new(|| {
    let mut b = SqlInfoDataBuilder::new();
    b.append(SqlInfo::FlightSqlServerName, "deltalite");
    b.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    b.append(SqlInfo::FlightSqlServerArrowVersion, "59");
    b.append(SqlInfo::FlightSqlServerReadOnly, false);
    b.append(SqlInfo::FlightSqlServerSql, true);
    b.append(SqlInfo::FlightSqlServerSubstrait, false);
    b.append(
        SqlInfo::FlightSqlServerTransaction,
        SqlSupportedTransaction::Transaction as i32,
    );
    b.append(SqlInfo::FlightSqlServerCancel, false);
    b.append(SqlInfo::SqlDdlCatalog, false);
    b.append(SqlInfo::SqlDdlSchema, true);
    b.append(SqlInfo::SqlDdlTable, true);
    b.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
    b.append(SqlInfo::SqlTransactionsSupported, true);
    b.build().map_err(|e| e.to_string())
});

/// `GetSqlInfo`: the asked-for entries (all without a list).
pub fn sql_info(cmd: CommandGetSqlInfo) -> Result<RecordBatch, Status> {
    let data = SQL_INFO.as_ref().map_err(|e| Status::internal(e.clone()))?;
    cmd.into_builder(data).build().map_err(arrow_status)
}

/// One storable type: name, XDBC type, column size, quoted literals, radix, subcode.
type XdbcRow = (
    &'static str,
    XdbcDataType,
    Option<i32>,
    bool,
    Option<i32>,
    Option<XdbcDatetimeSubcode>,
);

/// What `GetXdbcTypeInfo` answers: the column types a table can store, by the names
/// DuckDB gives them (`types.rs`).
pub static XDBC_TYPES: LazyLock<Result<XdbcTypeInfoData, String>> = LazyLock::new(|| {
    use XdbcDataType as X;
    let mut b = XdbcTypeInfoDataBuilder::new();
    let types: [XdbcRow; 13] = [
        ("BOOLEAN", X::XdbcBit, Some(1), false, None, None),
        ("TINYINT", X::XdbcTinyint, Some(8), false, Some(2), None),
        ("SMALLINT", X::XdbcSmallint, Some(16), false, Some(2), None),
        ("INTEGER", X::XdbcInteger, Some(32), false, Some(2), None),
        ("BIGINT", X::XdbcBigint, Some(64), false, Some(2), None),
        ("FLOAT", X::XdbcReal, Some(24), false, Some(2), None),
        ("DOUBLE", X::XdbcDouble, Some(53), false, Some(2), None),
        ("DECIMAL", X::XdbcDecimal, Some(38), false, Some(10), None),
        ("VARCHAR", X::XdbcVarchar, None, true, None, None),
        ("BLOB", X::XdbcVarbinary, None, true, None, None),
        ("DATE", X::XdbcDate, Some(10), true, None, None),
        (
            "TIMESTAMP",
            X::XdbcTimestamp,
            Some(26),
            true,
            None,
            Some(XdbcDatetimeSubcode::XdbcSubcodeTimestamp),
        ),
        (
            "TIMESTAMP WITH TIME ZONE",
            X::XdbcTimestamp,
            Some(32),
            true,
            None,
            Some(XdbcDatetimeSubcode::XdbcSubcodeTimestampWithTimezone),
        ),
    ];
    for (name, data_type, column_size, quoted, radix, subcode) in types {
        let decimal = name == "DECIMAL";
        b.append(XdbcTypeInfo {
            type_name: name.into(),
            data_type,
            column_size,
            literal_prefix: quoted.then(|| "'".into()),
            literal_suffix: quoted.then(|| "'".into()),
            create_params: decimal.then(|| vec!["precision".into(), "scale".into()]),
            nullable: Nullable::NullabilityNullable,
            case_sensitive: name == "VARCHAR",
            searchable: Searchable::Full,
            unsigned_attribute: radix.map(|_| false),
            fixed_prec_scale: decimal,
            auto_increment: radix.map(|_| false),
            local_type_name: Some(name.into()),
            minimum_scale: decimal.then_some(0),
            maximum_scale: decimal.then_some(38),
            sql_data_type: data_type,
            datetime_subcode: subcode,
            num_prec_radix: radix,
            interval_precision: None,
        });
    }
    b.build().map_err(|e| e.to_string())
});

/// `GetXdbcTypeInfo`: every storable type, or the one asked for.
pub fn xdbc_types(cmd: CommandGetXdbcTypeInfo) -> Result<RecordBatch, Status> {
    let data = XDBC_TYPES
        .as_ref()
        .map_err(|e| Status::internal(e.clone()))?;
    cmd.into_builder(data).build().map_err(arrow_status)
}

/// SQL `LIKE`: `%` any run of characters, `_` one character, `\` escapes the next one.
pub fn like(text: &str, pattern: &str) -> bool {
    let t: Vec<char> = text.chars().collect();
    let mut p: Vec<(char, bool)> = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => p.push((chars.next().unwrap_or('\\'), true)),
            c => p.push((c, false)),
        }
    }
    // Iterative matching with one backtrack point for the last `%`: linear in practice.
    let (mut ti, mut pi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(('%', false)) => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(('_', false)) => {
                ti += 1;
                pi += 1;
            }
            Some((c, _)) if *c == t[ti] => {
                ti += 1;
                pi += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    while matches!(p.get(pi), Some(('%', false))) {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::like;

    #[test]
    fn like_patterns() {
        assert!(like("test_schema_abc", "test_schema_a%"));
        assert!(like("test_schema_abc", "%abc"));
        assert!(like("abc", "a_c"));
        assert!(!like("abc", "a_"));
        assert!(like("a%c", "a\\%c"));
        assert!(!like("abc", "a\\%c"));
        assert!(like("", "%"));
        assert!(!like("x", ""));
        assert!(like("aXbXc", "a%b%c"));
        assert!(!like("nothing", "nonexistent_schema_xyz_12345_999"));
    }
}

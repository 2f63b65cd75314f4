//! DuckDB's `SHOW` statements, answered as DuckDB answers them, by queries over
//! `information_schema` (so they list what the caller's grants let it see, and nothing
//! else):
//!
//! - `SHOW TABLES`: the tables and views of the current schema and of the current
//!   catalog's `main` (DuckDB's search path), column `name`;
//! - `SHOW TABLES FROM c` (a catalog: all its tables), `FROM s` (a schema of the current
//!   catalog), `FROM c.s`; a schema that does not exist is DuckDB's `Catalog Error`;
//! - `SHOW ALL TABLES`: every table with its column names and types;
//! - `SHOW SCHEMAS` (every catalog has `main`), `SHOW DATABASES` (the granted catalogs);
//! - `SHOW [catalog.][schema.]table`: `DESCRIBE` of the table.

use datafusion::sql::sqlparser::ast::{
    ObjectName, ShowStatementIn, ShowStatementOptions, Statement,
};

use super::{Output, SqlSession, name_parts, sql_err};
use crate::catalog::DEFAULT_SCHEMA;
use crate::error::ApiError;

/// Whether `statement` is one of the `SHOW` statements this module answers.
pub(super) fn is_show(statement: &Statement) -> bool {
    matches!(
        statement,
        Statement::ShowTables { .. }
            | Statement::ShowSchemas { .. }
            | Statement::ShowDatabases { .. }
    ) || all_tables(statement)
        || shown_table(statement).is_some()
}

/// The table of `SHOW name` (sqlparser reads the name as a variable's).
fn shown_table(statement: &Statement) -> Option<ObjectName> {
    let Statement::ShowVariable { variable } = statement else {
        return None;
    };
    ((1..=3).contains(&variable.len()) && !all_tables(statement))
        .then(|| ObjectName::from(variable.clone()))
}

/// `SHOW ALL TABLES`, which sqlparser reads as the variable `ALL TABLES`.
fn all_tables(statement: &Statement) -> bool {
    let Statement::ShowVariable { variable } = statement else {
        return false;
    };
    matches!(variable.as_slice(), [a, t]
        if a.quote_style.is_none() && a.value.eq_ignore_ascii_case("all")
            && t.quote_style.is_none() && t.value.eq_ignore_ascii_case("tables"))
}

/// `text` as an SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

impl SqlSession {
    /// Answer a statement [`is_show`] accepts.
    pub(super) async fn show(&mut self, statement: &Statement) -> Result<Output, ApiError> {
        let query = match statement {
            Statement::ShowTables {
                terse,
                history,
                extended,
                full,
                external,
                show_options,
            } => {
                duckdb_form(*terse || *history || *extended || *full || *external)?;
                self.show_tables(show_options).await?
            }
            Statement::ShowSchemas {
                terse,
                history,
                show_options,
            } => {
                duckdb_form(*terse || *history)?;
                plain(show_options, "SHOW SCHEMAS")?;
                format!(
                    "SELECT catalog_name AS database_name, schema_name, \
                     catalog_name = {} AND schema_name = {} AS \"current\" \
                     FROM information_schema.schemata ORDER BY database_name, schema_name",
                    literal(&self.catalog),
                    literal(&self.schema)
                )
            }
            Statement::ShowDatabases {
                terse,
                history,
                show_options,
            } => {
                duckdb_form(*terse || *history)?;
                plain(show_options, "SHOW DATABASES")?;
                // Every granted catalog, with schemas or without.
                "SELECT database_name FROM information_schema.duckdb_databases ORDER BY database_name".to_string()
            }
            s if all_tables(s) => {
                "SELECT table_catalog AS \"database\", table_schema AS \"schema\", \
                 table_name AS name, \
                 array_agg(column_name ORDER BY ordinal_position) AS column_names, \
                 array_agg(data_type ORDER BY ordinal_position) AS column_types, \
                 false AS \"temporary\" FROM information_schema.columns \
                 GROUP BY table_catalog, table_schema, table_name \
                 ORDER BY \"database\", \"schema\", name"
                    .to_string()
            }
            s if let Some(table) = shown_table(s) => {
                return self.describe(&format!("SELECT * FROM {table}")).await;
            }
            other => {
                return Err(ApiError::Internal(format!("not a SHOW statement: {other}")));
            }
        };
        let mut statements = Self::parse_sql(&query)?;
        match (statements.pop(), statements.is_empty()) {
            (Some(statement), true) => self.query_stream(statement).await,
            _ => Err(ApiError::Internal(format!(
                "SHOW wrote not one query: {query}"
            ))),
        }
    }

    /// The query `SHOW TABLES [FROM name]` answers.
    async fn show_tables(&mut self, options: &ShowStatementOptions) -> Result<String, ApiError> {
        let from = match &options.show_in {
            None => None,
            Some(ShowStatementIn {
                parent_name: Some(name),
                parent_type: None,
                ..
            }) => Some(name),
            Some(_) => {
                return Err(sql_err(
                    "Parser Error: SHOW TABLES takes FROM [catalog.]schema or FROM catalog",
                ));
            }
        };
        plain(
            &ShowStatementOptions {
                show_in: None,
                ..options.clone()
            },
            "SHOW TABLES",
        )?;
        let select = "SELECT table_name AS name FROM information_schema.tables WHERE";
        let Some(from) = from else {
            return Ok(format!(
                "{select} table_catalog = {} AND table_schema IN ({}, 'main') ORDER BY name",
                literal(&self.catalog),
                literal(&self.schema)
            ));
        };
        let (catalog, schema) = self.shown_schema(from).await?;
        Ok(match schema {
            None => format!(
                "{select} table_catalog = {} ORDER BY name",
                literal(&catalog)
            ),
            Some(schema) => format!(
                "{select} table_catalog = {} AND table_schema = {} ORDER BY name",
                literal(&catalog),
                literal(&schema)
            ),
        })
    }

    /// What `SHOW TABLES FROM name` lists: a whole catalog (a one-part name that is one)
    /// or one schema, which must exist.
    async fn shown_schema(
        &mut self,
        name: &ObjectName,
    ) -> Result<(String, Option<String>), ApiError> {
        let (catalog, schema) = match name_parts(name)?.as_slice() {
            [c] if self.user.can_see(c) => return Ok((c.clone(), None)),
            [s] => (self.catalog.clone(), s.clone()),
            [c, s] => (c.clone(), s.clone()),
            _ => {
                return Err(sql_err(
                    "Parser Error: SHOW TABLES FROM takes [catalog.]schema",
                ));
            }
        };
        // A catalog outside the grants looks like a missing one.
        if !self.user.can_see(&catalog)
            || (schema != DEFAULT_SCHEMA && !self.storage.schema_exists(&catalog, &schema).await?)
        {
            return Err(sql_err(format!(
                "Catalog Error: SHOW TABLES FROM: No catalog + schema named \"{catalog}.{schema}\" found."
            )));
        }
        Ok((catalog, Some(schema)))
    }
}

/// Refuse the words other dialects put in a `SHOW` (`SHOW FULL TABLES`, `SHOW TERSE
/// SCHEMAS`, `SHOW TABLES HISTORY`, …), which DuckDB does not parse: answering them as the
/// plain form would ignore what was asked.
fn duckdb_form(other_dialects: bool) -> Result<(), ApiError> {
    if other_dialects {
        return Err(sql_err(
            "Parser Error: SHOW takes no TERSE, FULL, EXTENDED, EXTERNAL or HISTORY",
        ));
    }
    Ok(())
}

/// Refuse the options of `SHOW` that DuckDB does not have (`LIKE`, `LIMIT`, …).
fn plain(options: &ShowStatementOptions, what: &str) -> Result<(), ApiError> {
    let ShowStatementOptions {
        show_in,
        starts_with,
        limit,
        limit_from,
        filter_position,
    } = options;
    if show_in.is_some()
        || starts_with.is_some()
        || limit.is_some()
        || limit_from.is_some()
        || filter_position.is_some()
    {
        return Err(sql_err(format!(
            "Not implemented Error: {what} takes no filter or limit; select from \
             information_schema instead"
        )));
    }
    Ok(())
}

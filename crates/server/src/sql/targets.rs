//! Which tables a statement writes, named before it runs: what a transaction records so
//! that a rollback can put those tables back (Flight SQL's `BeginTransaction`).

use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    AlterTableOperation, FromTable, ObjectType, RenameTableNameKind, Statement, TableFactor,
    TableObject,
};

use super::maintenance::DeltaStatement;
use super::{Parsed, SqlSession, name_parts, sql_err};
use crate::catalog::TableName;
use crate::error::ApiError;

/// A table or schema a statement in a transaction dropped by moving its folder aside
/// (`catalog::set_aside_name`, in the same schema or catalog): deleted at `COMMIT`, moved
/// back at `ROLLBACK`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dropped {
    Table {
        name: TableName,
        aside: String,
    },
    Schema {
        catalog: String,
        schema: String,
        aside: String,
    },
}

impl Dropped {
    /// The folder it was dropped from.
    pub fn folder(&self) -> Vec<&str> {
        match self {
            Dropped::Table { name, .. } => vec![&name.catalog, &name.schema, &name.table],
            Dropped::Schema {
                catalog, schema, ..
            } => vec![catalog, schema],
        }
    }

    /// Whether the table `name` went with it.
    pub fn covers(&self, name: &TableName) -> bool {
        match self {
            Dropped::Table { name: n, .. } => n == name,
            Dropped::Schema {
                catalog, schema, ..
            } => &name.catalog == catalog && &name.schema == schema,
        }
    }

    /// The folder it waits in.
    pub fn aside(&self) -> Vec<&str> {
        match self {
            Dropped::Table { name, aside } => vec![&name.catalog, &name.schema, aside],
            Dropped::Schema { catalog, aside, .. } => vec![catalog, aside],
        }
    }
}

/// A table a statement writes, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Its rows or its metadata change by Delta commits (DML, `ALTER`, `COMMENT`), or it
    /// is created (`CREATE TABLE`): the table's log says what it was before.
    Table(TableName),
    /// It is removed (`DROP TABLE`).
    Drop(TableName),
    /// A schema is removed (`DROP SCHEMA`), with every table in it.
    DropSchema { catalog: String, schema: String },
    /// It is renamed (`ALTER TABLE from RENAME TO to`).
    Rename(TableName, TableName),
}

impl Write {
    /// The tables whose versions tell what the statement did.
    pub fn names(&self) -> Vec<&TableName> {
        match self {
            Write::Table(n) | Write::Drop(n) => vec![n],
            Write::Rename(from, to) => vec![from, to],
            Write::DropSchema { .. } => Vec::new(),
        }
    }
}

impl SqlSession {
    /// The tables the statements of `sql` write, resolved against the session's
    /// defaults. Statements a transaction could not take back (`VACUUM`, `DETACH`) are
    /// refused.
    pub fn writes(&self, sql: &str) -> Result<Vec<Write>, ApiError> {
        let mut out = Vec::new();
        for statement in Self::parse_script(sql)? {
            let table = |name| -> Result<TableName, ApiError> { self.resolve(&name_parts(name)?) };
            let statement = match statement {
                Parsed::Sql(s) => s,
                Parsed::Delta(d @ DeltaStatement::Vacuum { .. }) => {
                    return Err(sql_err(format!(
                        "TransactionContext Error: {d} deletes files for good and cannot be rolled back; run it outside the transaction"
                    )));
                }
                Parsed::Delta(d) => {
                    if d.writes() {
                        out.push(Write::Table(table(d.table())?));
                    }
                    continue;
                }
            };
            let DFStatement::Statement(s) = &statement else {
                continue;
            };
            match s.as_ref() {
                Statement::Insert(insert) => {
                    if let TableObject::TableName(name) = &insert.table {
                        out.push(Write::Table(table(name)?));
                    }
                }
                Statement::Update(update) => {
                    if let TableFactor::Table { name, .. } = &update.table.relation {
                        out.push(Write::Table(table(name)?));
                    }
                }
                Statement::Delete(delete) => {
                    let (FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t)) =
                        &delete.from;
                    for twj in t {
                        if let TableFactor::Table { name, .. } = &twj.relation {
                            out.push(Write::Table(table(name)?));
                        }
                    }
                }
                Statement::Merge(merge) => {
                    if let TableFactor::Table { name, .. } = &merge.table {
                        out.push(Write::Table(table(name)?));
                    }
                }
                Statement::CreateTable(create) => out.push(Write::Table(table(&create.name)?)),
                Statement::AlterTable(alter) => {
                    let from = table(&alter.name)?;
                    match alter.operations.as_slice() {
                        [
                            AlterTableOperation::RenameTable {
                                table_name:
                                    RenameTableNameKind::To(to) | RenameTableNameKind::As(to),
                            },
                        ] => {
                            let to = match name_parts(to)?.as_slice() {
                                [t] => TableName::new(&from.catalog, &from.schema, t)?,
                                parts => self.resolve(parts)?,
                            };
                            out.push(Write::Rename(from, to));
                        }
                        _ => out.push(Write::Table(from)),
                    }
                }
                Statement::Truncate(truncate) => {
                    for target in &truncate.table_names {
                        out.push(Write::Table(table(&target.name)?));
                    }
                }
                Statement::Comment {
                    object_type: datafusion::sql::sqlparser::ast::CommentObject::Table,
                    object_name,
                    ..
                } => out.push(Write::Table(table(object_name)?)),
                Statement::Comment {
                    object_type: datafusion::sql::sqlparser::ast::CommentObject::Column,
                    object_name,
                    ..
                } => {
                    // `table.column`, with the table's own qualifiers before it.
                    let mut parts = name_parts(object_name)?;
                    parts.pop();
                    out.push(Write::Table(self.resolve(&parts)?));
                }
                Statement::Drop {
                    object_type: ObjectType::Table,
                    names,
                    ..
                } => {
                    for name in names {
                        out.push(Write::Drop(table(name)?));
                    }
                }
                Statement::Drop {
                    object_type: ObjectType::Schema,
                    names,
                    ..
                } => {
                    for name in names {
                        let (catalog, schema) = self.schema_parts(name)?;
                        out.push(Write::DropSchema { catalog, schema });
                    }
                }
                Statement::DetachDuckDBDatabase { .. } => {
                    return Err(sql_err(
                        "TransactionContext Error: DETACH cannot be rolled back; run it outside the transaction",
                    ));
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

//! DuckDB's `COLUMNS(…)` star expression in a select list: `COLUMNS('regex')` (the columns
//! whose names the regular expression matches anywhere) or `COLUMNS(*)`, alone or inside
//! an expression (`max(COLUMNS('^v'))`), stands for one item per matching column, in the
//! table's order. DataFusion has no such function ("Invalid function 'columns'").
//!
//! Before a statement is planned, an unaliased item holding one such call is written out
//! as those items: the call replaced by the column, each item named after its column, as
//! DuckDB names it (`max(COLUMNS('^v'))` is `v`, `v2`). A select that reads one table
//! takes that table's columns; one over a join, a subquery or a CTE takes the columns
//! `SELECT * FROM` its `FROM` clause answers (planned once for that, with the
//! statement's CTEs), a name two of them share qualified by its table. A select whose
//! `FROM` cannot be planned alone (a correlated subquery) is left as written, as are other
//! forms (a lambda, a list of names), which keep DataFusion's error.
//!
//! DuckDB's `* RENAME (a AS b)` (with or without `EXCLUDE`), which DataFusion does not
//! plan, is written out the same way: each column in its place, a renamed one under its
//! new name. Names match without regard to case, as in DuckDB; a renamed column the
//! `FROM` lacks is ignored (DuckDB ignores it), an excluded one is refused in DuckDB's
//! words. A qualified `t.* RENAME`, or `RENAME` with `REPLACE`, keeps DataFusion's error.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    ExcludeSelectItem, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident,
    ObjectName, Query, RenameSelectItem, Select, SelectItem, SetExpr, TableFactor, TableWithJoins,
    Value, Visit, VisitMut, Visitor, VisitorMut, WildcardAdditionalOptions, With,
    visit_expressions, visit_expressions_mut,
};
use regex::Regex;

use super::names::{holds_star_columns, is_columns};
use super::{SqlSession, sql_err, sql_statement};
use crate::error::ApiError;

impl SqlSession {
    /// `statement` with the `COLUMNS(…)` items of its selects written out (the tables
    /// must be registered: `register_references`).
    pub(super) async fn expand_star_columns(
        &self,
        mut statement: DFStatement,
    ) -> Result<DFStatement, ApiError> {
        let Some(sql) = sql_statement(&mut statement) else {
            return Ok(statement);
        };
        let mut found = Found::default();
        let _ = Visit::visit(&*sql, &mut found);
        if found.tables.is_empty() && found.sources.is_empty() {
            return Ok(statement);
        }
        let columns = self.columns_by_table(found.tables, &found.ctes).await;
        let mut sources = Vec::with_capacity(found.sources.len());
        for from in found.sources {
            let columns = self.columns_of_from(from, found.with.clone()).await;
            sources.push(columns.map(|columns| {
                columns
                    .into_iter()
                    .map(|(qualifier, name)| Column { qualifier, name })
                    .collect()
            }));
        }
        let mut expand = Expand {
            columns: &columns,
            sources: sources.into_iter(),
            ctes: &found.ctes,
            failure: None,
        };
        let _ = VisitMut::visit(sql, &mut expand);
        match expand.failure {
            Some(message) => Err(sql_err(message)),
            None => Ok(statement),
        }
    }
}

/// A column `COLUMNS(…)` may select: its name, and its table's qualifier (for names two
/// tables share).
struct Column {
    qualifier: Option<Vec<String>>,
    name: String,
}

/// What a `COLUMNS(…)` call selects by: a pattern, or every column.
enum Selector {
    Pattern(String),
    All,
}

fn selector(f: &Function) -> Option<Selector> {
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] => Some(Selector::All),
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))] => match &v.value {
            Value::SingleQuotedString(s) => Some(Selector::Pattern(s.clone())),
            _ => None,
        },
        _ => None,
    }
}

/// The one table a select reads, when that is all it reads.
fn single_table(select: &Select) -> Option<&ObjectName> {
    let [from] = select.from.as_slice() else {
        return None;
    };
    if !from.joins.is_empty() {
        return None;
    }
    match &from.relation {
        TableFactor::Table {
            name, args: None, ..
        } => Some(name),
        _ => None,
    }
}

/// The one table (not a CTE) a select reads, when that is all it reads.
fn read_table<'a>(select: &'a Select, ctes: &HashSet<String>) -> Option<&'a ObjectName> {
    single_table(select).filter(|t| !ctes.contains(&t.to_string().to_lowercase()))
}

fn selects_star_columns(select: &Select) -> bool {
    select.projection.iter().any(|item| match item {
        SelectItem::UnnamedExpr(e) => holds_star_columns(e),
        SelectItem::Wildcard(options) => renames(options),
        _ => false,
    })
}

/// Whether a `*` is DuckDB's `* [EXCLUDE (…)] RENAME (…)`, the form this module writes out.
fn renames(options: &WildcardAdditionalOptions) -> bool {
    options.opt_rename.is_some()
        && options.opt_ilike.is_none()
        && options.opt_except.is_none()
        && options.opt_replace.is_none()
        && options.opt_alias.is_none()
}

/// The tables of the selects that use `COLUMNS(…)` over one table, the `FROM` clauses of
/// the others (in the order a visit meets them), and the statement's CTEs.
#[derive(Default)]
struct Found {
    tables: Vec<ObjectName>,
    sources: Vec<Vec<TableWithJoins>>,
    ctes: HashSet<String>,
    with: Option<With>,
}

impl Visitor for Found {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        if let Some(with) = &query.with {
            for cte in &with.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_lowercase());
            }
            // The outermost `WITH`: what a select's `FROM` may name.
            self.with.get_or_insert_with(|| with.clone());
        }
        if let SetExpr::Select(select) = query.body.as_ref()
            && selects_star_columns(select)
        {
            match read_table(select, &self.ctes) {
                Some(table) => self.tables.push(table.clone()),
                None => self.sources.push(select.from.clone()),
            }
        }
        ControlFlow::Continue(())
    }
}

struct Expand<'a> {
    /// A table's columns, by its name as written.
    columns: &'a HashMap<String, Vec<String>>,
    /// The columns of each other select's `FROM`, in [`Found`]'s order.
    sources: std::vec::IntoIter<Option<Vec<Column>>>,
    /// The statement's CTE names.
    ctes: &'a HashSet<String>,
    failure: Option<String>,
}

impl VisitorMut for Expand<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let SetExpr::Select(select) = query.body.as_mut() else {
            return ControlFlow::Continue(());
        };
        if !selects_star_columns(select) {
            return ControlFlow::Continue(());
        }
        let columns: Vec<Column> = match read_table(select, self.ctes) {
            Some(table) => match self.columns.get(&table.to_string()) {
                Some(names) => names
                    .iter()
                    .map(|name| Column {
                        qualifier: None,
                        name: name.clone(),
                    })
                    .collect(),
                None => return ControlFlow::Continue(()),
            },
            None => match self.sources.next().flatten() {
                Some(columns) => columns,
                None => return ControlFlow::Continue(()),
            },
        };
        let mut projection = Vec::with_capacity(select.projection.len());
        for item in std::mem::take(&mut select.projection) {
            match item {
                SelectItem::UnnamedExpr(e) if holds_star_columns(&e) => {
                    match expand(&e, &columns) {
                        Ok(Some(items)) => projection.extend(items),
                        Ok(None) => projection.push(SelectItem::UnnamedExpr(e)),
                        Err(message) => {
                            self.failure = Some(message);
                            return ControlFlow::Break(());
                        }
                    }
                }
                SelectItem::Wildcard(options) if renames(&options) => {
                    match renamed(&options, &columns) {
                        Ok(items) => projection.extend(items),
                        Err(message) => {
                            self.failure = Some(message);
                            return ControlFlow::Break(());
                        }
                    }
                }
                other => projection.push(other),
            }
        }
        select.projection = distinct_names(projection);
        ControlFlow::Continue(())
    }
}

/// The items `e` stands for, one per column its one `COLUMNS(…)` call selects; `None`
/// when it is not a form this module writes out.
fn expand(e: &Expr, columns: &[Column]) -> Result<Option<Vec<SelectItem>>, String> {
    let mut calls = Vec::new();
    let _ = visit_expressions(e, |e| {
        if let Expr::Function(f) = e
            && is_columns(f)
        {
            calls.push(selector(f));
        }
        ControlFlow::<()>::Continue(())
    });
    let [Some(selector)] = calls.as_slice() else {
        return Ok(None);
    };
    let chosen: Vec<&Column> = match selector {
        Selector::All => columns.iter().collect(),
        Selector::Pattern(pattern) => {
            let re = Regex::new(pattern).map_err(|e| {
                let reason = e.to_string();
                let reason = reason.lines().last().unwrap_or_default().trim();
                let reason = reason.strip_prefix("error: ").unwrap_or(reason);
                format!("Binder Error: Failed to compile regex \"{pattern}\": {reason}")
            })?;
            let chosen: Vec<&Column> = columns.iter().filter(|c| re.is_match(&c.name)).collect();
            if chosen.is_empty() {
                return Err(format!(
                    "Binder Error: No matching columns found that match regex \"{pattern}\""
                ));
            }
            chosen
        }
    };
    let alone = matches!(e, Expr::Function(f) if is_columns(f));
    Ok(Some(
        chosen
            .into_iter()
            .map(|column| {
                let ident = Ident::with_quote('"', column.name.clone());
                let reference = reference(column, columns);
                if alone {
                    return SelectItem::UnnamedExpr(reference);
                }
                let mut item = e.clone();
                let _ = visit_expressions_mut(&mut item, |e| {
                    if let Expr::Function(f) = e
                        && is_columns(f)
                    {
                        *e = reference.clone();
                    }
                    ControlFlow::<()>::Continue(())
                });
                // Named after the column, as DuckDB names it (`max(COLUMNS('^v'))` is `v`).
                SelectItem::ExprWithAlias {
                    expr: item,
                    alias: ident,
                }
            })
            .collect(),
    ))
}

/// `column` as an expression: its name, qualified by its table when two of `columns`
/// share it.
fn reference(column: &Column, columns: &[Column]) -> Expr {
    let shared = columns.iter().filter(|c| c.name == column.name).count() > 1;
    match (&column.qualifier, shared) {
        (Some(qualifier), true) => Expr::CompoundIdentifier(
            qualifier
                .iter()
                .chain([&column.name])
                .map(|part| Ident::with_quote('"', part.clone()))
                .collect(),
        ),
        _ => Expr::Identifier(Ident::with_quote('"', column.name.clone())),
    }
}

/// The items `* [EXCLUDE (…)] RENAME (…)` stands for: every column of `columns` but the
/// excluded, in order, a renamed one aliased to its new name.
fn renamed(
    options: &WildcardAdditionalOptions,
    columns: &[Column],
) -> Result<Vec<SelectItem>, String> {
    let excluded: Vec<&Ident> = match &options.opt_exclude {
        None => Vec::new(),
        Some(ExcludeSelectItem::Single(name)) => vec![name],
        Some(ExcludeSelectItem::Multiple(names)) => names.iter().collect(),
    }
    .into_iter()
    .filter_map(|name| name.0.last().and_then(|part| part.as_ident()))
    .collect();
    for name in &excluded {
        if !columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(&name.value))
        {
            return Err(format!(
                "Binder Error: Column \"{}\" in EXCLUDE list not found in FROM clause",
                name.value
            ));
        }
    }
    let renames = match &options.opt_rename {
        Some(RenameSelectItem::Single(one)) => std::slice::from_ref(one),
        Some(RenameSelectItem::Multiple(many)) => many.as_slice(),
        None => &[],
    };
    Ok(columns
        .iter()
        .filter(|c| {
            !excluded
                .iter()
                .any(|x| c.name.eq_ignore_ascii_case(&x.value))
        })
        .map(|column| {
            let expr = reference(column, columns);
            match renames
                .iter()
                .find(|r| column.name.eq_ignore_ascii_case(&r.ident.value))
            {
                Some(rename) => SelectItem::ExprWithAlias {
                    expr,
                    alias: rename.alias.clone(),
                },
                None => SelectItem::UnnamedExpr(expr),
            }
        })
        .collect())
}

/// `projection` with each alias that repeats an earlier item's name given DuckDB's `_1`,
/// `_2`, … (`min(COLUMNS(*)), max(COLUMNS(*))` names two items after each column, and
/// DataFusion refuses two outputs of one name).
fn distinct_names(projection: Vec<SelectItem>) -> Vec<SelectItem> {
    let mut taken: Vec<String> = Vec::new();
    let name = |ident: &Ident| match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    };
    projection
        .into_iter()
        .map(|item| match item {
            SelectItem::ExprWithAlias { expr, alias } => {
                let wanted = name(&alias);
                let alias = if taken.contains(&wanted) {
                    let copy = (1..)
                        .map(|n| format!("{wanted}_{n}"))
                        .find(|c| !taken.contains(c))
                        .unwrap_or_default();
                    Ident::with_quote('"', copy)
                } else {
                    alias
                };
                taken.push(name(&alias));
                SelectItem::ExprWithAlias { expr, alias }
            }
            other => {
                match &other {
                    SelectItem::UnnamedExpr(Expr::Identifier(i)) => taken.push(name(i)),
                    SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                        taken.extend(parts.last().map(name))
                    }
                    _ => {}
                }
                other
            }
        })
        .collect()
}

//! DuckDB's lateral column aliases: a select item, and the `WHERE` clause, may use an
//! alias an earlier item of the same select list defines (`SELECT price * qty AS total,
//! total * 0.2 AS tax FROM orders WHERE total > 100`). DataFusion resolves names against
//! the `FROM` clause only ("No field named total").
//!
//! Before a statement is planned, such a reference is written as the aliased expression
//! (in parentheses) when DuckDB would read it as the alias: the name is no column of the
//! select's tables (a column is taken first, as DuckDB takes it), and the alias is
//! defined before the item that uses it. A select's columns are its tables' or, for a
//! `FROM` with a subquery, a CTE or another factor, those `SELECT * FROM` that clause
//! answers, planned once for that (a `FROM` that does not plan alone, a correlated one,
//! is left as written); references inside expression subqueries are left alone. `GROUP BY`, `HAVING` and `ORDER BY` already take
//! aliases in DataFusion. An unnamed item that used one is named as written, as DuckDB
//! names it (`(total + 1)`), not by the expression it became. Each use copies the
//! alias's expression, so the copies of one statement are bounded ([`MAX_EXPANSION`]).

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    Expr, Ident, ObjectName, Query, Select, SelectItem, SetExpr, TableFactor, TableWithJoins,
    Value, Visit, VisitMut, Visitor, VisitorMut, With, visit_expressions,
};

use super::normalize::replace_names;
use super::{SqlSession, folded, sql_err, sql_statement};
use crate::error::ApiError;

impl SqlSession {
    /// `statement` with the lateral aliases of its selects written as their expressions
    /// (the tables must be registered: `register_references`).
    pub(super) async fn substitute_aliases(
        &self,
        mut statement: DFStatement,
    ) -> Result<DFStatement, ApiError> {
        let Some(sql) = sql_statement(&mut statement) else {
            return Ok(statement);
        };
        let mut candidates = Candidates::default();
        let _ = Visit::visit(&*sql, &mut candidates);
        if candidates.tables.is_empty() && !candidates.without_from && candidates.sources.is_empty()
        {
            return Ok(statement);
        }
        let mut sources = HashMap::new();
        for from in candidates.sources {
            let key = from_key(&from);
            if sources.contains_key(&key) {
                continue;
            }
            if let Some(columns) = self.columns_of_from(from, candidates.with.clone()).await {
                let names = columns.into_iter().map(|(_, c)| c.to_lowercase()).collect();
                sources.insert(key, names);
            }
        }
        let columns: HashMap<String, HashSet<String>> = self
            .columns_by_table(candidates.tables, &candidates.ctes)
            .await
            .into_iter()
            .map(|(table, names)| (table, names.iter().map(|c| c.to_lowercase()).collect()))
            .collect();
        let mut substitute = Substitute {
            columns: &columns,
            sources: &sources,
            subqueries: 0,
            budget: MAX_EXPANSION,
        };
        if VisitMut::visit(sql, &mut substitute).is_break() {
            return Err(sql_err(format!(
                "Binder Error: lateral column aliases expand past {MAX_EXPANSION} expression \
                 nodes; name the expression in a subquery instead"
            )));
        }
        Ok(statement)
    }
}

/// How many expression nodes the substitutions of one statement may add: each alias used
/// copies its expression, so a chain of aliases each used twice (`a + a AS b, b + b AS
/// c, …`) doubles with every link, and sixty links would not fit in memory.
const MAX_EXPANSION: usize = 100_000;

/// The number of expression nodes in `e`.
fn size(e: &Expr) -> usize {
    let mut n = 0;
    let _ = visit_expressions(e, |_| {
        n += 1;
        ControlFlow::<()>::Continue(())
    });
    n
}

/// The tables of a select's `FROM`, when it holds nothing else (`None`: it does).
fn tables(from: &[TableWithJoins]) -> Option<Vec<&ObjectName>> {
    let mut names = Vec::new();
    for t in from {
        for factor in std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)) {
            match factor {
                TableFactor::Table {
                    name, args: None, ..
                } => names.push(name),
                _ => return None,
            }
        }
    }
    Some(names)
}

/// Whether a select may use one of its aliases laterally, cheaply: an unqualified name
/// in an item after an alias, or in the `WHERE` clause, is that alias (a column of the
/// same name would be taken first, which only the select's columns tell; this only
/// spares the selects that cannot, and their `FROM`'s planning, every other look).
fn may_use_aliases(select: &Select) -> bool {
    let mut aliases: HashSet<String> = HashSet::new();
    let names_one = |e: &Expr, aliases: &HashSet<String>| {
        !aliases.is_empty()
            && visit_expressions(e, |e| match e {
                Expr::Identifier(i) if aliases.contains(&folded(i).to_lowercase()) => {
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            })
            .is_break()
    };
    for item in &select.projection {
        match item {
            SelectItem::UnnamedExpr(e) if names_one(e, &aliases) => return true,
            SelectItem::ExprWithAlias { expr, alias } => {
                if names_one(expr, &aliases) {
                    return true;
                }
                aliases.insert(folded(alias).to_lowercase());
            }
            _ => {}
        }
    }
    select
        .selection
        .as_ref()
        .is_some_and(|w| names_one(w, &aliases))
}

/// A `FROM` clause as text: what its planned columns are kept by.
fn from_key(from: &[TableWithJoins]) -> String {
    from.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tables of the selects that may use lateral aliases.
#[derive(Default)]
struct Candidates {
    tables: Vec<ObjectName>,
    /// The `FROM` clauses of such selects that hold more than tables (or a CTE).
    sources: Vec<Vec<TableWithJoins>>,
    /// The outermost `WITH`: what those clauses may name.
    with: Option<With>,
    /// Whether such a select has no `FROM` (`SELECT 1 AS a, a + 1`).
    without_from: bool,
    /// The statement's CTEs' names, in lower case.
    ctes: HashSet<String>,
}

impl Visitor for Candidates {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        for cte in query.with.iter().flat_map(|w| &w.cte_tables) {
            self.ctes.insert(cte.alias.name.value.to_lowercase());
        }
        if let Some(with) = &query.with {
            self.with.get_or_insert_with(|| with.clone());
        }
        let ctes = &self.ctes;
        let (tables_found, sources, without_from) =
            (&mut self.tables, &mut self.sources, &mut self.without_from);
        for_selects(&query.body, &mut |select| {
            if !may_use_aliases(select) {
                return;
            }
            match tables(&select.from) {
                Some(names) if names.is_empty() => *without_from = true,
                Some(names)
                    if !names
                        .iter()
                        .any(|n| ctes.contains(&n.to_string().to_lowercase())) =>
                {
                    tables_found.extend(names.into_iter().cloned())
                }
                _ => sources.push(select.from.clone()),
            }
        });
        ControlFlow::Continue(())
    }
}

fn for_selects(body: &SetExpr, f: &mut impl FnMut(&Select)) {
    match body {
        SetExpr::Select(select) => f(select),
        SetExpr::SetOperation { left, right, .. } => {
            for_selects(left, f);
            for_selects(right, f);
        }
        _ => {}
    }
}

fn for_selects_mut(
    body: &mut SetExpr,
    f: &mut impl FnMut(&mut Select) -> ControlFlow<()>,
) -> ControlFlow<()> {
    match body {
        SetExpr::Select(select) => f(select),
        SetExpr::SetOperation { left, right, .. } => {
            for_selects_mut(left, f)?;
            for_selects_mut(right, f)
        }
        _ => ControlFlow::Continue(()),
    }
}

/// Rewrites the selects outside expression subqueries (whose names may be an outer
/// query's columns).
struct Substitute<'a> {
    /// A table's columns in lower case, by its name as written.
    columns: &'a HashMap<String, HashSet<String>>,
    /// The columns of other `FROM` clauses in lower case, by [`from_key`].
    sources: &'a HashMap<String, HashSet<String>>,
    subqueries: usize,
    /// Expression nodes the substitutions may still add ([`MAX_EXPANSION`]).
    budget: usize,
}

impl Substitute<'_> {
    /// Rewrite `select`; `Break` when the substitutions would pass the budget.
    fn select(&mut self, select: &mut Select) -> ControlFlow<()> {
        if !may_use_aliases(select) {
            return ControlFlow::Continue(());
        }
        let mut columns = HashSet::new();
        let known = tables(&select.from).is_some_and(|names| {
            names
                .iter()
                .all(|name| match self.columns.get(&name.to_string()) {
                    Some(c) => {
                        columns.extend(c.iter().cloned());
                        true
                    }
                    None => false,
                })
        });
        if !known {
            // A `FROM` with more than tables, or a CTE's name: its planned columns, if any.
            match self.sources.get(&from_key(&select.from)) {
                Some(c) => columns = c.clone(),
                None => return ControlFlow::Continue(()),
            }
        }
        let budget = &mut self.budget;
        let mut aliases: HashMap<String, (Expr, usize)> = HashMap::new();
        for item in &mut select.projection {
            match item {
                SelectItem::UnnamedExpr(e) => {
                    let written = e.clone();
                    substitute(e, &aliases, &columns, budget)?;
                    if *e != written {
                        // Named as written, as DuckDB names it (`y`, `(y + 1)`, `abs(y)`),
                        // not by the expression it became.
                        let alias = match written {
                            Expr::Identifier(ident) => ident,
                            other => Ident::with_quote('"', super::names::duckdb_name(&other)),
                        };
                        let expr = std::mem::replace(e, Expr::Value(Value::Null.into()));
                        *item = SelectItem::ExprWithAlias { expr, alias };
                    }
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    substitute(expr, &aliases, &columns, budget)?;
                    let name = folded(alias).to_lowercase();
                    if !columns.contains(&name) {
                        aliases.insert(name, (expr.clone(), size(expr)));
                    }
                }
                _ => {}
            }
        }
        if let Some(selection) = &mut select.selection {
            substitute(selection, &aliases, &columns, budget)?;
        }
        ControlFlow::Continue(())
    }
}

impl VisitorMut for Substitute<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if matches!(
            e,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
        ) {
            self.subqueries += 1;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if matches!(
            e,
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
        ) {
            self.subqueries -= 1;
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if self.subqueries == 0 {
            for_selects_mut(&mut query.body, &mut |select| self.select(select))?;
        }
        ControlFlow::Continue(())
    }
}

/// `e` with each unqualified name that is one of `aliases` (with its expression's size)
/// and none of `columns` written as the alias's expression, outside subqueries; `Break`
/// when that would pass `budget`.
fn substitute(
    e: &mut Expr,
    aliases: &HashMap<String, (Expr, usize)>,
    columns: &HashSet<String>,
    budget: &mut usize,
) -> ControlFlow<()> {
    if aliases.is_empty() {
        return ControlFlow::Continue(());
    }
    replace_names(e, |ident| {
        let name = folded(ident).to_lowercase();
        if columns.contains(&name) {
            return ControlFlow::Continue(None);
        }
        let Some((aliased, size)) = aliases.get(&name) else {
            return ControlFlow::Continue(None);
        };
        let Some(left) = budget.checked_sub(*size) else {
            return ControlFlow::Break(());
        };
        *budget = left;
        ControlFlow::Continue(Some(Expr::Nested(Box::new(aliased.clone()))))
    })
}

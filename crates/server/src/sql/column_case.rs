//! Column names are matched without regard to case, as DuckDB matches them: a table
//! whose column is `CustomerID` (an uploaded file's header, a quoted name) is read with
//! `SELECT CustomerID` or `customerid`, and the result column keeps the table's
//! spelling. DataFusion folds an unquoted name to lower case and then matches exactly,
//! so neither form found the column ("No field named customerid").
//!
//! Before a statement is planned, each unquoted column reference (the last part of a
//! name in an expression) is written as the spelling with capitals it stands for,
//! quoted: a qualified one (`t.customerid`) as its table's column, when the qualifier
//! names a table of the statement; any other as the one spelling its lower case has
//! among the statement's tables' columns and the names the statement defines (aliases,
//! a CTE's columns). A name spelled two ways there (`ID` and `id`; `SELECT "ID" AS id
//! … ORDER BY id`, where `id` is the alias) is spelled as the tables of its own `SELECT`
//! spell it, when they spell it one way ([`ScopedSpellings`]: comparing a table whose
//! column is `TEST_VALID_TO` with one whose column is `test_valid_to`), else left as
//! written; so is every name of a statement over lower-case tables (every one dlt
//! writes).
//!
//! The names a statement defines keep their case the same way (`SELECT 1 AS MyName`
//! names its column `MyName`, as DuckDB does, and `ORDER BY myname` is that column):
//! an unquoted alias with capitals is quoted when it is its lower case's one spelling.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

use datafusion::common::TableReference;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    ExcludeSelectItem, Expr, GroupByExpr, Ident, JoinConstraint, JoinOperator, ObjectName,
    ObjectNamePart, Query, RenameSelectItem, Select, SelectItem, SetExpr, TableAlias, TableFactor,
    Visit, VisitMut, Visitor, VisitorMut, visit_expressions_mut,
};

use super::{SqlSession, folded, name_parts, sql_statement};

/// How a statement's column names are spelled.
#[derive(Default)]
struct Spellings {
    /// Lower case → its one spelling among every column and defined name (`None`:
    /// spelled several ways).
    all: HashMap<String, Option<String>>,
    /// A qualifier (a table's alias, or its name) → its table's columns by lower case.
    tables: HashMap<String, HashMap<String, String>>,
}

impl Spellings {
    fn add(&mut self, name: &str) {
        let folded = name.to_lowercase();
        match self.all.get(&folded) {
            None => {
                self.all.insert(folded, Some(name.to_string()));
            }
            Some(Some(other)) if other != name => {
                self.all.insert(folded, None);
            }
            Some(_) => {}
        }
    }

    /// Whether any name has capitals (else nothing can need a new spelling).
    fn has_capitals(&self) -> bool {
        self.all
            .iter()
            .any(|(folded, spelling)| spelling.as_deref() != Some(folded.as_str()))
    }

    /// Whether an unquoted name the statement defines keeps its capitals: when it is the
    /// one spelling of its lower case (its references are then respelled to it).
    fn keeps_case(&self, name: &Ident) -> bool {
        name.quote_style.is_none()
            && name.value != name.value.to_lowercase()
            && self.all.get(&name.value.to_lowercase()) == Some(&Some(name.value.clone()))
    }

    /// The spelling `column` (qualified by `qualifier`) stands for, when it is not its
    /// own: as DataFusion reads it, lower case unquoted, as written quoted (`"customerid"`
    /// is DuckDB's `CustomerID` too).
    fn respelled(&self, qualifier: Option<&Ident>, column: &Ident) -> Option<String> {
        let folded = column.value.to_lowercase();
        let own = match column.quote_style {
            None => &folded,
            Some(_) => &column.value,
        };
        let spelling = match qualifier.and_then(|q| self.tables.get(&super::folded(q))) {
            Some(columns) => columns.get(&folded),
            None => self.all.get(&folded).and_then(Option::as_ref),
        }?;
        (spelling != own).then(|| spelling.clone())
    }
}

impl SqlSession {
    /// `statement` with its column references spelled as the tables it reads spell them
    /// (the tables must be registered: `register_references`).
    pub(super) async fn spell_columns(&self, mut statement: DFStatement) -> DFStatement {
        let Some(sql) = sql_statement(&mut statement) else {
            return statement;
        };
        let mut names = Names::default();
        let _ = Visit::visit(&*sql, &mut names);
        let mut spellings = Spellings::default();
        for (qualifier, table) in &names.tables {
            let Some(columns) = self.columns_of(table).await else {
                continue;
            };
            for column in &columns {
                spellings.add(column);
            }
            let by_case = columns.into_iter().map(|c| (c.to_lowercase(), c)).collect();
            spellings.tables.insert(qualifier.clone(), by_case);
        }
        for name in &names.defined {
            spellings.add(name);
        }
        if !spellings.has_capitals() && !names.quoted_capitals {
            return statement;
        }
        let _ = VisitMut::visit(sql, &mut KeptCase(&spellings));
        let _ = VisitMut::visit(sql, &mut ScopedSpellings::new(&spellings));
        let respell = |qualifier: Option<&Ident>, column: &mut Ident| {
            if let Some(spelling) = spellings.respelled(qualifier, column) {
                column.value = spelling;
                column.quote_style = Some('"');
            }
        };
        let _ = visit_expressions_mut(sql, |e| {
            match e {
                Expr::Identifier(ident) => respell(None, ident),
                Expr::CompoundIdentifier(parts) => {
                    if let [.., qualifier, column] = parts.as_mut_slice() {
                        respell(Some(&*qualifier), column);
                    }
                }
                _ => {}
            }
            ControlFlow::<()>::Continue(())
        });
        statement
    }

    /// The column names of the registered table `name` (`None`: not a table, e.g. a
    /// CTE's name).
    /// The columns of each of `tables` (by its name as written) that is a table: not one
    /// of the statement's CTE names (`ctes`, in lower case), which is not the table it may
    /// shadow.
    pub(super) async fn columns_by_table(
        &self,
        tables: Vec<ObjectName>,
        ctes: &HashSet<String>,
    ) -> HashMap<String, Vec<String>> {
        let mut columns = HashMap::new();
        for table in tables {
            if ctes.contains(&table.to_string().to_lowercase()) {
                continue;
            }
            if let Some(names) = self.columns_of(&table).await {
                columns.insert(table.to_string(), names);
            }
        }
        columns
    }

    pub(super) async fn columns_of(&self, name: &ObjectName) -> Option<Vec<String>> {
        let reference = match name_parts(name).ok()?.as_slice() {
            [t] => TableReference::bare(t.as_str()),
            [s, t] => TableReference::partial(s.as_str(), t.as_str()),
            [c, s, t] => TableReference::full(c.as_str(), s.as_str(), t.as_str()),
            _ => return None,
        };
        let table = self.ctx.table_provider(reference).await.ok()?;
        Some(
            table
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect(),
        )
    }
}

/// The tables a statement reads (with the qualifier each is known by) and the column
/// names it defines (select aliases, a CTE's or derived table's column names), as
/// written.
#[derive(Default)]
struct Names {
    tables: Vec<(String, ObjectName)>,
    defined: Vec<String>,
    /// Whether a column is referred to by a quoted name with capitals (`"CustomerID"`,
    /// which is DuckDB's `customerid` too).
    quoted_capitals: bool,
}

impl Names {
    fn add_table_alias(&mut self, alias: &TableAlias) {
        for column in &alias.columns {
            self.defined.push(column.name.value.clone());
        }
    }

    fn add_select_aliases(&mut self, body: &SetExpr) {
        match body {
            SetExpr::Select(select) => {
                for item in &select.projection {
                    match item {
                        SelectItem::ExprWithAlias { alias, .. } => {
                            self.defined.push(alias.value.clone());
                        }
                        // `* RENAME (a AS b)` defines `b`.
                        SelectItem::Wildcard(options)
                        | SelectItem::QualifiedWildcard(_, options) => {
                            let renames = match &options.opt_rename {
                                Some(RenameSelectItem::Single(one)) => std::slice::from_ref(one),
                                Some(RenameSelectItem::Multiple(many)) => many.as_slice(),
                                None => &[],
                            };
                            self.defined
                                .extend(renames.iter().map(|r| r.alias.value.clone()));
                        }
                        _ => {}
                    }
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.add_select_aliases(left);
                self.add_select_aliases(right);
            }
            _ => {}
        }
    }
}

impl Visitor for Names {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        let column = match e {
            Expr::Identifier(ident) => Some(ident),
            Expr::CompoundIdentifier(parts) => parts.last(),
            _ => None,
        };
        if let Some(column) = column
            && column.quote_style.is_some()
            && column.value != column.value.to_lowercase()
        {
            self.quoted_capitals = true;
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        for cte in query.with.iter().flat_map(|w| &w.cte_tables) {
            self.add_table_alias(&cte.alias);
        }
        self.add_select_aliases(&query.body);
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, table: &TableFactor) -> ControlFlow<()> {
        match table {
            TableFactor::Table { name, alias, .. } => {
                self.tables
                    .push((qualifier(name, alias.as_ref()), name.clone()));
                if let Some(alias) = alias {
                    self.add_table_alias(alias);
                }
            }
            TableFactor::Derived {
                alias: Some(alias), ..
            } => self.add_table_alias(alias),
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Quotes the names a statement defines that keep their capitals
/// ([`Spellings::keeps_case`]): `SELECT 1 AS MyName` names its column `MyName`, as
/// DuckDB does (DataFusion folded it to `myname`); respells the columns `* EXCLUDE`
/// names, which are no expressions.
struct KeptCase<'a>(&'a Spellings);

impl KeptCase<'_> {
    fn keep(&self, name: &mut Ident) {
        if self.0.keeps_case(name) {
            name.quote_style = Some('"');
        }
    }

    fn keep_table_alias(&self, alias: &mut TableAlias) {
        for column in &mut alias.columns {
            self.keep(&mut column.name);
        }
    }

    /// Respells a column named outside an expression (`* EXCLUDE (c)`, `USING (c)`).
    fn respell(&self, name: &mut ObjectName) {
        if let [ObjectNamePart::Identifier(column)] = name.0.as_mut_slice()
            && let Some(spelling) = self.0.respelled(None, column)
        {
            column.value = spelling;
            column.quote_style = Some('"');
        }
    }

    fn keep_select_aliases(&self, body: &mut SetExpr) {
        match body {
            SetExpr::Select(select) => {
                let joins = select.from.iter_mut().flat_map(|t| &mut t.joins);
                for join in joins {
                    if let Some(JoinConstraint::Using(columns)) =
                        join_constraint(&mut join.join_operator)
                    {
                        columns.iter_mut().for_each(|c| self.respell(c));
                    }
                }
                for item in &mut select.projection {
                    match item {
                        SelectItem::ExprWithAlias { alias, .. } => self.keep(alias),
                        // `* EXCLUDE (customerid)` names columns outside an expression.
                        SelectItem::Wildcard(options)
                        | SelectItem::QualifiedWildcard(_, options) => {
                            let excluded = match &mut options.opt_exclude {
                                Some(ExcludeSelectItem::Single(name)) => std::slice::from_mut(name),
                                Some(ExcludeSelectItem::Multiple(names)) => names.as_mut_slice(),
                                None => &mut [],
                            };
                            excluded.iter_mut().for_each(|name| self.respell(name));
                            let renames = match &mut options.opt_rename {
                                Some(RenameSelectItem::Single(one)) => std::slice::from_mut(one),
                                Some(RenameSelectItem::Multiple(many)) => many.as_mut_slice(),
                                None => &mut [],
                            };
                            renames.iter_mut().for_each(|r| self.keep(&mut r.alias));
                        }
                        _ => {}
                    }
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.keep_select_aliases(left);
                self.keep_select_aliases(right);
            }
            _ => {}
        }
    }
}

impl VisitorMut for KeptCase<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        for cte in query.with.iter_mut().flat_map(|w| &mut w.cte_tables) {
            self.keep_table_alias(&mut cte.alias);
        }
        self.keep_select_aliases(&mut query.body);
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, table: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Table {
            alias: Some(alias), ..
        }
        | TableFactor::Derived {
            alias: Some(alias), ..
        } = table
        {
            self.keep_table_alias(alias);
        }
        ControlFlow::Continue(())
    }
}

/// Unqualified column references respelled by the tables of their own `SELECT`, for a
/// name the statement's tables spell several ways (`"TEST_VALID_TO"` in one table,
/// `test_valid_to` in another, which the statement-wide spellings leave as written):
/// DuckDB binds a name in the scope it is in. Innermost queries first; a reference a
/// query's tables do not spell (a correlated one) is left to the queries around it. A
/// `SELECT` reading anything but tables (a derived table, a CTE) has no known scope.
struct ScopedSpellings<'a> {
    spellings: &'a Spellings,
    /// The references already bound, by address (the tree is changed in place only).
    bound: HashSet<usize>,
}

impl<'a> ScopedSpellings<'a> {
    fn new(spellings: &'a Spellings) -> Self {
        Self {
            spellings,
            bound: HashSet::new(),
        }
    }

    /// The columns of a `SELECT`'s tables by lower case (`None`: spelled two ways),
    /// when it reads only tables.
    fn scope(&self, select: &Select) -> Option<HashMap<String, Option<String>>> {
        let mut scope: HashMap<String, Option<String>> = HashMap::new();
        let factors = select
            .from
            .iter()
            .flat_map(|t| std::iter::once(&t.relation).chain(t.joins.iter().map(|j| &j.relation)));
        for factor in factors {
            let TableFactor::Table { name, alias, .. } = factor else {
                return None;
            };
            let qualifier = qualifier(name, alias.as_ref());
            for (lower, spelling) in self.spellings.tables.get(&qualifier)? {
                match scope.get(lower) {
                    Some(Some(other)) if other != spelling => {
                        scope.insert(lower.clone(), None);
                    }
                    Some(_) => {}
                    None => {
                        scope.insert(lower.clone(), Some(spelling.clone()));
                    }
                }
            }
        }
        Some(scope)
    }

    fn bind(&mut self, select: &mut Select) {
        let Some(scope) = self.scope(select) else {
            return;
        };
        let bound = &mut self.bound;
        let mut bind = |e: &mut Expr| {
            if let Expr::Identifier(ident) = e {
                let address = &*ident as *const Ident as usize;
                if bound.contains(&address) {
                    return ControlFlow::<()>::Continue(());
                }
                let lower = ident.value.to_lowercase();
                if let Some(Some(spelling)) = scope.get(&lower) {
                    bound.insert(address);
                    let own = match ident.quote_style {
                        None => &lower,
                        Some(_) => &ident.value,
                    };
                    if own != spelling {
                        ident.value = spelling.clone();
                        ident.quote_style = Some('"');
                    }
                }
            }
            ControlFlow::Continue(())
        };
        for item in &mut select.projection {
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                let _ = visit_expressions_mut(e, &mut bind);
            }
        }
        for e in select.selection.iter_mut().chain(select.having.iter_mut()) {
            let _ = visit_expressions_mut(e, &mut bind);
        }
        if let GroupByExpr::Expressions(keys, _) = &mut select.group_by {
            for e in keys {
                let _ = visit_expressions_mut(e, &mut bind);
            }
        }
        for join in select.from.iter_mut().flat_map(|t| &mut t.joins) {
            if let Some(JoinConstraint::On(e)) = join_constraint(&mut join.join_operator) {
                let _ = visit_expressions_mut(e, &mut bind);
            }
        }
    }
}

impl VisitorMut for ScopedSpellings<'_> {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        super::normalize::each_select(&mut query.body, &mut |select| self.bind(select));
        ControlFlow::Continue(())
    }
}

/// The name a table's columns are qualified by: its alias, else its own last part
/// (folded as DataFusion folds it).
fn qualifier(name: &ObjectName, alias: Option<&TableAlias>) -> String {
    match alias {
        Some(alias) => folded(&alias.name),
        None => name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map_or_else(String::new, folded),
    }
}

/// A join's constraint (`ON …`, `USING (…)`), whatever its kind.
fn join_constraint(operator: &mut JoinOperator) -> Option<&mut JoinConstraint> {
    use JoinOperator as J;
    match operator {
        J::Join(c)
        | J::Inner(c)
        | J::Left(c)
        | J::LeftOuter(c)
        | J::Right(c)
        | J::RightOuter(c)
        | J::FullOuter(c)
        | J::CrossJoin(c)
        | J::Semi(c)
        | J::LeftSemi(c)
        | J::RightSemi(c)
        | J::Anti(c)
        | J::LeftAnti(c)
        | J::RightAnti(c)
        | J::StraightJoin(c)
        | J::AsOf { constraint: c, .. } => Some(c),
        J::CrossApply | J::OuterApply | J::ArrayJoin | J::LeftArrayJoin | J::InnerArrayJoin => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use datafusion::sql::sqlparser::ast::Ident;

    use super::Spellings;

    #[test]
    fn one_spelling_with_capitals_is_taken_two_are_left_to_qualifiers() {
        let mut spellings = Spellings::default();
        for name in ["CustomerID", "id", "ID", "v"] {
            spellings.add(name);
        }
        spellings
            .tables
            .insert("u".into(), HashMap::from([("id".into(), "ID".into())]));
        let unquoted = Ident::new;
        assert_eq!(
            spellings.respelled(None, &unquoted("customerid")),
            Some("CustomerID".to_string())
        );
        // `id` and `ID`: only a qualifier tells which.
        assert_eq!(spellings.respelled(None, &unquoted("id")), None);
        assert_eq!(
            spellings.respelled(Some(&unquoted("U")), &unquoted("id")),
            Some("ID".to_string())
        );
        // A quoted name in another case is the one spelling too; as it is, it is kept.
        assert_eq!(
            spellings.respelled(None, &Ident::with_quote('"', "customerid")),
            Some("CustomerID".to_string())
        );
        assert_eq!(
            spellings.respelled(None, &Ident::with_quote('"', "CustomerID")),
            None
        );
        // Lower-case ones are DataFusion's, as written.
        assert_eq!(spellings.respelled(None, &unquoted("V")), None);
        assert!(spellings.has_capitals());
        assert!(spellings.keeps_case(&unquoted("CustomerID")));
        assert!(!spellings.keeps_case(&unquoted("ID")));

        let mut lower = Spellings::default();
        lower.add("id");
        assert!(!lower.has_capitals());
    }
}

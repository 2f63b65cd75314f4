//! AST rewrites for DuckDB SQL that DataFusion parses but cannot plan (or that sqlparser
//! parses otherwise than DuckDB), applied after parsing and before the guards.
//!
//! - `a IS [NOT] DISTINCT FROM b AND c`: sqlparser 0.62 parses the right operand with the
//!   precedence of `AND`/`OR`, as `a IS [NOT] DISTINCT FROM (b AND c)` (dlt's null-safe key
//!   comparisons); DuckDB and Postgres bind it tighter. Put back as
//!   `(a IS [NOT] DISTINCT FROM b) AND c`, parenthesised so that the SQL text the write
//!   paths print from the tree parses the same way again.
//!
//! - `count(DISTINCT row(a, …))` (dlt's merge-key check): counted over the tuples' Arrow
//!   row encoding (`sql/udf.rs::row_key_udf`), which DataFusion's bytes accumulator
//!   counts in bounded memory; its struct accumulator does not.
//! - `a // b`: DuckDB's integer division, as `sql/arithmetic.rs` plans it; `1e3`, a
//!   DOUBLE (other numbers with a fraction are DECIMALs, as in DuckDB).
//! - DuckDB function names DataFusion spells otherwise (`strftime`, `regexp_matches`,
//!   `approx_count_distinct`, `dayofweek`, `dayofyear`, `epoch`, `year`, `month`, …):
//!   what ibis sends; `list_value`, `gen_random_uuid`, `strlen`, `isodow`, `isoyear`,
//!   `weekday`, `fsum`, `favg`, `struct_extract`, `lcase`, `ucase`, `prefix`, `suffix`,
//!   `unicode`, `ord`, `list_min`; `string_agg(x)` separated by `,`.
//! - DuckDB functions that compose others: `last_day`, `dayname`, `monthname`,
//!   `time_bucket`, `pg_typeof`, `sign`, `date_add`, `isinf`, `list_reverse_sort`, `xor`,
//!   `century`, `decade`, `to_days` and the other `to_*` intervals, `mod`,
//!   `regexp_full_match`, `yearweek`, `encode`/`decode` of one argument, `date`, `to_hex` in
//!   capitals ([`COMPOSITES`]); `len` and `epoch_ms` depend on their argument's type
//!   (`sql/type_dispatch.rs`).
//! - `a ^ b`: DuckDB's power (`sql/power.rs`); `x[:b]`, `x[a:]` with their bound;
//!   `LIKE … ESCAPE '!'` of a literal pattern escaped with a backslash instead; without
//!   `ESCAPE`, a backslash in a pattern an ordinary character, as in DuckDB.
//! - `x [NOT] IN (subquery)` and row values `(a, b) IN (subquery)` where their value is
//!   used, not only their truth (select lists, `UPDATE … SET s = CASE WHEN k IN (…)`,
//!   `(k NOT IN (…)) IS NULL` in a filter): the same, as scalar counts with the `IN`'s
//!   three-valued result. DataFusion plans them as semi/anti joins, which are two-valued.
//! - `EXISTS (…)` in a select list (`SELECT CASE WHEN EXISTS (…) THEN error('…') …`, which
//!   dlt sends): DataFusion plans `EXISTS` only in filters. A plain subquery becomes the
//!   scalar `(SELECT count(*) > 0 FROM … WHERE …)`, which it decorrelates; any other
//!   (set operations, grouping, limits) is counted from a derived table.
//! - `generate_series(…)` and `range(…)` name their column after themselves, as in DuckDB;
//!   `ORDER BY ALL` orders by every output column.
//! - DuckDB's JSON functions and `->`/`->>` (`sql/json.rs`).
//! - DuckDB's `arg_max`/`arg_min` (`max_by`/`min_by`) as `first_value` ordered and
//!   filtered; `quantile_cont(x, [q1, q2])` as a list of one aggregate per quantile.
//! - A select item that is an integer literal in INTEGER's range is an INTEGER, as DuckDB
//!   types it (DataFusion's are BIGINTs): dbt's model contracts compare the types.
//! - dbt-duckdb's cross-database macros: `n * INTERVAL '…'` (`sql/temporal.rs`),
//!   `list_aggr(l, 'string_agg', sep)`, `string_split`, `arbitrary`; `count_if`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    AccessExpr, BinaryOperator, CastKind, DataType, Distinct, DuplicateTreatment, ExactNumberInfo,
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList, FunctionArguments, Ident,
    JoinConstraint, JoinOperator, LambdaFunction, ObjectName, OneOrManyWithParens, OrderBy,
    OrderByExpr, OrderByKind, Query, Select, SelectItem, SetExpr, Statement, Subscript, TableAlias,
    TableAliasColumnDef, TableFactor, UnaryOperator, Value, VisitMut, VisitorMut,
    visit_expressions_mut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Apply every rewrite to `statement`.
pub(super) fn statement(statement: &mut Statement) {
    super::using_joins::coalesce_keys(statement);
    let _ = visit_expressions_mut(statement, |e| {
        expression(e);
        ControlFlow::<()>::Continue(())
    });
    let _ = statement.visit(&mut Subqueries);
    let _ = statement.visit(&mut SeriesColumns);
    let _ = statement.visit(&mut OrderByAll);
    let _ = statement.visit(&mut EachSelect(named_windows));
    let _ = statement.visit(&mut EachSelect(integer_items));
    let _ = statement.visit(&mut EachSelect(empty_grouping));
    values_columns(statement);
    let _ = statement.visit(&mut DistinctOrderBy);
    super::cast_names::name_casts(statement);
}

/// The rewrites of one expression (applied to each, its parts first).
fn expression(e: &mut Expr) {
    exponent_literal(e);
    open_slice(e);
    dot_fields(e);
    like_escape(e);
    super::power::rewrite(e);
    integer_divide(e);
    super::temporal::interval_clock(e);
    super::temporal::interval_number(e);
    interval_times(e);
    list_string_agg(e);
    count_if(e);
    ranking_bigint(e);
    string_agg_separator(e);
    arg_max(e);
    quantile_list(e);
    at_time_zone(e);
    super::json::rewrite(e);
    distinct_from_precedence(e);
    in_values(e);
    set_comparison(e);
    duckdb_function(e);
    super::lambdas::rewrite(e);
    duckdb_composite(e);
    count_distinct_row(e);
}

/// DuckDB's `quantile_cont(x, [q1, q2, …])` (also `quantile_disc`, `quantile`): the
/// list of those quantiles, as a list of one aggregate per quantile (DataFusion's take
/// one quantile), NULL over no values. Each keeps the call's `FILTER`, `OVER` and
/// ordering.
fn quantile_list(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    if !["quantile_cont", "quantile_disc", "quantile"]
        .iter()
        .any(|n| plain_name(&f.name, n))
    {
        return;
    }
    let FunctionArguments::List(list) = &f.args else {
        return;
    };
    let [
        _,
        FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Array(quantiles))),
    ] = list.args.as_slice()
    else {
        return;
    };
    if quantiles.elem.is_empty() {
        return;
    }
    let calls = quantiles
        .elem
        .iter()
        .map(|q| {
            let mut one = f.clone();
            if let FunctionArguments::List(list) = &mut one.args {
                list.args[1] = FunctionArg::Unnamed(FunctionArgExpr::Expr(q.clone()));
            }
            Expr::Function(one)
        })
        .collect();
    // Over no values the list is NULL, not a list of NULLs.
    let mut count = f.clone();
    count.name = ObjectName::from(vec![Ident::new("count")]);
    if let FunctionArguments::List(list) = &mut count.args {
        list.args.truncate(1);
    }
    let Some(mut listed) = parse_expr("CASE WHEN __a0 = 0 THEN NULL ELSE __a1 END") else {
        return;
    };
    let parts = [Expr::Function(count), function_call("make_array", calls)];
    let _ = replace_names(&mut listed, |ident| {
        let part = match ident.value.as_str() {
            "__a0" => Some(parts[0].clone()),
            "__a1" => Some(parts[1].clone()),
            _ => None,
        };
        ControlFlow::Continue(part)
    });
    *e = listed;
}

/// `x [NOT] IN (VALUES (a), (b))` as the list `x [NOT] IN (a, b)`, the same three-valued
/// answer (DataFusion refused the form: "single expression required").
fn in_values(e: &mut Expr) {
    let Expr::InSubquery {
        expr,
        subquery,
        negated,
    } = e
    else {
        return;
    };
    let SetExpr::Values(values) = subquery.body.as_ref() else {
        return;
    };
    if subquery.with.is_some() || subquery.order_by.is_some() || subquery.limit_clause.is_some() {
        return;
    }
    let mut list = Vec::with_capacity(values.rows.len());
    for row in &values.rows {
        let [value] = row.as_slice() else {
            return;
        };
        list.push(value.clone());
    }
    *e = Expr::InList {
        expr: expr.clone(),
        list,
        negated: *negated,
    };
}

/// `x = ANY (q)` and `x <> ALL (q)` of a subquery as `x IN (q)` and `x NOT IN (q)`, the
/// same three-valued answers, planned wherever `IN` is (a select list too). Any other
/// comparison with `ANY`/`ALL` of a subquery names the subquery's column
/// `__deltalite_set`: DataFusion's rewrite correlates that column with `x` by name, and
/// when both read a relation of one name (`FROM t WHERE x > ALL (SELECT x FROM t …)`)
/// it compared `t.x` with itself, so every row passed or none did.
fn set_comparison(e: &mut Expr) {
    let (left, compare_op, right, all) = match e {
        Expr::AnyOp {
            left,
            compare_op,
            right,
            ..
        } => (left, compare_op, right, false),
        Expr::AllOp {
            left,
            compare_op,
            right,
        } => (left, compare_op, right, true),
        _ => return,
    };
    let Expr::Subquery(query) = right.as_mut() else {
        return;
    };
    match (&*compare_op, all) {
        (BinaryOperator::Eq, false) | (BinaryOperator::NotEq, true) => {
            *e = Expr::InSubquery {
                expr: left.clone(),
                subquery: query.clone(),
                negated: all,
            };
        }
        _ => name_set_column(query.body.as_mut()),
    }
}

/// The one column of a set comparison's subquery named `__deltalite_set` (its leftmost
/// select's: a set operation takes its names from there).
fn name_set_column(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            if let [item] = select.projection.as_mut_slice() {
                let expr = match item {
                    SelectItem::UnnamedExpr(expr) | SelectItem::ExprWithAlias { expr, .. } => {
                        expr.clone()
                    }
                    _ => return,
                };
                *item = SelectItem::ExprWithAlias {
                    expr,
                    alias: Ident::new("__deltalite_set"),
                };
            }
        }
        SetExpr::SetOperation { left, .. } => name_set_column(left),
        SetExpr::Query(query) => name_set_column(query.body.as_mut()),
        _ => {}
    }
}

/// A select item that is an integer literal in INTEGER's range (`SELECT 1 AS id`) is an
/// INTEGER, as DuckDB types it; DataFusion makes every integer literal a BIGINT. dbt's
/// model contracts compare the query's types with the declared ones (`data_type: int`),
/// and `CREATE TABLE … AS SELECT 1 AS z` makes the column DuckDB makes. Literals inside
/// expressions keep DataFusion's typing.
fn integer_items(select: &mut Select) {
    for item in &mut select.projection {
        let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item else {
            continue;
        };
        if !integer_in_range(e) {
            continue;
        }
        let literal = std::mem::replace(e, Expr::Value(Value::Null.into()));
        *e = Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(literal),
            data_type: DataType::Integer(None),
            array: false,
            format: None,
        };
    }
}

/// Whether `e` is an integer literal in INTEGER's range, or its negation (typed before
/// it is negated, as DuckDB types it: `-2147483648` is a BIGINT).
fn integer_in_range(e: &Expr) -> bool {
    let value = match e {
        Expr::Value(v) => &v.value,
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            Expr::Value(v) => &v.value,
            _ => return false,
        },
        _ => return false,
    };
    matches!(value, Value::Number(digits, _) if digits.parse::<i32>().is_ok())
}

/// Each `SELECT` of every query body (both sides of a set operation), given to `.0`.
struct EachSelect<F: FnMut(&mut Select)>(F);

impl<F: FnMut(&mut Select)> VisitorMut for EachSelect<F> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        each_select(query.body.as_mut(), &mut self.0);
        ControlFlow::Continue(())
    }
}

/// Each `SELECT` of a query body, both sides of a set operation (`sql/column_case.rs`
/// too).
pub(super) fn each_select(body: &mut SetExpr, f: &mut impl FnMut(&mut Select)) {
    match body {
        SetExpr::Select(select) => f(select),
        SetExpr::SetOperation { left, right, .. } => {
            each_select(left, f);
            each_select(right, f);
        }
        _ => {}
    }
}

/// `GROUP BY ()`, DuckDB's (and SQL's) empty grouping: the whole input is one group,
/// one row even when it is empty, as `GROUPING SETS (())`, which DataFusion plans (it
/// refused the empty tuple).
fn empty_grouping(select: &mut Select) {
    use datafusion::sql::sqlparser::ast::GroupByExpr;
    if let GroupByExpr::Expressions(exprs, modifiers) = &mut select.group_by
        && modifiers.is_empty()
        && !exprs.is_empty()
        && exprs
            .iter()
            .all(|e| matches!(e, Expr::Tuple(t) if t.is_empty()))
    {
        *exprs = vec![Expr::GroupingSets(vec![Vec::new()])];
    }
}

/// A window that refines a named one (`OVER (w ROWS UNBOUNDED PRECEDING)`, `WINDOW w2 AS
/// (w ORDER BY x)`) written out whole: the named window's partitioning, its ordering
/// unless the refinement orders, and the refinement's frame (else the named one's).
/// DataFusion plans `OVER w` but ignored the name inside parentheses, so such a window
/// lost the named window's `PARTITION BY` (a running sum ran over every partition).
fn named_windows(select: &mut Select) {
    use datafusion::sql::sqlparser::ast::{NamedWindowExpr, WindowSpec, WindowType};
    if select.named_window.is_empty() {
        return;
    }
    // Each definition written out from those before it, in order.
    let mut defined: Vec<(Ident, WindowSpec)> = Vec::new();
    let whole = |spec: &WindowSpec, defined: &[(Ident, WindowSpec)]| -> WindowSpec {
        let base = spec
            .window_name
            .as_ref()
            .and_then(|n| defined.iter().find(|(d, _)| d.value == n.value))
            .map(|(_, base)| base);
        match base {
            Some(base) => WindowSpec {
                window_name: None,
                partition_by: base.partition_by.clone(),
                order_by: if spec.order_by.is_empty() {
                    base.order_by.clone()
                } else {
                    spec.order_by.clone()
                },
                window_frame: spec
                    .window_frame
                    .clone()
                    .or_else(|| base.window_frame.clone()),
            },
            None => spec.clone(),
        }
    };
    for definition in select.named_window.iter_mut() {
        let spec = match &definition.1 {
            NamedWindowExpr::WindowSpec(spec) => whole(spec, &defined),
            NamedWindowExpr::NamedWindow(name) => whole(
                &WindowSpec {
                    window_name: Some(name.clone()),
                    partition_by: Vec::new(),
                    order_by: Vec::new(),
                    window_frame: None,
                },
                &defined,
            ),
        };
        definition.1 = NamedWindowExpr::WindowSpec(spec.clone());
        defined.push((definition.0.clone(), spec));
    }
    let mut refine = |e: &mut Expr| {
        if let Expr::Function(f) = e
            && let Some(WindowType::WindowSpec(spec)) = &f.over
            && spec.window_name.is_some()
        {
            f.over = Some(WindowType::WindowSpec(whole(spec, &defined)));
        }
        ControlFlow::<()>::Continue(())
    };
    for item in select.projection.iter_mut() {
        let _ = visit_expressions_mut(item, &mut refine);
    }
    if let Some(qualify) = select.qualify.as_mut() {
        let _ = visit_expressions_mut(qualify, &mut refine);
    }
}

/// The columns of `VALUES` named as DuckDB names them, `col0`, `col1`, … (DataFusion's
/// are `column1`, `column2`, …): a bare `VALUES` statement, a CTE's and a derived
/// table's, unless their alias names them all; a derived table's alias naming only the
/// first columns (`(VALUES (1, 2)) t(a)`) keeps `col1` for the rest, where DataFusion
/// refused it. An `INSERT`'s `VALUES` are left alone.
fn values_columns(statement: &mut Statement) {
    let width = |query: &Query| match query.body.as_ref() {
        SetExpr::Values(values) => values.rows.first().map(|row| row.len()),
        _ => None,
    };
    let complete =
        |alias: &mut TableAlias, width: usize| complete_columns(&mut alias.columns, width);
    // A bare VALUES: a select of all its columns, named.
    if let Statement::Query(query) = statement
        && let Some(n) = width(query)
        && let Ok(mut statements) = Parser::parse_sql(
            &GenericDialect {},
            "SELECT * FROM (VALUES (NULL)) AS valueslist",
        )
        && let Some(Statement::Query(mut select)) = statements.pop()
        && let SetExpr::Select(outer) = select.body.as_mut()
        && let Some(TableFactor::Derived {
            subquery,
            alias: Some(alias),
            ..
        }) = outer.from.first_mut().map(|f| &mut f.relation)
    {
        complete(alias, n);
        let mut values = query.as_ref().clone();
        values.with = None;
        values.order_by = None;
        values.limit_clause = None;
        **subquery = values;
        query.body = select.body;
    }
    let _ = visit_table_factors(statement, |factor| {
        if let TableFactor::Derived {
            subquery, alias, ..
        } = factor
            && let Some(n) = width(subquery)
        {
            let alias = alias.get_or_insert_with(|| TableAlias {
                explicit: true,
                name: Ident::new("valueslist"),
                columns: Vec::new(),
                at: None,
            });
            complete(alias, n);
        }
    });
    struct Ctes;
    impl VisitorMut for Ctes {
        type Break = ();
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            for cte in query.with.iter_mut().flat_map(|w| w.cte_tables.iter_mut()) {
                if cte.alias.columns.is_empty()
                    && let SetExpr::Values(values) = cte.query.body.as_ref()
                    && let Some(row) = values.rows.first()
                {
                    complete_columns(&mut cte.alias.columns, row.len());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Ctes);
}

/// `columns` followed by DuckDB's names of the `VALUES` columns after them, up to `width`.
fn complete_columns(columns: &mut Vec<TableAliasColumnDef>, width: usize) {
    for i in columns.len()..width {
        columns.push(TableAliasColumnDef {
            name: Ident::new(format!("col{i}")),
            data_type: None,
        });
    }
}

/// `f` on every table factor of `statement`.
fn visit_table_factors(
    statement: &mut Statement,
    mut f: impl FnMut(&mut TableFactor),
) -> ControlFlow<()> {
    struct Factors<F>(F);
    impl<F: FnMut(&mut TableFactor)> VisitorMut for Factors<F> {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
            (self.0)(factor);
            ControlFlow::Continue(())
        }
    }
    statement.visit(&mut Factors(&mut f))
}

/// DuckDB's `ORDER BY ALL [ASC|DESC] [NULLS …]`: by every output column, left to right.
/// The generic dialect parses `ALL` as a column named `all`; it becomes the positions
/// `1, 2, …` with the same options, when the select list has no wildcard (whose width
/// only planning knows: `resolve.rs::order_by_all` plans the statement's own query
/// without its ordering to learn it).
struct OrderByAll;

impl VisitorMut for OrderByAll {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if orders_by_all(query)
            && let Some(width) = output_width(&query.body)
        {
            order_by_positions(query, width);
        }
        ControlFlow::Continue(())
    }
}

/// Whether `query` ends in DuckDB's `ORDER BY ALL`.
pub(super) fn orders_by_all(query: &Query) -> bool {
    match &query.order_by {
        Some(OrderBy {
            kind: OrderByKind::Expressions(exprs),
            ..
        }) => matches!(exprs.as_slice(), [only] if matches!(&only.expr,
            Expr::Identifier(ident) if ident.quote_style.is_none()
                && ident.value.eq_ignore_ascii_case("all"))),
        _ => false,
    }
}

/// `ORDER BY ALL` of `query` as the positions `1, …, width`, with its options.
pub(super) fn order_by_positions(query: &mut Query, width: usize) {
    let Some(OrderBy {
        kind: OrderByKind::Expressions(exprs),
        ..
    }) = &mut query.order_by
    else {
        return;
    };
    let Some(options) = exprs.first().map(|only| only.options) else {
        return;
    };
    *exprs = (1..=width)
        .map(|i| OrderByExpr {
            expr: Expr::Value(Value::Number(i.to_string(), false).into()),
            options,
            with_fill: None,
        })
        .collect();
}

/// `SELECT DISTINCT k + 1 … ORDER BY k + 1`: an ordering key that is a select item's
/// expression becomes that item's position, as DuckDB reads it. DataFusion matches a
/// `DISTINCT`'s keys against the items' columns only ("For SELECT DISTINCT, ORDER BY
/// expressions k must appear in select list").
struct DistinctOrderBy;

impl VisitorMut for DistinctOrderBy {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let SetExpr::Select(select) = query.body.as_ref() else {
            return ControlFlow::Continue(());
        };
        if !matches!(select.distinct, Some(Distinct::Distinct)) {
            return ControlFlow::Continue(());
        }
        let Some(OrderBy {
            kind: OrderByKind::Expressions(keys),
            ..
        }) = &mut query.order_by
        else {
            return ControlFlow::Continue(());
        };
        for key in keys.iter_mut() {
            if matches!(key.expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
                continue;
            }
            let position = select.projection.iter().position(|item| match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    *e == key.expr
                }
                _ => false,
            });
            if let Some(i) = position {
                key.expr = Expr::Value(Value::Number((i + 1).to_string(), false).into());
            }
        }
        ControlFlow::Continue(())
    }
}

/// How many columns `body` outputs, when its select list says without planning.
fn output_width(body: &SetExpr) -> Option<usize> {
    match body {
        SetExpr::Select(select) => select
            .projection
            .iter()
            .all(|item| {
                matches!(
                    item,
                    SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. }
                )
            })
            .then_some(select.projection.len()),
        SetExpr::SetOperation { left, .. } => output_width(left),
        SetExpr::Query(query) => output_width(&query.body),
        _ => None,
    }
}

/// DuckDB names the column of `generate_series(…)` and `range(…)` after the function
/// (dbt's `generate_series` macro selects `generate_series`); DataFusion names it
/// `value`. A call without column aliases gets the function's name as its column's.
struct SeriesColumns;

impl VisitorMut for SeriesColumns {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        let TableFactor::Table {
            name,
            args: Some(_),
            alias,
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let Some(function) = ["generate_series", "range"]
            .into_iter()
            .find(|f| plain_name(name, f))
        else {
            return ControlFlow::Continue(());
        };
        let column = || TableAliasColumnDef {
            name: Ident::new(function),
            data_type: None,
        };
        match alias {
            None => {
                *alias = Some(TableAlias {
                    explicit: true,
                    name: Ident::new(function),
                    columns: vec![column()],
                    at: None,
                });
            }
            Some(a) if a.columns.is_empty() => a.columns.push(column()),
            Some(_) => {}
        }
        ControlFlow::Continue(())
    }
}

/// A number written with an exponent (`1e3`, `2.5E-4`) is a DOUBLE, as in DuckDB; the
/// session reads other numbers with a fraction as DECIMALs (`parse_float_as_decimal`),
/// which would make `1e3` a DECIMAL of negative scale, and Delta stores none.
fn exponent_literal(e: &mut Expr) {
    let Expr::Value(v) = e else {
        return;
    };
    let Value::Number(n, _) = &v.value else {
        return;
    };
    if !n.contains(['e', 'E']) {
        return;
    }
    *e = Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(Expr::Value(Value::SingleQuotedString(n.clone()).into())),
        data_type: DataType::Double(ExactNumberInfo::None),
        array: false,
        format: None,
    };
}

/// `LIKE`/`ILIKE` as DuckDB reads its pattern. Without `ESCAPE` a backslash is an
/// ordinary character in DuckDB and the escape in DataFusion (`'a\\b' LIKE 'a\\b'` was
/// false, `'a_b' LIKE 'a\\_b'` true): each backslash of the pattern is escaped, a literal
/// pattern's where it stands, any other through `replace`. With an escape character
/// other than `\\` and a literal pattern: the pattern escaped with `\\` instead, which is
/// all DataFusion takes ("LIKE does not support escape_char other than the backslash").
fn like_escape(e: &mut Expr) {
    let (Expr::Like {
        pattern,
        escape_char,
        ..
    }
    | Expr::ILike {
        pattern,
        escape_char,
        ..
    }) = e
    else {
        return;
    };
    let escape = match escape_char.as_ref().map(|v| &v.value) {
        None => None,
        Some(Value::SingleQuotedString(escape)) => {
            let mut chars = escape.chars();
            let (Some(escape), None) = (chars.next(), chars.next()) else {
                return;
            };
            if escape == '\\' {
                return;
            }
            Some(escape)
        }
        Some(_) => return,
    };
    let text = match pattern.as_mut() {
        Expr::Value(v) => match &mut v.value {
            Value::SingleQuotedString(text) => text,
            _ => return,
        },
        other if escape.is_none() => {
            let backslash = |s: &str| Expr::Value(Value::SingleQuotedString(s.to_string()).into());
            let written = std::mem::replace(other, Expr::Value(Value::Null.into()));
            *other = function_call("replace", vec![written, backslash("\\"), backslash("\\\\")]);
            return;
        }
        _ => return,
    };
    if escape.is_none() && !text.contains('\\') {
        return;
    }
    let mut rewritten = String::with_capacity(text.len() + 4);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if Some(c) == escape {
            // The escaped character, now escaped by a backslash.
            if let Some(next) = chars.next() {
                rewritten.push('\\');
                rewritten.push(next);
            }
        } else if c == '\\' {
            // A backslash is an ordinary character here.
            rewritten.push_str("\\\\");
        } else {
            rewritten.push(c);
        }
    }
    *text = rewritten;
    if escape.is_some() {
        *escape_char = Some(Value::SingleQuotedString("\\".to_string()).into());
    }
}

/// A field of a struct that is no column, `{'a': 1}.a` or `l[1].a`, as the field named
/// by text (`.'a'`), which DataFusion plans as `get_field` ("Dot access not supported for
/// non-string expr" for the name).
fn dot_fields(e: &mut Expr) {
    let Expr::CompoundFieldAccess { access_chain, .. } = e else {
        return;
    };
    for access in access_chain {
        if let AccessExpr::Dot(Expr::Identifier(field)) = access {
            *access = AccessExpr::Dot(Expr::Value(
                Value::SingleQuotedString(std::mem::take(&mut field.value)).into(),
            ));
        }
    }
}

/// DuckDB's `x[:b]` and `x[a:]` as `x[1:b]` and `x[a:-1]`: DataFusion wants both bounds
/// ("Slice subscript requires a lower bound"), and 1 and -1 are the first and the last.
fn open_slice(e: &mut Expr) {
    let Expr::CompoundFieldAccess { access_chain, .. } = e else {
        return;
    };
    for access in access_chain {
        if let AccessExpr::Subscript(Subscript::Slice {
            lower_bound,
            upper_bound,
            ..
        }) = access
        {
            let number = |n: &str| Expr::Value(Value::Number(n.to_string(), false).into());
            lower_bound.get_or_insert_with(|| number("1"));
            upper_bound.get_or_insert_with(|| number("-1"));
        }
    }
}

/// `a // b` (DuckDB's integer division; MySQL's `a DIV b` parses the same), which
/// DataFusion does not plan: see `sql/arithmetic.rs`.
fn integer_divide(e: &mut Expr) {
    let Expr::BinaryOp {
        op: BinaryOperator::DuckIntegerDivide | BinaryOperator::MyIntegerDivide,
        ..
    } = e
    else {
        return;
    };
    let null = || Expr::Value(Value::Null.into());
    if let Expr::BinaryOp { left, right, .. } = std::mem::replace(e, null()) {
        let divide = Expr::Nested(Box::new(Expr::BinaryOp {
            left,
            op: BinaryOperator::Divide,
            right,
        }));
        *e = function_call(super::arithmetic::INTEGER_DIVIDE, vec![divide]);
    }
}

/// `row_number()`, `rank()`, `dense_rank()` and `ntile(n)` over a window as the BIGINT
/// DuckDB answers (DataFusion's are unsigned: `row_number() OVER () - 1` was a UBIGINT,
/// `INTERVAL '1 day' * (row_number() OVER (…) - 1)`, dbt_utils' date spine, a DECIMAL
/// the interval could not be multiplied by, and a table made from one an unsigned column).
fn ranking_bigint(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    if f.over.is_none()
        || !["row_number", "rank", "dense_rank", "ntile"]
            .iter()
            .any(|n| plain_name(&f.name, n))
    {
        return;
    }
    let ranking = std::mem::replace(e, Expr::Value(Value::Null.into()));
    *e = Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(ranking),
        data_type: DataType::BigInt(None),
        array: false,
        format: None,
    };
}

/// DuckDB's `count_if(condition)`: `sum(CAST(condition AS INTEGER))`, as DuckDB counts
/// it (NULL when no row has a true or false condition; over a window too).
fn count_if(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    if !plain_name(&f.name, "count_if") {
        return;
    }
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(condition))] = list.args.as_mut_slice() else {
        return;
    };
    let when = std::mem::replace(condition, Expr::Value(Value::Null.into()));
    *condition = Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(when),
        data_type: DataType::Integer(None),
        array: false,
        format: None,
    };
    f.name = ObjectName::from(vec![Ident::new("sum")]);
}

/// DuckDB's `string_agg(x)` (also `group_concat`, `listagg`) without a separator: `,`.
fn string_agg_separator(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    if !["string_agg", "group_concat", "listagg"]
        .iter()
        .any(|n| plain_name(&f.name, n))
    {
        return;
    }
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    if let [FunctionArg::Unnamed(FunctionArgExpr::Expr(_))] = list.args.as_slice() {
        list.args
            .push(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(
                Value::SingleQuotedString(",".to_string()).into(),
            ))));
    }
}

/// DuckDB's `arg_max(arg, val)` (also `argmax`, `max_by`) and `arg_min`: the `arg` of the
/// row with the largest (smallest) `val`, among rows where neither is NULL, as
/// `first_value(arg ORDER BY val DESC) FILTER (WHERE arg IS NOT NULL AND val IS NOT NULL)`.
/// The aggregate only (not over a window), with two arguments.
fn arg_max(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    let direction = if ["arg_max", "argmax", "max_by"]
        .iter()
        .any(|n| plain_name(&f.name, n))
    {
        "DESC"
    } else if ["arg_min", "argmin", "min_by"]
        .iter()
        .any(|n| plain_name(&f.name, n))
    {
        "ASC"
    } else {
        return;
    };
    if f.over.is_some() || !f.within_group.is_empty() || f.null_treatment.is_some() {
        return;
    }
    let FunctionArguments::List(list) = &f.args else {
        return;
    };
    let (
        None,
        [
            FunctionArg::Unnamed(FunctionArgExpr::Expr(arg)),
            FunctionArg::Unnamed(FunctionArgExpr::Expr(val)),
        ],
    ) = (&list.duplicate_treatment, list.args.as_slice())
    else {
        return;
    };
    if !list.clauses.is_empty() {
        return;
    }
    let also = f
        .filter
        .as_ref()
        .map(|w| format!(" AND ({w})"))
        .unwrap_or_default();
    let sql = format!(
        "first_value(({arg}) ORDER BY ({val}) {direction}) \
         FILTER (WHERE ({arg}) IS NOT NULL AND ({val}) IS NOT NULL{also})"
    );
    if let Some(rewritten) = parse_expr(&sql) {
        *e = rewritten;
    }
}

/// `x AT TIME ZONE z` as DuckDB plans it, `timezone(z, x)` (`sql/time_zones.rs`).
fn at_time_zone(e: &mut Expr) {
    let Expr::AtTimeZone {
        timestamp,
        time_zone,
    } = e
    else {
        return;
    };
    let args = vec![time_zone.as_ref().clone(), timestamp.as_ref().clone()];
    *e = function_call(super::time_zones::TIMEZONE, args);
}

/// `list_aggr(list, 'string_agg', sep)` (dbt's `listagg` with a limit) as
/// `array_to_string(list, sep)`, which is the same; `list_aggr(list, 'sum')` (also
/// `list_aggregate`, `array_aggr`, `array_aggregate`) as `list_sum(list)`.
fn list_string_agg(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    let aliases = [
        "list_aggr",
        "list_aggregate",
        "array_aggr",
        "array_aggregate",
    ];
    if !aliases.iter().any(|name| plain_name(&f.name, name)) {
        return;
    }
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    let is_string_agg = |a: &FunctionArg| {
        matches!(
            a,
            FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))
                if matches!(&v.value, Value::SingleQuotedString(s) if s.eq_ignore_ascii_case("string_agg"))
        )
    };
    // `list_aggregate(l, 'sum')`: DuckDB's `list_sum(l)` (`sql/aggregates/lists.rs`).
    if list.args.len() == 2
        && let FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))) = &list.args[1]
        && let Value::SingleQuotedString(name) = &v.value
        && let Some(function) = super::aggregates::list_function(name)
    {
        list.args.truncate(1);
        f.name = ObjectName::from(vec![Ident::new(function)]);
        return;
    }
    if list.args.len() != 3 || !is_string_agg(&list.args[1]) {
        return;
    }
    list.args.remove(1);
    f.name = ObjectName::from(vec![Ident::new("array_to_string")]);
}

/// `n * INTERVAL '…'` or `INTERVAL '…' * n` (dbt's `dateadd`), which DataFusion does not
/// type, and `INTERVAL '…' / n`: see `sql/temporal.rs`.
fn interval_times(e: &mut Expr) {
    let Expr::BinaryOp { left, op, right } = e else {
        return;
    };
    let is_interval = |e: &Expr| matches!(unnested(e), Expr::Interval(_));
    let (interval, n) = match (op, is_interval(left), is_interval(right)) {
        (BinaryOperator::Multiply, true, false) => (left.as_ref().clone(), right.as_ref().clone()),
        (BinaryOperator::Multiply, false, true) => (right.as_ref().clone(), left.as_ref().clone()),
        // `interval / n`: times `1.0 / n`, a DOUBLE (`sql/arithmetic.rs`).
        (BinaryOperator::Divide, true, false) => (
            left.as_ref().clone(),
            Expr::BinaryOp {
                left: Box::new(Expr::Value(Value::Number("1.0".into(), false).into())),
                op: BinaryOperator::Divide,
                right: Box::new(Expr::Nested(right.clone())),
            },
        ),
        _ => return,
    };
    *e = function_call(super::temporal::INTERVAL_TIMES, vec![interval, n]);
}

/// `a IS [NOT] DISTINCT FROM (b AND|OR …)` as parsed without parentheses, rotated into
/// `(a IS [NOT] DISTINCT FROM b) AND|OR …`: `b` is the leftmost operand of the
/// unparenthesised `AND`/`OR` chain (written parentheses are `Expr::Nested`, left alone).
fn distinct_from_precedence(e: &mut Expr) {
    let null = || Expr::Value(Value::Null.into());
    let (Expr::IsDistinctFrom(_, right) | Expr::IsNotDistinctFrom(_, right)) = e else {
        return;
    };
    if !is_and_or(right) {
        return;
    }
    let mut chain = std::mem::replace(right.as_mut(), null());
    let mut leaf = &mut chain;
    while is_and_or(leaf) {
        let Expr::BinaryOp { left, .. } = leaf else {
            break;
        };
        leaf = left.as_mut();
    }
    // The chain's leftmost operand becomes the comparison's, the comparison the leaf.
    **right = std::mem::replace(leaf, null());
    *leaf = Expr::Nested(Box::new(std::mem::replace(e, null())));
    *e = chain;
}

/// DuckDB functions that DataFusion has under another name (ibis' DuckDB compiler
/// writes them): renamed, or `date_part` with the field DuckDB's name stands for.
fn duckdb_function(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    let [name] = f.name.0.as_slice() else {
        return;
    };
    let Some(ident) = name.as_ident() else {
        return;
    };
    if ident.quote_style.is_some() {
        return;
    }
    if ident.value.eq_ignore_ascii_case("struct_pack") {
        return struct_pack(f);
    }
    let (renamed, field) = match ident.value.to_ascii_lowercase().as_str() {
        "strftime" => ("to_char", None),
        "regexp_matches" => ("regexp_like", None),
        "approx_count_distinct" => ("approx_distinct", None),
        "dayofweek" => ("date_part", Some("dow")),
        "dayofyear" => ("date_part", Some("doy")),
        "epoch" => ("date_part", Some("epoch")),
        // DuckDB's date part functions (`year(ts)` is `date_part('year', ts)`).
        "year" => ("date_part", Some("year")),
        "quarter" => ("date_part", Some("quarter")),
        "month" => ("date_part", Some("month")),
        "week" | "weekofyear" => ("date_part", Some("week")),
        "day" | "dayofmonth" => ("date_part", Some("day")),
        "hour" => ("date_part", Some("hour")),
        "minute" => ("date_part", Some("minute")),
        "second" => ("date_part", Some("second")),
        "millisecond" => ("date_part", Some("millisecond")),
        "microsecond" => ("date_part", Some("microsecond")),
        // dbt-duckdb's split_part and any_value macros.
        "string_split" | "str_split" => ("string_to_array", None),
        "arbitrary" => ("any_value", None),
        "list_value" | "list_pack" => ("make_array", None),
        "gen_random_uuid" => ("uuid", None),
        "isodow" => ("date_part", Some("isodow")),
        "isoyear" => ("date_part", Some("isoyear")),
        "weekday" => ("date_part", Some("dow")),
        // DuckDB's sums and averages of DOUBLEs in Kahan's way; DataFusion's are plain.
        "fsum" | "sumkahan" | "kahan_sum" => ("sum", None),
        "favg" => ("avg", None),
        "struct_extract" => ("get_field", None),
        "strlen" => ("octet_length", None),
        "lcase" => ("lower", None),
        "ucase" => ("upper", None),
        "prefix" => ("starts_with", None),
        "suffix" => ("ends_with", None),
        // DataFusion's `ascii` is the first character's code point, as DuckDB's `unicode`.
        "unicode" | "ord" => ("ascii", None),
        "list_min" => ("array_min", None),
        "ceiling" => ("ceil", None),
        // DuckDB's `length` of a list is its items (`len`, `sql/type_dispatch.rs`).
        "length" => ("len", None),
        // Other names of `COMPOSITES`.
        "base64" => ("to_base64", None),
        "array_unique" => ("list_unique", None),
        _ => return,
    };
    if renamed == "to_char"
        && let FunctionArguments::List(list) = &mut f.args
        && let [
            _,
            FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))),
        ] = list.args.as_mut_slice()
        && let Value::SingleQuotedString(format) = &mut v.value
    {
        // DuckDB's specifiers as chrono writes them (`%f` is microseconds).
        *format = super::temporal::chrono_format(format, false);
    }
    if let Some(field) = field {
        let FunctionArguments::List(list) = &mut f.args else {
            return;
        };
        if list.args.len() != 1 {
            return;
        }
        list.args.insert(
            0,
            FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(
                Value::SingleQuotedString(field.to_string()).into(),
            ))),
        );
    }
    f.name = ObjectName::from(vec![Ident::new(renamed)]);
}

/// DuckDB's `struct_pack(a := 1, b := x)` as DataFusion's `named_struct('a', 1, 'b', x)`;
/// left as written (DataFusion's error) unless every argument is named.
fn struct_pack(f: &mut Function) {
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    let mut args = Vec::with_capacity(list.args.len() * 2);
    for arg in &list.args {
        let FunctionArg::Named {
            name,
            arg: FunctionArgExpr::Expr(value),
            ..
        } = arg
        else {
            return;
        };
        args.push(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(
            Value::SingleQuotedString(name.value.clone()).into(),
        ))));
        args.push(FunctionArg::Unnamed(FunctionArgExpr::Expr(value.clone())));
    }
    list.args = args;
    f.name = ObjectName::from(vec![Ident::new("named_struct")]);
}

/// DuckDB functions DataFusion lacks that are other functions' compositions, as
/// `(name, template, arity)`: `__a0`, `__a1` stand for the arguments.
const COMPOSITES: &[(&str, &str, usize)] = &[
    (
        "last_day",
        "CAST(date_trunc('month', __a0) + INTERVAL '1 month' - INTERVAL '1 day' AS DATE)",
        1,
    ),
    ("dayname", "to_char(__a0, '%A')", 1),
    ("monthname", "to_char(__a0, '%B')", 1),
    // DuckDB's buckets of less than a month start at 2000-01-03, a Monday.
    (
        "time_bucket",
        "date_bin(__a0, __a1, TIMESTAMP '2000-01-03 00:00:00')",
        2,
    ),
    ("pg_typeof", "lower(typeof(__a0))", 1),
    // DuckDB's age of one time: from it to today's midnight.
    ("age", "age(CAST(current_date AS TIMESTAMP), __a0)", 1),
    ("sign", "CAST(signum(__a0) AS TINYINT)", 1),
    // DuckDB's base64 is padded.
    ("to_base64", "encode(CAST(__a0 AS BLOB), 'base64pad')", 1),
    // Distinct values of a list, NULL not counted.
    (
        "list_unique",
        "CAST(len(list_compact(array_distinct(__a0))) AS BIGINT UNSIGNED)",
        1,
    ),
    // Rounded away from zero to the next even integer, as a DOUBLE.
    (
        "even",
        "(CASE WHEN CAST(__a0 AS DOUBLE) < 0 THEN floor(CAST(__a0 AS DOUBLE) / 2) ELSE ceil(CAST(__a0 AS DOUBLE) / 2) END * 2)",
        1,
    ),
    ("date_add", "(__a0 + __a1)", 2),
    (
        "isinf",
        "(abs(CAST(__a0 AS DOUBLE)) = CAST('inf' AS DOUBLE))",
        1,
    ),
    (
        "list_reverse_sort",
        "array_sort(__a0, 'DESC', 'NULLS LAST')",
        1,
    ),
    ("mod", "(__a0 % __a1)", 2),
    // DuckDB's `date(x)`: the cast (dbt's snapshot suites write `date('2099-12-31')`).
    ("date", "CAST(__a0 AS DATE)", 1),
    (
        "regexp_full_match",
        "regexp_like(__a0, concat('^(?:', __a1, ')$'))",
        2,
    ),
    (
        "yearweek",
        "CAST(date_part('isoyear', __a0) * 100 + date_part('week', __a0) AS BIGINT)",
        1,
    ),
    // DuckDB's one-argument forms: text as its UTF-8 bytes and back.
    ("encode", "CAST(__a0 AS BLOB)", 1),
    ("decode", "CAST(__a0 AS VARCHAR)", 1),
    // DuckDB writes hex digits in capitals.
    ("to_hex", "upper(to_hex(__a0))", 1),
    // Parsed as an exclusive or, and not revisited by `sql/power.rs`.
    ("xor", "(__a0 ^ __a1)", 2),
    (
        "century",
        "CAST(floor((date_part('year', __a0) - 1) / 100) + 1 AS BIGINT)",
        1,
    ),
    (
        "decade",
        "CAST(floor(date_part('year', __a0) / 10) AS BIGINT)",
        1,
    ),
    (
        "to_years",
        "__deltalite_interval_times(INTERVAL '1 year', __a0)",
        1,
    ),
    (
        "to_months",
        "__deltalite_interval_times(INTERVAL '1 month', __a0)",
        1,
    ),
    (
        "to_weeks",
        "__deltalite_interval_times(INTERVAL '7 days', __a0)",
        1,
    ),
    (
        "to_days",
        "__deltalite_interval_times(INTERVAL '1 day', __a0)",
        1,
    ),
    (
        "to_hours",
        "__deltalite_interval_times(INTERVAL '1 hour', __a0)",
        1,
    ),
    (
        "to_minutes",
        "__deltalite_interval_times(INTERVAL '1 minute', __a0)",
        1,
    ),
    (
        "to_seconds",
        "__deltalite_interval_times(INTERVAL '1 second', __a0)",
        1,
    ),
];

/// The functions of [`COMPOSITES`], called with their arity (plain arguments only).
fn duckdb_composite(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    let Some((_, template, arity)) = COMPOSITES.iter().find(|(n, ..)| plain_name(&f.name, n))
    else {
        return;
    };
    if f.over.is_some() || f.filter.is_some() {
        return;
    }
    let FunctionArguments::List(list) = &f.args else {
        return;
    };
    if list.args.len() != *arity || list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
        return;
    }
    let mut args = Vec::with_capacity(*arity);
    for a in &list.args {
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(a)) = a else {
            return;
        };
        args.push(a.clone());
    }
    let Some(mut composed) = parse_expr(template) else {
        return;
    };
    let _ = replace_names(&mut composed, |ident| {
        let arg = ident
            .value
            .strip_prefix("__a")
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(|i| args.get(i).cloned());
        ControlFlow::Continue(arg)
    });
    *e = composed;
}

/// `count(DISTINCT row(a, …))` (also a tuple `(a, …)`), which dlt sends to
/// check merge keys: counted over `__deltalite_row_key(a, …)`, the same tuples as bytes
/// (see `sql/udf.rs::row_key_udf` for why).
fn count_distinct_row(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    if !plain_name(&f.name, "count") {
        return;
    }
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    if list.duplicate_treatment != Some(DuplicateTreatment::Distinct) {
        return;
    }
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))] = list.args.as_mut_slice() else {
        return;
    };
    let fields = match arg {
        Expr::Function(row) if plain_name(&row.name, "row") => {
            let FunctionArguments::List(inner) = &row.args else {
                return;
            };
            if inner.duplicate_treatment.is_some() || !inner.clauses.is_empty() {
                return;
            }
            let mut fields = Vec::with_capacity(inner.args.len());
            for a in &inner.args {
                let FunctionArg::Unnamed(FunctionArgExpr::Expr(field)) = a else {
                    return;
                };
                fields.push(field.clone());
            }
            fields
        }
        Expr::Tuple(items) => items.clone(),
        _ => return,
    };
    *arg = function_call(super::udf::ROW_KEY, fields);
}

/// Whether `name` is the one unquoted identifier `want` (any case).
fn plain_name(name: &ObjectName, want: &str) -> bool {
    match name.0.as_slice() {
        [part] => part
            .as_ident()
            .is_some_and(|i| i.quote_style.is_none() && i.value.eq_ignore_ascii_case(want)),
        _ => false,
    }
}

fn is_and_or(e: &Expr) -> bool {
    matches!(
        e,
        Expr::BinaryOp {
            op: BinaryOperator::And | BinaryOperator::Or,
            ..
        }
    )
}

struct Subqueries;

impl VisitorMut for Subqueries {
    type Break = ();

    fn pre_visit_statement(&mut self, statement: &mut Statement) -> ControlFlow<()> {
        match statement {
            Statement::Delete(delete) => {
                if let Some(e) = delete.selection.as_mut() {
                    truth(e);
                }
            }
            Statement::Update(update) => {
                if let Some(e) = update.selection.as_mut() {
                    truth(e);
                }
                for assignment in update.assignments.iter_mut() {
                    valued(&mut assignment.value);
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        rewrite_body(query.body.as_mut());
        ControlFlow::Continue(())
    }
}

/// Rewrite a query body's select lists and filters, through set operations.
fn rewrite_body(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            for item in select.projection.iter_mut() {
                if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item
                {
                    valued(e);
                }
            }
            name_repeated_columns(&mut select.projection);
            if let Some(e) = select.selection.as_mut() {
                truth(e);
            }
            if let Some(e) = select.having.as_mut() {
                truth(e);
            }
            for from in select.from.iter_mut() {
                for join in from.joins.iter_mut() {
                    if let Some(JoinConstraint::On(e)) = join_constraint(&mut join.join_operator) {
                        truth(e);
                    }
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_body(left);
            rewrite_body(right);
        }
        SetExpr::Query(q) => rewrite_body(q.body.as_mut()),
        _ => {}
    }
}

/// A column named a second time in one select list (`SELECT DISTINCT state, state`, what
/// dbt writes for a unique key listed twice) gets DuckDB's name for the copy, `state_1`:
/// DataFusion refuses two outputs of one name ("Projections require unique expression
/// names").
fn name_repeated_columns(projection: &mut [SelectItem]) {
    let mut seen: Vec<String> = Vec::new();
    for item in projection.iter_mut() {
        let name = match &*item {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias),
            SelectItem::UnnamedExpr(Expr::Identifier(ident)) => Some(ident),
            SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts.last(),
            _ => None,
        };
        let Some(key) = name.map(|ident| match ident.quote_style {
            Some(_) => ident.value.clone(),
            None => ident.value.to_lowercase(),
        }) else {
            continue;
        };
        if !seen.contains(&key) {
            seen.push(key);
            continue;
        }
        let SelectItem::UnnamedExpr(e) = item else {
            continue;
        };
        let copy = (1..)
            .map(|n| format!("{key}_{n}"))
            .find(|c| !seen.contains(c))
            .unwrap_or_default();
        seen.push(copy.clone());
        let expr = std::mem::replace(e, Expr::Value(Value::Null.into()));
        *item = SelectItem::ExprWithAlias {
            expr,
            alias: Ident::with_quote('"', copy),
        };
    }
}

fn join_constraint(op: &mut JoinOperator) -> Option<&mut JoinConstraint> {
    match op {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::Semi(c)
        | JoinOperator::LeftSemi(c)
        | JoinOperator::RightSemi(c)
        | JoinOperator::Anti(c)
        | JoinOperator::LeftAnti(c)
        | JoinOperator::RightAnti(c) => Some(c),
        _ => None,
    }
}

/// A filter: only whether it is TRUE matters, through `AND`/`OR`, parentheses and
/// `IS [NOT] TRUE`, where DataFusion plans `[NOT] IN`/`EXISTS` subqueries as semi and
/// anti joins (the write paths turn the forms it gets wrong there into `EXISTS` first).
/// Anywhere else below, a NULL differs from FALSE: see [`valued`].
fn truth(e: &mut Expr) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And | BinaryOperator::Or,
            right,
        } => {
            truth(left);
            truth(right);
        }
        Expr::Nested(inner) | Expr::IsTrue(inner) | Expr::IsNotTrue(inner) => truth(inner),
        e if semi_join(e) => {}
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } if semi_join(unnested(expr)) => {}
        other => valued(other),
    }
}

/// A subquery test DataFusion plans as a semi or anti join (not a row value: it plans
/// none of those).
fn semi_join(e: &Expr) -> bool {
    match e {
        Expr::InSubquery { expr, .. } => !matches!(expr.as_ref(), Expr::Tuple(_)),
        Expr::Exists { .. } => true,
        _ => false,
    }
}

fn unnested(mut e: &Expr) -> &Expr {
    while let Expr::Nested(inner) = e {
        e = inner;
    }
    e
}

/// An expression whose value is used, NULL included: `[NOT] IN` and `[NOT] EXISTS`
/// subqueries in it become scalar counts with the same three-valued result.
fn valued(e: &mut Expr) {
    let _ = visit_expressions_mut(e, |e| {
        let replacement = match e {
            Expr::Exists { subquery, negated } => counted(subquery, *negated),
            Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => in_counted(expr, subquery, *negated),
            _ => None,
        };
        if let Some(r) = replacement {
            *e = r;
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `x [NOT] IN (subquery)` as scalar counts with the same three-valued result: TRUE on a
/// match; else NULL when some row compares NULL (every item equal or NULL-involved);
/// else FALSE. Row values `(a, b) IN (…)` the same, item by item.
///
/// The NULL test is written as a disjunction of subqueries whose only correlation is
/// item equality (each item is equal, NULL in the row, or NULL outside), which DataFusion
/// decorrelates into joins; a correlated `(c = a) IS NULL` it fails to plan. Rows of more
/// than [`MAX_ROW_ITEMS`] items are left as they are (3^n subqueries).
fn in_counted(expr: &Expr, subquery: &Query, negated: bool) -> Option<Expr> {
    let items: Vec<&Expr> = match expr {
        Expr::Tuple(items) => items.iter().collect(),
        one => vec![one],
    };
    if items.is_empty() || items.len() > MAX_ROW_ITEMS {
        return None;
    }
    let names: Vec<String> = (1..=items.len()).map(|i| format!("c{i}")).collect();
    let from = format!("FROM ({subquery}) AS __deltalite_in({})", names.join(", "));
    let count = |conditions: &[String]| {
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        format!("(SELECT count(*) {from}{filter}) > 0")
    };
    let equal = |i: usize| format!("__deltalite_in.{} = ({})", names[i], items[i]);
    let matched = count(&(0..items.len()).map(equal).collect::<Vec<_>>());
    let mut null_tests = Vec::new();
    // Each item: 0 equal, 1 NULL in the subquery's row, 2 NULL outside.
    for combo in 1..3usize.pow(items.len() as u32) {
        let (mut inner, mut outer) = (Vec::new(), Vec::new());
        let mut rest = combo;
        for i in 0..items.len() {
            match rest % 3 {
                0 => inner.push(equal(i)),
                1 => inner.push(format!("__deltalite_in.{} IS NULL", names[i])),
                _ => outer.push(format!("({}) IS NULL", items[i])),
            }
            rest /= 3;
        }
        outer.push(count(&inner));
        null_tests.push(format!("({})", outer.join(" AND ")));
    }
    let sql = format!(
        "(CASE WHEN {matched} THEN TRUE WHEN {} THEN NULL ELSE FALSE END)",
        null_tests.join(" OR ")
    );
    let sql = if negated { format!("(NOT {sql})") } else { sql };
    parse_expr(&sql)
}

/// The widest row value [`in_counted`] rewrites.
const MAX_ROW_ITEMS: usize = 4;

/// `EXISTS (subquery)` (`NOT EXISTS` when `negated`) as a scalar count subquery.
fn counted(subquery: &Query, negated: bool) -> Option<Expr> {
    let test = if negated { "= 0" } else { "> 0" };
    let plain = match subquery.body.as_ref() {
        SetExpr::Select(s) => {
            subquery.with.is_none()
                && subquery.order_by.is_none()
                && subquery.limit_clause.is_none()
                && s.distinct.is_none()
                && s.having.is_none()
                && s.qualify.is_none()
                && matches!(&s.group_by, datafusion::sql::sqlparser::ast::GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty())
        }
        _ => false,
    };
    let sql = if plain {
        let mut q = subquery.clone();
        if let SetExpr::Select(s) = q.body.as_mut() {
            s.projection = vec![SelectItem::UnnamedExpr(parse_expr(&format!(
                "count(*) {test}"
            ))?)];
        }
        format!("({q})")
    } else {
        format!("(SELECT count(*) {test} FROM ({subquery}) AS __deltalite_exists)")
    };
    parse_expr(&sql)
}

/// `name(args…)`, a plain call.
pub(super) fn function_call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

fn parse_expr(sql: &str) -> Option<Expr> {
    Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .ok()?
        .parse_expr()
        .ok()
}

/// Each unqualified name in `e` outside its subqueries (whose names may be their own
/// columns) and that no lambda around it takes as a parameter, replaced by what
/// `replace` answers for it (`None`: kept); `Break` stops.
pub(super) fn replace_names(
    e: &mut Expr,
    replace: impl FnMut(&Ident) -> ControlFlow<(), Option<Expr>>,
) -> ControlFlow<()> {
    struct Names<F> {
        replace: F,
        depth: usize,
        /// The parameters of the lambdas around the expression visited: a name among
        /// them is the parameter, not a column.
        parameters: Vec<String>,
    }
    fn parameters(lambda: &LambdaFunction) -> Vec<String> {
        match &lambda.params {
            OneOrManyWithParens::One(p) => vec![p.name.value.to_lowercase()],
            OneOrManyWithParens::Many(ps) => {
                ps.iter().map(|p| p.name.value.to_lowercase()).collect()
            }
        }
    }
    impl<F: FnMut(&Ident) -> ControlFlow<(), Option<Expr>>> VisitorMut for Names<F> {
        type Break = ();
        fn pre_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if let Expr::Lambda(lambda) = e {
                self.parameters.extend(parameters(lambda));
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            match e {
                Expr::Lambda(lambda) => {
                    let count = parameters(lambda).len();
                    self.parameters
                        .truncate(self.parameters.len().saturating_sub(count));
                }
                Expr::Identifier(ident)
                    if self.depth == 0
                        && !self.parameters.contains(&ident.value.to_lowercase()) =>
                {
                    if let Some(replacement) = (self.replace)(ident)? {
                        *e = replacement;
                    }
                }
                _ => {}
            }
            ControlFlow::Continue(())
        }
    }
    e.visit(&mut Names {
        replace,
        depth: 0,
        parameters: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn normalized(sql: &str) -> String {
        let mut statements = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
        super::statement(&mut statements[0]);
        statements[0].to_string()
    }

    #[test]
    fn count_distinct_of_a_row_counts_its_bytes() {
        assert_eq!(
            normalized(r#"SELECT count(DISTINCT row("id", b)) AS k FROM t"#),
            r#"SELECT count(DISTINCT __deltalite_row_key("id", b)) AS k FROM t"#
        );
        assert_eq!(
            normalized("SELECT count(DISTINCT (a, b)), count(DISTINCT ROW(a)) FROM t"),
            "SELECT count(DISTINCT __deltalite_row_key(a, b)), \
             count(DISTINCT __deltalite_row_key(a)) FROM t"
        );
        let kept = r#"SELECT count(row(a)), count(DISTINCT a), count(DISTINCT "row"(a)) FROM t"#;
        assert_eq!(normalized(kept), kept);
    }

    #[test]
    fn integer_literal_items_are_integers() {
        assert_eq!(
            normalized(
                "SELECT 1 AS a, -2, 2147483648, -2147483648, 1 + 1, 1.5, x FROM t \
                 UNION ALL SELECT 3, (SELECT 4), 5, 6, 7, 8, 9"
            ),
            "SELECT CAST(1 AS INTEGER) AS a, CAST(-2 AS INTEGER), 2147483648, -2147483648, \
             1 + 1, 1.5, x FROM t UNION ALL SELECT CAST(3 AS INTEGER), (SELECT CAST(4 AS INTEGER)), \
             CAST(5 AS INTEGER), CAST(6 AS INTEGER), CAST(7 AS INTEGER), CAST(8 AS INTEGER), \
             CAST(9 AS INTEGER)"
        );
    }

    #[test]
    fn exists_in_a_select_list_becomes_a_count() {
        assert_eq!(
            normalized(
                "SELECT CASE WHEN EXISTS (SELECT 1 FROM l WHERE id = 'x' AND status = 0) \
                 THEN error('done') ELSE true END"
            ),
            "SELECT CASE WHEN (SELECT count(*) > 0 FROM l WHERE id = 'x' AND status = 0) \
             THEN error('done') ELSE true END"
        );
        assert_eq!(
            normalized("SELECT NOT EXISTS (SELECT 1 UNION ALL SELECT 2) AS e"),
            "SELECT (SELECT count(*) = 0 FROM (SELECT CAST(1 AS INTEGER) UNION ALL SELECT CAST(2 AS INTEGER)) AS __deltalite_exists) AS e"
        );
        // Filters keep EXISTS: DataFusion plans it there.
        let filter = "SELECT a FROM t WHERE EXISTS (SELECT x FROM u WHERE u.k = t.k)";
        assert_eq!(normalized(filter), filter);
    }

    #[test]
    fn duckdb_function_names() {
        assert_eq!(
            normalized("SELECT (DAYOFWEEK(d) + 6) % 7, strftime(ts, '%Y'), epoch(ts) FROM t"),
            "SELECT (date_part('dow', d) + 6) % 7, to_char(ts, '%Y'), date_part('epoch', ts) FROM t"
        );
        let quoted = "SELECT \"dayofweek\"(d) FROM t";
        assert_eq!(normalized(quoted), quoted);
    }

    #[test]
    fn is_distinct_from_binds_tighter_than_and_or() {
        assert_eq!(
            normalized("DELETE FROM t WHERE s IS NOT DISTINCT FROM 'a' AND k = 1"),
            "DELETE FROM t WHERE (s IS NOT DISTINCT FROM 'a') AND k = 1"
        );
        assert_eq!(
            normalized("SELECT a IS DISTINCT FROM b AND c OR d IS NOT DISTINCT FROM e OR f"),
            "SELECT (a IS DISTINCT FROM b) AND c OR (d IS NOT DISTINCT FROM e) OR f"
        );
        // Written parentheses and comparisons keep their meaning.
        let kept = "SELECT a IS DISTINCT FROM (b AND c), a IS NOT DISTINCT FROM b = c";
        assert_eq!(normalized(kept), kept);
    }
}

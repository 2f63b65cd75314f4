//! The names of unaliased select items, as DuckDB gives them: its printing of the
//! expression as written (`(k + 1)`, `count_star()`, `CAST(v AS INTEGER)`, `"mode"(v)`,
//! `CASE  WHEN ((k > 1)) THEN ('y') ELSE NULL END`). DataFusion names an item after its
//! planned form (`t.k + Int64(1)`, `Utf8("a")`), which clients show as column headers and
//! `CREATE TABLE … AS` keeps as column names, and it names a cast after its operand, so
//! `CAST(k AS VARCHAR), k::BIGINT` collided ("Projections require unique expression
//! names").
//!
//! Each select of a statement (subqueries and set operations too) has every unaliased
//! item that is not a column reference, a wildcard, an `unnest` or a `COLUMNS(…)` (each
//! of which can stand for several columns) given its DuckDB name as an alias, before any other rewrite changes
//! the item. A name already taken in the list gets DuckDB's `_1`, `_2`, ….
//!
//! Forms this module does not know are named by sqlparser's printing of them, which is
//! the text as written, normalized.

mod keywords;

use std::collections::HashMap;
use std::fmt::Write;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    AccessExpr, BinaryOperator, CastKind, CeilFloorKind, DataType, DateTimeField, Distinct,
    DuplicateTreatment, ExactNumberInfo, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentClause, FunctionArguments, GroupByExpr, Ident, LimitClause, NamedWindowExpr,
    OneOrManyWithParens, OrderBy, OrderByExpr, OrderByKind, Query, SelectItem, SetExpr, Statement,
    Subscript, TableFactor, TableWithJoins, TimezoneInfo, TrimWhereField, UnaryOperator, Value,
    VisitMut, VisitorMut, WindowFrame, WindowFrameBound, WindowFrameUnits, WindowSpec, WindowType,
    visit_expressions,
};

/// Name every unaliased item of every select in `statement`.
pub(super) fn name_items(statement: &mut Statement) {
    let _ = statement.visit(&mut Items);
}

/// An expression's name as DuckDB prints it.
pub(super) fn duckdb_name(e: &Expr) -> String {
    Printer::default().expr(e)
}

struct Items;

impl VisitorMut for Items {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        name_body(query.body.as_mut());
        ControlFlow::Continue(())
    }
}

fn name_body(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            let printer = Printer {
                windows: select
                    .named_window
                    .iter()
                    .filter_map(|w| match &w.1 {
                        NamedWindowExpr::WindowSpec(spec) => {
                            Some((w.0.value.to_lowercase(), spec.clone()))
                        }
                        NamedWindowExpr::NamedWindow(_) => None,
                    })
                    .collect(),
            };
            name_projection(&mut select.projection, &printer);
        }
        SetExpr::SetOperation { left, right, .. } => {
            name_body(left);
            name_body(right);
        }
        _ => {}
    }
}

fn name_projection(projection: &mut [SelectItem], printer: &Printer) {
    let mut taken: Vec<String> = Vec::new();
    for item in projection.iter_mut() {
        let e = match &*item {
            SelectItem::ExprWithAlias { alias, .. } => {
                taken.push(output_name(alias));
                continue;
            }
            SelectItem::UnnamedExpr(Expr::Identifier(ident)) => {
                taken.push(output_name(ident));
                continue;
            }
            SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                taken.extend(parts.last().map(output_name));
                continue;
            }
            // `COLUMNS(…)` items are named when written out (`sql/star_columns.rs`).
            SelectItem::UnnamedExpr(e) if !is_unnest(e) && !holds_star_columns(e) => e,
            _ => continue,
        };
        let name = printer.expr(e);
        let name = if taken.contains(&name) {
            (1..)
                .map(|n| format!("{name}_{n}"))
                .find(|c| !taken.contains(c))
                .unwrap_or_default()
        } else {
            name
        };
        taken.push(name.clone());
        let SelectItem::UnnamedExpr(e) = item else {
            continue;
        };
        let expr = std::mem::replace(e, Expr::Value(Value::Null.into()));
        *item = SelectItem::ExprWithAlias {
            expr,
            alias: Ident::with_quote('"', name),
        };
    }
}

/// Whether `e` holds a `COLUMNS(…)` call (`sql/star_columns.rs`).
pub(in crate::sql) fn holds_star_columns(e: &Expr) -> bool {
    visit_expressions(e, |e| match e {
        Expr::Function(f) if is_columns(f) => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

pub(in crate::sql) fn is_columns(f: &Function) -> bool {
    matches!(f.name.0.as_slice(), [part] if part
        .as_ident()
        .is_some_and(|i| i.quote_style.is_none() && i.value.eq_ignore_ascii_case("columns")))
}

/// The output name an identifier gives, as DataFusion folds it.
fn output_name(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

fn is_unnest(e: &Expr) -> bool {
    match e {
        Expr::Function(f) => f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .is_some_and(|i| i.value.eq_ignore_ascii_case("unnest")),
        Expr::Nested(inner) => is_unnest(inner),
        _ => false,
    }
}

/// Prints expressions as DuckDB's `ParsedExpression::ToString` does.
#[derive(Default)]
struct Printer {
    /// The select's `WINDOW` definitions by lower-case name: DuckDB prints them inline.
    windows: HashMap<String, WindowSpec>,
}

impl Printer {
    /// `[NOT] [I]LIKE` as DuckDB prints it: `(s ~~ p)`, `(s !~~* p)`, or with an escape
    /// character its function `like_escape(s, p, '!')`.
    fn like(
        &self,
        function: &str,
        operator: &str,
        negated: bool,
        expr: &Expr,
        pattern: &Expr,
        escape: Option<&datafusion::sql::sqlparser::ast::ValueWithSpan>,
    ) -> String {
        match escape {
            Some(c) => negate(
                negated,
                format!(
                    "{function}({}, {}, {})",
                    self.expr(expr),
                    self.expr(pattern),
                    value(c).unwrap_or_else(|| c.to_string())
                ),
            ),
            None => format!(
                "({} {}{operator} {})",
                self.expr(expr),
                if negated { "!" } else { "" },
                self.expr(pattern)
            ),
        }
    }

    fn expr(&self, e: &Expr) -> String {
        match e {
            Expr::Identifier(ident) => identifier(ident),
            Expr::CompoundIdentifier(parts) => {
                parts.iter().map(identifier).collect::<Vec<_>>().join(".")
            }
            Expr::Value(v) => value(&v.value).unwrap_or_else(|| e.to_string()),
            Expr::Nested(inner) => self.expr(inner),
            Expr::Lambda(lambda) => {
                let params = match &lambda.params {
                    OneOrManyWithParens::One(p) => vec![p],
                    OneOrManyWithParens::Many(ps) => ps.iter().collect(),
                };
                let params: Vec<String> = params.iter().map(|p| identifier(&p.name)).collect();
                format!(
                    "(lambda {}: {})",
                    params.join(", "),
                    self.expr(&lambda.body)
                )
            }
            Expr::BinaryOp { left, op, right } => self.binary(e, left, op, right),
            Expr::UnaryOp { op, expr } => match (op, unnested(expr)) {
                (UnaryOperator::Minus, Expr::Value(v)) if matches!(v.value, Value::Number(..)) => {
                    format!("-{}", self.expr(expr))
                }
                (UnaryOperator::Minus, _) => format!("(-({}))", self.expr(expr)),
                (UnaryOperator::Plus, _) => format!("(+({}))", self.expr(expr)),
                (UnaryOperator::BitwiseNot, _) => format!("(~({}))", self.expr(expr)),
                (UnaryOperator::Not, _) => format!("(NOT {})", self.expr(expr)),
                _ => e.to_string(),
            },
            // DuckDB reads `IS [NOT] UNKNOWN` as `IS [NOT] NULL`.
            Expr::IsNull(x) | Expr::IsUnknown(x) => format!("({} IS NULL)", self.expr(x)),
            Expr::IsNotNull(x) | Expr::IsNotUnknown(x) => {
                format!("({} IS NOT NULL)", self.expr(x))
            }
            Expr::IsTrue(x) => self.is_bool(x, "IS NOT DISTINCT FROM true"),
            Expr::IsNotTrue(x) => self.is_bool(x, "IS DISTINCT FROM true"),
            Expr::IsFalse(x) => self.is_bool(x, "IS NOT DISTINCT FROM false"),
            Expr::IsNotFalse(x) => self.is_bool(x, "IS DISTINCT FROM false"),
            Expr::IsDistinctFrom(a, b) => {
                format!("({} IS DISTINCT FROM {})", self.expr(a), self.expr(b))
            }
            Expr::IsNotDistinctFrom(a, b) => {
                format!("({} IS NOT DISTINCT FROM {})", self.expr(a), self.expr(b))
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => negate(
                *negated,
                format!("({} IN ({}))", self.expr(expr), self.list(list)),
            ),
            Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => negate(
                *negated,
                format!("({} = ANY({}))", self.expr(expr), query(subquery)),
            ),
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => negate(
                *negated,
                format!(
                    "({} BETWEEN {} AND {})",
                    self.expr(expr),
                    self.expr(low),
                    self.expr(high)
                ),
            ),
            Expr::Like {
                negated,
                any: false,
                expr,
                pattern,
                escape_char,
            } => self.like(
                "like_escape",
                "~~",
                *negated,
                expr,
                pattern,
                escape_char.as_ref(),
            ),
            Expr::ILike {
                negated,
                any: false,
                expr,
                pattern,
                escape_char,
            } => self.like(
                "ilike_escape",
                "~~*",
                *negated,
                expr,
                pattern,
                escape_char.as_ref(),
            ),
            Expr::SimilarTo {
                negated,
                expr,
                pattern,
                escape_char: None,
            } => negate(
                *negated,
                format!(
                    "regexp_full_match({}, {})",
                    self.expr(expr),
                    self.expr(pattern)
                ),
            ),
            Expr::Cast {
                kind,
                expr,
                data_type,
                format: None,
                ..
            } => format!(
                "{}({} AS {})",
                match kind {
                    CastKind::TryCast | CastKind::SafeCast => "TRY_CAST",
                    CastKind::Cast | CastKind::DoubleColon => "CAST",
                },
                self.expr(expr),
                data_type_name(data_type)
            ),
            Expr::TypedString(t) => format!(
                "CAST({} AS {})",
                value(&t.value.value).unwrap_or_else(|| t.value.to_string()),
                data_type_name(&t.data_type)
            ),
            Expr::AtTimeZone {
                timestamp,
                time_zone,
            } => format!(
                "timezone({}, {})",
                self.expr(time_zone),
                self.expr(timestamp)
            ),
            Expr::Extract { field, expr, .. } => {
                format!("date_part('{field}', {})", self.expr(expr))
            }
            // sqlparser's own node for `CEIL(x)`/`FLOOR(x)`, named as any call is.
            Expr::Ceil {
                expr,
                field: CeilFloorKind::DateTimeField(DateTimeField::NoDateTime),
            } => format!("ceil({})", self.expr(expr)),
            Expr::Floor {
                expr,
                field: CeilFloorKind::DateTimeField(DateTimeField::NoDateTime),
            } => format!("floor({})", self.expr(expr)),
            Expr::Position { expr, r#in } => {
                format!("\"position\"({}, {})", self.expr(r#in), self.expr(expr))
            }
            Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.expr(expr)];
                args.extend(substring_from.iter().map(|a| self.expr(a)));
                args.extend(substring_for.iter().map(|a| self.expr(a)));
                format!("\"substring\"({})", args.join(", "))
            }
            Expr::Trim {
                expr,
                trim_where,
                trim_what,
                trim_characters: None,
            } => {
                let function = match trim_where {
                    None | Some(TrimWhereField::Both) => "\"trim\"",
                    Some(TrimWhereField::Leading) => "ltrim",
                    Some(TrimWhereField::Trailing) => "rtrim",
                };
                match trim_what {
                    Some(what) => {
                        format!("{function}({}, {})", self.expr(expr), self.expr(what))
                    }
                    None => format!("{function}({})", self.expr(expr)),
                }
            }
            Expr::Collate { expr, collation } => {
                format!("{} COLLATE {collation}", self.expr(expr))
            }
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let mut out = "CASE ".to_string();
                for when in conditions {
                    let condition = match operand {
                        Some(op) => format!("({} = {})", self.expr(op), self.expr(&when.condition)),
                        None => self.expr(&when.condition),
                    };
                    let _ = write!(
                        out,
                        " WHEN ({condition}) THEN ({})",
                        self.expr(&when.result)
                    );
                }
                let otherwise = else_result
                    .as_deref()
                    .map_or_else(|| "NULL".to_string(), |e| self.expr(e));
                let _ = write!(out, " ELSE {otherwise} END");
                out
            }
            Expr::Exists { subquery, negated } => {
                negate(*negated, format!("EXISTS({})", query(subquery)))
            }
            Expr::Subquery(q) => format!("({})", query(q)),
            Expr::Tuple(items) => format!("\"row\"({})", self.list(items)),
            Expr::Array(array) => format!("list_value({})", self.list(&array.elem)),
            Expr::Dictionary(fields) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|f| format!("{} := {}", identifier(&f.key), self.expr(&f.value)))
                    .collect();
                format!("struct_pack({})", fields.join(", "))
            }
            Expr::Interval(interval) => self.interval(e, interval),
            Expr::CompoundFieldAccess { root, access_chain } => {
                let mut out = self.expr(root);
                for access in access_chain {
                    match access {
                        AccessExpr::Subscript(Subscript::Index { index }) => {
                            let _ = write!(out, "[{}]", self.expr(index));
                        }
                        AccessExpr::Subscript(Subscript::Slice {
                            lower_bound,
                            upper_bound,
                            stride: None,
                        }) => {
                            let bound = |b: &Option<Expr>| {
                                b.as_ref().map(|b| self.expr(b)).unwrap_or_default()
                            };
                            let _ = write!(out, "[{}:{}]", bound(lower_bound), bound(upper_bound));
                        }
                        _ => return e.to_string(),
                    }
                }
                out
            }
            Expr::Function(f) => self.function(e, f),
            _ => e.to_string(),
        }
    }

    fn list(&self, items: &[Expr]) -> String {
        items
            .iter()
            .map(|e| self.expr(e))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn is_bool(&self, x: &Expr, test: &str) -> String {
        format!("(CAST({} AS BOOLEAN) {test})", self.expr(x))
    }

    fn binary(&self, e: &Expr, left: &Expr, op: &BinaryOperator, right: &Expr) -> String {
        let symbol = match op {
            // DuckDB flattens a chain of one conjunction: `((a) AND (b) AND (c))`.
            BinaryOperator::And | BinaryOperator::Or => {
                let mut terms = Vec::new();
                conjuncts(left, op, &mut terms);
                conjuncts(right, op, &mut terms);
                let terms: Vec<String> = terms.into_iter().map(|t| self.expr(t)).collect();
                return format!("({})", terms.join(&format!(" {op} ")));
            }
            BinaryOperator::PGRegexMatch => {
                return format!("regexp_matches({}, {})", self.expr(left), self.expr(right));
            }
            BinaryOperator::NotEq => "!=",
            BinaryOperator::BitwiseXor => "^",
            BinaryOperator::Plus
            | BinaryOperator::Minus
            | BinaryOperator::Multiply
            | BinaryOperator::Divide
            | BinaryOperator::Modulo
            | BinaryOperator::StringConcat
            | BinaryOperator::Gt
            | BinaryOperator::Lt
            | BinaryOperator::GtEq
            | BinaryOperator::LtEq
            | BinaryOperator::Eq
            | BinaryOperator::BitwiseOr
            | BinaryOperator::BitwiseAnd
            | BinaryOperator::PGBitwiseShiftLeft
            | BinaryOperator::PGBitwiseShiftRight
            | BinaryOperator::DuckIntegerDivide
            | BinaryOperator::Arrow
            | BinaryOperator::LongArrow => return self.infix(left, &op.to_string(), right),
            _ => return e.to_string(),
        };
        self.infix(left, symbol, right)
    }

    fn infix(&self, left: &Expr, symbol: &str, right: &Expr) -> String {
        format!("({} {symbol} {})", self.expr(left), self.expr(right))
    }

    fn interval(&self, e: &Expr, interval: &datafusion::sql::sqlparser::ast::Interval) -> String {
        let Some(field) = &interval.leading_field else {
            return format!("CAST({} AS INTERVAL)", self.expr(&interval.value));
        };
        if interval.last_field.is_some() {
            return e.to_string();
        }
        let (function, whole) = match field {
            DateTimeField::Year | DateTimeField::Years => ("to_years", "INTEGER"),
            DateTimeField::Month | DateTimeField::Months => ("to_months", "INTEGER"),
            DateTimeField::Week(None) | DateTimeField::Weeks => ("to_weeks", "INTEGER"),
            DateTimeField::Day | DateTimeField::Days => ("to_days", "INTEGER"),
            DateTimeField::Hour | DateTimeField::Hours => ("to_hours", "BIGINT"),
            DateTimeField::Minute | DateTimeField::Minutes => ("to_minutes", "BIGINT"),
            DateTimeField::Second | DateTimeField::Seconds => {
                return format!("to_seconds(CAST({} AS DOUBLE))", self.expr(&interval.value));
            }
            _ => return e.to_string(),
        };
        format!(
            "{function}(CAST(trunc(CAST({} AS DOUBLE)) AS {whole}))",
            self.expr(&interval.value)
        )
    }

    fn function(&self, e: &Expr, f: &Function) -> String {
        if f.uses_odbc_syntax || !matches!(f.parameters, FunctionArguments::None) {
            return e.to_string();
        }
        let [part] = f.name.0.as_slice() else {
            return e.to_string();
        };
        let Some(ident) = part.as_ident() else {
            return e.to_string();
        };
        let written = match ident.quote_style {
            Some(_) => ident.value.clone(),
            None => ident.value.to_lowercase(),
        };
        let list = match &f.args {
            FunctionArguments::None => return identifier(&Ident::new(written)),
            FunctionArguments::Subquery(_) => return e.to_string(),
            FunctionArguments::List(list) => list,
        };
        let mut args = Vec::new();
        for arg in &list.args {
            args.push(match arg {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(a)) => self.expr(a),
                FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => "*".to_string(),
                FunctionArg::Named {
                    name,
                    arg: FunctionArgExpr::Expr(a),
                    ..
                } => format!("{} := {}", identifier(name), self.expr(a)),
                _ => return e.to_string(),
            });
        }
        let mut order_by = String::new();
        let mut ignore_nulls = false;
        for clause in &list.clauses {
            match clause {
                FunctionArgumentClause::OrderBy(keys) => order_by = self.order_by(keys),
                FunctionArgumentClause::IgnoreOrRespectNulls(
                    datafusion::sql::sqlparser::ast::NullTreatment::IgnoreNulls,
                ) => ignore_nulls = true,
                _ => return e.to_string(),
            }
        }
        let (name, args) = match written.as_str() {
            // `count()` over a window, `count_star()` otherwise.
            "count" if args.is_empty() || args == ["*"] => match f.over {
                Some(_) => ("count".to_string(), vec![]),
                None => ("count_star".to_string(), vec![]),
            },
            "coalesce" | "ifnull" => ("COALESCE".to_string(), args),
            "percentile_cont" | "percentile_disc" if !f.within_group.is_empty() => {
                order_by = self.order_by(&f.within_group);
                (written.replacen("percentile", "quantile", 1), args)
            }
            _ => (identifier(&Ident::new(written.clone())), args),
        };
        if !f.within_group.is_empty() && !name.starts_with("quantile") {
            return e.to_string();
        }
        let distinct = match list.duplicate_treatment {
            Some(DuplicateTreatment::Distinct) => "DISTINCT ",
            _ => "",
        };
        let mut out = format!("{name}({distinct}{}", args.join(", "));
        if ignore_nulls || f.null_treatment.is_some() {
            out.push_str(" IGNORE NULLS");
        }
        if !order_by.is_empty() {
            let _ = write!(out, " ORDER BY {order_by}");
        }
        out.push(')');
        if let Some(filter) = &f.filter {
            let _ = write!(out, " FILTER (WHERE {})", self.expr(filter));
        }
        match &f.over {
            None => {}
            Some(WindowType::WindowSpec(spec)) => {
                let _ = write!(out, " OVER ({})", self.window(spec));
            }
            Some(WindowType::NamedWindow(name)) => {
                match self.windows.get(&name.value.to_lowercase()) {
                    Some(spec) => {
                        let _ = write!(out, " OVER ({})", self.window(spec));
                    }
                    None => return e.to_string(),
                }
            }
        }
        out
    }

    fn order_by(&self, keys: &[OrderByExpr]) -> String {
        keys.iter()
            .map(|k| {
                let mut key = self.expr(&k.expr);
                match k.options.asc {
                    Some(true) => key.push_str(" ASC"),
                    Some(false) => key.push_str(" DESC"),
                    None => {}
                }
                match k.options.nulls_first {
                    Some(true) => key.push_str(" NULLS FIRST"),
                    Some(false) => key.push_str(" NULLS LAST"),
                    None => {}
                }
                key
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn window(&self, spec: &WindowSpec) -> String {
        let mut parts = Vec::new();
        if !spec.partition_by.is_empty() {
            parts.push(format!("PARTITION BY {}", self.list(&spec.partition_by)));
        }
        if !spec.order_by.is_empty() {
            parts.push(format!("ORDER BY {}", self.order_by(&spec.order_by)));
        }
        if let Some(frame) = &spec.window_frame
            && let Some(frame) = self.frame(frame)
        {
            parts.push(frame);
        }
        parts.join(" ")
    }

    /// A frame as DuckDB prints it: the default (`RANGE BETWEEN UNBOUNDED PRECEDING AND
    /// CURRENT ROW`) left out, a frame unbounded on both sides printed as `ROWS`.
    fn frame(&self, frame: &WindowFrame) -> Option<String> {
        let end = frame
            .end_bound
            .clone()
            .unwrap_or(WindowFrameBound::CurrentRow);
        let unbounded_start = frame.start_bound == WindowFrameBound::Preceding(None);
        if frame.units == WindowFrameUnits::Range
            && unbounded_start
            && end == WindowFrameBound::CurrentRow
        {
            return None;
        }
        let units = if unbounded_start && end == WindowFrameBound::Following(None) {
            WindowFrameUnits::Rows
        } else {
            frame.units
        };
        let bound = |b: &WindowFrameBound| match b {
            WindowFrameBound::CurrentRow => "CURRENT ROW".to_string(),
            WindowFrameBound::Preceding(None) => "UNBOUNDED PRECEDING".to_string(),
            WindowFrameBound::Following(None) => "UNBOUNDED FOLLOWING".to_string(),
            WindowFrameBound::Preceding(Some(n)) => format!("{} PRECEDING", self.expr(n)),
            WindowFrameBound::Following(Some(n)) => format!("{} FOLLOWING", self.expr(n)),
        };
        Some(format!(
            "{units} BETWEEN {} AND {}",
            bound(&frame.start_bound),
            bound(&end)
        ))
    }
}

/// A subquery as DuckDB prints it, for a select of one table (or none) with `WHERE`,
/// `GROUP BY`, `HAVING`, `ORDER BY` and `LIMIT`; any other as written.
fn query(q: &Query) -> String {
    simple_query(q).unwrap_or_else(|| q.to_string())
}

fn simple_query(q: &Query) -> Option<String> {
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    if q.with.is_some()
        || q.fetch.is_some()
        || !q.locks.is_empty()
        || select.top.is_some()
        || select.into.is_some()
        || !select.lateral_views.is_empty()
        || !select.cluster_by.is_empty()
        || !select.distribute_by.is_empty()
        || !select.sort_by.is_empty()
        || !select.named_window.is_empty()
        || select.qualify.is_some()
        || select.prewhere.is_some()
    {
        return None;
    }
    let p = Printer::default();
    let mut out = "SELECT ".to_string();
    match &select.distinct {
        None => {}
        Some(Distinct::Distinct) => out.push_str("DISTINCT "),
        Some(_) => return None,
    }
    let mut items = Vec::new();
    for item in &select.projection {
        items.push(match item {
            SelectItem::UnnamedExpr(e) => p.expr(e),
            SelectItem::ExprWithAlias { expr, alias } => {
                format!("{} AS {}", p.expr(expr), identifier(alias))
            }
            SelectItem::Wildcard(options) if options.to_string().is_empty() => "*".to_string(),
            _ => return None,
        });
    }
    out.push_str(&items.join(", "));
    match select.from.as_slice() {
        [] => {}
        [
            TableWithJoins {
                relation:
                    TableFactor::Table {
                        name,
                        alias,
                        args: None,
                        with_hints,
                        version: None,
                        partitions,
                        ..
                    },
                joins,
            },
        ] if joins.is_empty() && with_hints.is_empty() && partitions.is_empty() => {
            let mut parts = Vec::new();
            for part in &name.0 {
                parts.push(identifier(part.as_ident()?));
            }
            let _ = write!(out, " FROM {}", parts.join("."));
            if let Some(alias) = alias {
                if !alias.columns.is_empty() {
                    return None;
                }
                let _ = write!(out, " AS {}", identifier(&alias.name));
            }
        }
        _ => return None,
    }
    if let Some(selection) = &select.selection {
        let _ = write!(out, " WHERE {}", p.expr(selection));
    }
    match &select.group_by {
        GroupByExpr::Expressions(keys, modifiers) if modifiers.is_empty() => {
            if !keys.is_empty() {
                let _ = write!(out, " GROUP BY {}", p.list(keys));
            }
        }
        _ => return None,
    }
    if let Some(having) = &select.having {
        let _ = write!(out, " HAVING {}", p.expr(having));
    }
    match &q.order_by {
        None => {}
        Some(OrderBy {
            kind: OrderByKind::Expressions(keys),
            interpolate: None,
        }) => {
            let _ = write!(out, " ORDER BY {}", p.order_by(keys));
        }
        Some(_) => return None,
    }
    match &q.limit_clause {
        None => {}
        Some(LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) if limit_by.is_empty() => {
            if let Some(limit) = limit {
                let _ = write!(out, " LIMIT {}", p.expr(limit));
            }
            if let Some(offset) = offset {
                let _ = write!(out, " OFFSET {}", p.expr(&offset.value));
            }
        }
        Some(_) => return None,
    }
    Some(out)
}

/// The terms of a chain of one conjunction, through parentheses.
fn conjuncts<'a>(e: &'a Expr, op: &BinaryOperator, terms: &mut Vec<&'a Expr>) {
    match unnested(e) {
        Expr::BinaryOp {
            left,
            op: inner,
            right,
        } if inner == op => {
            conjuncts(left, op, terms);
            conjuncts(right, op, terms);
        }
        _ => terms.push(e),
    }
}

fn unnested(mut e: &Expr) -> &Expr {
    while let Expr::Nested(inner) = e {
        e = inner;
    }
    e
}

fn negate(negated: bool, printed: String) -> String {
    if negated {
        format!("(NOT {printed})")
    } else {
        printed
    }
}

/// A constant as DuckDB prints it; `None` for forms printed as written.
fn value(v: &Value) -> Option<String> {
    Some(match v {
        Value::Number(n, _) => n.clone(),
        Value::SingleQuotedString(s)
        | Value::EscapedStringLiteral(s)
        | Value::NationalStringLiteral(s) => quote_string(s),
        Value::DollarQuotedString(d) => quote_string(&d.value),
        Value::Boolean(b) => b.to_string(),
        Value::Null => "NULL".to_string(),
        _ => return None,
    })
}

fn quote_string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A name as written, quoted when DuckDB would need quotes to read it back: a keyword,
/// or any character but letters, digits and `_` (or a leading digit).
fn identifier(ident: &Ident) -> String {
    let name = &ident.value;
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && keywords::KEYWORDS
            .binary_search(&name.to_lowercase().as_str())
            .is_err();
    if plain {
        name.clone()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// A type as DuckDB prints a cast to it: the types its grammar knows by keyword in their
/// normal form (`INTEGER`, `FLOAT`, `DECIMAL(10, 2)`, `VARCHAR`, `TIMESTAMP WITH TIME
/// ZONE`), others by name (DuckDB keeps the case they were written in, which the parsed
/// type no longer has: upper case, as they are usually written).
fn data_type_name(t: &DataType) -> String {
    match t {
        DataType::Int(_) | DataType::Integer(_) => "INTEGER".to_string(),
        DataType::BigInt(_) => "BIGINT".to_string(),
        DataType::SmallInt(_) => "SMALLINT".to_string(),
        DataType::Real | DataType::Float(_) => "FLOAT".to_string(),
        DataType::DoublePrecision => "DOUBLE".to_string(),
        DataType::Boolean => "BOOLEAN".to_string(),
        DataType::Decimal(info) | DataType::Numeric(info) | DataType::Dec(info) => match info {
            ExactNumberInfo::None => "DECIMAL".to_string(),
            ExactNumberInfo::Precision(p) => format!("DECIMAL({p})"),
            ExactNumberInfo::PrecisionAndScale(p, s) => format!("DECIMAL({p}, {s})"),
        },
        DataType::Varchar(n) | DataType::CharacterVarying(n) => match n {
            Some(n) => format!("VARCHAR({n})"),
            None => "VARCHAR".to_string(),
        },
        DataType::Timestamp(None, TimezoneInfo::WithTimeZone) => {
            "TIMESTAMP WITH TIME ZONE".to_string()
        }
        DataType::Timestamp(None, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone) => {
            "TIMESTAMP".to_string()
        }
        DataType::Array(datafusion::sql::sqlparser::ast::ArrayElemTypeDef::SquareBracket(
            inner,
            None,
        )) => format!("{}[]", data_type_name(inner)),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn named(sql: &str) -> String {
        let mut statements = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
        super::name_items(&mut statements[0]);
        statements[0].to_string()
    }

    #[test]
    fn unaliased_items_take_duckdb_names() {
        // The names DuckDB 2.0.1 gives (the SQL oracle tests compare them live).
        assert_eq!(
            named("SELECT k, t.v, k + 1, count(*), CAST(v AS int) AS c, \"mode\"(v) FROM t"),
            "SELECT k, t.v, k + 1 AS \"(k + 1)\", count(*) AS \"count_star()\", \
             CAST(v AS INT) AS c, \"mode\"(v) AS \"\"\"mode\"\"(v)\" FROM t"
        );
        for (item, name) in [
            (
                "NOT k > 1 AND s LIKE 'a%' AND v <> 2",
                "((NOT (k > 1)) AND (s ~~ 'a%') AND (v != 2))",
            ),
            (
                "CASE k WHEN 1 THEN 'a' END",
                "CASE  WHEN ((k = 1)) THEN ('a') ELSE NULL END",
            ),
            ("-1, -k", "-1"),
            ("coalesce(s, 'it''s')", "COALESCE(s, 'it''s')"),
            ("year + 1", "(\"year\" + 1)"),
            (
                "sum(k) FILTER (WHERE k > 1)",
                "sum(k) FILTER (WHERE (k > 1))",
            ),
            ("x::DECIMAL(10,2)", "CAST(x AS DECIMAL(10, 2))"),
            (
                "percentile_cont(0.5) WITHIN GROUP (ORDER BY v DESC)",
                "quantile_cont(0.5 ORDER BY v DESC)",
            ),
            (
                "EXISTS (SELECT 1 FROM u WHERE a = 1)",
                "EXISTS(SELECT 1 FROM u WHERE (a = 1))",
            ),
            (
                "interval 2 hour",
                "to_hours(CAST(trunc(CAST(2 AS DOUBLE)) AS BIGINT))",
            ),
        ] {
            let sql = named(&format!("SELECT {item} FROM t"));
            let quoted = name.replace('"', "\"\"");
            assert!(sql.contains(&format!("AS \"{quoted}\"")), "{item}: {sql}");
        }
        assert_eq!(
            named(
                "SELECT sum(k) OVER w FROM t WINDOW w AS (ORDER BY k RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
            ),
            "SELECT sum(k) OVER w AS \"sum(k) OVER (ORDER BY k ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)\" \
             FROM t WINDOW w AS (ORDER BY k RANGE BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
        );
    }

    #[test]
    fn a_taken_name_gets_a_suffix_and_unnest_keeps_its_own() {
        assert_eq!(
            named("SELECT k + 1, k + 1, \"(k + 1)_2\", unnest(l) FROM t"),
            "SELECT k + 1 AS \"(k + 1)\", k + 1 AS \"(k + 1)_1\", \"(k + 1)_2\", unnest(l) FROM t"
        );
    }
}

//! AST rewrites for DuckDB SQL that DataFusion parses but cannot plan, applied after
//! parsing and before the guards.
//!
//! - `x [NOT] IN (subquery)` in a select list (`UPDATE … SET s = CASE WHEN k IN (…)`):
//!   the same, as scalar counts with the `IN`'s three-valued result.
//! - `EXISTS (…)` in a select list (`SELECT CASE WHEN EXISTS (…) THEN error('…') …`, which
//!   dlt sends): DataFusion plans `EXISTS` only in filters. A plain subquery becomes the
//!   scalar `(SELECT count(*) > 0 FROM … WHERE …)`, which it decorrelates; any other
//!   (set operations, grouping, limits) is counted from a derived table.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Query, SelectItem, SetExpr, Statement, VisitMut, VisitorMut, visit_expressions_mut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Apply every rewrite to `statement`.
pub(super) fn statement(statement: &mut Statement) {
    let _ = statement.visit(&mut SelectListExists);
}

struct SelectListExists;

impl VisitorMut for SelectListExists {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        rewrite_select_lists(query.body.as_mut());
        ControlFlow::Continue(())
    }
}

/// Rewrite the select lists of a query body, through set operations.
fn rewrite_select_lists(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            for item in select.projection.iter_mut() {
                if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item
                {
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
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_select_lists(left);
            rewrite_select_lists(right);
        }
        SetExpr::Query(q) => rewrite_select_lists(q.body.as_mut()),
        _ => {}
    }
}

/// `x [NOT] IN (subquery)` in a select list as scalar counts with the same three-valued
/// result: TRUE on a match, NULL when `x` is NULL or the subquery holds a NULL (and is
/// not empty) without a match, FALSE otherwise.
fn in_counted(expr: &Expr, subquery: &Query, negated: bool) -> Option<Expr> {
    if matches!(expr, Expr::Tuple(_)) {
        return None;
    }
    let from = format!("FROM ({subquery}) AS __deltalite_in(c)");
    let sql = format!(
        "(CASE WHEN (SELECT count(*) {from} WHERE __deltalite_in.c = ({expr})) > 0 THEN TRUE \
         WHEN (SELECT count(*) {from}) = 0 THEN FALSE \
         WHEN ({expr}) IS NULL OR (SELECT count(*) {from} WHERE __deltalite_in.c IS NULL) > 0 \
         THEN NULL ELSE FALSE END)"
    );
    let sql = if negated { format!("(NOT {sql})") } else { sql };
    parse_expr(&sql)
}

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

fn parse_expr(sql: &str) -> Option<Expr> {
    Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .ok()?
        .parse_expr()
        .ok()
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
            "SELECT (SELECT count(*) = 0 FROM (SELECT 1 UNION ALL SELECT 2) AS __deltalite_exists) AS e"
        );
        // Filters keep EXISTS: DataFusion plans it there.
        let filter = "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k)";
        assert_eq!(normalized(filter), filter);
    }
}

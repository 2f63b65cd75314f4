//! DuckDB's `COLLATE NOCASE` (and the binary collations `C`, `BINARY`, `POSIX`), which
//! DataFusion does not plan. A comparison (`=`, `<`, …, `IN`, `LIKE`, `BETWEEN`) with a
//! `NOCASE` operand compares every operand lowercased, and an `ORDER BY` key with it
//! orders by the lowercased value, as DuckDB compares and orders; anywhere else (a select
//! item, an aggregate's argument) the value is the value, so the collation is dropped.
//! Other collations (`NOACCENT`, a locale's) are refused.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, ObjectName, OrderBy, OrderByKind, Query, Statement, Value, VisitMut,
    VisitorMut,
};

use super::normalize::function_call;
use super::sql_err;
use crate::error::ApiError;

/// `statement` with its collations written out.
pub(super) fn rewrite(statement: &mut Statement) -> Result<(), ApiError> {
    match statement.visit(&mut Collations) {
        ControlFlow::Break(collation) => Err(sql_err(format!(
            "Not implemented Error: collation {collation} is not supported here (NOCASE, C, \
             BINARY and POSIX are)"
        ))),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct Collations;

impl VisitorMut for Collations {
    /// A collation this module does not write out.
    type Break = String;

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<String> {
        if let Some(OrderBy {
            kind: OrderByKind::Expressions(keys),
            ..
        }) = &mut query.order_by
        {
            for key in keys {
                if is_nocase(&key.expr) {
                    lower(&mut key.expr);
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<String> {
        let mut operands: Vec<&mut Expr> = match e {
            Expr::BinaryOp {
                left,
                op:
                    BinaryOperator::Eq
                    | BinaryOperator::NotEq
                    | BinaryOperator::Lt
                    | BinaryOperator::LtEq
                    | BinaryOperator::Gt
                    | BinaryOperator::GtEq,
                right,
            } => vec![left.as_mut(), right.as_mut()],
            Expr::InList { expr, list, .. } => {
                let mut all = vec![expr.as_mut()];
                all.extend(list.iter_mut());
                all
            }
            Expr::Like { expr, pattern, .. } | Expr::ILike { expr, pattern, .. } => {
                vec![expr.as_mut(), pattern.as_mut()]
            }
            Expr::Between {
                expr, low, high, ..
            } => vec![expr.as_mut(), low.as_mut(), high.as_mut()],
            _ => return ControlFlow::Continue(()),
        };
        if operands.iter().any(|o| is_nocase(o)) {
            for operand in operands.iter_mut() {
                lower(operand);
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<String> {
        if let Expr::Collate { collation, .. } = e {
            if !supported(collation) {
                return ControlFlow::Break(collation.to_string());
            }
            *e = without_collation(take(e));
        }
        ControlFlow::Continue(())
    }
}

/// The parts of a collation's name, lowercase (`nocase.noaccent`: `nocase`, `noaccent`).
fn parts(collation: &ObjectName) -> Vec<String> {
    collation
        .0
        .iter()
        .filter_map(|part| part.as_ident())
        .flat_map(|ident| {
            ident
                .value
                .split('.')
                .map(str::to_lowercase)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether this module writes `collation` out: `NOCASE` and the binary ones.
fn supported(collation: &ObjectName) -> bool {
    parts(collation)
        .iter()
        .all(|p| matches!(p.as_str(), "nocase" | "c" | "binary" | "posix"))
}

/// Whether `e` is a value under a collation with `NOCASE` that this module writes out.
fn is_nocase(e: &Expr) -> bool {
    match e {
        Expr::Nested(inner) => is_nocase(inner),
        Expr::Collate { collation, .. } => {
            supported(collation) && parts(collation).iter().any(|p| p == "nocase")
        }
        _ => false,
    }
}

fn take(e: &mut Expr) -> Expr {
    std::mem::replace(e, Expr::value(Value::Null))
}

/// `e` without its parentheses and its own collation, when it is one written out.
fn without_collation(e: Expr) -> Expr {
    match e {
        Expr::Nested(inner) if matches!(unnested(&inner), Expr::Collate { .. }) => {
            without_collation(*inner)
        }
        Expr::Collate { expr, collation } if supported(&collation) => *expr,
        e => e,
    }
}

fn unnested(e: &Expr) -> &Expr {
    match e {
        Expr::Nested(inner) => unnested(inner),
        e => e,
    }
}

/// `e` lowercased, its own collation dropped.
fn lower(e: &mut Expr) {
    let inner = without_collation(take(e));
    *e = function_call("lower", vec![inner]);
}

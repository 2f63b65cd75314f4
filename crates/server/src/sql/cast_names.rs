//! Casts that DataFusion would name like their operand, where that name collides.
//! DataFusion names `CAST(v AS BIGINT)` as `v`, so a select holding both `sum(v)` and
//! `sum(CAST(v AS BIGINT))` (or `count(v), count(v::VARCHAR)`, `sum(v) OVER (), sum(v::BIGINT)
//! OVER ()`, `GROUP BY k::VARCHAR, k`) was refused: "Schema contains duplicate
//! unqualified field name sum(t.v)". DuckDB answers each.
//!
//! In such a select, each cast outside `WHERE` and `FROM` (the select list, `GROUP BY`,
//! `HAVING`, `QUALIFY`, `ORDER BY`, alike, so that they still match each other) is wrapped
//! in [`NAMED_CAST`]: a marker that passes its argument through, named `CAST(v AS Int64)`.
//! Selects without such a collision are left as written.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::logical_expr::expr::Cast;
use datafusion::logical_expr::{Expr as PlanExpr, ScalarUDF};
use datafusion::sql::sqlparser::ast::{
    Expr, GroupByExpr, OrderBy, OrderByKind, Query, Select, SelectItem, SetExpr, Statement, Value,
    VisitMut, VisitorMut, visit_expressions, visit_expressions_mut,
};

/// The marker's name.
pub(super) const NAMED_CAST: &str = "__deltalite_named_cast";

/// The marker: its argument, named `CAST(x AS type)` when it is a cast.
pub(super) fn named_cast_udf() -> ScalarUDF {
    super::udf::marker(
        NAMED_CAST,
        |a| Ok(Arc::clone(a)),
        None,
        |arg| match arg {
            PlanExpr::Cast(Cast { expr, field }) => {
                format!("CAST({} AS {})", expr.schema_name(), field.data_type())
            }
            other => other.schema_name().to_string(),
        },
    )
}

/// Wrap the casts of each select of `statement` whose names would collide.
pub(super) fn name_casts(statement: &mut Statement) {
    let _ = statement.visit(&mut Selects);
}

struct Selects;

impl VisitorMut for Selects {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        // A select's own ORDER BY names its aggregates as its list does.
        if let SetExpr::Select(select) = query.body.as_mut()
            && collides(select)
        {
            wrap(select);
            if let Some(OrderBy {
                kind: OrderByKind::Expressions(keys),
                ..
            }) = &mut query.order_by
            {
                keys.iter_mut().for_each(|key| wrap_casts(&mut key.expr));
            }
            return ControlFlow::Continue(());
        }
        let mut bodies = vec![query.body.as_mut()];
        while let Some(body) = bodies.pop() {
            match body {
                SetExpr::Select(select) if collides(select) => wrap(select),
                SetExpr::SetOperation { left, right, .. } => {
                    bodies.push(left);
                    bodies.push(right);
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }
}

/// The expressions of a select that DataFusion names apart from the select list's
/// aliases: its grouping keys, and the function calls (aggregates, windows) in its items,
/// `HAVING` and `QUALIFY`.
fn named(select: &Select) -> Vec<Expr> {
    let mut out = Vec::new();
    if let GroupByExpr::Expressions(keys, _) = &select.group_by {
        out.extend(keys.iter().cloned());
    }
    let items = select.projection.iter().filter_map(|item| match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
        _ => None,
    });
    for e in items
        .chain(select.having.iter())
        .chain(select.qualify.iter())
    {
        let _ = visit_expressions(e, |e| {
            if matches!(e, Expr::Function(_)) {
                out.push(e.clone());
            }
            ControlFlow::<()>::Continue(())
        });
    }
    out
}

/// Whether two of the select's named expressions differ only in their casts.
fn collides(select: &Select) -> bool {
    // Every select of every statement comes here: one without a cast outside `WHERE`
    // and `FROM` is passed without copying its expressions.
    let items = select.projection.iter().filter_map(|item| match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
        _ => None,
    });
    let keys = match &select.group_by {
        GroupByExpr::Expressions(keys, _) => keys.as_slice(),
        GroupByExpr::All(_) => &[],
    };
    let mut parts = items
        .chain(keys)
        .chain(&select.having)
        .chain(&select.qualify);
    if !parts.any(holds_cast) {
        return false;
    }
    let named = named(select);
    if !named.iter().any(holds_cast) {
        return false;
    }
    let mut written_by_stripped: HashMap<String, String> = HashMap::new();
    for e in named {
        let written = e.to_string();
        match written_by_stripped.entry(strip(&e)) {
            Entry::Occupied(o) if *o.get() != written => return true,
            Entry::Occupied(_) => {}
            Entry::Vacant(v) => {
                v.insert(written);
            }
        }
    }
    false
}

/// `e` printed without its casts: how DataFusion names it.
fn strip(e: &Expr) -> String {
    let mut stripped = e.clone();
    let _ = visit_expressions_mut(&mut stripped, |e| {
        if let Expr::Cast { expr, .. } = e {
            *e = (**expr).clone();
        }
        ControlFlow::<()>::Continue(())
    });
    stripped.to_string()
}

fn holds_cast(e: &Expr) -> bool {
    visit_expressions(e, |e| match e {
        Expr::Cast { .. } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// Each cast in the select list, `GROUP BY`, `HAVING`, `QUALIFY` wrapped in the marker.
fn wrap(select: &mut Select) {
    let mut parts: Vec<&mut Expr> = Vec::new();
    for item in select.projection.iter_mut() {
        if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
            parts.push(e);
        }
    }
    if let GroupByExpr::Expressions(keys, _) = &mut select.group_by {
        parts.extend(keys.iter_mut());
    }
    parts.extend(select.having.iter_mut());
    parts.extend(select.qualify.iter_mut());
    parts.into_iter().for_each(wrap_casts);
}

fn wrap_casts(e: &mut Expr) {
    let _ = visit_expressions_mut(e, |e| {
        if matches!(e, Expr::Cast { .. }) {
            let cast = std::mem::replace(e, Expr::Value(Value::Null.into()));
            *e = super::normalize::function_call(NAMED_CAST, vec![cast]);
        }
        ControlFlow::<()>::Continue(())
    });
}

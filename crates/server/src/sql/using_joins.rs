//! The key of a `FULL` or `RIGHT JOIN … USING (k)` is both sides' `k`, as DuckDB (and
//! SQL) has it: `COALESCE(left.k, right.k)`. DataFusion answers the left side's `k`
//! for an unqualified `k` and for `*`, which is NULL on every row only the right side
//! has: `(1),(2) FULL JOIN (2),(3) USING (k)` listed `1, 2, NULL` instead of `1, 2, 3`.
//!
//! A select whose `FROM` is one such join of two named sides (tables or aliased
//! subqueries) has its unqualified key references written as the `COALESCE` (in its
//! select list, `WHERE`, `GROUP BY`, `HAVING` and `QUALIFY`, not inside subqueries,
//! whose own columns may be named alike), and its `*` replaces the key by it
//! (`* REPLACE (… AS k)`). A qualified `a.k` stays that side's value. Chains of several
//! joins are planned as DataFusion plans them.
//!
//! **`*` over any join `USING (k)`** is DuckDB's: the left side's columns, `k` in its
//! place, then the right side's without `k`. DataFusion kept whichever side's `k` sorts
//! first by qualifier and put it there: `SELECT * FROM main.c LEFT JOIN (…) k USING
//! (id)` listed `id` last, and NULL on every row without a match. A plain `*` over one
//! join of two named sides is written `left.* [REPLACE (… AS k)], right.* EXCLUDE (k)`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    ExcludeSelectItem, Expr, GroupByExpr, Ident, JoinConstraint, JoinOperator, ObjectName,
    ObjectNamePart, Query, ReplaceSelectElement, ReplaceSelectItem, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor, TableWithJoins, VisitMut,
    VisitorMut, WildcardAdditionalOptions,
};

use super::normalize::{function_call, replace_names};

/// Every select of `statement` with its `FULL`/`RIGHT JOIN … USING` keys coalesced.
pub(super) fn coalesce_keys(statement: &mut Statement) {
    let _ = statement.visit(&mut Selects);
}

struct Selects;

impl VisitorMut for Selects {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        body(&mut query.body);
        ControlFlow::Continue(())
    }
}

fn body(set: &mut SetExpr) {
    match set {
        SetExpr::Select(s) => select(s),
        SetExpr::SetOperation { left, right, .. } => {
            body(left);
            body(right);
        }
        _ => {}
    }
}

/// The qualifier a side's columns are read with: its alias, or its table's name.
fn qualifier(side: &TableFactor) -> Option<Vec<Ident>> {
    match side {
        TableFactor::Table {
            alias: Some(alias), ..
        }
        | TableFactor::Derived {
            alias: Some(alias), ..
        } => Some(vec![alias.name.clone()]),
        TableFactor::Table {
            name, alias: None, ..
        } => name
            .0
            .iter()
            .map(|p| match p {
                ObjectNamePart::Identifier(i) => Some(i.clone()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

fn select(select: &mut Select) {
    let [TableWithJoins { relation, joins }] = select.from.as_slice() else {
        return;
    };
    let [join] = joins.as_slice() else {
        return;
    };
    let (coalesced, columns) = match &join.join_operator {
        JoinOperator::FullOuter(JoinConstraint::Using(columns))
        | JoinOperator::Right(JoinConstraint::Using(columns))
        | JoinOperator::RightOuter(JoinConstraint::Using(columns)) => (true, columns),
        JoinOperator::Join(JoinConstraint::Using(columns))
        | JoinOperator::Inner(JoinConstraint::Using(columns))
        | JoinOperator::Left(JoinConstraint::Using(columns))
        | JoinOperator::LeftOuter(JoinConstraint::Using(columns)) => (false, columns),
        _ => return,
    };
    let (Some(left), Some(right)) = (qualifier(relation), qualifier(&join.relation)) else {
        return;
    };
    let column = |side: &[Ident], key: &Ident| {
        let mut parts = side.to_vec();
        parts.push(key.clone());
        Expr::CompoundIdentifier(parts)
    };
    let keys: Vec<(Ident, Expr)> = columns
        .iter()
        .filter_map(|name| match name.0.as_slice() {
            [ObjectNamePart::Identifier(key)] => Some((
                key.clone(),
                function_call("coalesce", vec![column(&left, key), column(&right, key)]),
            )),
            _ => None,
        })
        .collect();
    if keys.len() != columns.len() {
        return;
    }
    select.projection = std::mem::take(&mut select.projection)
        .into_iter()
        .flat_map(|item| match item {
            SelectItem::Wildcard(options) if options == plain(&options) => {
                both_sides(options, (&left, &right), &keys, coalesced)
            }
            other => vec![other],
        })
        .collect();
    if !coalesced {
        return;
    }
    for item in &mut select.projection {
        match item {
            SelectItem::UnnamedExpr(e) => {
                let written = e.clone();
                coalesce_in(e, &keys);
                if *e != written {
                    // Named as written, as the plain reference was.
                    let alias = match &written {
                        Expr::Identifier(ident) => ident.clone(),
                        other => Ident::with_quote('"', other.to_string()),
                    };
                    let expr = std::mem::replace(
                        e,
                        Expr::Value(datafusion::sql::sqlparser::ast::Value::Null.into()),
                    );
                    *item = SelectItem::ExprWithAlias { expr, alias };
                }
            }
            SelectItem::ExprWithAlias { expr, .. } => {
                coalesce_in(expr, &keys);
            }
            SelectItem::Wildcard(options) => {
                let replace = options
                    .opt_replace
                    .get_or_insert_with(|| ReplaceSelectItem { items: vec![] });
                for (key, coalesced) in &keys {
                    let named = |e: &ReplaceSelectElement| same_name(&e.column_name, key);
                    if !replace.items.iter().any(|e| named(e)) {
                        replace.items.push(Box::new(ReplaceSelectElement {
                            expr: coalesced.clone(),
                            column_name: key.clone(),
                            as_keyword: true,
                        }));
                    }
                }
            }
            _ => {}
        }
    }
    let clauses = [
        select.selection.as_mut(),
        select.having.as_mut(),
        select.qualify.as_mut(),
    ];
    for e in clauses.into_iter().flatten() {
        coalesce_in(e, &keys);
    }
    if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
        for e in exprs {
            coalesce_in(e, &keys);
        }
    }
}

/// `options` without any option (`*` as written with none).
fn plain(options: &WildcardAdditionalOptions) -> WildcardAdditionalOptions {
    WildcardAdditionalOptions {
        wildcard_token: options.wildcard_token.clone(),
        ..Default::default()
    }
}

/// `*` over a join `USING` as its two sides: `left.* [REPLACE (coalesced keys)],
/// right.* EXCLUDE (keys)`.
fn both_sides(
    options: WildcardAdditionalOptions,
    (left, right): (&[Ident], &[Ident]),
    keys: &[(Ident, Expr)],
    coalesced: bool,
) -> Vec<SelectItem> {
    let side = |name: &[Ident], options| {
        SelectItem::QualifiedWildcard(
            SelectItemQualifiedWildcardKind::ObjectName(ObjectName::from(name.to_vec())),
            options,
        )
    };
    let replace = coalesced.then(|| ReplaceSelectItem {
        items: keys
            .iter()
            .map(|(key, expr)| {
                Box::new(ReplaceSelectElement {
                    expr: expr.clone(),
                    column_name: key.clone(),
                    as_keyword: true,
                })
            })
            .collect(),
    });
    vec![
        side(
            left,
            WildcardAdditionalOptions {
                opt_replace: replace,
                ..options.clone()
            },
        ),
        side(
            right,
            WildcardAdditionalOptions {
                opt_exclude: Some(ExcludeSelectItem::Multiple(
                    keys.iter()
                        .map(|(k, _)| ObjectName::from(vec![k.clone()]))
                        .collect(),
                )),
                ..options
            },
        ),
    ]
}

/// Writes the unqualified keys in `e` as their `COALESCE`, outside subqueries.
fn coalesce_in(e: &mut Expr, keys: &[(Ident, Expr)]) {
    let _ = replace_names(e, |ident| {
        ControlFlow::Continue(
            keys.iter()
                .find(|(k, _)| same_name(k, ident))
                .map(|(_, coalesced)| coalesced.clone()),
        )
    });
}

/// Whether two names name the same column (unquoted ones without regard to case).
fn same_name(a: &Ident, b: &Ident) -> bool {
    super::folded(a) == super::folded(b)
}

//! DuckDB's lambdas (`list_transform(l, lambda x: x + 1)`). The generic parser has no
//! syntax for them, so `sql/dialect.rs` splices each (and each list comprehension) into
//! a call of the placeholder function [`LAMBDA`] (`"__deltalite_lambda"(x, x + 1)`: the
//! parameters, then the body); [`restore`] makes every such call the lambda it stands
//! for, right after parsing. DuckDB's names of the functions that take one become ours
//! ([`rewrite`]), which DataFusion plans as higher-order functions
//! (`sql/lambdas/functions.rs`); [`ResolveLambdas`] types their parameters.

mod functions;

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr::HigherOrderFunction;
use datafusion::logical_expr::{Expr as DFExpr, ExprSchemable, LogicalPlan, cast};
use datafusion::optimizer::AnalyzerRule;
use datafusion::sql::sqlparser::ast::{
    self as sql_ast, CastKind, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident,
    LambdaFunction, LambdaFunctionParameter, LambdaSyntax, ObjectName, OneOrManyWithParens,
    Statement, visit_expressions, visit_expressions_mut,
};

pub(super) use functions::functions;

use super::dialect::LAMBDA;
use super::sql_err;
use crate::error::ApiError;

/// Every placeholder call in `statement` as its lambda. A lambda whose body holds a
/// subquery is refused, as DuckDB refuses it, and so is one with more parameters than
/// its function gives (or, for a reduction, fewer), with DuckDB's messages.
pub(super) fn restore(statement: &mut Statement) -> Result<(), ApiError> {
    let mut refused: Option<&'static str> = None;
    let _ = visit_expressions_mut(statement, |e| {
        if let Some(lambda) = placeholder(e) {
            if has_subquery(&lambda.body) {
                refused.get_or_insert("subqueries in lambda expressions are not supported");
            }
            *e = Expr::Lambda(lambda);
        } else if let Some(message) = parameter_count(e) {
            refused.get_or_insert(message);
        }
        ControlFlow::<()>::Continue(())
    });
    match refused {
        Some(message) => Err(sql_err(format!("Binder Error: {message}"))),
        None => Ok(()),
    }
}

/// DuckDB's message when a lambda argument of `e` (a call) has a parameter count its
/// function does not give.
fn parameter_count(e: &Expr) -> Option<&'static str> {
    let Expr::Function(f) = e else {
        return None;
    };
    let name = f.name.0.last()?.as_ident()?.value.to_ascii_lowercase();
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    let count = list.args.iter().find_map(|arg| match arg {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Lambda(l))) => Some(match &l.params {
            OneOrManyWithParens::One(_) => 1,
            OneOrManyWithParens::Many(ps) => ps.len(),
        }),
        _ => None,
    })?;
    match name.as_str() {
        "list_reduce" | "array_reduce" | "reduce" => (!(2..=3).contains(&count))
            .then_some("list_reduce expects a function with 2 or 3 arguments"),
        _ => {
            (count > 2).then_some("This lambda function only supports up to two lambda parameters!")
        }
    }
}

fn has_subquery(body: &Expr) -> bool {
    visit_expressions(body, |e| match e {
        Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// DuckDB's names of the functions that take a lambda as DataFusion's, and a filter's
/// predicate cast to BOOLEAN, as DuckDB casts it (`lambda x: NULL` keeps nothing,
/// `lambda x: 1` everything).
pub(super) fn rewrite(e: &mut Expr) {
    let Expr::Function(f) = e else {
        return;
    };
    let [name] = f.name.0.as_slice() else {
        return;
    };
    let Some(ident) = name.as_ident().filter(|i| i.quote_style.is_none()) else {
        return;
    };
    let renamed = match ident.value.to_ascii_lowercase().as_str() {
        "list_transform" | "array_transform" | "apply" | "list_apply" | "array_apply" => {
            "array_transform"
        }
        "list_filter" | "array_filter" | "filter" => "array_filter",
        "list_reduce" | "array_reduce" | "reduce" => "list_reduce",
        _ => return,
    };
    f.name = ObjectName::from(vec![Ident::new(renamed)]);
    if renamed != "array_filter" {
        return;
    }
    let FunctionArguments::List(list) = &mut f.args else {
        return;
    };
    for arg in &mut list.args {
        if let FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Lambda(lambda))) = arg {
            let body = std::mem::replace(
                lambda.body.as_mut(),
                Expr::value(datafusion::sql::sqlparser::ast::Value::Null),
            );
            *lambda.body = Expr::Cast {
                kind: CastKind::Cast,
                expr: Box::new(body),
                data_type: sql_ast::DataType::Boolean,
                format: None,
                array: false,
            };
        }
    }
}

/// The lambda a placeholder call stands for: plain names, then one body.
fn placeholder(e: &mut Expr) -> Option<LambdaFunction> {
    let Expr::Function(f) = e else {
        return None;
    };
    let [name] = f.name.0.as_slice() else {
        return None;
    };
    if name.as_ident()?.value != LAMBDA {
        return None;
    }
    let FunctionArguments::List(list) = &mut f.args else {
        return None;
    };
    let mut args = std::mem::take(&mut list.args);
    let body = match args.pop()? {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(body)) => body,
        _ => return None,
    };
    let mut params = Vec::with_capacity(args.len());
    for arg in args {
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Identifier(name))) = arg else {
            return None;
        };
        params.push(LambdaFunctionParameter {
            name,
            data_type: None,
        });
    }
    let params = match <[_; 1]>::try_from(params) {
        Ok([one]) => OneOrManyWithParens::One(one),
        Err(many) => OneOrManyWithParens::Many(many),
    };
    Some(LambdaFunction {
        params,
        body: Box::new(body),
        syntax: LambdaSyntax::LambdaKeyword,
    })
}

/// Every lambda's parameters typed by the arguments their function has now, which our
/// rewrites may have retyped (a list literal's items made INTEGERs). Ahead of
/// DataFusion's type coercion (so that a lambda's body is coerced with its parameters'
/// final types) it also widens each reduction's list to what its lambda returns, as
/// DuckDB widens the accumulator (`list_reduce([1, 2], lambda a, x: a + x + 0.5)` adds
/// DECIMALs, the accumulator DuckDB's supertype of the element and what the lambda
/// returns of two elements); last, it only types the parameters again.
#[derive(Debug)]
pub(super) struct ResolveLambdas {
    pub(super) widen: bool,
}

impl AnalyzerRule for ResolveLambdas {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        // Most statements have no lambda: one look, rather than two rewrites that take
        // every node's input columns.
        if !has_lambdas(&plan)? {
            return Ok(plan);
        }
        let plan = super::analyzer::rewrite_expressions(plan, resolve)?;
        if !self.widen {
            return Ok(plan);
        }
        // Once, as DuckDB binds a reduction once more with the accumulator widened
        // (widening again would grow a DECIMAL's width at each round). A reduction
        // inside another's lambda comes first, and what it returns is its list's element.
        super::analyzer::rewrite_expressions(plan, |e, schema| {
            e.transform_up(|e| widen_reduction(e, schema))
        })
    }

    fn name(&self) -> &str {
        "deltalite_resolve_lambdas"
    }
}

/// Whether a node of `plan` (or of its subqueries) calls a higher-order function.
fn has_lambdas(plan: &LogicalPlan) -> Result<bool> {
    let mut found = false;
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            found |= e.exists(|e| Ok(matches!(e, DFExpr::HigherOrderFunction(_))))?;
            Ok(match found {
                true => TreeNodeRecursion::Stop,
                false => TreeNodeRecursion::Continue,
            })
        })
    })?;
    Ok(found)
}

/// `e` with its lambdas' parameters typed by their functions' arguments as they are now.
/// DataFusion's `resolve_lambda_variables` types the lambdas of a function, but the
/// value arguments of one outside any lambda only when it is inside one, so
/// `list_transform(list_filter(l, …), …)` kept the inner lambda's old types: each
/// function's value arguments first, then the function.
pub(super) fn resolve(e: DFExpr, schema: &DFSchema) -> Result<Transformed<DFExpr>> {
    match e {
        DFExpr::HigherOrderFunction(HigherOrderFunction { func, args }) => {
            let mut changed = false;
            let args = args
                .into_iter()
                .map(|a| match a {
                    DFExpr::Lambda(_) => Ok(a),
                    _ => resolve(a, schema).map(|t| {
                        changed |= t.transformed;
                        t.data
                    }),
                })
                .collect::<Result<Vec<_>>>()?;
            let t = DFExpr::HigherOrderFunction(HigherOrderFunction::new(func, args))
                .resolve_lambda_variables(schema)?;
            Ok(Transformed::new_transformed(
                t.data,
                changed || t.transformed,
            ))
        }
        e => e.map_children(|child| resolve(child, schema)),
    }
}

/// A `list_reduce` whose lambda returns more than its list's elements hold, with the list
/// (and the initial value) cast to the accumulator's type.
fn widen_reduction(e: DFExpr, schema: &DFSchema) -> Result<Transformed<DFExpr>> {
    let DFExpr::HigherOrderFunction(f) = &e else {
        return Ok(Transformed::no(e));
    };
    if f.func.name() != "list_reduce" {
        return Ok(Transformed::no(e));
    }
    let [list, DFExpr::Lambda(lambda), initial @ ..] = f.args.as_slice() else {
        return Ok(Transformed::no(e));
    };
    let DataType::List(element) = list.get_type(schema)? else {
        return Ok(Transformed::no(e));
    };
    let element = element.data_type();
    let mut others = vec![lambda.body.get_type(schema)?];
    for value in initial {
        others.push(value.get_type(schema)?);
    }
    let to = functions::accumulator(element, &others.iter().collect::<Vec<_>>())?;
    if &to == element {
        return Ok(Transformed::no(e));
    }
    let mut args = f.args.clone();
    args[0] = cast(args[0].clone(), DataType::new_list(to.clone(), true));
    for value in args.iter_mut().skip(2) {
        *value = cast(value.clone(), to.clone());
    }
    Ok(Transformed::yes(DFExpr::HigherOrderFunction(
        HigherOrderFunction::new(Arc::clone(&f.func), args),
    )))
}

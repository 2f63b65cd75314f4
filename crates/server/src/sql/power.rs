//! DuckDB's `^` (and `**`, spliced into `^` by `sql/dialect.rs`): a power, as DOUBLE,
//! binding tighter than `*` and `+` (`2 * 3 ^ 2` is 18, `1 + 2 ^ 2` is 5). sqlparser's
//! generic dialect parses `^` as an exclusive or, looser than both, so `2 ^ 3` was 1 and
//! `1 + 2 ^ 2` was 9.
//!
//! Two steps. [`precedence`] regroups each chain of arithmetic around a `^` as DuckDB
//! groups it, before the output names are taken (DuckDB names `2 * 3 ^ 2` as
//! `(2 * (3 ^ 2))`); [`rewrite`] then makes each `^` a `power` of DOUBLEs, with the other
//! normalizations. DuckDB's exclusive or is the function `xor(a, b)`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, CastKind, DataType, ExactNumberInfo, Expr, Statement, Value, VisitMut,
    VisitorMut,
};

/// How tightly `op` binds, for the operators sqlparser parses tighter than `^` (its own
/// values), and `^` above them all; `None` for the rest, which a chain does not cross.
fn binding(op: &BinaryOperator) -> Option<u8> {
    use BinaryOperator as B;
    Some(match op {
        B::BitwiseXor => 45,
        B::Multiply
        | B::Divide
        | B::Modulo
        | B::DuckIntegerDivide
        | B::MyIntegerDivide
        | B::StringConcat => 40,
        B::Plus | B::Minus => 30,
        B::BitwiseAnd => 23,
        _ => return None,
    })
}

/// Regroup every chain holding a `^` in `statement` (see the module's documentation).
pub(super) fn precedence(statement: &mut Statement) {
    let _ = statement.visit(&mut Regroup);
}

struct Regroup;

impl VisitorMut for Regroup {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if matches!(e, Expr::BinaryOp { op, .. } if binding(op).is_some()) && has_power(e) {
            let mut atoms = Vec::new();
            let mut ops = Vec::new();
            flatten(std::mem::replace(e, null()), &mut atoms, &mut ops);
            *e = regroup(atoms, ops);
        }
        ControlFlow::Continue(())
    }
}

fn null() -> Expr {
    Expr::Value(Value::Null.into())
}

/// Whether the chain `e` heads (its unparenthesized operators of [`binding`]) has a `^`.
fn has_power(e: &Expr) -> bool {
    match e {
        Expr::BinaryOp { left, op, right } if binding(op).is_some() => {
            *op == BinaryOperator::BitwiseXor || has_power(left) || has_power(right)
        }
        _ => false,
    }
}

/// The chain's operands and operators, in the order written.
fn flatten(e: Expr, atoms: &mut Vec<Expr>, ops: &mut Vec<BinaryOperator>) {
    match e {
        Expr::BinaryOp { left, op, right } if binding(&op).is_some() => {
            flatten(*left, atoms, ops);
            ops.push(op);
            flatten(*right, atoms, ops);
        }
        atom => atoms.push(atom),
    }
}

/// The chain grouped by [`binding`], each operator associating to the left.
fn regroup(atoms: Vec<Expr>, ops: Vec<BinaryOperator>) -> Expr {
    fn reduce(out: &mut Vec<Expr>, stack: &mut Vec<BinaryOperator>) {
        if let (Some(op), Some(right), Some(left)) = (stack.pop(), out.pop(), out.pop()) {
            out.push(Expr::BinaryOp {
                left: Box::new(left),
                op,
                right: Box::new(right),
            });
        }
    }
    let mut atoms = atoms.into_iter();
    let mut out: Vec<Expr> = atoms.next().into_iter().collect();
    let mut stack: Vec<BinaryOperator> = Vec::new();
    for (op, atom) in ops.into_iter().zip(atoms) {
        while stack.last().is_some_and(|top| binding(top) >= binding(&op)) {
            reduce(&mut out, &mut stack);
        }
        stack.push(op);
        out.push(atom);
    }
    while !stack.is_empty() {
        reduce(&mut out, &mut stack);
    }
    out.pop().unwrap_or_else(null)
}

/// `a ^ b` as `power(CAST(a AS DOUBLE), CAST(b AS DOUBLE))`.
pub(super) fn rewrite(e: &mut Expr) {
    let Expr::BinaryOp {
        op: BinaryOperator::BitwiseXor,
        ..
    } = e
    else {
        return;
    };
    let Expr::BinaryOp { left, right, .. } = std::mem::replace(e, null()) else {
        return;
    };
    let double = |x: Box<Expr>| Expr::Cast {
        kind: CastKind::Cast,
        expr: x,
        data_type: DataType::Double(ExactNumberInfo::None),
        array: false,
        format: None,
    };
    *e = super::normalize::function_call("power", vec![double(left), double(right)]);
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    #[test]
    fn power_binds_tightest() {
        // Each operation with its operands: the tree prints without its parentheses.
        let grouping = |sql: &str| {
            let mut statements = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
            super::precedence(&mut statements[0]);
            let mut names = String::new();
            let _ = datafusion::sql::sqlparser::ast::visit_expressions(&statements[0], |e| {
                if let super::Expr::BinaryOp { left, op, right } = e {
                    names.push_str(&format!("[{left} {op} {right}]"));
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
            names
        };
        assert_eq!(grouping("SELECT 2 * 3 ^ 2"), "[2 * 3 ^ 2][3 ^ 2]");
        assert_eq!(
            grouping("SELECT 1 + 2 ^ 2 * 3"),
            "[1 + 2 ^ 2 * 3][2 ^ 2 * 3][2 ^ 2]"
        );
        assert_eq!(grouping("SELECT 2 ^ 3 + 1"), "[2 ^ 3 + 1][2 ^ 3]");
        assert_eq!(grouping("SELECT 2 ^ 3 ^ 2"), "[2 ^ 3 ^ 2][2 ^ 3]");
        assert_eq!(grouping("SELECT 7 & 3 ^ 1"), "[7 & 3 ^ 1][3 ^ 1]");
        // Parentheses as written are kept.
        assert_eq!(grouping("SELECT (1 + 2) ^ 2"), "[(1 + 2) ^ 2][1 + 2]");
    }
}

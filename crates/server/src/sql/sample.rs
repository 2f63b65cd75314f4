//! Table samples: `FROM t TABLESAMPLE 10 ROWS`, `TABLESAMPLE BERNOULLI (10 PERCENT)`, and
//! DuckDB's `USING SAMPLE 10` / `USING SAMPLE 10%` (spliced after the table by
//! `sql/dialect.rs`). sqlparser parses the clause and DataFusion plans the table without
//! it, so every row came back. Each sampled table becomes a derived table of the same
//! name (its alias, or the table's own), so its columns are named as before:
//!
//! - `n` rows (a number alone, as DuckDB reads it, or `ROWS`; its whole part): `ORDER BY
//!   random() LIMIT n`, a uniform sample of `n` rows (every row when there are fewer), as DuckDB's
//!   reservoir sample;
//! - `p PERCENT` (or a method, `BERNOULLI`, `SYSTEM`, `BLOCK`, with a number alone, as
//!   Postgres reads it): `WHERE random() < p / 100`, each row kept with that chance.
//!   DuckDB's `SYSTEM` keeps or drops whole vectors of 2048 rows; here it is per row.
//!
//! A seed (`REPEATABLE (n)`) is refused: DataFusion's `random()` takes none, and a sample
//! that ignored its seed would not repeat. So are Hive's `BUCKET` and an `OFFSET`.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, ObjectNamePart, Statement, TableAlias, TableFactor, TableSample, TableSampleKind,
    TableSampleUnit, Value, VisitMut, VisitorMut,
};

/// Rewrite every sampled table of `statement`; `Err` is the message of a sample that
/// cannot be taken.
pub(super) fn rewrite(statement: &mut Statement) -> Result<(), String> {
    match statement.visit(&mut Samples) {
        ControlFlow::Break(message) => Err(message),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct Samples;

impl VisitorMut for Samples {
    type Break = String;

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<String> {
        let (sample, alias) = match factor {
            TableFactor::Table {
                sample: sample @ Some(_),
                alias,
                name,
                ..
            } => {
                // The derived table answers to the name the table did.
                let name = name.0.last().and_then(ObjectNamePart::as_ident).cloned();
                let alias = alias.take().or(name.map(|name| TableAlias {
                    explicit: true,
                    name,
                    columns: vec![],
                    at: None,
                }));
                (sample.take(), alias)
            }
            TableFactor::Derived {
                sample: sample @ Some(_),
                alias,
                ..
            } => (sample.take(), alias.take()),
            _ => return ControlFlow::Continue(()),
        };
        let Some(
            TableSampleKind::BeforeTableAlias(sample) | TableSampleKind::AfterTableAlias(sample),
        ) = sample
        else {
            return ControlFlow::Continue(());
        };
        match sampled(factor, &sample, alias) {
            Ok(derived) => {
                *factor = derived;
                ControlFlow::Continue(())
            }
            Err(message) => ControlFlow::Break(message),
        }
    }
}

/// `source` (its sample and alias taken off) as a derived table of the sampled rows.
fn sampled(
    source: &TableFactor,
    sample: &TableSample,
    alias: Option<TableAlias>,
) -> Result<TableFactor, String> {
    if sample.seed.is_some() {
        return Err(format!(
            "Not implemented Error: a sample with a seed ({sample}): samples here are not \
             repeatable; leave the seed out"
        ));
    }
    let (Some(quantity), None, None) = (&sample.quantity, &sample.bucket, &sample.offset) else {
        return Err(format!(
            "Not implemented Error: sample {sample}: give a number of rows or a percentage"
        ));
    };
    let percent = match quantity.unit {
        Some(TableSampleUnit::Percent) => true,
        Some(TableSampleUnit::Rows) => false,
        None => sample.name.is_some(),
    };
    let number = match &quantity.value {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse::<f64>().ok(),
            _ => None,
        },
        _ => None,
    }
    .filter(|n| n.is_finite() && *n >= 0.0)
    .ok_or_else(|| {
        format!(
            "Binder Error: sample size {} must be a number of rows or a percentage, not \
             negative",
            quantity.value
        )
    })?;
    let sql = match percent {
        true => format!("SELECT * FROM __source WHERE random() < {}", number / 100.0),
        // DuckDB takes the whole part of a fractional count (2.5 rows are 2).
        false => format!(
            "SELECT * FROM __source ORDER BY random() LIMIT {}",
            number.trunc() as u64
        ),
    };
    let query = super::pivot::template(&sql, source)?;
    Ok(TableFactor::Derived {
        lateral: false,
        subquery: query,
        alias: Some(alias.unwrap_or_else(|| TableAlias {
            explicit: true,
            name: Ident::new("__sample"),
            columns: vec![],
            at: None,
        })),
        sample: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> Result<String, String> {
        let mut statements = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
        rewrite(&mut statements[0])?;
        Ok(statements[0].to_string())
    }

    #[test]
    fn samples_become_derived_tables_of_the_same_name() {
        assert_eq!(
            rewritten("SELECT t.k FROM c.s.t TABLESAMPLE (10 ROWS) WHERE t.k > 1").unwrap(),
            "SELECT t.k FROM (SELECT * FROM c.s.t ORDER BY random() LIMIT 10) AS t \
             WHERE t.k > 1"
        );
        assert_eq!(
            rewritten("SELECT * FROM t AS x TABLESAMPLE BERNOULLI (2.5)").unwrap(),
            "SELECT * FROM (SELECT * FROM t WHERE random() < 0.025) AS x"
        );
        assert_eq!(
            rewritten("SELECT * FROM t TABLESAMPLE 7.9").unwrap(),
            "SELECT * FROM (SELECT * FROM t ORDER BY random() LIMIT 7) AS t"
        );
    }

    #[test]
    fn seeds_are_refused() {
        assert_eq!(
            rewritten("SELECT * FROM t TABLESAMPLE SYSTEM (10) REPEATABLE (3)").unwrap_err(),
            "Not implemented Error: a sample with a seed (TABLESAMPLE SYSTEM (10) REPEATABLE \
             (3)): samples here are not repeatable; leave the seed out"
        );
    }
}

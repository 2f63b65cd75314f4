//! DuckDB's JSON functions over text columns, on `datafusion-functions-json`'s: dlt loads
//! nested values as JSON text, and DuckDB users read them with `->>` and friends.
//!
//! Each is a function of DuckDB's name around the crate's ([`DuckdbJson`]): NULL where
//! the JSON is NULL, and a JSON value written compact, as DuckDB writes it
//! (`{"c":"x"}`; the crate answers the slice of the input, spaces and all). The AST
//! rewrite ([`rewrite`], from `sql/normalize.rs`) makes `->` and `->>` calls, and splits a
//! JSONPath literal (`'$.a.b[0]'`) into the keys the crate's functions take
//! (`'a', 'b', 0`); a path without `$` is one key, an integer an array index:
//!
//! | DuckDB | the crate's |
//! |---|---|
//! | `j -> p`, `json_extract(j, p)` | `json_get_json`: the value as JSON text |
//! | `j ->> p`, `json_extract_string(j, p)` | `json_as_text`: strings unquoted |
//! | `json_array_length(j[, p])` | `json_length` of an array, 0 of another value |
//! | `json_exists(j, p)` | `json_contains` |
//! | `json_keys(j[, p])` | `json_object_keys` |
//! | `json_valid(j)` | (ours, on `serde_json`) |
//! | `json_type(j[, p])` | (ours, on `serde_json`; with a path, of `json_extract(j, p)`) |
//!
//! The crate's own `->` planner is not used: it answers a union type no client reads.
//!
//! `->>` binds as DuckDB binds it ([`precedence`]): tighter than comparisons, `IS`, `IN`,
//! `BETWEEN` and `LIKE`, and left to right with `||`. sqlparser's generic dialect bound
//! it looser than all of these, so `j->>'k' = 'v'` was `j ->> ('k' = 'v')` (a type
//! error) and `j->>'k' || 'x'` was `j ->> ('k' || 'x')` (silently NULL). It is regrouped
//! right after parsing, before the output names are taken. (DuckDB's `->`, its lambda
//! arrow too, binds as loosely as sqlparser's: `j->'k' IS NULL` is `j -> ('k' IS NULL)`.)

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::compute::kernels::nullif::nullif;
use arrow::compute::{cast, is_null};
use arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Statement, Value,
    VisitMut, VisitorMut,
};
use datafusion_functions_json::udfs;

/// DuckDB's JSON functions, to register in a session.
pub(super) fn udfs() -> Vec<ScalarUDF> {
    [
        ("json_extract", udfs::json_get_json_udf(), Written::Json),
        (
            "json_extract_string",
            udfs::json_as_text_udf(),
            Written::Text,
        ),
        (
            "json_array_length",
            udfs::json_length_udf(),
            Written::ArrayLength,
        ),
        ("json_exists", udfs::json_contains_udf(), Written::AsIs),
        ("json_keys", udfs::json_object_keys_udf(), Written::AsIs),
    ]
    .into_iter()
    .map(|(name, inner, written)| {
        ScalarUDF::new_from_impl(DuckdbJson {
            name,
            inner,
            written,
        })
    })
    .chain([json_valid_udf(), json_type_udf()])
    .collect()
}

/// DuckDB's `json_valid(text)`: whether the text is one JSON value.
fn json_valid_udf() -> ScalarUDF {
    use datafusion::logical_expr::{Volatility, create_udf};
    create_udf(
        "json_valid",
        vec![DataType::Utf8],
        DataType::Boolean,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            super::udf::elementwise(args, |arrays| {
                let texts = cast(&arrays[0], &DataType::Utf8)?;
                let valid: arrow::array::BooleanArray = texts
                    .as_string::<i32>()
                    .iter()
                    .map(|t| t.map(|t| serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok()))
                    .collect();
                Ok(Arc::new(valid) as ArrayRef)
            })
        }),
    )
}

/// DuckDB's `json_type(text)`: the type of the JSON value, in DuckDB's names (`OBJECT`,
/// `ARRAY`, `VARCHAR`, `BIGINT`, `UBIGINT`, `DOUBLE`, `BOOLEAN`, `NULL`); NULL of NULL or
/// malformed JSON (where DuckDB raises, as for the other functions here).
fn json_type_udf() -> ScalarUDF {
    use datafusion::logical_expr::{Volatility, create_udf};
    use serde_json::Value as Json;
    create_udf(
        "json_type",
        vec![DataType::Utf8],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            super::udf::elementwise(args, |arrays| {
                let texts = cast(&arrays[0], &DataType::Utf8)?;
                let types: arrow::array::StringArray = texts
                    .as_string::<i32>()
                    .iter()
                    .map(|t| {
                        let value = serde_json::from_str::<Json>(t?).ok()?;
                        Some(match value {
                            Json::Null => "NULL",
                            Json::Bool(_) => "BOOLEAN",
                            // DuckDB reads a non-negative integer as unsigned.
                            Json::Number(n) if n.is_u64() => "UBIGINT",
                            Json::Number(n) if n.is_i64() => "BIGINT",
                            Json::Number(_) => "DOUBLE",
                            Json::String(_) => "VARCHAR",
                            Json::Array(_) => "ARRAY",
                            Json::Object(_) => "OBJECT",
                        })
                    })
                    .collect();
                Ok(Arc::new(types) as ArrayRef)
            })
        }),
    )
}

/// How a function's values are written.
#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Written {
    /// As the crate's function answers them.
    AsIs,
    /// JSON text, compact.
    Json,
    /// A string's text, any other value as compact JSON text (DuckDB's `->>` of `[ ]`
    /// is `[]`; the crate's answers the input's slice).
    Text,
    /// An array's length, 0 for any other value (the crate's counts an object's keys).
    ArrayLength,
}

/// One of DuckDB's JSON functions: the crate's `inner`, NULL where the JSON is NULL,
/// written as `written` says.
#[derive(Debug, PartialEq, Eq, Hash)]
struct DuckdbJson {
    name: &'static str,
    inner: Arc<ScalarUDF>,
    written: Written,
}

impl ScalarUDFImpl for DuckdbJson {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        self.inner.signature()
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        self.inner.return_type(args)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        // Constants answer one value, whatever the batch (even an empty one).
        let rows = if scalar { 1 } else { args.number_rows };
        let json = args.args.first().map(|j| j.to_array(rows)).transpose()?;
        let result = match self.written {
            Written::AsIs => self.inner.invoke_with_args(args)?.to_array(rows)?,
            Written::Json => compacted(&self.inner.invoke_with_args(args)?.to_array(rows)?, None)?,
            Written::Text => {
                let raw = udfs::json_get_json_udf()
                    .invoke_with_args(args.clone())?
                    .to_array(rows)?;
                let text = self.inner.invoke_with_args(args)?.to_array(rows)?;
                compacted(&raw, Some(&text))?
            }
            Written::ArrayLength => {
                // The value's JSON text (the call is planned as answering a count).
                let mut text_args = args.clone();
                text_args.return_field =
                    Arc::new(arrow::datatypes::Field::new("json", DataType::Utf8, true));
                let raw = udfs::json_get_json_udf()
                    .invoke_with_args(text_args)?
                    .to_array(rows)?;
                let lengths = self.inner.invoke_with_args(args)?.to_array(rows)?;
                array_lengths(&raw, &lengths)?
            }
        };
        let result = match &json {
            Some(json) if json.null_count() > 0 => nullif(&result, &is_null(json)?)?,
            _ => result,
        };
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?)
        } else {
            ColumnarValue::Array(result)
        })
    }
}

/// Each value's `lengths` entry where its JSON text `raw` is an array, 0 where it is
/// another value, NULL where there is none.
fn array_lengths(raw: &ArrayRef, lengths: &ArrayRef) -> Result<ArrayRef> {
    let out_type = lengths.data_type().clone();
    let raw = cast(raw, &DataType::Utf8)?;
    let counted = cast(lengths, &DataType::UInt64)?;
    let counted = counted.as_primitive::<arrow::datatypes::UInt64Type>();
    let out: arrow::array::UInt64Array = raw
        .as_string::<i32>()
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let text = text?;
            if text.trim_start().starts_with('[') {
                counted.is_valid(i).then(|| counted.value(i))
            } else {
                Some(0)
            }
        })
        .collect();
    Ok(cast(&(Arc::new(out) as ArrayRef), &out_type)?)
}

/// JSON texts without the whitespace outside their strings; where `strings` is given, a
/// JSON string is its entry of `strings` instead (its text, unquoted).
fn compacted(texts: &ArrayRef, strings: Option<&ArrayRef>) -> Result<ArrayRef> {
    let out_type = texts.data_type().clone();
    let texts = cast(texts, &DataType::Utf8)?;
    let texts = texts.as_string::<i32>();
    let strings = strings.map(|s| cast(s, &DataType::Utf8)).transpose()?;
    let strings = strings.as_ref().map(|s| s.as_string::<i32>());
    let mut out = StringBuilder::with_capacity(texts.len(), texts.value_data().len());
    for (i, text) in texts.iter().enumerate() {
        let Some(text) = text else {
            out.append_null();
            continue;
        };
        // DuckDB's text of a JSON null is NULL.
        if let Some(strings) = strings
            && (text.starts_with('"') || text == "null")
        {
            out.append_option(strings.is_valid(i).then(|| strings.value(i)));
            continue;
        }
        let (mut in_string, mut escaped) = (false, false);
        let compact: String = text
            .chars()
            .filter(|&c| {
                let keep = in_string || !c.is_ascii_whitespace();
                if in_string {
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => in_string = false,
                        _ => {}
                    }
                } else if c == '"' {
                    in_string = true;
                }
                keep
            })
            .collect();
        out.append_value(compact);
    }
    let out_type = match strings {
        Some(_) => DataType::Utf8,
        None => out_type,
    };
    Ok(cast(&(Arc::new(out.finish()) as ArrayRef), &out_type)?)
}

/// Regroup every `a ->> b` of `statement` whose `b` was parsed as a looser operation
/// (see the module's documentation).
pub(super) fn precedence(statement: &mut Statement) {
    let _ = statement.visit(&mut ArrowPrecedence);
}

struct ArrowPrecedence;

impl VisitorMut for ArrowPrecedence {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if let Expr::BinaryOp {
            op: BinaryOperator::LongArrow,
            right,
            ..
        } = e
            && looser(right)
        {
            let null = || Expr::Value(Value::Null.into());
            if let Expr::BinaryOp { left, op, right } = std::mem::replace(e, null()) {
                // `a ->> (b = c)` becomes `(a ->> b) = c`: the arrow takes the leftmost
                // operand of the looser operations, which take its place.
                let mut rest = *right;
                put_leftmost(&mut rest, |leaf| Expr::BinaryOp {
                    left,
                    op,
                    right: Box::new(leaf),
                });
                *e = rest;
            }
        }
        ControlFlow::Continue(())
    }
}

/// An operation `->>` binds tighter than (or, `||`, as tightly, left to right).
fn looser(e: &Expr) -> bool {
    use BinaryOperator as B;
    match e {
        Expr::BinaryOp { op, .. } => matches!(
            op,
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq | B::Spaceship | B::StringConcat
        ),
        Expr::IsNull(_)
        | Expr::IsNotNull(_)
        | Expr::IsTrue(_)
        | Expr::IsNotTrue(_)
        | Expr::IsFalse(_)
        | Expr::IsNotFalse(_)
        | Expr::IsUnknown(_)
        | Expr::IsNotUnknown(_)
        | Expr::IsDistinctFrom(..)
        | Expr::IsNotDistinctFrom(..)
        | Expr::InList { .. }
        | Expr::InSubquery { .. }
        | Expr::Between { .. }
        | Expr::Like { .. }
        | Expr::ILike { .. }
        | Expr::SimilarTo { .. } => true,
        _ => false,
    }
}

/// The leftmost operand of a looser operation (`e` itself otherwise).
fn leftmost(e: &mut Expr) -> &mut Expr {
    match e {
        Expr::BinaryOp { left, .. }
        | Expr::IsDistinctFrom(left, _)
        | Expr::IsNotDistinctFrom(left, _)
        | Expr::IsNull(left)
        | Expr::IsNotNull(left)
        | Expr::IsTrue(left)
        | Expr::IsNotTrue(left)
        | Expr::IsFalse(left)
        | Expr::IsNotFalse(left)
        | Expr::IsUnknown(left)
        | Expr::IsNotUnknown(left)
        | Expr::InList { expr: left, .. }
        | Expr::InSubquery { expr: left, .. }
        | Expr::Between { expr: left, .. }
        | Expr::Like { expr: left, .. }
        | Expr::ILike { expr: left, .. }
        | Expr::SimilarTo { expr: left, .. } => left,
        other => other,
    }
}

/// `e` with the leftmost operand of its chain of looser operations replaced by `arrow`
/// of it.
fn put_leftmost(e: &mut Expr, arrow: impl FnOnce(Expr) -> Expr) {
    if looser(e) {
        put_leftmost(leftmost(e), arrow);
    } else {
        let leaf = std::mem::replace(e, Expr::Value(Value::Null.into()));
        *e = arrow(leaf);
    }
}

/// One expression, if it is a DuckDB JSON form: a call of one of [`udfs`] with keys.
pub(super) fn rewrite(e: &mut Expr) {
    let call = match e {
        Expr::BinaryOp {
            left,
            op: op @ (BinaryOperator::Arrow | BinaryOperator::LongArrow),
            right,
        } => {
            let name = match op {
                BinaryOperator::Arrow => "json_extract",
                _ => "json_extract_string",
            };
            Some((name, vec![left.as_ref().clone(), right.as_ref().clone()]))
        }
        Expr::Function(f) if f.over.is_none() && f.filter.is_none() => {
            let [name] = f.name.0.as_slice() else {
                return;
            };
            let Some(ident) = name.as_ident().filter(|i| i.quote_style.is_none()) else {
                return;
            };
            let name = match ident.value.to_ascii_lowercase().as_str() {
                "json_extract" | "json_extract_path" => "json_extract",
                "json_extract_string" | "json_extract_path_text" => "json_extract_string",
                "json_array_length" => "json_array_length",
                "json_exists" => "json_exists",
                "json_keys" => "json_keys",
                "json_type" => "json_type",
                _ => return,
            };
            let FunctionArguments::List(list) = &f.args else {
                return;
            };
            if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
                return;
            }
            let mut args = Vec::with_capacity(list.args.len());
            for a in &list.args {
                let FunctionArg::Unnamed(FunctionArgExpr::Expr(arg)) = a else {
                    return;
                };
                args.push(arg.clone());
            }
            Some((name, args))
        }
        _ => None,
    };
    let Some((name, mut args)) = call else {
        return;
    };
    if args.is_empty() || args.len() > 2 {
        return;
    }
    let path = (args.len() == 2).then(|| args.remove(1));
    // `json_type(j, p)` is the type of `json_extract(j, p)`.
    let (name, outer) = match name {
        "json_type" if path.is_some() => ("json_extract", Some("json_type")),
        "json_type" => return,
        other => (other, None),
    };
    if let Some(path) = path {
        match keys(&path) {
            Some(keys) => args.extend(keys),
            None => args.push(path),
        }
    }
    let call = super::normalize::function_call(name, args);
    *e = match outer {
        Some(outer) => super::normalize::function_call(outer, vec![call]),
        None => call,
    };
}

/// The keys of a literal JSONPath (`'$.a."b c"[2]'`); `None` when `path` is no literal
/// string (then it is passed as one key or index, as DuckDB reads a non-path).
fn keys(path: &Expr) -> Option<Vec<Expr>> {
    let Expr::Value(v) = path else {
        return None;
    };
    let Value::SingleQuotedString(text) = &v.value else {
        return None;
    };
    let rest = text.strip_prefix('$')?;
    let key = |k: &str| Expr::Value(Value::SingleQuotedString(k.to_string()).into());
    let index = |i: u64| Expr::Value(Value::Number(i.to_string(), false).into());
    let mut out = Vec::new();
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '.' if chars.peek() == Some(&'"') => {
                chars.next();
                let mut name = String::new();
                loop {
                    match chars.next()? {
                        '"' => break,
                        c => name.push(c),
                    }
                }
                out.push(key(&name));
            }
            '.' => {
                let mut name = String::new();
                while let Some(&c) = chars.peek() {
                    if c == '.' || c == '[' {
                        break;
                    }
                    name.push(c);
                    chars.next();
                }
                out.push(key(&name));
            }
            '[' => {
                let mut digits = String::new();
                loop {
                    match chars.next()? {
                        ']' => break,
                        c => digits.push(c),
                    }
                }
                out.push(index(digits.trim().parse().ok()?));
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::{Expr, Value};

    use super::keys;

    fn text(s: &str) -> Expr {
        Expr::Value(Value::SingleQuotedString(s.to_string()).into())
    }

    #[test]
    fn json_paths_become_keys() {
        let shown =
            |p: &str| keys(&text(p)).map(|k| k.iter().map(|e| e.to_string()).collect::<Vec<_>>());
        assert_eq!(shown("$.a.b[1]").expect("path"), ["'a'", "'b'", "1"]);
        assert_eq!(shown("$.\"x y\".z").expect("path"), ["'x y'", "'z'"]);
        assert_eq!(shown("$").expect("path"), Vec::<String>::new());
        assert_eq!(shown("$[0][2]").expect("path"), ["0", "2"]);
        assert_eq!(shown("a"), None);
        assert_eq!(shown("$[x]"), None);
        assert_eq!(shown("$.\"open"), None);
    }
}

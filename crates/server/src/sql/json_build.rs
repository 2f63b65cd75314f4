//! DuckDB's functions that write JSON: `to_json(x)` (also `json_quote`), `json_object(k,
//! v, …)` and `json_array(v, …)`, written compact as DuckDB writes them: numbers, booleans
//! and `null` bare, text quoted, dates, timestamps and intervals as DuckDB's text, quoted
//! (`"2024-01-02 10:00:00"`), lists as arrays, structs and maps as objects (a map's keys
//! as strings), non-finite doubles as DuckDB's `Infinity`/`NaN`.
//!
//! DuckDB answers its JSON type, which another of these functions nests as it is:
//! `json_object('a', json_array(1))` is `{"a":[1]}`, not `{"a":"[1]"}`. Here the
//! result is text whose field carries [`JSON_METADATA`], and an argument whose field
//! carries it (one of these calls, or a column or alias of one) is written as it is.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray, StringBuilder};
use arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, exec_datafusion_err, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility,
};

use super::text_casts::{Nested, duckdb_text, item_range};

/// Field metadata that marks text as JSON already (DuckDB's JSON type).
const JSON_METADATA: &str = "deltalite.json";

/// The three functions, to register in a session.
pub(super) fn udfs() -> [ScalarUDF; 3] {
    let writer = |kind, signature| ScalarUDF::new_from_impl(JsonWriter { kind, signature });
    [
        writer(Kind::Value, Signature::any(1, Volatility::Immutable)),
        writer(Kind::Object, variadic()),
        writer(Kind::Array, variadic()),
    ]
}

/// Any number of arguments of any types, none included.
fn variadic() -> Signature {
    Signature::one_of(
        vec![TypeSignature::VariadicAny, TypeSignature::Nullary],
        Volatility::Immutable,
    )
}

#[derive(Debug, PartialEq, Eq, Hash, Clone, Copy)]
enum Kind {
    /// `to_json(x)`: `x` as JSON; NULL of NULL.
    Value,
    /// `json_object(k1, v1, …)`: keys are text.
    Object,
    /// `json_array(v1, …)`.
    Array,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonWriter {
    kind: Kind,
    signature: Signature,
}

impl ScalarUDFImpl for JsonWriter {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Value => "to_json",
            Kind::Object => "json_object",
            Kind::Array => "json_array",
        }
    }

    fn aliases(&self) -> &[String] {
        static QUOTE: std::sync::LazyLock<Vec<String>> =
            std::sync::LazyLock::new(|| vec!["json_quote".to_string()]);
        match self.kind {
            Kind::Value => &QUOTE,
            _ => &[],
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if self.kind == Kind::Object {
            if !args.arg_fields.len().is_multiple_of(2) {
                return plan_err!("json_object() requires an even number of arguments");
            }
            for key in args.arg_fields.iter().step_by(2) {
                if !matches!(
                    key.data_type(),
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                ) {
                    return plan_err!(
                        "json_object() keys must be VARCHAR, add an explicit cast to argument \"{}\"",
                        key.name()
                    );
                }
            }
        }
        let metadata = HashMap::from([(JSON_METADATA.to_string(), "true".to_string())]);
        Ok(Arc::new(
            Field::new(self.name(), DataType::Utf8, true).with_metadata(metadata),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let json: Vec<bool> = args.arg_fields.iter().map(|f| is_json(f)).collect();
        super::udf::elementwise(&args.args, |arrays| {
            let rows = if arrays.is_empty() {
                rows
            } else {
                arrays[0].len()
            };
            let trees = arrays
                .iter()
                .zip(&json)
                .map(|(array, &json)| Nested::new(array, &mut |leaf| Leaf::of(leaf, json)))
                .collect::<Result<Vec<_>>>()?;
            let mut out = StringBuilder::with_capacity(rows, rows * 16);
            let mut text = String::new();
            for row in 0..rows {
                text.clear();
                match self.kind {
                    Kind::Value => {
                        if trees[0].is_null(row) {
                            out.append_null();
                            continue;
                        }
                        trees[0].push(&mut text, row)?;
                    }
                    Kind::Array => {
                        text.push('[');
                        for (i, tree) in trees.iter().enumerate() {
                            if i > 0 {
                                text.push(',');
                            }
                            tree.push(&mut text, row)?;
                        }
                        text.push(']');
                    }
                    Kind::Object => {
                        text.push('{');
                        for (i, pair) in trees.chunks_exact(2).enumerate() {
                            if i > 0 {
                                text.push(',');
                            }
                            pair[0].push_key(&mut text, row)?;
                            text.push(':');
                            pair[1].push(&mut text, row)?;
                        }
                        text.push('}');
                    }
                }
                out.append_value(&text);
            }
            Ok(Arc::new(out.finish()) as ArrayRef)
        })
    }
}

/// Whether a field holds JSON text already.
fn is_json(field: &Field) -> bool {
    field.metadata().contains_key(JSON_METADATA)
}

impl Leaf {
    /// How a leaf array's values are written; `json` when its text is JSON already.
    fn of(array: &ArrayRef, json: bool) -> Result<Self> {
        let how = match array.data_type() {
            DataType::Null => How::Null,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View if json => How::Bare,
            DataType::Decimal128(..) | DataType::Decimal256(..) => How::Decimal,
            DataType::Boolean => How::Bare,
            t if t.is_integer() => How::Bare,
            t if t.is_floating() => How::Float,
            _ => How::Quoted,
        };
        // `duckdb_text` answers `Utf8`; the cast is then free, and keeps a change there
        // from panicking here.
        let text = arrow::compute::cast(&duckdb_text(array)?, &DataType::Utf8)?;
        Ok(Self {
            how,
            text: text.as_string::<i32>().clone(),
        })
    }
}

#[derive(Clone, Copy)]
enum How {
    /// Always `null` (an untyped NULL).
    Null,
    /// The text as it is: a number, a boolean, JSON.
    Bare,
    /// A double: DuckDB's `Infinity`, `-Infinity` and `NaN` where Arrow writes `inf`.
    Float,
    /// A decimal as DuckDB writes one: one fractional digit at least, no trailing zeros
    /// after it (`2.50` is `2.5`, `100` is `100.0`).
    Decimal,
    /// The text as a JSON string.
    Quoted,
}

/// A leaf array's values as text, and how to write them.
struct Leaf {
    how: How,
    text: StringArray,
}

impl Nested<'_, Leaf> {
    fn is_null(&self, row: usize) -> bool {
        match self {
            Self::Leaf(leaf) => matches!(leaf.how, How::Null) || leaf.text.is_null(row),
            Self::List { array, .. } | Self::Struct { array, .. } | Self::Map { array, .. } => {
                array.is_null(row)
            }
        }
    }

    /// Row `row` as JSON.
    fn push(&self, out: &mut String, row: usize) -> Result<()> {
        if self.is_null(row) {
            out.push_str("null");
            return Ok(());
        }
        match self {
            Self::Leaf(Leaf { how, text }) => {
                let text = text.value(row);
                match how {
                    How::Null => out.push_str("null"),
                    How::Bare => out.push_str(text),
                    How::Float => out.push_str(match text {
                        "inf" => "Infinity",
                        "-inf" => "-Infinity",
                        other => other,
                    }),
                    How::Decimal => match text.split_once('.') {
                        Some((whole, fraction)) => {
                            let fraction = fraction.trim_end_matches('0');
                            out.push_str(whole);
                            out.push('.');
                            out.push_str(if fraction.is_empty() { "0" } else { fraction });
                        }
                        None => {
                            out.push_str(text);
                            out.push_str(".0");
                        }
                    },
                    How::Quoted => quote(out, text)?,
                }
            }
            Self::List { array, items } => {
                out.push('[');
                for (i, item) in item_range(array.as_ref(), row).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    items.push(out, item)?;
                }
                out.push(']');
            }
            Self::Struct { names, fields, .. } => {
                out.push('{');
                for (i, (name, field)) in names.iter().zip(fields).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    quote(out, name)?;
                    out.push(':');
                    field.push(out, row)?;
                }
                out.push('}');
            }
            Self::Map {
                array,
                keys,
                values,
            } => {
                out.push('{');
                for (i, item) in item_range(array.as_ref(), row).enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    keys.push_key(out, item)?;
                    out.push(':');
                    values.push(out, item)?;
                }
                out.push('}');
            }
        }
        Ok(())
    }

    /// Row `row` as an object's key: its text as a JSON string; a NULL key is DuckDB's
    /// error.
    fn push_key(&self, out: &mut String, row: usize) -> Result<()> {
        if self.is_null(row) {
            return exec_err!("JSON key cannot be NULL");
        }
        match self {
            Self::Leaf(Leaf { text, .. }) => quote(out, text.value(row)),
            _ => self.push(out, row),
        }
    }
}

/// `text` as a JSON string.
fn quote(out: &mut String, text: &str) -> Result<()> {
    out.push_str(&serde_json::to_string(text).map_err(|e| exec_datafusion_err!("to_json: {e}"))?);
    Ok(())
}

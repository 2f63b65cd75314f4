//! DuckDB's regular expression functions DataFusion has no counterpart of.
//!
//! - `regexp_extract(s, pattern[, group])`: the first match's group (0, the whole match,
//!   by default), `''` when nothing matches or the group is NULL or missing.
//! - `regexp_extract_all(s, pattern[, group])`: that group of every match, in order, as a
//!   list (empty when nothing matches).
//! - `string_split_regex(s, pattern)` (also `str_split_regex`, `regexp_split_to_array`):
//!   the text between the matches, as a list.
//!
//! Patterns are Rust's `regex` (as DataFusion's other regexp functions), whose `\w`, `\d`
//! and `\s` are Unicode classes where DuckDB's RE2 has ASCII ones. A pattern is compiled
//! once for the rows that share it.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListBuilder, StringArray, StringBuilder};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Int64Type};
use datafusion::common::{DataFusionError, Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use datafusion::prelude::SessionContext;
use regex::Regex;

use super::udf::elementwise;

/// Register the functions.
pub(super) fn register(ctx: &SessionContext) {
    for kind in [Kind::Extract, Kind::ExtractAll, Kind::Split] {
        ctx.register_udf(ScalarUDF::new_from_impl(RegexpFunction::new(kind)));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Extract,
    ExtractAll,
    Split,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct RegexpFunction {
    kind: Kind,
    signature: Signature,
    aliases: Vec<String>,
}

impl RegexpFunction {
    fn new(kind: Kind) -> Self {
        let arities = match kind {
            Kind::Extract | Kind::ExtractAll => {
                vec![TypeSignature::Any(2), TypeSignature::Any(3)]
            }
            Kind::Split => vec![TypeSignature::Any(2)],
        };
        let aliases = match kind {
            Kind::Split => vec!["str_split_regex".into(), "regexp_split_to_array".into()],
            _ => Vec::new(),
        };
        Self {
            kind,
            signature: Signature::one_of(arities, Volatility::Immutable),
            aliases,
        }
    }
}

impl ScalarUDFImpl for RegexpFunction {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Extract => "regexp_extract",
            Kind::ExtractAll => "regexp_extract_all",
            Kind::Split => "string_split_regex",
        }
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            Kind::Extract => DataType::Utf8,
            Kind::ExtractAll | Kind::Split => {
                DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
            }
        })
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        match self.kind {
            Kind::Extract => elementwise(&args.args, |a| {
                let mut out = StringBuilder::new();
                each_row(name, a, |found| match found {
                    Some((s, regex, group)) => out.append_value(
                        group
                            .filter(|g| *g < regex.captures_len())
                            .and_then(|g| regex.captures(s)?.get(g))
                            .map_or("", |m| m.as_str()),
                    ),
                    None => out.append_null(),
                })?;
                Ok(Arc::new(out.finish()) as ArrayRef)
            }),
            Kind::ExtractAll | Kind::Split => elementwise(&args.args, |a| {
                let mut out = ListBuilder::new(StringBuilder::new());
                each_row(name, a, |found| match found {
                    Some((s, regex, group)) => {
                        if self.kind == Kind::Split {
                            for part in regex.split(s) {
                                out.values().append_value(part);
                            }
                        } else if let Some(g) = group.filter(|g| *g < regex.captures_len()) {
                            for captures in regex.captures_iter(s) {
                                let m = captures.get(g).map_or("", |m| m.as_str());
                                out.values().append_value(m);
                            }
                        }
                        out.append(true);
                    }
                    None => out.append(false),
                })?;
                Ok(Arc::new(out.finish()) as ArrayRef)
            }),
        }
    }
}

/// Each row's text, compiled pattern and group (0 when none is given; `None` when the
/// group is NULL or negative), or `None` for a row whose text or pattern is NULL.
fn each_row(
    name: &str,
    arrays: &[ArrayRef],
    mut row: impl FnMut(Option<(&str, &Regex, Option<usize>)>),
) -> Result<()> {
    let text = |a: &ArrayRef| -> Result<ArrayRef> { Ok(cast(a, &DataType::Utf8)?) };
    let (strings, patterns) = match arrays {
        [s, p] | [s, p, _] => (text(s)?, text(p)?),
        _ => return exec_err!("{name} takes a string, a pattern and a group"),
    };
    let (strings, patterns): (&StringArray, &StringArray) =
        (strings.as_string::<i32>(), patterns.as_string::<i32>());
    let groups = arrays
        .get(2)
        .map(|g| cast(g, &DataType::Int64))
        .transpose()?;
    let groups = groups.as_ref().map(|g| g.as_primitive::<Int64Type>());
    let mut compiled: Option<(String, Regex)> = None;
    for i in 0..strings.len() {
        if strings.is_null(i) || patterns.is_null(i) {
            row(None);
            continue;
        }
        let pattern = patterns.value(i);
        let regex = match &compiled {
            Some((p, r)) if p == pattern => r,
            _ => {
                let r = Regex::new(pattern)
                    .map_err(|e| DataFusionError::Execution(format!("{name}: {e}")))?;
                &compiled.insert((pattern.to_string(), r)).1
            }
        };
        let group = match groups {
            Some(g) if g.is_null(i) => None,
            Some(g) => usize::try_from(g.value(i)).ok(),
            None => Some(0),
        };
        row(Some((strings.value(i), regex, group)));
    }
    Ok(())
}

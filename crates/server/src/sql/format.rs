//! DuckDB's `format(fmt, …)` (the fmt library's `{}` fields) and `printf(fmt, …)` (C's
//! `%` conversions): text built from values, NULL when any value is NULL, as in DuckDB.
//!
//! Fields take an index (`{1}`), and a spec of fill and alignment (`{:>6}`, `{:*^5}`),
//! sign, zero padding, width, a thousands separator (`{:,}`), precision and a type
//! (`d`, `x`, `X`, `o`, `b`, `c`, `f`, `e`, `E`, `s`); `%` conversions take the flags
//! `-`, `0`, `+` and space, a width, a precision and the types `d`/`i`, `x`, `X`, `o`,
//! `c`, `f`, `e`, `E`, `s`. An integer type given a fractional number is refused with
//! DuckDB's message. Values are written as DuckDB writes them as text
//! (`sql/text_casts.rs`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{DataFusionError, Result, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::text_casts::{duckdb_text, written_otherwise};
use super::udf::elementwise;

/// `format` and `printf`.
pub(super) fn udfs() -> [ScalarUDF; 2] {
    [
        ScalarUDF::new_from_impl(Format::new(false)),
        ScalarUDF::new_from_impl(Format::new(true)),
    ]
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Format {
    /// `printf`'s `%` conversions, else `format`'s `{}` fields.
    printf: bool,
    signature: Signature,
}

impl Format {
    fn new(printf: bool) -> Self {
        Self {
            printf,
            signature: Signature::variadic_any(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for Format {
    fn name(&self) -> &str {
        if self.printf { "printf" } else { "format" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        match args.first() {
            Some(DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null) => {
                Ok(DataType::Utf8)
            }
            _ => plan_err!("{} takes a format text first", self.name()),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let printf = self.printf;
        elementwise(&args.args, |arrays| formatted(arrays, printf))
    }
}

/// One argument's value in a row: its text, and its number when it is one.
enum Number {
    Integer(i128),
    Fraction(f64),
    None,
}

/// Each row's text.
fn formatted(arrays: &[ArrayRef], printf: bool) -> Result<ArrayRef> {
    let Some((format, values)) = arrays.split_first() else {
        return exec_err!("format takes a format text first");
    };
    let format = arrow::compute::cast(format, &DataType::Utf8)?;
    let format = format.as_string::<i32>();
    let texts: Vec<ArrayRef> = values
        .iter()
        .map(|a| {
            if written_otherwise(a.data_type()) {
                duckdb_text(a)
            } else {
                Ok(arrow::compute::cast(a, &DataType::Utf8)?)
            }
        })
        .collect::<Result<_>>()?;
    let numbers: Vec<Option<ArrayRef>> = values
        .iter()
        .map(|a| {
            let t = a.data_type();
            if t.is_integer() {
                Ok(Some(arrow::compute::cast(a, &DataType::Decimal128(38, 0))?))
            } else if t.is_floating()
                || matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..))
            {
                Ok(Some(arrow::compute::cast(a, &DataType::Float64)?))
            } else {
                Ok::<_, DataFusionError>(None)
            }
        })
        .collect::<Result<_>>()?;
    let mut out = StringBuilder::with_capacity(format.len(), format.len() * 16);
    for row in 0..format.len() {
        if format.is_null(row) || values.iter().any(|v| v.is_null(row)) {
            out.append_null();
            continue;
        }
        let mut args = Vec::with_capacity(values.len());
        for (text, number) in texts.iter().zip(&numbers) {
            let number = match number {
                Some(n) if matches!(n.data_type(), DataType::Decimal128(..)) => Number::Integer(
                    n.as_primitive::<arrow::datatypes::Decimal128Type>()
                        .value(row),
                ),
                Some(n) => Number::Fraction(n.as_primitive::<Float64Type>().value(row)),
                None => Number::None,
            };
            args.push((text.as_string::<i32>().value(row), number));
        }
        let written = if printf {
            printf_row(format.value(row), &args)
        } else {
            format_row(format.value(row), &args)
        };
        match written {
            Ok(text) => out.append_value(text),
            Err(message) => {
                return Err(DataFusionError::Execution(format!(
                    "Invalid Input Error: {message}"
                )));
            }
        }
    }
    Ok(Arc::new(out.finish()))
}

/// How one field is written.
#[derive(Default)]
struct Spec {
    fill: Option<char>,
    align: Option<char>,
    sign: Option<char>,
    zero: bool,
    width: usize,
    thousands: bool,
    precision: Option<usize>,
    kind: Option<char>,
}

/// `format`'s fields: `{}`, `{1}`, `{:spec}`; `{{` and `}}` are braces.
fn format_row(format: &str, args: &[(&str, Number)]) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    let mut next = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut field = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => field.push(c),
                        None => return Err("unmatched '{' in format string".to_string()),
                    }
                }
                let (index, spec) = field.split_once(':').unwrap_or((&field, ""));
                let index = if index.is_empty() {
                    next += 1;
                    next - 1
                } else {
                    index
                        .parse::<usize>()
                        .map_err(|_| format!("Invalid format field \"{{{field}}}\""))?
                };
                let arg = args
                    .get(index)
                    .ok_or_else(|| format!("Argument index \"{index}\" out of range"))?;
                out.push_str(&write_value(arg, &format_spec(spec)?)?);
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// A `{:spec}`: `[[fill]align][sign][0][width][,][.precision][type]`.
fn format_spec(spec: &str) -> Result<Spec, String> {
    let mut s = Spec::default();
    let chars: Vec<char> = spec.chars().collect();
    let mut i = 0;
    let aligns = ['<', '>', '^'];
    if chars.len() >= 2 && aligns.contains(&chars[1]) {
        s.fill = Some(chars[0]);
        s.align = Some(chars[1]);
        i = 2;
    } else if chars.first().is_some_and(|c| aligns.contains(c)) {
        s.align = Some(chars[0]);
        i = 1;
    }
    if chars.get(i).is_some_and(|c| matches!(c, '+' | '-' | ' ')) {
        s.sign = Some(chars[i]);
        i += 1;
    }
    if chars.get(i) == Some(&'0') {
        s.zero = true;
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while chars.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        chars[start..*i]
            .iter()
            .collect::<String>()
            .parse::<usize>()
            .ok()
    };
    s.width = digits(&mut i).unwrap_or(0);
    if chars.get(i) == Some(&',') {
        s.thousands = true;
        i += 1;
    }
    if chars.get(i) == Some(&'.') {
        i += 1;
        s.precision = Some(digits(&mut i).unwrap_or(0));
    }
    s.kind = chars.get(i).copied();
    if chars.len() > i + 1 {
        return Err(format!("Invalid format specifier \"{spec}\""));
    }
    Ok(s)
}

/// `printf`'s conversions: `%[flags][width][.precision]type`; `%%` is `%`.
fn printf_row(format: &str, args: &[(&str, Number)]) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    let mut next = 0usize;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        let mut s = Spec::default();
        while let Some(&flag) = chars.peek() {
            match flag {
                '-' => s.align = Some('<'),
                '0' => s.zero = true,
                '+' | ' ' => s.sign = Some(flag),
                _ => break,
            }
            chars.next();
        }
        let mut width = String::new();
        while let Some(&d) = chars.peek().filter(|c| c.is_ascii_digit()) {
            width.push(d);
            chars.next();
        }
        s.width = width.parse().unwrap_or(0);
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut precision = String::new();
            while let Some(&d) = chars.peek().filter(|c| c.is_ascii_digit()) {
                precision.push(d);
                chars.next();
            }
            s.precision = Some(precision.parse().unwrap_or(0));
        }
        s.kind = match chars.next() {
            Some('i') => Some('d'),
            Some(k) => Some(k),
            None => return Err("incomplete format specifier at the end".to_string()),
        };
        // C pads on the left unless told `-`; `0` pads numbers with zeros.
        if s.align == Some('<') {
            s.zero = false;
        } else if !s.zero {
            s.align = Some('>');
        }
        let arg = args
            .get(next)
            .ok_or_else(|| format!("Argument index \"{next}\" out of range"))?;
        next += 1;
        out.push_str(&write_value(arg, &s)?);
    }
    Ok(out)
}

/// One value written by `spec`.
fn write_value((text, number): &(&str, Number), spec: &Spec) -> Result<String, String> {
    let wrong = |kind: char, of: &str| {
        Err(format!(
            "Invalid type specifier \"{kind}\" for formatting a value of type {of}"
        ))
    };
    let (body, numeric, negative) = match (spec.kind, number) {
        (None | Some('s'), Number::None) => (text.to_string(), false, false),
        (None | Some('s'), Number::Fraction(_)) => (text.to_string(), true, text.starts_with('-')),
        (None | Some('s') | Some('d'), Number::Integer(i)) => (
            grouped(&i.unsigned_abs().to_string(), spec.thousands),
            true,
            *i < 0,
        ),
        (Some('x'), Number::Integer(i)) => (format!("{:x}", i.unsigned_abs()), true, *i < 0),
        (Some('X'), Number::Integer(i)) => (format!("{:X}", i.unsigned_abs()), true, *i < 0),
        (Some('o'), Number::Integer(i)) => (format!("{:o}", i.unsigned_abs()), true, *i < 0),
        (Some('b'), Number::Integer(i)) => (format!("{:b}", i.unsigned_abs()), true, *i < 0),
        (Some('c'), Number::Integer(i)) => (
            u32::try_from(*i)
                .ok()
                .and_then(char::from_u32)
                .map(String::from)
                .unwrap_or_default(),
            false,
            false,
        ),
        (Some(k @ ('f' | 'F' | 'e' | 'E')), Number::Integer(_) | Number::Fraction(_)) => {
            let v = match number {
                Number::Integer(i) => *i as f64,
                Number::Fraction(f) => *f,
                Number::None => 0.0,
            };
            let precision = spec.precision.unwrap_or(6);
            let body = match k {
                'f' | 'F' => grouped(&format!("{:.precision$}", v.abs()), spec.thousands),
                _ => c_exponent(v.abs(), precision, k == 'E'),
            };
            (body, true, v.is_sign_negative() && v != 0.0)
        }
        (Some(k), Number::Fraction(_)) => return wrong(k, "float"),
        (Some(k), Number::Integer(_)) => return wrong(k, "integer"),
        (Some(k), Number::None) => return wrong(k, "string"),
    };
    let body = match (spec.kind, spec.precision, numeric) {
        // A precision cuts text.
        (None | Some('s'), Some(p), false) => body.chars().take(p).collect(),
        _ => body,
    };
    let sign = match (numeric, negative, spec.sign) {
        (true, true, _) if !body.starts_with('-') => "-",
        (true, false, Some('+')) => "+",
        (true, false, Some(' ')) => " ",
        _ => "",
    };
    let body = if sign == "-" || body.starts_with('-') {
        body.trim_start_matches('-').to_string()
    } else {
        body
    };
    let len = sign.chars().count() + body.chars().count();
    let pad = spec.width.saturating_sub(len);
    if spec.zero && numeric && spec.align.is_none() {
        return Ok(format!("{sign}{}{body}", "0".repeat(pad)));
    }
    let fill = spec.fill.unwrap_or(' ').to_string();
    let align = spec.align.unwrap_or(if numeric { '>' } else { '<' });
    let (left, right) = match align {
        '>' => (pad, 0),
        '^' => (pad / 2, pad - pad / 2),
        _ => (0, pad),
    };
    Ok(format!(
        "{}{sign}{body}{}",
        fill.repeat(left),
        fill.repeat(right)
    ))
}

/// Digits with a `,` every three, when asked.
fn grouped(digits: &str, thousands: bool) -> String {
    if !thousands {
        return digits.to_string();
    }
    let (whole, fraction) = digits
        .split_once('.')
        .map_or((digits, None), |(w, f)| (w, Some(f)));
    let mut out = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(f) = fraction {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// C's `%e`: `1.234568e+04`.
fn c_exponent(v: f64, precision: usize, upper: bool) -> String {
    let rust = format!("{v:.precision$e}");
    let (mantissa, exponent) = rust.split_once('e').unwrap_or((&rust, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if exponent < 0 { '-' } else { '+' };
    let e = if upper { 'E' } else { 'e' };
    format!("{mantissa}{e}{sign}{:02}", exponent.abs())
}

#[cfg(test)]
mod tests {
    use super::{Number, format_row, printf_row};

    /// Answers DuckDB 2.0.1 gave.
    #[test]
    fn as_duckdb_writes_them() {
        let n = |i: i128| ("", Number::Integer(i));
        assert_eq!(
            format_row("{} - {}", &[("1", Number::Integer(1)), ("a", Number::None)]).unwrap(),
            "1 - a"
        );
        assert_eq!(
            format_row("{1} {0}", &[("1", Number::Integer(1)), ("a", Number::None)]).unwrap(),
            "a 1"
        );
        assert_eq!(
            format_row(
                "{:.2f}|{:>6}|{:<4}|{:^5}|{:05d}|{:,}|{:x}",
                &[
                    ("1.23456", Number::Fraction(1.23456)),
                    ("ab", Number::None),
                    ("c", Number::None),
                    ("d", Number::None),
                    n(42),
                    n(1234567),
                    n(255),
                ]
            )
            .unwrap(),
            "1.23|    ab|c   |  d  |00042|1,234,567|ff"
        );
        assert_eq!(format_row("{{}} {}", &[n(1)]).unwrap(), "{} 1");
        assert_eq!(
            printf_row(
                "%s|%d|%.2f|%5s|%-5s|%05d|%x|%%|%i",
                &[
                    ("a", Number::None),
                    n(42),
                    ("1.23456", Number::Fraction(1.23456)),
                    ("ab", Number::None),
                    ("c", Number::None),
                    n(7),
                    n(255),
                    n(3),
                ]
            )
            .unwrap(),
            "a|42|1.23|   ab|c    |00007|ff|%|3"
        );
        assert_eq!(
            printf_row(
                "%10.3f|%e|%c",
                &[
                    ("2.5", Number::Fraction(2.5)),
                    ("12345.678", Number::Fraction(12345.678)),
                    n(65)
                ]
            )
            .unwrap(),
            "     2.500|1.234568e+04|A"
        );
        assert_eq!(
            printf_row("%d", &[("2.7", Number::Fraction(2.7))]).unwrap_err(),
            "Invalid type specifier \"d\" for formatting a value of type float"
        );
        assert_eq!(format_row("{:+d}|{:d}", &[n(5), n(-5)]).unwrap(), "+5|-5");
    }
}

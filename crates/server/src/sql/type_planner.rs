//! SQL type names as DuckDB means them, where DataFusion's differ: `TIMESTAMP` (and `WITH
//! TIME ZONE`) without a precision is microseconds, as DuckDB's and Delta's are.
//! DataFusion's nanoseconds reach only 1677-2262, so `TIMESTAMP '9999-12-31'` (the usual
//! "no end" value) failed, as did every bound timestamp parameter outside that range,
//! while the tables hold such values. `BLOB` (`BYTEA`, `VARBINARY`) is binary, and `JSON`
//! is text, as in DuckDB (where `JSON` is a `VARCHAR` whose text is JSON); `HUGEINT` is
//! the widest decimal, DuckDB's 128-bit integers as this server stores them; `DECIMAL`
//! (`NUMERIC`) without a width is DuckDB's DECIMAL(18,3); a text type's length is
//! ignored, as DuckDB ignores it.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::Result;
use datafusion::logical_expr::planner::TypePlanner;
use datafusion::sql::sqlparser::ast::{DataType as SqlType, ExactNumberInfo, TimezoneInfo};

use super::SESSION_TIME_ZONE;

#[derive(Debug)]
pub(super) struct DuckdbTypes;

impl TypePlanner for DuckdbTypes {
    fn plan_type_field(&self, sql_type: &SqlType) -> Result<Option<FieldRef>> {
        let plain = match sql_type {
            SqlType::Blob(_) | SqlType::Bytea | SqlType::Varbinary(_) => Some(DataType::Binary),
            SqlType::JSON => Some(DataType::Utf8),
            SqlType::HugeInt => Some(DataType::Decimal128(38, 0)),
            // DuckDB's `DECIMAL` without a width (dbt's `numeric`); DataFusion's is (38,10).
            SqlType::Decimal(ExactNumberInfo::None)
            | SqlType::Numeric(ExactNumberInfo::None)
            | SqlType::Dec(ExactNumberInfo::None) => Some(DataType::Decimal128(18, 3)),
            // A length is no constraint in DuckDB (`VARCHAR(256)` is `VARCHAR`); DataFusion
            // refuses the lengths of the SQL standard's spellings.
            SqlType::CharacterVarying(_)
            | SqlType::CharVarying(_)
            | SqlType::Character(_)
            | SqlType::Char(Some(_)) => Some(DataType::Utf8),
            _ => None,
        };
        if let Some(plain) = plain {
            return Ok(Some(Arc::new(Field::new("", plain, true))));
        }
        let SqlType::Timestamp(None, tz) = sql_type else {
            return Ok(None);
        };
        let tz = matches!(tz, TimezoneInfo::Tz | TimezoneInfo::WithTimeZone)
            .then(|| Arc::from(SESSION_TIME_ZONE));
        let micros = DataType::Timestamp(TimeUnit::Microsecond, tz);
        Ok(Some(Arc::new(Field::new("", micros, true))))
    }
}

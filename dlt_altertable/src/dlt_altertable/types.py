"""dlt column types -> DuckDB-flavoured SQL types understood by the lakehouse server."""

from typing import Any, Optional

from dlt.common.schema.typing import TColumnSchema

DEFAULT_DECIMAL = (38, 9)


def quote_ident(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def sql_type(column: TColumnSchema, arrow_type: Optional[Any] = None) -> str:
    """Map a dlt column onto a SQL type; `arrow_type` (from the load file) refines integers."""
    data_type = column.get("data_type")
    if data_type == "bigint":
        if arrow_type is not None:
            import pyarrow as pa

            if pa.types.is_uint64(arrow_type):
                return "DECIMAL(20,0)"
        return "BIGINT"
    if data_type in ("text", "json"):
        return "VARCHAR"
    if data_type == "double":
        return "DOUBLE"
    if data_type == "bool":
        return "BOOLEAN"
    if data_type == "timestamp":
        if column.get("timezone", True) is False:
            return "TIMESTAMP"
        return "TIMESTAMP WITH TIME ZONE"
    if data_type == "date":
        return "DATE"
    if data_type == "time":
        return "TIME"
    if data_type == "binary":
        return "BLOB"
    if data_type == "decimal":
        precision = column.get("precision")
        scale = column.get("scale")
        if precision is None:
            precision, scale = DEFAULT_DECIMAL
        elif scale is None:
            scale = 0
        return f"DECIMAL({precision},{scale})"
    if data_type == "wei":
        return "DECIMAL(38,0)"
    raise ValueError(f"unsupported dlt data type {data_type!r} for column {column.get('name')!r}")


def arrow_type_for_sql(type_name: str) -> Optional[Any]:
    """Arrow type for a server column type (information_schema `data_type`); None if unknown."""
    import re

    import pyarrow as pa

    t = (type_name or "").strip().upper()
    simple = {
        "VARCHAR": pa.string(),
        "TEXT": pa.string(),
        "STRING": pa.string(),
        "BIGINT": pa.int64(),
        "INTEGER": pa.int32(),
        "INT": pa.int32(),
        "SMALLINT": pa.int16(),
        "TINYINT": pa.int8(),
        "DOUBLE": pa.float64(),
        "FLOAT": pa.float32(),
        "REAL": pa.float32(),
        "BOOLEAN": pa.bool_(),
        "DATE": pa.date32(),
        "TIME": pa.time64("us"),
        "BLOB": pa.binary(),
        "TIMESTAMP": pa.timestamp("us"),
        "TIMESTAMP WITH TIME ZONE": pa.timestamp("us", tz="UTC"),
        "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
    }
    if t in simple:
        return simple[t]
    if m := re.fullmatch(r"DECIMAL\((\d+)\s*,\s*(\d+)\)", t):
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    return None

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

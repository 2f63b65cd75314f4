"""`altertable_adapter(resource, partition=…)`: ordered partition keys on a dlt resource,
the same API and stored hint as dlt-altertable 0.2.2. `altertable_partition` is dlt's
`iceberg_partition` (`.identity(col)`, `.year(col)`, `.month(col)`, `.day(col)`,
`.hour(col)`, `.bucket(n, col)`); `.truncate` and named partition fields are refused."""

from collections.abc import Sequence
from typing import NotRequired, TypedDict, Union

from dlt.common.typing import TSortOrder
from dlt.destinations.adapters import iceberg_partition as altertable_partition
from dlt.destinations.impl.filesystem.iceberg_adapter import PartitionSpec
from dlt.destinations.utils import get_resource_for_adapter
from dlt.extract import DltResource

from dlt_altertable.exceptions import InvalidLayoutHint
from dlt_altertable.layout import PARTITION_HINT, partition_keys

__all__ = ["altertable_adapter", "altertable_partition"]


class SortKey(TypedDict):
    column: str
    direction: NotRequired[TSortOrder]


def altertable_adapter(
    data: object,
    *,
    partition: Union[str, PartitionSpec, Sequence[Union[str, PartitionSpec]], None] = None,
    sort: Union[str, SortKey, Sequence[Union[str, SortKey]], None] = None,
) -> DltResource:
    """Set ordered partition keys on a dlt resource (stored as the `x-altertable-partition`
    table hint). An empty list resets the table's partitioning."""
    if sort is not None:
        raise NotImplementedError("Sort hints are unsupported.")
    if partition is None:
        raise InvalidLayoutHint("Specify partition in altertable_adapter.")
    resource = get_resource_for_adapter(data)
    partitions: list[Union[str, dict[str, object]]] = []
    keys: Sequence[Union[str, PartitionSpec]] = (
        partition
        if isinstance(partition, Sequence) and not isinstance(partition, str)
        else [partition]  # type: ignore[list-item]
    )
    for key in keys:
        if isinstance(key, str):
            partitions.append(key)
        elif isinstance(key, PartitionSpec) and key.partition_field is None:
            entry: dict[str, object] = {"column": key.source_column, "transform": key.transform}
            if key.param_value is not None:
                entry["buckets"] = key.param_value
            partitions.append(entry)
        else:
            raise InvalidLayoutHint("Use a column name or altertable_partition helper.")
    resource.apply_hints(additional_table_hints={PARTITION_HINT: partition_keys(partitions)})
    return resource

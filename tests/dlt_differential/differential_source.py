"""The dlt source of the differential test, loaded in three steps through our `dlt_altertable`
and through the real `dlt-altertable==0.2.2`. Imports only dlt and the destination package's
public API (the same import name on both sides), so it runs on CPython 3.11 and 3.13.

Every feature both packages claim, with data whose expected result is unambiguous (no two
rows of one key with the same cursor in one load: 0.2.2 breaks such ties arbitrarily):

- `events`     append; nested `tags` list of dicts; step 2 adds a column, a nested field
               and a row whose id repeats (append keeps both)
- `snapshot`   replace; nested `lines`; step 2 has fewer rows and a new column
- `customers`  merge on `id` with `dedup_sort` cursor `updated_at`: in-load versions, a
               stale update, an equal-cursor update (stored row wins), column descriptions,
               table description; step 2 adds a column
- `orders`     merge on `order_id`, cursor `version`, bool `hard_delete` `is_deleted`, nested
               `items` with nested `discounts`: an update with fewer items, a delete, a
               stale update, a new order arriving deleted; step 2 adds a nested list `notes`
- `tombstones` merge on (`tenant`, `id`), timestamp `hard_delete` `deleted_at`, no cursor
- `metrics`    append partitioned with `altertable_adapter` (identity, month, bucket)
- `readings`   merge on `reading_id` with a plain `partition: true` column hint on `site`
- `feed`       append with the incremental cursor `seq` and a resource state value `steps`
               (the steps that ran, kept in the pipeline state): step 2 repeats the row at
               the cursor; step 3 runs on an empty pipelines_dir after the state is
               restored from the destination and yields rows below, at and above the
               restored cursor (only those above are new)
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import dlt

from dlt_altertable import altertable_adapter, altertable_partition

UTC = dt.UTC


def ts(day: int, hour: int = 0) -> dt.datetime:
    return dt.datetime(2024, 1, day, hour, tzinfo=UTC)


def _events(step: int) -> list[dict[str, Any]]:
    if step == 1:
        return [
            {
                "id": 1,
                "kind": "click",
                "at": ts(1, 10),
                "tags": [{"k": "a", "v": 1}, {"k": "b", "v": 2}],
            },
            {"id": 2, "kind": "view", "at": ts(1, 11), "tags": []},
            {"id": 3, "kind": "click", "at": ts(2, 9), "tags": [{"k": "c", "v": 3}]},
        ]
    return [
        {
            "id": 4,
            "kind": "buy",
            "at": ts(3, 8),
            "channel": "web",
            "amount": Decimal("12.50"),
            "tags": [{"k": "a", "v": 5, "weight": 0.5}],
        },
        {
            "id": 1,
            "kind": "click",
            "at": ts(3, 9),
            "channel": "app",
            "tags": [{"k": "z", "v": 9}],
        },
    ]


def _snapshot(step: int) -> list[dict[str, Any]]:
    if step == 1:
        return [
            {
                "sku": "A",
                "qty": 5,
                "lines": [{"wh": "north", "n": 2}, {"wh": "south", "n": 3}],
            },
            {"sku": "B", "qty": 1, "lines": [{"wh": "north", "n": 1}]},
            {"sku": "C", "qty": 0, "lines": []},
        ]
    return [
        {"sku": "A", "qty": 7, "status": "ok", "lines": [{"wh": "east", "n": 7}]},
        {"sku": "D", "qty": 2, "status": "new", "lines": []},
    ]


def _customers(step: int) -> list[dict[str, Any]]:
    if step == 1:
        return [
            {"id": 1, "email": "ada@example.com", "name": "Ada", "updated_at": 10},
            {"id": 2, "email": "grace@old.example", "name": "Grace", "updated_at": 5},
            {"id": 2, "email": "grace@example.com", "name": "Grace", "updated_at": 7},
            {"id": 3, "email": "alan@example.com", "name": "Alan", "updated_at": 3},
            {"id": 4, "email": "edsger@example.com", "name": "Edsger", "updated_at": 1},
        ]
    return [
        # newer: wins; adds the new column
        {
            "id": 1,
            "email": "ada@new.example",
            "name": "Ada L.",
            "updated_at": 11,
            "tier": "gold",
        },
        # stale: dropped
        {
            "id": 2,
            "email": "stale@example.com",
            "name": "Stale",
            "updated_at": 6,
            "tier": "x",
        },
        # equal cursor: the stored row wins
        {
            "id": 3,
            "email": "tie@example.com",
            "name": "Tie",
            "updated_at": 3,
            "tier": "x",
        },
        # new key
        {
            "id": 5,
            "email": "barbara@example.com",
            "name": "Barbara",
            "updated_at": 2,
            "tier": "silver",
        },
    ]


def _orders(step: int) -> list[dict[str, Any]]:
    if step == 1:
        return [
            {
                "order_id": 10,
                "version": 1,
                "is_deleted": False,
                "total": 30.0,
                "items": [
                    {"sku": "A", "qty": 1, "discounts": [{"code": "NEW", "pct": 10}]},
                    {"sku": "B", "qty": 2, "discounts": []},
                ],
            },
            {
                "order_id": 11,
                "version": 1,
                "is_deleted": False,
                "total": 5.0,
                "items": [
                    {"sku": "C", "qty": 1, "discounts": [{"code": "X", "pct": 5}]}
                ],
            },
            {
                "order_id": 12,
                "version": 1,
                "is_deleted": False,
                "total": 12.0,
                "items": [
                    {"sku": "A", "qty": 1},
                    {"sku": "B", "qty": 1},
                    {"sku": "C", "qty": 1},
                ],
            },
            {
                "order_id": 13,
                "version": 1,
                "is_deleted": False,
                "total": 1.0,
                "items": [{"sku": "D", "qty": 1}],
            },
        ]
    return [
        # newer, fewer items, discount gone, new root column
        {
            "order_id": 10,
            "version": 2,
            "is_deleted": False,
            "total": 10.0,
            "currency": "EUR",
            "items": [{"sku": "A", "qty": 1, "discounts": []}],
        },
        # deleted (newer): the order and all its nested rows go
        {"order_id": 11, "version": 2, "is_deleted": True, "total": 5.0, "items": []},
        # stale: ignored, its items too
        {
            "order_id": 12,
            "version": 0,
            "is_deleted": False,
            "total": 99.0,
            "items": [{"sku": "Z", "qty": 9}],
        },
        # new, with a new nested list
        {
            "order_id": 14,
            "version": 1,
            "is_deleted": False,
            "total": 3.0,
            "currency": "USD",
            "items": [
                {"sku": "E", "qty": 3, "discounts": [{"code": "VIP", "pct": 20}]}
            ],
            "notes": [{"text": "gift wrap"}, {"text": "leave at door"}],
        },
        # new but arriving deleted: never inserted
        {
            "order_id": 15,
            "version": 1,
            "is_deleted": True,
            "total": 0.0,
            "items": [{"sku": "F", "qty": 1}],
        },
    ]


def _tombstones(step: int) -> list[dict[str, Any]]:
    if step == 1:
        return [
            {"tenant": "a", "id": 1, "v": "a1"},
            {"tenant": "a", "id": 2, "v": "a2"},
            {"tenant": "b", "id": 1, "v": "b1"},
        ]
    return [
        {"tenant": "a", "id": 1, "v": "a1", "deleted_at": ts(5)},
        {"tenant": "b", "id": 1, "v": "b1-updated"},
        {"tenant": "c", "id": 9, "v": "never", "deleted_at": ts(5)},
        {"tenant": "b", "id": 2, "v": "b2"},
    ]


def _metrics(step: int) -> list[dict[str, Any]]:
    if step == 1:
        return [
            {"region": "eu", "ts": ts(1, 1), "id": 1, "value": 1.5},
            {
                "region": "us",
                "ts": dt.datetime(2024, 2, 1, tzinfo=UTC),
                "id": 2,
                "value": 2.5,
            },
        ]
    return [
        {
            "region": "eu",
            "ts": dt.datetime(2024, 3, 1, tzinfo=UTC),
            "id": 3,
            "value": 3.5,
            "unit": "ms",
        }
    ]


def _readings(step: int) -> list[dict[str, Any]]:
    if step == 1:
        return [
            {"reading_id": 1, "site": "A", "value": 1.0, "day": dt.date(2024, 1, 1)},
            {"reading_id": 2, "site": "B", "value": 2.0, "day": dt.date(2024, 1, 1)},
        ]
    return [
        {"reading_id": 1, "site": "A", "value": 1.25, "day": dt.date(2024, 1, 2)},
        {"reading_id": 3, "site": "B", "value": 3.0, "day": dt.date(2024, 1, 2)},
    ]


# the `seq` values the feed yields per step (the cursor after step 1 is 3, after step 2 is 5)
FEED_SEQ = {1: [1, 2, 3], 2: [3, 4, 5], 3: [4, 5, 6, 7]}


def _feed(step: int) -> list[dict[str, Any]]:
    return [{"seq": n, "label": f"item-{n}"} for n in FEED_SEQ[step]]


@dlt.source(name="diff")
def differential_source(step: int):
    @dlt.resource(name="events", write_disposition="append")
    def events():
        yield _events(step)

    @dlt.resource(name="snapshot", write_disposition="replace")
    def snapshot():
        yield _snapshot(step)

    @dlt.resource(
        name="customers",
        write_disposition="merge",
        primary_key="id",
        columns={
            "updated_at": {
                "dedup_sort": "desc",
                "description": "last change, the merge cursor",
            },
            "email": {"description": "primary e-mail address"},
        },
    )
    def customers():
        yield _customers(step)

    @dlt.resource(
        name="orders",
        write_disposition="merge",
        primary_key="order_id",
        columns={
            "version": {"dedup_sort": "desc"},
            "is_deleted": {"hard_delete": True, "data_type": "bool"},
        },
    )
    def orders():
        yield _orders(step)

    @dlt.resource(
        name="tombstones",
        write_disposition="merge",
        primary_key=("tenant", "id"),
        columns={"deleted_at": {"hard_delete": True, "data_type": "timestamp"}},
    )
    def tombstones():
        yield _tombstones(step)

    @dlt.resource(name="metrics", write_disposition="append")
    def metrics():
        yield _metrics(step)

    @dlt.resource(
        name="readings",
        write_disposition="merge",
        primary_key="reading_id",
        columns={"site": {"partition": True, "data_type": "text"}},
    )
    def readings():
        yield _readings(step)

    @dlt.resource(
        name="feed",
        write_disposition="append",
        incremental=dlt.sources.incremental("seq"),
    )
    def feed():
        state = dlt.current.resource_state()
        state["steps"] = [*state.get("steps", []), step]
        yield _feed(step)

    described = customers()
    described.apply_hints(
        additional_table_hints={"description": "people who buy things"}
    )
    partitioned = altertable_adapter(
        metrics(),
        partition=[
            "region",
            altertable_partition.month("ts"),
            altertable_partition.bucket(4, "id"),
        ],
    )
    return [
        events(),
        snapshot(),
        described,
        orders(),
        tombstones(),
        partitioned,
        readings(),
        feed(),
    ]


# (table, primary key columns) of the root tables, for the comparison's messages
ROOT_TABLES = [
    "events",
    "snapshot",
    "customers",
    "orders",
    "tombstones",
    "metrics",
    "readings",
    "feed",
]

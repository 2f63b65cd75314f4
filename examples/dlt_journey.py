"""An example dlt journey into the lakehouse server: append, replace and merge, then read back.

Usage (server already running, e.g. `deltalite serve --users demo:demo --catalogs lakehouse`):

    ALTERTABLE_URL=http://127.0.0.1:15000 ALTERTABLE_USERNAME=demo ALTERTABLE_PASSWORD=demo \
        python examples/dlt_journey.py

`ALTERTABLE_URL` (or ALTERTABLE_HOST/PORT/TLS), `ALTERTABLE_CATALOG` (default `lakehouse`) and
`ALTERTABLE_SCHEMA` (default `dlt_journey`) are read from the environment.
"""

import os
import sys
from urllib.parse import urlparse

import dlt

from dlt_altertable import altertable


def destination():
    url = os.environ.get("ALTERTABLE_URL")
    kwargs = {}
    if url:
        parsed = urlparse(url)
        kwargs = {
            "host": parsed.hostname,
            "port": parsed.port or (443 if parsed.scheme == "https" else 80),
            "tls": parsed.scheme == "https",
        }
    return altertable(
        catalog=os.environ.get("ALTERTABLE_CATALOG", "lakehouse"),
        dataset_name=os.environ.get("ALTERTABLE_SCHEMA", "dlt_journey"),
        **kwargs,
    )


@dlt.resource(name="events", write_disposition="append")
def events(day: int):
    yield [
        {"id": day * 10 + i, "day": day, "kind": "click" if i % 2 else "view"}
        for i in range(3)
    ]


@dlt.resource(name="plans", write_disposition="replace")
def plans(version: int):
    yield [
        {"plan": name, "price": price * version}
        for name, price in (("free", 0), ("pro", 10))
    ]


@dlt.resource(
    name="contacts",
    write_disposition="merge",
    primary_key="id",
    columns={"lastmodifieddate": {"dedup_sort": "desc"}},
)
def contacts(rows):
    yield rows


def show(pipeline, sql: str) -> None:
    with pipeline.sql_client() as client:
        rows = client.execute_sql(sql)
    print(f"  {sql}")
    for row in rows:
        print(f"    {row}")


def main() -> int:
    pipeline = dlt.pipeline(
        pipeline_name="dlt_journey",
        destination=destination(),
        pipelines_dir=os.environ.get("DLT_JOURNEY_PIPELINES_DIR"),
    )
    print("1. append two days of events, replace the price list twice, merge contacts")
    pipeline.run([events(1), plans(1)])
    pipeline.run([events(2), plans(2)])
    pipeline.run(
        contacts(
            [
                {"id": 1, "email": "ada@example.com", "lastmodifieddate": 100},
                {"id": 2, "email": "grace@example.com", "lastmodifieddate": 100},
            ]
        )
    )
    info = pipeline.run(
        contacts(
            [
                {"id": 1, "email": "ada@new.example.com", "lastmodifieddate": 200},
                {"id": 2, "email": "stale@example.com", "lastmodifieddate": 50},
                {"id": 3, "email": "linus@example.com", "lastmodifieddate": 10},
            ]
        )
    )
    print(info)
    print("2. read back through /query")
    show(pipeline, "SELECT day, count(*) FROM events GROUP BY day ORDER BY day")
    show(pipeline, "SELECT plan, price FROM plans ORDER BY plan")
    show(pipeline, "SELECT id, email, lastmodifieddate FROM contacts ORDER BY id")
    contacts_table = pipeline.dataset().table("contacts").arrow()
    print(f"3. pipeline.dataset(): contacts has {contacts_table.num_rows} rows")
    print(f"   schema: {contacts_table.schema}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

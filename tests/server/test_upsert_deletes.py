"""`/upsert?delete_column=`: marked rows remove their key under the cursor rule, through a
real server process; a new table never stores them; a bad delete column is a 400 that
leaves the table as it was."""

import pytest
from conftest import Client

TABLE = "lakehouse.dels.t"


def post(server, params: str, rows: list[dict]) -> tuple[int, dict | str]:
    """(status, the JSON summary, or an error's text)."""
    return Client(server).upsert(
        f"catalog=lakehouse&schema=dels&table=t&{params}", rows
    )


def contents(client) -> list[tuple]:
    return client.rows(f"SELECT id, c, v, deleted FROM {TABLE} ORDER BY id")


@pytest.fixture(scope="module")
def loaded(server, client):
    # A new table: the marked row (id 9) has no key to remove and is not stored.
    status, body = post(
        server,
        "primary_key=id&cursor_field=c&delete_column=deleted",
        [
            {"id": 1, "c": 5, "v": "a", "deleted": False},
            {"id": 2, "c": 5, "v": "b", "deleted": None},
            {"id": 3, "c": 5, "v": "c", "deleted": False},
            {"id": 9, "c": 5, "v": "z", "deleted": True},
        ],
    )
    assert (status, body["ok"], body["rows"]) == (200, True, 3), body
    assert contents(client) == [
        (1, 5, "a", False),
        (2, 5, "b", None),
        (3, 5, "c", False),
    ]
    return body["version"]


def test_marked_rows_remove_newer_keys_only(server, client, loaded):
    status, body = post(
        server,
        "primary_key=id&cursor_field=c&delete_column=deleted",
        [
            {"id": 1, "c": 6, "v": "x", "deleted": True},  # newer delete: removed
            {"id": 2, "c": 4, "v": "x", "deleted": True},  # stale delete: kept
            {"id": 3, "c": 6, "v": "c2", "deleted": False},  # newer update
            {"id": 4, "c": 1, "v": "x", "deleted": True},  # unknown key: nothing
        ],
    )
    assert (status, body["ok"], body["version"]) == (200, True, loaded + 1), body
    # rows: one update plus one delete
    assert body["rows"] == 2, body
    assert contents(client) == [(2, 5, "b", None), (3, 6, "c2", False)]


def test_a_delete_column_the_file_lacks_is_refused_and_changes_nothing(
    server, client, loaded
):
    before = contents(client)
    status, body = post(
        server,
        "primary_key=id&delete_column=gone",
        [{"id": 2, "c": 9, "v": "y", "deleted": True}],
    )
    assert (status, body) == (
        400,
        'Failed to execute ingest: column "gone" is not in the uploaded file\n',
    )
    assert contents(client) == before

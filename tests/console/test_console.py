"""The web console in headless Chromium against a real server: sign in, browse, query,
chart, errors, cancel, history, download, upload, sign out; the session's rules at the
HTTP level; another user's catalogs; a million-row result scrolled with the tab's memory
measured."""

from __future__ import annotations

import http.client
import io
import json
import time
import urllib.error
import urllib.request

import pyarrow.parquet as pq
import pytest
from certs import self_signed
from conftest import ARTIFACTS, USERS, PrefixProxy, ServerProcess, sql
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

SLOW = "SELECT sum(range % 7) FROM range(1, 100000000000)"


def test_wrong_credentials_are_refused(server, browser):
    browser.sign_in(server.base, "alice", "wrong")
    assert browser.text_in("#signin-error", "Wrong user name or password.")
    assert browser.find("#app").get_attribute("hidden") is not None
    assert browser.driver.get_cookies() == []
    browser.shot("refused")


def test_sign_in_browse_query_chart_history_upload(server, browser, tmp_path):
    b = browser
    b.sign_in(server.base, "alice", "secret")
    b.visible("#app")
    assert b.text_in("#whoami", "alice")
    cookie = b.driver.get_cookie("deltalite_session")
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    # Alice's catalogs only.
    b.visible(".tree .node[data-kind=c]")
    assert [
        n.get_attribute("data-name") for n in b.finds(".tree .node[data-kind=c]")
    ] == ["lakehouse"]
    b.shot("signed-in")

    # Browse: catalog → schema → table, then the table's page.
    b.find(".tree .node[data-name=lakehouse]").click()
    b.visible(".tree .node[data-name=main]").click()
    b.visible(".tree .node[data-name=events]").click()
    b.visible("#view-table")
    assert b.text_in("#table-title", "lakehouse.main.events")
    b.wait().until(lambda d: "3" in b.find("#table-cards .stat .value").text)
    cards = {
        c.find_element(By.CSS_SELECTOR, ".label").text: c.find_element(
            By.CSS_SELECTOR, ".value"
        ).text
        for c in b.finds("#table-cards .stat")
    }
    assert cards["Rows"] == "3" and cards["Files"] == "1" and cards["Version"] == "0"
    assert cards["Partitioned by"] == "—"
    columns = [r.text for r in b.finds("#table-columns tr")][1:]
    assert [c.split()[0:2] for c in columns] == [
        ["id", "BIGINT"],
        ["kind", "VARCHAR"],
        ["amount", "DECIMAL(4,2)"],
        ["day", "DATE"],
    ]
    history = [r.text for r in b.finds("#table-history tr")][1:]
    assert len(history) == 1 and history[0].startswith("0 ")
    assert history[0].endswith("CREATE TABLE"), history
    b.wait().until(lambda d: len(b.cells("#table-preview")) == 3)
    assert b.cells("#table-preview")[0] == ["1", "signup", "3.5", "2026-01-01"]
    b.shot("table")

    # Query, with the result in the grid; completion offers the tree's columns and
    # /autocomplete's keywords and tables.
    b.find("#table-query").click()
    b.visible("#view-query")
    b.set_sql("")
    b.find(".CodeMirror textarea").send_keys("SELECT am")
    hints = [
        h.text for h in b.visible(".CodeMirror-hints").find_elements(By.TAG_NAME, "li")
    ]
    assert hints[0] == "amount  · column DECIMAL(4,2)", hints
    b.set_sql("")
    b.find(".CodeMirror textarea").send_keys("SELECT * FROM even")
    b.wait().until(
        lambda d: "events  · table" in [h.text for h in b.finds(".CodeMirror-hints li")]
    )
    b.shot("completion")
    b.find(".CodeMirror textarea").send_keys(Keys.ESCAPE)
    b.run("SELECT kind, amount FROM lakehouse.main.events ORDER BY amount DESC")
    assert b.text_in("#status", "3 rows")
    assert b.cells() == [["purchase", "12"], ["login", "7.25"], ["signup", "3.5"]]
    b.shot("query")

    # A chart of it: bars of amount per kind, chosen from the column types.
    b.find(".seg[data-result=chart]").click()
    b.visible("#chart")
    b.wait().until(lambda d: b.js("return !!Chart.getChart('chart')"))
    chart = b.js(
        "const c = Chart.getChart('chart'); return [c.config.type, c.data.labels, c.data.datasets[0].data]"
    )
    assert chart == ["bar", ["purchase", "login", "signup"], [12, 7.25, 3.5]]
    assert b.find("#chart-note").text == "3 rows"
    b.shot("chart")
    # Over time: a line; two numbers: a scatter.
    b.run("SELECT day, amount FROM lakehouse.main.events ORDER BY day")
    b.wait().until(
        lambda d: b.js("return Chart.getChart('chart')?.config.type") == "line"
    )
    assert b.js("return Chart.getChart('chart').data.labels") == [
        "2026-01-01",
        "2026-01-02",
        "2026-01-03",
    ]
    b.run("SELECT id, amount FROM lakehouse.main.events ORDER BY id")
    b.wait().until(
        lambda d: b.js("return Chart.getChart('chart')?.config.type") == "scatter"
    )
    assert b.js("return Chart.getChart('chart').data.datasets[0].data") == [
        {"x": 1, "y": 3.5},
        {"x": 2, "y": 7.25},
        {"x": 3, "y": 12},
    ]
    b.find(".seg[data-result=grid]").click()

    # An error, shown with its message and where it happened.
    b.run("SELECT nope\nFROM lakehouse.main.events")
    assert b.text_in("#status", "Failed")
    message = b.visible("#error-box").text
    assert message.startswith("Binder Error: No field named nope."), message
    # Marked where it happened: `nope` on the first line.
    mark = b.js(
        """const m = document.querySelector('.CodeMirror').CodeMirror.getAllMarks()[0].find();
           return [m.from.line, m.from.ch, m.to.line, m.to.ch]"""
    )
    assert mark == [0, 7, 0, 11]
    assert b.find(".cm-error-mark").text == "nope"
    b.shot("error")
    # A table that does not exist, on the second line.
    b.run("SELECT 1\nFROM lakehouse.main.missing_table")
    assert b.text_in("#status", "Failed")
    b.wait().until(lambda d: b.finds(".cm-error-mark"))
    assert b.find(".cm-error-mark").text == "missing_table", b.find("#error-box").text

    # Cancel a long statement: the server stops it, the page says so.
    b.run(SLOW)
    b.text_in("#status", "Running")
    time.sleep(1)
    started = time.monotonic()
    b.find("#cancel").click()
    assert b.text_in("#status", "Cancelled", timeout=30)
    assert time.monotonic() - started < 20
    assert (
        "Query cancelled" in b.find("#error-box").text
        or "cancel" in b.find("#error-box").text.lower()
    )
    b.shot("cancelled")

    # History: the user's statements, newest first, with their outcome; run one again.
    b.find(".tab[data-view=history]").click()
    b.wait().until(lambda d: len(b.finds("#history-table .history-row")) >= 3)
    rows = [r.text for r in b.finds("#history-table .history-row")]
    assert rows[0].startswith("cancelled") and "range(1, 100000000000)" in rows[0]
    assert rows[1].startswith("failed") and "missing_table" in rows[1]
    assert rows[2].startswith("failed") and "nope" in rows[2]
    assert rows[3].startswith("ok") and "ORDER BY id" in rows[3]
    assert rows[5].startswith("ok") and "ORDER BY amount DESC" in rows[5]
    # The tree's metadata queries are not in it.
    assert not any("information_schema" in r for r in rows)
    b.shot("history")
    b.finds("#history-table .history-row")[5].find_element(
        By.CSS_SELECTOR, "button"
    ).click()
    b.visible("#view-query")
    assert b.text_in("#status", "3 rows")
    assert b.cells()[0] == ["purchase", "12"]

    # Download the result as CSV (a one-time ticket plus the cookie).
    downloads = ARTIFACTS / "downloads"
    for f in downloads.glob("result*.csv"):
        f.unlink()
    b.find("#download-csv").click()
    deadline = time.monotonic() + 20
    while not list(downloads.glob("result*.csv")) and time.monotonic() < deadline:
        time.sleep(0.2)
    (csv,) = list(downloads.glob("result*.csv"))
    time.sleep(0.5)
    assert csv.read_text() == "kind,amount\npurchase,12.00\nlogin,7.25\nsignup,3.50\n"

    # Upload a CSV into a new table, with the progress bar and the commit's result.
    source = tmp_path / "orders.csv"
    source.write_text("order_id,total\n10,99.5\n11,5.25\n12,1.0\n")
    b.find("#open-upload").click()
    b.visible("#upload-dialog")
    b.js("document.getElementById('upload-file').hidden = false")
    b.find("#upload-file").send_keys(str(source))
    assert b.find("#upload-table").get_attribute("value") == "orders"
    b.find("#upload-submit").click()
    assert b.text_in(
        "#upload-result", "Done: 3 rows written, table version 0, table created."
    )
    assert b.find("#upload-progress").get_attribute("value") == "100"
    b.shot("upload")
    assert sql(
        server.base, "SELECT * FROM lakehouse.main.orders ORDER BY order_id"
    ) == [
        [10, 99.5],
        [11, 5.25],
        [12, 1.0],
    ]
    b.find("#upload-close").click()
    b.visible("#view-query")

    # Drop a JSON file on the new table in the tree: an upsert by order_id.
    b.find("#refresh-tree").click()
    b.visible(".tree .node[data-name=lakehouse]").click()
    b.visible(".tree .node[data-name=main]").click()
    node = b.visible(".tree .node[data-name=orders]")
    b.js(
        """const dt = new DataTransfer();
           dt.items.add(new File([arguments[1]], 'changes.json', {type: 'application/json'}));
           arguments[0].dispatchEvent(new DragEvent('drop', {bubbles: true, cancelable: true, dataTransfer: dt}));""",
        node,
        '[{"order_id": 11, "total": 6.5}, {"order_id": 13, "total": 40.0}]',
    )
    b.visible("#upload-dialog")
    assert b.find("#upload-table").get_attribute("value") == "orders"
    assert b.find("#upload-mode").get_attribute("value") == "append"
    b.js(
        "const m = document.getElementById('upload-mode'); m.value = 'upsert'; m.dispatchEvent(new Event('change'))"
    )
    b.visible("#upload-key").send_keys("order_id")
    b.find("#upload-submit").click()
    assert b.text_in("#upload-result", "Done: 2 rows written, table version 1.")
    b.shot("upsert")
    assert sql(
        server.base, "SELECT * FROM lakehouse.main.orders ORDER BY order_id"
    ) == [
        [10, 99.5],
        [11, 6.5],
        [12, 1.0],
        [13, 40.0],
    ]
    b.find("#upload-close").click()

    # Sign out: the page returns to the form and the old session is dead.
    old = b.driver.get_cookie("deltalite_session")["value"]
    csrf = b.js("return document.cookie")  # HttpOnly: the page cannot see the cookie
    assert "deltalite_session" not in csrf
    b.find("#signout").click()
    b.visible("#signin")
    status, _ = console_get(server, "console/history", cookie=old, csrf="x")
    assert status == 401


def test_another_user_sees_only_their_catalogs_and_views(server, browser):
    sql(
        server.base,
        "CREATE OR REPLACE VIEW bobs.main.notes AS SELECT note FROM bobs.main.secrets",
        user="bob",
        password="hunter2",
    )
    b = browser
    b.sign_in(server.base, "bob", "hunter2")
    b.visible(".tree .node[data-kind=c]")
    assert [
        n.get_attribute("data-name") for n in b.finds(".tree .node[data-kind=c]")
    ] == ["bobs"]
    b.find(".tree .node[data-name=bobs]").click()
    b.visible(".tree .node[data-name=main]").click()
    b.visible(".tree .node[data-name=notes]")
    kinds = {
        n.get_attribute("data-name"): n.get_attribute("data-kind")
        for n in b.finds(".tree .node[data-kind=t], .tree .node[data-kind=v]")
    }
    assert kinds == {"notes": "v", "secrets": "t"}
    # A view's page: its columns and rows, no Delta log.
    b.find(".tree .node[data-name=notes]").click()
    b.wait().until(lambda d: b.cells("#table-preview") == [["only bob"]])
    cards = [c.text for c in b.finds("#table-cards .stat")]
    assert cards == ["Rows\n1", "Kind\nview"]
    assert [r.text for r in b.finds("#table-columns tr")][1:] == ["note VARCHAR yes"]
    b.shot("view")
    b.find(".tab[data-view=query]").click()
    assert [o.text for o in b.finds("#ctx-catalog option")] == ["bobs"]
    b.run("SELECT * FROM lakehouse.main.events")
    assert b.text_in("#status", "Failed")
    assert "lakehouse" in b.find("#error-box").text
    b.shot("bob")


def console_get(server, path: str, *, cookie: str | None, csrf: str | None):
    host, port = server.addr
    conn = http.client.HTTPConnection(host, port, timeout=30)
    headers = {}
    if cookie is not None:
        headers["Cookie"] = f"deltalite_session={cookie}"
    if csrf is not None:
        headers["X-Deltalite-Csrf"] = csrf
    conn.request("GET", "/" + path, headers=headers)
    response = conn.getresponse()
    return response.status, (response.read(), response.headers)


def login(server, user: str, password: str):
    request = urllib.request.Request(
        f"{server.base}/console/login",
        data=json.dumps({"user": user, "password": password}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
        set_cookie = response.headers["Set-Cookie"]
    token = set_cookie.split(";")[0].split("=", 1)[1]
    return token, body["csrf"], set_cookie, body


def new_ticket(conn, result_id: str, token: str, csrf: str) -> str:
    """A download ticket for a result, asked for with the session's cookie and token."""
    conn.request(
        "POST",
        f"/console/results/{result_id}/ticket",
        headers={"Cookie": f"deltalite_session={token}", "X-Deltalite-Csrf": csrf},
    )
    return json.loads(conn.getresponse().read())["ticket"]


def test_the_session_cookie_needs_its_csrf_token(server):
    token, csrf, set_cookie, body = login(server, "alice", "secret")
    assert body == {"user": "alice", "catalogs": ["lakehouse"], "csrf": csrf}
    attributes = [a.strip() for a in set_cookie.split(";")]
    assert "HttpOnly" in attributes and "SameSite=Strict" in attributes
    assert "Path=/" in attributes and "Max-Age=28800" in attributes
    assert "Secure" not in attributes  # plain HTTP here
    # The cookie alone: refused, without a Basic challenge (no browser dialog).
    for headers in ({"cookie": token, "csrf": None}, {"cookie": token, "csrf": ""}):
        status, (text, response_headers) = console_get(
            server, "console/history", **headers
        )
        if headers["csrf"] is None:
            # Not a console request at all: the API's own Basic challenge.
            assert (
                status == 401
                and response_headers["WWW-Authenticate"] == 'Basic realm="lakehouse"'
            )
        else:
            assert status == 401 and "WWW-Authenticate" not in response_headers
            assert json.loads(text) == {
                "error": "Not signed in, or the session has expired"
            }
    # Another session's CSRF token does not fit this cookie.
    _, other_csrf, _, _ = login(server, "alice", "secret")
    assert (
        console_get(server, "console/history", cookie=token, csrf=other_csrf)[0] == 401
    )
    # The pair works, for every API route.
    status, (text, _) = console_get(server, "console/history", cookie=token, csrf=csrf)
    assert status == 200 and isinstance(json.loads(text), list)
    status, (text, _) = console_get(server, "metrics", cookie=token, csrf=csrf)
    assert status == 200 and b"deltalite_console_sessions" in text
    # Wrong password: 401, no cookie.
    request = urllib.request.Request(
        f"{server.base}/console/login",
        data=json.dumps({"user": "alice", "password": "nope"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401 and refused.value.headers["Set-Cookie"] is None
    assert json.loads(refused.value.read()) == {"error": "Wrong user name or password"}
    # A download ticket works once, with its user's cookie only.
    host, port = server.addr
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request(
        "POST",
        "/console/run",
        body=json.dumps({"statement": "SELECT 1 AS one, 'a,b' AS two"}),
        headers={
            "Cookie": f"deltalite_session={token}",
            "X-Deltalite-Csrf": csrf,
            "Content-Type": "application/json",
        },
    )
    run = json.loads(conn.getresponse().read())
    assert run["rows"] == 1 and run["columns"] == [
        {"name": "one", "type": "INTEGER"},
        {"name": "two", "type": "VARCHAR"},
    ]
    ticket = new_ticket(conn, run["result_id"], token, csrf)
    path = f"console/download?ticket={ticket}&format=csv"
    bob, bob_csrf, _, _ = login(server, "bob", "hunter2")
    assert console_get(server, path, cookie=bob, csrf=None)[0] == 404
    # Refused once is used up, even for the right user.
    assert console_get(server, path, cookie=token, csrf=None)[0] == 404
    ticket = new_ticket(conn, run["result_id"], token, csrf)
    path = f"console/download?ticket={ticket}&format=csv"
    status, (text, headers) = console_get(server, path, cookie=token, csrf=None)
    assert status == 200 and text == b'one,two\n1,"a,b"\n'
    assert headers["Content-Disposition"] == 'attachment; filename="result.csv"'
    ticket = new_ticket(conn, run["result_id"], token, csrf)
    path = f"console/download?ticket={ticket}&format=parquet"
    status, (data, headers) = console_get(server, path, cookie=token, csrf=None)
    assert status == 200 and data[:4] == b"PAR1"
    table = pq.read_table(io.BytesIO(data))
    assert table.to_pylist() == [{"one": 1, "two": "a,b"}]
    # Another user cannot read the result's pages.
    status, _ = console_get(
        server,
        f"console/results/{run['result_id']}?offset=0",
        cookie=bob,
        csrf=bob_csrf,
    )
    assert status == 404
    # Nor another user's table page.
    path = "console/table?catalog=lakehouse&schema=main&table=events"
    status, (text, _) = console_get(server, path, cookie=bob, csrf=bob_csrf)
    assert status == 404 and text == b"Table lakehouse.main.events not found\n"
    status, (text, _) = console_get(server, path, cookie=token, csrf=csrf)
    assert status == 200 and json.loads(text)["columns"][0] == {
        "name": "id",
        "type": "BIGINT",
        "nullable": True,
        "comment": None,
    }
    # Signing out ends the session.
    conn.request(
        "POST",
        "/console/logout",
        headers={"Cookie": f"deltalite_session={token}", "X-Deltalite-Csrf": csrf},
    )
    response = conn.getresponse()
    response.read()
    assert response.status == 204 and "Max-Age=0" in response.headers["Set-Cookie"]
    assert console_get(server, "console/history", cookie=token, csrf=csrf)[0] == 401


def test_the_page_is_hardened(server):
    host, port = server.addr
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", "/")
    response = conn.getresponse()
    page = response.read().decode()
    assert response.status == 200 and "<title>deltalite console</title>" in page
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    # Every asset the page names is served; relative, so a path prefix works.
    for src in (
        "console/assets/app.js",
        "console/assets/grid.js",
        "console/assets/vendor/codemirror.js",
    ):
        assert f'"{src}"' in page
        conn.request("GET", "/" + src)
        r = conn.getresponse()
        assert r.status == 200 and r.headers["Content-Type"].startswith(
            "text/javascript"
        ), src
        r.read()
    conn.request("GET", "/console/assets/../../Cargo.toml")
    r = conn.getresponse()
    r.read()
    assert r.status == 404


def test_a_million_rows_scroll_in_bounded_memory(server, browser):
    b = browser
    b.sign_in(server.base, "alice", "secret")
    b.visible("#app")
    b.run(
        "SELECT range, range * 2 AS doubled, 'row ' || range AS label FROM range(1000000) ORDER BY range"
    )
    assert b.text_in("#status", "1,000,000 rows", timeout=120)
    b.wait().until(lambda d: b.cells() and b.cells()[0] == ["0", "0", "row 0"])
    before, nodes_before = b.heap_mb(), b.dom_nodes()
    scroller = "document.querySelector('#result-grid .grid')"
    # Drag the scrollbar: 40 jumps across the result, then to the end.
    height = b.js(f"return {scroller}.scrollHeight - {scroller}.clientHeight")
    peak_rows = peak_dom = 0
    for step in range(41):
        b.js(f"{scroller}.scrollTop = arguments[0]", height * step // 40)
        expected = 999_999 * step // 40

        def settled(d, expected=expected):
            cells = b.cells()
            if not cells or any(c[0] == "…" for c in cells):
                return False
            return abs(int(cells[len(cells) // 2][0]) - expected) < 60

        b.wait(30).until(settled)
        peak_dom = max(peak_dom, len(b.finds("#result-grid .grid-row")))
        peak_rows = max(peak_rows, b.js("return window.deltaliteConsole.heldRows()"))
    last = b.cells()[-1]
    assert last == ["999999", "1999998", "row 999999"]
    after = b.heap_mb()
    nodes = b.dom_nodes()
    b.shot("million")
    print(
        f"\nmillion-row grid: JS heap {before:.1f} MB before scrolling, {after:.1f} MB after "
        f"41 jumps; at most {peak_dom} rows in the DOM ({nodes_before} DOM nodes in the page before, {nodes} after), "
        f"{peak_rows} held"
    )
    # The bound: what the page holds is the rows on screen plus 16 pages of 500.
    assert peak_dom <= 60
    assert 0 < peak_rows <= 16 * 500
    assert after - before < 20, (before, after)
    assert nodes - nodes_before < 1_000, (nodes_before, nodes)


def test_behind_a_reverse_proxy_under_a_path_prefix(server, browser):
    proxy = PrefixProxy(server.addr, "lake")
    try:
        b = browser
        b.sign_in(proxy.base, "alice", "secret")
        b.visible(".tree .node[data-name=lakehouse]").click()
        b.visible(".tree .node[data-name=main]")
        b.run("SELECT count(*) AS n FROM lakehouse.main.events")
        assert b.text_in("#status", "1 row")
        assert b.cells() == [["3"]]
        b.shot("prefix")
        # Every request went through the prefix: the page, its assets and the API.
        assert "/lake/" in proxy.paths and "/lake/console/login" in proxy.paths
        assert "/lake/console/assets/app.js" in proxy.paths
        assert "/lake/query" in proxy.paths and "/lake/console/run" in proxy.paths
    finally:
        proxy.close()


def test_over_tls(browser, tmp_path):
    cert, key = self_signed(tmp_path)
    with ServerProcess(
        users=USERS, args=["--tls-cert", str(cert), "--tls-key", str(key)]
    ) as tls:
        assert tls.base.startswith("https://")
        b = browser
        b.sign_in(tls.base, "alice", "secret")
        b.visible("#app")
        cookie = b.driver.get_cookie("deltalite_session")
        assert cookie["secure"] is True and cookie["httpOnly"] is True
        b.run("SELECT 'over tls' AS how")
        assert b.text_in("#status", "1 row")
        assert b.cells() == [["over tls"]]
        b.shot("tls")

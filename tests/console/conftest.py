"""The console's browser tests: a real `deltalite serve` and Debian's Chromium driven by
Selenium (headless). Screenshots of every step go to `$CONSOLE_ARTIFACTS` (default
`target/console-screenshots`)."""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import os
import shutil
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "harness"))
from server_process import ServerProcess

ARTIFACTS = Path(
    os.environ.get("CONSOLE_ARTIFACTS", REPO / "target" / "console-screenshots")
)
USERS = (("alice", "secret"), ("bob", "hunter2"))
GRANTS = {"alice": ["lakehouse"], "bob": ["bobs"]}


def api_request(
    base: str,
    path: str,
    *,
    user: str = "alice",
    password: str = "secret",
    body: dict | None = None,
    method: str | None = None,
) -> tuple[int, bytes]:
    """A Basic-authenticated API request: (status, body)."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(
        f"{base}/{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def sql(base: str, statement: str, **kw) -> list[list]:
    """Run `statement` over `/query`; its rows (a SQL error fails the test)."""
    status, body = api_request(base, "query", body={"statement": statement}, **kw)
    lines = [json.loads(line) for line in body.splitlines() if line]
    assert status == 200 and not any(
        isinstance(line, dict) and "error" in line for line in lines
    ), body
    return lines[2:]


@pytest.fixture(scope="module")
def server():
    with ServerProcess(users=USERS, catalogs=("lakehouse", "bobs"), grants=GRANTS) as s:
        sql(
            s.base,
            "CREATE TABLE lakehouse.main.events AS SELECT * FROM (VALUES "
            "(1, 'signup', 3.5, DATE '2026-01-01'), (2, 'login', 7.25, DATE '2026-01-02'), "
            "(3, 'purchase', 12.0, DATE '2026-01-03')) AS t(id, kind, amount, day)",
        )
        sql(
            s.base,
            "CREATE TABLE bobs.main.secrets AS SELECT 1 AS id, 'only bob' AS note",
            user="bob",
            password="hunter2",
        )
        yield s


def chromium() -> tuple[str, str]:
    """Debian's Chromium and its driver."""
    browser = shutil.which("chromium") or "/usr/bin/chromium"
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    for path in (browser, driver):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} missing: apt-get install chromium chromium-driver")
    return browser, driver


@pytest.fixture
def browser(request):
    binary, driver_path = chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1440,900",
        "--force-device-scale-factor=1",
        "--enable-precise-memory-info",
        "--js-flags=--expose-gc",
        # The TLS test's server has a self-signed certificate.
        "--ignore-certificate-errors",
    ):
        options.add_argument(arg)
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(ARTIFACTS / "downloads")}
    )
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    yield Browser(driver, request.node.name)
    driver.quit()


class Browser:
    """A Chromium tab with the console's helpers."""

    def __init__(self, driver: webdriver.Chrome, test: str):
        self.driver = driver
        self.test = test
        self.step = 0

    def wait(self, timeout: float = 20):
        # The page re-renders what it shows as answers arrive: an element found in one
        # poll may be replaced before the next read of it, so a poll that meets a stale
        # element polls again (as one that finds none does).
        return WebDriverWait(
            self.driver, timeout, ignored_exceptions=(StaleElementReferenceException,)
        )

    def find(self, css: str):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def finds(self, css: str):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def visible(self, css: str, timeout: float = 20):
        return self.wait(timeout).until(
            ec.visibility_of_element_located((By.CSS_SELECTOR, css))
        )

    def text_in(self, css: str, text: str, timeout: float = 30):
        self.wait(timeout).until(
            ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text)
        )
        return self.find(css).text

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def shot(self, name: str) -> Path:
        """Save a screenshot of this step."""
        self.step += 1
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.test}-{self.step:02d}-{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def sign_in(self, base: str, user: str, password: str):
        self.driver.get(base + "/")
        self.visible("#signin-user").send_keys(user)
        self.find("#signin-password").send_keys(password)
        self.find("#signin-submit").click()

    def set_sql(self, statement: str):
        self.js(
            "document.querySelector('.CodeMirror').CodeMirror.setValue(arguments[0])",
            statement,
        )

    def run(self, statement: str):
        self.set_sql(statement)
        self.find("#run").click()

    def cells(self, css: str = "#result-grid") -> list[list[str]]:
        """The rendered rows of a grid, as text (row number dropped)."""
        return self.js(
            """return [...document.querySelectorAll(arguments[0] + ' .grid-row')]
                 .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
                 .map(r => [...r.querySelectorAll('.grid-cell')].map(c => c.textContent));""",
            css,
        )

    def dom_nodes(self) -> int:
        """DOM nodes alive in the tab (Chromium's count)."""
        self.driver.execute_cdp_cmd("Performance.enable", {})
        metrics = self.driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
        return int(next(m["value"] for m in metrics if m["name"] == "Nodes"))

    def heap_mb(self) -> float:
        """The tab's used JS heap after a full garbage collection, MB."""
        self.driver.execute_cdp_cmd("HeapProfiler.enable", {})
        self.driver.execute_cdp_cmd("HeapProfiler.collectGarbage", {})
        self.driver.execute_cdp_cmd("Performance.enable", {})
        metrics = self.driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
        used = next(m["value"] for m in metrics if m["name"] == "JSHeapUsedSize")
        return used / 1e6


class PrefixProxy:
    """A reverse proxy serving `upstream` under `/PREFIX/` (as nginx's `location /lake/ {
    proxy_pass http://upstream/; }` does): the console must work behind it unchanged."""

    HOP = frozenset(
        {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}
    )

    def __init__(self, upstream: tuple[str, int], prefix: str):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def forward(self):
                if not self.path.startswith(proxy.prefix + "/"):
                    self.send_error(404)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(*upstream, timeout=120)
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in proxy.HOP
                }
                conn.request(
                    self.command, self.path[len(proxy.prefix) :], body, headers
                )
                response = conn.getresponse()
                data = response.read()
                self.send_response(response.status)
                for k, v in response.getheaders():
                    if k.lower() not in proxy.HOP:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                proxy.paths.append(self.path)

            do_GET = do_POST = do_DELETE = forward

        self.prefix = "/" + prefix.strip("/")
        self.paths: list[str] = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}{self.prefix}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

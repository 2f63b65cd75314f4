// The deltalite console: sign-in, catalog tree, SQL editor, results, chart, history,
// table pages and uploads, all over the server's HTTP API. Every URL is relative (the
// console works under a reverse proxy's path prefix); every request carries the
// session's CSRF token; result values are set as text, never as markup.
(() => {
"use strict";

const { Grid, PagedSource, ArraySource, text } = window.DeltaliteGrid;
const $ = (id) => document.getElementById(id);
const el = (tag, props = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
};

const state = {
  user: null,
  catalogs: [],
  csrf: "",
  result: null, // {id, columns, rows, truncated}
  running: null, // {queryId, started, timer}
  table: null, // {catalog, schema, table}
};

// ---- HTTP -----------------------------------------------------------------------------

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path, { method = "GET", json, body, headers = {} } = {}) {
  const init = { method, credentials: "same-origin", headers: { "X-Deltalite-Csrf": state.csrf, ...headers } };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    init.headers["Content-Type"] = "application/json";
  } else if (body !== undefined) {
    init.body = body;
  }
  const response = await fetch(path, init);
  if (response.status === 401 && path !== "console/login") {
    showSignIn("Your session has ended. Sign in again.");
    throw new HttpError(401, "Not signed in");
  }
  const type = response.headers.get("Content-Type") || "";
  if (!response.ok) {
    const raw = await response.text();
    let message = raw.trim();
    if (type.includes("json")) {
      try { message = JSON.parse(raw).error || message; } catch (_) { /* keep the text */ }
    }
    throw new HttpError(response.status, message || response.statusText);
  }
  return type.includes("json") && !type.includes("ndjson") ? response.json() : response;
}

// A metadata query through /query (NDJSON), kept out of the user's history.
async function sql(statement, catalog) {
  const response = await api("query", { method: "POST", json: { statement, catalog, visible: false } });
  const lines = (await response.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const failed = lines.find((l) => l && !Array.isArray(l) && l.error);
  if (failed) throw new HttpError(200, failed.error);
  return { columns: lines[1], rows: lines.slice(2) };
}

const literal = (s) => "'" + String(s).replace(/'/g, "''") + "'";
const ident = (s) => '"' + String(s).replace(/"/g, '""') + '"';

// ---- sign in --------------------------------------------------------------------------

function showSignIn(message = "") {
  $("app").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message;
  $("signin-user").focus();
}

async function enter(session) {
  state.user = session.user;
  state.catalogs = session.catalogs;
  state.csrf = session.csrf;
  $("signin").hidden = true;
  $("app").hidden = false;
  $("whoami").textContent = session.user;
  for (const select of [$("ctx-catalog"), $("upload-catalog")]) {
    select.replaceChildren(...session.catalogs.map((c) => el("option", { value: c, textContent: c })));
  }
  editor().refresh();
  loadTree();
}

$("signin-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("signin-error").textContent = "";
  $("signin-submit").disabled = true;
  try {
    const session = await api("console/login", {
      method: "POST",
      json: { user: $("signin-user").value, password: $("signin-password").value },
    });
    $("signin-password").value = "";
    await enter(session);
  } catch (e) {
    $("signin-error").textContent = e.status === 401 ? "Wrong user name or password." : e.message;
  } finally {
    $("signin-submit").disabled = false;
  }
});

$("signout").addEventListener("click", async () => {
  try { await api("console/logout", { method: "POST" }); } catch (_) { /* signed out anyway */ }
  state.csrf = "";
  showSignIn("Signed out.");
});

// ---- catalog tree ---------------------------------------------------------------------

function treeNode(kind, label, { onOpen, onSelect, title } = {}) {
  const li = el("li");
  const caret = el("span", { className: "caret", textContent: onOpen ? "▸" : "" });
  const badge = el("span", { className: "kind " + kind, textContent: kind.toUpperCase() });
  const name = el("span", { textContent: label, title: title || label });
  const row = el("div", { className: "node", role: "treeitem" }, caret, badge, name);
  row.dataset.kind = kind;
  row.dataset.name = label;
  const children = el("ul", { hidden: true });
  li.append(row, children);
  let loaded = false;
  row.addEventListener("click", async () => {
    if (onSelect) onSelect(row);
    if (!onOpen) return;
    children.hidden = !children.hidden;
    caret.textContent = children.hidden ? "▸" : "▾";
    if (!children.hidden && !loaded) {
      loaded = true;
      children.replaceChildren(el("li", { className: "node empty", textContent: "Loading…" }));
      try {
        const items = await onOpen();
        children.replaceChildren(...(items.length ? items : [el("li", { className: "node empty", textContent: "empty" })]));
      } catch (e) {
        loaded = false;
        children.replaceChildren(el("li", { className: "node empty", textContent: e.message }));
      }
    }
  });
  return li;
}

function loadTree() {
  $("tree").replaceChildren(
    ...state.catalogs.map((catalog) =>
      treeNode("c", catalog, { onOpen: () => schemasOf(catalog) }),
    ),
  );
}

async function schemasOf(catalog) {
  const { rows } = await sql(
    `SELECT schema_name FROM information_schema.schemata WHERE catalog_name = ${literal(catalog)} ORDER BY 1`,
    catalog,
  );
  return rows.map(([schema]) => treeNode("s", schema, { onOpen: () => tablesOf(catalog, schema) }));
}

async function tablesOf(catalog, schema) {
  const { rows } = await sql(
    `SELECT table_name, table_type FROM information_schema.tables WHERE table_catalog = ${literal(catalog)} AND table_schema = ${literal(schema)} ORDER BY 1`,
    catalog,
  );
  return rows.map(([name, type]) => {
    const kind = type === "VIEW" ? "v" : "t";
    return treeNode(kind, name, {
      onOpen: () => columnsOf(catalog, schema, name),
      onSelect: (row) => {
        document.querySelectorAll(".tree .node.selected").forEach((n) => n.classList.remove("selected"));
        row.classList.add("selected");
        openTable(catalog, schema, name, kind);
      },
    });
  });
}

// Column names seen in the tree, offered by the editor's completion beside /autocomplete's.
const knownColumns = new Map(); // name -> type

async function columnsOf(catalog, schema, table) {
  const { rows } = await sql(
    `SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = ${literal(catalog)} AND table_schema = ${literal(schema)} AND table_name = ${literal(table)} ORDER BY ordinal_position`,
    catalog,
  );
  for (const [name, type] of rows) knownColumns.set(name, type);
  return rows.map(([name, type]) =>
    el("li", { className: "node col" }, el("span", { textContent: name }), el("span", { className: "type", textContent: type })),
  );
}

$("refresh-tree").addEventListener("click", loadTree);

// ---- views ----------------------------------------------------------------------------

function showView(name) {
  for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.view === name);
  for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== "view-" + name;
  if (name === "query") editor().refresh();
  if (name === "history") loadHistory();
}
for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showView(tab.dataset.view));

// ---- editor ---------------------------------------------------------------------------

let cm = null;
function editor() {
  if (cm) return cm;
  cm = CodeMirror.fromTextArea($("editor"), {
    mode: "text/x-pgsql",
    lineNumbers: true,
    indentUnit: 2,
    extraKeys: {
      "Ctrl-Enter": () => run(),
      "Cmd-Enter": () => run(),
      "Ctrl-Space": (instance) => instance.showHint({ hint: complete, completeSingle: false }),
    },
  });
  cm.on("inputRead", (instance, change) => {
    if (/^[A-Za-z_]$/.test(change.text[0] || "")) instance.showHint({ hint: complete, completeSingle: false });
  });
  return cm;
}

// Completions: columns of the tables opened in the tree, then /autocomplete's keywords and
// the catalogs, schemas and tables the user can see.
async function complete(instance) {
  const cursor = instance.getCursor();
  const before = instance.getRange({ line: 0, ch: 0 }, cursor);
  const word = /[A-Za-z0-9_]*$/.exec(before)[0];
  if (!word) return null;
  const answer = await api("autocomplete", {
    method: "POST",
    json: { statement: before, catalog: $("ctx-catalog").value, schema: $("ctx-schema").value, max_suggestions: 30 },
  });
  const lower = word.toLowerCase();
  const columns = [...knownColumns]
    .filter(([name]) => name.toLowerCase().startsWith(lower))
    .map(([name, type]) => ({ text: name, displayText: `${name}  · column ${type}` }));
  return {
    list: columns.concat(answer.suggestions.map((s) => ({ text: s.suggestion, displayText: `${s.suggestion}  · ${s.suggestion_type}` }))),
    from: CodeMirror.Pos(cursor.line, cursor.ch - word.length),
    to: cursor,
  };
}

// ---- running a statement --------------------------------------------------------------

const grid = new Grid($("result-grid"));
grid.message("Run a statement to see its result here.");
let errorMark = null;

function setStatus(message, failed = false) {
  $("status").textContent = message;
  $("status").classList.toggle("failed", failed);
}

function statementToRun() {
  const selected = editor().getSelection();
  return selected.trim() ? selected : editor().getValue();
}

async function run(statement = statementToRun()) {
  if (state.running || !statement.trim()) return;
  showView("query");
  const queryId = crypto.randomUUID();
  const started = performance.now();
  state.running = {
    queryId,
    timer: setInterval(() => setStatus(`Running… ${((performance.now() - started) / 1000).toFixed(1)} s`), 100),
  };
  $("run").disabled = true;
  $("cancel").disabled = false;
  $("error-box").hidden = true;
  if (errorMark) errorMark.clear();
  setStatus("Running…");
  try {
    const result = await api("console/run", {
      method: "POST",
      json: { statement, catalog: $("ctx-catalog").value, schema: $("ctx-schema").value, query_id: queryId },
    });
    state.result = { id: result.result_id, columns: result.columns, rows: result.rows, truncated: result.truncated };
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    const more = result.truncated ? " (cut at the server's result limit)" : "";
    await showResult();
    // Said once the first rows are on screen.
    setStatus(`${result.rows.toLocaleString()} row${result.rows === 1 ? "" : "s"} in ${seconds} s${more}`);
  } catch (e) {
    if (e.status === 401) return;
    const cancelled = /cancel/i.test(e.message);
    setStatus(cancelled ? "Cancelled" : "Failed", true);
    showError(e.message, statement);
  } finally {
    clearInterval(state.running.timer);
    state.running = null;
    $("run").disabled = false;
    $("cancel").disabled = true;
  }
}

function fetchRows(id) {
  return async (offset, limit) => (await api(`console/results/${id}?offset=${offset}&limit=${limit}`)).rows;
}

async function showResult() {
  const r = state.result;
  $("download-csv").disabled = $("download-parquet").disabled = false;
  if (!r.columns.length) {
    grid.message("The statement returned no columns.");
    return;
  }
  const source = new PagedSource(fetchRows(r.id), r.rows);
  const sample = r.rows ? await source.load(0) : [];
  grid.show(r.columns, source, sample.slice(0, 100));
  if (!r.rows) grid.message("No rows.");
  if (!$("result-chart").hidden) drawChart(true);
}

// An error is shown where it happened: at the line and column its text gives
// (sqlparser's "Line: 1, Column: 8"), else at the first mention of the name it complains
// about (DataFusion's binder names the field, table or function but gives no position).
const NAMED = [
  /No field named ([^\s.]+(?:\.[^\s.]+)*)\./,
  /[Tt]able '([^']+)' not found/,
  /with name ([^\s!]+) does not exist/,
  /[Ii]nvalid function '([^']+)'/,
  /column "([^"]+)"/,
  /"([^"]+)" not found/,
];

function errorRange(message, statement) {
  const at = /Line: (\d+), Column:? (\d+)/i.exec(message);
  if (at) {
    const line = Number(at[1]) - 1;
    const ch = Math.max(0, Number(at[2]) - 1);
    const rest = (statement.split("\n")[line] || "").slice(ch);
    return { line, ch, end: ch + Math.max(1, (/^[\w."]+/.exec(rest) || [""])[0].length) };
  }
  for (const pattern of NAMED) {
    const named = pattern.exec(message);
    if (!named) continue;
    const name = named[1].split(".").pop().replace(/"/g, "");
    const lines = statement.split("\n");
    const word = new RegExp(`(^|[^\\w])(${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")})(?![\\w])`, "i");
    for (let line = 0; line < lines.length; line++) {
      const m = word.exec(lines[line]);
      if (m) return { line, ch: m.index + m[1].length, end: m.index + m[1].length + name.length };
    }
  }
  return null;
}

function showError(message, statement) {
  $("error-box").hidden = false;
  $("error-box").textContent = message;
  grid.message("No result.");
  const range = statement === editor().getValue() ? errorRange(message, statement) : null;
  if (range) {
    errorMark = editor().markText({ line: range.line, ch: range.ch }, { line: range.line, ch: range.end }, { className: "cm-error-mark", title: message });
    editor().setCursor({ line: range.line, ch: range.ch });
  }
}

$("run").addEventListener("click", () => run());
$("cancel").addEventListener("click", async () => {
  if (!state.running) return;
  setStatus("Cancelling…");
  try { await api(`query/${state.running.queryId}`, { method: "DELETE" }); } catch (_) { /* the run reports */ }
});

async function download(format) {
  if (!state.result) return;
  const { ticket } = await api(`console/results/${state.result.id}/ticket`, { method: "POST" });
  const a = el("a", { href: `console/download?ticket=${ticket}&format=${format}`, download: `result.${format}` });
  document.body.append(a);
  a.click();
  a.remove();
}
$("download-csv").addEventListener("click", () => download("csv"));
$("download-parquet").addEventListener("click", () => download("parquet"));

// ---- chart ----------------------------------------------------------------------------

const CHART_ROWS = 2000;
const isNumeric = (type) => /^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|U?(TINY|SMALL|BIG)?INT|FLOAT|DOUBLE|REAL|DECIMAL)/i.test(type || "");
const isTemporal = (type) => /^(DATE|TIMESTAMP|TIME)/i.test(type || "");
let chart = null;

for (const seg of document.querySelectorAll(".seg")) {
  seg.addEventListener("click", () => {
    for (const s of document.querySelectorAll(".seg")) s.classList.toggle("active", s === seg);
    const asChart = seg.dataset.result === "chart";
    $("result-grid").hidden = asChart;
    $("result-chart").hidden = !asChart;
    if (asChart) drawChart(true);
  });
}
for (const id of ["chart-kind", "chart-x", "chart-y"]) $(id).addEventListener("change", () => drawChart());

// Defaults from the column types: X the first non-numeric column (else the first), Y the
// first other numeric one; a line over time, a scatter of two numbers, else bars.
function chooseChart(columns) {
  let x = columns.findIndex((c) => !isNumeric(c.type));
  if (x < 0) x = 0;
  const y = columns.findIndex((c, i) => i !== x && isNumeric(c.type));
  const kind = isTemporal(columns[x].type) ? "line" : isNumeric(columns[x].type) ? "scatter" : "bar";
  return { x, y, kind };
}

async function drawChart(reset = false) {
  const r = state.result;
  const note = $("chart-note");
  if (!r || !r.columns.length) {
    note.textContent = "Run a query first.";
    return;
  }
  if (reset || $("chart-x").options.length !== r.columns.length) {
    const options = () => r.columns.map((c, i) => el("option", { value: i, textContent: c.name }));
    $("chart-x").replaceChildren(...options());
    $("chart-y").replaceChildren(...options());
    const pick = chooseChart(r.columns);
    $("chart-x").value = pick.x;
    $("chart-y").value = Math.max(pick.y, 0);
    $("chart-kind").value = pick.kind;
    if (pick.y < 0) {
      note.textContent = "No numeric column to plot.";
      if (chart) chart.destroy();
      chart = null;
      return;
    }
  }
  const rows = r.rows ? await fetchRows(r.id)(0, CHART_ROWS) : [];
  const x = Number($("chart-x").value);
  const y = Number($("chart-y").value);
  const kind = $("chart-kind").value;
  note.textContent = r.rows > CHART_ROWS ? `first ${CHART_ROWS.toLocaleString()} of ${r.rows.toLocaleString()} rows` : `${r.rows.toLocaleString()} rows`;
  const data =
    kind === "scatter"
      ? { datasets: [{ label: r.columns[y].name, data: rows.map((row) => ({ x: Number(row[x]), y: Number(row[y]) })) }] }
      : { labels: rows.map((row) => text(row[x])), datasets: [{ label: r.columns[y].name, data: rows.map((row) => (row[y] === null ? null : Number(row[y]))) }] };
  if (chart) chart.destroy();
  chart = new Chart($("chart"), {
    type: kind,
    data,
    options: {
      animation: false,
      maintainAspectRatio: false,
      plugins: { legend: { display: true } },
      scales: { x: { title: { display: true, text: r.columns[x].name } }, y: { title: { display: true, text: r.columns[y].name } } },
      elements: { line: { borderColor: "#3b5bdb" }, point: { backgroundColor: "#3b5bdb" }, bar: { backgroundColor: "#748ffc" } },
    },
  });
}

// ---- table page -----------------------------------------------------------------------

const previewGrid = new Grid($("table-preview"));

function stat(label, value) {
  return el("div", { className: "stat" }, el("div", { className: "label", textContent: label }), el("div", { className: "value", textContent: value, title: value }));
}

function bytes(n) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

async function openTable(catalog, schema, table, kind) {
  state.table = { catalog, schema, table };
  $("tab-table").disabled = false;
  showView("table");
  const full = [catalog, schema, table].map(ident).join(".");
  $("table-title").textContent = `${catalog}.${schema}.${table}`;
  $("table-upload").hidden = kind === "v";
  $("table-cards").replaceChildren(stat("Rows", "…"));
  $("table-columns").replaceChildren();
  $("table-history").replaceChildren();
  previewGrid.message("Loading…");
  const count = sql(`SELECT count(*) FROM ${full}`, catalog).then(({ rows }) => rows[0][0]);
  let detail = null;
  if (kind !== "v") {
    try {
      detail = await api(`console/table?catalog=${encodeURIComponent(catalog)}&schema=${encodeURIComponent(schema)}&table=${encodeURIComponent(table)}`);
    } catch (e) {
      if (e.status === 401) return;
    }
  }
  const rowsCard = stat("Rows", "…");
  const cards = [rowsCard];
  if (detail) {
    cards.push(
      stat("Size", bytes(detail.bytes)),
      stat("Files", detail.files.toLocaleString()),
      stat("Version", String(detail.version)),
      stat("Partitioned by", detail.partition_columns.length ? detail.partition_columns.join(", ") : "—"),
    );
  } else {
    cards.push(stat("Kind", "view"));
  }
  $("table-cards").replaceChildren(...cards);
  count.then(
    (n) => { rowsCard.lastChild.textContent = Number(n).toLocaleString(); },
    (e) => { rowsCard.lastChild.textContent = "—"; rowsCard.title = e.message; },
  );
  const columns = detail
    ? detail.columns
    : (await sql(`SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_catalog = ${literal(catalog)} AND table_schema = ${literal(schema)} AND table_name = ${literal(table)} ORDER BY ordinal_position`, catalog)).rows.map(([name, type, nullable]) => ({ name, type, nullable: nullable === "YES" }));
  $("table-columns").replaceChildren(
    el("tr", {}, el("th", { textContent: "Column" }), el("th", { textContent: "Type" }), el("th", { textContent: "Null" }), el("th", { textContent: "Comment" })),
    ...columns.map((c) => el("tr", {}, el("td", { textContent: c.name }), el("td", { className: "mono", textContent: c.type }), el("td", { textContent: c.nullable ? "yes" : "no" }), el("td", { className: "muted", textContent: c.comment || "" }))),
  );
  if (detail) {
    $("table-history").replaceChildren(
      el("tr", {}, el("th", { textContent: "Version" }), el("th", { textContent: "When" }), el("th", { textContent: "Operation" }), el("th", { textContent: "Metrics" })),
      ...detail.history.map((h) => el("tr", {},
        el("td", { textContent: String(h.version) }),
        el("td", { textContent: h.timestamp ? new Date(h.timestamp).toLocaleString() : "" }),
        el("td", { textContent: h.operation || "" }),
        el("td", { className: "mono wrap", textContent: h.metrics ? summarizeMetrics(h.metrics) : "", title: h.metrics ? JSON.stringify(h.metrics) : "" }))),
    );
  } else {
    $("table-history").replaceChildren(el("tr", {}, el("td", { className: "muted", textContent: "Views have no history." })));
  }
  try {
    const preview = await sql(`SELECT * FROM ${full} LIMIT 100`, catalog);
    previewGrid.show(preview.columns, new ArraySource(preview.rows), preview.rows);
    if (!preview.rows.length) previewGrid.message("The table is empty.");
  } catch (e) {
    if (e.status !== 401) previewGrid.message(e.message);
  }
}

function summarizeMetrics(metrics) {
  const keys = ["numOutputRows", "numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted", "numAddedFiles", "numRemovedFiles"];
  const parts = keys.filter((k) => metrics[k] !== undefined).map((k) => `${k.replace(/^num(Target)?/, "")}=${metrics[k]}`);
  return parts.length ? parts.join(" ") : JSON.stringify(metrics);
}

$("table-query").addEventListener("click", () => {
  const t = state.table;
  if (!t) return;
  editor().setValue(`SELECT *\nFROM ${[t.catalog, t.schema, t.table].map(ident).join(".")}\nLIMIT 1000`);
  showView("query");
});

// ---- history --------------------------------------------------------------------------

async function loadHistory() {
  let entries;
  try {
    entries = await api("console/history?limit=100");
  } catch (e) {
    if (e.status !== 401) $("history-table").replaceChildren(el("tr", {}, el("td", { className: "error", textContent: e.message })));
    return;
  }
  const rows = entries.map((q) => {
    const status = q.running ? "running" : q.error ? (/cancel/i.test(q.error) ? "cancelled" : "failed") : "ok";
    const pill = el("span", { className: "pill " + (status === "ok" ? "ok" : status === "running" ? "running" : "failed"), textContent: status, title: q.error || "" });
    const again = el("button", { className: "ghost", textContent: "Run again" });
    again.addEventListener("click", () => { editor().setValue(q.query); run(q.query); });
    const statement = el("td", { className: "mono wrap", textContent: q.query, title: "Open in the editor" });
    statement.addEventListener("click", () => { editor().setValue(q.query); showView("query"); });
    return el("tr", { className: "history-row" },
      el("td", {}, pill),
      statement,
      el("td", { textContent: new Date(q.start_time).toLocaleString() }),
      el("td", { textContent: q.duration_ms === null ? "" : `${q.duration_ms.toLocaleString()} ms` }),
      el("td", { textContent: q.stats && q.stats.rows !== undefined ? q.stats.rows.toLocaleString() : "" }),
      el("td", {}, again));
  });
  $("history-table").replaceChildren(
    el("tr", {}, ...["Status", "Statement", "Started", "Duration", "Rows", ""].map((h) => el("th", { textContent: h }))),
    ...(rows.length ? rows : [el("tr", {}, el("td", { className: "muted", colSpan: 6, textContent: "No queries yet." }))]),
  );
}
$("history-refresh").addEventListener("click", loadHistory);

// ---- upload ---------------------------------------------------------------------------

let uploadFile = null;

function openUpload({ catalog, schema, table, mode } = {}) {
  uploadFile = null;
  $("upload-file-name").textContent = "";
  $("upload-result").textContent = "";
  $("upload-progress").hidden = true;
  if (catalog) $("upload-catalog").value = catalog;
  if (schema) $("upload-schema").value = schema;
  $("upload-table").value = table || "";
  $("upload-mode").value = mode || "create";
  $("upload-key-label").hidden = $("upload-mode").value !== "upsert";
  $("upload-dialog").showModal();
}

function pickFile(file) {
  uploadFile = file;
  $("upload-file-name").textContent = `${file.name} · ${bytes(file.size)}`;
  if (!$("upload-table").value) $("upload-table").value = file.name.replace(/\.[^.]*$/, "").replace(/[^A-Za-z0-9_]/g, "_").toLowerCase();
}

$("open-upload").addEventListener("click", () => openUpload({ catalog: $("ctx-catalog").value, schema: $("ctx-schema").value }));
$("table-upload").addEventListener("click", () => openUpload({ ...state.table, mode: "append" }));
$("upload-mode").addEventListener("change", () => { $("upload-key-label").hidden = $("upload-mode").value !== "upsert"; });
$("upload-file").addEventListener("change", (e) => e.target.files[0] && pickFile(e.target.files[0]));
const drop = $("drop");
drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => {
  e.preventDefault();
  drop.classList.remove("over");
  if (e.dataTransfer.files[0]) pickFile(e.dataTransfer.files[0]);
});
// A file dropped on a schema or table in the tree opens the dialog for it.
$("tree").addEventListener("dragover", (e) => e.preventDefault());
$("tree").addEventListener("drop", (e) => {
  e.preventDefault();
  const node = e.target.closest(".node");
  const file = e.dataTransfer.files[0];
  if (!node || !file) return;
  const path = [];
  for (let n = node.closest("li"); n && n.closest("#tree"); n = n.parentElement.closest("li")) path.unshift(n.firstChild.dataset.name);
  const [catalog, schema, table] = path;
  openUpload({ catalog, schema, table, mode: table ? "append" : "create" });
  pickFile(file);
});

$("upload-submit").addEventListener("click", () => {
  if (!uploadFile) {
    $("upload-result").textContent = "Choose a file first.";
    return;
  }
  const params = new URLSearchParams({
    catalog: $("upload-catalog").value,
    schema: $("upload-schema").value,
    table: $("upload-table").value,
    mode: $("upload-mode").value,
  });
  if ($("upload-mode").value === "upsert") params.set("primary_key", $("upload-key").value);
  const xhr = new XMLHttpRequest();
  xhr.open("POST", `upload?${params}`);
  xhr.setRequestHeader("X-Deltalite-Csrf", state.csrf);
  xhr.setRequestHeader("Content-Type", "application/octet-stream");
  $("upload-progress").hidden = false;
  $("upload-progress").value = 0;
  $("upload-submit").disabled = true;
  $("upload-result").textContent = "Uploading…";
  xhr.upload.onprogress = (e) => {
    if (e.lengthComputable) $("upload-progress").value = (100 * e.loaded) / e.total;
  };
  xhr.upload.onload = () => { $("upload-result").textContent = "Committing…"; };
  xhr.onloadend = () => {
    $("upload-submit").disabled = false;
    if (xhr.status === 401) return showSignIn("Your session has ended. Sign in again.");
    if (xhr.status === 200) {
      $("upload-progress").value = 100;
      let summary = null;
      try { summary = JSON.parse(xhr.responseText); } catch (_) { /* not JSON */ }
      $("upload-result").textContent = !summary
        ? "Done."
        : summary.idempotent_replay
          ? "Already loaded: nothing written."
          : `Done: ${Number(summary.rows).toLocaleString()} rows written, table version ${summary.version}${summary.created ? ", table created" : ""}.`;
      loadTree();
    } else {
      $("upload-result").textContent = `Failed (${xhr.status || "network"}): ${xhr.responseText.trim()}`;
    }
  };
  xhr.send(uploadFile);
});

// What the page holds, for a person (or a test) looking at its memory from the devtools.
window.deltaliteConsole = { heldRows: () => grid.source.heldRows() };

// ---- start ----------------------------------------------------------------------------

(async () => {
  try {
    const response = await fetch("console/session", { credentials: "same-origin" });
    const session = response.ok ? await response.json() : {};
    if (session.user) return enter(session);
  } catch (_) { /* fall through to the form */ }
  showSignIn();
})();
})();

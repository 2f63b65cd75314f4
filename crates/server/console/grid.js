// A virtual-scrolling result grid. Only the rows on screen (plus a margin) exist in the
// DOM; rows come from a source that fetches them in pages as the user scrolls and keeps
// a bounded number of pages, so a million-row result costs the tab what a few pages do.
// Cell text is always set with textContent: result values are data, never markup.
(() => {
"use strict";

const ROW_HEIGHT = 28;
const OVERSCAN = 10;
// Browsers cap an element's height (Chrome near 33M px, Firefox near 18M): past this the
// scrollbar covers the rows at a scale, and rows are placed relative to the viewport.
const MAX_SCROLL_PX = 8_000_000;

// Rows of a spooled server result (GET console/results/{id}), `pageRows` per request,
// at most `maxPages` held (least recently used out).
class PagedSource {
  constructor(fetchPage, count, { pageRows = 500, maxPages = 16 } = {}) {
    this.fetchPage = fetchPage; // (offset, limit) => Promise<rows[]>
    this.count = count;
    this.pageRows = pageRows;
    this.maxPages = maxPages;
    this.pages = new Map(); // page number -> rows (Map keeps use order)
    this.loading = new Map(); // page number -> Promise
    this.onload = () => {};
  }
  row(i) {
    const p = Math.floor(i / this.pageRows);
    const page = this.pages.get(p);
    if (page) {
      this.pages.delete(p);
      this.pages.set(p, page); // most recently used last
      return page[i - p * this.pageRows];
    }
    this.load(p);
    return undefined;
  }
  load(p) {
    if (this.loading.has(p)) return this.loading.get(p);
    const promise = this.fetchPage(p * this.pageRows, this.pageRows)
      .then((rows) => {
        this.pages.set(p, rows);
        while (this.pages.size > this.maxPages) {
          this.pages.delete(this.pages.keys().next().value);
        }
        this.onload();
        return rows;
      })
      .finally(() => this.loading.delete(p));
    this.loading.set(p, promise);
    return promise;
  }
  heldRows() {
    let n = 0;
    for (const rows of this.pages.values()) n += rows.length;
    return n;
  }
}

// Rows already in memory (a preview).
class ArraySource {
  constructor(rows) {
    this.rows = rows;
    this.count = rows.length;
    this.onload = () => {};
  }
  row(i) { return this.rows[i]; }
  heldRows() { return this.rows.length; }
}

const NUMERIC = /^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|FLOAT|DOUBLE|REAL|DECIMAL)/i;

class Grid {
  constructor(host) {
    this.host = host;
    this.host.textContent = "";
    this.scroller = document.createElement("div");
    this.scroller.className = "grid";
    this.head = document.createElement("div");
    this.head.className = "grid-head";
    this.body = document.createElement("div");
    this.body.className = "grid-body";
    this.scroller.append(this.head, this.body);
    this.host.append(this.scroller);
    this.columns = [];
    this.source = new ArraySource([]);
    this.frame = 0;
    this.scroller.addEventListener("scroll", () => this.schedule());
    new ResizeObserver(() => this.schedule()).observe(this.host);
  }

  // Show `columns` ([{name, type}]) with rows from `source`; `sample` (some rows) sizes
  // the columns.
  show(columns, source, sample = []) {
    this.columns = columns.map((c, i) => ({
      ...c,
      numeric: NUMERIC.test(c.type || ""),
      width: this.widthOf(c, sample.map((r) => r[i])),
    }));
    this.source = source;
    source.onload = () => this.schedule();
    this.head.textContent = "";
    const corner = document.createElement("div");
    corner.className = "grid-rownum";
    this.head.append(corner);
    for (const c of this.columns) {
      const cell = document.createElement("div");
      cell.className = "grid-hcell";
      cell.style.width = c.width + "px";
      cell.title = `${c.name} ${c.type || ""}`;
      const name = document.createElement("span");
      name.textContent = c.name;
      const type = document.createElement("span");
      type.className = "type";
      type.textContent = c.type || "";
      cell.append(name, type);
      this.head.append(cell);
    }
    this.body.replaceChildren();
    this.body.style.height = Math.min(source.count * ROW_HEIGHT, MAX_SCROLL_PX) + "px";
    this.scroller.scrollTop = 0;
    this.render();
  }

  message(text) {
    this.columns = [];
    this.source = new ArraySource([]);
    this.head.textContent = "";
    this.body.style.height = "auto";
    this.body.textContent = "";
    const note = document.createElement("div");
    note.className = "grid-empty";
    note.textContent = text;
    this.body.append(note);
  }

  widthOf(column, values) {
    let chars = Math.max(column.name.length, (column.type || "").length);
    for (const v of values) chars = Math.max(chars, text(v).length);
    return Math.max(80, Math.min(360, Math.ceil(chars * 8.5) + 30));
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  render() {
    if (!this.columns.length) return;
    const top = this.scroller.scrollTop;
    const height = this.scroller.clientHeight || 400;
    // The rows' own pixel offset at this scroll position (equal to `top` unless scaled).
    const full = this.source.count * ROW_HEIGHT;
    const shown = Math.min(full, MAX_SCROLL_PX);
    const offset = shown > height ? (top * (full - height)) / (shown - height) : top;
    const first = Math.max(0, Math.floor(offset / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(this.source.count, Math.ceil((offset + height) / ROW_HEIGHT) + OVERSCAN);
    // Row elements are reused: scrolling changes their text and position, and never
    // builds more of them than fit on screen.
    const needed = last - first;
    while (this.body.childElementCount > needed) this.body.lastElementChild.remove();
    while (this.body.childElementCount < needed) this.body.append(this.newRow());
    for (let k = 0; k < needed; k++) {
      this.fillRow(this.body.children[k], first + k, (first + k) * ROW_HEIGHT - offset + top);
    }
  }

  newRow() {
    const row = document.createElement("div");
    row.className = "grid-row";
    row.style.height = ROW_HEIGHT + "px";
    row.style.lineHeight = ROW_HEIGHT - 1 + "px";
    const num = document.createElement("div");
    num.className = "grid-rownum";
    row.append(num);
    for (const c of this.columns) {
      const cell = document.createElement("div");
      cell.style.width = c.width + "px";
      row.append(cell);
    }
    return row;
  }

  fillRow(row, i, y) {
    row.style.top = y + "px";
    row.firstChild.textContent = String(i + 1);
    const values = this.source.row(i);
    this.columns.forEach((c, j) => {
      const cell = row.children[j + 1];
      let className = "grid-cell" + (c.numeric ? " num" : "");
      let content = "";
      let title = "";
      if (values === undefined) {
        content = j === 0 ? "…" : "";
      } else if (values[j] === null) {
        content = "NULL";
        className += " null";
      } else {
        content = text(values[j]);
        if (content.length > 40) title = content;
      }
      if (cell.className !== className) cell.className = className;
      if (cell.textContent !== content) cell.textContent = content;
      if (cell.title !== title) cell.title = title;
    });
  }
}

function text(v) {
  if (v === null || v === undefined) return "NULL";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

window.DeltaliteGrid = { Grid, PagedSource, ArraySource, text };
})();

// DOM helpers. Everything the broker or a client sent (topic names, keys, bodies, properties) reaches the
// page through text nodes and attribute values only: nothing here parses HTML from strings.

const SAFE_HREF = /^(#|\/(?!\/))/; // in-page routes and the console's own paths only

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = !!v;
    else if (k === "href" && !SAFE_HREF.test(String(v))) continue;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  add(el, children);
  return el;
}

export function add(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export const link = (href, text, attrs) => h("a", { href, ...(attrs || {}) }, text);
export const route = (page, name) => `#/${page}/${encodeURIComponent(name)}`;
export const badge = (text, cls) => h("span", { class: `badge ${cls || text}` }, text);

export function fmtTime(ms) {
  if (!ms || ms <= 0) return "-";
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

export function fmtNum(n) {
  if (n === null || n === undefined || n === "") return "-";
  if (typeof n !== "number") return String(n);
  return Number.isInteger(n) ? n.toLocaleString("en-US") : n.toLocaleString("en-US", { maximumFractionDigits: 2 });
}

// datetime-local input value <-> ms
export function toLocalInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}
export const fromLocalInput = (v) => (v ? new Date(v).getTime() : null);

// A table with sortable columns. columns: [{key, label, num?, render?(row), sort?(row), nosort?}]
export function dataTable(columns, rows, opts = {}) {
  let sortKey = opts.sortKey || null;
  let desc = !!opts.desc;
  const tbody = h("tbody");
  const heads = columns.map((c) => {
    const th = h("th", { class: `${c.num ? "num" : ""} ${c.nosort ? "" : "sortable"}`, "data-key": c.key }, c.label);
    if (!c.nosort) th.addEventListener("click", () => {
      desc = sortKey === c.key ? !desc : !!c.num;
      sortKey = c.key;
      fill();
    });
    return th;
  });
  const value = (c, r) => (c.sort ? c.sort(r) : r[c.key]);
  function fill() {
    clear(tbody);
    heads.forEach((th, i) => {
      th.querySelector(".arrow")?.remove();
      if (columns[i].key === sortKey) th.append(h("span", { class: "arrow" }, desc ? "▼" : "▲"));
    });
    let list = rows.slice();
    if (sortKey) {
      const col = columns.find((c) => c.key === sortKey);
      list.sort((a, b) => {
        const x = value(col, a), y = value(col, b);
        const nx = x === null || x === undefined, ny = y === null || y === undefined;
        if (nx || ny) return nx === ny ? 0 : nx ? 1 : -1; // no value: always last
        const r = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return desc ? -r : r;
      });
    }
    if (!list.length) {
      tbody.append(h("tr", {}, h("td", { class: "empty", colspan: columns.length }, opts.empty || "Nothing to show.")));
    }
    for (const r of list) {
      tbody.append(h("tr", opts.rowAttrs ? opts.rowAttrs(r) : {}, columns.map((c) =>
        h("td", { class: `${c.num ? "num" : ""} ${c.wrap ? "wrap" : ""}` }, c.render ? c.render(r) : fmtCell(r[c.key])))));
    }
  }
  fill();
  const table = h("table", { class: opts.class || "" }, h("thead", {}, h("tr", {}, heads)), tbody);
  if (opts.foot) table.append(h("tfoot", {}, opts.foot));
  return h("div", { class: "table-wrap" }, table);
}

function fmtCell(v) {
  if (typeof v === "number") return fmtNum(v);
  if (v === null || v === undefined || v === "") return "-";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

export function kv(obj) {
  return h("div", { class: "kv" }, Object.entries(obj).flatMap(([k, v]) => [
    h("div", { class: "k" }, k),
    h("div", { class: "v mono" }, v instanceof Node ? v : typeof v === "object" && v !== null ? JSON.stringify(v) : String(v ?? "-")),
  ]));
}

export function card(title, ...children) {
  return h("section", { class: "card" }, title ? h("h2", {}, title) : null, ...children);
}

export function toast(text, isError) {
  const t = h("div", { class: `toast ${isError ? "error" : ""}`, role: isError ? "alert" : "status" }, text);
  document.getElementById("toasts").append(t);
  setTimeout(() => t.remove(), isError ? 8000 : 4000);
}

export function field(label, input) {
  return h("label", { class: "field" }, label, input);
}

// A modal dialog; returns {dialog, body, close}. buttons: [{label, cls, onclick}]
export function modal(title, content, buttons = []) {
  const body = h("div", { class: "body" }, content);
  const dlg = h("dialog", {},
    h("div", { class: "head" }, title, h("span", { class: "spacer" }), h("button", { class: "small", onclick: () => close() }, "Close")),
    body,
    buttons.length ? h("div", { class: "foot" }, buttons.map((b) => h("button", { class: b.cls || "", onclick: b.onclick }, b.label))) : null);
  document.body.append(dlg);
  dlg.addEventListener("close", () => dlg.remove());
  function close() { if (dlg.open) dlg.close(); }
  dlg.showModal();
  return { dialog: dlg, body, close };
}

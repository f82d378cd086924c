// The console's JSON API. Requests that change state carry the session's CSRF token and send JSON.
import { h, modal, toast } from "./dom.js";

export let session = null;

export class LoginRequired extends Error {}

export async function loadSession() {
  session = await request("GET", "/api/session");
  return session;
}

export function setSession(s) { session = { ...session, ...s }; }

function qs(params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined && v !== "") p.set(k, v);
  const s = p.toString();
  return s ? `?${s}` : "";
}

export async function request(method, path, body) {
  const opts = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (method !== "GET") {
    opts.headers["X-CSRF-Token"] = session?.csrf || "";
    opts.headers["Content-Type"] = "application/json";
    if (body !== undefined) opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  let data = null;
  try { data = await r.json(); } catch { /* not JSON */ }
  if (r.status === 401 && data && data.login) {
    if (!location.hash.startsWith("#/login")) location.hash = "#/login";
    throw new LoginRequired("login required");
  }
  if (!r.ok) throw new Error((data && data.error) || `${r.status} ${r.statusText}`);
  return data;
}

export const get = (path, params) => request("GET", path + qs(params));
export const post = (path, body) => request("POST", path, body || {});
export const del = (path, params) => request("DELETE", path + qs(params));
export const url = (path, params) => path + qs(params);

// Runs a long operation: the request answers {job}, the dialog shows its progress until it ends.
export async function runJob(title, start) {
  let job;
  try {
    job = (await start()).job;
  } catch (e) {
    toast(e.message, true);
    throw e;
  }
  const bar = h("div", { style: null });
  const state = h("span", { class: "badge running" }, "running");
  const count = h("span", { class: "muted" });
  const log = h("div", { class: "log" });
  const m = modal(title, [h("div", { class: "toolbar" }, state, count), h("div", { class: "progress" }, bar), log]);
  m.dialog.setAttribute("data-job", job);
  for (;;) {
    const j = await get(`/api/jobs/${encodeURIComponent(job)}`);
    const total = Math.max(j.total, j.done, 1);
    bar.style.width = `${Math.round((100 * j.done) / total)}%`;
    count.textContent = `${j.done} of ${Math.max(j.total, j.done)} steps${j.failed ? `, ${j.failed} failed` : ""}`;
    log.textContent = j.lines.join("\n");
    if (j.state !== "running") {
      state.textContent = j.state;
      state.className = `badge ${j.state}`;
      if (j.state === "done") bar.style.width = "100%";
      if (j.error) toast(j.error, true);
      return j;
    }
    await new Promise((res) => setTimeout(res, 300));
  }
}

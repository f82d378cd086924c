// The console's shell: navigation, session, and a hash router (#/page/param?query).
import { h, clear, toast } from "./dom.js";
import { loadSession, post, session, LoginRequired } from "./api.js";
import * as dashboard from "./pages/dashboard.js";
import * as cluster from "./pages/cluster.js";
import * as topics from "./pages/topics.js";
import * as topic from "./pages/topic.js";
import * as consumers from "./pages/consumers.js";
import * as consumer from "./pages/consumer.js";
import * as producers from "./pages/producers.js";
import * as messages from "./pages/messages.js";
import * as message from "./pages/message.js";
import * as trace from "./pages/trace.js";
import * as dlq from "./pages/dlq.js";
import * as acl from "./pages/acl.js";
import * as apidocs from "./pages/apidocs.js";
import * as login from "./pages/login.js";

const NAV = [
  ["dashboard", "Dashboard"], ["cluster", "Cluster"], ["topics", "Topics"], ["consumers", "Consumers"],
  ["producers", "Producers"], ["messages", "Messages"], ["trace", "Message trace"], ["dlq", "DLQ"],
  ["acl", "ACL"], ["api", "API"],
];
const PAGES = { dashboard, cluster, topics, topic, consumers, consumer, producers, messages, message, trace, dlq, acl, api: apidocs, login };
// detail pages highlight the list they belong to
const SECTION = { topic: "topics", consumer: "consumers", message: "messages" };

let cleanup = null;

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = raw.split("?");
  const parts = path.split("/").filter(Boolean);
  return { page: parts[0] || "dashboard", param: parts[1] ? decodeURIComponent(parts[1]) : null, query: new URLSearchParams(query || "") };
}

function renderNav(active) {
  const nav = clear(document.getElementById("nav"));
  if (!session || (session.loginRequired && !session.user)) return;
  for (const [key, label] of NAV) {
    nav.append(h("a", { href: `#/${key}`, class: key === active ? "active" : "", "data-page": key }, label));
  }
}

function renderWho() {
  const who = clear(document.getElementById("who"));
  if (!session) return;
  who.append(h("span", { class: "mono", title: "NameServer" }, session.label ? `${session.label} · ` : "", session.namesrv));
  if (session.readOnly) who.append(h("span", { class: "badge warn" }, "read-only"));
  if (session.user) {
    who.append(h("span", {}, session.user),
      h("button", { class: "small", id: "logout", onclick: async () => {
        await post("/api/logout");
        location.hash = "#/login";
        location.reload();
      } }, "Log out"));
  }
}

async function show() {
  if (cleanup) { try { cleanup(); } catch { /* page already gone */ } cleanup = null; }
  let { page, param, query } = parseHash();
  if (session.loginRequired && !session.user && page !== "login") { location.hash = "#/login"; return; }
  const mod = PAGES[page] || dashboard;
  renderNav(SECTION[page] || page);
  renderWho();
  const main = clear(document.getElementById("main"));
  document.title = `rocketq console · ${page}`;
  try {
    cleanup = (await mod.render(main, param, query)) || null;
  } catch (e) {
    if (e instanceof LoginRequired) return;
    main.append(h("div", { class: "card" }, h("h2", {}, "Something went wrong"), h("p", { class: "muted" }, e.message)));
    toast(e.message, true);
  }
}

export async function restart() {
  await loadSession();
  await show();
}

window.addEventListener("hashchange", show);
window.addEventListener("DOMContentLoaded", async () => {
  try {
    await loadSession();
  } catch (e) {
    clear(document.getElementById("main")).append(h("p", { class: "muted" }, `Cannot reach the console: ${e.message}`));
    return;
  }
  await show();
});

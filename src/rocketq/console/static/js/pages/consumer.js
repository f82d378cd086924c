import { h, badge, card, dataTable, fmtTime, kv, link, modal, route, clear } from "../dom.js";
import { get } from "../api.js";
import { canWrite, resetDialog, skipDialog } from "./topicforms.js";
import { deleteGroupDialog, groupDialog, lagCell } from "./consumers.js";

export async function render(main, group) {
  const enc = encodeURIComponent(group);
  const [d, conn, c] = await Promise.all([get(`/api/consumers/${enc}`), get(`/api/consumers/${enc}/connections`), get("/api/cluster")]);
  const topics = d.topics.filter((t) => !t.startsWith("%RETRY%"));
  main.append(h("h1", {}, h("a", { href: "#/consumers" }, "Consumers"), " / ", h("span", { id: "group-name" }, group), badge(d.state)));
  if (canWrite()) {
    main.append(h("div", { class: "toolbar" },
      h("button", { onclick: () => groupDialog(c.clusters, d, () => location.reload()) }, "Update"),
      topics.length ? h("button", { onclick: () => resetDialog(topics, [group], group) }, "Reset offset") : null,
      topics.length ? h("button", { onclick: () => skipDialog(topics, [group], group) }, "Skip backlog") : null,
      h("span", { class: "spacer" }),
      h("button", { class: "danger", onclick: () => deleteGroupDialog(group, () => { location.hash = "#/consumers"; }) }, "Delete")));
  }
  main.append(h("div", { class: "stats" },
    stat("Lag", lagCell(d.lag), "lag"), stat("Retry lag", d.retryLag ?? "-"), stat("Diff total", d.diffTotal ?? "-"),
    stat("Consume TPS", d.tps), stat("Clients", d.clients), stat("Model", d.messageModel || "-")));
  if (d.errors.length) main.append(h("p", { class: "notice" }, d.errors.join("; ")));
  const p = d.progress;
  main.append(card("Progress per queue (consumerProgress)", h("div", { id: "progress" }, dataTable([
    { key: "topic", label: "Topic", render: (r) => r.topic.startsWith("%RETRY%") ? r.topic : link(route("topic", r.topic), r.topic) },
    { key: "brokerName", label: "Broker" },
    { key: "queueId", label: "Queue", num: true },
    { key: "brokerOffset", label: "Broker offset", num: true },
    { key: "consumerOffset", label: "Consumer offset", num: true },
    { key: "diff", label: "Diff", num: true },
    { key: "clientId", label: "Client" },
    { key: "lastTimestamp", label: "Last consumed message stored", render: (r) => fmtTime(r.lastTimestamp) },
  ], p.queues, {
    empty: "The group has committed no offset yet.",
    foot: p.queues.length ? h("tr", {}, h("td", { colspan: 5 }, "Total"), h("td", { class: "num" }, p.diffTotal.toLocaleString("en-US")), h("td", { colspan: 2 })) : null,
  }))));
  main.append(card(`Connections${conn.online ? "" : " · no client online"}`, dataTable([
    { key: "clientId", label: "Client id", wrap: true },
    { key: "clientAddr", label: "Address" },
    { key: "language", label: "Language" },
    { key: "version", label: "Version" },
    { key: "a", label: "", nosort: true, render: (r) => h("button", { class: "small", onclick: () => runningInfo(group, r.clientId) }, "Running info") },
  ], conn.connections, { empty: "No client of this group is connected." }),
  conn.online ? h("p", { class: "muted small" }, `${conn.consumeType} · ${conn.messageModel} · ${conn.consumeFromWhere}`) : null));
  main.append(h("div", { class: "grid two" },
    card("Subscriptions", dataTable([
      { key: "topic", label: "Topic" }, { key: "subString", label: "Expression" }, { key: "expressionType", label: "Type" },
    ], conn.subscriptions, { empty: "Known only while a client is online." })),
    card("Subscription group config", d.config ? kv(Object.fromEntries(Object.entries(d.config).filter(([k]) => k !== "groupName"))) : h("p", { class: "muted" }, "No config on the brokers."))));
}

function stat(k, v, id) {
  return h("div", { class: "stat", id: id ? `stat-${id}` : null }, h("div", { class: "k" }, k), h("div", { class: "v" }, v instanceof Node ? v : typeof v === "number" ? v.toLocaleString("en-US") : String(v)));
}

async function runningInfo(group, clientId) {
  const m = modal(`Running info · ${clientId}`, h("p", { class: "muted" }, "Asking the client…"));
  try {
    const r = await get(`/api/consumers/${encodeURIComponent(group)}/running-info`, { clientId });
    clear(m.body).append(
      h("h2", {}, "Properties"), kv(r.properties || {}),
      h("h2", {}, "Queues held"), dataTable([
        { key: "topic", label: "Topic" }, { key: "brokerName", label: "Broker" }, { key: "queueId", label: "Queue", num: true },
        { key: "commitOffset", label: "Commit offset", num: true }, { key: "cachedMsgCount", label: "Cached", num: true },
      ], r.mqTable || []),
      h("h2", {}, "Status"), kv(r.statusTable || {}));
  } catch (e) {
    clear(m.body).append(h("p", { class: "notice" }, e.message));
  }
}

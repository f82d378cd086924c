import { h, badge, card, clear, dataTable, fmtTime, kv, link, route } from "../dom.js";
import { get } from "../api.js";
import { canWrite, deleteDialog, resetDialog, sendDialog, skipDialog, topicDialog } from "./topicforms.js";

export async function render(main, topic) {
  const enc = encodeURIComponent(topic);
  const [d, status, consumers, routeData, clusters] = await Promise.all([
    get(`/api/topics/${enc}`), get(`/api/topics/${enc}/status`), get(`/api/topics/${enc}/consumers`),
    get(`/api/topics/${enc}/route`), get("/api/topics", { type: "SYSTEM" }),
  ]);
  const groups = consumers.groups.map((g) => g.group);
  const first = Object.values(d.configs)[0] || {};
  main.append(h("h1", {}, h("a", { href: "#/topics" }, "Topics"), " / ", h("span", { id: "topic-name" }, topic), badge(d.type)));
  if (canWrite()) {
    main.append(h("div", { class: "toolbar" },
      h("button", { id: "send-test", onclick: () => sendDialog(topic) }, "Send test message"),
      h("button", { onclick: () => resetDialog(topic, groups, groups[0]) }, "Reset offset"),
      h("button", { onclick: () => skipDialog(topic, groups, groups[0]) }, "Skip backlog"),
      h("button", { onclick: () => topicDialog(clusters.clusters, { topic, readQueueNums: first.readQueueNums,
        writeQueueNums: first.writeQueueNums, perm: first.perm, messageType: d.messageType }, () => location.reload()) }, "Update"),
      h("span", { class: "spacer" }),
      h("button", { class: "danger", onclick: () => deleteDialog(topic, () => { location.hash = "#/topics"; }) }, "Delete")));
  }
  const total = status.queues.reduce((s, q) => s + q.messages, 0);
  main.append(card(`Queues · ${total.toLocaleString("en-US")} messages held`, dataTable([
    { key: "brokerName", label: "Broker" },
    { key: "queueId", label: "Queue", num: true },
    { key: "minOffset", label: "Min offset", num: true },
    { key: "maxOffset", label: "Max offset", num: true },
    { key: "messages", label: "Messages", num: true },
    { key: "lastUpdateTimestamp", label: "Last update", render: (r) => fmtTime(r.lastUpdateTimestamp) },
  ], status.queues)));
  main.append(card("Consumer groups", h("div", { id: "topic-consumers" }, dataTable([
    { key: "group", label: "Group", render: (r) => link(route("consumer", r.group), r.group) },
    { key: "clients", label: "Clients", num: true },
    { key: "tps", label: "TPS", num: true },
    { key: "lag", label: "Lag on this topic", num: true },
  ], consumers.groups, { empty: "No group consumes this topic." }))));
  main.append(h("div", { class: "grid two" },
    card("Route", dataTable([
      { key: "brokerName", label: "Broker" },
      { key: "cluster", label: "Cluster" },
      { key: "addrs", label: "Addresses", render: (r) => Object.entries(r.brokerAddrs || {}).map(([id, a]) => `${id === "0" ? "master" : "slave " + id}: ${a}`).join(", ") },
    ], routeData.brokerDatas), h("br"), dataTable([
      { key: "brokerName", label: "Broker" },
      { key: "readQueueNums", label: "Read queues", num: true },
      { key: "writeQueueNums", label: "Write queues", num: true },
      { key: "perm", label: "Perm", num: true },
    ], routeData.queueDatas)),
    card("Config", ...Object.entries(d.configs).map(([b, c]) => h("div", {}, h("h2", { class: "muted small" }, b), kv(c))))));
}

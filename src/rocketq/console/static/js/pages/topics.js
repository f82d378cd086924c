import { h, badge, card, clear, dataTable, link, route } from "../dom.js";
import { get } from "../api.js";
import { canWrite, deleteDialog, sendDialog, topicDialog } from "./topicforms.js";

const TYPES = ["ALL", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED", "RETRY", "DLQ", "SYSTEM"];

export async function render(main, _param, query) {
  let type = query.get("type") || "ALL";
  main.append(h("h1", {}, "Topics"));
  const chips = h("div", { class: "chips" });
  const search = h("input", { type: "search", placeholder: "filter by name", id: "topic-filter" });
  const create = h("button", { class: "primary", id: "create-topic", disabled: canWrite() ? null : true }, "Create topic");
  const box = h("div");
  main.append(card(null, h("div", { class: "toolbar" }, chips, h("span", { class: "spacer" }), search, create), box));
  let data = null;

  async function load() {
    data = await get("/api/topics");
    fill();
  }
  function fill() {
    clear(chips);
    for (const t of TYPES) {
      const n = t === "ALL" ? data.topics.length : data.counts[t] || 0;
      chips.append(h("button", { class: `chip ${t === type ? "on" : ""}`, "data-type": t, onclick: () => { type = t; fill(); } },
        t, h("span", { class: "n" }, String(n))));
    }
    const q = search.value.toLowerCase();
    const rows = data.topics.filter((r) => (type === "ALL" || r.type === type) && r.topic.toLowerCase().includes(q));
    clear(box).append(dataTable([
      { key: "topic", label: "Topic", render: (r) => link(route("topic", r.topic), r.topic) },
      { key: "type", label: "Type", render: (r) => badge(r.type) },
      { key: "clusters", label: "Cluster", render: (r) => r.clusters.join(", ") || "-" },
      { key: "brokers", label: "Brokers", render: (r) => r.brokers.join(", ") || "-" },
      { key: "readQueueNums", label: "Read queues", num: true },
      { key: "writeQueueNums", label: "Write queues", num: true },
      { key: "perm", label: "Perm" },
      { key: "a", label: "", nosort: true, render: (r) => h("div", { class: "actions" },
        h("a", { class: "button small", href: route("topic", r.topic) }, "Detail"),
        canWrite() ? h("button", { class: "small", onclick: () => sendDialog(r.topic) }, "Send") : null,
        canWrite() && !["RETRY", "DLQ", "SYSTEM"].includes(r.type)
          ? h("button", { class: "small danger", onclick: () => deleteDialog(r.topic, load) }, "Delete") : null) },
    ], rows, { sortKey: "topic", empty: "No topic of this type." }));
  }
  search.addEventListener("input", fill);
  create.addEventListener("click", () => topicDialog(data.clusters, null, load));
  await load();
}

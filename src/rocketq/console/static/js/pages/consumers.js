import { h, badge, card, clear, dataTable, field, link, modal, route } from "../dom.js";
import { del, get, post, runJob } from "../api.js";
import { canWrite } from "./topicforms.js";

export function groupDialog(clusters, current, done) {
  const cfg = current?.config || {};
  const name = h("input", { name: "group", value: current?.group || "", readonly: current ? true : null, placeholder: "GroupName" });
  const cluster = h("select", { name: "clusterName" }, clusters.map((c) => h("option", { value: c }, c)));
  const retries = h("input", { name: "retryMaxTimes", type: "number", min: 0, max: 64, value: cfg.retryMaxTimes ?? 16 });
  const retryQueues = h("input", { name: "retryQueueNums", type: "number", min: 1, max: 64, value: cfg.retryQueueNums ?? 1 });
  const brokerId = h("input", { name: "brokerId", type: "number", min: 0, value: cfg.brokerId ?? 0 });
  const slow = h("input", { name: "whichBrokerWhenConsumeSlowly", type: "number", min: 0, value: cfg.whichBrokerWhenConsumeSlowly ?? 1 });
  const check = (n, label, v) => { const i = h("input", { type: "checkbox", name: n, checked: !!v }); return [i, h("label", { class: "check" }, i, label)]; };
  const [enable, enableL] = check("consumeEnable", "Consume enabled", cfg.consumeEnable ?? true);
  const [orderly, orderlyL] = check("consumeMessageOrderly", "Orderly", cfg.consumeMessageOrderly ?? false);
  const [bcast, bcastL] = check("consumeBroadcastEnable", "Broadcast", cfg.consumeBroadcastEnable ?? false);
  const [fromMin, fromMinL] = check("consumeFromMinEnable", "Consume from min offset", cfg.consumeFromMinEnable ?? false);
  const m = modal(current ? `Update group ${current.group}` : "Create consumer group", h("div", { class: "form" },
    field("Group name", name), field("Cluster", cluster), field("Max retries", retries), field("Retry queues", retryQueues),
    field("Consume from broker id", brokerId), field("Broker id when consuming slowly", slow),
    enableL, orderlyL, bcastL, fromMinL), [
    { label: "Cancel", onclick: () => m.close() },
    { label: current ? "Update" : "Create", cls: "primary", onclick: async () => {
      m.close();
      const j = await runJob(`${current ? "Update" : "Create"} group ${name.value}`, () => post("/api/consumers", {
        group: name.value.trim(), clusterName: cluster.value, retryMaxTimes: Number(retries.value), retryQueueNums: Number(retryQueues.value),
        brokerId: Number(brokerId.value), whichBrokerWhenConsumeSlowly: Number(slow.value), consumeEnable: enable.checked,
        consumeMessageOrderly: orderly.checked, consumeBroadcastEnable: bcast.checked, consumeFromMinEnable: fromMin.checked,
      }));
      if (j.state === "done" && done) done();
    } },
  ]);
}

export function deleteGroupDialog(group, done) {
  const m = modal(`Delete group ${group}`, h("p", {}, "The subscription group is deleted from every master. Its committed offsets stay on the brokers."), [
    { label: "Cancel", onclick: () => m.close() },
    { label: "Delete", cls: "danger", onclick: async () => {
      m.close();
      const j = await runJob(`Delete group ${group}`, () => del(`/api/consumers/${encodeURIComponent(group)}`));
      if (j.state === "done" && done) done();
    } },
  ]);
}

export async function render(main) {
  main.append(h("h1", {}, "Consumers"));
  const search = h("input", { type: "search", placeholder: "filter by name", id: "group-filter" });
  const sys = h("input", { type: "checkbox", id: "show-system" });
  const create = h("button", { class: "primary", disabled: canWrite() ? null : true }, "Create group");
  const refresh = h("button", {}, "Refresh");
  const box = h("div", {}, h("p", { class: "muted" }, "Loading groups…"));
  main.append(card(null, h("div", { class: "toolbar" }, search, h("label", { class: "check" }, sys, "system groups"),
    h("span", { class: "spacer" }), refresh, create), box));
  let data = { groups: [] };
  let clusters = [];
  function fill() {
    const q = search.value.toLowerCase();
    const rows = data.groups.filter((g) => (sys.checked || !g.system) && g.group.toLowerCase().includes(q));
    clear(box).append(dataTable([
      { key: "group", label: "Group", render: (r) => link(route("consumer", r.group), r.group) },
      { key: "state", label: "State", render: (r) => badge(r.state) },
      { key: "clients", label: "Clients", num: true },
      { key: "tps", label: "Consume TPS", num: true },
      { key: "lag", label: "Lag", num: true, render: (r) => lagCell(r.lag) },
      { key: "retryLag", label: "Retry lag", num: true },
      { key: "messageModel", label: "Model" },
      { key: "consumeType", label: "Type" },
      { key: "topics", label: "Topics", render: (r) => r.topics.filter((t) => !t.startsWith("%RETRY%")).join(", ") || "-", sort: (r) => r.topics.join(",") },
      { key: "a", label: "", nosort: true, render: (r) => h("div", { class: "actions" },
        h("a", { class: "button small", href: route("consumer", r.group) }, "Detail"),
        canWrite() ? h("button", { class: "small danger", onclick: () => deleteGroupDialog(r.group, load) }, "Delete") : null) },
    ], rows, { sortKey: "lag", desc: true, rowAttrs: (r) => ({ "data-group": r.group }), empty: "No consumer group." }));
  }
  async function load() {
    const [d, c] = await Promise.all([get("/api/consumers"), get("/api/cluster")]);
    data = d;
    clusters = c.clusters;
    fill();
  }
  search.addEventListener("input", fill);
  sys.addEventListener("change", fill);
  refresh.addEventListener("click", load);
  create.addEventListener("click", () => groupDialog(clusters, null, load));
  await load();
}

export function lagCell(lag) {
  if (lag === null || lag === undefined) return h("span", { class: "muted", title: "the group has committed no offset yet" }, "-");
  return h("span", { class: lag > 1000 ? "lag-high" : "" }, lag.toLocaleString("en-US"));
}

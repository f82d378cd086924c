import { h, badge, card, dataTable, fmtNum, fmtTime, kv, modal, clear } from "../dom.js";
import { get, url } from "../api.js";

export async function render(main) {
  const c = await get("/api/cluster");
  main.append(h("h1", {}, "Cluster", h("span", { class: "muted small" }, c.clusters.join(", "))));
  const list = dataTable([
    { key: "cluster", label: "Cluster" },
    { key: "brokerName", label: "Broker" },
    { key: "brokerId", label: "ID", num: true },
    { key: "role", label: "Role", render: (r) => badge(r.role) },
    { key: "addr", label: "Address", render: (r) => h("span", { class: "mono" }, r.addr) },
    { key: "version", label: "Version" },
    { key: "inTps", label: "Put TPS", num: true },
    { key: "outTps", label: "Get TPS", num: true },
    { key: "inToday", label: "In today", num: true },
    { key: "outToday", label: "Out today", num: true },
    { key: "diskRatio", label: "Disk used", render: (r) => r.diskRatio ? `${(Number(r.diskRatio) * 100).toFixed(1)} %` : "-" },
    { key: "bootTimestamp", label: "Started", render: (r) => fmtTime(r.bootTimestamp) },
    { key: "actions", label: "", nosort: true, render: (r) => h("div", { class: "actions" },
      h("button", { class: "small", onclick: () => status(r) }, "Status"),
      h("button", { class: "small", onclick: () => config(r) }, "Config")) },
  ], c.brokers, { empty: "No broker registered with the NameServer." });
  main.append(card("Brokers", list));
}

function status(b) {
  modal(`Runtime status · ${b.brokerName} (${b.addr})`, b.error ? h("p", { class: "notice" }, b.error) : kv(b.runtime));
}

async function config(b) {
  const m = modal(`Configuration · ${b.brokerName} (${b.addr})`, h("p", { class: "muted" }, "Loading…"));
  try {
    const r = await get(url("/api/cluster/broker-config", { addr: b.addr }));
    const filter = h("input", { placeholder: "filter keys", type: "search" });
    const box = h("div");
    const fill = () => {
      const q = filter.value.toLowerCase();
      clear(box).append(kv(Object.fromEntries(Object.entries(r.config).filter(([k]) => k.toLowerCase().includes(q)))));
    };
    filter.addEventListener("input", fill);
    fill();
    clear(m.body).append(h("div", { class: "toolbar" }, filter, h("span", { class: "muted small" }, `${fmtNum(Object.keys(r.config).length)} keys`)), box);
  } catch (e) {
    clear(m.body).append(h("p", { class: "notice" }, e.message));
  }
}

import { h, card, clear, dataTable, fmtNum, fmtTime, link, route } from "../dom.js";
import { get } from "../api.js";
import { lineChart } from "./chart.js";

export async function render(main) {
  main.append(h("h1", {}, "Dashboard"));
  const stats = h("div", { class: "stats" });
  const charts = h("div", { class: "grid two" });
  const topicChart = h("div");
  const top = h("div");
  const note = h("p", { class: "muted small" });
  main.append(stats, charts, card("Topic TPS (busiest 10)", topicChart), card("Top topics", top), note);
  let disposers = [];

  async function refresh() {
    const [d, c] = await Promise.all([get("/api/dashboard"), get("/api/cluster")]);
    disposers.forEach((f) => f());
    disposers = [];
    clear(stats).append(
      stat("Brokers", c.brokers.length),
      stat("Masters", c.brokers.filter((b) => b.role === "MASTER").length),
      stat("Put TPS", c.brokers.reduce((s, b) => s + b.inTps, 0)),
      stat("Get TPS", c.brokers.reduce((s, b) => s + b.outTps, 0)),
      stat("Messages in today", c.brokers.reduce((s, b) => s + b.inToday, 0)),
      stat("Messages out today", c.brokers.reduce((s, b) => s + b.outToday, 0)),
    );
    const cin = lineChart("Broker put TPS", d.brokersIn);
    const cout = lineChart("Broker get TPS", d.brokersOut);
    const ct = lineChart("", d.topics);
    clear(charts).append(card(null, cin), card(null, cout));
    clear(topicChart).append(ct);
    disposers = [cin, cout, ct].map((x) => x.dispose).filter(Boolean);
    clear(top).append(dataTable([
      { key: "topic", label: "Topic", render: (r) => link(route("topic", r.topic), r.topic) },
      { key: "tps", label: "TPS (last minute)", num: true },
      { key: "messages", label: "Messages (sum of max offsets)", num: true },
    ], d.topTopics, { sortKey: "tps", desc: true, empty: "No topic traffic sampled yet." }));
    clear(note).append(`Sampled every ${d.intervalSeconds} s; last sample ${fmtTime(d.lastSample)}.`,
      d.lastError ? ` Last sampling error: ${d.lastError}` : "");
  }
  await refresh();
  const timer = setInterval(() => refresh().catch(() => {}), 10000);
  return () => { clearInterval(timer); disposers.forEach((f) => f()); };
}

function stat(k, v) {
  return h("div", { class: "stat" }, h("div", { class: "k" }, k), h("div", { class: "v" }, fmtNum(typeof v === "number" ? Math.round(v * 100) / 100 : v)));
}

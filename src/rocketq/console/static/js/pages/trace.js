import { h, badge, card, clear, field, fmtTime, kv } from "../dom.js";
import { get } from "../api.js";

const MSG_TYPES = ["Normal", "Transaction half", "Transaction commit", "Delay"];

export async function render(main, _p, query) {
  main.append(h("h1", {}, "Message trace"));
  const id = h("input", { name: "msgId", class: "mono", placeholder: "msgId", value: query.get("msgId") || "" });
  const topic = h("input", { name: "topic", placeholder: "topic (optional)", value: query.get("topic") || "" });
  const out = h("div", { id: "trace" });
  const form = h("form", { class: "form" }, field("Message id", id), field("Topic", topic), h("button", { class: "primary", type: "submit" }, "Show trace"));
  main.append(card(null, h("p", { class: "muted small" }, "Traces are written by clients with message trace on (enable_msg_trace) to RMQ_SYS_TRACE_TOPIC."), form), out);
  async function run() {
    clear(out).append(h("p", { class: "muted" }, "Looking up…"));
    try {
      const r = await get("/api/trace", { msgId: id.value.trim(), topic: topic.value.trim() });
      clear(out).append(timeline(r));
    } catch (e) { clear(out).append(h("p", { class: "notice" }, e.message)); }
  }
  form.addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  if (id.value) await run();
}

function timeline(r) {
  const items = [];
  const pub = r.events.filter((e) => e.kind === "Pub");
  for (const e of pub) {
    items.push(h("li", { class: e.success ? "" : "fail" }, h("div", { class: "what" }, "Sent ", badge(e.success ? "ok" : "failed", e.success ? "ok" : "bad")),
      h("div", { class: "when" }, `${fmtTime(e.timestamp)} · ${e.costMs} ms · producer group ${e.group}`),
      kv({ Topic: e.topic, Tags: e.tags || "-", Keys: e.keys || "-", Type: MSG_TYPES[e.msgType] || e.msgType, "Body length": e.bodyLength })));
  }
  if (r.stored) {
    items.push(h("li", { class: "store" }, h("div", { class: "what" }, "Stored"),
      h("div", { class: "when" }, `${fmtTime(r.stored.storeTimestamp)} on ${r.stored.brokerName} (${r.stored.storeHost})`),
      kv({ Queue: r.stored.queueId, "Queue offset": r.stored.queueOffset, "Offset message id": r.stored.offsetMsgId })));
  }
  const after = new Map(r.events.filter((e) => e.kind === "SubAfter").map((e) => [e.requestId, e]));
  for (const e of r.events.filter((x) => x.kind === "SubBefore")) {
    const a = after.get(e.requestId);
    const ok = a ? a.success : null;
    items.push(h("li", { class: ok === false ? "fail consume" : "consume" },
      h("div", { class: "what" }, `Consumed by ${e.group}`, " ", a ? badge(ok ? "ok" : "failed", ok ? "ok" : "bad") : badge("no result", "warn")),
      h("div", { class: "when" }, `${fmtTime(e.timestamp)}${a ? ` · ${a.costMs} ms` : ""}${e.retryTimes ? ` · retry ${e.retryTimes}` : ""}`)));
  }
  if (!items.length) return card(null, h("p", { class: "muted" }, `No trace of ${r.msgId}: was message trace on for its producer and consumers?`));
  return card(`Trace of ${r.msgId}`, h("ol", { class: "timeline" }, items));
}

import { h, badge, card, clear, dataTable, field, fmtTime, kv, link, route, toast } from "../dom.js";
import { get, post } from "../api.js";
import { canWrite } from "./topicforms.js";

export async function render(main, offsetMsgId) {
  const m = await get("/api/messages/detail", { offsetMsgId });
  main.append(h("h1", {}, h("a", { href: "#/messages" }, "Messages"), " / ", h("span", { class: "mono" }, m.msgId)));
  main.append(h("div", { class: "grid two" },
    card("Message", kv({
      "Message id": m.msgId, "Offset message id": m.offsetMsgId,
      Topic: m.topic, "First topic": m.originTopic, Tags: m.tags || "-", Keys: m.keys || "-",
      Broker: m.brokerName, Queue: m.queueId, "Queue offset": m.queueOffset, "CommitLog offset": m.commitLogOffset,
      "Born": `${fmtTime(m.bornTimestamp)} from ${m.bornHost}`, Stored: `${fmtTime(m.storeTimestamp)} on ${m.storeHost}`,
      "Reconsume times": m.reconsumeTimes, "Body length": `${m.bodyLength} bytes`, "Body CRC": m.bodyCRC,
    }), h("p", {}, link(`#/trace?msgId=${encodeURIComponent(m.msgId)}&topic=${encodeURIComponent(m.originTopic)}`, "Message trace →"))),
    card("Properties", h("div", { id: "properties" }, kv(m.properties)))));
  const body = h("pre", { class: "body", id: "message-body" });
  body.textContent = m.body !== undefined ? m.body : m.bodyBase64;
  main.append(card(m.body !== undefined ? "Body (UTF-8 text)" : "Body (binary, base64)", body,
    m.bodyTruncated ? h("p", { class: "muted small" }, "Only the start of the body is shown.") : null));
  main.append(card("Consume status per group", dataTable([
    { key: "group", label: "Group", render: (r) => link(route("consumer", r.group), r.group) },
    { key: "status", label: "Status", render: (r) => badge(r.status) },
  ], m.consumeStatus, { empty: "No group consumes this topic." })));
  if (canWrite()) main.append(resendCard(m));
}

export function resendCard(m) {
  const groups = m.consumeStatus.map((g) => g.group);
  const group = h("input", { name: "group", list: "resend-groups", value: groups[0] || "", placeholder: "consumer group" });
  const client = h("input", { name: "clientId", placeholder: "optional: consume directly by this client id" });
  const out = h("div");
  const form = h("form", { class: "form", id: "resend-form" }, field("Consumer group", group), field("Client id", client),
    h("button", { class: "primary", type: "submit" }, "Resend"), h("datalist", { id: "resend-groups" }, groups.map((g) => h("option", { value: g }))));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const r = await post("/api/messages/resend", { offsetMsgId: m.offsetMsgId, group: group.value.trim(), clientId: client.value.trim() });
      clear(out).append(kv(r.mode === "retryTopic" ? { "Resent through": `%RETRY%${group.value.trim()}`, Status: r.status, "New message id": r.msgId } : r.result));
      toast("Resent");
    } catch (e) { toast(e.message, true); }
  });
  return card("Resend to a consumer group", h("p", { class: "muted small" },
    "A copy goes to the group's retry topic: only that group receives it again, with its first topic. With a client id, that online client consumes it at once instead."), form, out);
}

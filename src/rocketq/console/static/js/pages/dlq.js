import { h, card, clear, dataTable, field, fmtTime, fromLocalInput, link, route, toLocalInput } from "../dom.js";
import { get, post, runJob, url } from "../api.js";
import { canWrite } from "./topicforms.js";

export async function render(main, _p, query) {
  main.append(h("h1", {}, "Dead-letter queue"));
  const groups = (await get("/api/consumers")).groups.filter((g) => !g.system).map((g) => g.group);
  const group = h("input", { name: "group", list: "dlq-groups", placeholder: "consumer group", value: query.get("group") || groups[0] || "" });
  const begin = h("input", { name: "begin", type: "datetime-local", step: 1, value: toLocalInput(Date.now() - 3 * 86400_000) });
  const end = h("input", { name: "end", type: "datetime-local", step: 1, value: toLocalInput(Date.now() + 60_000) });
  const out = h("div", { id: "dlq-results" });
  const form = h("form", { class: "form", id: "dlq-form" }, field("Consumer group", group), field("From", begin), field("To", end),
    h("button", { class: "primary", type: "submit" }, "Search"), h("datalist", { id: "dlq-groups" }, groups.map((g) => h("option", { value: g }))));
  main.append(card(null, h("p", { class: "muted small" }, "Messages a group failed to consume after its retries end up in %DLQ%<group>. Resending delivers a copy to that group again."), form), out);

  async function search() {
    const params = { group: group.value.trim(), begin: fromLocalInput(begin.value), end: fromLocalInput(end.value) };
    const r = await get("/api/dlq", params);
    const picked = new Set();
    const resend = async (ids) => {
      await runJob(`Resend ${ids.length} message(s) to ${params.group}`, () => post("/api/dlq/resend", { group: params.group, offsetMsgIds: ids }));
    };
    const bulk = h("button", { class: "primary", id: "resend-selected", disabled: true, onclick: () => resend([...picked]) }, "Resend selected");
    const all = h("input", { type: "checkbox", title: "select all" });
    const boxes = [];
    all.addEventListener("change", () => boxes.forEach((b) => { b.checked = all.checked; b.dispatchEvent(new Event("change")); }));
    const table = dataTable([
      { key: "pick", label: "", nosort: true, render: (m) => {
        const b = h("input", { type: "checkbox", "data-id": m.offsetMsgId });
        b.addEventListener("change", () => { b.checked ? picked.add(m.offsetMsgId) : picked.delete(m.offsetMsgId); bulk.disabled = !picked.size || !canWrite(); });
        boxes.push(b);
        return b;
      } },
      { key: "msgId", label: "Message id", render: (m) => link(route("message", m.offsetMsgId), m.msgId, { class: "mono" }) },
      { key: "originTopic", label: "First topic" },
      { key: "tags", label: "Tags" },
      { key: "keys", label: "Keys", wrap: true },
      { key: "storeTimestamp", label: "Dead-lettered", render: (m) => fmtTime(m.storeTimestamp) },
      { key: "reconsumeTimes", label: "Retries", num: true },
      { key: "bodyPreview", label: "Body", wrap: true, render: (m) => h("span", { class: "mono" }, m.bodyPreview) },
      { key: "a", label: "", nosort: true, render: (m) => canWrite() ? h("button", { class: "small", "data-resend": m.offsetMsgId, onclick: () => resend([m.offsetMsgId]) }, "Resend") : "" },
    ], r.messages, { empty: "No dead-letter message in this range." });
    clear(out).append(card(`${r.messages.length} message(s)${r.truncated ? " (newest 2000)" : ""}`,
      h("div", { class: "toolbar" }, h("label", { class: "check" }, all, "all"), canWrite() ? bulk : null, h("span", { class: "spacer" }),
        h("a", { class: "button", id: "export", href: url("/api/dlq/export", params), download: `dlq-${params.group}.json` }, "Export (JSON)")),
      table));
  }
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try { await search(); } catch (e) { clear(out).append(h("p", { class: "notice" }, e.message)); }
  });
  if (group.value && query.get("group")) await search();
}

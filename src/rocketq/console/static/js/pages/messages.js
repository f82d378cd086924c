import { h, add, card, clear, dataTable, field, fmtTime, fromLocalInput, link, route, toLocalInput } from "../dom.js";
import { get } from "../api.js";

export function messageTable(rows, extra = []) {
  return dataTable([
    { key: "msgId", label: "Message id", render: (r) => link(route("message", r.offsetMsgId), r.msgId, { class: "mono" }) },
    { key: "topic", label: "Topic" },
    { key: "tags", label: "Tags" },
    { key: "keys", label: "Keys", wrap: true },
    { key: "storeTimestamp", label: "Stored", render: (r) => fmtTime(r.storeTimestamp) },
    { key: "queueId", label: "Queue", num: true, render: (r) => `${r.brokerName}:${r.queueId}` },
    { key: "queueOffset", label: "Offset", num: true },
    { key: "bodyPreview", label: "Body", wrap: true, render: (r) => h("span", { class: "mono body-preview" }, r.bodyPreview) },
    ...extra,
  ], rows, { empty: "No message found." });
}

export async function render(main, _p, query) {
  main.append(h("h1", {}, "Messages"));
  const tabs = [["time", "Topic and time"], ["key", "Message key"], ["id", "Message id"]];
  let tab = query.get("by") || "time";
  const tabBar = h("div", { class: "tabs" });
  const formBox = h("div");
  const result = h("div", { id: "results" });
  main.append(card(null, tabBar, formBox), card("Results", result));
  const topics = (await get("/api/topics")).topics.map((t) => t.topic);
  const topicList = h("datalist", { id: "topic-names" }, topics.map((t) => h("option", { value: t })));
  main.append(topicList);
  const topicInput = () => h("input", { name: "topic", list: "topic-names", placeholder: "topic", value: query.get("topic") || "" });

  function show() {
    add(clear(tabBar), tabs.map(([k, label]) => h("button", { class: k === tab ? "on" : "", "data-tab": k, onclick: () => { tab = k; show(); } }, label)));
    const t = topicInput();
    let inputs;
    let run;
    if (tab === "time") {
      const b = h("input", { name: "begin", type: "datetime-local", step: 1, value: toLocalInput(Date.now() - 3600_000) });
      const e = h("input", { name: "end", type: "datetime-local", step: 1, value: toLocalInput(Date.now() + 60_000) });
      inputs = [field("Topic", t), field("From", b), field("To", e)];
      run = async () => {
        const r = await get("/api/messages", { topic: t.value.trim(), begin: fromLocalInput(b.value), end: fromLocalInput(e.value) });
        return [messageTable(r.messages), r.truncated ? h("p", { class: "notice" }, "Only the newest 2000 messages are shown: narrow the time range.") : null];
      };
    } else if (tab === "key") {
      const k = h("input", { name: "key", placeholder: "message key", value: query.get("key") || "" });
      inputs = [field("Topic", t), field("Key", k)];
      run = async () => [messageTable((await get("/api/messages/by-key", { topic: t.value.trim(), key: k.value.trim() })).messages)];
    } else {
      const i = h("input", { name: "msgId", placeholder: "msgId or offsetMsgId", class: "mono" });
      inputs = [field("Message id", i), field("Topic (for a msgId)", t)];
      run = async () => [messageTable((await get("/api/messages/by-id", { msgId: i.value.trim(), topic: t.value.trim() })).messages)];
    }
    const form = h("form", { class: "form", id: `search-${tab}` }, inputs, h("button", { class: "primary", type: "submit" }, "Search"));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      clear(result).append(h("p", { class: "muted" }, "Searching…"));
      try { add(clear(result), await run()); } catch (err) { clear(result).append(h("p", { class: "notice" }, err.message)); }
    });
    clear(formBox).append(form);
  }
  show();
}

import { h, card, clear, dataTable, field } from "../dom.js";
import { get } from "../api.js";

export async function render(main, _p, query) {
  main.append(h("h1", {}, "Producers"));
  const group = h("input", { name: "group", placeholder: "producer group", value: query.get("group") || "" });
  const topic = h("input", { name: "topic", placeholder: "a topic it sends to", value: query.get("topic") || "" });
  const box = h("div");
  const form = h("form", { class: "form" }, field("Producer group", group), field("Topic", topic), h("button", { class: "primary", type: "submit" }, "Search"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const r = await get("/api/producers", { group: group.value.trim(), topic: topic.value.trim() });
    clear(box).append(dataTable([
      { key: "clientId", label: "Client id", wrap: true }, { key: "clientAddr", label: "Address" },
      { key: "language", label: "Language" }, { key: "version", label: "Version" },
    ], r.connections, { empty: "No producer of this group is connected to the topic's brokers." }));
  });
  main.append(card("Connections of a producer group on a topic", form, h("br"), box));
}

import { h, card } from "../dom.js";
import { get } from "../api.js";

export async function render(main) {
  const doc = await get("/api/openapi.json");
  main.append(h("h1", {}, "API", h("a", { class: "button small", href: "/api/openapi.json" }, "openapi.json")));
  main.append(h("p", { class: "muted" }, doc.info.description));
  const byTag = new Map();
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const tag = op.tags[0];
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push([method.toUpperCase(), path, op]);
    }
  }
  for (const [tag, ops] of byTag) {
    main.append(card(tag, ...ops.map(([m, path, op]) => h("div", { class: "api-op" },
      h("p", {}, h("span", { class: `method ${m}` }, m), " ", h("code", {}, path), " — ", op.summary),
      paramsOf(op)))));
  }
}

function paramsOf(op) {
  const rows = (op.parameters || []).map((p) => [p.name, p.in, p.required ? "required" : "", p.description || ""]);
  const body = op.requestBody?.content["application/json"]?.schema;
  if (body) for (const [n, s] of Object.entries(body.properties)) rows.push([n, "body", (body.required || []).includes(n) ? "required" : "", `${s.type}${s.description ? " · " + s.description : ""}`]);
  if (!rows.length) return null;
  return h("table", { class: "small" }, h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))));
}

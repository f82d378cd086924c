// Dialogs acting on a topic: create / update, send a test message, reset offset, skip backlog, delete.
import { h, field, modal, toast, toLocalInput, fromLocalInput, kv, clear } from "../dom.js";
import { del, post, runJob, session } from "../api.js";

export const MESSAGE_TYPES = ["NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"];

export function canWrite() { return !session.readOnly; }

function select(name, options, value) {
  return h("select", { name }, options.map((o) => h("option", { value: o, selected: o === value ? true : null }, o)));
}

export function topicDialog(clusters, current, done) {
  const name = h("input", { name: "topic", value: current?.topic || "", required: true, readonly: current ? true : null, placeholder: "TopicName" });
  const cluster = select("clusterName", clusters, clusters[0]);
  const r = h("input", { name: "readQueueNums", type: "number", min: 1, max: 1024, value: current?.readQueueNums || 8 });
  const w = h("input", { name: "writeQueueNums", type: "number", min: 1, max: 1024, value: current?.writeQueueNums || 8 });
  const perm = select("perm", ["6", "4", "2"], String(current?.perm || 6));
  const type = select("messageType", MESSAGE_TYPES, current?.messageType || "NORMAL");
  const m = modal(current ? `Update topic ${current.topic}` : "Create topic", h("div", { class: "form" },
    field("Topic name", name), field("Cluster", cluster), field("Read queues (per broker)", r), field("Write queues (per broker)", w),
    field("Permission (6 RW, 4 R, 2 W)", perm), field("Message type", type)), [
    { label: "Cancel", onclick: () => m.close() },
    { label: current ? "Update" : "Create", cls: "primary", onclick: async () => {
      m.close();
      const j = await runJob(`${current ? "Update" : "Create"} topic ${name.value}`, () => post("/api/topics", {
        topic: name.value.trim(), clusterName: cluster.value, readQueueNums: Number(r.value), writeQueueNums: Number(w.value),
        perm: Number(perm.value), messageType: type.value,
      }));
      if (j.state === "done" && done) done();
    } },
  ]);
}

export function sendDialog(topic) {
  const tags = h("input", { name: "tags", placeholder: "TagA" });
  const keys = h("input", { name: "keys", placeholder: "key1 key2" });
  const body = h("textarea", { name: "body", placeholder: "message body (text)" });
  const out = h("div");
  const m = modal(`Send a test message to ${topic}`, [h("div", { class: "form" }, field("Tags", tags), field("Keys (space separated)", keys),
    h("label", { class: "field wide" }, "Body", body)), out], [
    { label: "Close", onclick: () => m.close() },
    { label: "Send", cls: "primary", onclick: async () => {
      try {
        const r = await post(`/api/topics/${encodeURIComponent(topic)}/send`, { body: body.value, tags: tags.value, keys: keys.value });
        clear(out).append(h("h2", {}, "Sent"), kv(r));
        toast(`Sent: ${r.status}`);
      } catch (e) { toast(e.message, true); }
    } },
  ]);
}

// topic: a topic name, or a list of them to choose from (a group's page); groups likewise
function pick(name, values, value, placeholder) {
  if (Array.isArray(values) && values.length) return select(name, values, value);
  return h("input", { name, value: value || "", placeholder });
}

export function resetDialog(topic, groups, group) {
  const t = pick("topic", Array.isArray(topic) ? topic : [topic], Array.isArray(topic) ? topic[0] : topic);
  const g = pick("group", groups, group, "consumer group");
  const when = h("input", { name: "time", type: "datetime-local", step: 1, value: toLocalInput(Date.now() - 3600_000) });
  const force = h("input", { type: "checkbox", checked: true });
  const m = modal("Reset consume offset", h("div", { class: "form" },
    field("Topic", t), field("Consumer group", g), field("Reset to (local time)", when),
    h("label", { class: "check wide" }, force, "Also move offsets backwards (force)")), [
    { label: "Cancel", onclick: () => m.close() },
    { label: "Reset", cls: "primary", onclick: async () => {
      m.close();
      await runJob(`Reset ${g.value} on ${t.value}`, () => post(`/api/topics/${encodeURIComponent(t.value)}/reset-offset`,
        { group: g.value, timestamp: fromLocalInput(when.value), force: force.checked }));
    } },
  ]);
}

export function skipDialog(topic, groups, group) {
  const t = pick("topic", Array.isArray(topic) ? topic : [topic], Array.isArray(topic) ? topic[0] : topic);
  const g = pick("group", groups, group, "consumer group");
  const m = modal("Skip backlog", [h("p", {}, "The group's offsets move to the end of every queue: messages not consumed yet are skipped."),
    h("div", { class: "form" }, field("Topic", t), field("Consumer group", g))], [
    { label: "Cancel", onclick: () => m.close() },
    { label: "Skip backlog", cls: "danger", onclick: async () => {
      m.close();
      await runJob(`Skip backlog of ${g.value} on ${t.value}`, () => post(`/api/topics/${encodeURIComponent(t.value)}/skip-backlog`, { group: g.value }));
    } },
  ]);
}

export function deleteDialog(topic, done) {
  const m = modal(`Delete topic ${topic}`, h("p", {}, "The topic is deleted from every broker that serves it and from the NameServer. Its messages can no longer be consumed."), [
    { label: "Cancel", onclick: () => m.close() },
    { label: "Delete", cls: "danger", onclick: async () => {
      m.close();
      const j = await runJob(`Delete topic ${topic}`, () => del(`/api/topics/${encodeURIComponent(topic)}`));
      if (j.state === "done" && done) done();
    } },
  ]);
}

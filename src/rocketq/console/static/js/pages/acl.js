import { h, badge, card, dataTable } from "../dom.js";
import { get } from "../api.js";

export async function render(main) {
  const r = await get("/api/acl");
  main.append(h("h1", {}, "ACL", badge(r.aclEnabled ? "enabled" : "off", r.aclEnabled ? "ok" : "SYSTEM")));
  if (!r.file) {
    main.append(card(null, h("p", { class: "muted" }, "ACL is not enabled for this console. Brokers turn it on with aclEnable=true and conf/plain_acl.yml; give the console the same file with --acl-file to list its accounts here.")));
    return;
  }
  if (r.error) main.append(h("p", { class: "notice" }, r.error));
  main.append(card("Global white remote addresses", r.globalWhiteRemoteAddresses.length ? h("p", { class: "mono" }, r.globalWhiteRemoteAddresses.join(", ")) : h("p", { class: "muted" }, "None.")));
  main.append(card("Accounts", dataTable([
    { key: "accessKey", label: "Access key" },
    { key: "admin", label: "Admin", render: (a) => a.admin ? badge("admin", "ok") : "-" },
    { key: "whiteRemoteAddress", label: "White address" },
    { key: "defaultTopicPerm", label: "Default topic perm" },
    { key: "defaultGroupPerm", label: "Default group perm" },
    { key: "topicPerms", label: "Topic perms", wrap: true, render: (a) => a.topicPerms.join(", ") || "-" },
    { key: "groupPerms", label: "Group perms", wrap: true, render: (a) => a.groupPerms.join(", ") || "-" },
  ], r.accounts), h("p", { class: "muted small" }, "Read-only: edit plain_acl.yml on the brokers (they re-read it when it changes). Secret keys are never shown.")));
}

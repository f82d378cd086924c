import { h } from "../dom.js";
import { post, setSession, session } from "../api.js";
import { restart } from "../app.js";

export async function render(main) {
  if (!session.loginRequired || session.user) { location.hash = "#/dashboard"; return; }
  const user = h("input", { name: "username", autocomplete: "username", required: true, autofocus: true });
  const pass = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true });
  const err = h("p", { class: "notice", hidden: true, id: "login-error" });
  const form = h("form", { id: "login-form" },
    h("label", { class: "field" }, "User", user),
    h("label", { class: "field" }, "Password", pass),
    err,
    h("button", { class: "primary", type: "submit" }, "Log in"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    err.hidden = true;
    try {
      const r = await post("/api/login", { username: user.value, password: pass.value });
      setSession(r);
      location.hash = "#/dashboard";
      await restart();
    } catch (e) {
      err.textContent = e.message;
      err.hidden = false;
    }
  });
  main.append(h("div", { class: "login" }, h("div", { class: "card" },
    h("h1", {}, "Log in"),
    h("p", { class: "muted small" }, session.aclEnabled
      ? "Use an account of the console's users file or an ACL access key and secret key."
      : "Use an account of the console's users file."),
    form)));
}

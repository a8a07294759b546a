import { DEVICE, type EnrollToken, listAll, rpc } from "./api";
import { h, replace, time } from "./dom";
import { busy, FormErrors, field, secretBox } from "./forms";

const TTL_CHOICES = [
  [600, "10 minutes"],
  [3600, "1 hour"],
  [86_400, "1 day"],
  [604_800, "7 days (the longest allowed)"],
] as const;

/** The enroll-token card: issue one (TTL, label; shown once), list the unused ones, revoke. */
export function enrollCard(token: string, announce: (m: string) => void): HTMLElement {
  let tokens: EnrollToken[] = [];
  const listBox = h("div", {});
  const listError = h("p", { class: "error", role: "alert" });
  const secrets = h("div", { class: "secrets" });
  const ttl = field(
    "Valid for",
    h(
      "select",
      { name: "ttl_seconds" },
      TTL_CHOICES.map(([seconds, label]) => h("option", { value: seconds, selected: seconds === 3600 }, label)),
    ),
    "ttl_seconds",
    "A device must enroll with the token before then; it works once.",
  );
  const label = field(
    "Label",
    h("input", { name: "label", maxlength: 200, autocomplete: "off" }),
    "label",
    "Optional, e.g. the laptop it is for.",
  );
  const errors = new FormErrors([ttl, label]);
  const submit = h("button", { type: "submit", class: "primary" }, "Issue enroll token");
  const form = h(
    "form",
    { class: "row-form", novalidate: true, "aria-labelledby": "enroll-title" },
    ttl.element,
    label.element,
    submit,
    errors.form,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    errors.clear();
    void busy(submit, async () => {
      try {
        const answer = await rpc<{ enrollToken: EnrollToken; token: string }>(
          `${DEVICE}.EnrollmentService/IssueEnrollToken`,
          { ttlSeconds: Number(ttl.control.value), label: label.control.value.trim() },
          token,
        );
        form.reset();
        tokens.unshift(answer.enrollToken);
        render();
        secrets.replaceChildren(
          secretBox(
            `Enroll token${answer.enrollToken.label ? ` for ${answer.enrollToken.label}` : ""}`,
            answer.token,
            "Shown once. The device passes it to DeviceService.EnrollDevice with its public key before it expires.",
          ),
        );
        announce("Enroll token issued; copy it now");
      } catch (e) {
        errors.show(e);
      }
    });
  });
  const revoke = async (t: EnrollToken) => {
    try {
      await rpc(`${DEVICE}.EnrollmentService/RevokeEnrollToken`, { enrollTokenId: t.id }, token);
      tokens = tokens.filter((x) => x.id !== t.id);
      listError.textContent = "";
      render();
      announce("Enroll token revoked");
    } catch (e) {
      listError.textContent = (e as Error).message;
    }
  };
  const render = () =>
    replace(
      listBox,
      h("h3", {}, `Unused enroll tokens (${tokens.length})`),
      listError,
      tokens.length === 0
        ? h("p", { class: "muted" }, "None.")
        : h(
            "ul",
            { class: "plain enroll-tokens" },
            tokens.map((t) =>
              h(
                "li",
                { "data-enroll-token-id": t.id },
                h("strong", {}, t.label || "(no label)"),
                h(
                  "span",
                  { class: "muted" },
                  " · issued ",
                  time(t.createdAt),
                  " · expires ",
                  h("span", { class: "expires" }, t.expiresAt ? new Date(t.expiresAt).toLocaleString() : "?"),
                ),
                " ",
                h(
                  "button",
                  { type: "button", class: "small", onclick: () => void revoke(t) },
                  "Revoke",
                  h("span", { class: "sr-only" }, ` enroll token ${t.label ?? ""}`),
                ),
              ),
            ),
          ),
    );
  void listAll<EnrollToken>(`${DEVICE}.EnrollmentService/ListEnrollTokens`, {}, "enrollTokens", token).then(
    (list) => {
      tokens = list;
      render();
    },
    (e) => replace(listBox, h("p", { class: "error", role: "alert" }, (e as Error).message)),
  );
  return h(
    "section",
    { class: "card", "aria-labelledby": "enroll-title" },
    h("h2", { id: "enroll-title" }, "Enroll a device"),
    form,
    secrets,
    listBox,
  );
}

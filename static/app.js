// Keyboard-only annotation and one submit per page: y/n (or any data-key) picks a choice,
// Enter submits; a form marked data-once cannot be sent twice by a double click.
document.addEventListener("keydown", (ev) => {
  const form = document.querySelector("form.annotate");
  if (!form || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (ev.target.matches("input[type=text], textarea")) return;
  const choice = form.querySelector(`[data-key="${ev.key.toLowerCase()}"]`);
  if (choice) { choice.checked = true; choice.focus(); ev.preventDefault(); return; }
  if (ev.key === "Enter" && ev.target.tagName !== "BUTTON") {
    ev.preventDefault();
    form.requestSubmit();
  }
});
document.addEventListener("submit", (ev) => {
  const form = ev.target;
  if (!form.hasAttribute("data-once")) return;
  if (form.dataset.sent) { ev.preventDefault(); return; }
  form.dataset.sent = "1";
  form.querySelectorAll("button[type=submit]").forEach((b) => (b.disabled = true));
});
document.addEventListener("change", (ev) => {
  const name = ev.target.dataset && ev.target.dataset.selectAll;
  if (name) document.querySelectorAll(`input[name="${name}"]`).forEach((c) => (c.checked = ev.target.checked));
});
// An answer is posted to /task/<slug>/answer, which answers with the next item's page (one
// request per annotation): put the task's own address back, so that a reload asks for the
// current item instead of posting the answer again.
(() => {
  const here = document.querySelector("[data-task-url]");
  if (here && location.pathname !== here.dataset.taskUrl) history.replaceState(null, "", here.dataset.taskUrl);
})();

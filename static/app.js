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
// A judge's optional reason (an input with data-reason, the id of what holds the page's keys):
// while it is typed, Escape goes back to the keys and Enter sends.
document.addEventListener("keydown", (ev) => {
  const home = ev.target.dataset && ev.target.dataset.reason;
  if (!home || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (ev.key === "Escape") { ev.preventDefault(); document.getElementById(home).focus({preventScroll: true}); }
  else if (ev.key === "Enter") { ev.preventDefault(); ev.target.form.requestSubmit(); }
});
// A form marked data-unsent (an item's preview) is never sent; the capture phase comes first.
document.addEventListener("submit", (ev) => {
  if (ev.target.hasAttribute("data-unsent")) ev.preventDefault();
}, true);
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
// Scripts are files of our own (the Content-Security-Policy allows no inline script): what
// pages did inline is here. data-focus is focused without scrolling to it (a phone's page opens
// at its top); data-back goes back a page, or follows its link when there is none to go back to.
(() => {
  const first = document.querySelector("[data-focus]");
  if (first) first.focus({preventScroll: true});
})();
document.addEventListener("click", (ev) => {
  const back = ev.target.closest && ev.target.closest("a[data-back]");
  if (!back || history.length < 2) return;
  ev.preventDefault();
  history.back();
});
// An answer is posted to /task/<slug>/answer, which answers with the next item's page (one
// request per annotation): put the task's own address back, so that a reload asks for the
// current item instead of posting the answer again.
(() => {
  const here = document.querySelector("[data-task-url]");
  if (here && location.pathname !== here.dataset.taskUrl) history.replaceState(null, "", here.dataset.taskUrl);
})();
// A form marked data-inline (a worker's answer, an admin's decision) is sent in the
// background. A refusal (a 4xx or 5xx with its message) shows beside the button that sent it,
// and the page, what was entered on it and the worker's lease stay, to correct and send again
// (nothing is stored by a refused request). An accepted one goes on to data-next (or, for an
// answer, the task's address: the next item or the end). Without JavaScript the form posts as
// usual and a refusal is its own page.
document.addEventListener("submit", async (ev) => {
  const form = ev.target;
  if (ev.defaultPrevented || !form.hasAttribute("data-inline") || !window.fetch) return;
  ev.preventDefault();
  const submitter = ev.submitter || form.querySelector("button[type=submit], button:not([type])");
  let box = form.querySelector(".inline-error");
  if (!box) {
    box = document.createElement("p");
    box.className = "error inline-error";
    box.setAttribute("role", "alert");
  }
  if (submitter) submitter.insertAdjacentElement("afterend", box); else form.append(box);
  box.hidden = true;
  const refuse = (message, status) => {
    box.textContent = message;
    // Not the answer's fault (the item went to someone else, the task moved on): sending again
    // may never work, so say where to go on; the page stays, should the cause pass.
    if (form.dataset.taskUrl && status !== 422) {
      const on = document.createElement("a");
      on.href = form.dataset.taskUrl;
      on.textContent = "See where your task is now";
      box.append(" ", on);
    }
    box.hidden = false;
    delete form.dataset.sent;  // the send-once guard above: this send did not count
    form.querySelectorAll("button[type=submit], button:not([type])").forEach((b) => (b.disabled = false));
    box.scrollIntoView({block: "nearest"});
  };
  let body;
  try { body = new FormData(form, ev.submitter); } catch (_) { body = new FormData(form); }
  let response;
  try {
    response = await fetch(form.action, {method: "POST", body, redirect: "manual", credentials: "same-origin",
                                         headers: {Accept: "application/json"}});
  } catch (_) {
    refuse("Not sent: the server could not be reached. Nothing was lost: send again.");
    return;
  }
  if (response.ok || response.type === "opaqueredirect") {
    location.assign(form.dataset.next || form.dataset.taskUrl || location.href);
    return;
  }
  let message = `refused (${response.status})`;
  try {
    const detail = (await response.json()).detail;
    if (detail) message = typeof detail === "string" ? detail : JSON.stringify(detail);
  } catch (_) { /* not JSON: the status says it */ }
  refuse(`Not sent: ${message}`, response.status);
});
// htmx swaps no refusal (4xx) by default: a form marked data-swap-refusals shows its 422 (the
// fragment that says which field is wrong) in place, as it would a result.
document.addEventListener("htmx:beforeSwap", (ev) => {
  const from = (ev.detail.requestConfig && ev.detail.requestConfig.elt) || ev.detail.elt;  // the form
  if (ev.detail.xhr.status === 422 && from && from.closest("[data-swap-refusals]")) {
    ev.detail.shouldSwap = true;
    ev.detail.isError = false;
  }
});

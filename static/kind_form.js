// The new-study form follows the chosen kind: only its upload formats, its options, its help
// and its default instructions show, and the other kinds' fields are disabled so that they are
// not sent. A preview of another kind's upload is hidden once the kind changes. Without
// JavaScript the form shows every kind's fields, and the server takes the chosen kind's.
(() => {
  const form = document.getElementById("new-study");
  if (!form) return;
  const kind = form.querySelector("#kind"), format = form.querySelector("#format");
  const preview = document.getElementById("preview");
  const apply = () => {
    const k = kind.value;
    let first = null;
    for (const o of format.options) {
      const mine = o.dataset.kind === k;
      o.hidden = !mine;
      o.disabled = !mine;
      if (mine && !first) first = o;
    }
    const chosen = format.selectedOptions[0];
    if (first && (!chosen || chosen.dataset.kind !== k)) format.value = first.value;
    document.querySelectorAll("[data-kind-panel]").forEach((panel) => {
      const on = panel.dataset.kindPanel === k;
      panel.hidden = !on;
      panel.querySelectorAll("input, select, textarea").forEach((field) => (field.disabled = !on));
    });
    if (preview) preview.hidden = preview.dataset.kind !== k;
  };
  kind.addEventListener("change", apply);
  apply();
})();

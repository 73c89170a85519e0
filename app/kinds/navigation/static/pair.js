// Side by side (pair.html): the judge picks A (1), B (2) or a tie (t) (app.js: the radios'
// data-key, and Enter sends), with an optional reason (r; app.js: Escape leaves it, Enter sends). The pick and the reason are kept in this tab's
// sessionStorage under the assignment's id, so that a reload restores them.
(function () {
  const wrap = document.getElementById("nav-pair-wrap");
  if (!wrap) return;
  const form = wrap.closest("form"), reason = document.getElementById("nav-reason");
  const status = document.getElementById("nav-pair-status");
  const winner = () => (form.querySelector("input[name=winner]:checked") || {}).value || "";
  const keep = window.TabKeep("proctor-nav-pair:", wrap.dataset.assignment);  // /static/keep.js

  function save() {
    if (keep) keep.save({winner: winner(), reason: reason.value});
  }
  function show() {
    for (const s of ["a", "b"]) document.getElementById(`nav-side-${s}`).classList.toggle("picked", winner() === s);
    const w = winner();
    status.textContent = w ? (w === "tie" ? "Tie." : `${w.toUpperCase()} is better.`) + " Enter sends." : "";
  }
  form.querySelectorAll("input[name=winner]").forEach((r) => r.addEventListener("change", () => { show(); save(); }));
  reason.addEventListener("input", save);
  form.addEventListener("submit", (e) => {
    if (winner()) return;
    // Not sent: keep the page's send-once guard (app.js) from marking the form as sent.
    e.preventDefault(); e.stopPropagation();
    status.textContent = "Not yet: which is better (1, 2 or t).";
  });
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.target === reason) return;  // the reason's keys: app.js
    if (e.key.toLowerCase() === "r") { e.preventDefault(); reason.focus(); }
    else setTimeout(() => { show(); save(); });  // app.js checks a radio by its data-key: no change event
  });

  const was = keep ? keep.load() : null;
  if (was && ["a", "b", "tie"].includes(was.winner)) document.getElementById(`nav-winner-${was.winner}`).checked = true;
  if (was && typeof was.reason === "string") reason.value = was.reason.slice(0, 500);
  show();
  wrap.focus({preventScroll: true});
})();

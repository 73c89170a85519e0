// Side by side (pair.html): two PNG strips, A and B, moved together by one timeline, as the
// single page's player moves one (player.js). The judge picks a side (a or b), marks it (s or
// f, counted in steps after the takeover as on the single page), then picks the better side
// (1, 2) or a tie (t), with an optional reason (r). Everything is kept in this tab's
// sessionStorage under the assignment's id, so that a reload restores it.
(function () {
  const pair = document.getElementById("sts-pair");
  if (!pair) return;
  const n = Number(pair.dataset.n), takeover = Number(pair.dataset.takeover);
  const markerText = document.getElementById("sts-marker"), activeText = document.getElementById("sts-active");
  const reason = document.getElementById("sts-reason");
  const submit = document.getElementById("submit"), form = document.getElementById("answer-form");
  const sides = {};
  for (const s of ["a", "b"]) {
    sides[s] = {
      box: document.getElementById(`sts-side-${s}`), screen: document.getElementById(`sts-screen-${s}`),
      mark: document.getElementById(`sts-mark-${s}`), tick: document.getElementById(`sts-tick-${s}`),
      kind: document.getElementById(`sts-${s}-marker`), step: document.getElementById(`sts-${s}-step`),
    };
    window.StsStrip.setUp([sides[s].screen], pair.dataset[s === "a" ? "framesA" : "framesB"], n, takeover);
  }
  let frame = 0, active = "a";
  const pct = (i) => window.StsStrip.pct(n, i);  // strip.js
  const winner = () => (form.querySelector("input[name=winner]:checked") || {}).value || "";

  function show(i) {
    frame = window.StsStrip.showFrame(Object.values(sides).map((s) => s.screen), n, takeover, i, true);
    save();
  }

  const keep = window.TabKeep("proctor-sts-pair:", pair.dataset.assignment);  // /static/keep.js
  function save() {
    if (!keep) return;
    const marks = {};
    for (const [k, s] of Object.entries(sides)) marks[k] = s.kind.value ? [s.kind.value, Number(s.step.value)] : null;
    keep.save({frame, active, marks, winner: winner(), reason: reason.value});
  }

  function ready() {
    const missing = [];
    for (const [k, s] of Object.entries(sides)) if (!s.kind.value) missing.push(`a marker on ${k.toUpperCase()}`);
    if (!winner()) missing.push("which did better (1, 2 or t)");
    submit.disabled = missing.length > 0;
    return missing;
  }

  function choose(side) {
    active = side;
    activeText.textContent = side.toUpperCase();
    for (const [k, s] of Object.entries(sides)) s.box.classList.toggle("active", k === side);
    save();
  }

  function place(side, kind, step) {
    const s = sides[side];
    s.kind.value = kind;
    s.step.value = String(step);
    s.mark.textContent = `${kind} at step ${step}`;
    s.tick.hidden = false;
    s.tick.className = `sts-marker-tick ${kind} side-${side}`;
    s.tick.title = `${side.toUpperCase()}: ${kind}`;
    s.tick.style.left = pct(takeover + step);
  }

  function mark(kind) {
    if (frame < takeover) {
      markerText.textContent = `The agents take over at frame ${takeover + 1}: place the marker where they act.`;
      return;
    }
    place(active, kind, frame - takeover);
    markerText.textContent = `${active.toUpperCase()}: ${kind === "success" ? "success" : "failure"} at step ` +
                             `${frame - takeover} after the takeover. Move and mark again to change it.`;
    ready();
    save();
  }

  function pick(value) {
    const input = document.getElementById(`sts-winner-${value}`);
    input.checked = true;
    ready();
    save();
  }

  // The screens are square, side by side: they shrink (to no less than 150 px each) when the
  // page is taller than the window, so that the verdict and Send show without scrolling.
  const transport = window.StsStrip.transport({n, frame: () => frame, show, delay: () => 250,
                                                 screen: sides.a.screen, submit, min: 150});

  document.getElementById("sts-success").addEventListener("click", () => mark("success"));
  document.getElementById("sts-failure").addEventListener("click", () => mark("failure"));
  for (const s of ["a", "b"]) document.getElementById(`sts-pick-${s}`).addEventListener("click", () => choose(s));
  form.querySelectorAll("input[name=winner]").forEach((r) => r.addEventListener("change", () => { ready(); save(); }));
  reason.addEventListener("input", save);
  form.addEventListener("submit", (e) => {
    const missing = ready();
    if (!missing.length) return;
    // Not sent: keep the page's send-once guard (app.js) from marking the form as sent.
    e.preventDefault(); e.stopPropagation();
    markerText.textContent = `Not yet: ${missing.join(", ")}.`;
  });

  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.target === reason) return;  // the reason's keys: app.js
    const jump = e.shiftKey ? 10 : 1, key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    const acts = {
      ...transport.keys(jump),
      a: () => choose("a"), b: () => choose("b"), s: () => mark("success"), f: () => mark("failure"),
      1: () => pick("a"), 2: () => pick("b"), t: () => pick("tie"), r: () => reason.focus(),
    };
    if (acts[key]) { e.preventDefault(); acts[key](); }
  });

  const was = keep ? keep.load() : null;
  if (was) {
    for (const s of ["a", "b"]) {
      const m = was.marks && was.marks[s];
      if (m && (m[0] === "success" || m[0] === "failure") && Number.isInteger(m[1]) && m[1] >= 0 && takeover + m[1] < n) {
        place(s, m[0], m[1]);
      }
    }
    if (["a", "b", "tie"].includes(was.winner)) document.getElementById(`sts-winner-${was.winner}`).checked = true;
    if (typeof was.reason === "string") reason.value = was.reason.slice(0, 500);
  }
  choose(was && (was.active === "a" || was.active === "b") ? was.active : "a");
  ready();
  transport.fit();
  show(was && Number.isInteger(was.frame) ? was.frame : 0);
  pair.focus({preventScroll: true});
})();

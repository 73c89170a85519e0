// Side by side, followed (pair_follow.html): walk instruction 1 in the viewer, stop (s), go
// on (Enter) to instruction 2 from the same start, stop, then pick 1, 2 or a tie (t), an
// optional reason (r), Enter sends. k or Escape takes the last stop back. Both walks (path,
// pose trace, stop and resume events, as on the single follow page) are sent as `follows`,
// keyed by side; the page's 1 and 2 are the sides in data-order. Everything is kept in this
// tab's sessionStorage under the assignment's id, so that a reload resumes where it was.
(() => {
  const wrap = document.getElementById("nav-follow-pair");
  if (!wrap) return;
  const form = wrap.closest("form");
  const box = document.getElementById("nav-view");
  const order = wrap.dataset.order.split(",");
  const scan = wrap.dataset.scan, start = wrap.dataset.start, heading = parseFloat(wrap.dataset.heading) || 0;
  const texts = [...document.getElementById("nav-texts").content.querySelectorAll("p")].map((p) => p.textContent);
  const $ = (id) => document.getElementById(id);
  const stopButton = $("nav-stop"), nextButton = $("nav-next"), resumeButton = $("nav-resume");
  const steps = $("nav-steps"), verdict = $("nav-verdict"), stage = $("nav-stage"), status = $("nav-pair-status");
  const reason = $("nav-reason");
  const touch = !!(window.matchMedia && window.matchMedia("(pointer: coarse)").matches);
  const fresh = () => ({path: [start], trace: [], events: [], stopped: false, t: 0});
  // phase 0: following 1; 1: following 2; 2: picking (walk 2 stopped).
  let st = {phase: 0, walks: [fresh(), fresh()], winner: "", reason: "", at: 0};
  let env = null, viewer = null, offset = 0;
  const walk = () => st.walks[Math.min(st.phase, 1)];
  const now = () => (viewer ? viewer.now() : 0) + offset;
  const winner = () => (form.querySelector("input[name=winner]:checked") || {}).value || "";
  const keep = window.TabKeep("proctor-nav-fpair:", wrap.dataset.assignment);  // /static/keep.js

  function save() {
    const w = walk();
    if (viewer) w.t = now();
    st.winner = winner(); st.reason = reason.value; st.at = Date.now();
    const follows = {};
    st.walks.forEach((x, k) => { follows[order[k]] = {path: x.path, trace: x.trace, events: x.events}; });
    $("nav-follows").value = JSON.stringify(follows);
    if (keep) keep.save(st);
  }
  function load() {
    if (!keep) return null;
    return keep.load((s) => [0, 1, 2].includes(s.phase) && Array.isArray(s.walks) && s.walks.length === 2
      && s.walks.every((w) => Array.isArray(w.path) && w.path[0] === start && Array.isArray(w.trace)
                              && Array.isArray(w.events)));
  }
  const neighbours = (id) => (env.viewpoints[id] || {neighbours: []}).neighbours;

  // The viewer for the walk now, where it was; a new one for each walk (its own clock).
  function mount() {
    if (viewer) viewer.destroy();
    const w = walk();
    const here = w.path[w.path.length - 1], last = w.trace[w.trace.length - 1];
    offset = Number(w.t) || 0;
    const panoramas = {};
    for (const [id, v] of Object.entries(env.viewpoints)) if (v.panorama) panoramas[id] = v.panorama;
    box.replaceChildren();
    viewer = ProctorViewer.mount(box, {
      semantics: env.semantics, panoramas, viewpoint: here, neighbours: neighbours(here),
      heading: last && last[0] === here ? last[1] : heading,
      onMove: (id) => {
        if (walk().stopped) return Promise.reject(new Error("stopped"));
        walk().path.push(id);
        save();
        steps.textContent = `Steps taken: ${walk().path.length - 1}.`;
        viewer.setViewpoint(id, neighbours(id));
      },
      onPose: (p) => { if (!walk().stopped) walk().trace.push([p.viewpoint, p.heading, p.elevation, p.t + offset]); },
    });
    window.proctorViewer = viewer;
    requestAnimationFrame(fitView);  // once the page around it shows this walk
  }
  // While walking, the view is narrowed (16:9, to no less than 400 px wide) where the window
  // is too short for it, so that Stop here shows whole (as on the single follow page).
  function fitView() {
    box.style.maxWidth = "";
    const canvas = box.querySelector("canvas");
    if (!canvas || stage.hidden) return;
    const last = nextButton.hidden ? stopButton : nextButton;
    const over = last.getBoundingClientRect().bottom + window.scrollY + 12 - window.innerHeight;
    const w = canvas.getBoundingClientRect().width;
    if (over > 0 && w > 400) box.style.maxWidth = Math.max(400, Math.floor(w - over * 16 / 9)) + "px";
  }
  window.addEventListener("resize", fitView);
  function show() {
    const k = Math.min(st.phase, 1), w = walk();
    wrap.querySelectorAll("#nav-fpair-steps li").forEach((li) => {
      if (Number(li.dataset.step) === st.phase) li.setAttribute("aria-current", "step");
      else li.removeAttribute("aria-current");
    });
    $("nav-fpair-label").textContent = `Instruction ${k + 1} of 2`;
    $("nav-instruction-text").textContent = texts[k];
    $("nav-instruction").hidden = st.phase === 2;
    stage.hidden = st.phase === 2;
    verdict.hidden = st.phase !== 2;
    // Digits pick only when picking (static/app.js picks inputs by data-key).
    verdict.querySelectorAll("input[data-pick-key]").forEach((r) => {
      if (st.phase === 2) r.dataset.key = r.dataset.pickKey; else delete r.dataset.key;
    });
    stopButton.hidden = w.stopped;
    nextButton.hidden = !(st.phase === 0 && w.stopped);
    resumeButton.hidden = !(st.phase === 0 && w.stopped);
    for (let i = 1; i <= 2; i++) $(`nav-side-${i}`).classList.toggle("picked", winner() === order[i - 1]);
    const picked = winner();
    if (st.phase === 2) {
      status.textContent = picked
        ? (picked === "tie" ? "Tie." : `Instruction ${order.indexOf(picked) + 1} is better.`) + (touch ? "" : " Enter sends.")
        : (touch ? "Which got you along better? Tap one, then Send."
                 : "Which got you along better? 1, 2 or t (tie); r for a reason; Enter sends.");
    } else if (w.stopped) {
      status.textContent = "";
      steps.textContent = touch ? "You stopped here. Go on to instruction 2, or Keep walking."
        : "You stopped here. Enter: go on to instruction 2 (from the same start); k or Escape: keep walking.";
    } else {
      status.textContent = "";
      steps.textContent = w.path.length > 1 ? `Steps taken: ${w.path.length - 1}.`
        : (touch ? `Read all of instruction ${k + 1}, then follow it; tap Stop here when you have arrived.`
                 : `Read all of instruction ${k + 1}, then follow it: arrows turn, Enter walks, s stops.`);
    }
  }
  function stop() {
    const w = walk();
    if (st.phase === 2 || w.stopped || !viewer) return;
    w.stopped = true;
    w.t = now();
    w.events.push({type: "stop", step: w.path.length - 1, t: w.t});
    if (st.phase === 1) { st.phase = 2; viewer.destroy(); viewer = null; }
    save(); show();
    if (st.phase === 2) { verdict.focus({preventScroll: true}); verdict.scrollIntoView({block: "nearest"}); }
    else nextButton.focus({preventScroll: true});
  }
  function resume() {
    if (form.dataset.sent) return;
    if (st.phase === 2) { st.phase = 1; stage.hidden = false; verdict.hidden = true; mount(); }
    const w = walk();
    if (!w.stopped || !viewer) return;
    w.stopped = false;
    w.events.push({type: "resume", step: w.path.length - 1, t: now()});
    const p = viewer.state();
    w.trace.push([p.viewpoint, p.heading, p.elevation, now()]);
    save(); show();
    steps.textContent = `Walking on. Steps taken: ${w.path.length - 1}.`;
    viewer.focus();
  }
  function next() {
    if (st.phase !== 0 || !walk().stopped) return;
    st.phase = 1;
    mount(); save(); show();
    window.scrollTo({top: 0});
    viewer.focus();
  }
  stopButton.addEventListener("click", stop);
  nextButton.addEventListener("click", next);
  resumeButton.addEventListener("click", resume);
  $("nav-resume-2").addEventListener("click", resume);
  form.querySelectorAll("input[name=winner]").forEach((r) => r.addEventListener("change", () => { save(); show(); }));
  reason.addEventListener("input", save);
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || !env) return;
    const key = (ev.key || "").toLowerCase();
    if (ev.target === reason) {  // typing a reason: only Escape (back to the keys) and Enter (send)
      if (key === "escape") { ev.preventDefault(); ev.stopImmediatePropagation(); verdict.focus({preventScroll: true}); }
      return;
    }
    if (st.phase === 2) {
      if (key === "k" || key === "escape") { ev.preventDefault(); ev.stopImmediatePropagation(); resume(); }
      else if (key === "r") { ev.preventDefault(); reason.focus(); }
      else if (key === "enter" && !winner() && ev.target.tagName !== "BUTTON") {
        ev.preventDefault(); ev.stopImmediatePropagation();
        status.textContent = "Not yet: which is better (1, 2 or t).";
      }
      else if (key !== "enter") setTimeout(() => { save(); show(); });  // app.js checks a radio by its data-key: no change event
      return;
    }
    const w = walk();
    if (!w.stopped) {  // walking: Enter outside the view must not send; s stops
      if (key === "enter" && !box.contains(ev.target)) { ev.preventDefault(); ev.stopImmediatePropagation(); return; }
      if (key === "s") { ev.preventDefault(); stop(); }
      return;
    }
    // Stopped on 1: Enter goes on to 2, k or Escape walks on.
    if (key === "enter") { ev.preventDefault(); ev.stopImmediatePropagation(); next(); }
    else if (key === "k" || key === "escape") { ev.preventDefault(); ev.stopImmediatePropagation(); resume(); }
  }, true);
  form.addEventListener("submit", (ev) => {
    if (st.phase === 2 && winner()) { save(); return; }
    // Not sent: keep the page's send-once guard (app.js) from marking the form as sent.
    ev.preventDefault(); ev.stopImmediatePropagation();
    status.textContent = st.phase === 2 ? "Not yet: which is better (1, 2 or t)." : "Not yet: follow both instructions first.";
  }, true);
  // Turns since the last step are kept too when the page goes away (a reload).
  window.addEventListener("pagehide", () => {
    if (!viewer || form.dataset.sent) return;
    const w = walk(), p = viewer.state(), last = w.trace[w.trace.length - 1];
    if (!w.stopped && (!last || last[0] !== p.viewpoint || last[1] !== p.heading || last[2] !== p.elevation)) {
      w.trace.push([p.viewpoint, p.heading, p.elevation, now()]);
    }
    save();
  });

  const saved = load();
  fetch(`/env/${encodeURIComponent(scan)}/view.json`, {credentials: "same-origin"})
    .then((r) => { if (!r.ok) throw new Error(`the building could not be loaded (${r.status})`); return r.json(); })
    .then((data) => {
      env = data;
      const hasPanoramas = Object.values(env.viewpoints).some((v) => v.panorama);
      if (!env.semantics && !hasPanoramas) {
        stopButton.hidden = true;
        box.innerHTML = '<p class="error nav-no-imagery" role="alert">This building has no imagery yet, so the '
          + "instructions cannot be followed here. Please tell the researcher.</p>";
        return;
      }
      if (saved && saved.walks.every((w) => w.path.every((id) => env.viewpoints[id]))) {
        st = saved;
        // The time away (a reload) counts on the walk's clock, as on the single follow page.
        const w = walk();
        if (!w.stopped) w.t = (Number(w.t) || 0) + Math.max(0, Date.now() - (Number(saved.at) || Date.now()));
        if (["a", "b", "tie"].includes(st.winner)) {
          const r = form.querySelector(`input[name=winner][value="${st.winner}"]`);
          if (r) r.checked = true;
        }
        reason.value = String(st.reason || "").slice(0, 500);
      }
      if (st.phase < 2) mount();
      save(); show();
      if (st.phase < 2 && !walk().stopped) viewer.focus();
      else if (st.phase === 0) nextButton.focus({preventScroll: true});
      else verdict.focus({preventScroll: true});
    })
    .catch((err) => { box.innerHTML = ""; const p = document.createElement("p"); p.className = "error";
                      p.setAttribute("role", "alert"); p.textContent = String(err.message || err); box.append(p); });
})();

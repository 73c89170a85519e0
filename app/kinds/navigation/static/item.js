// The follower's page (templates/item.html): the walk, its trace, Stop and the questions.
// Loaded where the template stands, after its markup, viewer.js and practice.js.
(() => {
  const box = document.getElementById("nav-view");
  const form = box.closest("form");
  const scan = box.dataset.scan, start = box.dataset.start, heading = parseFloat(box.dataset.heading) || 0;
  // The path is the whole walk, stops taken back included; events say when the follower
  // stopped and walked on: {type: "stop" | "resume", step: index into path, t: trace ms}.
  let path = [start], trace = [], events = [];
  let stopped = false, viewer = null;
  // The walk so far is kept in this tab's sessionStorage, so that a reload resumes it. Times
  // go on from the saved ones (the viewer's clock restarts at 0 on each load).
  const keep = window.TabKeep("proctor-nav-walk:", box.dataset.assignment);  // /static/keep.js
  let offset = 0;
  const now = () => viewer.now() + offset;
  const save = () => {
    if (keep) keep.save({path, trace, events, stopped, at: Date.now(), t: viewer ? now() : offset});
  };
  const saved = keep ? keep.load((w) => Array.isArray(w.path) && w.path[0] === start && Array.isArray(w.trace)
                                        && Array.isArray(w.events)) : null;
  const steps = document.getElementById("nav-steps");
  const stopButton = document.getElementById("nav-stop");
  const rating = document.getElementById("nav-rating");
  const stage = document.getElementById("nav-stage");
  const touch = !!(window.matchMedia && window.matchMedia("(pointer: coarse)").matches);
  const fill = () => {
    document.getElementById("nav-path").value = JSON.stringify(path);
    document.getElementById("nav-trace").value = JSON.stringify(trace);
    document.getElementById("nav-events").value = JSON.stringify(events);
    save();
  };
  const stop = () => {
    if (stopped || !viewer) return;
    stopped = true;
    events.push({type: "stop", step: path.length - 1, t: now()});
    fill();
    askRating();
  };
  const askRating = () => {
    stopButton.disabled = true;
    steps.textContent = touch
      ? "You stopped here. How easy was it to follow the instructions? Tap an answer, then Next. "
        + "To walk on instead: Keep walking."
      : "You stopped here. How easy was it to follow the instructions? Keys 1-4, "
        + "then Enter. To walk on instead: Keep walking (k or Escape).";
    rating.hidden = false;
    stage.classList.add("stopped");
    // Only now do digits choose a rating (static/app.js picks inputs by data-key).
    rating.querySelectorAll("input[data-rating-key]").forEach((r) => (r.dataset.key = r.dataset.ratingKey));
    rating.focus({preventScroll: true});
    // Where the questions are below the view (narrow screens), bring them into sight.
    const r = rating.getBoundingClientRect();
    if (r.bottom > window.innerHeight || r.top < 0) rating.scrollIntoView({block: "nearest"});
  };
  // While walking, the view is narrowed (16:9, to no less than 400 px wide) where the window
  // is too short for it, so that Stop here shows whole (at 1280x800 it reached past the
  // bottom edge). Once stopped the questions sit beside it or below, as they are.
  const fitView = () => {
    if (stopped) return;
    box.style.maxWidth = "";
    const canvas = box.querySelector("canvas");
    if (!canvas) return;
    const over = stopButton.getBoundingClientRect().bottom + window.scrollY + 12 - window.innerHeight;
    const w = canvas.getBoundingClientRect().width;
    if (over > 0 && w > 400) box.style.maxWidth = Math.max(400, Math.floor(w - over * 16 / 9)) + "px";
  };
  window.addEventListener("resize", fitView);
  const resume = () => {
    if (!stopped || !viewer || form.dataset.sent) return;
    stopped = false;
    events.push({type: "resume", step: path.length - 1, t: now()});
    // The pose may have changed while stopped (a drag); the trace goes on from where it is.
    const p = viewer.state();
    trace.push([p.viewpoint, p.heading, p.elevation, now()]);
    fill();
    rating.hidden = true;
    stage.classList.remove("stopped");
    rating.querySelectorAll("input[data-rating-key]").forEach((r) => delete r.dataset.key);
    stopButton.disabled = false;
    steps.textContent = `Walking on. Steps taken: ${path.length - 1}. `
      + (touch ? "Tap Stop here when you have arrived." : "Press s (or Stop here) when you have arrived.");
    viewer.focus();
  };
  // Before Stop, Enter outside the view must not submit, and s stops; after it, k or Escape
  // walks on.
  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || !viewer) return;
    if (ev.target.matches && ev.target.matches("input[type=text], textarea")) return;
    const key = (ev.key || "").toLowerCase();
    if (!stopped) {
      if (key === "enter" && !box.contains(ev.target)) {
        ev.preventDefault(); ev.stopImmediatePropagation(); return;
      }
      if (key === "s") { ev.preventDefault(); stop(); }
      return;
    }
    if (key === "k" || key === "escape") { ev.preventDefault(); ev.stopImmediatePropagation(); resume(); }
  }, true);
  form.addEventListener("submit", (ev) => {
    if (!stopped) { ev.preventDefault(); ev.stopImmediatePropagation(); return; }
    fill();
  }, true);
  // Turns since the last step are saved too when the page goes away (a reload).
  // The pose trace is throttled, so the pose now is added if the last one is not it.
  window.addEventListener("pagehide", () => {
    if (!viewer || form.dataset.sent) return;
    const p = viewer.state(), last = trace[trace.length - 1];
    if (!stopped && (!last || last[0] !== p.viewpoint || last[1] !== p.heading || last[2] !== p.elevation)) {
      trace.push([p.viewpoint, p.heading, p.elevation, now()]);
    }
    save();
  });
  stopButton.addEventListener("click", stop);
  document.getElementById("nav-resume").addEventListener("click", resume);
  const say = (text, cls) => {
    box.innerHTML = "";
    const p = document.createElement("p");
    p.className = cls; p.setAttribute("role", "alert"); p.textContent = text;
    box.append(p);
  };
  // The real walk (and its clock) starts once the practice episode, if any, is over.
  const begin = () => fetch(`/env/${encodeURIComponent(scan)}/view.json`, {credentials: "same-origin"})
    .then((r) => { if (!r.ok) throw new Error(`the building could not be loaded (${r.status})`); return r.json(); })
    .then((env) => {
      const neighbours = (id) => (env.viewpoints[id] || {neighbours: []}).neighbours;
      const panoramas = {};
      for (const [id, v] of Object.entries(env.viewpoints)) if (v.panorama) panoramas[id] = v.panorama;
      if (!env.semantics && !Object.keys(panoramas).length) {
        stopButton.hidden = true;
        steps.textContent = "";
        say("This building has no imagery yet (no pictures and no model of its rooms), so the "
            + "instruction cannot be followed here. Please tell the researcher.", "error nav-no-imagery");
        return;
      }
      // Resume a saved walk where it was, if its every viewpoint is in this building.
      let here = start, facing = heading;
      if (saved && saved.path.every((id) => env.viewpoints[id])) {
        path = saved.path; trace = saved.trace; events = saved.events;
        here = path[path.length - 1];
        const last = trace[trace.length - 1];
        if (last && last[0] === here) facing = last[1];
        offset = (Number(saved.t) || 0) + Math.max(0, Date.now() - (Number(saved.at) || Date.now()));
      }
      viewer = ProctorViewer.mount(box, {
        semantics: env.semantics, panoramas, viewpoint: here, neighbours: neighbours(here), heading: facing,
        onMove: (id) => {
          if (stopped) return Promise.reject(new Error("stopped"));
          path.push(id);
          fill();
          steps.textContent = `Steps taken: ${path.length - 1}.`;
          viewer.setViewpoint(id, neighbours(id));
        },
        onPose: (p) => { if (!stopped) trace.push([p.viewpoint, p.heading, p.elevation, p.t + offset]); },
      });
      window.proctorViewer = viewer;
      fill();
      fitView();
      viewer.focus();
      if (path.length > 1 || events.length) {
        steps.textContent = `Resumed where you were. Steps taken: ${path.length - 1}.`;
        if (saved.stopped) { stopped = true; askRating(); }
      }
    })
    .catch((err) => say(String(err.message || err), "error"));
  const practice = window.ProctorPractice;
  if (practice && !saved) practice.run(begin); else { if (practice) practice.skip(); begin(); }
})();

// The practice episode (templates/practice.html), once per bundle in this tab: the bundle is
// the section's data-bundle.
window.ProctorPractice = (() => {
  const section = document.getElementById("nav-practice");
  const key = `proctor-nav-practised:${section.dataset.bundle}`;
  const feedback = document.getElementById("nav-practice-feedback");
  const stopButton = document.getElementById("nav-practice-stop");
  const again = document.getElementById("nav-practice-again");
  const done = document.getElementById("nav-practice-done");
  let viewer = null, house = null, stopped = false, onDone = null;
  const practised = () => { try { return sessionStorage.getItem(key) === "1"; } catch (_) { return false; } };
  const finish = () => {
    try { sessionStorage.setItem(key, "1"); } catch (_) { /* then it may be offered again */ }
    if (viewer) viewer.destroy();
    viewer = null;
    section.hidden = true;
    document.getElementById("nav-real").hidden = false;  // after this partial in the page
    window.proctorPractice = undefined;
    const go = onDone; onDone = null;
    if (go) go();
  };
  const walkFromStart = () => {
    stopped = false;
    stopButton.disabled = false;
    again.hidden = true;
    feedback.textContent = "You are at the start.";
    if (viewer) viewer.destroy();
    viewer = ProctorViewer.mount(document.getElementById("nav-practice-view"), {
      semantics: house.semantics, viewpoint: house.start, neighbours: house.neighbours[house.start],
      heading: house.heading,
      onMove: (id) => {
        if (stopped) return Promise.reject(new Error("stopped"));
        viewer.setViewpoint(id, house.neighbours[id]);
        feedback.textContent = "Good: you walked one step. Go on, or Stop here when you have arrived.";
      },
    });
    window.proctorPractice = viewer;
    viewer.focus();
  };
  const stop = () => {
    if (stopped || !viewer) return;
    stopped = true;
    stopButton.disabled = true;
    again.hidden = false;
    done.textContent = "Start the real instructions";
    const here = viewer.state().viewpoint;
    const room = (house.semantics.rooms.find((r) => r.id === house.semantics.viewpoints[here].room) || {}).type;
    feedback.textContent = house.goal.includes(here)
      ? `Well done: you stopped in the ${house.goal_room}. After a real instruction you will then `
        + "say how easy it was to follow. Start the real instructions when you are ready."
      : `You stopped in the ${room || "house"}, not in the ${house.goal_room}. Try again, or `
        + "start the real instructions.";
    done.focus();
  };
  stopButton.addEventListener("click", stop);
  again.addEventListener("click", walkFromStart);
  done.addEventListener("click", finish);
  // s stops the practice walk, as it stops a real one.
  document.addEventListener("keydown", (ev) => {
    if (section.hidden || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if ((ev.key || "").toLowerCase() === "s" && !stopped) { ev.preventDefault(); stop(); }
  });
  return {
    run(begin) {
      if (practised()) { finish(); begin(); return; }
      onDone = begin;
      section.hidden = false;
      fetch("/static/kinds/navigation/practice-house.json")
        .then((r) => { if (!r.ok) throw new Error(String(r.status)); return r.json(); })
        .then((h) => {
          house = h;
          document.getElementById("nav-practice-instruction").textContent = h.instruction;
          walkFromStart();
        })
        .catch(() => finish());  // no practice house: straight to the real instructions
    },
    skip() { onDone = null; finish(); },
  };
})();

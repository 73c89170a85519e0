// The mining page's timeline: one PNG strip holds every frame of the recording; the slider
// (or the arrow keys) picks a step, and "Take over here" posts it as the takeover point.
// With data-review (the admins' failure page) it only shows the episode, with the
// annotators' markers (data-markers: [{marker, step after the takeover}]) on the timeline.
(function () {
  const episode = window.StsStrip.episode("sts-timeline");  // strip.js
  if (!episode) return;
  const {box, n, takeover, screen, pct} = episode;
  const scrub = document.getElementById("sts-scrub"), stepText = document.getElementById("sts-step");
  const field = document.getElementById("takeover-step");
  const review = Boolean(box.dataset.review);
  for (const m of JSON.parse(box.dataset.markers || "[]")) {
    const tick = document.createElement("span");
    tick.className = `sts-marker-tick ${m.marker}`;
    tick.title = `${m.marker} marker at the agent's step ${m.step}`;
    tick.style.left = pct(takeover + Number(m.step));
    document.getElementById("sts-ticks").appendChild(tick);
  }

  function show(i) {
    const frame = Math.max(0, Math.min(n - 1, i));
    window.StsStrip.draw(screen, n, frame);
    scrub.value = frame;
    if (review) {
      stepText.textContent = `Step ${frame} of ${n - 1}: ` +
        (frame < takeover ? "the recording" : `the agent's step ${frame - takeover}`);
      return;
    }
    field.value = frame;
    stepText.textContent = `Step ${frame} of ${n - 1}: the agent would get the first ${frame} actions as context` +
      (frame === takeover ? " (the takeover point now)" : "");
  }

  scrub.addEventListener("input", () => show(Number(scrub.value)));
  box.addEventListener("keydown", (e) => {
    const by = e.shiftKey ? 10 : 1;
    if (e.key === "ArrowLeft") { show(Number(scrub.value) - by); e.preventDefault(); }
    else if (e.key === "ArrowRight") { show(Number(scrub.value) + by); e.preventDefault(); }
  });
  window.addEventListener("resize", () => show(Number(scrub.value)));
  show(takeover);
})();

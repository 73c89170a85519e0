// The mining page's timeline: one PNG strip holds every frame of the recording; the slider
// (or the arrow keys) picks a step, and "Take over here" posts it as the takeover point.
(function () {
  const box = document.getElementById("sts-timeline");
  if (!box) return;
  const n = Number(box.dataset.n), takeover = Number(box.dataset.takeover);
  const screen = document.getElementById("sts-screen"), scrub = document.getElementById("sts-scrub");
  const stepText = document.getElementById("sts-step"), field = document.getElementById("takeover-step");
  screen.style.backgroundImage = `url("${box.dataset.frames}")`;
  const pct = (i) => (n > 1 ? (100 * i) / (n - 1) : 0) + "%";
  document.getElementById("sts-takeover-tick").style.left = pct(takeover);

  function show(i) {
    const frame = Math.max(0, Math.min(n - 1, i));
    const w = screen.clientWidth;
    screen.style.backgroundSize = `${w * n}px ${screen.clientHeight}px`;
    screen.style.backgroundPosition = `${-w * frame}px 0`;
    scrub.value = frame;
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

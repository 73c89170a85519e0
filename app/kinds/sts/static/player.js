// The STS annotator's player: one PNG strip holds every frame; the screen shows frame i by
// moving the strip. The marker's step counts from the takeover point, as the paper's
// annotations do, so a marker can only sit where the agent acts.
(function () {
  const episode = window.StsStrip.episode("sts-player");  // strip.js
  if (!episode) return;
  const {box: player, n, takeover, screen, pct} = episode;
  const speed = document.getElementById("sts-speed");
  const kindInput = document.getElementById("sts-marker-kind"), stepInput = document.getElementById("sts-marker-step");
  const markerText = document.getElementById("sts-marker"), markerTick = document.getElementById("sts-marker-tick");
  const submit = document.getElementById("submit"), form = document.getElementById("answer-form");
  let frame = 0;

  function show(i) {
    frame = window.StsStrip.showFrame([screen], n, takeover, i, false);
    save();
  }

  // The marker and the frame shown are kept in this tab's sessionStorage under the
  // assignment's id (as navigation keeps a walk), so that a reload restores them.
  const keep = window.TabKeep("proctor-sts-marker:", player.dataset.assignment);  // /static/keep.js
  function save() {
    if (keep) keep.save({frame, kind: kindInput.value, step: stepInput.value === "" ? null : Number(stepInput.value)});
  }

  // The frame shrinks (to no less than 200 px) when the page is taller than the window, so
  // that the marking buttons and Send show without scrolling (strip.js).
  const transport = window.StsStrip.transport({n, frame: () => frame, show, delay: () => 250 / Number(speed.value),
                                                 screen, submit, min: 200});

  function mark(kind) {
    if (frame < takeover) {
      markerText.textContent = `The agent takes over at frame ${takeover + 1}: place the marker where it acts.`;
      return;
    }
    kindInput.value = kind;
    stepInput.value = String(frame - takeover);
    markerText.textContent = `${kind === "success" ? "Success" : "Failure"} at step ${frame - takeover} after the takeover. ` +
                             "Move to another frame and mark again to change it.";
    markerTick.hidden = false;
    markerTick.className = "sts-marker-tick " + kind;
    markerTick.style.left = pct(frame);
    submit.disabled = false;
    save();
  }

  speed.addEventListener("change", () => { if (transport.playing()) { transport.stop(); transport.play(); } });
  document.getElementById("sts-success").addEventListener("click", () => mark("success"));
  document.getElementById("sts-failure").addEventListener("click", () => mark("failure"));
  form.addEventListener("submit", (e) => {
    if (kindInput.value) return;
    // Not sent: keep the page's send-once guard (app.js) from marking the form as sent.
    e.preventDefault(); e.stopPropagation();
    markerText.textContent = "Place a marker first (s or f).";
  });

  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "SELECT" || e.altKey || e.ctrlKey || e.metaKey) return;
    const acts = {
      ...transport.keys(e.shiftKey ? 10 : 1),
      s: () => mark("success"), S: () => mark("success"), f: () => mark("failure"), F: () => mark("failure"),
    };
    if (acts[e.key]) { e.preventDefault(); acts[e.key](); }
  });
  const was = keep ? keep.load() : null;
  if (was && (was.kind === "success" || was.kind === "failure") && Number.isInteger(was.step)
      && was.step >= 0 && takeover + was.step < n) {
    frame = takeover + was.step;
    mark(was.kind);
  }
  transport.fit();
  show(was && Number.isInteger(was.frame) ? was.frame : 0);
  player.focus({preventScroll: true});
})();

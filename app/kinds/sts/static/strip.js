// What the STS pages that show an episode share (player.js, pair.js, timeline.js): one PNG
// strip holds every frame, a screen shows frame i by moving the strip, and the timeline marks
// the takeover point. Loaded before those scripts.
(function () {
  "use strict";
  const pct = (n, i) => (n > 1 ? (100 * i) / (n - 1) : 0) + "%";
  window.StsStrip = {
    // Where frame i of n stands on the timeline (a CSS left).
    pct: pct,
    // A single-screen page's episode (player.js, timeline.js): the element `id` (data-n,
    // data-takeover, data-frames: the strip's url) and its strip on the screen #sts-screen;
    // null on a page without it.
    episode: function (id) {
      const box = document.getElementById(id);
      if (!box) return null;
      const n = Number(box.dataset.n), takeover = Number(box.dataset.takeover);
      const screen = document.getElementById("sts-screen");
      this.setUp([screen], box.dataset.frames, n, takeover);
      return {box, n, takeover, screen, pct: (i) => pct(n, i)};
    },
    // The screen shows the strip at url; the timeline's takeover tick stands at its frame.
    setUp: function (screens, url, n, takeover) {
      for (const screen of screens) screen.style.backgroundImage = `url("${url}")`;
      document.getElementById("sts-takeover-tick").style.left = pct(n, takeover);
    },
    // The screen shows frame `frame` of n (the strip scaled to n screens wide).
    draw: function (screen, n, frame) {
      const w = screen.clientWidth;
      screen.style.backgroundSize = `${w * n}px ${screen.clientHeight}px`;
      screen.style.backgroundPosition = `${-w * frame}px 0`;
    },
    // The annotator's pages (player.js, pair.js, one screen or two): frame i, kept within the
    // n frames, on the screens and the scrubber, with the phase line (the recording before the
    // takeover, the agent or agents after it) and "frame i of n". Returns the frame shown.
    showFrame: function (screens, n, takeover, i, agents) {
      const frame = Math.max(0, Math.min(n - 1, i));
      for (const screen of screens) this.draw(screen, n, frame);
      document.getElementById("sts-scrub").value = frame;
      const phase = document.getElementById("sts-phase"), agent = frame >= takeover;
      phase.textContent = agent
        ? `The ${agents ? "agents act" : "agent acts"}: step ${frame - takeover} after the takeover`
        : `The recording (context): the ${agents ? "agents take" : "agent takes"} over in ${takeover - frame} steps`;
      phase.classList.toggle("agent", agent);
      document.getElementById("sts-step").textContent = `frame ${frame + 1} of ${n}`;
      return frame;
    },
    // What the single and the side-by-side pages do alike with the timeline (_timeline.html's
    // step_buttons): play and pause (a frame every delay() ms, stopping at the end), step back
    // and on, scrub, and fit the screen (no lower than min px) so that Send shows without
    // scrolling. frame() is the frame shown, show(i) shows frame i. keys(jump): the keys both
    // answer, space plays or pauses, the arrows step by jump, Home and End.
    transport: function ({n, frame, show, delay, screen, submit, min}) {
      const playBtn = document.getElementById("sts-play"), scrub = document.getElementById("sts-scrub");
      let timer = null;
      function stop() { clearInterval(timer); timer = null; playBtn.firstChild.textContent = "Play "; }
      function play() {
        if (frame() >= n - 1) show(0);
        playBtn.firstChild.textContent = "Pause ";
        timer = setInterval(() => { if (frame() >= n - 1) stop(); else show(frame() + 1); }, delay());
      }
      function toggle() { timer ? stop() : play(); }
      const step = (i) => { stop(); show(i); };
      function fit() {
        document.body.style.removeProperty("--sts-size");
        const size = screen.getBoundingClientRect().height;
        const over = submit.getBoundingClientRect().bottom + window.scrollY + 12 - window.innerHeight;
        if (over > 0) document.body.style.setProperty("--sts-size", Math.max(min, Math.floor(size - over)) + "px");
        show(frame());
      }
      playBtn.addEventListener("click", toggle);
      document.getElementById("sts-back").addEventListener("click", () => step(frame() - 1));
      document.getElementById("sts-fwd").addEventListener("click", () => step(frame() + 1));
      scrub.addEventListener("input", () => step(Number(scrub.value)));
      window.addEventListener("resize", fit);
      window.addEventListener("load", fit);
      return {
        fit, stop, play, playing: () => timer !== null,
        keys: (jump) => ({
          " ": toggle, ArrowRight: () => step(frame() + jump), ArrowLeft: () => step(frame() - jump),
          Home: () => step(0), End: () => step(n - 1),
        }),
      };
    },
  };
})();

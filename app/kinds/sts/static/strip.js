// What the STS pages that show an episode share (player.js, pair.js, timeline.js): one PNG
// strip holds every frame, a screen shows frame i by moving the strip, and the timeline marks
// the takeover point. Loaded before those scripts.
(function () {
  "use strict";
  const pct = (n, i) => (n > 1 ? (100 * i) / (n - 1) : 0) + "%";
  window.StsStrip = {
    // Where frame i of n stands on the timeline (a CSS left).
    pct: pct,
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
    // The phase line: the recording before the takeover, the agent(s) after it.
    phase: function (el, frame, takeover, agents) {
      const agent = frame >= takeover;
      el.textContent = agent
        ? `The ${agents ? "agents act" : "agent acts"}: step ${frame - takeover} after the takeover`
        : `The recording (context): the ${agents ? "agents take" : "agent takes"} over in ${takeover - frame} steps`;
      el.classList.toggle("agent", agent);
    },
  };
})();

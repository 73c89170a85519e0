// Work in progress on a Hexagons page, kept in this tab's sessionStorage under
// "<prefix><assignment id>" so a reload resumes it: the execution page (item.html,
// "proctor-hex-exec:") and the description page (description_item.html, "proctor-hex-desc:").
// HexKeep(prefix, id) is null without an assignment id (the researcher's preview keeps nothing).
// docs/kinds/hexagons.md, "Reload".
(function () {
  "use strict";
  function HexKeep(prefix, id) {
    if (!id) return null;
    const key = prefix + id;
    return {
      key: key,
      // The state saved before, if valid(state) accepts it, else null. The keys of earlier
      // assignments (same prefix) are done with and go.
      load: function (valid) {
        try {
          for (let i = sessionStorage.length - 1; i >= 0; i--) {
            const k = sessionStorage.key(i);
            if (k && k.startsWith(prefix) && k !== key) sessionStorage.removeItem(k);
          }
          const s = JSON.parse(sessionStorage.getItem(key) || "null");
          return s && valid(s) ? s : null;
        } catch (_) { return null; }
      },
      save: function (state) {
        try { sessionStorage.setItem(key, JSON.stringify(state)); }
        catch (_) { /* storage full or off: the answer is still sent, only not resumable */ }
      },
    };
  }
  // A board of n colour codes 0-7; a colour 0-7; a list of [tile, colour, ms] paints.
  HexKeep.isBoard = (b, n) => Array.isArray(b) && b.length === n && b.every((v) => Number.isInteger(v) && v >= 0 && v <= 7);
  HexKeep.isColour = (c) => Number.isInteger(c) && c >= 0 && c <= 7;
  HexKeep.isActions = (a) => Array.isArray(a) && a.every((x) => Array.isArray(x) && x.length === 3 && x.every(Number.isFinite));
  window.HexKeep = HexKeep;
})();

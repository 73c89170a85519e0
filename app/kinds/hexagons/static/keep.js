// Work in progress on a Hexagons page, kept in this tab's sessionStorage under
// "<prefix><assignment id>" so a reload resumes it: the execution page (item.html,
// "proctor-hex-exec:") and the description page (description_item.html, "proctor-hex-desc:").
// HexKeep(prefix, id) is the core's TabKeep (/static/keep.js, loaded before this file): null
// without an assignment id (the researcher's preview keeps nothing). This file adds the checks
// of a saved board. docs/kinds/hexagons.md, "Reload".
(function () {
  "use strict";
  const HexKeep = (prefix, id) => window.TabKeep(prefix, id);
  // A board of n colour codes 0-7; a colour 0-7; a list of [tile, colour, ms] paints.
  HexKeep.isBoard = (b, n) => Array.isArray(b) && b.length === n && b.every((v) => Number.isInteger(v) && v >= 0 && v <= 7);
  HexKeep.isColour = (c) => Number.isInteger(c) && c >= 0 && c <= 7;
  HexKeep.isActions = (a) => Array.isArray(a) && a.every((x) => Array.isArray(x) && x.length === 3 && x.every(Number.isFinite));
  window.HexKeep = HexKeep;
})();

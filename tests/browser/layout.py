"""Layout checks at a phone's width, run in the page: no element reaches past the viewport
(except inside a box that scrolls on its own, which must itself fit), the page never scrolls
sideways, and no two things a person reads or presses overlap."""

from __future__ import annotations

# Things a person reads or presses; an element and one inside it do not count as overlapping.
ATOMS = (
    "a, button, input, select, textarea, code, h1, h2, h3, summary, progress, img, svg, kbd, "
    "label, .state, th, td, dt, dd, li, p, pre, iframe, legend"
)

CHECK = """(atoms) => {
  const W = document.documentElement.clientWidth;
  const folded = (e) => { const d = e.closest("details:not([open])"); return d && !e.closest("summary"); };
  const shown = (e) => { if (folded(e)) return false; const s = getComputedStyle(e); const r = e.getBoundingClientRect();
    return s.visibility !== "hidden" && s.display !== "none" && r.width > 0 && r.height > 0; };
  const scroller = (e) => { for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX; if (o === "auto" || o === "scroll" || o === "hidden") return p; }
    return null; };
  const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
    (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\\s+/).join(".") : "") +
    " \\"" + (e.innerText || e.value || "").trim().slice(0, 40) + "\\"";
  const wide = [];
  for (const e of document.querySelectorAll("body *")) {
    if (!shown(e) || scroller(e)) continue;
    const r = e.getBoundingClientRect();
    if (r.right > W + 0.5 || r.left < -0.5) wide.push(name(e) + ` [${Math.round(r.left)}, ${Math.round(r.right)}]`);
  }
  // What of an element shows: its boxes cut to every box around it that clips (a box that
  // scrolls on its own shows only what is scrolled into it).
  const clip = (e) => { let c = {left: -Infinity, top: -Infinity, right: Infinity, bottom: Infinity};
    for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (s.overflowX === "visible" && s.overflowY === "visible") continue;
      const r = p.getBoundingClientRect();
      c = {left: Math.max(c.left, r.left), top: Math.max(c.top, r.top),
           right: Math.min(c.right, r.right), bottom: Math.min(c.bottom, r.bottom)};
    }
    return c; };
  const seen = (e) => { const c = clip(e);
    return [...e.getClientRects()].map((r) => ({left: Math.max(r.left, c.left), top: Math.max(r.top, c.top),
      right: Math.min(r.right, c.right), bottom: Math.min(r.bottom, c.bottom)}))
      .filter((r) => r.right - r.left > 0 && r.bottom - r.top > 0); };
  const els = [...document.querySelectorAll(atoms)].filter(shown);
  const boxes = els.map(seen);
  const overlapping = [];
  for (let i = 0; i < els.length; i++) for (let j = i + 1; j < els.length; j++) {
    const a = els[i], b = els[j];
    if (a.contains(b) || b.contains(a)) continue;
    const hit = boxes[i].some((p) => boxes[j].some((q) =>
      Math.min(p.right, q.right) - Math.max(p.left, q.left) > 1 && Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top) > 1));
    if (hit) overlapping.push(name(a) + " / " + name(b));
  }
  return {scroll: document.documentElement.scrollWidth, width: W, wide, overlapping};
}"""


def check_layout(page) -> dict:
    """{"scroll", "width", "wide": [...], "overlapping": [...]} for the page as it is now."""
    return page.evaluate(CHECK, ATOMS)


def assert_fits(page, what: str = "") -> None:
    got = check_layout(page)
    assert got["scroll"] <= got["width"], (what, "scrolls sideways", got)
    assert got["wide"] == [], (what, "wider than the screen", got["wide"][:10])
    assert got["overlapping"] == [], (what, "overlapping", got["overlapping"][:10])

"""Schematic top-down maps of a building for the admin's replay of a following session.

`floor_maps(graph, reference, walked)` draws, as plain SVG text, one map per floor that the
intended path or the follower's path visits: the navigation graph (viewpoints as dots, edges
as lines), room outlines and names and the walls when the building has a semantics sidecar
(generated houses), the intended path, the follower's path with arrows in walking order, the
start, the goal with the 3 m success circle around it, and where the follower stopped with
their navigation error (the graph distance to the goal, as scored).

Map units are metres: a point (x, y) of the building is drawn at (x, -y), so north (+y) is up
and the success circle has radius 3.0 in the SVG's own units. Sizes of dots, lines and text are
set in screen pixels divided by the scale, so large and small buildings read alike.

Floors: a generated house names each viewpoint's floor in its sidecar. A Matterport3D building
does not, so floors are found from the camera heights: 0.5 m bands holding at least 3% of the
viewpoints (and at least 3) are floor bands, bands at most 1 m apart are one floor (split
levels), and every other viewpoint (stairs) goes to the nearest floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

from app.kinds.navigation.graph import NavGraph
from app.kinds.navigation.metrics import SUCCESS_DISTANCE

MAX_WIDTH_PX = 760
MAX_HEIGHT_PX = 640
MAX_SCALE = 40.0  # pixels per metre for small houses
PAD_M = 1.0

INTENDED = "#2563eb"
WALKED = "#ea580c"
GOAL = "#15803d"


@dataclass(frozen=True)
class FloorMap:
    floor: int  # 0 = the lowest floor of the building
    n_floors: int
    label: str  # "" for a one-floor building
    svg: str


def floor_of(graph: NavGraph, semantics: dict | None = None) -> dict[str, int]:
    """Each viewpoint's floor, 0 = lowest."""
    vps = (semantics or {}).get("viewpoints") or {}
    if vps and all(isinstance(vps.get(v), dict) and isinstance(vps[v].get("floor"), int) for v in graph.viewpoints):
        levels = sorted({vps[v]["floor"] for v in graph.viewpoints})
        rank = {lv: k for k, lv in enumerate(levels)}
        return {v: rank[vps[v]["floor"]] for v in graph.viewpoints}
    return dict(zip(graph.viewpoints, _levels_from_heights(graph.positions[:, 2]).tolist()))


def _levels_from_heights(z: np.ndarray) -> np.ndarray:
    if len(z) == 0:
        return np.zeros(0, dtype=int)
    bands = ((z - z.min()) // 0.5).astype(int)
    counts = np.bincount(bands)
    need = max(3.0, 0.03 * len(z))
    runs: list[list[int]] = []
    for b, c in enumerate(counts):
        if c >= need:
            if runs and b - runs[-1][1] <= 2:  # one thin band between: still the same floor
                runs[-1][1] = b
            else:
                runs.append([b, b])
    if len(runs) < 2:
        return np.zeros(len(z), dtype=int)
    spans = np.array(runs)
    gap = np.maximum(spans[:, 0][None, :] - bands[:, None], 0) + np.maximum(bands[:, None] - spans[:, 1][None, :], 0)
    return gap.argmin(axis=1)


def floor_maps(
    graph: NavGraph,
    reference: Sequence[str],
    walked: Sequence[str],
    *,
    semantics: dict | None = None,
    id_prefix: str = "map",
) -> list[FloorMap]:
    """One map per floor visited by either path, lowest first. Viewpoints the graph does not
    know are left out (a building re-imported since); `id_prefix` keeps the ids of several
    maps on one page apart."""
    reference = [v for v in reference if v in graph]
    walked = [v for v in walked if v in graph]
    floors = floor_of(graph, semantics)
    n_floors = (max(floors.values()) + 1) if floors else 1
    shown = sorted({floors[v] for v in (*reference, *walked)})
    ne = graph.distance(walked[-1], reference[-1]) if walked and reference else None
    return [
        FloorMap(
            f,
            n_floors,
            f"Floor {f + 1} of {n_floors}" if n_floors > 1 else "",
            _floor_svg(graph, floors, f, n_floors, reference, walked, ne, semantics, f"{id_prefix}-f{f}"),
        )
        for f in shown
    ]


def _runs(path: Sequence[str], floors: dict[str, int], floor: int) -> list[list[int]]:
    """Indices into `path` of its stretches on `floor`, in walking order."""
    out: list[list[int]] = []
    for k, v in enumerate(path):
        if floors[v] != floor:
            continue
        if out and out[-1][-1] == k - 1:
            out[-1].append(k)
        else:
            out.append([k])
    return out


def _f(x: float) -> str:
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def _floor_svg(
    graph: NavGraph,
    floors: dict[str, int],
    floor: int,
    n_floors: int,
    reference: Sequence[str],
    walked: Sequence[str],
    ne: float | None,
    semantics: dict | None,
    uid: str,
) -> str:
    uid = escape(uid)  # built from ids in the data: an attribute value, never markup
    on = np.array([floors[v] == floor for v in graph.viewpoints], dtype=bool)
    xy = graph.positions[:, :2] * np.array([1.0, -1.0])  # screen y grows downwards

    def pt(v: str) -> tuple[float, float]:
        x, y = xy[graph.index[v]]
        return float(x), float(y)

    level = _sidecar_level(semantics, floor)
    rooms = [r for r in (semantics or {}).get("rooms", []) if level is not None and r.get("floor") == level]
    walls = [w for w in (semantics or {}).get("walls", []) if level is not None and w.get("floor") == level]
    goal = reference[-1] if reference else None
    goal_here = goal is not None and floors[goal] == floor

    xs, ys = list(xy[on, 0]), list(xy[on, 1])
    for r in rooms:
        x0, y0, x1, y1 = r["bounds"]
        xs += [x0, x1]
        ys += [-y0, -y1]
    if goal_here:
        gx, gy = pt(goal)
        xs += [gx - SUCCESS_DISTANCE, gx + SUCCESS_DISTANCE]
        ys += [gy - SUCCESS_DISTANCE, gy + SUCCESS_DISTANCE]
    x0, x1 = min(xs) - PAD_M, max(xs) + PAD_M
    y0, y1 = min(ys) - PAD_M, max(ys) + PAD_M
    w, h = x1 - x0, y1 - y0
    scale = min(MAX_SCALE, MAX_WIDTH_PX / w, MAX_HEIGHT_PX / h)
    px = 1.0 / scale  # one screen pixel in metres

    title = (
        f"{'Floor %d of %d: ' % (floor + 1, n_floors) if n_floors > 1 else ''}"
        "intended path (blue), the follower's path (orange), the goal's 3 m circle (green)"
    )
    halo = f'stroke="#fff" stroke-width="{_f(3 * px)}" paint-order="stroke"'
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="nav-map" id="{uid}" data-floor="{floor}" '
        f'viewBox="{_f(x0)} {_f(y0)} {_f(w)} {_f(h)}" width="{round(w * scale)}" '
        f'height="{round(h * scale)}" style="max-width:100%;height:auto" role="img" aria-labelledby="{uid}-title" '
        f'font-family="sans-serif" font-size="{_f(11 * px)}">',
        f'<title id="{uid}-title">{escape(title)}</title>',
    ]

    if rooms:
        out.append(f'<g class="rooms" fill="#f8fafc" stroke="#cbd5e1" stroke-width="{_f(px)}">')
        for r in rooms:
            rx0, ry0, rx1, ry1 = r["bounds"]
            out.append(
                f'<rect x="{_f(rx0)}" y="{_f(-ry1)}" width="{_f(rx1 - rx0)}" '
                f'height="{_f(ry1 - ry0)}" data-room="{escape(str(r.get("id", "")))}"/>'
            )
        out.append("</g>")
        out.append('<g class="room-names" fill="#64748b" text-anchor="middle">')
        for r in rooms:
            rx0, ry0, rx1, ry1 = r["bounds"]
            out.append(
                f'<text x="{_f((rx0 + rx1) / 2)}" y="{_f(-ry1 + 14 * px)}">{escape(str(r.get("type", "")))}</text>'
            )
        out.append("</g>")
    if walls:
        d = " ".join(f"M{_f(wl['a'][0])} {_f(-wl['a'][1])}L{_f(wl['b'][0])} {_f(-wl['b'][1])}" for wl in walls)
        out.append(f'<path class="walls" d="{d}" stroke="#475569" stroke-width="{_f(2 * px)}" fill="none"/>')

    from scipy.sparse import triu  # here: see graph.py

    upper = triu(graph.adjacency, k=1).tocoo()
    edges = list(zip(upper.row.tolist(), upper.col.tolist()))
    d = " ".join(f"M{_f(xy[i, 0])} {_f(xy[i, 1])}L{_f(xy[j, 0])} {_f(xy[j, 1])}" for i, j in edges if on[i] and on[j])
    out.append(f'<path class="nav-edges" d="{d}" stroke="#94a3b8" stroke-width="{_f(px)}" fill="none"/>')
    # Viewpoints with an edge to another floor (stairs) get a ring.
    stairs = {k for i, j in edges if on[i] != on[j] for k in (i, j)}
    out.append('<g class="viewpoints" fill="#94a3b8">')
    for i in np.flatnonzero(on).tolist():
        ring = f' stroke="#475569" stroke-width="{_f(px)}" fill="#fff"' if i in stairs else ""
        out.append(
            f'<circle cx="{_f(xy[i, 0])}" cy="{_f(xy[i, 1])}" r="{_f(2.5 * px)}"{ring}>'
            f"<title>{escape(graph.viewpoints[i])}</title></circle>"
        )
    out.append("</g>")

    if goal_here:
        gx, gy = pt(goal)
        out.append(
            f'<circle class="goal-radius" cx="{_f(gx)}" cy="{_f(gy)}" r="{_f(SUCCESS_DISTANCE)}" '
            f'fill="{GOAL}" fill-opacity="0.08" stroke="{GOAL}" stroke-width="{_f(1.5 * px)}" '
            f'stroke-dasharray="{_f(6 * px)} {_f(4 * px)}"/>'
        )

    for name, path, colour, width, extra in (
        ("intended", reference, INTENDED, 7 * px, ' stroke-opacity="0.45"'),
        ("walked", walked, WALKED, 2.5 * px, ""),
    ):
        for run in _runs(path, floors, floor):
            points = " ".join(f"{_f(pt(path[k])[0])},{_f(pt(path[k])[1])}" for k in run)
            ids = " ".join(path[k] for k in run)
            steps = " ".join(str(k) for k in run)
            out.append(
                f'<polyline class="{name}" points="{points}" data-viewpoints="{ids}" '
                f'data-steps="{steps}" fill="none" stroke="{colour}" stroke-width="{_f(width)}" '
                f'stroke-linejoin="round" stroke-linecap="round"{extra}/>'
            )
            if name == "walked":
                out.append(_arrows([pt(path[k]) for k in run], px))
            # Where a stretch leaves for another floor, say which way.
            last = run[-1]
            if last + 1 < len(path):
                nxt = floors[path[last + 1]]
                x, y = pt(path[last])
                out.append(
                    f'<text class="floor-change" {halo} x="{_f(x + 6 * px)}" y="{_f(y - 6 * px)}" '
                    f'fill="{colour}">{"up" if nxt > floor else "down"} to floor {nxt + 1}</text>'
                )

    if reference and floors[reference[0]] == floor:
        sx, sy = pt(reference[0])
        s = 5 * px
        out.append(
            f'<g class="start"><rect x="{_f(sx - s)}" y="{_f(sy - s)}" width="{_f(2 * s)}" '
            f'height="{_f(2 * s)}" fill="#111827"/><text {halo} x="{_f(sx + 8 * px)}" '
            f'y="{_f(sy + 14 * px)}" fill="#111827">start</text></g>'
        )
    if goal_here:
        gx, gy = pt(goal)
        out.append(
            f'<g class="goal"><circle cx="{_f(gx)}" cy="{_f(gy)}" r="{_f(5 * px)}" fill="{GOAL}"/>'
            f'<text {halo} x="{_f(gx + 8 * px)}" y="{_f(gy - 8 * px)}" fill="{GOAL}">goal</text></g>'
        )
    if walked and floors[walked[-1]] == floor:
        ex, ey = pt(walked[-1])
        s = 5 * px
        said = (
            "stopped at the goal"
            if ne == 0
            else "stopped, no way to the goal"
            if ne is None or not math.isfinite(ne)
            else f"stopped {ne:.1f} m from the goal"
        )
        # Write the label away from the goal, so that both stay legible.
        side = -1 if goal_here and pt(goal)[0] > ex + 1e-6 else 1
        out.append(
            f'<g class="stop" data-ne="{"" if ne is None else _f(ne)}">'
            f'<path d="M{_f(ex - s)} {_f(ey - s)}L{_f(ex + s)} {_f(ey + s)}M{_f(ex - s)} {_f(ey + s)}'
            f'L{_f(ex + s)} {_f(ey - s)}" stroke="{WALKED}" stroke-width="{_f(2.5 * px)}"/>'
            f'<text {halo} x="{_f(ex + side * 8 * px)}" y="{_f(ey + 16 * px)}" fill="{WALKED}" '
            f'text-anchor="{"start" if side > 0 else "end"}" font-weight="bold">{escape(said)}</text></g>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _arrows(points: list[tuple[float, float]], px: float) -> str:
    """An arrowhead halfway along each step, pointing the way the follower went."""
    d = []
    for (ax, ay), (bx, by) in zip(points, points[1:]):
        length = math.hypot(bx - ax, by - ay)
        if length < 12 * px:  # too short to carry an arrow
            continue
        ux, uy = (bx - ax) / length, (by - ay) / length
        mx, my = (ax + bx) / 2, (ay + by) / 2
        a, w = 5 * px, 4 * px
        d.append(
            f"M{_f(mx + ux * a)} {_f(my + uy * a)}L{_f(mx - ux * a - uy * w)} {_f(my - uy * a + ux * w)}"
            f"L{_f(mx - ux * a + uy * w)} {_f(my - uy * a - ux * w)}z"
        )
    return f'<path class="walk-arrows" d="{" ".join(d)}" fill="{WALKED}"/>'


def _sidecar_level(semantics: dict | None, floor: int) -> int | None:
    """The sidecar's level number of the floor ranked `floor` (levels may not start at 0)."""
    levels = sorted({f.get("level") for f in (semantics or {}).get("floors", []) if isinstance(f.get("level"), int)})
    return levels[floor] if floor < len(levels) else None

"""Server-drawn SVG of a leaderboard: one dot and 95% interval per row (no JS needed)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from app.leaderboards.rows import MIN_INTERVAL_N

COLOURS = {"agent": "#2563eb", "annotator": "#6b7280", "majority": "#059669", "baseline": "#d97706"}
# As the tables (research/_estimates.html): under this many units a dot, no interval.
MIN_N = MIN_INTERVAL_N


def _short(name: str, most: int = 34) -> str:
    """A label that fits the plot's margin; the whole name is its tooltip."""
    return name if len(name) <= most else name[: most - 1] + "…"


def _estimate(row: dict[str, Any], metric: str, category: str | None) -> Any:
    return row["by_category"].get(category) if category is not None else row.get(metric)


def interval_svg(
    board: dict[str, Any], metric: str = "accuracy", category: str | None = None, width: int = 640
) -> Markup:
    """Dots with 95% intervals per row; agents, majority and baselines first, then up to 15
    annotators. `category` plots one column of the per-category breakdown."""
    # The rows of the table the plot is drawn beside, each in its key's colour: the Dawid-Skene
    # labels have their own table (and no colour in the key), so they are left out.
    rows = [(r, e) for r in board["rows"] if r["type"] in COLOURS and (e := _estimate(r, metric, category)) and e["n"]]
    rows = [(r, e) for r, e in rows if r["type"] != "annotator"] + [
        (r, e) for r, e in rows if r["type"] == "annotator"
    ][:15]
    return estimates_svg([(r["name"], e, COLOURS[r["type"]]) for r, e in rows], metric, width)


def estimates_svg(rows: list[tuple[str, dict[str, Any], str]], label: str, width: int = 640) -> Markup:
    """One dot and its 95% interval on [0, 1] per (name, {"mean", "low", "high", "n"}, colour),
    in the order given (a kind's own leaderboard section plots its rows with this too)."""
    if not rows:
        return Markup("")
    left, right, step = 230, 20, 22
    height = 30 + step * len(rows)
    span = width - left - right

    def x(v: float) -> float:
        return left + span * max(0.0, min(1.0, v))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)} with 95% intervals" class="plot">'
    ]
    for t in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line x1="{x(t):.1f}" y1="10" x2="{x(t):.1f}" y2="{height - 18}" stroke="#e5e7eb"/>'
            f'<text x="{x(t):.1f}" y="{height - 4}" font-size="11" text-anchor="middle">{t:.2f}</text>'
        )
    for i, (name, e, c) in enumerate(rows):
        y = 22 + i * step
        parts.append(
            f'<text x="{left - 8}" y="{y + 4}" font-size="12" text-anchor="end">'
            f"<title>{escape(name)}</title>{escape(_short(name))}</text>"
        )
        if e.get("mean") is None:
            continue
        # The whisker as the table shows it: none under MIN_N values ("too few"), none missing.
        units = e.get("units") or e["n"]  # a clustered estimate: its clusters, as the tables count
        whisker = (
            units >= MIN_N and e.get("low") is not None and e.get("high") is not None and e["low"] == e["low"]
        )  # not NaN
        if whisker:
            parts.append(
                f'<line x1="{x(e["low"]):.1f}" y1="{y}" x2="{x(e["high"]):.1f}" y2="{y}" stroke="{c}" stroke-width="2"/>'
            )
        shown = f"[{e['low']:.3f}, {e['high']:.3f}]" if whisker else "(too few for an interval)"
        parts.append(
            f'<circle cx="{x(e["mean"]):.1f}" cy="{y}" r="4" fill="{c}"><title>{escape(name)}: '
            f"{e['mean']:.3f} {shown}, n={e['n']}</title></circle>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def leaderboard_plots(board: dict[str, Any]) -> dict[str, Markup]:
    """Overall accuracy, each category, and consistency: one titled plot each."""
    plots = {"Accuracy": interval_svg(board)}
    for cat in board["categories"]:
        plots[f"Accuracy, {board['category_label']} {cat}"] = interval_svg(board, category=cat, width=420)
    plots["Consistency"] = interval_svg(board, "consistency")
    return {title: svg for title, svg in plots.items() if svg}


PALETTE = ("#2563eb", "#d97706", "#059669", "#7c3aed", "#dc2626", "#0891b2", "#6b7280", "#a16207")


def cdf_svg(series: dict[str, list[float]], label: str, width: int = 640, height: int = 240) -> Markup:
    """Empirical CDFs, one step line per named series (e.g. time to completion per agent): the
    share of values at or below x. Empty series are left out."""
    series = {k: sorted(v) for k, v in series.items() if v}
    if not series:
        return Markup("")
    top = max(v[-1] for v in series.values()) or 1
    left, right, low, high = 40, 140, height - 28, 12

    def x(v: float) -> float:
        return left + (width - left - right) * v / top

    def y(p: float) -> float:
        return low - (low - high) * p

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}: cumulative share" class="plot">'
    ]
    for p in (0, 0.5, 1.0):
        parts.append(
            f'<line x1="{left}" y1="{y(p):.1f}" x2="{width - right}" y2="{y(p):.1f}" stroke="#e5e7eb"/>'
            f'<text x="{left - 6}" y="{y(p) + 4:.1f}" font-size="11" text-anchor="end">{p:g}</text>'
        )
    for t in (0, top / 2, top):
        parts.append(f'<text x="{x(t):.1f}" y="{height - 8}" font-size="11" text-anchor="middle">{t:g}</text>')
    parts.append(
        f'<text x="{(left + width - right) / 2:.0f}" y="{height}" font-size="11" '
        f'text-anchor="middle">{escape(label)}</text>'
    )
    for i, (name, values) in enumerate(series.items()):
        c = PALETTE[i % len(PALETTE)]
        n, points, share = len(values), [f"{x(0):.1f},{y(0):.1f}"], 0.0
        for k, v in enumerate(values, 1):
            points.append(f"{x(v):.1f},{y(share):.1f}")
            share = k / n
            points.append(f"{x(v):.1f},{y(share):.1f}")
        parts.append(
            f'<polyline points="{" ".join(points)}" fill="none" stroke="{c}" stroke-width="2">'
            f"<title>{escape(name)}: n={n}</title></polyline>"
        )
        parts.append(
            f'<text x="{width - right + 8}" y="{high + 12 + 16 * i}" font-size="12" fill="{c}">'
            f"{escape(name[:18])}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))

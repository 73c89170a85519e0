"""Server-drawn SVG of a leaderboard: one dot and 95% interval per row (no JS needed)."""

from __future__ import annotations

from markupsafe import Markup, escape

COLOURS = {"agent": "#2563eb", "annotator": "#6b7280", "majority": "#059669", "baseline": "#d97706"}


def _estimate(row: dict, metric: str, category: str | None):
    return row["by_category"].get(category) if category is not None else row.get(metric)


def interval_svg(board: dict, metric: str = "accuracy", category: str | None = None,
                 width: int = 640) -> Markup:
    """Dots with 95% intervals per row; agents, majority and baselines first, then up to 15
    annotators. `category` plots one column of the per-category breakdown."""
    rows = [(r, e) for r in board["rows"] if (e := _estimate(r, metric, category)) and e["n"]]
    rows = [(r, e) for r, e in rows if r["type"] != "annotator"] + \
           [(r, e) for r, e in rows if r["type"] == "annotator"][:15]
    if not rows:
        return Markup("")
    left, right, step = 230, 20, 22
    height = 30 + step * len(rows)
    span = width - left - right
    x = lambda v: left + span * max(0.0, min(1.0, v))  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="{escape(metric)} with 95% intervals" class="plot">']
    for t in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{x(t):.1f}" y1="10" x2="{x(t):.1f}" y2="{height - 18}" stroke="#e5e7eb"/>'
                     f'<text x="{x(t):.1f}" y="{height - 4}" font-size="11" text-anchor="middle">{t:.2f}</text>')
    for i, (r, e) in enumerate(rows):
        y = 22 + i * step
        c = COLOURS.get(r["type"], "#111")
        parts.append(f'<text x="{left - 8}" y="{y + 4}" font-size="12" text-anchor="end">{escape(r["name"][:34])}</text>')
        if e["low"] is not None and e["low"] == e["low"]:  # not missing, not NaN
            parts.append(f'<line x1="{x(e["low"]):.1f}" y1="{y}" x2="{x(e["high"]):.1f}" y2="{y}" stroke="{c}" stroke-width="2"/>')
        parts.append(f'<circle cx="{x(e["mean"]):.1f}" cy="{y}" r="4" fill="{c}"><title>{escape(r["name"])}: '
                     f'{e["mean"]:.3f} [{e["low"]:.3f}, {e["high"]:.3f}], n={e["n"]}</title></circle>')
    parts.append("</svg>")
    return Markup("".join(parts))


def leaderboard_plots(board: dict) -> dict[str, Markup]:
    """Overall accuracy, each category, and consistency: one titled plot each."""
    plots = {"Accuracy": interval_svg(board)}
    for cat in board["categories"]:
        plots[f"Accuracy, {board['category_label']} {cat}"] = interval_svg(board, category=cat, width=420)
    plots["Consistency"] = interval_svg(board, "consistency")
    return {title: svg for title, svg in plots.items() if svg}

"""Boards drawn on the server for the admin's replay (admin/replay.html, replay_item.html):
what the worker painted after each step beside the gold board, as small static SVGs (the
browser's board component is for painting, one per page)."""

from __future__ import annotations

import math

from markupsafe import Markup

from app.kinds.hexagons.board import COLS, ROWS, SHIFTED, is_lowered

# The worker's page's colours (static/kinds/hexagons/board.js), by code.
FILL = ("#ffffff", "#111111", "#ffe03d", "#2fa84f", "#e5322d", "#1e6fd9", "#8e3fb0", "#f5901e")
NAMES = ("white", "black", "yellow", "green", "red", "blue", "purple", "orange")
R = 7.0  # a tile's radius in px: 18 columns make a board about 200 px wide


def board_svg(board: list[int], label: str) -> Markup:
    """Flat-topped hexagons in columns, the lowered columns half a tile down (board.py)."""
    h = math.sqrt(3) * R
    width, height = 1.5 * R * (COLS - 1) + 2 * R + 2, h * (ROWS + 0.5) + 2
    painted = sum(1 for c in board if c)
    out = [
        f'<svg class="hex-replay-board" viewBox="0 0 {width:.1f} {height:.1f}" width="{width:.0f}" '
        f'height="{height:.0f}" role="img" aria-label="{Markup.escape(label)}: {painted} tiles painted">'
    ]
    for t, code in enumerate(board[: ROWS * COLS]):
        row, col = divmod(t, COLS)
        cx = 1 + R + 1.5 * R * col
        cy = 1 + h / 2 + h * row + (h / 2 if is_lowered(col, SHIFTED) else 0)
        pts = " ".join(
            f"{cx + R * math.cos(math.pi / 3 * k):.1f},{cy + R * math.sin(math.pi / 3 * k):.1f}" for k in range(6)
        )
        fill = FILL[code] if 0 <= code < len(FILL) else "#cccccc"
        out.append(f'<polygon points="{pts}" fill="{fill}" stroke="#6b6b6b" stroke-width="0.6"/>')
    out.append("</svg>")
    return Markup("".join(out))


def replay_boards(payload: dict, reference: dict | None, response: dict) -> dict:
    """Per step: its instruction, the worker's board and the gold one (execution); or the
    target and the instructor's steps (description)."""
    steps = response.get("steps") or []
    if "target" in payload:  # a description: the instructor saw the target
        return {
            "target": board_svg(payload["target"], "The target"),
            "steps": [
                {
                    "instruction": s.get("instruction", ""),
                    "board": board_svg(s["board"], f"Their board after step {k + 1}"),
                }
                for k, s in enumerate(steps)
            ],
        }
    gold = (reference or {}).get("boards") or []
    out = []
    for k, text in enumerate(payload.get("instructions") or []):
        mine = steps[k]["board"] if k < len(steps) else None
        out.append(
            {
                "instruction": text,
                "board": board_svg(mine, f"Their board after step {k + 1}") if mine else None,
                "gold": board_svg(gold[k], f"The gold board after step {k + 1}") if k < len(gold) else None,
            }
        )
    return {"steps": out}

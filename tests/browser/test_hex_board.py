"""The Hexagons board component (app/kinds/hexagons/static/board.js) in headless Chromium, on a
harness page that inlines board.js and board.css: geometry of both column layouts, painting by
click, drag and touch, the keyboard map, the paint log, undo, read-only boards and diff()."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

STATIC = Path(__file__).resolve().parents[2] / "app" / "kinds" / "hexagons" / "static"
COLS, ROWS, N = 18, 10, 180


def _harness(options: dict, width: str, extra_body: str = "") -> str:
    js = (STATIC / "board.js").read_text()
    css = (STATIC / "board.css").read_text()
    mount = (
        ""
        if options is None
        else f"""
      window.hb = new HexBoard(document.getElementById("board"),
        Object.assign({json.dumps(options)}, {{onChange: (b, a) => window.changes.push([b, a])}}));"""
    )
    return f"""<!doctype html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{css}</style></head>
<body style="margin:0;padding:8px"><div id="board" style="width:{width}"></div>{extra_body}
<script>window.changes = []; window.downs = 0; window.keys = 0;
// Capture phase: the board stops the keys it handles. A dispatch runs to its end before the
// test's next evaluate, so these counters say an event was fully handled.
document.addEventListener("pointerdown", () => window.downs++, true);
document.addEventListener("keydown", (e) => {{ if (!/^(Shift|Control|Alt|Meta)$/.test(e.key)) window.keys++; }}, true);</script>
<script>{js}</script><script>{mount}</script></body></html>"""


def mount(page, width: str = "900px", **options) -> None:
    page.set_content(_harness(options, width))
    page.wait_for_function("() => window.hb && document.querySelectorAll('#board .hexboard-tile').length === 180")


def centres(page) -> list[tuple[float, float]]:
    return [
        tuple(c)
        for c in page.evaluate(
            """() => Array.from(document.querySelectorAll('#board .hexboard-tile'), p => {
             const r = p.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })"""
        )
    ]


def board(page) -> list[int]:
    return page.evaluate("() => hb.getBoard()")


def actions(page) -> list[list[int]]:
    return page.evaluate("() => hb.actions()")


def moves(page) -> list[list[int]]:
    """The log without the times."""
    return [a[:2] for a in actions(page)]


def wait_actions(page, n: int) -> None:
    page.wait_for_function(f"() => hb.actions().length === {n}")


def wait_downs(page, n: int) -> None:
    page.wait_for_function(f"() => window.downs === {n}")


def click_tile(page, c, t: int) -> None:
    page.mouse.click(*c[t])


def surface(page):
    return page.locator("#board .hexboard-surface")


# -- Geometry -----------------------------------------------------------------------------------


def _geometric_neighbours(c) -> dict[int, set[int]]:
    unit = c[COLS][1] - c[0][1]  # one row down in one column: the tile height
    return {t: {u for u in range(N) if u != t and math.dist(c[t], c[u]) < 1.2 * unit} for t in range(N)}


@pytest.mark.parametrize("shifted", ["odd", "even"])
def test_the_shifted_columns_sit_half_a_tile_lower_and_neighbours_follow(page, shifted):
    page.set_viewport_size({"width": 1000, "height": 800})
    mount(page, shifted=shifted)
    c = centres(page)
    unit = c[COLS][1] - c[0][1]
    assert unit > 20
    for t in range(N):
        r, col = divmod(t, COLS)
        low = col % 2 == (1 if shifted == "odd" else 0)
        # Every column is one pitch to the right; the shifted ones half a tile lower.
        assert c[t][0] == pytest.approx(c[col][0], abs=0.5)
        assert c[t][1] == pytest.approx(
            c[0][1] + r * unit + (unit / 2 if low else 0) - (unit / 2 if shifted == "even" else 0), abs=0.5
        )
    # Exactly the tiles touching each tile on screen are its neighbours in HexBoard.neighbours.
    near = _geometric_neighbours(c)
    listed = page.evaluate(f"""() => Array.from({{length: 180}}, (_, t) =>
        Object.values(HexBoard.neighbours(t, "{shifted}")).filter(x => x !== null))""")
    assert [set(x) for x in listed] == [near[t] for t in range(N)]
    # And each named direction points where it says (screen y grows downwards).
    named = page.evaluate(f"""() => Array.from({{length: 180}}, (_, t) => HexBoard.neighbours(t, "{shifted}"))""")
    for t, nb in enumerate(named):
        for name, u in nb.items():
            if u is None:
                continue
            dx, dy = c[u][0] - c[t][0], c[u][1] - c[t][1]
            assert dx > 1 if "e" in name[-1:] else dx < -1 if "w" in name[-1:] else abs(dx) < 1, (t, name, u)
            assert dy < -1 if name.startswith("n") else dy > 1, (t, name, u)
    assert page.locator("#board").get_attribute("data-shifted") == shifted


def test_exact_neighbours_for_both_parities(page):
    mount(page)
    nb = page.evaluate("""() => [HexBoard.neighbours(19, 'odd'), HexBoard.neighbours(20, 'odd'),
                                 HexBoard.neighbours(19, 'even'), HexBoard.neighbours(20, 'even'),
                                 HexBoard.neighbours(0, 'odd'), HexBoard.neighbours(179, 'odd')]""")
    # 19 = row 1 col 1, 20 = row 1 col 2.
    assert nb[0] == {"n": 1, "ne": 20, "se": 38, "s": 37, "sw": 36, "nw": 18}  # odd: col 1 low
    assert nb[1] == {"n": 2, "ne": 3, "se": 21, "s": 38, "sw": 19, "nw": 1}  # odd: col 2 high
    assert nb[2] == {"n": 1, "ne": 2, "se": 20, "s": 37, "sw": 18, "nw": 0}  # even: col 1 high
    assert nb[3] == {"n": 2, "ne": 21, "se": 39, "s": 38, "sw": 37, "nw": 19}  # even: col 2 low
    assert nb[4] == {"n": None, "ne": None, "se": 1, "s": 18, "sw": None, "nw": None}
    assert nb[5] == {"n": 161, "ne": None, "se": None, "s": None, "sw": None, "nw": 178}  # col 17 low


# -- Mouse and touch ----------------------------------------------------------------------------


def test_click_paints_white_erases_and_the_same_colour_logs_nothing(page):
    page.set_viewport_size({"width": 1000, "height": 800})
    mount(page)
    c = centres(page)
    assert page.locator("#board").get_attribute("data-colour") == "1"  # black by default
    page.locator('#board .hexboard-swatch[data-colour="4"]').click()
    expect(page.locator('#board .hexboard-swatch[data-colour="4"]')).to_have_attribute("aria-pressed", "true")
    assert page.locator('#board .hexboard-swatch[aria-pressed="true"]').count() == 1
    click_tile(page, c, 37)
    wait_actions(page, 1)
    expect(page.locator('#board .hexboard-tile[data-tile="37"]')).to_have_attribute("data-colour", "4")
    assert board(page) == [4 if t == 37 else 0 for t in range(N)]
    assert moves(page) == [[37, 4]]
    expect(page.locator("#board .hexboard-live")).to_have_text("tile 37 painted red")
    # The same colour again: the click lands (the cursor follows it) but nothing is logged.
    click_tile(page, c, 38)
    wait_actions(page, 2)
    click_tile(page, c, 37)
    expect(surface(page)).to_have_attribute("data-cursor", "37")
    wait_downs(page, 4)  # the swatch and three tiles
    assert moves(page) == [[37, 4], [38, 4]]
    # A white tile painted white: nothing either; white on a red tile erases it.
    page.locator('#board .hexboard-swatch[data-colour="0"]').click()
    click_tile(page, c, 50)
    expect(surface(page)).to_have_attribute("data-cursor", "50")
    wait_downs(page, 6)
    assert len(actions(page)) == 2
    click_tile(page, c, 37)
    wait_actions(page, 3)
    assert moves(page) == [[37, 4], [38, 4], [37, 0]]
    assert board(page) == [4 if t == 38 else 0 for t in range(N)]
    # A right click paints nothing.
    page.mouse.click(*c[60], button="right")
    wait_downs(page, 8)
    assert len(actions(page)) == 3


def test_drag_paints_each_tile_entered_in_order(page):
    page.set_viewport_size({"width": 1000, "height": 800})
    mount(page, colour=3)
    c = centres(page)
    # Along a path of neighbours (the segment between two neighbours' centres crosses only them).
    path = [40, 41, 59, 58, 76, 77, 78]
    assert all(
        b in page.evaluate(f"() => Object.values(HexBoard.neighbours({a}, 'odd'))") for a, b in zip(path, path[1:])
    )
    page.mouse.move(*c[path[0]])
    page.mouse.down()
    for t in path[1:]:
        page.mouse.move(*c[t], steps=6)
    page.mouse.up()
    wait_actions(page, len(path))
    assert moves(page) == [[t, 3] for t in path]
    assert sorted(t for t, v in enumerate(board(page)) if v) == sorted(path)
    # Moving without the button paints nothing; a fast drag (one move event) straight down a
    # column still paints every tile between: 100, 118, 136, 154; 40 is already green.
    page.mouse.move(*c[100], steps=4)
    page.mouse.move(*c[22])
    page.mouse.down()
    page.mouse.move(*c[148])
    page.mouse.up()
    # Column 4 from row 1 to row 8 (22, 40, ..., 148) less 40, 58 and 76, green already.
    wait_actions(page, len(path) + 5)
    assert moves(page)[len(path) :] == [[t, 3] for t in (22, 94, 112, 130, 148)]


def test_drag_does_not_repaint_tiles_of_the_chosen_colour(page):
    page.set_viewport_size({"width": 1000, "height": 800})
    start = [0] * N
    start[58] = 5
    start[94] = 5
    mount(page, colour=5, board=start)
    c = centres(page)
    page.mouse.move(*c[40])
    page.mouse.down()
    for t in (58, 76, 94, 112):
        page.mouse.move(*c[t], steps=5)
    page.mouse.up()
    wait_actions(page, 3)
    expect(surface(page)).to_have_attribute("data-cursor", "112")
    assert moves(page) == [[40, 5], [76, 5], [112, 5]]


def test_touch_tap_and_drag_paint_on_a_phone(browser):
    ctx = browser.new_context(
        viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True, device_scale_factor=2
    )
    page = ctx.new_page()
    page.set_default_timeout(10000)
    try:
        mount(page, width="100%", colour=4)
        # It fits 390 px wide (no horizontal scroll) and the tiles stay finger-sized.
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        box = page.locator('#board .hexboard-tile[data-tile="0"]').bounding_box()
        assert box["width"] >= 24 and box["height"] >= 21, box
        swatch = page.locator('#board .hexboard-swatch[data-colour="0"]').bounding_box()
        assert swatch["width"] >= 40 and swatch["height"] >= 40
        page.locator("#board").scroll_into_view_if_needed()
        c = centres(page)
        page.touchscreen.tap(*c[21])
        wait_actions(page, 1)
        assert moves(page) == [[21, 4]]
        # A finger drag down column 5: touch events become pointer events of type touch.
        cdp = ctx.new_cdp_session(page)
        x, y0 = c[23]
        cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y0}]})
        for t in (41, 59, 77):
            cdp.send("Input.dispatchTouchEvent", {"type": "touchMove", "touchPoints": [{"x": c[t][0], "y": c[t][1]}]})
        cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
        wait_actions(page, 5)
        assert moves(page) == [[21, 4], [23, 4], [41, 4], [59, 4], [77, 4]]
    finally:
        ctx.close()


# -- Keyboard -----------------------------------------------------------------------------------

ODD_KEYS = [  # (from, key, to) for odd shifted columns; 19 is in low column 1, 20 in high column 2
    (19, "ArrowUp", 1),
    (19, "ArrowDown", 37),
    (19, "ArrowRight", 20),
    (19, "Shift+ArrowRight", 38),
    (19, "ArrowLeft", 18),
    (19, "Shift+ArrowLeft", 36),
    (20, "ArrowUp", 2),
    (20, "ArrowDown", 38),
    (20, "ArrowRight", 21),
    (20, "Shift+ArrowRight", 3),
    (20, "ArrowLeft", 19),
    (20, "Shift+ArrowLeft", 1),
    (0, "ArrowUp", 0),
    (0, "ArrowLeft", 0),
    (0, "Shift+ArrowRight", 0),
    (0, "ArrowRight", 1),
    (179, "ArrowDown", 179),
    (179, "Shift+ArrowLeft", 179),
    (179, "ArrowLeft", 178),
    (179, "ArrowRight", 179),
    (20, "Home", 18),
    (20, "End", 35),
    (20, "PageUp", 2),
    (20, "PageDown", 164),
]
EVEN_KEYS = [  # even shifted columns: 19 is in high column 1, 20 in low column 2
    (19, "ArrowRight", 20),
    (19, "Shift+ArrowRight", 2),
    (19, "ArrowLeft", 18),
    (19, "Shift+ArrowLeft", 0),
    (20, "ArrowRight", 21),
    (20, "Shift+ArrowRight", 39),
    (20, "ArrowLeft", 19),
    (20, "Shift+ArrowLeft", 37),
    (20, "ArrowUp", 2),
    (20, "ArrowDown", 38),
    (0, "Shift+ArrowRight", 19),
    (0, "ArrowLeft", 0),
    (161, "Shift+ArrowRight", 161),
]


@pytest.mark.parametrize("shifted,cases", [("odd", ODD_KEYS), ("even", EVEN_KEYS)])
def test_arrow_keys_move_the_cursor_to_the_documented_neighbour(page, shifted, cases):
    mount(page, shifted=shifted)
    surface(page).focus()
    expect(surface(page)).to_be_focused()
    expect(surface(page)).to_have_attribute("data-cursor", "0")
    pressed = 0
    for start, key, to in cases:
        page.evaluate(f"() => hb.setCursor({start})")
        page.keyboard.press(key)
        pressed += 1
        page.wait_for_function(f"() => window.keys === {pressed}")
        expect(surface(page)).to_have_attribute("data-cursor", str(to))
        assert (
            page.evaluate(
                f"() => HexBoard.move({start}, '{key.split('+')[-1]}', '{shifted}', {str('Shift' in key).lower()})"
            )
            == to
        )
    # Right, over and over, zigzags along one row: the height stays within half a tile.
    page.evaluate("() => hb.setCursor(36)")
    for col in range(1, COLS):
        page.keyboard.press("ArrowRight")
        expect(surface(page)).to_have_attribute("data-cursor", str(36 + col))
    assert moves(page) == []  # moving paints nothing


def test_keyboard_only_digits_space_enter_and_undo(page):
    mount(page)
    s = surface(page)
    page.keyboard.press("Tab")  # the palette's buttons come first
    for _ in range(10):
        if page.evaluate("() => document.activeElement.classList.contains('hexboard-surface')"):
            break
        page.keyboard.press("Tab")
    expect(s).to_be_focused()
    for key in ("ArrowDown", "ArrowDown", "ArrowRight"):  # 0 -> 18 -> 36 -> 37
        page.keyboard.press(key)
    expect(s).to_have_attribute("data-cursor", "37")
    expect(page.locator("#board .hexboard-live")).to_have_text("tile 37, row 2, column 1: white")
    page.keyboard.press("4")
    expect(page.locator("#board")).to_have_attribute("data-colour", "4")
    expect(page.locator('#board .hexboard-swatch[data-colour="4"]')).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#board .hexboard-live")).to_have_text("colour red")
    page.keyboard.press(" ")
    wait_actions(page, 1)
    expect(page.locator("#board .hexboard-live")).to_have_text("tile 37 painted red")
    page.keyboard.press(" ")  # the same colour: nothing logged, and said so
    expect(page.locator("#board .hexboard-live")).to_have_text("tile 37 is already red")
    page.keyboard.press("ArrowRight")  # 37 -> 38
    page.keyboard.press("7")
    page.keyboard.press("Enter")
    wait_actions(page, 2)
    page.keyboard.press("ArrowUp")  # 38 -> 20
    page.keyboard.press("8")  # not a colour: ignored
    page.keyboard.press("Enter")
    wait_actions(page, 3)
    assert moves(page) == [[37, 4], [38, 7], [20, 7]]
    page.keyboard.press("z")
    wait_actions(page, 4)
    expect(page.locator("#board .hexboard-live")).to_have_text("undone: tile 20 back to white")
    page.keyboard.press("Control+z")
    wait_actions(page, 5)
    assert moves(page) == [[37, 4], [38, 7], [20, 7], [20, 0], [38, 0]]
    assert board(page) == [4 if t == 37 else 0 for t in range(N)]
    page.keyboard.press("z")
    wait_actions(page, 6)
    page.keyboard.press("z")
    expect(page.locator("#board .hexboard-live")).to_have_text("nothing to undo")
    assert moves(page)[-1] == [37, 0] and len(actions(page)) == 6
    assert board(page) == [0] * N
    expect(page.locator("#board .hexboard-undo")).to_be_disabled()


# -- The log, onChange and events ---------------------------------------------------------------


def test_the_log_replays_to_the_board_and_matches_on_change(page):
    page.set_viewport_size({"width": 1000, "height": 800})
    start = [(t * 7) % 8 for t in range(N)]
    mount(page, board="".join(map(str, start)), colour=2)
    page.evaluate("""() => { window.events = [];
        document.getElementById('board').addEventListener('hexboard:change', e => window.events.push(e.detail.action)); }""")
    c = centres(page)
    click_tile(page, c, 5)  # 5 was 3 -> 2
    page.mouse.move(*c[6])
    page.mouse.down()
    page.mouse.move(*c[24], steps=5)  # 6 is yellow already (6*7 % 8 = 2): only 24 (0 -> 2)
    page.mouse.up()
    surface(page).focus()
    page.keyboard.press("1")
    page.keyboard.press(" ")  # the cursor is on 24: black
    page.keyboard.press("z")  # back to yellow
    wait_actions(page, 4)
    log = actions(page)
    assert [a[:2] for a in log] == [[5, 2], [24, 2], [24, 1], [24, 2]]
    assert all(isinstance(a[2], int) and a[2] >= 0 for a in log)
    assert [a[2] for a in log] == sorted(a[2] for a in log)
    replay = list(start)
    for t, v, _ in log:
        replay[t] = v
    assert replay == board(page)
    changes = page.evaluate("() => window.changes")
    assert [[a["tile"], a["colour"], a["previous"], a["undo"]] for _, a in changes] == [
        [5, 2, 3, False],
        [24, 2, 0, False],
        [24, 1, 2, False],
        [24, 2, 1, True],
    ]
    assert [a["ms"] for _, a in changes] == [a[2] for a in log]
    assert changes[-1][0] == board(page)
    assert page.evaluate("() => window.events.map(a => a.tile)") == [5, 24, 24, 24]
    # resetLog empties the log and restarts its clock; setBoard logs nothing and clears undo.
    page.evaluate("() => hb.resetLog()")
    assert actions(page) == []
    page.evaluate("() => hb.setBoard(new Array(180).fill(6))")
    assert actions(page) == [] and board(page) == [6] * N
    assert page.evaluate("() => hb.undo()") is None
    assert page.evaluate("() => hb.paint(3, 0).tile") == 3
    assert moves(page) == [[3, 0]]
    with pytest.raises(Exception, match="180 tiles"):
        page.evaluate("() => hb.setBoard([1, 2, 3])")
    with pytest.raises(Exception, match="not 0-7"):
        page.evaluate("() => hb.setBoard(new Array(180).fill(8))")


# -- Read-only, diff, numbers, declarative mounting, destroy ------------------------------------


def test_a_readonly_board_refuses_paints_until_made_editable(page):
    page.set_viewport_size({"width": 1000, "height": 800})
    mount(page, readonly=True, colour=4)
    c = centres(page)
    assert page.locator("#board .hexboard-surface").get_attribute("tabindex") is None
    expect(page.locator("#board .hexboard-palette")).to_be_hidden()
    click_tile(page, c, 10)
    page.mouse.move(*c[10])
    page.mouse.down()
    page.mouse.move(*c[64], steps=5)
    page.mouse.up()
    wait_downs(page, 2)
    page.keyboard.press(" ")
    page.wait_for_function("() => window.keys === 1")
    assert page.evaluate("() => [hb.paint(10, 4), hb.undo()]") == [None, None]
    assert actions(page) == [] and board(page) == [0] * N and page.evaluate("() => window.changes") == []
    page.evaluate("() => hb.setReadonly(false)")
    expect(page.locator("#board .hexboard-palette")).to_be_visible()
    assert surface(page).get_attribute("tabindex") == "0"
    click_tile(page, c, 10)
    wait_actions(page, 1)
    page.evaluate("() => hb.setReadonly(true)")
    click_tile(page, c, 11)
    wait_downs(page, 4)
    assert moves(page) == [[10, 4]]


def test_diff_outlines_exactly_the_differing_tiles(page):
    page.set_viewport_size({"width": 1000, "height": 800})
    mine = [0] * N
    other = [0] * N
    for t, v in ((3, 1), (40, 2), (41, 2), (179, 7)):
        mine[t] = v
    for t, v in ((3, 1), (40, 5), (100, 6)):
        other[t] = v
    mount(page, board=mine, readonly=True)
    assert page.evaluate(f"() => hb.diff({json.dumps(other)})") == [40, 41, 100, 179]
    marked = page.eval_on_selector_all('#board .hexboard-tile[data-diff="true"]', "ps => ps.map(p => +p.dataset.tile)")
    assert marked == [40, 41, 100, 179]
    assert page.locator("#board .hexboard-diff-outer").count() == 4
    assert page.locator("#board").get_attribute("data-diff-count") == "4"
    # The outline follows the board as it changes.
    page.evaluate("() => { hb.setReadonly(false); hb.paint(40, 5); hb.paint(7, 3); }")
    assert page.eval_on_selector_all(
        '#board .hexboard-tile[data-diff="true"]', "ps => ps.map(p => +p.dataset.tile)"
    ) == [7, 41, 100, 179]
    assert page.evaluate("() => hb.diff(null)") == []
    assert page.locator("#board [data-diff]").count() == 0
    assert page.locator("#board .hexboard-diff-outer").count() == 0


def test_numbers_titles_declarative_mount_and_destroy(page):
    page.set_content(
        _harness(
            None,
            "600px",
            extra_body=(
                '<div id="side" data-hexboard data-shifted="even" data-readonly data-numbers '
                f'data-board="{"2" * 10 + "0" * 170}"></div>'
            ),
        )
    )
    page.wait_for_function("() => document.getElementById('side').hexBoard")
    side = page.locator("#side")
    assert side.get_attribute("data-shifted") == "even" and side.get_attribute("data-readonly") == "true"
    assert page.evaluate("() => document.getElementById('side').hexBoard.getBoard().slice(8, 12)") == [2, 2, 0, 0]
    texts = page.eval_on_selector_all("#side .hexboard-numbers text", "ts => ts.map(t => t.textContent)")
    assert texts == [str(t) for t in range(N)]
    assert (
        page.locator('#side .hexboard-tile[data-tile="37"] title').text_content() == "tile 37 (row 2, column 1): white"
    )
    page.locator("#side .hexboard-numbers-toggle").click()
    expect(page.locator("#side .hexboard-numbers")).to_be_hidden()
    expect(page.locator("#side .hexboard-numbers-toggle")).to_have_attribute("aria-pressed", "false")
    page.evaluate("() => document.getElementById('side').hexBoard.destroy()")
    assert page.evaluate(
        "() => [document.getElementById('side').children.length, !!document.getElementById('side').hexBoard,"
        " document.getElementById('side').classList.contains('hexboard')]"
    ) == [0, False, False]

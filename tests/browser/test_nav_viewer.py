"""The navigation viewer widget (app/kinds/navigation/static/viewer.js) in a real browser, by behaviour: turning,
moving, the pose trace, the aria-label and what the canvas shows. The house is the hand-written
tests/fixtures/nav/house_demo (3 rooms, 3 doorways, 6 objects, 8 viewpoints; its graph from
tests/nav_fixtures.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from app.kinds.navigation.graph import load_connectivity
from tests.nav_fixtures import house_demo_records

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
HOUSE = ROOT / "tests" / "fixtures" / "nav" / "house_demo"
STEP = math.radians(15)
WIDTH = 800  # CSS px of the viewer; the canvas is 16:9

PAGE = (
    """<!doctype html><html><head><meta charset="utf-8"><title>viewer</title></head><body>
<form class="annotate" onsubmit="event.preventDefault(); window.submitted = true">
  <div id="viewer" style="width: %dpx"></div>
  <button type="submit">Submit</button>
</form></body></html>"""
    % WIDTH
)

MOUNT = """([semantics, neighbours, viewpoint, heading]) => {
  window.NEIGHBOURS = neighbours; window.moves = []; window.poses = [];
  window.viewer = ProctorViewer.mount(document.getElementById("viewer"), {
    semantics, viewpoint, neighbours: neighbours[viewpoint], heading,
    onMove: (id) => { moves.push(id); viewer.setViewpoint(id, NEIGHBOURS[id]); },
    onPose: (pose) => poses.push(pose),
  });
}"""


@pytest.fixture(scope="module")
def house():
    semantics = json.loads((HOUSE / "semantics.json").read_text())
    graph = load_connectivity(json.dumps(house_demo_records()).encode(), scan="house_demo")
    # What the page hands the viewer at each viewpoint: the navigable neighbours from the
    # connectivity graph, with the heading and distance to each.
    neighbours = {
        v: [{"id": n, "heading": graph.heading(v, n), "distance": graph.distance(v, n)} for n in graph.neighbours(v)]
        for v in semantics["viewpoints"]
    }
    return semantics, graph, neighbours


@pytest.fixture
def viewer(page, house):
    """Mount at a viewpoint and heading; returns the page. Page errors fail the test."""
    semantics, _, neighbours = house
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(PAGE)
    page.add_style_tag(path=str(ROOT / "app" / "kinds" / "navigation" / "static" / "viewer.css"))
    page.add_script_tag(path=str(ROOT / "static" / "app.js"))
    page.add_script_tag(path=str(ROOT / "app" / "kinds" / "navigation" / "static" / "viewer.js"))

    def mount(viewpoint: str, heading: float = 0.0):
        page.evaluate(MOUNT, [semantics, neighbours, viewpoint, heading])
        return page

    yield mount
    assert errors == []


def state(page) -> dict:
    return page.evaluate("viewer.state()")


def angle_diff(a: float, b: float) -> float:
    return abs((a - b + math.pi) % (2 * math.pi) - math.pi)


def bearing(semantics, viewpoint: str, xy) -> float:
    px, py, _ = semantics["viewpoints"][viewpoint]["position"]
    return math.atan2(xy[0] - px, xy[1] - py) % (2 * math.pi)


def face(page, heading: float) -> None:
    page.evaluate("(h) => viewer.turn(h - viewer.state().heading)", heading)


def reddish_share(page) -> float:
    """Share of red pixels in the centre of the view (middle quarter of the width, below the
    top quarter, where an object on the floor ahead is drawn)."""
    return page.evaluate("""() => {
      const c = document.querySelector("#viewer canvas"), g = c.getContext("2d");
      const w = Math.round(c.width / 4), h = Math.round(c.height * 3 / 4);
      const px = g.getImageData(Math.round(c.width * 3 / 8), Math.round(c.height / 4), w, h).data;
      let red = 0;
      for (let i = 0; i < px.length; i += 4) {
        const r = px[i], gr = px[i + 1], b = px[i + 2];
        if (r >= 140 && gr <= 0.45 * r && b <= 0.45 * r) red++;
      }
      return red / (w * h);
    }""")


def test_the_house_fixture_is_consistent(house):
    semantics, graph, neighbours = house
    rooms = {r["id"]: r for r in semantics["rooms"]}
    assert len(rooms) == 3 and 4 <= len(semantics["objects"]) <= 6
    assert set(semantics["viewpoints"]) == set(neighbours) and 6 <= len(neighbours) <= 8
    for vid, vp in semantics["viewpoints"].items():
        assert list(graph.position(vid)) == pytest.approx(vp["position"])
        x0, y0, x1, y1 = rooms[vp["room"]]["bounds"]
        assert x0 < vp["position"][0] < x1 and y0 < vp["position"][1] < y1, vid
        assert neighbours[vid], f"{vid} has no way on"
    for door in semantics["doors"]:
        assert all(r in rooms for r in door["rooms"])


def test_keyboard_only_turning(viewer):
    page = viewer("v_lr1", 0.0)
    canvas = page.locator("#viewer canvas")
    assert canvas.get_attribute("tabindex") == "0"
    page.keyboard.press("Tab")  # the canvas is the first thing to focus on the page
    assert page.evaluate("document.activeElement === document.querySelector('#viewer canvas')")
    h0 = state(page)["heading"]
    page.keyboard.press("ArrowRight")
    assert angle_diff(state(page)["heading"], h0 + STEP) < 1e-9
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert angle_diff(state(page)["heading"], h0 - STEP) < 1e-9
    assert 0 <= state(page)["heading"] < 2 * math.pi
    page.keyboard.press("ArrowUp")
    assert state(page)["elevation"] == pytest.approx(STEP)
    page.keyboard.press("ArrowDown")
    assert state(page)["elevation"] == pytest.approx(0.0)
    face(page, math.pi)  # no neighbour within 45 degrees of south: Enter does nothing
    assert page.evaluate("viewer.highlighted()") is None
    assert "no way on in view" in page.locator("#viewer canvas").get_attribute("aria-label")
    page.keyboard.press("Enter")
    assert page.evaluate("moves") == [] and state(page)["viewpoint"] == "v_lr1"
    assert page.evaluate("window.submitted") is None  # nor does it submit the form around it


def test_highlight_follows_the_heading_and_enter_moves(viewer, house):
    semantics, graph, _ = house
    page = viewer("v_lr1", 0.0)
    page.locator("#viewer canvas").focus()
    # v_lr3 lies about 11 degrees right of north, v_lr2 about 80: the nearer one to the centre
    # is highlighted, and its marker is the one nearest the middle of the canvas.
    assert page.evaluate("viewer.highlighted()") == "v_lr3"
    markers = page.evaluate("viewer.markers()")
    hl = [m for m in markers if m["highlighted"]]
    assert [m["id"] for m in hl] == ["v_lr3"]
    assert min(markers, key=lambda m: abs(m["x"] - WIDTH / 2))["id"] == "v_lr3"
    # A full turn to the right, a step at a time: the highlight is always the neighbour whose
    # heading is nearest the view's, if one is in the 90-degree field of view.
    seen = set()
    for _ in range(24):
        page.keyboard.press("ArrowRight")
        heading = state(page)["heading"]
        off = {n: angle_diff(graph.heading("v_lr1", n), heading) for n in ("v_lr2", "v_lr3")}
        nearest = min(off, key=off.get)
        expected = nearest if off[nearest] <= math.pi / 4 else None
        assert page.evaluate("viewer.highlighted()") == expected, heading
        seen.add(expected)
    assert seen == {"v_lr2", "v_lr3", None}
    while page.evaluate("viewer.highlighted()") != "v_lr2":
        page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    assert page.evaluate("moves") == ["v_lr2"]
    assert state(page)["viewpoint"] == "v_lr2"
    assert page.evaluate("window.submitted") is None  # Enter in the viewer never submits the form


def test_double_click_on_a_marker_moves(viewer):
    page = viewer("v_lr1", 0.7)  # both neighbours in view, v_lr2 not the highlighted one
    markers = {m["id"]: m for m in page.evaluate("viewer.markers()")}
    assert set(markers) == {"v_lr2", "v_lr3"}
    target = markers["v_lr2"]
    assert not target["highlighted"]
    box = page.locator("#viewer canvas").bounding_box()
    page.mouse.dblclick(box["x"] + target["x"], box["y"] + target["y"])
    assert page.evaluate("moves") == ["v_lr2"]  # one step, though each click alone walks
    page.mouse.dblclick(box["x"] + 20, box["y"] + 20)  # not on a marker: nothing happens
    assert page.evaluate("moves") == ["v_lr2"]


def test_one_click_on_a_marker_walks_there(viewer):
    page = viewer("v_lr1", 0.7)
    markers = {m["id"]: m for m in page.evaluate("viewer.markers()")}
    target = markers["v_lr2"]
    assert not target["highlighted"]  # a click walks to the marker clicked, not the highlighted one
    box = page.locator("#viewer canvas").bounding_box()
    x, y = box["x"] + target["x"], box["y"] + target["y"]
    # A drag that starts and ends on the marker only turns.
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 40, y, steps=4)
    page.mouse.move(x, y, steps=4)
    page.mouse.up()
    assert page.evaluate("moves") == [] and state(page)["viewpoint"] == "v_lr1"
    page.mouse.click(x, y)
    assert page.evaluate("moves") == ["v_lr2"] and state(page)["viewpoint"] == "v_lr2"
    page.mouse.click(box["x"] + 20, box["y"] + 20)  # not on a marker: nothing happens
    assert page.evaluate("moves") == ["v_lr2"]
    hint = page.locator("#viewer .proctor-viewer-hint").inner_text()
    assert "click a marker" in hint and "double" not in hint


def test_dragging_turns(viewer):
    page = viewer("v_lr1", 1.0)
    box = page.locator("#viewer canvas").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx - 200, cy, steps=8)
    page.mouse.up()
    # The scene follows the pointer: dragging it left by a quarter of the width turns right by
    # a quarter of the 90-degree field of view.
    assert state(page)["heading"] == pytest.approx(1.0 + math.pi / 8, abs=1e-6)
    assert state(page)["elevation"] == pytest.approx(0.0)
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx + 200, cy, steps=8)
    page.mouse.up()
    assert state(page)["heading"] == pytest.approx(1.0, abs=1e-6)
    assert page.evaluate("moves") == []  # a drag is not a move


def test_pose_trace(page, viewer):
    # The page runs on Playwright's fake clock, paused: time moves only when the test moves
    # it (timers fire inside run_for), so the throttle of onPose is checked exactly, with no
    # dependence on how fast this machine is.
    page.clock.install(time=0)
    page.clock.pause_at(1000)
    page = viewer("v_lr1", 0.0)
    first = page.evaluate("poses[0]")
    assert first == {"viewpoint": "v_lr1", "heading": 0, "elevation": 0, "t": 0}
    page.locator("#viewer canvas").focus()

    def trace(start: int = 0) -> list[tuple[float, float]]:
        return [(p["t"], p["heading"]) for p in page.evaluate("(n) => poses.slice(n)", start)]

    # Turns 150 ms apart all reach onPose, none sooner than 100 ms after the one before: the
    # first when its trailing call fires at 100 ms, the second at 200, the third at once.
    for _ in range(3):
        page.keyboard.press("ArrowRight")
        page.clock.run_for(150)
    assert trace() == [
        (0, 0),
        (100, pytest.approx(STEP)),
        (200, pytest.approx(2 * STEP)),
        (300, pytest.approx(3 * STEP)),
    ]
    # A fast turn (as when dragging): 30 small turns, one every 10 ms, reach onPose once per
    # 100 ms (at once, then when each trailing call fires) and the pose it ends at is recorded.
    n = len(trace())
    h = page.evaluate("viewer.state().heading")
    for _ in range(30):
        page.evaluate("viewer.turn(0.002)")
        page.clock.run_for(10)
    page.clock.run_for(500)  # nothing is left to fire
    assert trace(n) == [
        (450, pytest.approx(h + 0.002)),
        (550, pytest.approx(h + 0.020)),
        (650, pytest.approx(h + 0.040)),
        (750, pytest.approx(h + 0.060)),
    ]
    assert state(page)["heading"] == pytest.approx(h + 0.060)
    page.clock.run_for(50)
    page.keyboard.press("Enter")  # moves to the highlighted neighbour: recorded at once
    poses = page.evaluate("poses")
    assert page.evaluate("moves") == ["v_lr2"] == [state(page)["viewpoint"]]
    assert (poses[-1]["viewpoint"], poses[-1]["t"]) == ("v_lr2", 1300)
    assert len(poses) == 9
    assert all(set(p) == {"viewpoint", "heading", "elevation", "t"} for p in poses)


def test_aria_label_names_the_room_and_what_is_ahead(viewer):
    page = viewer("v_lr3", 0.0)  # facing north, through the doorway to the kitchen
    canvas = page.locator("#viewer canvas")
    label = canvas.get_attribute("aria-label")
    assert label.startswith("living room; ahead: doorway to the kitchen"), label
    assert "Enter moves 2.2 m ahead" in label
    canvas.focus()
    page.keyboard.press("Enter")
    assert page.evaluate("moves") == ["v_k1"]
    assert canvas.get_attribute("aria-label").startswith("kitchen; ahead:")
    # Facing the hallway's doorway from the kitchen's east side.
    page.evaluate("viewer.setViewpoint('v_k2', NEIGHBOURS['v_k2'], Math.PI / 2)")
    assert "doorway to the hallway" in canvas.get_attribute("aria-label")
    # The live region catches up once the view settles.
    page.wait_for_function("document.querySelector('#viewer [role=status]').textContent.startsWith('kitchen;')")


def test_the_red_couch_is_red_on_screen(viewer, house):
    semantics, _, _ = house
    page = viewer("v_lr3", 0.0)
    couch = next(o for o in semantics["objects"] if o["colour"] == "red")
    towards = bearing(semantics, "v_lr3", couch["position"])
    face(page, towards)
    assert reddish_share(page) > 0.1
    label = page.locator("#viewer canvas").get_attribute("aria-label")
    assert "red couch" in label, label
    face(page, (towards + math.pi) % (2 * math.pi))
    assert reddish_share(page) == 0
    assert "red couch" not in page.locator("#viewer canvas").get_attribute("aria-label")


def test_walls_hide_objects(viewer, house):
    """From the hallway the couch lies behind the living room's east wall: not drawn, not named."""
    semantics, _, _ = house
    page = viewer("v_h2", 0.0)
    couch = next(o for o in semantics["objects"] if o["colour"] == "red")
    face(page, bearing(semantics, "v_h2", couch["position"]))
    assert reddish_share(page) == 0
    assert "red couch" not in page.locator("#viewer canvas").get_attribute("aria-label")

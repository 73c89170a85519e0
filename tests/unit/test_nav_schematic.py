"""The admin's schematic map of a following session (app/kinds/navigation/schematic.py): the
SVG holds the intended and the walked path in walking order, at the building's coordinates
(metres, north up), the goal's 3 m circle in map units, and one map per floor visited."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from app.kinds.navigation.graph import NavGraph, load_connectivity
from app.kinds.navigation.house import generate_house, sample_paths
from app.kinds.navigation.schematic import floor_maps, floor_of

NS = {"s": "http://www.w3.org/2000/svg"}
CONN = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "r2r" / "connectivity"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def points(el: ET.Element) -> list[tuple[float, float]]:
    return [tuple(float(c) for c in p.split(",")) for p in el.get("points").split()]


def on_map(graph, v: str) -> tuple[float, float]:
    x, y, _ = graph.position(v)
    return (round(float(x), 2), round(-float(y), 2))


def detour(graph, ref: list[str]) -> list[str]:
    """Off the path at the start, back, then along it to the second-last viewpoint."""
    off = next(n for n in graph.neighbours(ref[0]) if n not in ref)
    return [ref[0], off, ref[0], *ref[1:-1]]


def test_paths_in_walking_order_and_the_goal_circle():
    house = generate_house(3)
    graph, semantics = house.graph(), house.semantics()
    ref = list(sample_paths(house, 4, rng=3)[0].path)
    walked = detour(graph, ref)
    maps = floor_maps(graph, ref, walked, semantics=semantics, id_prefix="t")
    assert len(maps) == 1 and maps[0].label == "" and maps[0].n_floors == 1
    svg = parse(maps[0].svg)

    intended = svg.findall(".//s:polyline[@class='intended']", NS)
    walk = svg.findall(".//s:polyline[@class='walked']", NS)
    assert len(intended) == 1 and len(walk) == 1
    assert intended[0].get("data-viewpoints").split() == ref
    assert walk[0].get("data-viewpoints").split() == walked
    assert points(intended[0]) == [pytest.approx(on_map(graph, v), abs=0.006) for v in ref]
    assert points(walk[0]) == [pytest.approx(on_map(graph, v), abs=0.006) for v in walked]
    # The worker's path is drawn over the intended one, with an arrow per step long enough.
    shapes = [el.get("class") for el in svg.iter() if el.get("class") in ("intended", "walked")]
    assert shapes == ["intended", "walked"]
    assert svg.find(".//s:path[@class='walk-arrows']", NS).get("d").count("M") == len(walked) - 1

    circle = svg.find(".//s:circle[@class='goal-radius']", NS)
    assert float(circle.get("r")) == 3.0  # metres are map units
    assert (float(circle.get("cx")), float(circle.get("cy"))) == pytest.approx(on_map(graph, ref[-1]), abs=0.006)
    # The whole circle is on the map, and metres scale alike across and down.
    x0, y0, w, h = (float(v) for v in svg.get("viewBox").split())
    cx, cy = float(circle.get("cx")), float(circle.get("cy"))
    assert x0 <= cx - 3 and cx + 3 <= x0 + w and y0 <= cy - 3 and cy + 3 <= y0 + h
    assert float(svg.get("width")) / w == pytest.approx(float(svg.get("height")) / h, rel=0.02)

    ne = graph.distance(walked[-1], ref[-1])
    assert ne > 0
    stop = svg.find(".//s:g[@class='stop']", NS)
    assert float(stop.get("data-ne")) == pytest.approx(ne, abs=0.006)
    assert "".join(stop.itertext()) == f"stopped {ne:.1f} m from the goal"
    start = svg.find(".//s:g[@class='start']/s:rect", NS)
    sx = float(start.get("x")) + float(start.get("width")) / 2
    sy = float(start.get("y")) + float(start.get("height")) / 2
    assert (sx, sy) == pytest.approx(on_map(graph, ref[0]), abs=0.01)

    # The building: every viewpoint a dot, every edge a line, the rooms named.
    assert len(svg.findall(".//s:g[@class='viewpoints']/s:circle", NS)) == len(graph)
    assert svg.find(".//s:path[@class='nav-edges']", NS).get("d").count("M") == graph.n_edges
    names = {t.text for t in svg.findall(".//s:g[@class='room-names']/s:text", NS)}
    assert names == {r["type"] for r in semantics["rooms"]}


def test_a_worker_at_the_goal_and_text_is_escaped():
    house = generate_house(3)
    graph, semantics = house.graph(), house.semantics()
    semantics["rooms"][0]["type"] = "<script>alert(1)</script>"
    ref = list(sample_paths(house, 4, rng=3)[1].path)
    svg_text = floor_maps(graph, ref, ref, semantics=semantics)[0].svg
    assert "<script>" not in svg_text and "&lt;script&gt;" in svg_text
    stop = parse(svg_text).find(".//s:g[@class='stop']", NS)
    assert "".join(stop.itertext()) == "stopped at the goal"


def test_one_map_per_floor_visited():
    house = generate_house(7, floors=2)
    graph, semantics = house.graph(), house.semantics()
    floors = floor_of(graph, semantics)
    assert floors == {v: semantics["viewpoints"][v]["floor"] for v in graph.viewpoints}
    ref = next(list(p.path) for p in sample_paths(house, 40, rng=1) if floors[p.path[0]] != floors[p.path[-1]])
    walked = ref[:-1]
    maps = floor_maps(graph, ref, walked, semantics=semantics)
    assert [m.floor for m in maps] == [0, 1]
    assert [m.label for m in maps] == ["Floor 1 of 2", "Floor 2 of 2"]
    steps = []
    for m in maps:
        svg = parse(m.svg)
        for line in svg.findall(".//s:polyline[@class='intended']", NS):
            ids = line.get("data-viewpoints").split()
            assert all(floors[v] == m.floor for v in ids)
            steps += [int(k) for k in line.get("data-steps").split()]
        # Only the goal's floor has the circle, and only that floor's rooms are drawn.
        has_circle = svg.find(".//s:circle[@class='goal-radius']", NS) is not None
        assert has_circle == (floors[ref[-1]] == m.floor)
        drawn = {r.get("data-room") for r in svg.findall(".//s:g[@class='rooms']/s:rect", NS)}
        assert drawn == {r["id"] for r in semantics["rooms"] if r["floor"] == m.floor}
    assert sorted(steps) == list(range(len(ref)))
    first = parse(maps[floors[ref[0]]].svg)
    assert "to floor" in "".join(t.text or "" for t in first.findall(".//s:text[@class='floor-change']", NS))


def test_floors_from_camera_heights_alone():
    # Two floors 3 m apart joined by a stair of intermediate viewpoints; no sidecar.
    low = [(x, y, 1.5) for x in range(4) for y in range(3)]
    stairs = [(5.0, 0.0, 2.2), (5.0, 1.0, 2.9), (5.0, 2.0, 3.8)]
    high = [(x, y, 4.5) for x in range(4) for y in range(3)]
    pos = np.array(low + stairs + high, dtype=float)
    ids = [f"v{k}" for k in range(len(pos))]
    graph = NavGraph(ids, pos, [(k, k + 1) for k in range(len(pos) - 1)])
    floors = floor_of(graph)
    assert [floors[v] for v in ids] == [0] * 12 + [0, 0, 1] + [1] * 12


@pytest.mark.skipif(not CONN.is_dir(), reason="R2R connectivity absent under ../shared/data")
def test_floors_of_real_buildings():
    two = load_connectivity(CONN / "1pXnuDYAj8r_connectivity.json")  # 48 + 43 viewpoints on two floors
    floors = floor_of(two)
    assert sorted(set(floors.values())) == [0, 1]
    z = two.positions[:, 2]
    assert all(
        floors[v] == (1 if z[two.index[v]] > 3.0 else 0) for v in two.viewpoints if abs(z[two.index[v]] - 3.0) > 1.0
    )
    one = load_connectivity(CONN / "8WUmhLawc2A_connectivity.json")
    assert set(floor_of(one).values()) == {0}

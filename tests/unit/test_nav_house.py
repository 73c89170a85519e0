"""Procedural houses (app.kinds.navigation.house): determinism, the connectivity format, the
geometry of viewpoints, edges, walls, doors and objects, stairs, and sampled R2R paths.

Geometry is checked with this file's own segment test, not the generator's."""

from __future__ import annotations

import json
import math
import random
import re
import time

import numpy as np
import pytest

from app.kinds.navigation import formats
from app.kinds.navigation.graph import load_connectivity
from app.kinds.navigation.house import (
    CAMERA_HEIGHT,
    COLOURS,
    FLOOR_HEIGHT,
    OBJECT_KINDS,
    ROOM_OBJECTS,
    ROOM_TYPES,
    SampledPath,
    generate_house,
    sample_paths,
    to_r2r,
    write_house,
)
from app.kinds.navigation.metrics import score_trajectory
from app.kinds.navigation.score import score_predictions

SEEDS = list(range(12))
HEX32 = re.compile(r"^[0-9a-f]{32}$")


@pytest.fixture(scope="module")
def houses():
    return [generate_house(s, floors=1 + s % 2) for s in SEEDS] + [generate_house(100, floors=3)]


def _cross(o, a, b):
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _on(p, q, r):
    return (
        min(p[0], q[0]) - 1e-9 <= r[0] <= max(p[0], q[0]) + 1e-9
        and min(p[1], q[1]) - 1e-9 <= r[1] <= max(p[1], q[1]) + 1e-9
    )


def intersects(p1, p2, q1, q2) -> bool:
    """Closed segments p1-p2 and q1-q2 share a point (touching counts)."""
    d1, d2 = _cross(q1, q2, p1), _cross(q1, q2, p2)
    d3, d4 = _cross(p1, p2, q1), _cross(p1, p2, q2)
    if ((d1 > 1e-12 and d2 < -1e-12) or (d1 < -1e-12 and d2 > 1e-12)) and (
        (d3 > 1e-12 and d4 < -1e-12) or (d3 < -1e-12 and d4 > 1e-12)
    ):
        return True
    return any(
        abs(d) <= 1e-12 and _on(a, b, c)
        for d, a, b, c in ((d1, q1, q2, p1), (d2, q1, q2, p2), (d3, p1, p2, q1), (d4, p1, p2, q2))
    )


def test_segment_helper():
    assert intersects((0, 0), (2, 2), (0, 2), (2, 0))
    assert intersects((0, 0), (1, 0), (1, 0), (1, 5))  # touching
    assert not intersects((0, 0), (1, 0), (2, 0), (3, 0))  # collinear, apart
    assert not intersects((0, 0), (1, 1), (0, 2), (2, 4))


# -- determinism ------------------------------------------------------------------------------


def test_same_seed_same_bytes(tmp_path):
    for floors in (1, 2):
        a = write_house(generate_house(42, floors=floors), tmp_path / "a")
        b = write_house(generate_house(42, floors=floors), tmp_path / "b")
        for fa, fb in zip(a, b):
            assert fa.name == fb.name
            assert fa.read_bytes() == fb.read_bytes()
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == [
        "house-42-2f_connectivity.json",
        "house-42-2f_semantics.json",
        "house-42_connectivity.json",
        "house-42_semantics.json",
    ]


def test_different_seeds_differ(tmp_path):
    a = generate_house(1)
    b = generate_house(2)
    assert a.scan != b.scan
    assert a.semantics()["rooms"] != b.semantics()["rooms"] or a.semantics()["objects"] != b.semantics()["objects"]
    assert not {v.id for v in a.viewpoints} & {v.id for v in b.viewpoints}
    sem = [json.dumps(generate_house(s).semantics()["rooms"]) for s in range(20)]
    assert len(set(sem)) >= 18  # layouts really vary


def test_bad_arguments():
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError):
            generate_house(bad)
    for bad in (0, 4, 1.0):
        with pytest.raises(ValueError):
            generate_house(1, floors=bad)


def test_fast_and_silent(capsys):
    start = time.perf_counter()
    for s in range(5):
        generate_house(500 + s, floors=2).connectivity()
    assert (time.perf_counter() - start) / 5 < 1.0
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


# -- the connectivity file --------------------------------------------------------------------


def test_connectivity_format(houses):
    for h in houses:
        records = h.connectivity()
        n = len(records)
        assert n == len(h.viewpoints)
        z_of = dict(h.floors)
        for rec, v in zip(records, h.viewpoints):
            assert set(rec) == {"image_id", "pose", "included", "visible", "unobstructed", "height"}
            assert HEX32.match(rec["image_id"]) and rec["image_id"] == v.id
            pose = rec["pose"]
            assert len(pose) == 16 and all(isinstance(x, float) for x in pose)
            assert pose[12:] == [0.0, 0.0, 0.0, 1.0]
            rot = np.array(pose).reshape(4, 4)[:3, :3]
            assert np.allclose(rot @ rot.T, np.eye(3), atol=1e-5)
            assert (pose[3], pose[7], pose[11]) == v.position
            assert rec["height"] == CAMERA_HEIGHT
            assert pose[11] == pytest.approx(z_of[v.floor] + CAMERA_HEIGHT)
            assert rec["included"] is True
            assert len(rec["unobstructed"]) == n and len(rec["visible"]) == n
            assert all(type(x) is bool for x in rec["unobstructed"] + rec["visible"])
        ids = [r["image_id"] for r in records]
        assert len(set(ids)) == n
        un = np.array([r["unobstructed"] for r in records])
        vis = np.array([r["visible"] for r in records])
        assert (un == un.T).all() and not un.diagonal().any()
        assert (vis == vis.T).all() and not (un & ~vis).any()  # navigable implies visible


def test_loads_and_is_connected(houses, tmp_path):
    for h in houses:
        g = load_connectivity(h.connectivity(), scan=h.scan)
        assert len(g) == len(h.viewpoints) and not g.excluded
        assert g.n_components == 1
        assert np.isfinite(g.distances).all()
        assert g.n_edges == len(h.edges)
    conn, _ = write_house(houses[0], tmp_path)
    g = load_connectivity(conn)
    assert g.scan == houses[0].scan and g.n_components == 1


# -- geometry ---------------------------------------------------------------------------------


def test_lattice_spacing(houses):
    axis, diagonal = [], []
    for h in houses:
        pos = {v.id: v.position for v in h.viewpoints}
        for a, b, kind in h.edges:
            d = math.dist(pos[a], pos[b])
            if kind == "room":
                axis.append(d)
            elif kind == "diagonal":
                diagonal.append(d)
            elif kind == "door":
                assert 0.7 <= d <= 3.0, d
            else:
                assert kind == "stairs"
    axis = np.array(axis)
    assert len(axis) > 500
    assert axis.min() >= 1.5 - 1e-3 and axis.max() <= 2.5 + 1e-3
    assert 1.8 <= np.median(axis) <= 2.2  # aimed at 2 m
    assert (axis < 1.75).mean() > 0.05 and (axis > 2.15).mean() > 0.05  # not one constant
    assert len(np.unique(axis.round(2))) > 50
    assert max(diagonal) <= 2.5 * math.sqrt(2) + 1e-3 and min(diagonal) >= 1.5 * math.sqrt(2) - 1e-3


def test_lattice_edges_stay_in_one_room(houses):
    for h in houses:
        for a, b, kind in h.edges:
            va, vb = h.viewpoint(a), h.viewpoint(b)
            if kind in ("room", "diagonal"):
                assert va.room == vb.room is not None
            elif kind == "door":
                door = va.door or vb.door
                room = vb.room if va.door else va.room
                assert door and room in h.door_by_id[door].rooms


def test_viewpoints_inside_rooms_away_from_walls(houses):
    for h in houses:
        for v in h.viewpoints:
            if v.room is not None:
                r = h.room(v.room)
                assert r.floor == v.floor
                assert r.contains(v.position[0], v.position[1], margin=0.75 - 1e-6)
            else:
                d = h.door_by_id[v.door]
                assert (v.position[0], v.position[1]) == d.position and v.floor == d.floor


def test_no_edge_crosses_a_wall(houses):
    for h in houses:
        walls = {}
        for w in h.semantics()["walls"]:
            walls.setdefault(w["floor"], []).append((tuple(w["a"]), tuple(w["b"])))
        for a, b, kind in h.edges:
            va, vb = h.viewpoint(a), h.viewpoint(b)
            if va.floor != vb.floor:
                assert kind == "stairs"
                continue
            for q1, q2 in walls[va.floor]:
                assert not intersects(va.position[:2], vb.position[:2], q1, q2), (h.scan, kind, a, b, q1, q2)


def test_walls_have_gaps_at_doors(houses):
    for h in houses:
        sem = h.semantics()
        for d in sem["doors"]:
            x, y = d["position"]
            r1, r2 = (h.room(r) for r in d["rooms"])
            assert r1.floor == r2.floor == d["floor"]
            # the door lies on the boundary both rooms share
            for r in (r1, r2):
                x0, y0, x1, y1 = r.bounds
                assert (x0 <= x <= x1 and y0 <= y <= y1) and (x in (x0, x1) or y in (y0, y1))
            for w in sem["walls"]:
                if w["floor"] == d["floor"]:
                    # no wall passes within half a door of its centre
                    assert not intersects(w["a"], w["b"], (x - 0.49, y - 0.49), (x + 0.49, y + 0.49))
                    assert not intersects(w["a"], w["b"], (x - 0.49, y + 0.49), (x + 0.49, y - 0.49))
        # the outer shell is closed: every room side is covered by walls or doors
        for w in sem["walls"]:
            assert w["a"][0] == w["b"][0] or w["a"][1] == w["b"][1]  # axis-aligned
        assert_closed_shell(sem)


EPS = 1e-6


def _uncovered(intervals, lo: float, hi: float) -> list[tuple[float, float]]:
    """The parts of [lo, hi] that no interval covers (touching intervals join)."""
    gaps, at = [], lo
    for a, b in sorted(intervals):
        if b <= at + EPS:
            continue
        if a > at + EPS:
            gaps.append((at, min(a, hi)))
        at = max(at, b)
        if at >= hi - EPS:
            break
    if at < hi - EPS:
        gaps.append((at, hi))
    return [g for g in gaps if g[1] - g[0] > EPS]


def assert_closed_shell(sem: dict) -> None:
    """Each floor's outline is one closed loop of walls (its four sides covered end to end, no
    door to the outside); every room side is covered by walls and door gaps exactly (a gap as
    wide as its door, no wall across it); and no wall ends in mid-air: each end meets another
    wall or the edge of a door gap. (Inner walls meet the shell in T-junctions, so "two walls
    per endpoint" does not hold here; these are the checks that do.)"""
    rooms = {r["id"]: r for r in sem["rooms"]}
    for level in sorted({r["floor"] for r in sem["rooms"]}):
        walls: dict[tuple[str, float], list[tuple[float, float]]] = {}
        for w in sem["walls"]:
            if w["floor"] != level:
                continue
            (ax, ay), (bx, by) = w["a"], w["b"]
            assert (ax == bx) != (ay == by), w  # axis-aligned, not a point
            key = ("h", ay) if ay == by else ("v", ax)
            span = (min(ax, bx), max(ax, bx)) if ay == by else (min(ay, by), max(ay, by))
            walls.setdefault(key, []).append(span)
        gaps: dict[tuple[str, float], list[tuple[float, float]]] = {}
        for d in sem["doors"]:
            if d["floor"] != level:
                continue
            a, b = (rooms[r]["bounds"] for r in d["rooms"])
            (x, y), half = d["position"], d["width"] / 2
            if abs(a[3] - b[1]) < EPS or abs(a[1] - b[3]) < EPS:  # one above the other
                gaps.setdefault(("h", y), []).append((x - half, x + half))
            else:
                gaps.setdefault(("v", x), []).append((y - half, y + half))

        def sides(bounds):
            x0, y0, x1, y1 = bounds
            return ((("h", y0), x0, x1), (("h", y1), x0, x1), (("v", x0), y0, y1), (("v", x1), y0, y1))

        def on(key):
            return [v for k, v in walls.items() if k[0] == key[0] and abs(k[1] - key[1]) < EPS]

        def doors_on(key):
            return [v for k, v in gaps.items() if k[0] == key[0] and abs(k[1] - key[1]) < EPS]

        mine = [r["bounds"] for r in sem["rooms"] if r["floor"] == level]
        outline = (min(b[0] for b in mine), min(b[1] for b in mine), max(b[2] for b in mine), max(b[3] for b in mine))
        for key, lo, hi in sides(outline):
            assert _uncovered([s for spans in on(key) for s in spans], lo, hi) == [], (sem["scan"], level, key)
            assert not [g for spans in doors_on(key) for g in spans if g[1] > lo and g[0] < hi], (
                sem["scan"],
                level,
                key,
            )
        for bounds in mine:
            for key, lo, hi in sides(bounds):
                spans = [s for group in on(key) for s in group]
                door_spans = [g for group in doors_on(key) for g in group]
                assert _uncovered(spans + door_spans, lo, hi) == [], (sem["scan"], level, bounds, key)
                for g0, g1 in door_spans:  # the gap is open: no wall across it
                    assert all(b <= g0 + EPS or a >= g1 - EPS for a, b in spans), (sem["scan"], key, g0, g1)
        # No wall ends in mid-air: each end lies on another wall, or is a door gap's edge.
        segments = [(axis, line, a, b) for (axis, line), spans in walls.items() for a, b in spans]

        def touches(point, seg):
            axis, line, a, b = seg
            along, across = (point[0], point[1]) if axis == "h" else (point[1], point[0])
            return abs(across - line) < EPS and a - EPS <= along <= b + EPS

        for i, (axis, line, a, b) in enumerate(segments):
            for t in (a, b):
                point = (t, line) if axis == "h" else (line, t)
                meets_wall = any(touches(point, seg) for j, seg in enumerate(segments) if j != i)
                door_edge = any(
                    abs(g0 - t) < EPS or abs(g1 - t) < EPS
                    for g0, g1 in [g for group in doors_on((axis, line)) for g in group]
                )
                assert meets_wall or door_edge, (sem["scan"], level, axis, line, t)


def test_the_shell_check_catches_a_gap():
    """The closed-shell check above fails on an outline with a piece missing, a door to the
    outside, and a wall that ends in mid-air."""
    room = {"id": "r", "type": "bedroom", "floor": 0, "bounds": [0, 0, 4, 3]}
    box = [((0, 0), (4, 0)), ((4, 0), (4, 3)), ((4, 3), (0, 3)), ((0, 3), (0, 0))]

    def sem(walls, doors=()):
        return {
            "scan": "toy",
            "rooms": [room],
            "doors": list(doors),
            "walls": [{"floor": 0, "a": list(a), "b": list(b)} for a, b in walls],
        }

    assert_closed_shell(sem(box))
    with pytest.raises(AssertionError):
        assert_closed_shell(sem([((0, 0), (3, 0))] + box[1:]))  # 1 m of the south side missing
    with pytest.raises(AssertionError):
        assert_closed_shell(sem([((0, 0), (1.5, 0)), ((2.5, 0), (4, 0))] + box[1:]))  # a hole
    with pytest.raises(AssertionError):
        assert_closed_shell(sem(box + [((1, 1), (2, 1))]))  # a wall ending in mid-air


def test_rooms_tile_each_floor(houses):
    for h in houses:
        for level, _ in h.floors:
            rooms = [r for r in h.rooms if r.floor == level]
            for i, a in enumerate(rooms):
                assert a.type in ROOM_TYPES
                assert min(a.width, a.depth) >= (2.0 if a.type == "hallway" else 2.5)
                for b in rooms[i + 1 :]:
                    ax0, ay0, ax1, ay1 = a.bounds
                    bx0, by0, bx1, by1 = b.bounds
                    assert ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0, (a, b)  # no overlap
            x0 = min(r.bounds[0] for r in rooms)
            y0 = min(r.bounds[1] for r in rooms)
            x1 = max(r.bounds[2] for r in rooms)
            y1 = max(r.bounds[3] for r in rooms)
            assert sum(r.area for r in rooms) == pytest.approx((x1 - x0) * (y1 - y0))  # no holes
            types = [r.type for r in rooms]
            assert types.count("hallway") == 1


def test_every_room_reachable_through_doors(houses):
    for h in houses:
        graph = h.graph()
        by_room = {}
        for v in h.viewpoints:
            if v.room:
                by_room.setdefault(v.room, []).append(v.id)
        assert set(by_room) == {r.id for r in h.rooms}  # every room has viewpoints
        start = h.viewpoints[0].id
        for _room, vps in by_room.items():
            assert all(graph.distance(start, v) < math.inf for v in vps)
        # and the rooms-and-doors graph alone (plus stairs) is connected
        adj = {r.id: set() for r in h.rooms}
        for d in h.doors:
            a, b = d.rooms
            adj[a].add(b)
            adj[b].add(a)
        stairs = [r.id for r in h.rooms if r.type == "stairs"]
        for a, b in zip(stairs, stairs[1:]):
            adj[a].add(b)
            adj[b].add(a)
        seen, todo = {h.rooms[0].id}, [h.rooms[0].id]
        while todo:
            for nxt in adj[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        assert seen == set(adj)


def test_objects_inside_their_rooms(houses):
    count = 0
    for h in houses:
        z_of = dict(h.floors)
        for o in h.semantics()["objects"]:
            count += 1
            room = h.room(o["room"])
            assert o["floor"] == room.floor
            assert o["colour"] in COLOURS
            assert o["colour"] in OBJECT_KINDS[o["type"]].colours
            required, optional, _ = ROOM_OBJECTS[room.type]
            assert o["type"] in required + optional
            x, y, z = o["position"]
            sx, sy, sz = o["size"]
            x0, y0, x1, y1 = room.bounds
            assert x0 - 1e-6 <= x - sx / 2 and x + sx / 2 <= x1 + 1e-6
            assert y0 - 1e-6 <= y - sy / 2 and y + sy / 2 <= y1 + 1e-6
            assert z_of[room.floor] < z < z_of[room.floor] + FLOOR_HEIGHT
        ids = [o.id for o in h.objects]
        assert len(set(ids)) == len(ids)
    assert count / sum(len(h.rooms) for h in houses) >= 1.5


def test_room_types_plausible(houses):
    for h in houses:
        types = [r.type for r in h.rooms]
        assert "kitchen" in types and "bathroom" in types and ("bedroom" in types or len(h.floors) == 1)
        assert "living room" in types
        kitchen_objects = {o.type for o in h.objects if h.room(o.room).type == "kitchen"}
        assert kitchen_objects & {"oven", "fridge", "sink"}


def test_stairs_join_floors():
    for seed in range(8):
        h = generate_house(seed, floors=2)
        stairs_rooms = [r for r in h.rooms if r.type == "stairs"]
        assert [r.floor for r in stairs_rooms] == [0, 1]
        assert stairs_rooms[0].bounds == stairs_rooms[1].bounds
        stairs_edges = [(a, b) for a, b, k in h.edges if k == "stairs"]
        assert len(stairs_edges) == 1
        a, b = (h.viewpoint(x) for x in stairs_edges[0])
        assert {a.room, b.room} == {r.id for r in stairs_rooms}
        assert abs(b.position[2] - a.position[2]) == pytest.approx(FLOOR_HEIGHT)
        g = h.graph()
        up = next(v.id for v in h.viewpoints if v.floor == 1)
        down = next(v.id for v in h.viewpoints if v.floor == 0)
        assert math.isfinite(g.distance(up, down)) and g.distance(up, down) > FLOOR_HEIGHT
        # every edge between floors is the stairs edge
        for x, y, kind in h.edges:
            assert (h.viewpoint(x).floor != h.viewpoint(y).floor) == (kind == "stairs")
    one = generate_house(3, floors=1)
    assert not [r for r in one.rooms if r.type == "stairs"]


def test_semantics_schema(houses):
    for h in houses:
        sem = json.loads(json.dumps(h.semantics()))
        assert {"scan", "seed", "floors", "rooms", "walls", "doors", "objects", "viewpoints"} <= set(sem)
        assert sem["floors"] == [{"level": i, "z": i * FLOOR_HEIGHT} for i in range(len(h.floors))]
        for r in sem["rooms"]:
            assert set(r) == {"id", "type", "floor", "bounds"} and len(r["bounds"]) == 4
        for d in sem["doors"]:
            assert set(d) == {"id", "rooms", "floor", "position", "width"} and d["width"] in (1.0, 1.5)
        for o in sem["objects"]:
            assert set(o) == {"id", "type", "colour", "room", "floor", "position", "size"}
        assert list(sem["viewpoints"]) == [v.id for v in h.viewpoints]
        for _vid, v in sem["viewpoints"].items():
            assert {"room", "floor", "position"} <= set(v) and len(v["position"]) == 3


# -- paths ------------------------------------------------------------------------------------


def test_sampled_paths_are_short_r2r_like_shortest_paths(houses):
    total = 0
    for h in houses:
        g = h.graph()
        paths = sample_paths(h, 12, rng=np.random.default_rng(7))
        assert len(paths) == 12
        assert len({(p.path[0], p.path[-1]) for p in paths}) == 12
        for p in paths:
            total += 1
            assert 4 <= len(p.path) <= 7
            assert len(set(p.path)) == len(p.path)
            assert p.distance >= 5.0 - 1e-9
            assert 0.0 <= p.heading < 2 * math.pi
            steps = sum(g.distances[g.index[a], g.index[b]] for a, b in zip(p.path, p.path[1:]))
            assert all(g.is_edge(a, b) for a, b in zip(p.path, p.path[1:]))
            assert steps == pytest.approx(g.distance(p.path[0], p.path[-1]))  # a shortest path
            assert p.distance == pytest.approx(steps)
            assert h.viewpoint(p.path[0]).room and h.viewpoint(p.path[-1]).room  # ends not in doorways
            assert score_trajectory(g, p.path, p.path)["ndtw"] == 1.0
    assert total == 12 * len(houses)


def test_sample_paths_deterministic_and_rng_kinds():
    h = generate_house(9, floors=2)
    a = sample_paths(h, 8, rng=5)
    b = sample_paths(h, 8, rng=random.Random(5))
    c = sample_paths(h, 8, rng=5)
    assert a == b == c
    assert sample_paths(h, 8, rng=6) != a
    assert sample_paths(h, 3, rng=np.random.default_rng(1)) == sample_paths(h, 3, rng=np.random.default_rng(1))
    with pytest.raises(TypeError):
        sample_paths(h, 1, rng="x")


def test_sample_paths_respects_bounds():
    h = generate_house(4)
    long = sample_paths(h, 5, rng=1, min_len=6, max_len=6, min_distance=8.0)
    assert long and all(len(p.path) == 6 and p.distance >= 8.0 for p in long)
    assert sample_paths(h, 5, rng=1, min_len=50, max_len=60) == []  # impossible: none, not a hang


def test_to_r2r_scores_with_the_navigation_scorer(tmp_path):
    h = generate_house(11, floors=2)
    conn_dir = tmp_path / "conn"
    write_house(h, conn_dir)
    paths = sample_paths(h, 4, rng=2)
    records = to_r2r(h, paths, [["walk.", "go.", "move."]] * len(paths), first_path_id=100)
    assert [r["path_id"] for r in records] == [100, 101, 102, 103]
    ref_file = tmp_path / "R2R_houses.json"
    ref_file.write_text(json.dumps(records))
    parsed = formats.parse_r2r(ref_file)
    assert [p.path for p in parsed] == [p.path for p in paths]
    assert parsed[0].scan == h.scan and parsed[0].distance == round(paths[0].distance, 2)
    preds = [{"instr_id": f"{r['path_id']}_0", "trajectory": [[v, 0.0, 0.0] for v in r["path"]]} for r in records]
    pred_file = tmp_path / "preds.json"
    pred_file.write_text(json.dumps(preds))
    result = score_predictions(conn_dir, ref_file, pred_file)
    assert result["mean"]["ndtw"] == 1.0 and result["mean"]["success"] == 1.0 and result["mean"]["spl"] == 1.0
    assert len(result["unpredicted"]) == 8
    # dicts work as paths too, and the lengths must match
    assert to_r2r(h, [paths[0].as_dict()], [["x"]])[0]["path"] == list(paths[0].path)
    with pytest.raises(ValueError):
        to_r2r(h, paths, [["x"]])
    assert isinstance(paths[0], SampledPath)

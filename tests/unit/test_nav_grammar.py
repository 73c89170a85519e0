"""Reference instructions for house paths (app.kinds.navigation.grammar): per-step features,
turn directions in the simulator's heading convention, and instructions that differ from each
other and mention only what is on or near the path."""

from __future__ import annotations

import json
import math
import random
import re

import numpy as np
import pytest

from app.kinds.navigation import formats
from app.kinds.navigation.grammar import (
    OBJECT_WORDS,
    ROOM_WORDS,
    VISIBLE_RADIUS,
    describe_path,
    describe_paths,
    path_features,
    turn_word,
    visible_objects,
)
from app.kinds.navigation.house import (
    COLOURS,
    House,
    HouseObject,
    Room,
    Viewpoint,
    generate_house,
    sample_paths,
    to_r2r,
)
from app.kinds.navigation.metrics import score_trajectory


def hand_house() -> House:
    """One 6 x 6 m living room; a-b-c-d walks north, then east (a right turn), then north (a
    left turn); a red couch beside d, a green plant far from everything."""
    room = Room("room0", "living room", 0, (0.0, 0.0, 6.0, 6.0))
    vps = (
        Viewpoint("a" * 32, "room0", None, 0, (1.0, 1.0, 1.5)),
        Viewpoint("b" * 32, "room0", None, 0, (1.0, 3.0, 1.5)),
        Viewpoint("c" * 32, "room0", None, 0, (3.0, 3.0, 1.5)),
        Viewpoint("d" * 32, "room0", None, 0, (3.0, 5.0, 1.5)),
    )
    objects = (
        HouseObject("obj0", "couch", "red", "room0", 0, (4.5, 5.5, 0.45), (2.0, 0.85, 0.9)),
        HouseObject("obj1", "plant", "green", "room0", 0, (5.7, 0.3, 0.5), (0.4, 0.4, 1.0)),
    )
    edges = ((vps[0].id, vps[1].id, "room"), (vps[1].id, vps[2].id, "room"), (vps[2].id, vps[3].id, "room"))
    return House(
        scan="hand",
        seed=0,
        floors=((0, 0.0),),
        rooms=(room,),
        walls=(),
        doors=(),
        objects=objects,
        viewpoints=vps,
        edges=edges,
    )


HAND_PATH = ["a" * 32, "b" * 32, "c" * 32, "d" * 32]


def test_turn_word():
    assert turn_word(None) is None
    assert turn_word(0.0) == turn_word(50.0) == turn_word(-50.0) == "straight"
    assert turn_word(90.0) == "right" and turn_word(-90.0) == "left"
    assert turn_word(170.0) == turn_word(-170.0) == turn_word(180.0) == "around"


def test_features_of_a_hand_path():
    h = hand_house()
    f = path_features(h, HAND_PATH, heading=0.0)  # facing north (+y)
    assert [x["step"] for x in f] == [0, 1, 2, 3]
    assert [x["turn"] for x in f] == [None, "straight", "right", "left"]
    assert [x["turn_angle"] for x in f] == [None, 0.0, 90.0, -90.0]
    assert f[2]["heading"] == pytest.approx(math.pi / 2)  # east
    assert [x["distance"] for x in f] == [0.0, 2.0, 2.0, 2.0]
    assert all(x["room"] == "living room" and x["stairs"] is None for x in f)
    assert f[0]["entered_room"] is None and f[-1]["goal"] and not f[0]["goal"]
    # the couch is 0.6 m north-east of d, ahead-right of someone walking north
    near = f[3]["objects"]
    assert near[0]["type"] == "couch" and near[0]["colour"] == "red" and near[0]["distance"] < 1.0
    assert near[0]["side"] in ("ahead", "right")
    assert all(o["type"] != "plant" for o in near)  # 3.3 m away: not visible
    # without a start heading there is no first turn
    assert path_features(h, HAND_PATH)[1]["turn"] is None
    # facing south, the first move is a turn around
    assert path_features(h, HAND_PATH, heading=math.pi)[1]["turn"] == "around"


def test_instructions_of_a_hand_path_turn_the_right_way():
    h = hand_house()
    texts = describe_path(h, {"path": HAND_PATH, "heading": math.pi}, random.Random(0), n=6)
    assert len(set(texts)) == 6
    for t in texts:
        low = t.lower()
        assert "right" in low and "left" in low, t
        assert low.index("right") < low.index("left"), t  # right at b, then left at c
        assert "couch" in low or "sofa" in low or "living room" in low or "lounge" in low, t
        assert "plant" not in low  # not near the path


# -- real houses ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cases():
    out = []
    for seed in range(10):
        h = generate_house(seed, floors=1 + seed % 2)
        for p in sample_paths(h, 6, rng=seed):
            out.append((h, p, describe_path(h, p, random.Random(seed * 100 + len(out)))))
    return out


def _word_re(word: str) -> re.Pattern:
    return re.compile(r"\b" + re.escape(word.lower()) + r"\b")


def _near_objects(h: House, path) -> list[HouseObject]:
    near = {}
    for v in path:
        for o in visible_objects(h, v, radius=VISIBLE_RADIUS):
            near[o["id"]] = o
    return [o for o in h.objects if o.id in near]


def _room_types(h: House, path) -> set[str]:
    out = set()
    for v in path:
        out |= {h.room(r).type for r in h.rooms_of(v)}
    return out


def test_three_different_instructions(cases):
    for _h, _p, texts in cases:
        assert len(texts) == 3 and len(set(texts)) == 3, texts
        for t in texts:
            assert t and t[0].isupper() and t.endswith("."), t
            assert "  " not in t and ".." not in t and " ." not in t


def test_deterministic():
    h = generate_house(3, floors=2)
    [p] = sample_paths(h, 1, rng=3)
    assert describe_path(h, p, random.Random(8)) == describe_path(h, p, random.Random(8))
    assert len(describe_path(h, p, np.random.default_rng(8))) == 3  # a numpy Generator works too
    assert describe_path(h, p, 8) == describe_path(h, p, 8)
    many = [describe_path(h, p, s) for s in range(5)]
    assert len({tuple(m) for m in many}) > 1


def test_instructions_name_the_goal(cases):
    for h, p, texts in cases:
        goal = p.path[-1]
        goal_words = [w for t in _room_types(h, [goal]) for w in ROOM_WORDS[t]]
        near_goal = visible_objects(h, goal)  # same room, within 3 m
        goal_words += [w for o in near_goal for w in OBJECT_WORDS[o["type"]]]
        for t in texts:
            low = t.lower()
            assert any(_word_re(w).search(low) for w in goal_words), (t, goal_words)


def test_mentions_only_what_is_on_or_near_the_path(cases):
    for h, p, texts in cases:
        near = _near_objects(h, p.path)
        rooms = _room_types(h, p.path)
        for t in texts:
            low = t.lower()
            for obj_type, words in OBJECT_WORDS.items():
                for w in words:
                    if _word_re(w).search(low):
                        assert any(o.type == obj_type for o in near), (t, obj_type)
            for colour in COLOURS:
                for m in re.finditer(r"\b" + colour + r" ([a-z]+(?: [a-z]+)?)", low):
                    rest = m.group(1)
                    types = [ot for ot, ws in OBJECT_WORDS.items() for w in ws if _word_re(w).match(rest)]
                    assert types, (t, m.group(0))
                    assert any(o.colour == colour and o.type in types for o in near), (t, m.group(0))
            for room_type, words in ROOM_WORDS.items():
                if room_type == "stairs":
                    continue
                for w in words:
                    if _word_re(w).search(low):
                        assert room_type in rooms, (t, w, rooms)


def test_stairs_are_mentioned_with_their_direction():
    seen = {"up": 0, "down": 0}
    for seed in range(12):
        h = generate_house(seed, floors=2)
        g = h.graph()
        bottom, top = next((a, b) for a, b, k in h.edges if k == "stairs")
        for a, b in ((bottom, top), (top, bottom)):
            # from a room on one floor to a room on the other, through the stairs
            start, goal = (
                next(
                    v.id
                    for v in h.viewpoints
                    if v.floor == h.viewpoint(x).floor and v.room and h.room(v.room).type not in ("stairs", "hallway")
                )
                for x in (a, b)
            )
            path = g.shortest_path(start, goal)
            direction = "up" if h.viewpoint(b).floor > h.viewpoint(a).floor else "down"
            feats = path_features(h, path)
            assert [f["stairs"] for f in feats].count(direction) == 1
            for t in describe_path(h, path, seed):
                low = t.lower()
                assert "stairs" in low or "upstairs" in low or "downstairs" in low, t
                said = r"\b(up|upstairs|climb|climbing)\b" if direction == "up" else r"\b(down|downstairs)\b"
                assert re.search(said, low), t
                seen[direction] += 1
    assert seen["up"] and seen["down"]


def test_path_features_on_real_paths(cases):
    for h, p, _ in cases:
        f = path_features(h, p)
        assert len(f) == len(p.path)
        assert f[0]["heading"] == p.heading
        total = sum(x["distance"] for x in f)
        assert total == pytest.approx(p.distance, abs=0.05)
        last_room = None
        for x in f:
            v = h.viewpoint(x["viewpoint"])
            assert x["floor"] == v.floor
            if v.room:
                assert x["room"] == h.room(v.room).type and x["door"] is None
                if last_room is not None and v.room != last_room:
                    assert x["entered_room"] == x["room"]
                last_room = v.room
            else:
                assert x["room"] == "doorway" and x["door"] == v.door and len(x["door_rooms"]) == 2
            for o in x["objects"]:
                obj = next(q for q in h.objects if q.id == o["id"])
                assert obj.room in h.rooms_of(x["viewpoint"]) and o["distance"] <= VISIBLE_RADIUS
                assert o["side"] in ("ahead", "left", "right", "behind")
            if x["step"] > 0:
                assert x["turn"] in ("straight", "left", "right", "around")
                assert -180 < x["turn_angle"] <= 180
        json.dumps(f)  # plain data


def test_variety_across_paths(cases):
    openings = set()
    words = set()
    for _, _, texts in cases:
        for t in texts:
            for s in re.split(r"(?<=\.) ", t):
                openings.add(" ".join(s.split()[:2]).lower())
            words |= set(re.findall(r"[a-z]+", t.lower()))
    assert len(openings) >= 30
    assert {"turn", "left", "right", "past", "stop", "wait", "then", "into"} <= words


def test_r2r_records_with_instructions_are_followable(tmp_path):
    h = generate_house(21, floors=2)
    paths = sample_paths(h, 5, rng=21)
    instr = describe_paths(h, paths, rng=21)
    records = to_r2r(h, paths, instr)
    parsed = formats.parse_r2r(json.loads(json.dumps(records)))
    assert all(len(p.instructions) == 3 for p in parsed)
    g = h.graph()
    for p in parsed:
        assert score_trajectory(g, p.path, p.path)["ndtw"] == 1.0
        assert p.heading == next(q.heading for q in paths if q.path == p.path)

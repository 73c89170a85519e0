"""Reference instructions for paths in generated houses, from a small grammar.

Two layers:

- `path_features(house, path, heading=None)`: what a speaker could say about a path, one dict
  per viewpoint of the path (the training features of a future speaker model; the fields are
  listed in `path_features` and docs/kinds/navigation-houses.md);
- `describe_path(house, path, rng, n=3)`: n instructions in English, built from those features
  by a plan (the events worth saying: start orientation, rooms left and entered, stairs, turns
  with landmarks, landmarks passed, the stop) and a realiser with several templates per event,
  several connectives, three levels of detail and optional colours, so that the instructions of
  one path differ in wording and in what they mention. Everything mentioned is on the path:
  rooms the path passes through, objects within a few metres of its viewpoints (in the same
  room), the turns it takes.

    house = generate_house(7)
    [p] = sample_paths(house, 1, rng=3)
    describe_path(house, p, random.Random(3))
    # ['Turn to your left. Exit the lounge and enter the corridor. Walk into the kitchen and stop
    #   in front of the cabinet.', 'After turning left, exit the lounge and enter the hall. Go into
    #   the kitchen and wait by the yellow cabinet.', ...]

Headings follow the simulator (radians clockwise from +y; turning right increases them).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from app.kinds.navigation.graph import heading_between
from app.kinds.navigation.house import House, HouseObject, SampledPath, as_random

# A turn of at most STRAIGHT degrees is straight on; more than AROUND degrees is turning around.
STRAIGHT = 50.0
AROUND = 135.0
VISIBLE_RADIUS = 3.0  # metres: objects this near a viewpoint (same room) count as visible from it
LANDMARK_RADIUS = 1.8  # metres: objects this near a viewpoint may anchor a turn, a pass or the stop
GROUPED_TURN = 60.0  # degrees: two small turns the same way in a row add up to one turn

ROOM_WORDS: dict[str, tuple[str, ...]] = {
    "hallway": ("hallway", "hall", "corridor"),
    "living room": ("living room", "lounge"),
    "kitchen": ("kitchen",),
    "dining room": ("dining room",),
    "bedroom": ("bedroom",),
    "bathroom": ("bathroom",),
    "office": ("office", "study"),
    "laundry room": ("laundry room", "laundry"),
    "stairs": ("stairs", "staircase"),
}
OBJECT_WORDS: dict[str, tuple[str, ...]] = {
    "couch": ("couch", "sofa"),
    "armchair": ("armchair",),
    "table": ("table",),
    "chair": ("chair",),
    "bed": ("bed",),
    "oven": ("oven", "stove"),
    "fridge": ("fridge", "refrigerator"),
    "sink": ("sink",),
    "plant": ("plant", "potted plant"),
    "lamp": ("lamp",),
    "painting": ("painting", "picture"),
    "mirror": ("mirror",),
    "bookshelf": ("bookshelf", "bookcase"),
    "toilet": ("toilet",),
    "bathtub": ("bathtub", "tub"),
    "desk": ("desk",),
    "tv": ("TV", "television"),
    "wardrobe": ("wardrobe",),
    "dresser": ("dresser",),
    "washing machine": ("washing machine", "washer"),
    "dryer": ("dryer",),
    "cabinet": ("cabinet",),
    "bench": ("bench",),
    "piano": ("piano",),
}

_GERUND = {
    "walk": "walking",
    "go": "going",
    "turn": "turning",
    "enter": "entering",
    "leave": "leaving",
    "exit": "exiting",
    "pass": "passing",
    "climb": "climbing",
    "take": "taking",
    "make": "making",
    "head": "heading",
    "continue": "continuing",
    "step": "stepping",
    "cross": "crossing",
    "follow": "following",
    "keep": "keeping",
}


# -- features ---------------------------------------------------------------------------------


def _wrap_degrees(a: float) -> float:
    """An angle in degrees, wrapped to (-180, 180]."""
    a = (a + 180.0) % 360.0 - 180.0
    return 180.0 if a == -180.0 else a


def turn_word(angle: float | None) -> str | None:
    """'straight', 'left', 'right' or 'around' for a signed turn in degrees (positive = right)."""
    if angle is None:
        return None
    if abs(angle) > AROUND:
        return "around"
    if abs(angle) <= STRAIGHT:
        return "straight"
    return "right" if angle > 0 else "left"


def _side(angle: float) -> str:
    a = abs(angle)
    if a <= 45.0:
        return "ahead"
    if a >= 135.0:
        return "behind"
    return "right" if angle > 0 else "left"


def _box_distance(p: Sequence[float], obj: HouseObject) -> float:
    x0, y0, x1, y1 = obj.footprint
    dx = max(x0 - p[0], 0.0, p[0] - x1)
    dy = max(y0 - p[1], 0.0, p[1] - y1)
    return math.hypot(dx, dy)


def visible_objects(
    house: House, viewpoint: str, heading: float | None = None, radius: float = VISIBLE_RADIUS
) -> list[dict]:
    """Objects in the viewpoint's room (both rooms for a doorway) within `radius` metres of it
    (to the object's footprint), nearest first: {id, type, colour, distance, side}; side is
    ahead/left/right/behind relative to `heading` (None without one)."""
    v = house.viewpoint(viewpoint)
    out = []
    for room_id in house.rooms_of(viewpoint):
        for o in house.objects_by_room[room_id]:
            d = _box_distance(v.position, o)
            if d > radius:
                continue
            side = None
            if heading is not None:
                bearing = math.degrees(heading_between(v.position, o.position) - heading)
                side = _side(_wrap_degrees(bearing))
            out.append({"id": o.id, "type": o.type, "colour": o.colour, "distance": round(d, 2), "side": side})
    out.sort(key=lambda r: (r["distance"], r["id"]))
    return out


def _path_and_heading(path, heading: float | None) -> tuple[list[str], float | None]:
    if isinstance(path, SampledPath):
        return list(path.path), path.heading if heading is None else heading
    if isinstance(path, dict):
        return list(path["path"]), path.get("heading") if heading is None else heading
    return list(path), heading


def path_features(house: House, path: Sequence[str] | SampledPath | dict, heading: float | None = None) -> list[dict]:
    """One dict per viewpoint of the path (index k describes arriving at path[k]; k = 0 is the
    start). `path` is a list of viewpoint ids, a SampledPath or an R2R-like dict (its heading is
    used unless `heading` is given). Fields:

      step           k
      viewpoint      path[k]
      room           room type of path[k], or "doorway"
      room_id        room id (None in a doorway)
      door           door id when path[k] stands in a doorway, else None
      door_rooms     the two room types of that doorway, else None
      floor          floor level
      entered_room   room type when path[k] is in a room other than the last room visited
      left_room      room type of the last room visited when path[k] is no longer in it
      stairs         "up" / "down" when the move to path[k] changes floor, else None
      heading        heading of the move from path[k-1] to path[k] (k = 0: the start heading)
      turn_angle     degrees turned at path[k-1] before that move: from the previous move's
                     heading (k = 1: from the start heading; None without one), positive = right
      turn           "straight" (|angle| <= 50), "left", "right", "around" (> 135), or None
      distance       metres from path[k-1] to path[k] (0 at the start)
      objects        visible_objects(house, path[k], heading): objects in the same room(s)
                     within 3 m, nearest first, each {id, type, colour, distance, side}
      goal           True for the last viewpoint

    Headings and angles are floats; distances are rounded to cm.
    """
    ids, start_heading = _path_and_heading(path, heading)
    if not ids:
        raise ValueError("the path is empty")
    feats: list[dict] = []
    last_room: str | None = None
    prev_heading = start_heading
    for k, vid in enumerate(ids):
        v = house.viewpoint(vid)
        door_rooms = None
        if v.door is not None:
            door_rooms = tuple(house.room(r).type for r in house.door_by_id[v.door].rooms)
        f = {
            "step": k,
            "viewpoint": vid,
            "room": house.room(v.room).type if v.room else "doorway",
            "room_id": v.room,
            "door": v.door,
            "door_rooms": door_rooms,
            "floor": v.floor,
            "entered_room": None,
            "left_room": None,
            "stairs": None,
            "heading": start_heading if k == 0 else None,
            "turn_angle": None,
            "turn": None,
            "distance": 0.0,
            "goal": k == len(ids) - 1,
        }
        if k > 0:
            p = house.viewpoint(ids[k - 1])
            horizontal = math.dist(p.position[:2], v.position[:2])
            h = heading_between(p.position, v.position) if horizontal > 1e-6 else prev_heading
            if prev_heading is not None and h is not None:
                f["turn_angle"] = round(_wrap_degrees(math.degrees(h - prev_heading)), 2)
                f["turn"] = turn_word(f["turn_angle"])
            f["heading"] = h
            f["distance"] = round(math.dist(p.position, v.position), 2)
            if v.floor != p.floor:
                f["stairs"] = "up" if v.floor > p.floor else "down"
            prev_heading = h
        if last_room is not None and v.room != last_room:
            f["left_room"] = house.room(last_room).type
            if k > 0 and feats[-1]["left_room"] is not None and feats[-1]["room_id"] is None:
                f["left_room"] = None  # said once, when the doorway was reached
        if v.room is not None and v.room != last_room:
            f["entered_room"] = f["room"] if k > 0 else None
            last_room = v.room
        f["objects"] = visible_objects(house, vid, f["heading"])
        feats.append(f)
    return feats


# -- planning ---------------------------------------------------------------------------------


@dataclass
class _Event:
    kind: str  # orient, through, stairs, walk, turn, pass, stop
    data: dict = field(default_factory=dict)


def _landmark(house: House, feat: dict, used: set[str], radius: float = LANDMARK_RADIUS) -> dict | None:
    for o in feat["objects"]:
        if o["distance"] <= radius and o["id"] not in used:
            return o
    return None


def _plan(house: House, feats: list[dict]) -> list[_Event]:
    """The events of a path in order. Landmarks are picked here, so every instruction of a path
    draws on the same facts; the realiser decides what to say and how."""
    events: list[_Event] = []
    used: set[str] = set()
    n = len(feats)
    if n > 1 and feats[1]["turn"] in ("left", "right", "around"):
        events.append(_Event("orient", {"dir": feats[1]["turn"]}))
    # grouped turns: a small turn followed by another small one the same way is one turn
    turn_at: dict[int, str] = {}
    pending = 0.0
    for k in range(1, n - 1):
        a = feats[k + 1]["turn_angle"] or 0.0
        if feats[k + 1]["stairs"] or feats[k]["stairs"]:
            pending = 0.0
            continue
        total = a + pending if pending * a > 0 else a
        word = turn_word(total)
        if word in ("left", "right", "around") and abs(total) > GROUPED_TURN:
            turn_at[k] = word
            pending = 0.0
        else:
            pending = a if abs(a) > 15.0 else 0.0
    walked_rooms: set[int] = set()
    for k in range(1, n):
        f, prev = feats[k], feats[k - 1]
        if f["stairs"]:
            events.append(_Event("stairs", {"dir": f["stairs"], "room": f["room"]}))
        elif f["door"] is not None:
            before = prev["room"] if prev["room_id"] is not None else None
            if k + 1 < n and feats[k + 1]["room_id"] is not None:
                after = feats[k + 1]["room"]
            else:
                others = [t for t in f["door_rooms"] if t != before] or list(f["door_rooms"])
                after = others[0]
            events.append(_Event("through", {"a": before, "b": after, "goal": k == n - 1, "into": k + 1 < n}))
        elif prev["door"] is None and f["room_id"] is not None and f["room_id"] == prev["room_id"]:
            # a move inside a room: say "walk through it" once per stay
            stay = id_of_stay(feats, k)
            if stay not in walked_rooms:
                walked_rooms.add(stay)
                moves, dist, straight = 0, 0.0, True
                j = k
                while j < n and feats[j]["room_id"] == f["room_id"] and not feats[j]["stairs"]:
                    moves += 1
                    dist += feats[j]["distance"]
                    if j > k and j - 1 in turn_at:
                        straight = False
                    j += 1
                events.append(
                    _Event(
                        "walk",
                        {"room": f["room"], "moves": moves, "distance": dist, "straight": straight, "first": k == 1},
                    )
                )
        if k < n - 1:
            if k in turn_at:
                lm = _landmark(house, f, used) if f["room_id"] is not None else None
                if lm:
                    used.add(lm["id"])
                events.append(_Event("turn", {"dir": turn_at[k], "landmark": lm}))
            elif f["room_id"] is not None and not feats[k + 1]["stairs"]:
                lm = _landmark(house, f, used, radius=1.5)
                if lm and lm["side"] != "behind":
                    used.add(lm["id"])
                    events.append(_Event("pass", {"landmark": lm}))
        else:
            lm = None
            if f["room_id"] is not None:
                lm = _landmark(house, f, used, radius=2.0)
            just_entered = f["entered_room"] is not None and prev["door"] is not None
            climbed = next((g["stairs"] for g in reversed(feats) if g["stairs"]), None)
            if climbed and id_of_stay(feats, n - 1) != next(j for j in range(n - 1, 0, -1) if feats[j]["stairs"]):
                climbed = None  # the stairs were climbed earlier, not just before the goal
            events.append(
                _Event(
                    "stop",
                    {
                        "room": f["room"],
                        "landmark": lm,
                        "just_entered": just_entered,
                        "door_rooms": f["door_rooms"],
                        "came_from": prev["room"],
                        "climbed": climbed,
                        "floor": f["floor"],
                    },
                )
            )
            if just_entered:
                # the stop says "go into the R and stop": the entry before it need not
                for e in reversed(events[:-1]):
                    if e.kind == "through":
                        e.data["stop_enters"] = True
                    if e.kind != "turn":
                        break
    moving = any(e.kind in ("through", "stairs") for e in events)
    if not moving:
        # a path inside one room: only its landmarks say where to stop
        stop = events[-1]
        if stop.data["landmark"] is None and f["room_id"] is not None:
            stop.data["landmark"] = _landmark(house, f, used, radius=VISIBLE_RADIUS)
        stop.data["needs_landmark"] = stop.data["landmark"] is not None
        for e in events:
            if e.kind == "pass":
                e.data["needed"] = True
    # a walk between two turns keeps them apart; a path inside one room needs its walk
    for i, e in enumerate(events):
        if e.kind != "walk":
            continue
        before = events[i - 1].kind if i else None
        after = events[i + 1].kind if i + 1 < len(events) else None
        if not moving or (before in ("turn", "orient") and after == "turn"):
            e.data["needed"] = True
    return events


def id_of_stay(feats: list[dict], k: int) -> int:
    """The index at which the stay in feats[k]'s room began (one number per visit)."""
    j = k
    while j > 0 and feats[j - 1]["room_id"] == feats[k]["room_id"] and not feats[j]["stairs"]:
        j -= 1
    return j


# -- realising --------------------------------------------------------------------------------


class _Realiser:
    def __init__(self, house: House, r: random.Random, detail: int):
        self.house = house
        self.r = r
        self.detail = detail  # 0 terse, 1 normal, 2 detailed
        self.p_colour = (0.35, 0.6, 0.85)[detail]

    def pick(self, options: Sequence[str]) -> str:
        return options[self.r.randrange(len(options))]

    def room(self, room_type: str) -> str:
        return "the " + self.pick(ROOM_WORDS.get(room_type, (room_type,)))

    def obj(self, lm: dict, side: bool = False) -> str:
        words = OBJECT_WORDS.get(lm["type"], (lm["type"],))
        noun = self.pick(words)
        if self.r.random() < self.p_colour:
            noun = f"{lm['colour']} {noun}"
        phrase = f"the {noun}"
        if side and lm.get("side") in ("left", "right") and self.r.random() < 0.5:
            phrase += f" on your {lm['side']}"
        return phrase

    # each returns a list of verb phrases (imperative, lower case), or [] to say nothing
    def orient(self, e: _Event) -> list[str]:
        d = e.data["dir"]
        if d == "around":
            return [self.pick(("turn around", "turn around", "turn all the way around", "turn to face the other way"))]
        return [self.pick((f"turn {d}", f"turn to your {d}", f"turn {d}"))]

    def through(self, e: _Event) -> list[str]:
        a, b = e.data["a"], e.data["b"]
        if e.data["goal"] or e.data.get("stop_enters"):
            return []  # the stop says it
        if b == "stairs":
            return [
                self.pick(
                    (
                        "go to the stairs",
                        "walk over to the stairs",
                        "head towards the stairs",
                        "go through the door to the stairs",
                    )
                )
            ]
        B = self.room(b)
        opts = [
            f"go into {B}",
            f"walk into {B}",
            f"enter {B}",
            f"go through the door into {B}",
            f"go through the doorway into {B}",
        ]
        if b == "hallway":
            opts += [f"step out into {B}", f"go out into {B}"]
        if a and a not in ("stairs", "hallway") and a != b:
            A = self.room(a)
            opts += [
                f"leave {A} and go into {B}",
                f"exit {A} into {B}",
                f"walk out of {A} into {B}",
                f"exit {A} and enter {B}",
            ]
        elif a == "stairs":
            opts += [f"go from the stairs into {B}", f"leave the stairs and enter {B}"]
        return [self.pick(opts)]

    def stairs(self, e: _Event) -> list[str]:
        if e.data["dir"] == "up":
            return [
                self.pick(
                    (
                        "go up the stairs",
                        "climb the stairs",
                        "walk up the stairs",
                        "take the stairs up",
                        "head upstairs",
                        "go upstairs",
                    )
                )
            ]
        return [
            self.pick(
                (
                    "go down the stairs",
                    "walk down the stairs",
                    "take the stairs down",
                    "head downstairs",
                    "go downstairs",
                )
            )
        ]

    def walk(self, e: _Event) -> list[str]:
        room, moves = e.data["room"], e.data["moves"]
        needed = e.data.get("needed", False)
        if not needed and (moves < 2 or self.detail == 0 or (self.detail == 1 and self.r.random() < 0.5)):
            return []
        if room == "hallway":
            return [
                self.pick(
                    (
                        "walk down the hallway",
                        "go along the hall",
                        "continue down the corridor",
                        "follow the hallway",
                        "walk along the hallway",
                    )
                )
            ]
        if room == "stairs":
            return ["walk towards the stairs"] if needed else []
        if e.data["straight"]:
            metres = int(round(e.data["distance"]))
            opts = [
                "walk straight ahead",
                "go straight",
                "keep walking straight",
                f"walk straight for about {metres} metres",
            ]
            if e.data["first"]:
                opts.append(f"walk across {self.room(room)}")
            else:
                opts.append(f"cross {self.room(room)}")
            return [self.pick(opts)]
        return [
            self.pick((f"walk through {self.room(room)}", f"go across {self.room(room)}", f"cross {self.room(room)}"))
        ]

    def turn(self, e: _Event) -> list[str]:
        d, lm = e.data["dir"], e.data["landmark"]
        if e.data.get("again"):
            base = f"{d} again" if lm is None else f"{d} again at {self.obj(lm)}"
            return [self.pick((f"turn {base}", f"go {base}", f"turn {base}"))]
        if d == "around":
            base = ["turn around", "turn back"]
        else:
            base = [f"turn {d}", f"make a {d}", f"take a {d}", f"go {d}", f"turn {d}"]
        if lm and self.detail > 0 and self.r.random() < 0.8:
            o = self.obj(lm)
            return [self.pick([f"{b} at {o}" for b in base] + [f"{base[0]} when you reach {o}", f"{base[0]} by {o}"])]
        return [self.pick(base)]

    def pass_(self, e: _Event) -> list[str]:
        if not e.data.get("needed") and (self.detail == 0 or (self.detail == 1 and self.r.random() < 0.4)):
            return []
        o = self.obj(e.data["landmark"], side=True)
        return [self.pick((f"walk past {o}", f"go past {o}", f"pass {o}", f"continue past {o}", f"walk by {o}"))]

    def stop(self, e: _Event) -> list[str]:
        d = e.data
        if d["room"] == "doorway":
            rooms = [t for t in d["door_rooms"] if t != d["came_from"]] or list(d["door_rooms"])
            R = self.room(rooms[0])
            return [
                self.pick((f"stop in the doorway of {R}", f"wait in the doorway to {R}", f"stop at the door of {R}"))
            ]
        R = self.room(d["room"])
        lm = d["landmark"]
        opts: list[str] = []
        if d["room"] == "stairs":
            if d["climbed"]:
                end = "top" if d["climbed"] == "up" else "bottom"
                opts += [f"stop at the {end} of the stairs", f"wait at the {end} of the stairs"]
            else:
                opts += [
                    "wait by the stairs",
                    "stop next to the stairs",
                    "stop at the foot of the stairs" if d["floor"] == 0 else "stop next to the stairs",
                ]
            return [self.pick(opts)]
        o = self.obj(lm) if lm else None
        if d["just_entered"] and d["room"] == "hallway":
            opts += [
                f"step out into {R} and stop",
                f"stop just outside the door, in {R}",
                f"go into {R} and stop",
                f"stop as soon as you are in {R}",
            ]
            if o:
                opts += [f"step into {R} and stop next to {o}", f"go out into {R} and wait by {o}"]
            return [self.pick(opts)]
        if d["just_entered"]:
            opts += [
                f"stop just inside {R}",
                f"wait by the door of {R}",
                f"stop as soon as you enter {R}",
                f"go into {R} and stop",
                f"enter {R} and wait there",
            ]
            if o:
                opts += [
                    f"enter {R} and stop next to {o}",
                    f"go into {R} and wait by {o}",
                    f"walk into {R} and stop in front of {o}",
                ]
            return [self.pick(opts)]
        if o:
            opts += [
                f"stop next to {o}",
                f"wait by {o}",
                f"stop in front of {o}",
                f"stop when you reach {o}",
                f"wait near {o} in {R}",
                f"stop by {o} in {R}",
            ]
        if not opts or (self.r.random() < 0.25 and not d.get("needs_landmark")):
            opts += [f"stop in {R}", f"wait in {R}"]
        return [self.pick(opts)]

    def verb_phrases(self, events: list[_Event]) -> list[str]:
        out: list[str] = []
        last: _Event | None = None  # the last event that said something
        for e in events:
            # two turns the same way with nothing said between them: "turn right, then right again"
            e.data["again"] = (
                e.kind == "turn"
                and last is not None
                and last.kind == "turn"
                and last.data["dir"] == e.data["dir"] != "around"
            )
            fn = self.pass_ if e.kind == "pass" else getattr(self, e.kind)
            said = fn(e)
            if said:
                out.extend(said)
                last = e
        return out

    def sentences(self, vps: list[str]) -> str:
        r = self.r
        parts: list[str] = []
        last_opener = None
        i = 0
        while i < len(vps):
            left = len(vps) - i
            size = 1 if left == 1 else r.choices((1, 2, 3), weights=(0.35, 0.5, 0.15))[0]
            size = min(size, left)
            g = vps[i : i + size]
            i += size
            if size == 1:
                s = g[0]
            elif size == 2:
                a, b = g
                forms = [f"{a}, then {b}", f"{a}, and then {b}", f"{a}. Then {b}"]
                if " and " not in a:
                    forms += [f"{a} and {b}", f"{a} and {b}"]
                ger = _gerund(a)
                if ger and not b.startswith(("stop", "wait")):
                    forms.append(f"after {ger}, {b}")
                if b.startswith(("stop", "wait")):
                    forms.append(f"{a} and {b}")
                s = r.choice(forms)
            else:
                a, b, c = g
                forms = [f"{a}, {b}, then {c}"]
                if " and " not in b and " and " not in c:
                    forms += [f"{a}, {b} and {c}", f"{a}, then {b} and {c}"]
                s = r.choice(forms)
            if parts and r.random() < 0.3 and not s.startswith("after "):
                opener = r.choice(
                    [o for o in ("then ", "next, ", "now ", "from there, ", "after that, ") if o != last_opener]
                )
                s = opener + s
                last_opener = opener
            parts.append(_capitalise(s) + ".")
        text = " ".join(parts)
        return text.replace(". then ", ". Then ")


def _gerund(vp: str) -> str | None:
    head, _, rest = vp.partition(" ")
    g = _GERUND.get(head)
    if g is None or " and " in vp:
        return None
    return f"{g} {rest}".strip()


def _capitalise(s: str) -> str:
    out = s[:1].upper() + s[1:]
    # capitalise after a full stop inside a grouped form ("a. then b")
    return ". ".join(p[:1].upper() + p[1:] for p in out.split(". "))


def describe_path(
    house: House,
    path: Sequence[str] | SampledPath | dict,
    rng: random.Random | np.random.Generator | int,
    n: int = 3,
    heading: float | None = None,
) -> list[str]:
    """n reference instructions for a path (viewpoint ids, a SampledPath or an R2R-like dict;
    its start heading decides the opening turn). The instructions use different levels of
    detail, templates and connectives, and differ from each other whenever the path allows
    it. Deterministic for a given rng state."""
    r = as_random(rng)
    feats = path_features(house, path, heading)
    events = _plan(house, feats)
    details = [(k % 3) for k in range(n)]
    r.shuffle(details)
    out: list[str] = []
    for detail in details:
        text = ""
        for _attempt in range(12):
            real = _Realiser(house, r, detail)
            text = real.sentences(real.verb_phrases(events))
            if text and text not in out:
                break
            detail = min(2, detail + 1) if _attempt % 2 else detail
        if not text:
            text = "Stay where you are."
        out.append(text)
    return out


def describe_paths(
    house: House,
    paths: Sequence[SampledPath | dict | Sequence[str]],
    rng: random.Random | np.random.Generator | int,
    n: int = 3,
) -> list[list[str]]:
    """describe_path for each path, one rng for all (so the result depends on the order)."""
    r = as_random(rng)
    return [describe_path(house, p, r, n=n) for p in paths]


__all__ = [
    "OBJECT_WORDS",
    "ROOM_WORDS",
    "describe_path",
    "describe_paths",
    "path_features",
    "turn_word",
    "visible_objects",
]

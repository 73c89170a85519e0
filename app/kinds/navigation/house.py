"""Procedural houses: navigation graphs with room and object semantics, made from a seed.

Matterport3D imagery may not ship with the platform, so demos, tests and our own speaker and
listener models use houses generated here. A house is a few floors of axis-aligned
rectangular rooms of named types, with doors, coloured objects, and viewpoints on a lattice;
it writes the same connectivity file as a Matterport3D building (so `load_connectivity`, the
metrics and the scorer work on it unchanged) plus a semantics sidecar that says where the
rooms, walls, doors, objects and viewpoints are. See docs/kinds/navigation-houses.md.

    house = generate_house(7, floors=2)
    write_house(house, "demo/houses")             # house-7_connectivity.json, house-7_semantics.json
    paths = sample_paths(house, 10, rng=7)         # R2R-like shortest paths of 4-7 viewpoints
    records = to_r2r(house, paths, [describe_path(house, p, rng) for p in paths])  # see grammar.py

Layout (per floor, in metres, z up; the whole plan is then transposed and/or mirrored at
random so that spines run either way):

- a rectangular shell, 10-18 x 8.5-13 m, on a 0.5 m grid;
- a 2 m wide hallway spine across it; sometimes a large end room spanning the full depth at the
  spine's far end (the living room downstairs, a big bedroom upstairs);
- the two bands beside the spine are cut into columns 2.5-6 m wide; a deep column may be cut
  again into a room on the hallway and a room behind it;
- in a house of several floors a stairs room, 3 m wide, sits at the same place on every floor;
- room types are given by size (bathrooms and laundry rooms get the small rooms);
- doors (1 m, sometimes 1.5 m wide): every room on the hallway opens onto it, a room behind
  another opens into it, and some neighbours get an extra door (kitchen-dining, bedroom-bathroom,
  ...). So every room is reachable.

Viewpoints: in a room of w x d metres, round(w/2) x round(d/2) points near the centres of equal
cells (jittered by up to 0.1 m), so lattice neighbours are 1.5-2.5 m apart and at least 0.75 m
from the walls; one more
viewpoint stands in every doorway. Edges join lattice neighbours (axis and diagonal) inside a
room, a doorway viewpoint to the nearest lattice points on both sides, and, between floors, the
stairs rooms (a 3 m climb). No edge crosses a wall. Cameras are 1.5 m above the floor
(`height` 1.5, pose z = floor z + 1.5), as in the real data, and floors are 3 m apart.

Everything is drawn from `numpy.random.default_rng(seed)`, and viewpoint ids are hashes of the
seed, so one seed always gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.kinds.navigation.graph import NavGraph, load_connectivity

GENERATOR = "proctor.house/1"
GRID = 0.5  # metres: room corners lie on this grid
FLOOR_HEIGHT = 3.0  # metres between floors
CAMERA_HEIGHT = 1.5  # metres above the floor
HALL_WIDTH = 2.0
STAIRS_WIDTH = 3.0
MIN_ROOM = 2.5  # smallest room side
MAX_COLUMN = 6.0  # widest column before it is cut again
DOOR_MARGIN = 0.25  # least wall between a door and a corner
LATTICE_SPACING = 2.0  # target spacing; actual 1.5-2.5 m
LATTICE_JITTER = 0.1  # metres a lattice viewpoint may stray from its cell's centre
DOOR_LINKS = 3  # a doorway viewpoint joins up to this many lattice points on each side ...
DOOR_LINK_RADIUS = 2.6  # ... within this distance (always at least the nearest one)
OBJECT_VIEWPOINT_CLEARANCE = 0.2  # floor objects keep this far from viewpoints
DOOR_CLEARANCE = 1.0  # objects keep this far in front of a doorway
MAX_FLOORS = 3

ROOM_TYPES = (
    "hallway",
    "stairs",
    "living room",
    "kitchen",
    "dining room",
    "bedroom",
    "bathroom",
    "office",
    "laundry room",
)
COLOURS = ("red", "blue", "green", "yellow", "white", "black", "brown", "grey", "orange", "purple")


@dataclass(frozen=True)
class ObjectKind:
    """A catalogue entry: along-wall width range, depth, height range, placement, colours."""

    width: tuple[float, float]
    depth: float
    height: tuple[float, float]
    place: str = "wall"  # "wall": against a wall; "free": anywhere; "hung": on a wall, 1.5 m up
    colours: tuple[str, ...] = COLOURS


OBJECT_KINDS: dict[str, ObjectKind] = {
    "couch": ObjectKind((1.6, 2.2), 0.85, (0.8, 0.9)),
    "armchair": ObjectKind((0.8, 0.9), 0.8, (0.9, 1.0)),
    "table": ObjectKind(
        (1.0, 1.6),
        0.8,
        (0.72, 0.76),
        place="free",
        colours=("brown", "white", "black", "grey", "red", "blue", "green", "yellow"),
    ),
    "chair": ObjectKind((0.45, 0.5), 0.5, (0.85, 0.95)),
    "bed": ObjectKind((1.0, 1.4), 2.0, (0.55, 0.65)),
    "oven": ObjectKind((0.6, 0.6), 0.6, (0.85, 0.9), colours=("black", "white", "grey", "red")),
    "fridge": ObjectKind((0.7, 0.8), 0.7, (1.7, 1.9), colours=("white", "grey", "black", "red", "blue")),
    "sink": ObjectKind((0.5, 0.8), 0.5, (0.85, 0.9), colours=("white", "grey", "black")),
    "plant": ObjectKind((0.4, 0.6), 0.5, (0.6, 1.5), colours=("green", "yellow", "red", "purple", "orange")),
    "lamp": ObjectKind((0.35, 0.45), 0.4, (1.4, 1.7)),
    "painting": ObjectKind((0.6, 1.2), 0.05, (0.5, 0.9), place="hung"),
    "mirror": ObjectKind(
        (0.5, 0.8), 0.05, (0.7, 1.0), place="hung", colours=("white", "black", "brown", "grey", "yellow")
    ),
    "bookshelf": ObjectKind((0.8, 1.2), 0.35, (1.7, 2.0)),
    "toilet": ObjectKind((0.4, 0.45), 0.7, (0.75, 0.8), colours=("white", "grey", "black")),
    "bathtub": ObjectKind((1.6, 1.7), 0.75, (0.55, 0.6), colours=("white", "grey", "blue", "yellow")),
    "desk": ObjectKind((1.0, 1.4), 0.6, (0.74, 0.76)),
    "tv": ObjectKind((1.0, 1.4), 0.4, (1.1, 1.3), colours=("black", "grey", "white", "red")),
    "wardrobe": ObjectKind((1.0, 1.6), 0.6, (1.9, 2.1)),
    "dresser": ObjectKind((0.9, 1.2), 0.5, (0.85, 0.95)),
    "washing machine": ObjectKind((0.6, 0.6), 0.6, (0.85, 0.85), colours=("white", "grey", "black")),
    "dryer": ObjectKind((0.6, 0.6), 0.6, (0.85, 0.85), colours=("white", "grey", "black")),
    "cabinet": ObjectKind((0.8, 1.2), 0.45, (0.85, 1.0)),
    "bench": ObjectKind((1.0, 1.4), 0.4, (0.45, 0.5)),
    "piano": ObjectKind((1.4, 1.5), 0.6, (1.2, 1.3), colours=("black", "brown", "white", "red")),
}

# room type -> (objects every such room tries to get, optional ones, how many optional ones)
ROOM_OBJECTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[int, int]]] = {
    "kitchen": (("oven", "fridge", "sink"), ("table", "plant", "lamp", "cabinet", "chair"), (1, 2)),
    "living room": (("couch", "tv"), ("armchair", "lamp", "plant", "painting", "bookshelf", "table", "piano"), (2, 4)),
    "dining room": (("table",), ("painting", "plant", "lamp", "cabinet", "chair"), (1, 3)),
    "bedroom": (("bed",), ("lamp", "painting", "desk", "armchair", "plant", "wardrobe", "dresser"), (1, 3)),
    "bathroom": (("toilet", "sink"), ("bathtub", "mirror", "plant"), (1, 2)),
    "hallway": ((), ("painting", "plant", "lamp", "bench", "painting"), (1, 3)),
    "office": (("desk",), ("bookshelf", "lamp", "armchair", "plant", "painting", "chair"), (1, 3)),
    "laundry room": (("washing machine",), ("dryer", "sink", "cabinet", "plant"), (1, 2)),
    "stairs": ((), ("painting", "plant", "lamp"), (0, 1)),
}

# how big a room each type wants (larger rank gets a larger room)
_SIZE_RANK = {
    "living room": 6,
    "dining room": 5,
    "kitchen": 4,
    "bedroom": 3,
    "office": 2,
    "laundry room": 1,
    "bathroom": 0,
}
# floor role -> (types every floor of that role has, types it may add)
_FLOOR_TYPES = {
    "single": (
        ("living room", "kitchen", "bathroom", "bedroom"),
        ("bedroom", "bedroom", "dining room", "office", "bathroom", "laundry room"),
    ),
    "ground": (
        ("living room", "kitchen", "dining room", "bathroom"),
        ("office", "laundry room", "bedroom", "bathroom"),
    ),
    "upper": (("bedroom", "bathroom", "bedroom"), ("bedroom", "office", "bathroom", "laundry room", "bedroom")),
}
# neighbours that often share an extra door, and how often
_EXTRA_DOOR = {
    frozenset(("kitchen", "dining room")): 0.8,
    frozenset(("living room", "dining room")): 0.7,
    frozenset(("living room", "kitchen")): 0.5,
    frozenset(("bedroom", "bathroom")): 0.5,
    frozenset(("bedroom", "office")): 0.2,
    frozenset(("kitchen", "laundry room")): 0.4,
}


# -- the house ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Room:
    id: str
    type: str
    floor: int
    bounds: tuple[float, float, float, float]  # x0, y0, x1, y1

    @property
    def width(self) -> float:
        return self.bounds[2] - self.bounds[0]

    @property
    def depth(self) -> float:
        return self.bounds[3] - self.bounds[1]

    @property
    def area(self) -> float:
        return self.width * self.depth

    @property
    def centre(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.bounds
        return ((x0 + x1) / 2, (y0 + y1) / 2)

    def contains(self, x: float, y: float, margin: float = 0.0) -> bool:
        x0, y0, x1, y1 = self.bounds
        return x0 + margin <= x <= x1 - margin and y0 + margin <= y <= y1 - margin


@dataclass(frozen=True)
class Door:
    id: str
    rooms: tuple[str, str]
    floor: int
    position: tuple[float, float]  # the centre of the gap, on the wall line
    width: float
    axis: str  # "x": the wall runs along x (the door is crossed along y); "y": the other way


@dataclass(frozen=True)
class Wall:
    floor: int
    a: tuple[float, float]
    b: tuple[float, float]


@dataclass(frozen=True)
class HouseObject:
    id: str
    type: str
    colour: str
    room: str
    floor: int
    position: tuple[float, float, float]  # centre of its box, z up (floor objects: z = floor + h/2)
    size: tuple[float, float, float]  # extents along x, y, z

    @property
    def footprint(self) -> tuple[float, float, float, float]:
        x, y, _ = self.position
        sx, sy, _ = self.size
        return (x - sx / 2, y - sy / 2, x + sx / 2, y + sy / 2)


@dataclass(frozen=True)
class Viewpoint:
    id: str
    room: str | None  # None for a doorway viewpoint
    door: str | None  # the door a doorway viewpoint stands in
    floor: int
    position: tuple[float, float, float]  # the camera: floor z + 1.5


@dataclass
class House:
    """A generated house. Treat as read-only. `edges` are (viewpoint a, viewpoint b, kind) with
    kind "room" (lattice neighbours along an axis), "diagonal" (lattice diagonal), "door" (a
    doorway viewpoint and a lattice point) or "stairs" (between floors)."""

    scan: str
    seed: int
    floors: tuple[tuple[int, float], ...]  # (level, z of the floor)
    rooms: tuple[Room, ...]
    walls: tuple[Wall, ...]
    doors: tuple[Door, ...]
    objects: tuple[HouseObject, ...]
    viewpoints: tuple[Viewpoint, ...]
    edges: tuple[tuple[str, str, str], ...]
    _graph: NavGraph | None = field(default=None, repr=False, compare=False)
    _poses: tuple[float, ...] = field(default=(), repr=False, compare=False)  # camera yaw per viewpoint

    def __post_init__(self) -> None:
        self.room_by_id = {r.id: r for r in self.rooms}
        self.door_by_id = {d.id: d for d in self.doors}
        self.viewpoint_by_id = {v.id: v for v in self.viewpoints}
        self.objects_by_room: dict[str, list[HouseObject]] = {r.id: [] for r in self.rooms}
        for o in self.objects:
            self.objects_by_room[o.room].append(o)

    def __repr__(self) -> str:
        return (
            f"House(scan={self.scan!r}, floors={len(self.floors)}, rooms={len(self.rooms)}, "
            f"viewpoints={len(self.viewpoints)}, edges={len(self.edges)}, objects={len(self.objects)})"
        )

    # -- lookups

    def room(self, room_id: str) -> Room:
        return self.room_by_id[room_id]

    def viewpoint(self, viewpoint_id: str) -> Viewpoint:
        return self.viewpoint_by_id[viewpoint_id]

    def rooms_of(self, viewpoint_id: str) -> tuple[str, ...]:
        """The room a viewpoint stands in, or both rooms of the doorway it stands in."""
        v = self.viewpoint_by_id[viewpoint_id]
        if v.room is not None:
            return (v.room,)
        return self.door_by_id[v.door].rooms

    def graph(self) -> NavGraph:
        """The navigation graph, loaded from `connectivity()` (and kept)."""
        if self._graph is None:
            self._graph = load_connectivity(self.connectivity(), scan=self.scan)
        return self._graph

    # -- writers

    def connectivity(self) -> list[dict]:
        """The Matterport3D connectivity records: one per viewpoint, in viewpoint order."""
        ids = [v.id for v in self.viewpoints]
        n = len(ids)
        index = {v: i for i, v in enumerate(ids)}
        unobstructed = np.zeros((n, n), dtype=bool)
        for a, b, _ in self.edges:
            unobstructed[index[a], index[b]] = unobstructed[index[b], index[a]] = True
        visible = _line_of_sight(self) | unobstructed
        np.fill_diagonal(visible, False)
        out = []
        for i, v in enumerate(self.viewpoints):
            yaw = self._poses[i] if self._poses else 0.0
            c, s = _round(math.cos(yaw), 6), _round(math.sin(yaw), 6)
            x, y, z = v.position
            out.append(
                {
                    "image_id": v.id,
                    "pose": [c, -s, 0.0, x, s, c, 0.0, y, 0.0, 0.0, 1.0, z, 0.0, 0.0, 0.0, 1.0],
                    "included": True,
                    "visible": visible[i].tolist(),
                    "unobstructed": unobstructed[i].tolist(),
                    "height": CAMERA_HEIGHT,
                }
            )
        return out

    def semantics(self) -> dict:
        """The sidecar: floors, rooms, walls (with gaps at doors), doors, objects, viewpoints."""
        return {
            "scan": self.scan,
            "seed": self.seed,
            "generator": GENERATOR,
            "floors": [{"level": level, "z": z} for level, z in self.floors],
            "rooms": [{"id": r.id, "type": r.type, "floor": r.floor, "bounds": list(r.bounds)} for r in self.rooms],
            "walls": [{"floor": w.floor, "a": list(w.a), "b": list(w.b)} for w in self.walls],
            "doors": [
                {"id": d.id, "rooms": list(d.rooms), "floor": d.floor, "position": list(d.position), "width": d.width}
                for d in self.doors
            ],
            "objects": [
                {
                    "id": o.id,
                    "type": o.type,
                    "colour": o.colour,
                    "room": o.room,
                    "floor": o.floor,
                    "position": list(o.position),
                    "size": list(o.size),
                }
                for o in self.objects
            ],
            "viewpoints": {
                v.id: {"room": v.room, "door": v.door, "floor": v.floor, "position": list(v.position)}
                for v in self.viewpoints
            },
        }


def write_house(house: House, folder: str | Path) -> tuple[Path, Path]:
    """Write `<scan>_connectivity.json` and `<scan>_semantics.json` into folder (made if
    missing); returns both paths. The bytes depend only on the house (fixed order and format)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    conn = folder / f"{house.scan}_connectivity.json"
    sem = folder / f"{house.scan}_semantics.json"
    conn.write_bytes(_dump_connectivity(house.connectivity()))
    sem.write_bytes((json.dumps(house.semantics(), indent=1) + "\n").encode())
    return conn, sem


def _dump_connectivity(records: list[dict]) -> bytes:
    # one viewpoint per line, like the released files are easiest to read in a diff
    return ("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n").encode()


# -- generation -------------------------------------------------------------------------------


def generate_house(seed: int, floors: int = 1, *, scan: str | None = None) -> House:
    """A house from a seed (a non-negative int): the same seed and floors always give the same
    house. `floors` is 1-3; several floors are joined by stairs rooms. `scan` defaults to
    f"house-{seed}" (a multi-floor house: f"house-{seed}-{floors}f")."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if isinstance(floors, bool) or not isinstance(floors, (int, np.integer)) or not 1 <= floors <= MAX_FLOORS:
        raise ValueError(f"floors must be an integer from 1 to {MAX_FLOORS}, got {floors!r}")
    seed, floors = int(seed), int(floors)
    if scan is None:
        scan = f"house-{seed}" if floors == 1 else f"house-{seed}-{floors}f"
    rng = np.random.default_rng([seed, floors])
    return _Builder(rng, seed, floors, scan).build()


def _round(x: float, nd: int = 4) -> float:
    r = round(float(x), nd)
    return 0.0 if r == 0 else r  # no -0.0 in the files


def _grid_choice(rng: np.random.Generator, lo: float, hi: float, step: float = GRID) -> float:
    """A multiple of step in [lo, hi] (lo and hi on the grid)."""
    n = int(round((hi - lo) / step))
    return lo + step * int(rng.integers(0, n + 1))


def _viewpoint_id(seed: int, floors: int, k: int) -> str:
    return hashlib.blake2b(f"proctor-house:{seed}:{floors}:{k}".encode(), digest_size=16).hexdigest()


@dataclass
class _Rect:
    """A room during layout (canonical frame: the spine runs along x)."""

    bounds: tuple[float, float, float, float]
    role: str  # "hall", "stairs", "end", "near" (on the hall), "far" (behind a near room)
    attached: int | None = None  # far rooms: the index of the near room in front
    type: str = ""

    @property
    def area(self) -> float:
        x0, y0, x1, y1 = self.bounds
        return (x1 - x0) * (y1 - y0)


class _Builder:
    def __init__(self, rng: np.random.Generator, seed: int, floors: int, scan: str):
        self.rng = rng
        self.seed = seed
        self.n_floors = floors
        self.scan = scan

    # the shell, shared by every floor
    def _shell(self) -> None:
        rng = self.rng
        self.W = _grid_choice(rng, 10.0, 18.0)
        self.D = _grid_choice(rng, 8.5, 13.0)
        self.hy0 = _grid_choice(rng, 3.0, self.D - HALL_WIDTH - 3.0)
        self.hy1 = self.hy0 + HALL_WIDTH
        self.end_w = _grid_choice(rng, 3.5, 5.5) if self.W >= 12.0 and rng.random() < 0.5 else 0.0
        self.xe = self.W - self.end_w
        self.stairs = self.n_floors > 1
        # the frame: transpose (spine along y) and mirrors
        self.transpose = bool(rng.random() < 0.5)
        self.flip_x = bool(rng.random() < 0.5)
        self.flip_y = bool(rng.random() < 0.5)

    def _columns(self, x0: float, x1: float) -> list[tuple[float, float]]:
        """Cut [x0, x1] into columns MIN_ROOM..MAX_COLUMN wide (a short leftover joins one)."""
        w = x1 - x0
        if w <= MAX_COLUMN and (w < 2 * MIN_ROOM + 0.5 or self.rng.random() < 0.7):
            return [(x0, x1)]
        cut = _grid_choice(self.rng, x0 + MIN_ROOM, x1 - MIN_ROOM)
        return self._columns(x0, cut) + self._columns(cut, x1)

    def _band(self, x0: float, x1: float, y_hall: float, y_out: float) -> list[_Rect]:
        """Rooms of one band between the hallway edge y_hall and the outer wall y_out."""
        rects: list[_Rect] = []
        depth = abs(y_out - y_hall)
        sign = 1.0 if y_out > y_hall else -1.0
        if x1 - x0 < MIN_ROOM:
            return rects
        for cx0, cx1 in self._columns(x0, x1):
            if depth >= 2 * MIN_ROOM + 0.5 and self.rng.random() < 0.55:
                near = _grid_choice(self.rng, MIN_ROOM, depth - MIN_ROOM)
                y_cut = y_hall + sign * near
                rects.append(_Rect(_box(cx0, y_hall, cx1, y_cut), "near"))
                rects.append(_Rect(_box(cx0, y_cut, cx1, y_out), "far", attached=len(rects) - 1))
            else:
                rects.append(_Rect(_box(cx0, y_hall, cx1, y_out), "near"))
        return rects

    def _floor_plan(self, level: int) -> list[_Rect]:
        rects = [_Rect((0.0, self.hy0, self.xe, self.hy1), "hall", type="hallway")]
        bottom_x0 = 0.0
        if self.stairs:
            rects.append(_Rect((0.0, 0.0, STAIRS_WIDTH, self.hy0), "stairs", type="stairs"))
            bottom_x0 = STAIRS_WIDTH
        if self.end_w:
            rects.append(_Rect((self.xe, 0.0, self.W, self.D), "end"))
        for band in (self._band(bottom_x0, self.xe, self.hy0, 0.0), self._band(0.0, self.xe, self.hy1, self.D)):
            base = len(rects)
            for r in band:
                if r.attached is not None:
                    r.attached += base  # a band numbers its own rooms from 0
                rects.append(r)
        self._assign_types(rects, level)
        return rects

    def _assign_types(self, rects: list[_Rect], level: int) -> None:
        rng = self.rng
        role = "single" if self.n_floors == 1 else ("ground" if level == 0 else "upper")
        required, extra = _FLOOR_TYPES[role]
        open_rects = [r for r in rects if not r.type]
        end = next((r for r in open_rects if r.role == "end"), None)
        types = list(required)
        if end is not None:
            end.type = "bedroom" if role == "upper" else "living room"
            if end.type in types:
                types.remove(end.type)
            open_rects.remove(end)
        pool: list[str] = []
        while len(types) < len(open_rects):
            if not pool:  # draw the optional types without repeats until they run out
                pool = [extra[int(i)] for i in rng.permutation(len(extra))]
            types.append(pool.pop())
        if len(types) > len(open_rects):
            # a small floor: keep the most important types (the required ones come first)
            types = types[: len(open_rects)]
        # big types to big rooms, with some noise so that equal rooms vary
        order_t = sorted(range(len(types)), key=lambda i: (_SIZE_RANK[types[i]], rng.random()))
        order_r = sorted(range(len(open_rects)), key=lambda i: open_rects[i].area * (0.8 + 0.4 * rng.random()))
        for ti, ri in zip(order_t, order_r):
            open_rects[ri].type = types[ti]

    def _doors_for(self, rects: list[_Rect]) -> list[tuple[int, int, float, float, str, float]]:
        """(room a, room b, x, y, axis, width) of each door, in the canonical frame."""
        rng = self.rng
        doors: list[tuple[int, int, float, float, str, float]] = []
        linked: set[frozenset[int]] = set()

        def add(i: int, j: int, wide: bool = False) -> None:
            shared = _shared_wall(rects[i].bounds, rects[j].bounds)
            if shared is None or frozenset((i, j)) in linked:
                return
            axis, line, s0, s1 = shared
            width = 1.5 if wide and s1 - s0 >= 1.5 + 2 * DOOR_MARGIN + 0.5 else 1.0
            lo, hi = s0 + width / 2 + DOOR_MARGIN, s1 - width / 2 - DOOR_MARGIN
            if hi < lo:
                return
            c = lo + 0.25 * int(rng.integers(0, int(math.floor((hi - lo) / 0.25 + 1e-9)) + 1))
            pos = (c, line) if axis == "x" else (line, c)
            doors.append((i, j, pos[0], pos[1], axis, width))
            linked.add(frozenset((i, j)))

        hall = 0
        for i, r in enumerate(rects):
            if r.role in ("near", "stairs", "end"):
                add(hall, i, wide=r.type in ("living room", "dining room") and rng.random() < 0.5)
        for i, r in enumerate(rects):
            if r.role == "far":
                add(r.attached, i)
        for i in range(1, len(rects)):
            for j in range(i + 1, len(rects)):
                a, b = rects[i], rects[j]
                if "stairs" in (a.type, b.type) or frozenset((i, j)) in linked:
                    continue
                p = _EXTRA_DOOR.get(frozenset((a.type, b.type)), 0.0)
                if p and rng.random() < p:
                    add(i, j, wide=a.type != "bathroom" and b.type != "bathroom" and rng.random() < 0.5)
        return doors

    # world frame
    def _to_world(self, x: float, y: float) -> tuple[float, float]:
        if self.flip_x:
            x = self.W - x
        if self.flip_y:
            y = self.D - y
        if self.transpose:
            x, y = y, x
        return (x + 0.0, y + 0.0)

    def _box_world(self, b: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
        ax, ay = self._to_world(b[0], b[1])
        bx, by = self._to_world(b[2], b[3])
        return (min(ax, bx), min(ay, by), max(ax, bx), max(ay, by))

    def build(self) -> House:
        self._shell()
        rooms: list[Room] = []
        doors: list[Door] = []
        floors = tuple((level, level * FLOOR_HEIGHT) for level in range(self.n_floors))
        for level in range(self.n_floors):
            rects = self._floor_plan(level)
            base = len(rooms)
            for k, r in enumerate(rects):
                rooms.append(Room(f"room{base + k}", r.type, level, self._box_world(r.bounds)))
            for i, j, px, py, axis, width in self._doors_for(rects):
                wx, wy = self._to_world(px, py)
                if self.transpose:
                    axis = "y" if axis == "x" else "x"
                doors.append(
                    Door(f"door{len(doors)}", (rooms[base + i].id, rooms[base + j].id), level, (wx, wy), width, axis)
                )
        walls = _walls(rooms, doors)
        viewpoints, edges, lattice = self._viewpoints(rooms, doors, floors)
        objects = self._objects(rooms, doors, viewpoints, floors)
        yaws = tuple(float(self.rng.uniform(0.0, 2 * math.pi)) for _ in viewpoints)
        return House(
            scan=self.scan,
            seed=self.seed,
            floors=floors,
            rooms=tuple(rooms),
            walls=tuple(walls),
            doors=tuple(doors),
            objects=tuple(objects),
            viewpoints=tuple(viewpoints),
            edges=tuple(edges),
            _poses=yaws,
        )

    def _viewpoints(self, rooms: list[Room], doors: list[Door], floors) -> tuple[list[Viewpoint], list, dict]:
        z_of = dict(floors)
        vps: list[Viewpoint] = []
        edges: list[tuple[str, str, str]] = []
        lattice: dict[str, dict[tuple[int, int], Viewpoint]] = {}

        def new_id() -> str:
            return _viewpoint_id(self.seed, self.n_floors, len(vps))

        for room in rooms:
            x0, y0, x1, y1 = room.bounds
            nx = max(1, int(math.floor(room.width / LATTICE_SPACING + 0.5)))
            ny = max(1, int(math.floor(room.depth / LATTICE_SPACING + 0.5)))
            z = _round(z_of[room.floor] + CAMERA_HEIGHT)
            sx, sy = room.width / nx, room.depth / ny
            # a little jitter, so that the lattice is not ruled: never below 1.5 m apart
            # (nor nearer than 0.75 m to a wall), never above 2.5 m (spacing is at most 2.25)
            jx = min(LATTICE_JITTER, (sx - 1.5) / 2) if nx > 1 else LATTICE_JITTER
            jy = min(LATTICE_JITTER, (sy - 1.5) / 2) if ny > 1 else LATTICE_JITTER
            grid: dict[tuple[int, int], Viewpoint] = {}
            for j in range(ny):
                for i in range(nx):
                    x = _round(x0 + (i + 0.5) * sx + self.rng.uniform(-jx, jx))
                    y = _round(y0 + (j + 0.5) * sy + self.rng.uniform(-jy, jy))
                    v = Viewpoint(new_id(), room.id, None, room.floor, (x, y, z))
                    vps.append(v)
                    grid[(i, j)] = v
            for (i, j), v in grid.items():
                for di, dj, kind in ((1, 0, "room"), (0, 1, "room"), (1, 1, "diagonal"), (1, -1, "diagonal")):
                    w = grid.get((i + di, j + dj))
                    if w is not None:
                        edges.append((v.id, w.id, kind))
            lattice[room.id] = grid
        for door in doors:
            z = _round(z_of[door.floor] + CAMERA_HEIGHT)
            v = Viewpoint(new_id(), None, door.id, door.floor, (door.position[0], door.position[1], z))
            vps.append(v)
            for room_id in door.rooms:
                pts = sorted(
                    lattice[room_id].values(),
                    key=lambda w: (_dist2(w.position, v.position), w.position[0], w.position[1]),
                )
                for k, w in enumerate(pts[:DOOR_LINKS]):
                    if k == 0 or math.dist(w.position[:2], v.position[:2]) <= DOOR_LINK_RADIUS:
                        edges.append((v.id, w.id, "door"))
        # stairs: from the far end of each stairs room up to the next floor's stairs room
        stairs = [r for r in rooms if r.type == "stairs"]
        for low, high in zip(stairs, stairs[1:]):
            door = next(d for d in doors if low.id in d.rooms)
            pts = list(lattice[low.id].values())
            bottom = max(pts, key=lambda w: (_dist2(w.position, door.position), w.position[0], w.position[1]))
            ups = list(lattice[high.id].values())
            # the landing: the upper lattice point one step from the bottom, towards the door
            d_bottom = math.dist(bottom.position[:2], door.position)
            closer = [w for w in ups if math.dist(w.position[:2], door.position) < d_bottom - 1e-6]
            cands = closer or ups
            top = min(cands, key=lambda w: (_dist2(w.position, bottom.position), w.position[0], w.position[1]))
            edges.append((bottom.id, top.id, "stairs"))
        return vps, edges, lattice

    def _objects(self, rooms: list[Room], doors: list[Door], vps: list[Viewpoint], floors) -> list[HouseObject]:
        rng = self.rng
        z_of = dict(floors)
        objects: list[HouseObject] = []
        doors_of: dict[str, list[Door]] = {r.id: [] for r in rooms}
        for d in doors:
            for rid in d.rooms:
                doors_of[rid].append(d)
        vps_of: dict[str, list[tuple[float, float]]] = {r.id: [] for r in rooms}
        for v in vps:
            if v.room is not None:
                vps_of[v.room].append(v.position[:2])
        for room in rooms:
            required, optional, (lo, hi) = ROOM_OBJECTS[room.type]
            k = int(rng.integers(lo, hi + 1))
            extra = [optional[int(i)] for i in rng.permutation(len(optional))[:k]]
            placed: list[tuple[str, tuple[float, float, float, float]]] = []  # (layer, footprint)
            for kind_name in list(required) + extra:
                kind = OBJECT_KINDS[kind_name]
                obj = self._place(room, kind_name, kind, placed, doors_of[room.id], vps_of[room.id], z_of[room.floor])
                if obj is None:
                    continue
                colour = kind.colours[int(rng.integers(len(kind.colours)))]
                objects.append(HouseObject(f"obj{len(objects)}", kind_name, colour, room.id, room.floor, *obj))
        return objects

    def _place(
        self,
        room: Room,
        name: str,
        kind: ObjectKind,
        placed: list,
        doors: list[Door],
        viewpoints: list[tuple[float, float]],
        floor_z: float,
    ):
        rng = self.rng
        x0, y0, x1, y1 = room.bounds
        w = _round(rng.uniform(*kind.width), 2)
        h = _round(rng.uniform(*kind.height), 2)
        d = kind.depth
        layer = "hung" if kind.place == "hung" else "floor"
        for _ in range(40):
            if kind.place == "free":
                along_x = bool(rng.random() < 0.5)
                sx, sy = (w, d) if along_x else (d, w)
                lo_x, hi_x = x0 + sx / 2 + 0.5, x1 - sx / 2 - 0.5
                lo_y, hi_y = y0 + sy / 2 + 0.5, y1 - sy / 2 - 0.5
                if hi_x < lo_x or hi_y < lo_y:
                    continue
                cx, cy = rng.uniform(lo_x, hi_x), rng.uniform(lo_y, hi_y)
            else:
                side = int(rng.integers(4))  # 0 south (y0), 1 north (y1), 2 west (x0), 3 east (x1)
                gap = 0.02
                if side < 2:
                    sx, sy = w, d
                    if x1 - x0 < sx + 0.1:
                        continue
                    cx = rng.uniform(x0 + sx / 2 + 0.05, x1 - sx / 2 - 0.05)
                    cy = y0 + gap + sy / 2 if side == 0 else y1 - gap - sy / 2
                else:
                    sx, sy = d, w
                    if y1 - y0 < sy + 0.1:
                        continue
                    cy = rng.uniform(y0 + sy / 2 + 0.05, y1 - sy / 2 - 0.05)
                    cx = x0 + gap + sx / 2 if side == 2 else x1 - gap - sx / 2
            cx, cy = _round(cx, 2), _round(cy, 2)
            fp = (cx - sx / 2, cy - sy / 2, cx + sx / 2, cy + sy / 2)
            if not (x0 - 1e-9 <= fp[0] and fp[2] <= x1 + 1e-9 and y0 - 1e-9 <= fp[1] and fp[3] <= y1 + 1e-9):
                continue
            if any(lay == layer and _overlap(fp, other, 0.1) for lay, other in placed):
                continue
            if any(_overlap(fp, _door_zone(door), 0.0) for door in doors):
                continue
            if layer == "floor" and any(_point_near_box(p, fp, OBJECT_VIEWPOINT_CLEARANCE) for p in viewpoints):
                continue
            placed.append((layer, fp))
            z = floor_z + (CAMERA_HEIGHT if layer == "hung" else h / 2)
            return (cx, cy, _round(z, 3)), (_round(sx, 2), _round(sy, 2), h)
        return None


def _box(x0: float, y0: float, x1: float, y1: float) -> tuple[float, float, float, float]:
    return (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))


def _dist2(p: Sequence[float], q: Sequence[float]) -> float:
    return (p[0] - q[0]) ** 2 + (p[1] - q[1]) ** 2


def _overlap(a, b, margin: float) -> bool:
    return a[0] < b[2] + margin and b[0] < a[2] + margin and a[1] < b[3] + margin and b[1] < a[3] + margin


def _point_near_box(p, box, margin: float) -> bool:
    return box[0] - margin < p[0] < box[2] + margin and box[1] - margin < p[1] < box[3] + margin


def _door_zone(door: Door) -> tuple[float, float, float, float]:
    """The floor in front of a doorway (both sides) that objects keep clear."""
    x, y = door.position
    half = door.width / 2 + 0.1
    if door.axis == "x":
        return (x - half, y - DOOR_CLEARANCE, x + half, y + DOOR_CLEARANCE)
    return (x - DOOR_CLEARANCE, y - half, x + DOOR_CLEARANCE, y + half)


def _shared_wall(a, b) -> tuple[str, float, float, float] | None:
    """(axis, line, s0, s1) where rectangles a and b touch along a wall, else None. axis "x":
    the wall lies on y = line from x = s0 to s1; "y": on x = line from y = s0 to s1."""
    ax0, ay0, ax1, ay1 = a
    bx0, by0, bx1, by1 = b
    for line_a, line_b in ((ay1, by0), (ay0, by1)):
        if abs(line_a - line_b) < 1e-9:
            s0, s1 = max(ax0, bx0), min(ax1, bx1)
            if s1 - s0 > 1e-9:
                return ("x", line_a, s0, s1)
    for line_a, line_b in ((ax1, bx0), (ax0, bx1)):
        if abs(line_a - line_b) < 1e-9:
            s0, s1 = max(ay0, by0), min(ay1, by1)
            if s1 - s0 > 1e-9:
                return ("y", line_a, s0, s1)
    return None


def _walls(rooms: Sequence[Room], doors: Sequence[Door]) -> list[Wall]:
    """Every room side, merged per wall line and floor, minus the door gaps."""
    lines: dict[tuple[int, str, float], list[list[float]]] = {}
    for r in rooms:
        x0, y0, x1, y1 = r.bounds
        for axis, line, s0, s1 in (("x", y0, x0, x1), ("x", y1, x0, x1), ("y", x0, y0, y1), ("y", x1, y0, y1)):
            lines.setdefault((r.floor, axis, line), []).append([s0, s1])
    gaps: dict[tuple[int, str, float], list[tuple[float, float]]] = {}
    for d in doors:
        x, y = d.position
        line, c = (y, x) if d.axis == "x" else (x, y)
        gaps.setdefault((d.floor, d.axis, line), []).append((c - d.width / 2, c + d.width / 2))
    walls: list[Wall] = []
    for key in sorted(lines):
        floor, axis, line = key
        merged: list[list[float]] = []
        for s0, s1 in sorted(lines[key]):
            if merged and s0 <= merged[-1][1] + 1e-9:
                merged[-1][1] = max(merged[-1][1], s1)
            else:
                merged.append([s0, s1])
        for g0, g1 in sorted(gaps.get(key, [])):
            out = []
            for s0, s1 in merged:
                if g1 <= s0 or g0 >= s1:
                    out.append([s0, s1])
                    continue
                if g0 - s0 > 1e-9:
                    out.append([s0, g0])
                if s1 - g1 > 1e-9:
                    out.append([g1, s1])
            merged = out
        for s0, s1 in merged:
            a, b = ((s0, line), (s1, line)) if axis == "x" else ((line, s0), (line, s1))
            walls.append(Wall(floor, (_round(a[0]), _round(a[1])), (_round(b[0]), _round(b[1]))))
    return walls


def segments_cross(p: np.ndarray, q: np.ndarray, a: np.ndarray, b: np.ndarray, eps: float = 1e-9) -> np.ndarray:
    """Whether segments p-q and a-b intersect (touching and collinear overlap included).
    Broadcasts over leading dimensions; the last dimension holds x, y."""

    def cross(o, u, v):
        return (u[..., 0] - o[..., 0]) * (v[..., 1] - o[..., 1]) - (u[..., 1] - o[..., 1]) * (v[..., 0] - o[..., 0])

    d1 = cross(a, b, p)
    d2 = cross(a, b, q)
    d3 = cross(p, q, a)
    d4 = cross(p, q, b)
    proper = (((d1 > eps) & (d2 < -eps)) | ((d1 < -eps) & (d2 > eps))) & (
        ((d3 > eps) & (d4 < -eps)) | ((d3 < -eps) & (d4 > eps))
    )

    def on_segment(s0, s1, r, d):
        return (
            (np.abs(d) <= eps)
            & (np.minimum(s0[..., 0], s1[..., 0]) - eps <= r[..., 0])
            & (r[..., 0] <= np.maximum(s0[..., 0], s1[..., 0]) + eps)
            & (np.minimum(s0[..., 1], s1[..., 1]) - eps <= r[..., 1])
            & (r[..., 1] <= np.maximum(s0[..., 1], s1[..., 1]) + eps)
        )

    touching = on_segment(a, b, p, d1) | on_segment(a, b, q, d2) | on_segment(p, q, a, d3) | on_segment(p, q, b, d4)
    return proper | touching


def _line_of_sight(house: House) -> np.ndarray:
    """visible[i, j]: i and j are on one floor and the segment between them meets no wall."""
    n = len(house.viewpoints)
    pos = np.array([v.position[:2] for v in house.viewpoints], dtype=float).reshape(n, 2)
    floor = np.array([v.floor for v in house.viewpoints])
    out = np.zeros((n, n), dtype=bool)
    for level, _ in house.floors:
        idx = np.flatnonzero(floor == level)
        walls = [w for w in house.walls if w.floor == level]
        if idx.size < 2:
            continue
        ii, jj = np.triu_indices(idx.size, 1)
        p = pos[idx[ii]][:, None, :]
        q = pos[idx[jj]][:, None, :]
        a = np.array([w.a for w in walls], dtype=float)[None, :, :]
        b = np.array([w.b for w in walls], dtype=float)[None, :, :]
        blocked = segments_cross(p, q, a, b).any(axis=1)
        clear = ~blocked
        out[idx[ii][clear], idx[jj][clear]] = True
    return out | out.T


# -- paths ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampledPath:
    """A shortest path between two room viewpoints, with a random start heading (radians
    clockwise from +y) and its length in metres."""

    path: tuple[str, ...]
    heading: float
    distance: float

    def as_dict(self) -> dict:
        return {"path": list(self.path), "heading": self.heading, "distance": self.distance}


def as_random(rng: random.Random | np.random.Generator | int | None) -> random.Random:
    """A random.Random from a random.Random (itself), a numpy Generator (one draw) or an int."""
    if isinstance(rng, random.Random):
        return rng
    if isinstance(rng, np.random.Generator):
        return random.Random(int(rng.integers(0, 2**63 - 1)))
    if rng is None or isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return random.Random(0 if rng is None else int(rng))
    raise TypeError(f"rng must be a random.Random, a numpy Generator or an int, got {type(rng).__name__}")


def sample_paths(
    house: House,
    n: int,
    rng: random.Random | np.random.Generator | int,
    min_len: int = 4,
    max_len: int = 7,
    min_distance: float = 5.0,
    max_distance: float = math.inf,
) -> list[SampledPath]:
    """Up to n distinct R2R-like paths: the graph's shortest path between two room viewpoints
    (never a doorway), of min_len..max_len viewpoints and at least min_distance metres, with a
    uniform random start heading. Fewer than n come back when the house has fewer such pairs."""
    r = as_random(rng)
    graph = house.graph()
    rooms_vp = [v.id for v in house.viewpoints if v.room is not None]
    ends = np.array([graph.index[v] for v in rooms_vp], dtype=np.intp)
    dist = graph.distances
    pred = graph.predecessors
    out: list[SampledPath] = []
    seen: set[tuple[int, int]] = set()
    hop_cache: dict[int, np.ndarray] = {}

    def hops(s: int) -> np.ndarray:
        """Viewpoints on the shortest path from s to every node (0 when unreachable)."""
        if s not in hop_cache:
            count = np.zeros(len(graph), dtype=np.int64)
            count[s] = 1
            order = np.argsort(dist[s], kind="stable")
            for t in order:
                if t != s and np.isfinite(dist[s, t]):
                    count[t] = count[pred[s, t]] + 1
            hop_cache[s] = count
        return hop_cache[s]

    starts = list(ends)
    tries = 0
    while len(out) < n and tries < 20 * max(n, 1) + len(starts):
        tries += 1
        s = starts[r.randrange(len(starts))]
        h = hops(s)
        d = dist[s, ends]
        ok = (h[ends] >= min_len) & (h[ends] <= max_len) & (d >= min_distance - 1e-9) & (d <= max_distance)
        cands = [int(t) for t in ends[ok] if (int(s), int(t)) not in seen]
        if not cands:
            continue
        t = cands[r.randrange(len(cands))]
        seen.add((int(s), t))
        path = graph.shortest_path(graph.viewpoints[s], graph.viewpoints[t])
        out.append(SampledPath(tuple(path), round(r.uniform(0.0, 2 * math.pi), 6), float(dist[s, t])))
    return out


def to_r2r(
    house: House, paths: Iterable[SampledPath | dict], instructions: Iterable[Sequence[str]], first_path_id: int = 0
) -> list[dict]:
    """R2R records {distance, scan, path_id, path, heading, instructions} (formats.parse_r2r
    reads them; the scorer scores predictions against them). `instructions` is one list of
    strings per path; path ids count up from first_path_id."""
    out = []
    paths = list(paths)
    instructions = [list(x) for x in instructions]
    if len(paths) != len(instructions):
        raise ValueError(f"{len(paths)} paths but {len(instructions)} instruction lists")
    graph = house.graph()
    for k, (p, instr) in enumerate(zip(paths, instructions)):
        if isinstance(p, dict):
            p = SampledPath(tuple(p["path"]), float(p["heading"]), float(p.get("distance") or 0.0))
        idx = graph.indices(p.path, field="path")
        length = float(sum(graph.distances[a, b] for a, b in zip(idx[:-1], idx[1:])))
        out.append(
            {
                "distance": round(length, 2),
                "scan": house.scan,
                "path_id": first_path_id + k,
                "path": list(p.path),
                "heading": p.heading,
                "instructions": instr,
            }
        )
    return out


__all__ = [
    "COLOURS",
    "OBJECT_KINDS",
    "ROOM_OBJECTS",
    "ROOM_TYPES",
    "Door",
    "House",
    "HouseObject",
    "Room",
    "SampledPath",
    "Viewpoint",
    "Wall",
    "as_random",
    "generate_house",
    "sample_paths",
    "segments_cross",
    "to_r2r",
    "write_house",
]

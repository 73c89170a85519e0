"""What our speakers and listeners perceive of a building, as tensors.

Both read a building through its semantics sidecar (rooms, doors, objects, viewpoints: what
`House.semantics()` writes and the platform stores for generated houses) and its navigation
graph. Matterport3D scans have no sidecar, so these models run on generated houses only.

Layouts (the documented interface an uploaded TorchScript agent must accept; see
docs/agents.md). FEATURES_VERSION names them; an agent declares the version it was built for.

- node features (NODE_SIZE floats) of a viewpoint: one-hot room type (ROOM_TYPES + "doorway"),
  then for the objects within VISIBLE_RADIUS metres in the same room(s): object type, colour,
  and (type, colour) pair, each weighted by closeness (1 - distance / radius).
- step features (STEP_SIZE floats) of step k of a path, for speakers: the node features of
  path[k], then the turn taken before the move (none, straight, left, right, around), stairs
  (none, up, down), the move's length / 3 m, "entered a new room", and "this is the goal".
- action features (ACTION_SIZE floats) of moving from a viewpoint to a neighbour, for
  listeners: sin and cos of the move's heading relative to the follower's heading, up, down,
  the move's length / 3 m, then the neighbour's node features.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from app.kinds.navigation.graph import NavGraph, heading_between
from app.kinds.navigation.house import COLOURS, OBJECT_KINDS, ROOM_TYPES

FEATURES_VERSION = "proctor.nav.features/1"
VISIBLE_RADIUS = 3.0  # metres, as the reference-instruction grammar sees objects
PLACES = (*ROOM_TYPES, "doorway")
OBJECT_TYPES = tuple(sorted(OBJECT_KINDS))
TURNS = ("none", "straight", "left", "right", "around")
STAIRS = ("none", "up", "down")

_N_PLACES, _N_TYPES, _N_COLOURS = len(PLACES), len(OBJECT_TYPES), len(COLOURS)
NODE_SIZE = _N_PLACES + _N_TYPES + _N_COLOURS + _N_TYPES * _N_COLOURS
STEP_SIZE = NODE_SIZE + len(TURNS) + len(STAIRS) + 3
ACTION_SIZE = 5 + NODE_SIZE
_TYPE = {t: i for i, t in enumerate(OBJECT_TYPES)}
_COLOUR = {c: i for i, c in enumerate(COLOURS)}
_PLACE = {p: i for i, p in enumerate(PLACES)}


# -- words ------------------------------------------------------------------------------------

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
_WORD = re.compile(r"[a-z]+|[0-9]+|[.,;!?]")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def detokenize(words: Sequence[str]) -> str:
    """Words back to a sentence-cased instruction ("turn left . go" -> "Turn left. Go")."""
    out: list[str] = []
    capital = True
    for w in words:
        if w in ".,;!?":
            if out:
                out[-1] += w
            capital = w in ".!?"
            continue
        out.append(w.capitalize() if capital else w)
        capital = False
    return " ".join(out)


class Vocabulary:
    """Word <-> id; ids 0-3 are <pad>, <bos>, <eos>, <unk>."""

    def __init__(self, words: Sequence[str]):
        if tuple(words[:4]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}")
        self.words = list(words)
        self.index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, texts: Sequence[str], min_count: int = 1) -> "Vocabulary":
        counts: dict[str, int] = {}
        for t in texts:
            for w in tokenize(t):
                counts[w] = counts.get(w, 0) + 1
        kept = sorted(w for w, n in counts.items() if n >= min_count)
        return cls([*SPECIALS, *kept])

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, text: str, max_len: int) -> list[int]:
        """Word ids followed by <eos>, cut to max_len (the <eos> is kept)."""
        ids = [self.index.get(w, UNK) for w in tokenize(text)][: max_len - 1]
        return ids + [EOS]

    def decode(self, ids: Sequence[int]) -> str:
        words = []
        for i in ids:
            if i == EOS:
                break
            if i in (PAD, BOS):
                continue
            words.append(self.words[i] if 0 <= i < len(self.words) else "<unk>")
        return detokenize(words)


def pad_batch(rows: Sequence[Sequence[int]], width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows -> (ids [B, L] long padded with <pad>, mask [B, L] bool)."""
    width = width or max(1, max(len(r) for r in rows))
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    for b, r in enumerate(rows):
        r = list(r)[:width]
        ids[b, : len(r)] = torch.tensor(r, dtype=torch.long)
    return ids, ids != PAD


# -- buildings --------------------------------------------------------------------------------


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def _turn(angle_deg: float | None) -> str:
    if angle_deg is None:
        return "none"
    a = abs(angle_deg)
    if a <= 50:
        return "straight"
    if a > 135:
        return "around"
    return "right" if angle_deg > 0 else "left"


@dataclass
class World:
    """One building as arrays: what each viewpoint shows, who its neighbours are.

    nodes       [V, NODE_SIZE] float32 node features
    neighbours  [V, A] int64 neighbour indices, -1 for padding (A = the most neighbours)
    headings    [V, A] float32 heading of each move (radians clockwise from +y)
    climbs      [V, A] float32: +1 up a floor, -1 down, 0 level
    lengths     [V, A] float32 metres
    distances   [V, V] float32 shortest-path metres (the metrics' d)
    """

    scan: str
    graph: NavGraph
    nodes: np.ndarray
    neighbours: np.ndarray
    headings: np.ndarray
    climbs: np.ndarray
    lengths: np.ndarray
    places: list[str]  # room type (or "doorway") per viewpoint
    entered: np.ndarray  # [V] int: room index of the viewpoint (-1 in a doorway)

    @property
    def distances(self) -> np.ndarray:
        return self.graph.distances

    @classmethod
    def from_semantics(cls, graph: NavGraph, semantics: dict) -> "World":
        vps = semantics["viewpoints"]
        rooms = {r["id"]: r for r in semantics["rooms"]}
        doors = {d["id"]: d for d in semantics["doors"]}
        by_room: dict[str, list[dict]] = {}
        for o in semantics["objects"]:
            by_room.setdefault(o["room"], []).append(o)
        room_index = {rid: i for i, rid in enumerate(sorted(rooms))}
        n = len(graph)
        nodes = np.zeros((n, NODE_SIZE), dtype=np.float32)
        places: list[str] = []
        entered = np.full(n, -1, dtype=np.int64)
        for i, vid in enumerate(graph.viewpoints):
            v = vps.get(vid)
            if v is None:
                raise ValueError(f"viewpoint {vid} has no semantics")
            place = rooms[v["room"]]["type"] if v.get("room") else "doorway"
            places.append(place)
            nodes[i, _PLACE.get(place, _PLACE["doorway"])] = 1.0
            if v.get("room"):
                entered[i] = room_index[v["room"]]
            in_rooms = [v["room"]] if v.get("room") else list(doors[v["door"]]["rooms"])
            px, py = v["position"][0], v["position"][1]
            for rid in in_rooms:
                for o in by_room.get(rid, ()):
                    (ox, oy, _), (sx, sy, _) = o["position"], o["size"]
                    dx = max(ox - sx / 2 - px, 0.0, px - ox - sx / 2)
                    dy = max(oy - sy / 2 - py, 0.0, py - oy - sy / 2)
                    d = math.hypot(dx, dy)
                    if d > VISIBLE_RADIUS or o["type"] not in _TYPE or o["colour"] not in _COLOUR:
                        continue
                    w = 1.0 - d / VISIBLE_RADIUS
                    t, c = _TYPE[o["type"]], _COLOUR[o["colour"]]
                    base = _N_PLACES
                    nodes[i, base + t] = max(nodes[i, base + t], w)
                    nodes[i, base + _N_TYPES + c] = max(nodes[i, base + _N_TYPES + c], w)
                    k = base + _N_TYPES + _N_COLOURS + t * _N_COLOURS + c
                    nodes[i, k] = max(nodes[i, k], w)
        adj = graph.adjacency.tocsr()
        width = max(1, int(np.diff(adj.indptr).max(initial=0)))
        neighbours = np.full((n, width), -1, dtype=np.int64)
        headings = np.zeros((n, width), dtype=np.float32)
        climbs = np.zeros((n, width), dtype=np.float32)
        lengths = np.zeros((n, width), dtype=np.float32)
        pos = graph.positions
        for i in range(n):
            js = adj.indices[adj.indptr[i] : adj.indptr[i + 1]]
            for a, j in enumerate(sorted(js, key=lambda j: graph.viewpoints[j])):
                neighbours[i, a] = j
                headings[i, a] = heading_between(pos[i], pos[j])
                dz = pos[j][2] - pos[i][2]
                climbs[i, a] = 1.0 if dz > 1.0 else (-1.0 if dz < -1.0 else 0.0)
                lengths[i, a] = float(np.linalg.norm(pos[j] - pos[i]))
        return cls(graph.scan or "", graph, nodes, neighbours, headings, climbs, lengths, places, entered)

    @classmethod
    def from_house(cls, house) -> "World":
        return cls.from_semantics(house.graph(), house.semantics())

    def step_features(self, path: Sequence[str], heading: float) -> np.ndarray:
        """[len(path), STEP_SIZE] features of a path for a speaker (the layout above)."""
        g = self.graph
        idx = [g.index[v] for v in path]
        out = np.zeros((len(idx), STEP_SIZE), dtype=np.float32)
        prev_heading = heading
        last_room = -1
        for k, i in enumerate(idx):
            out[k, :NODE_SIZE] = self.nodes[i]
            turn, stairs, length, new_room = "none", "none", 0.0, 0.0
            if k > 0:
                p = idx[k - 1]
                horizontal = math.dist(g.positions[p][:2], g.positions[i][:2])
                h = heading_between(g.positions[p], g.positions[i]) if horizontal > 1e-6 else prev_heading
                turn = _turn(math.degrees(_wrap(h - prev_heading)))
                dz = g.positions[i][2] - g.positions[p][2]
                stairs = "up" if dz > 1.0 else ("down" if dz < -1.0 else "none")
                length = float(np.linalg.norm(g.positions[i] - g.positions[p]))
                prev_heading = h
            if self.entered[i] >= 0:
                new_room = 1.0 if (k > 0 and self.entered[i] != last_room) else 0.0
                last_room = int(self.entered[i])
            base = NODE_SIZE
            out[k, base + TURNS.index(turn)] = 1.0
            out[k, base + len(TURNS) + STAIRS.index(stairs)] = 1.0
            tail = base + len(TURNS) + len(STAIRS)
            out[k, tail] = length / 3.0
            out[k, tail + 1] = new_room
            out[k, tail + 2] = 1.0 if k == len(idx) - 1 else 0.0
        return out


class Agent(torch.nn.Module):
    """What every speaker and listener declares (the upload interface, docs/agents.md): the
    feature layout it reads and its words. Kept as attributes, not module constants: TorchScript
    reads no globals."""

    def __init__(self, words: Sequence[str]):
        super().__init__()
        self.words: list[str] = list(words)
        self.features = FEATURES_VERSION

    @torch.jit.export
    def feature_version(self) -> str:
        return self.features

    @torch.jit.export
    def vocabulary(self) -> list[str]:
        return self.words


def stack_steps(rows: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Paths' step features -> (features [B, T, STEP_SIZE], mask [B, T] bool)."""
    width = max(len(r) for r in rows)
    feats = torch.zeros((len(rows), width, STEP_SIZE), dtype=torch.float32)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for b, r in enumerate(rows):
        feats[b, : len(r)] = torch.from_numpy(r)
        mask[b, : len(r)] = True
    return feats, mask

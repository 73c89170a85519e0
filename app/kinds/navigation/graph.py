"""Matterport3D navigation graphs (the R2R "connectivity" files) and their shortest paths.

A connectivity file is a JSON array with one object per viewpoint:

    {"image_id": str, "pose": [16 floats], "included": bool,
     "unobstructed": [bool x n], "visible": [bool x n], "height": float}

`pose` is a 4x4 row-major matrix in metres, z up; the viewpoint's position is
(pose[3], pose[7], pose[11]). Only `included` viewpoints are in the graph: the simulator leaves
the others out (they overlap a neighbour), so a path through one is refused like an unknown
viewpoint, with its own message.

Edges: i-j is an edge when both are included and `unobstructed[j]` of i OR `unobstructed[i]`
of j is true. The released graphs are symmetric on included viewpoints (all 90 buildings,
42,936 directed entries, none without its reverse), so OR and AND give the same graph there;
OR keeps a hand-made or truncated file navigable both ways, as the simulator's undirected
distance tables assume. `visible` and `height` are not used for navigation. The weight of an
edge is the 3-D Euclidean distance between the two positions (a coincident pair, which the
released files do not have, would weigh 1e-9 m rather than vanish from the sparse matrix).

All-pairs shortest-path distances and predecessors are computed once per building, when the
graph is built (Dijkstra from every viewpoint, scipy.sparse.csgraph), so scoring never
searches the graph again. Viewpoints in different connected components are at distance inf.

Headings follow the Matterport3D simulator: heading is the angle from the +y axis, clockwise
seen from above (turning right is positive), in [0, 2*pi); elevation is the angle above the
horizontal plane, in [-pi/2, pi/2].
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from app.errors import InputError
from app.kinds.navigation.formats import is_number, read_json, records_by_id

CONNECTIVITY_SUFFIX = "_connectivity.json"
_MIN_EDGE = 1e-9  # metres; keeps an edge between coincident positions in the sparse matrix
_TWO_PI = 2.0 * math.pi
_NUMBER_TYPES = {int, float}
_BOOL_TYPE = {bool}


def heading_between(p: Sequence[float], q: Sequence[float]) -> float:
    """Heading from position p to position q: radians clockwise from +y, in [0, 2*pi)."""
    h = math.atan2(q[0] - p[0], q[1] - p[1]) % _TWO_PI
    return 0.0 if h == _TWO_PI else h  # -0.0 % 2pi can round up to 2pi


def elevation_between(p: Sequence[float], q: Sequence[float]) -> float:
    """Elevation from position p to position q: radians above the horizontal plane."""
    return math.atan2(q[2] - p[2], math.hypot(q[0] - p[0], q[1] - p[1])) + 0.0  # no -0.0


class NavGraph:
    """One building's navigation graph over its included viewpoints.

    Attributes (treat as read-only; the arrays are flagged so):
      scan           building id, or None
      viewpoints     tuple of viewpoint ids; a viewpoint's index is its position here
      index          viewpoint id -> index
      positions      (n, 3) float array, metres, z up
      heights        (n,) float array (height above the floor), NaN where unknown
      adjacency      (n, n) scipy CSR matrix of edge weights (symmetric)
      distances      (n, n) all-pairs shortest-path distances; inf across components
      predecessors   (n, n) int32: predecessors[s, t] is t's predecessor on a shortest s->t path
      components     (n,) connected-component label of each viewpoint
      excluded       viewpoint ids present in the file but not included in the simulator
    """

    def __init__(
        self,
        viewpoints: Sequence[str],
        positions: np.ndarray | Sequence[Sequence[float]],
        edges: Iterable[tuple[int, int]],
        *,
        scan: str | None = None,
        heights: Sequence[float] | None = None,
        excluded: Iterable[str] = (),
    ):
        self.scan = scan
        self.viewpoints = tuple(viewpoints)
        n = len(self.viewpoints)
        self.index = {v: i for i, v in enumerate(self.viewpoints)}
        if len(self.index) != n:
            raise InputError(f"{self._label()}duplicate viewpoint ids", field="image_id")
        pos = np.asarray(positions, dtype=np.float64).reshape(n, 3)
        self.positions = _frozen(pos.copy())
        self.heights = _frozen(
            np.full(n, np.nan) if heights is None else np.asarray(heights, dtype=np.float64).reshape(n)
        )
        self.excluded = frozenset(excluded)

        pairs = np.array([(i, j) for i, j in edges if i != j], dtype=np.int64).reshape(-1, 2)
        if pairs.size:
            pairs = np.unique(np.sort(pairs, axis=1), axis=0)  # undirected, once each
        w = np.linalg.norm(pos[pairs[:, 0]] - pos[pairs[:, 1]], axis=1) if pairs.size else np.zeros(0)
        w = np.maximum(w, _MIN_EDGE)
        rows = np.concatenate([pairs[:, 0], pairs[:, 1]])
        cols = np.concatenate([pairs[:, 1], pairs[:, 0]])
        # scipy.sparse here, not at the top: every `proctor` command imports this module.
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components
        from scipy.sparse.csgraph import shortest_path as _all_pairs

        self.adjacency = csr_matrix((np.concatenate([w, w]), (rows, cols)), shape=(n, n))
        self.n_edges = len(pairs)

        # The one graph search of the building's lifetime.
        dist, pred = _all_pairs(self.adjacency, method="D", directed=False, return_predecessors=True)
        self.distances = _frozen(dist)
        self.predecessors = _frozen(pred.astype(np.int32, copy=False))
        self.n_components, labels = connected_components(self.adjacency, directed=False)
        self.components = _frozen(labels)

    # -- lookups ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.viewpoints)

    def __contains__(self, viewpoint: object) -> bool:
        return isinstance(viewpoint, str) and viewpoint in self.index

    def __repr__(self) -> str:
        return f"NavGraph(scan={self.scan!r}, viewpoints={len(self)}, edges={self.n_edges})"

    def idx(self, viewpoint: str, field: str = "viewpoint") -> int:
        """The index of a viewpoint; InputError (with `field`) when the graph lacks it."""
        try:
            return self.index[viewpoint]
        except (KeyError, TypeError):
            raise InputError(self._missing(viewpoint), field=field) from None

    def indices(self, path: Sequence[str], field: str = "viewpoint") -> np.ndarray:
        """Indices of a path's viewpoints; InputError (with `field`) naming the first unknown one."""
        index = self.index
        try:
            return np.array([index[v] for v in path], dtype=np.intp)
        except (KeyError, TypeError):
            bad = next(v for v in path if not isinstance(v, str) or v not in index)
            raise InputError(self._missing(bad), field=field) from None

    def distance(self, a: str, b: str) -> float:
        """Shortest-path distance in metres (inf when a and b are not connected)."""
        return float(self.distances[self.idx(a), self.idx(b)])

    def shortest_path(self, a: str, b: str) -> list[str]:
        """Viewpoints of one shortest path from a to b, both included."""
        i, j = self.idx(a), self.idx(b)
        if i == j:
            return [a]
        pred = self.predecessors[i]
        if pred[j] < 0:
            raise InputError(f"{self._label()}no path from {a!r} to {b!r}", field="viewpoint")
        out = [j]
        while out[-1] != i:
            out.append(int(pred[out[-1]]))
        return [self.viewpoints[k] for k in reversed(out)]

    def neighbours(self, viewpoint: str) -> list[str]:
        """Viewpoints one edge away, in file order."""
        i = self.idx(viewpoint)
        row = self.adjacency.indices[self.adjacency.indptr[i] : self.adjacency.indptr[i + 1]]
        return [self.viewpoints[k] for k in sorted(row.tolist())]

    def is_edge(self, a: str, b: str) -> bool:
        return self.adjacency[self.idx(a), self.idx(b)] > 0

    def connected(self, a: str, b: str) -> bool:
        return self.components[self.idx(a)] == self.components[self.idx(b)]

    def position(self, viewpoint: str) -> np.ndarray:
        return self.positions[self.idx(viewpoint)]

    def heading(self, a: str, b: str) -> float:
        """Heading from viewpoint a towards viewpoint b (simulator convention, see module doc)."""
        return heading_between(self.position(a), self.position(b))

    def elevation(self, a: str, b: str) -> float:
        """Elevation from viewpoint a towards viewpoint b (camera positions, not floor points)."""
        return elevation_between(self.position(a), self.position(b))

    def check_walk(self, path: Sequence[str], field: str = "trajectory") -> None:
        """InputError unless every step of `path` stays put or crosses one edge: a path that
        someone actually walked in the simulator, not a list of teleports."""
        idx = self.indices(path, field=field)
        for k in range(1, len(idx)):
            a, b = idx[k - 1], idx[k]
            if a != b and self.adjacency[a, b] <= 0:
                raise InputError(
                    f"{self._label()}step {k} goes from {path[k - 1]!r} to {path[k]!r}, which are not neighbours",
                    field=field,
                )

    # -- messages --------------------------------------------------------------------------

    def _label(self) -> str:
        return f"scan {self.scan}: " if self.scan else ""

    def _missing(self, viewpoint: object) -> str:
        if not isinstance(viewpoint, str):
            return f"viewpoint must be a string id, got {viewpoint!r}"
        if viewpoint in self.excluded:
            return f"viewpoint {viewpoint!r} is excluded from the simulator in scan {self.scan or '?'}"
        return f"viewpoint {viewpoint!r} is not in scan {self.scan or '?'}"


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# -- loading ----------------------------------------------------------------------------------


def scan_from_filename(path: str | Path) -> str | None:
    name = Path(path).name
    return name[: -len(CONNECTIVITY_SUFFIX)] if name.endswith(CONNECTIVITY_SUFFIX) else None


def load_connectivity(source: str | Path | bytes | list, scan: str | None = None) -> NavGraph:
    """A NavGraph from a connectivity file (path), its bytes, or its parsed JSON array.

    The scan defaults to the file name's `<scan>_connectivity.json` prefix. Malformed files
    raise InputError naming the viewpoint record and the field.
    """
    if scan is None and isinstance(source, (str, Path)):
        scan = scan_from_filename(source)
    data = read_json(source, "connectivity")
    where = f"scan {scan}: " if scan else ""
    if not isinstance(data, list):
        raise InputError(f"{where}a connectivity file is a JSON array of viewpoints", field="connectivity")
    if not data:
        raise InputError(f"{where}the connectivity file has no viewpoints", field="connectivity")
    n = len(data)
    ids: list[str] = []
    positions = np.empty((n, 3))
    heights = np.full(n, np.nan)
    included = np.zeros(n, dtype=bool)
    unobstructed = np.zeros((n, n), dtype=bool)
    for i, rec, vid, label in records_by_id(data, lambda i: f"{where}viewpoint record {i}", "connectivity", "image_id"):
        ids.append(vid)
        pose = rec.get("pose")
        if (
            not isinstance(pose, list)
            or len(pose) != 16
            or not set(map(type, pose)) <= _NUMBER_TYPES
            or not all(map(math.isfinite, pose))
        ):
            raise InputError(f"{label}: pose must be 16 finite numbers (a row-major 4x4 matrix)", field="pose")
        positions[i] = (pose[3], pose[7], pose[11])
        inc = rec.get("included")
        if not isinstance(inc, bool):
            raise InputError(f"{label}: included must be true or false", field="included")
        included[i] = inc
        row = rec.get("unobstructed")
        if not isinstance(row, list) or len(row) != n:
            raise InputError(
                f"{label}: unobstructed must be a list of {n} booleans (one per viewpoint)", field="unobstructed"
            )
        if set(map(type, row)) - _BOOL_TYPE:
            raise InputError(f"{label}: unobstructed must hold only true/false", field="unobstructed")
        unobstructed[i] = row
        vis = rec.get("visible")
        if vis is not None and (not isinstance(vis, list) or len(vis) != n):
            raise InputError(f"{label}: visible must be a list of {n} booleans", field="visible")
        h = rec.get("height")
        if h is not None:
            if not is_number(h):
                raise InputError(f"{label}: height must be a number", field="height")
            heights[i] = h
    keep = np.flatnonzero(included)
    if keep.size == 0:
        raise InputError(f"{where}no viewpoint is included", field="included")
    sub = unobstructed[np.ix_(keep, keep)]
    sub = sub | sub.T  # see the module doc: either direction makes the edge
    np.fill_diagonal(sub, False)
    ii, jj = np.nonzero(np.triu(sub))
    return NavGraph(
        [ids[k] for k in keep],
        positions[keep],
        zip(ii.tolist(), jj.tolist()),
        scan=scan,
        heights=heights[keep],
        excluded=[ids[k] for k in np.flatnonzero(~included)],
    )


class ScanGraphs(Mapping):
    """scan -> NavGraph for a folder of `<scan>_connectivity.json` files, each loaded (and its
    shortest paths computed) on first use and kept."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise InputError(f"connectivity folder {str(directory)!r} does not exist", field="connectivity")
        self._files = {scan_from_filename(p): p for p in sorted(self.directory.glob(f"*{CONNECTIVITY_SUFFIX}"))}
        if not self._files:
            raise InputError(f"no *{CONNECTIVITY_SUFFIX} files in {str(directory)!r}", field="connectivity")
        self._graphs: dict[str, NavGraph] = {}

    def __getitem__(self, scan: str) -> NavGraph:
        graph = self._graphs.get(scan)
        if graph is None:
            if scan not in self._files:
                raise KeyError(f"scan {scan!r} has no connectivity file in {str(self.directory)!r}")
            graph = self._graphs[scan] = load_connectivity(self._files[scan], scan=scan)
        return graph

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, scan: object) -> bool:
        return scan in self._files

    def loaded(self) -> list[str]:
        """Scans whose graphs have been built so far."""
        return list(self._graphs)


def load_scans(directory: str | Path) -> ScanGraphs:
    """All `<scan>_connectivity.json` graphs of a folder, loaded lazily per scan."""
    return ScanGraphs(directory)

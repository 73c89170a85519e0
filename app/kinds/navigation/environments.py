"""Buildings in the platform: import a connectivity graph (a Matterport3D building or a
generated house with its semantics sidecar), and load a building's graph by scan.

Files live in the blob store under `environments/<scan>/` (`connectivity.json`, and
`semantics.json` for generated houses; panoramas under `panoramas/<scan>/`, see `panoramas`);
one `Environment` row per scan says where. A graph is
built (all-pairs shortest paths included) once per process and store, on first use.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import InputError
from app.kinds.navigation.graph import NavGraph, load_connectivity, scan_from_filename
from app.kinds.navigation.models import ENVIRONMENT_SOURCES, Environment
from app.storage import get_store

_SCAN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_graphs: dict[tuple[str, str], NavGraph] = {}
_semantics: dict[tuple[str, str], dict | None] = {}
_lock = threading.Lock()


def connectivity_key(scan: str) -> str:
    return f"environments/{scan}/connectivity.json"


def semantics_key(scan: str) -> str:
    return f"environments/{scan}/semantics.json"


def _check_scan(scan: str | None) -> str:
    if not isinstance(scan, str) or not _SCAN.match(scan):
        raise InputError(f"scan {scan!r} must be 1-64 letters, digits, '.', '_' or '-'", field="scan")
    return scan


def _store_id() -> str:
    return repr(get_store())


def _forget(scan: str) -> None:
    with _lock:
        for cache in (_graphs, _semantics):
            for key in [k for k in cache if k[1] == scan]:
                del cache[key]


def import_connectivity(session: Session, path_or_bytes: str | Path | bytes, scan: str | None = None,
                        source: str = "matterport", semantics: dict | None = None) -> Environment:
    """Store a building's connectivity file (validated first) and its row; replaces an
    earlier import of the same scan. The scan defaults to the file name's prefix."""
    if scan is None and isinstance(path_or_bytes, (str, Path)):
        scan = scan_from_filename(path_or_bytes)
    _check_scan(scan)
    if source not in ENVIRONMENT_SOURCES:
        raise InputError(f"source must be one of {', '.join(ENVIRONMENT_SOURCES)}", field="source")
    data = Path(path_or_bytes).read_bytes() if isinstance(path_or_bytes, (str, Path)) else path_or_bytes
    graph = load_connectivity(data, scan=scan)  # InputError naming the record and field
    store = get_store()
    store.put(connectivity_key(scan), data, "application/json")
    sem_key = None
    if semantics is not None:
        sem_key = semantics_key(scan)
        store.put(sem_key, json.dumps(semantics).encode(), "application/json")
    env = session.scalar(select(Environment).where(Environment.scan == scan))
    if env is None:
        env = Environment(scan=scan, source=source, connectivity_key=connectivity_key(scan))
        session.add(env)
    env.source, env.connectivity_key = source, connectivity_key(scan)
    env.semantics_key, env.n_viewpoints = sem_key, len(graph)
    session.commit()
    _forget(scan)
    with _lock:
        _graphs[(_store_id(), scan)] = graph
    return env


def import_house(session: Session, house) -> Environment:
    """A generated house (app.kinds.navigation.house.House): its connectivity and semantics."""
    from app.kinds.navigation.house import _dump_connectivity

    return import_connectivity(session, _dump_connectivity(house.connectivity()), scan=house.scan,
                               source="generated", semantics=house.semantics())


def get_graph(scan: str) -> NavGraph:
    """The building's graph (cached); InputError (field scan) when it was never imported."""
    _check_scan(scan)
    key = (_store_id(), scan)
    graph = _graphs.get(key)
    if graph is not None:
        return graph
    store = get_store()
    if not store.exists(connectivity_key(scan)):
        raise InputError(f"no building {scan!r} has been imported (proctor nav import-graphs)", field="scan")
    graph = load_connectivity(store.get(connectivity_key(scan)), scan=scan)
    with _lock:
        return _graphs.setdefault(key, graph)


def get_semantics(scan: str) -> dict | None:
    """The house's semantics sidecar, or None for a building without one."""
    _check_scan(scan)
    key = (_store_id(), scan)
    if key not in _semantics:
        store = get_store()
        sem = json.loads(store.get(semantics_key(scan))) if store.exists(semantics_key(scan)) else None
        with _lock:
            _semantics[key] = sem
    return _semantics[key]


def view(scan: str, panoramas: dict[str, str] | None = None) -> dict:
    """What a follower's page needs to walk the building: the semantics (rooms, walls, objects,
    viewpoints; None for a building without), each viewpoint's navigable neighbours with
    heading, elevation and distance, and, where `panoramas` (viewpoint -> URL) has one, the
    link to its panorama. It holds no goal and no path."""
    graph = get_graph(scan)
    adj = graph.adjacency
    panoramas = panoramas or {}
    viewpoints = {}
    for v in graph.viewpoints:
        viewpoints[v] = {"neighbours": [
            {"id": n, "heading": graph.heading(v, n), "elevation": graph.elevation(v, n),
             "distance": float(adj[graph.index[v], graph.index[n]])}
            for n in graph.neighbours(v)]}
        if v in panoramas:
            viewpoints[v]["panorama"] = panoramas[v]
    return {"scan": scan, "semantics": get_semantics(scan), "viewpoints": viewpoints}


def check_path(scan: str, path, label: str) -> None:
    """The building must be imported and the path a walk on its graph."""
    try:
        graph = get_graph(scan)
    except InputError as e:
        raise InputError(f"{label}: {e.message}", field="scan") from None
    try:
        graph.check_walk(path, field="path")
    except InputError as e:
        raise InputError(f"{label}: {e.message}", field="path") from None

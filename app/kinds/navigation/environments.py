"""Buildings in the platform: import a connectivity graph (a Matterport3D building or a
generated house with its semantics sidecar), and load a building's graph by scan.

Files live in the blob store under `environments/<scan>/` (`connectivity.json`, and
`semantics.json` for generated houses; panoramas under `panoramas/<scan>/`, see `panoramas`);
one `Environment` row per scan says where. A graph is
built (all-pairs shortest paths included) once per process and store, on first use.

Owners: a building belongs to the account that imported it (`Environment.owner_id`). Only that
account or an admin may replace it or its panoramas; anyone else is refused (`NotYours`, 403 on
the API) before anything is written. A building with no owner (imported before owners existed,
or by the operator's command line without `--as`) may be changed by admins only. Reading a
building, and running studies in it, stays open to every researcher: buildings are shared data
(a Matterport3D scan is imported once for everyone), so owners guard changes, not use.
`actor=None` in these functions is the operator at the server (the command line, the demo's
setup), who may change any building.
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

SCAN_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # the API's schema says it too (views.py)
_SCAN = re.compile(SCAN_PATTERN)
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


class NotYours(Exception):
    """The building belongs to someone else: this account may not change it."""


def check_may_change(actor, env: Environment) -> None:
    """NotYours unless `actor` (a User; None: the operator) may replace `env` or its panoramas."""
    if actor is None or actor.role == "admin" or (env.owner_id is not None and env.owner_id == actor.id):
        return
    if env.owner_id is None:
        raise NotYours(
            f"building {env.scan!r} has no owner (it was imported before buildings had "
            "owners, or by the operator): only an admin may replace it or its panoramas"
        )
    raise NotYours(
        f"building {env.scan!r} belongs to another researcher: only they or an admin may "
        "replace it or its panoramas (import yours under another scan name)"
    )


def _forget(scan: str) -> None:
    with _lock:
        for cache in (_graphs, _semantics):
            for key in [k for k in cache if k[1] == scan]:
                del cache[key]


def import_connectivity(
    session: Session,
    path_or_bytes: str | Path | bytes,
    scan: str | None = None,
    source: str = "matterport",
    semantics: dict | None = None,
    actor=None,
) -> Environment:
    """Store a building's connectivity file (validated first) and its row; replaces an
    earlier import of the same scan if `actor` may change it (NotYours otherwise, with nothing
    written). A new building belongs to `actor` (None: no owner). The scan defaults to the
    file name's prefix."""
    if scan is None and isinstance(path_or_bytes, (str, Path)):
        scan = scan_from_filename(path_or_bytes)
    _check_scan(scan)
    if source not in ENVIRONMENT_SOURCES:
        raise InputError(f"source must be one of {', '.join(ENVIRONMENT_SOURCES)}", field="source")
    data = Path(path_or_bytes).read_bytes() if isinstance(path_or_bytes, (str, Path)) else path_or_bytes
    graph = load_connectivity(data, scan=scan)  # InputError naming the record and field
    try:
        # The row first (locked, or inserted: a concurrent import of the same new scan waits on
        # the unique scan, then fails), and only then the blobs, which have fixed keys: a
        # refused import must not have overwritten the owner's files.
        env = session.scalar(
            select(Environment)
            .where(Environment.scan == scan)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        if env is None:
            env = Environment(
                scan=scan,
                source=source,
                connectivity_key=connectivity_key(scan),
                n_viewpoints=len(graph),
                owner_id=actor.id if actor is not None else None,
            )
            session.add(env)
            session.flush()
        else:
            check_may_change(actor, env)
        store = get_store()
        store.put(connectivity_key(scan), data, "application/json")
        sem_key = None
        if semantics is not None:
            sem_key = semantics_key(scan)
            store.put(sem_key, json.dumps(semantics).encode(), "application/json")
        env.source, env.connectivity_key = source, connectivity_key(scan)
        env.semantics_key, env.n_viewpoints = sem_key, len(graph)
        session.commit()
    except BaseException:
        session.rollback()
        raise
    _forget(scan)
    with _lock:
        _graphs[(_store_id(), scan)] = graph
    return env


def import_house(session: Session, house, actor=None) -> Environment:
    """A generated house (app.kinds.navigation.house.House): its connectivity and semantics."""
    from app.kinds.navigation.house import _dump_connectivity

    return import_connectivity(
        session,
        _dump_connectivity(house.connectivity()),
        scan=house.scan,
        source="generated",
        semantics=house.semantics(),
        actor=actor,
    )


def get_graph(scan: str) -> NavGraph:
    """The building's graph (cached); InputError (field scan) when it was never imported."""
    _check_scan(scan)
    key = (_store_id(), scan)
    graph = _graphs.get(key)
    if graph is not None:
        return graph
    store = get_store()
    if not store.exists(connectivity_key(scan)):
        raise InputError(f"no building {scan!r} has been imported (proctor navigation import-graphs)", field="scan")
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
        viewpoints[v] = {
            "neighbours": [
                {
                    "id": n,
                    "heading": graph.heading(v, n),
                    "elevation": graph.elevation(v, n),
                    "distance": float(adj[graph.index[v], graph.index[n]]),
                }
                for n in graph.neighbours(v)
            ]
        }
        if v in panoramas:
            viewpoints[v]["panorama"] = panoramas[v]
    return {"scan": scan, "semantics": get_semantics(scan), "viewpoints": viewpoints}


def check_path(scan: str, path, label: str, line: int | None = None) -> None:
    """The building must be imported and the path a walk on its graph (`line`: the upload's
    line, for formats of one record a line)."""
    try:
        graph = get_graph(scan)
    except InputError as e:
        raise InputError(f"{label}: {e.message}", field="scan", line=line) from None
    try:
        graph.check_walk(path, field="path")
    except InputError as e:
        raise InputError(f"{label}: {e.message}", field="path", line=line) from None

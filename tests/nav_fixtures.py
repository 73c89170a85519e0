"""Small navigation graphs of our own, written as connectivity files at test time.

- the grid: 4 x 3 viewpoints "gXY" at x = X, y = Y (z 1.5) with unit 4-neighbour edges, where
  shortest-path distance is the Manhattan distance; plus "hidden" (not included in the
  simulator, joined to g00 only) and "island" (included, no edges: unreachable);
- house_demo: the 8 viewpoints of tests/fixtures/nav/house_demo/semantics.json (3 rooms and a
  hallway) and the edges between them.
"""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nav"


def vp(x: int, y: int) -> str:
    return f"g{x}{y}"


def _pose(x: float, y: float, z: float = 1.5) -> list[float]:
    return [1, 0, 0, float(x), 0, 1, 0, float(y), 0, 0, 1, z, 0, 0, 0, 1]


def grid_records(width: int = 4, height: int = 3) -> list[dict]:
    """Connectivity records of a width x height grid, 4-neighbour unit edges, z = 1.5."""
    cells = [(x, y) for y in range(height) for x in range(width)]
    return [
        {
            "image_id": vp(x, y),
            "pose": _pose(x, y),
            "included": True,
            "visible": [abs(x - a) + abs(y - b) <= 1 for a, b in cells],
            "unobstructed": [abs(x - a) + abs(y - b) == 1 for a, b in cells],
            "height": 1.5,
        }
        for x, y in cells
    ]


def grid_file_records() -> list[dict]:
    """The grid with an excluded viewpoint ("hidden", seen from g00 only) and an unreachable
    one ("island"), as `grid_connectivity.json`."""
    recs = grid_records()
    n = len(recs) + 2
    for r in recs:
        r["visible"] += [False, False]
        r["unobstructed"] += [False, False]
    recs[0]["visible"][n - 2] = recs[0]["unobstructed"][n - 2] = True  # g00 <-> hidden
    hidden = {
        "image_id": "hidden",
        "pose": _pose(0.5, 0.5),
        "included": False,
        "visible": [k in (0, n - 2) for k in range(n)],
        "unobstructed": [k == 0 for k in range(n)],
        "height": 1.5,
    }
    island = {
        "image_id": "island",
        "pose": _pose(10, 10, 4.5),
        "included": True,
        "visible": [k == n - 1 for k in range(n)],
        "unobstructed": [False] * n,
        "height": 1.5,
    }
    return recs + [hidden, island]


_HOUSE_EDGES = (
    ("v_lr1", "v_lr2"),
    ("v_lr1", "v_lr3"),
    ("v_lr2", "v_lr3"),
    ("v_lr2", "v_h1"),
    ("v_lr3", "v_k1"),
    ("v_k1", "v_k2"),
    ("v_k2", "v_h3"),
    ("v_h1", "v_h2"),
    ("v_h2", "v_h3"),
)


def house_demo_records() -> list[dict]:
    """house_demo's viewpoints (positions from its semantics file) and edges."""
    semantics = json.loads((FIXTURES / "house_demo" / "semantics.json").read_text())
    ids = list(semantics["viewpoints"])
    linked = {frozenset(e) for e in _HOUSE_EDGES}
    out = []
    for v in ids:
        x, y, z = semantics["viewpoints"][v]["position"]
        seen = [frozenset((v, w)) in linked for w in ids]
        out.append(
            {
                "image_id": v,
                "pose": _pose(x, y, z),
                "included": True,
                "visible": seen,
                "unobstructed": list(seen),
                "height": 1.5,
            }
        )
    return out


@cache
def connectivity_dir() -> Path:
    """A folder with `grid_connectivity.json` (what `load_scans` and `--connectivity` read)."""
    folder = Path(tempfile.mkdtemp(prefix="proctor-nav-fixtures-"))
    (folder / "grid_connectivity.json").write_text(json.dumps(grid_file_records()))
    return folder


def grid_file() -> Path:
    return connectivity_dir() / "grid_connectivity.json"


def stored_generation_run(session, owner, study):
    """A generation run as rows only (no job, no model behind its speaker artifact): for tests
    of what reads runs and candidates. Committed."""
    from app.agents.models import AgentArtifact
    from app.kinds.navigation.models import GenerationRun
    from app.studies import services

    agent = services.register_agent(session, owner, "navigation", f"speaker-of-study-{study.id}")
    art = AgentArtifact(
        agent_id=agent.id,
        version=1,
        role="speaker",
        format="safetensors",
        blob_key="artifacts/none",
        size=0,
        sha256="0" * 64,
    )
    session.add(art)
    session.flush()
    run = GenerationRun(
        study_id=study.id,
        owner_id=owner.id,
        speaker_artifact_id=art.id,
        n=1,
        k=0,
        m=1,
        metric="ndtw",
        design="evaluation",
        max_len=10,
        seed=0,
        batch_size=1,
        paths=[],
    )
    session.add(run)
    session.commit()
    return run

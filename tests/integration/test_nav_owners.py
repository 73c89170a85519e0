"""Buildings have owners (issue 10): one researcher cannot overwrite another's building or its
panoramas, by any route that writes them: the panoramas API (cookie session or token), the
import functions, and the command line acting as an account (`--as`). A refused attempt leaves
the owner's row and every blob byte-identical. Admins may change any building; buildings with
no owner (from before owners, or the operator's) are admins' only. Reading a building stays open
to every researcher (buildings are shared data)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.auth.security import create_token
from app.kinds.navigation.environments import NotYours, import_connectivity
from app.kinds.navigation.models import Environment
from app.kinds.navigation.panoramas import import_panoramas
from app.storage import get_store
from tests.conftest import ROOT, login, make_user
from tests.integration.test_nav_panoramas import GRID, panorama_png, upload
from tests.nav_fixtures import grid_records

NOT_YOURS = "belongs to another researcher: only they or an admin may replace it or its panoramas"
NO_OWNER = "only an admin may replace it or its panoramas"


class People:
    def __init__(self, session, app):
        self.a = make_user(session, "researcher")
        self.b = make_user(session, "researcher")
        self.admin = make_user(session, "admin")
        self.clients = {}
        for name in ("a", "b", "admin"):
            c = TestClient(app).__enter__()
            c.headers["X-CSRF-Token"] = login(c, getattr(self, name))
            self.clients[name] = c
        token = create_token(session, self.b)
        session.commit()
        self.b_token = TestClient(app, headers={"Authorization": f"Bearer {token}"}).__enter__()

    def close(self):
        for c in (*self.clients.values(), self.b_token):
            c.__exit__(None, None, None)


@pytest.fixture
def people(session, app):
    p = People(session, app)
    yield p
    p.close()


def snapshot(session, scan: str) -> dict:
    """A building as stored: its row, and the bytes of every blob under its folders."""
    session.expire_all()
    env = session.scalar(select(Environment).where(Environment.scan == scan))
    root = get_store().root
    blobs = {
        str(p.relative_to(root)): p.read_bytes()
        for folder in (f"environments/{scan}", f"panoramas/{scan}")
        if (root / folder).exists()
        for p in sorted((root / folder).rglob("*"))
        if p.is_file()
    }
    return {
        "row": (
            env.owner_id,
            env.source,
            env.connectivity_key,
            env.semantics_key,
            env.n_viewpoints,
            dict(env.panoramas or {}),
        ),
        "blobs": blobs,
    }


def other_building() -> bytes:
    """Another building that B might call "grid": a 2 x 2 grid."""
    return json.dumps(grid_records(2, 2)).encode()


def test_another_researcher_cannot_overwrite_a_building_or_its_panoramas(session, people):
    import_connectivity(session, GRID, actor=people.a)
    a = people.clients["a"]
    assert upload(a, "grid", [("g00.png", panorama_png(1)), ("g10.png", panorama_png(2))]).status_code == 200
    before = snapshot(session, "grid")
    assert before["row"][0] == people.a.id and len(before["blobs"]) == 3  # the graph and 2 pictures

    # B over the API, with a cookie session and with a token: refused, with the reason.
    for b in (people.clients["b"], people.b_token):
        r = upload(b, "grid", [("g00.png", panorama_png(7)), ("g20.png", panorama_png(8))])
        assert r.status_code == 403 and NOT_YOURS in r.json()["detail"], r.text
    # Who may comes first: a bad file from B is refused as B's, not checked as A's.
    r = upload(people.clients["b"], "grid", [("g00.png", b"not a picture")])
    assert r.status_code == 403, r.text
    # B through the import functions (what the command line and a kind's setup call).
    with pytest.raises(NotYours, match=NOT_YOURS):
        import_connectivity(session, other_building(), scan="grid", actor=people.b)
    with pytest.raises(NotYours, match=NOT_YOURS):
        import_panoramas(session, "grid", [("g00.png", panorama_png(9))], actor=people.b)
    assert snapshot(session, "grid") == before

    # B may still read it, and run studies in it (buildings are shared).
    assert people.clients["b"].get("/env/grid/view.json").status_code == 200

    # The owner and an admin may change it; it stays A's.
    assert upload(a, "grid", [("g20.png", panorama_png(3))]).status_code == 200
    r = upload(people.clients["admin"], "grid", [("g00.png", panorama_png(4))])
    assert r.status_code == 200 and r.json()["panoramas"] == 3, r.text
    import_connectivity(session, GRID, actor=people.admin)
    after = snapshot(session, "grid")
    assert after["row"][0] == people.a.id and after["blobs"] != before["blobs"]


def test_buildings_without_an_owner_are_for_admins(session, people):
    """Rows from before owners (nav0003) and the operator's imports have no owner."""
    import_connectivity(session, GRID)  # the operator: no owner
    before = snapshot(session, "grid")
    assert before["row"][0] is None
    for who in ("a", "b"):
        r = upload(people.clients[who], "grid", [("g00.png", panorama_png(5))])
        assert r.status_code == 403 and NO_OWNER in r.json()["detail"], r.text
    with pytest.raises(NotYours, match=NO_OWNER):
        import_connectivity(session, other_building(), scan="grid", actor=people.a)
    assert snapshot(session, "grid") == before
    assert upload(people.clients["admin"], "grid", [("g00.png", panorama_png(5))]).status_code == 200
    import_panoramas(session, "grid", [("g10.png", panorama_png(6))])  # the operator
    assert snapshot(session, "grid")["row"][0] is None  # changed, and still nobody's


def test_a_new_building_belongs_to_who_imported_it(session, people):
    env = import_connectivity(session, GRID, actor=people.b)
    assert env.owner_id == people.b.id
    for actor in (people.b, people.admin, None):  # the owner, an admin, the operator: owner kept
        assert import_connectivity(session, GRID, actor=actor).owner_id == people.b.id


def test_the_command_line_acts_as_an_account(session, people, db_url, tmp_path):
    if not db_url.startswith("sqlite"):
        pytest.skip("the command runs in its own process; one backend is enough")
    env = {**os.environ, "DATABASE_URL": db_url, "STORAGE_URL": os.environ["STORAGE_URL"], "REDIS_URL": ""}

    def nav(*args):
        return subprocess.run(
            [sys.executable, "-m", "app.cli", "nav", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
        )

    def folder(name: str, files: dict) -> str:
        d = tmp_path / name
        d.mkdir()
        for file, data in files.items():
            (d / file).write_bytes(data)
        return str(d)

    a_graphs = folder("a-graphs", {"grid_connectivity.json": GRID.read_bytes()})
    a_panos = folder("a-panos", {"g00.png": panorama_png(1)})
    b_graphs = folder("b-graphs", {"grid_connectivity.json": other_building()})
    b_panos = folder("b-panos", {"g00.png": panorama_png(2), "g10.png": panorama_png(3)})

    out = nav("import-graphs", a_graphs, "--as", people.a.email.upper())  # emails match in any case
    assert out.returncode == 0, out.stderr
    assert nav("import-panoramas", "grid", a_panos, "--as", people.a.email).returncode == 0
    before = snapshot(session, "grid")
    assert before["row"][0] == people.a.id

    out = nav("import-graphs", b_graphs, "--as", people.b.email)
    assert out.returncode != 0 and NOT_YOURS in out.stderr, out.stderr
    out = nav("import-panoramas", "grid", b_panos, "--as", people.b.email)
    assert out.returncode != 0 and NOT_YOURS in out.stderr, out.stderr
    out = nav("import-panoramas", "grid", b_panos, "--as", "nobody@example.org")
    assert out.returncode != 0 and "no researcher or admin account" in out.stderr, out.stderr
    assert snapshot(session, "grid") == before

    # The operator (no --as) hands the building over, or to the admins only.
    out = nav("set-owner", "grid", people.b.email)
    assert out.returncode == 0 and snapshot(session, "grid")["row"][0] == people.b.id, out.stderr
    assert nav("import-panoramas", "grid", b_panos, "--as", people.b.email).returncode == 0
    assert nav("set-owner", "grid", "--none").returncode == 0
    assert snapshot(session, "grid")["row"][0] is None
    out = nav("import-graphs", a_graphs, "--as", people.a.email)
    assert out.returncode != 0 and NO_OWNER in out.stderr, out.stderr

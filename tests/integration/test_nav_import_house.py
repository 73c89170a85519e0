"""`proctor nav import-house SEED`: a researcher brings a generated house for a generation run.
The house is imported with its semantics (the speaker's step features need them), owned by the
account named by --as, and --paths writes an R2R file of its paths that a generation run takes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import select

from app.kinds.navigation.environments import get_semantics
from app.kinds.navigation.generation import parse_paths
from app.kinds.navigation.house import generate_house
from app.kinds.navigation.models import Environment
from tests.conftest import ROOT, make_user


def test_a_generated_house_is_imported_with_its_semantics_and_paths(session, db_url, tmp_path):
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

    mine, theirs = make_user(session, "researcher"), make_user(session, "researcher")
    house = generate_house(7, floors=2)
    paths_file = tmp_path / "paths.json"
    out = nav("import-house", "7", "--floors", "2", "--paths", "12", "--out", str(paths_file), "--as", mine.email)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"imported house-7-2f: {len(house.rooms)} rooms, {len(house.viewpoints)} viewpoints",
        f"wrote 12 paths of house-7-2f to {paths_file}",
    ]
    building = session.scalar(select(Environment).where(Environment.scan == "house-7-2f"))
    assert (building.source, building.owner_id, building.n_viewpoints) == ("generated", mine.id, len(house.viewpoints))
    assert get_semantics("house-7-2f") == house.semantics()
    # The file is what a generation run takes: every path on the imported house, checked, with
    # a reference instruction (the capability design needs one).
    paths = parse_paths(paths_file.read_bytes(), "capability")
    assert len(paths) == 12 and {p["scan"] for p in paths} == {"house-7-2f"}
    assert all(len(p["instructions"]) == 1 and p["instructions"][0] for p in paths)
    assert [p["path"] for p in paths] == [r["path"] for r in json.loads(paths_file.read_text())]

    # Another researcher's import of the same house is refused; the building stays mine.
    out = nav("import-house", "7", "--floors", "2", "--as", theirs.email)
    assert out.returncode == 1 and "belongs to another researcher" in out.stderr, out.stderr
    session.expire_all()
    assert session.scalar(select(Environment.owner_id).where(Environment.scan == "house-7-2f")) == mine.id
    out = nav("import-house", "8", "--paths", "3")
    assert out.returncode == 2 and "give --paths N and --out FILE together" in out.stderr

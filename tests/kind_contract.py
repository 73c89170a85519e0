"""What every task kind must do, as one class of tests (issue 27.2): a kind's study made from
its own demo material reads back through the API as imported, a bad upload is refused with
nothing stored, an export runs to its files, and the study's pages and leaderboard answer.

tests/integration/test_kind_contract.py runs it for every installed kind (the example kind
too), found through the registry. A kind's own tests may subclass `KindContract` to add checks
or to make the study another way (override `make_study`).

Backend-agnostic, so on SQLite only (PostgreSQL is exercised by each kind's own files).
Model-bearing kinds' upload, validate, generate and cancel join the contract with the agent
runs service (issue 27.1).
"""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app import jobs
from app.kinds import get_kind
from app.studies import services
from app.studies.models import Item, Study
from tests.conftest import login, make_user


class KindContract:
    kind_name: str = ""

    pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

    def make_study(self, session, researcher) -> Study:
        """A draft study of the kind from its `demo()` material: its items file, or the kind's
        own builder (`build`), after its `setup` (e.g. the buildings its paths are in)."""
        kind = get_kind(self.kind_name)
        material = kind.demo()
        if not material:
            pytest.skip(f"{self.kind_name} has no demo material to make a study from")
        if material.get("setup"):
            material["setup"](session)
            session.commit()
        settings = services.StudySettings(**{"title": f"Contract: {kind.title}", **material.get("settings", {})})
        if material.get("build"):
            return material["build"](session, researcher, settings)
        return services.create_study(session, researcher, kind.name, settings, material["items"], material["format"])

    @pytest.fixture
    def signed_in(self, client, session):
        researcher = make_user(session, "researcher")
        session.commit()
        return client, {"X-CSRF-Token": login(client, researcher)}, researcher

    @pytest.fixture
    def made(self, signed_in, session):
        client, headers, researcher = signed_in
        study = self.make_study(session, researcher)  # seconds for a kind that runs jobs (STS)
        session.commit()
        return client, headers, study.id, researcher

    def test_items_read_back_through_the_api_as_stored(self, made, session):
        client, headers, study_id, _ = made
        stored = {i.external_id: i for i in session.scalars(select(Item).where(Item.study_id == study_id))}
        assert stored, "the demo study has items"
        got, offset = {}, 0
        while True:
            page = client.get(f"/api/v1/studies/{study_id}/items", params={"offset": offset, "limit": 1000})
            assert page.status_code == 200, page.text
            got.update({i["id"]: i for i in page.json()})
            if len(page.json()) < 1000:
                break
            offset += 1000
        assert set(got) == set(stored)
        for ext, item in stored.items():
            assert got[ext]["payload"] == item.payload and got[ext]["reference"] == item.reference
            assert got[ext]["is_gold"] == item.is_gold and got[ext]["cluster"] == item.cluster

    def test_an_empty_or_binary_upload_is_refused_and_nothing_is_stored(self, signed_in, session):
        client, headers, _ = signed_in
        kind = get_kind(self.kind_name)
        before = session.scalar(select(func.count(Study.id)))
        for data in (b"", b"\x00\x01\x02garbage\xff"):
            r = client.post(
                "/api/v1/studies",
                headers=headers,
                data={"kind": kind.name, "format": kind.item_formats[0], "settings": "{}"},
                files={"file": ("upload.bin", data)},
            )
            assert 400 <= r.status_code < 500, (data, r.status_code, r.text)
            assert r.json()["detail"]
        session.expire_all()
        assert session.scalar(select(func.count(Study.id))) == before

    def test_the_pages_leaderboard_and_an_export_answer(self, made, session):
        client, headers, study_id, researcher = made
        board = client.get(f"/api/v1/studies/{study_id}/leaderboard")
        assert board.status_code == 200, board.text
        assert "rows" in board.json()
        for path in (f"/studies/{study_id}", f"/studies/{study_id}/leaderboard"):
            page = client.get(path)
            assert page.status_code == 200, (path, page.text[:500])
        services.set_state(session, session.get(Study, study_id), "live", researcher)
        r = client.post(f"/api/v1/studies/{study_id}/exports", headers=headers)
        assert r.status_code == 202, r.text
        jobs.run_queued_once()
        job = client.get(f"/api/v1/jobs/{r.json()['job']}").json()
        assert job["state"] == "done" and job["files"], job

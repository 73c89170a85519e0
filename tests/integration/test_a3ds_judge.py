"""Model listeners as the A3DS kind's automatic judge (issue 28): a model listener's picks on a
study's captions (an agent's outputs) judge every caption; the leaderboard's "People and the
model listeners together" table shows per captioner people's accuracy on the captions they
answered, the model listeners' on all, their agreement, the PPI++ accuracy from both and how
many captions people must answer for ±0.05, each recomputed here from the stored rows."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import func, select

from app.leaderboards import stats
from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.models import Annotation, Item
from tests.conftest import make_user
from tests.integration.test_a3ds_kind import _study

DESIGN = {
    "pairs": {"z": {str(z): 5 for z in range(1, 7)}},
    "speakers": ["literal", "contrastive"],
    "seed": 9,
    "gold": 0,
}


def _tables(session, study) -> dict:
    session.expire_all()
    return {t["key"]: t for t in compute(session, study)["extra"]["tables"]}


def test_people_and_the_model_listeners_together(session):
    owner = make_user(session, "researcher")
    study = _study(session, owner, design=DESIGN, bundle_size=60)
    items = session.scalars(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False))).all()
    assert len(items) == 60
    # People answer 36 of the 60 captions (a listener sees one caption of a pair: several
    # listeners), wrong on every fourth answer.
    k, w = 0, 0
    while k < 36:
        bundle = assignment.enter(session, study, "prolific", f"listener-{w}")
        w += 1
        a = assignment.next_item(session, study, bundle.id)
        while a is not None and k < 36:
            item = session.get(Item, a.item_id)
            target = item.reference["target"]
            choice = str(target if k % 4 else 3 - target)
            assignment.submit(session, study, bundle.id, a.id, {"choice": choice}, uuid.uuid4().hex)
            k += 1
            a = assignment.next_item(session, study, bundle.id)
    assert "a3ds_ppi" not in _tables(session, study)  # no model listener yet: no judge
    # A model listener picks on every caption: right except where the item id is a multiple of 3.
    agent = services.register_agent(session, owner, "a3ds", "model listener")
    picks = {i.id: str(i.reference["target"] if i.id % 3 else 3 - i.reference["target"]) for i in items}
    services.import_agent_outputs(
        session,
        study,
        agent,
        "\n".join(json.dumps({"item": i.external_id, "choice": picks[i.id]}) for i in items).encode(),
    )
    table = _tables(session, study)["a3ds_ppi"]
    rows = {r["agent"]: r for r in table["rows"]}
    assert set(rows) == {"literal", "contrastive"}
    answered = dict(
        session.execute(
            select(Annotation.item_id, Annotation.score).where(
                Annotation.study_id == study.id, Annotation.excluded.is_(False)
            )
        ).all()
    )
    for name, row in rows.items():
        mine = [i for i in items if i.reference["captioner"] == name]
        judge = {i.id: 1.0 if picks[i.id] == str(i.reference["target"]) else 0.0 for i in mine}
        seen = [i.id for i in mine if i.id in answered]
        human, judged = [answered[i] for i in seen], [judge[i] for i in seen]
        unseen = [v for i, v in judge.items() if i not in answered]
        want = stats.ppi_mean(human, judged, unseen, unit="caption")
        assert row["judged"] == len(mine) == 30
        assert row["judge"] == pytest.approx(sum(judge.values()) / 30)
        assert row["people"]["n"] == len(seen) and row["people"]["mean"] == pytest.approx(sum(human) / len(human))
        assert row["agreement"]["mean"] == pytest.approx(sum(h == j for h, j in zip(human, judged)) / len(seen))
        if want["low"] is None:
            assert row["ppi"] == {"text": "—", "reason": want["reason"]}
        else:
            assert row["ppi"]["mean"] == pytest.approx(want["mean"]) and row["ppi"]["n"] == 30
            assert (row["ppi"]["low"], row["ppi"]["high"]) == pytest.approx((want["low"], want["high"]))
            assert row["worth"] == pytest.approx(round(want["effective_n"], 1))
    assert any(r["ppi"].get("low") is not None for r in rows.values())  # at least one has an interval
    assert [c["key"] for c in table["columns"]][0] == "agent" and "Captioner" in table["columns"][0]["label"]


def _people_answer(session, study, count: int) -> None:
    """People answer `count` captions, wrong on every fourth answer."""
    k, w = 0, 0
    while k < count:
        bundle = assignment.enter(session, study, "prolific", f"listener-{w}")
        w += 1
        a = assignment.next_item(session, study, bundle.id)
        while a is not None and k < count:
            target = session.get(Item, a.item_id).reference["target"]
            assignment.submit(
                session, study, bundle.id, a.id, {"choice": str(target if k % 4 else 3 - target)}, uuid.uuid4().hex
            )
            k += 1
            a = assignment.next_item(session, study, bundle.id)


def test_a_model_listener_runs_as_an_agent_run_and_the_leaderboard_shows_its_rows(app, session):
    from fastapi.testclient import TestClient

    from app import jobs
    from app.agents.models import AgentOutput
    from app.auth.security import create_token
    from app.kinds.a3ds.listeners import pick

    owner = make_user(session, "researcher")
    token = create_token(session, owner)
    study = _study(session, owner, design=DESIGN, bundle_size=60)  # live: picks add no items
    session.commit()
    c = TestClient(app, headers={"Authorization": f"Bearer {token}"})
    _people_answer(session, study, 36)
    assert "a3ds_ppi" not in c.get(f"/api/v1/studies/{study.id}/leaderboard").text

    # A run that is cancelled before it runs stores nothing; the researcher sees it so.
    r = c.post(f"/api/v1/studies/{study.id}/runs", json={"listener": "literal", "batch_size": 7})
    assert r.status_code == 202, r.text
    first = r.json()
    assert first["noun"] == "captioner or listener run" and first["params"]["listener"] == "literal"
    assert c.post(f"/api/v1/runs/{first['id']}/cancel").json()["state"] == "cancelled"
    jobs.run_queued_once()
    assert c.get(f"/api/v1/runs/{first['id']}").json()["detail"]["items"] == 0

    # Run again: it picks on all 60 captions, in chunks, as its agent's outputs.
    run = c.post(f"/api/v1/studies/{study.id}/runs", json={"listener": "literal", "batch_size": 7}).json()
    jobs.run_queued_once()
    got = c.get(f"/api/v1/runs/{run['id']}").json()
    assert got["state"] == "done" and got["detail"]["items"] == 60 and got["detail"]["captioner"] == "literal listener"
    assert [x["id"] for x in c.get("/api/v1/runs", params={"study_id": study.id}).json()] == [run["id"], first["id"]]
    session.expire_all()
    items = session.scalars(select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False))).all()
    outputs = {o.item_id: o for o in session.scalars(select(AgentOutput).where(AgentOutput.study_id == study.id))}
    assert set(outputs) == {i.id for i in items} and {o.agent_id for o in outputs.values()} == {run["agent_id"]}
    for i in items:  # the literal listener's pick, scored as a person's answer
        choice = pick("literal", i.payload["caption"], i.payload["scenes"])
        assert outputs[i.id].response == {"choice": choice}
        assert outputs[i.id].score == (1.0 if choice == str(i.reference["target"]) else 0.0)

    # The leaderboard's people-and-judge table now has a row per captioner from the run's picks.
    tables = {t["key"]: t for t in c.get(f"/api/v1/studies/{study.id}/leaderboard").json()["extra"]["tables"]}
    rows = {r["agent"]: r for r in tables["a3ds_ppi"]["rows"]}
    assert set(rows) == {"literal", "contrastive"}
    for name, row in rows.items():
        mine = [i for i in items if i.reference["captioner"] == name]
        assert row["judged"] == 30
        assert row["judge"] == pytest.approx(sum(outputs[i.id].score for i in mine) / 30)
        assert row["ppi"].get("low") is not None and row["worth"] is not None
    # And per z, every captioner's captions pooled: 5 pairs x 2 captioners each.
    by_z = {r["agent"]: r for r in tables["a3ds_ppi_by_category"]["rows"]}
    assert list(by_z) == [f"z = {z}" for z in range(1, 7)]
    for z in range(1, 7):
        mine = [i for i in items if i.category == str(z)]
        assert by_z[f"z = {z}"]["judged"] == len(mine) == 10
        assert by_z[f"z = {z}"]["judge"] == pytest.approx(sum(outputs[i.id].score for i in mine) / 10)

    # A re-run after the picks are stored adds nothing twice.
    again = c.post(f"/api/v1/studies/{study.id}/runs", json={"listener": "literal"}).json()
    jobs.run_queued_once()
    assert c.get(f"/api/v1/runs/{again['id']}").json()["detail"]["items"] == 60
    session.expire_all()
    assert session.scalar(select(func.count(AgentOutput.id)).where(AgentOutput.study_id == study.id)) == 60

"""Hexagons description and verification studies: targets become a description study, an
instructor's aligned steps are checked and scored against the target, the procedures go to a
verification study with two verifiers each, and the agreement tags and scores come out as the
data README defines them; the export reads back as released data."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from app.errors import InputError
from app.kinds.hexagons import KIND
from app.kinds.hexagons.formats import parse_procedures, parse_targets
from app.kinds.hexagons.verification import step_agreement, study_agreement
from app.studies import assignment, services
from app.studies.models import Item, Study
from tests.conftest import ROOT, login, make_user

BLANK = [0] * 180


def board(**tiles) -> list[int]:
    b = list(BLANK)
    for t, c in tiles.items():
        b[int(t[1:])] = c
    return b


TARGET = board(t0=4, t1=5, t2=3)
STEP1 = board(t0=4)
STEP2 = board(t0=4, t1=5)


def _targets() -> bytes:
    return "\n".join(
        [
            json.dumps({"id": "flower", "board": TARGET, "category": "simple"}),
            json.dumps({"id": "dot", "board": board(t90=1)}),
        ]
    ).encode()


def _described() -> dict:
    """An instructor's two aligned steps (step 2 ends one tile short of the target)."""
    return {
        "steps": json.dumps(
            [
                {"instruction": "Paint the top-left tile red.", "board": STEP1, "actions": [[0, 4, 1200]]},
                {
                    "instruction": "Paint the tile right of it blue.",
                    "board": STEP2,
                    "actions": [[1, 3, 500], [1, 5, 900]],
                },
            ]
        )
    }


def _answer(session, study, who: str, response: dict):
    bundle = assignment.enter(session, study, "prolific", who)
    a = assignment.next_item(session, study, bundle.id)
    item = session.get(Item, a.item_id)
    return item, assignment.submit(session, study, bundle.id, a.id, response, uuid.uuid4().hex)


def test_targets_format_reads_boards_and_released_final_boards():
    dev = ROOT.parent / "shared" / "data" / "hexagons" / "dev.jsonl"
    targets, skipped = parse_targets(_targets())
    assert [(t.id, t.category) for t in targets] == [("flower", "simple"), ("dot", "")]
    if dev.exists():
        lines = dev.read_text().splitlines()
        procs = parse_procedures("\n".join(lines))
        targets, skipped = parse_targets("\n".join(lines))
        assert len(targets) + skipped == len(procs)
        first = next(p for p in procs if p.image_id == targets[0].id)
        assert targets[0].board == first.steps[-1].board and targets[0].category == first.category
    for data, field in (
        (json.dumps({"id": "x", "board": BLANK}), "board"),
        (json.dumps({"id": "x", "board": TARGET[:-1]}), "board"),
        (json.dumps({"board": TARGET}), "id"),
        (_targets().decode() + "\n" + json.dumps({"id": "dot", "board": TARGET}), "id"),
    ):
        with pytest.raises(InputError) as exc:
            parse_targets(data)
        assert exc.value.field == field


def test_agreement_tags_and_scores_follow_the_data_readme():
    a, b, c = board(t0=1), board(t1=1), board(t2=1)
    gold = [a, a, a, a, a]
    v1 = [a, a, b, b, b]
    v2 = [a, b, a, b, c]
    steps = step_agreement(gold, [v1, v2])
    assert [steps[k]["tag"] for k in range(1, 6)] == ["A", "V1", "V2", "VV", "F"]
    assert steps[2]["scores"] == [1.0, 0.0, 0.0] and steps[4]["scores"] == [0.0, 0.0, 1.0]
    assert step_agreement(gold, [v1]) is None  # one verifier: no tag yet


def test_an_instructors_description_is_checked_and_scored_against_the_target(session):
    owner = make_user(session, "researcher")
    study = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Describe"), _targets(), "targets"
    )
    assert study.kind_settings["mode"] == "description" and study.annotations_per_item == 1
    assert "write instructions" in study.instructions.lower()
    item = session.scalar(select(Item).where(Item.study_id == study.id, Item.external_id == "flower"))
    assert KIND.public_payload(item.payload)["target"] == TARGET and item.category == "simple"
    parsed = KIND.parse_response(_described(), item.payload, study.kind_settings)
    assert [s["instruction"] for s in parsed["steps"]] == [
        "Paint the top-left tile red.",
        "Paint the tile right of it blue.",
    ]
    # Two of the target's three tiles, nothing else: P 1, R 2/3.
    assert KIND.score(item.payload, item.reference, parsed) == pytest.approx(0.8)
    assert KIND.score_details(item.payload, item.reference, parsed)["board_em"] == 0.0
    bad = [
        ([{"instruction": "  ", "board": STEP1, "actions": [[0, 4, 1]]}], "steps.0.instruction"),
        ([{"instruction": "x" * 10001, "board": STEP1, "actions": [[0, 4, 1]]}], "steps.0.instruction"),
        ([{"instruction": "red", "board": STEP1, "actions": [[1, 4, 1]]}], "steps.0.board"),
        ([{"instruction": "red", "board": STEP1}], "steps.0.board"),  # painted, but no actions
        (
            [
                {"instruction": "red", "board": STEP1, "actions": [[0, 4, 1]]},
                {"instruction": "blue", "board": STEP2, "actions": [[2, 5, 1]]},
            ],
            "steps.1.board",
        ),
        ([], "steps"),
    ]
    for steps, field in bad:
        with pytest.raises(InputError) as exc:
            KIND.parse_response({"steps": steps}, item.payload, study.kind_settings)
        assert exc.value.field == field, (steps, exc.value)
    with pytest.raises(InputError):  # a description study takes no agent outputs
        services.import_agent_outputs(
            session,
            study,
            services.register_agent(session, owner, "hexagons", "a"),
            b'{"index": "flower", "step": 1, "board": []}',
        )


def test_procedures_go_to_two_verifiers_and_come_back_tagged(session, client, tmp_path):
    owner = make_user(session, "researcher")
    desc = services.create_study(
        session,
        owner,
        "hexagons",
        services.StudySettings(title="Describe", bundle_size=1),
        _targets().splitlines()[0],
        "targets",
    )
    services.set_state(session, desc, "live", owner)
    target, ann = _answer(session, desc, "instructor-1", _described())
    assert ann.score == pytest.approx(0.8)
    csrf = login(client, owner)
    headers = {"X-CSRF-Token": csrf}

    r = client.post(f"/api/v1/hexagons/studies/{desc.id}/verification", headers=headers, json={})
    assert r.status_code == 201, r.text
    ver = session.get(Study, r.json()["study"])
    assert r.json()["procedures"] == 1 and ver.state == "draft" and ver.annotations_per_item == 2
    assert ver.kind_settings["verification_of"] == desc.id and ver.gold_rate == 0.0
    [item] = session.scalars(select(Item).where(Item.study_id == ver.id)).all()
    # The verifiers get the instructions and a blank board, never the image or the boards.
    shown = KIND.public_payload(item.payload)
    assert shown["instructions"] == ["Paint the top-left tile red.", "Paint the tile right of it blue."]
    assert shown["initial"] == BLANK and "target" not in json.dumps(shown) and TARGET not in shown.values()
    assert item.reference["boards"] == [STEP1, STEP2] and item.reference["image_id"] == "flower"
    assert item.category == "simple"
    # Nothing new written: a second verification is refused, naming the study.
    again = client.post(f"/api/v1/hexagons/studies/{desc.id}/verification", headers=headers)
    assert again.status_code == 422 and again.json()["field"] == "study"
    assert session.scalar(select(func.count()).select_from(Study)) == 2
    # Someone else's study is not revealed.
    other = make_user(session, "researcher")
    from fastapi.testclient import TestClient

    with TestClient(client.app) as c2:
        token = login(c2, other)
        assert c2.get(f"/api/v1/hexagons/studies/{ver.id}/verification").status_code == 404
        assert (
            c2.post(f"/api/v1/hexagons/studies/{desc.id}/verification", headers={"X-CSRF-Token": token}).status_code
            == 404
        )

    services.set_state(session, ver, "live", owner)
    # The instructor is the item's author: never one of its verifiers.
    assert item.author_id == ann.worker_id
    mine = assignment.enter(session, ver, "prolific", "instructor-1")
    assert assignment.next_item(session, ver, mine.id) is None
    pending = client.get(f"/api/v1/hexagons/studies/{ver.id}/verification").json()
    assert pending["procedures"][0]["steps"][0]["tag"] is None and pending["complete"] == 0
    # Verifier 1 reproduces both steps; verifier 2 paints tile 1 green in step 2.
    _answer(
        session,
        ver,
        "verifier-1",
        {"steps": [{"board": STEP1, "actions": [[0, 4, 10]]}, {"board": STEP2, "actions": [[1, 5, 10]]}]},
    )
    wrong = board(t0=4, t1=3)
    _answer(
        session,
        ver,
        "verifier-2",
        {"steps": [{"board": STEP1, "actions": [[0, 4, 10]]}, {"board": wrong, "actions": [[1, 3, 10]]}]},
    )
    tags = study_agreement(session, ver)[item.id]
    assert (tags[1]["tag"], tags[2]["tag"]) == ("A", "V1")
    assert tags[2]["scores"] == [1.0, 0.5, 0.5]
    got = client.get(f"/api/v1/hexagons/studies/{ver.id}/verification").json()
    assert [s["tag"] for s in got["procedures"][0]["steps"]] == ["A", "V1"]
    assert got["tags"]["A"] == 1 and got["tags"]["V1"] == 1 and got["complete"] == 1
    page = client.get(f"/hexagons/studies/{ver.id}/verification")
    assert page.status_code == 200 and "Paint the tile right of it blue." in page.text
    assert client.get(f"/studies/{ver.id}").status_code == 200
    assert client.get(f"/studies/{desc.id}").status_code == 200

    # The export is the released format: the procedures importer and `proctor hex score` read it.
    export = client.get(f"/api/v1/hexagons/studies/{ver.id}/verification.jsonl")
    assert export.status_code == 200
    [proc] = parse_procedures(export.content)
    assert [s.tag for s in proc.steps] == ["A", "V1"] and proc.steps[1].scores == (1.0, 0.5, 0.5)
    assert [list(s.board) for s in proc.steps] == [STEP1, STEP2] and proc.image_id == "flower"
    assert json.loads(export.content)["index"] == item.external_id
    gold = tmp_path / "verified.jsonl"
    gold.write_bytes(export.content)
    from app.kinds.hexagons.cli import hexagons

    out = CliRunner().invoke(hexagons, ["score", "--gold", str(gold), "--no-action", "--json"])
    assert out.exit_code == 0, out.output
    assert set(json.loads(out.output)["per_step"]) == {f"{proc.index}_1", f"{proc.index}_2"}
    back = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Again"), export.content, "procedures"
    )
    assert session.scalar(select(Item.reference).where(Item.study_id == back.id))["tags"] == ["A", "V1"]
    # A description study has no verifiers to report on.
    assert client.get(f"/api/v1/hexagons/studies/{desc.id}/verification").status_code == 422


def test_a_researcher_adds_drawn_targets_to_a_draft_description_study(session, client):
    owner = make_user(session, "researcher")
    desc = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Draw"), _targets(), "targets"
    )
    csrf = login(client, owner)
    headers = {"X-CSRF-Token": csrf}
    url = f"/api/v1/hexagons/studies/{desc.id}/targets"
    r = client.post(url, headers=headers, json={"id": "drawn", "board": STEP2, "category": "simple"})
    assert r.status_code == 201 and r.json()["targets"] == 3, r.text
    item = session.scalar(select(Item).where(Item.study_id == desc.id, Item.external_id == "drawn"))
    assert item.payload["target"] == STEP2
    for body, field in (
        ({"id": "drawn", "board": TARGET}, "id"),
        ({"id": "blank", "board": BLANK}, "board"),
        ({"id": "short", "board": TARGET[:5]}, "board"),
    ):
        r = client.post(url, headers=headers, json=body)
        assert r.status_code == 422 and r.json()["field"].endswith(field), r.text
    # The page: draw, name, add; a refusal keeps the drawing and says why.
    page = client.get(f"/hexagons/studies/{desc.id}/targets")
    assert page.status_code == 200 and 'id="hex-board"' in page.text
    r = client.post(
        f"/hexagons/studies/{desc.id}/targets",
        follow_redirects=False,
        data={"csrf_token": csrf, "target_id": "page", "board": json.dumps(TARGET)},
    )
    assert r.status_code == 303
    r = client.post(
        f"/hexagons/studies/{desc.id}/targets",
        data={"csrf_token": csrf, "target_id": "page", "board": json.dumps(TARGET)},
    )
    assert r.status_code == 422 and "already has a target" in r.text
    assert session.scalar(select(func.count()).select_from(Item).where(Item.study_id == desc.id)) == 4
    # Past draft, and on an execution study, targets are refused.
    services.set_state(session, desc, "live", owner)
    r = client.post(url, headers=headers, json={"id": "late", "board": TARGET})
    assert r.status_code == 422 and r.json()["field"] == "study"


def test_a_description_studys_leaderboard_leads_with_its_scores(session, client):
    """The Hexagons section is for execution studies; a description study with answers shows
    its instructors' scores in the generic table, titled with its metric, never "no figures"
    under the execution study's heading."""
    import re

    from app.demo import simulate_task
    from tests.conftest import login

    owner = make_user(session, "researcher")
    study = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Describe"), _targets(), "targets"
    )
    services.set_state(session, study, "live", owner)
    simulate_task(session, study, "instructor", lambda item, rng: _described(), 30.0, seed=1)
    session.commit()
    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard").text
    first = re.search(r'<section class="card[^"]*" id="([^"]+)">', page).group(1)
    assert first == "generic" and "no figures yet" not in page and 'id="leaderboard"' in page

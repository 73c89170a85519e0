"""Hexagons consolidation on both backends: steps where executors disagree with the
instructor are queued (disputed first), an admin classifies the error and fixes the gold
board (audited; every execution of the procedure is re-scored, so the leaderboard moves),
and abstraction labels travel from executors to the reference."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.audit import AuditEntry
from app.kinds.hexagons.models import Consolidation
from app.leaderboards import service as leaderboards
from app.studies import assignment, services
from app.studies.models import Annotation, Item
from tests.conftest import create_tom_study, login, make_user


def board(**tiles) -> list[int]:
    """A board from {"t0": colour, ...}."""
    b = [0] * 180
    for name, colour in tiles.items():
        b[int(name[1:])] = colour
    return b


BLANK = board()
# Procedure 1: the instructor is right; verifier B paints tile 1 green, not blue (tag V1).
# Procedure 2: the instructor under-executed step 1 (tile 18 left white); both verifiers did
# what it says (tag VV, disputed), and carried it into step 2.
PROCEDURES = {
    "1": (["paint tile 0 red", "paint tile 1 blue"], [board(t0=4), board(t0=4, t1=5)]),
    "2": (["paint tiles 0 and 18 red", "paint tile 1 blue"], [board(t0=4), board(t0=4, t1=5)]),
}
EXECUTIONS = {  # worker -> procedure -> boards after each step
    "A": {"1": [board(t0=4), board(t0=4, t1=5)], "2": [board(t0=4, t18=4), board(t0=4, t18=4, t1=5)]},
    "B": {"1": [board(t0=4), board(t0=4, t1=3)], "2": [board(t0=4, t18=4), board(t0=4, t18=4, t1=5)]},
}
LEVELS = {"A": [2, 0], "B": [2, 1]}


def procedures_jsonl() -> bytes:
    lines = []
    for index, (texts, boards) in PROCEDURES.items():
        lines.append(
            json.dumps(
                {
                    "index": index,
                    "annotation_round": 1,
                    "category": "simple",
                    "image_id": f"P{index}",
                    "instructor_id": 3,
                    "number_of_drawing_steps": 2,
                    "agreement_tags": ["A", "A"],
                    "agreement_scores": [[1, 1, 1]] * 2,
                    "drawing_procedure": [[0, "NONE", BLANK]]
                    + [[k + 1, t, b] for k, (t, b) in enumerate(zip(texts, boards))],
                }
            )
        )
    return "\n".join(lines).encode()


def disagreement_study(session, owner, label_abstraction: bool = False):
    """A live execution study of the two procedures, each executed by workers A and B."""
    study = services.create_study(
        session,
        owner,
        "hexagons",
        services.StudySettings(title="Consolidate", bundle_size=2, gold_rate=0.0, annotations_per_item=2),
        procedures_jsonl(),
        "procedures",
        {"label_abstraction": 1} if label_abstraction else {},
    )
    services.set_state(session, study, "live", owner)
    for who, by_item in EXECUTIONS.items():
        bundle = assignment.enter(session, study, "prolific", f"hex-{who}-{uuid.uuid4().hex[:6]}")
        for _ in range(2):
            lease = assignment.next_item(session, study, bundle.id)
            ext = session.get(Item, lease.item_id).external_id
            response = {"steps": json.dumps([{"board": b, "actions": []} for b in by_item[ext]])}
            if label_abstraction:
                response["labels"] = json.dumps(
                    [{"level": lv, "mechanisms": ["object"] if lv == 2 else []} for lv in LEVELS[who]]
                )
            assignment.submit(session, study, bundle.id, lease.id, response, uuid.uuid4().hex)
    session.commit()
    return study


def _items(session, study) -> dict[str, Item]:
    return {i.external_id: i for i in session.scalars(select(Item).where(Item.study_id == study.id))}


@pytest.fixture
def admin_client(app, session):
    admin = make_user(session, "admin")
    with TestClient(app) as c:
        token = login(c, admin)
        c.headers["X-CSRF-Token"] = token
        c.admin = admin
        yield c


def _annotator_means(session, study) -> list[float]:
    """Each annotator's board F1 over all steps, from the Hexagons leaderboard section."""
    from app.kinds.hexagons.leaderboard import POOLED, SECTIONS

    table = leaderboards.compute(session, study)["extra"]["tables"][0]
    return [
        r["board_f1"]["mean"]
        for r in sorted(table["rows"], key=lambda r: r["who"])
        if r["section"] == SECTIONS["human"] and r["who"] != POOLED
    ]


def test_the_queue_puts_disputed_steps_first_and_shows_the_boards(session, admin_client):
    owner = make_user(session, "researcher")
    study = disagreement_study(session, owner)
    items = _items(session, study)
    r = admin_client.get(f"/api/v1/hexagons/studies/{study.id}/consolidation")
    assert r.status_code == 200, r.text
    steps = [(s["external_id"], s["step"], s["tag"]) for s in r.json()["steps"]]
    # Procedure 1's first step (both right) is not queued; procedure 2's disputed ones lead.
    assert steps == [("2", 1, "VV"), ("2", 2, "VV"), ("1", 2, "V1")]
    assert set(r.json()["error_classes"]) == {
        "over-execution",
        "under-execution",
        "miscounting",
        "propagated error",
        "wrong colour",
        "other",
    }

    view = admin_client.get(f"/api/v1/hexagons/studies/{study.id}/consolidation/{items['1'].id}/2").json()
    assert view["instruction"] == "paint tile 1 blue" and view["tag"] == "V1"
    assert [e["differs"] for e in view["executors"]] == [[], [1]]
    assert view["instructor"]["before"] == board(t0=4) and view["executors"][1]["before"] == board(t0=4)

    page = admin_client.get(f"/hexagons/studies/{study.id}/consolidation/{items['1'].id}/2")
    assert page.status_code == 200 and "1 tiles differ: 1" in page.text and "Verifier 2" in page.text
    assert "disputed" in admin_client.get(f"/hexagons/studies/{study.id}/consolidation").text

    # Not a step of the procedure, not a Hexagons study: 404.
    assert admin_client.get(f"/api/v1/hexagons/studies/{study.id}/consolidation/{items['1'].id}/3").status_code == 404
    tom = create_tom_study(session, owner)
    assert admin_client.get(f"/api/v1/hexagons/studies/{tom.id}/consolidation").status_code == 404


def test_fixing_the_gold_board_rescores_and_moves_the_leaderboard(session, admin_client):
    owner = make_user(session, "researcher")
    study = disagreement_study(session, owner)
    items = _items(session, study)
    p2 = items["2"]
    before_means = _annotator_means(session, study)
    url = f"/api/v1/hexagons/studies/{study.id}/consolidation/{p2.id}/1"
    fixed = board(t0=4, t18=4)

    # Refused, naming the field, and nothing stored.
    for body, field in (
        ({"error_class": "sloppiness"}, "error_class"),
        ({"error_class": "other", "board": [0] * 179}, "board"),
        ({"error_class": "other", "board": [9] + [0] * 179}, "board"),
        ({"board": fixed}, "error_class"),
    ):
        r = admin_client.put(url, json=body)
        assert r.status_code == 422 and field in r.text, (body, r.text)
    session.expire_all()
    assert session.scalar(select(Consolidation)) is None and session.get(Item, p2.id).reference["boards"][0] == board(
        t0=4
    )

    r = admin_client.put(url, json={"error_class": "under-execution", "note": "tile 18 left white", "board": fixed})
    assert r.status_code == 200, r.text
    assert r.json()["rescored"] == 2 and r.json()["gold"] == fixed
    session.expire_all()
    ref = session.get(Item, p2.id).reference
    assert ref["boards"][0] == fixed and ref["instructor_boards"][0] == board(t0=4)
    # Both verifiers now match the gold board at step 1.
    for ann in session.scalars(select(Annotation).where(Annotation.item_id == p2.id)):
        assert ann.scores["per_step"][0]["board_f1"] == 1.0
    after_means = _annotator_means(session, study)
    assert after_means != before_means and all(a > b for a, b in zip(after_means, before_means))
    entry = session.scalar(select(AuditEntry).where(AuditEntry.action == "hexagons.consolidation"))
    assert entry.actor_id == admin_client.admin.id and entry.detail["before"] is None
    assert entry.detail["after"]["error_class"] == "under-execution" and entry.detail["after"]["gold"] == fixed

    # Still in the queue (decided, last), with the instructor's tag.
    rows = admin_client.get(f"/api/v1/hexagons/studies/{study.id}/consolidation").json()["steps"]
    assert (rows[-1]["external_id"], rows[-1]["step"], rows[-1]["error_class"], rows[-1]["fixed"]) == (
        "2",
        1,
        "under-execution",
        True,
    )

    # Clearing the decision makes the instructor's board gold again, scores as before.
    r = admin_client.put(url, json={"error_class": None})
    assert r.status_code == 200 and r.json()["rescored"] == 2
    session.expire_all()
    assert "instructor_boards" not in session.get(Item, p2.id).reference
    assert _annotator_means(session, study) == before_means
    last = session.scalars(
        select(AuditEntry).where(AuditEntry.action == "hexagons.consolidation").order_by(AuditEntry.id.desc())
    ).first()
    assert last.detail["before"]["gold"] == fixed and last.detail["after"] is None


def test_the_decision_form_fixes_gold(session, admin_client):
    owner = make_user(session, "researcher")
    study = disagreement_study(session, owner)
    p1 = _items(session, study)["1"]
    page = f"/hexagons/studies/{study.id}/consolidation/{p1.id}/2"
    token = admin_client.headers["X-CSRF-Token"]
    r = admin_client.post(
        page,
        data={"csrf_token": token, "error_class": "wrong colour", "note": "", "board": "[1, 2"},
        follow_redirects=True,
    )
    assert "Not saved: field &#39;board&#39;: board is not valid JSON" in r.text
    for hostile in ("[" * 100_000 + "]" * 100_000, "[" + "9" * 30 + "]"):  # 500s once
        r = admin_client.post(
            page,
            data={"csrf_token": token, "error_class": "wrong colour", "note": "", "board": hostile},
            follow_redirects=True,
        )
        assert r.status_code < 500 and "Not saved: field &#39;board&#39;: board is not valid JSON" in r.text
    r = admin_client.post(
        page,
        data={"csrf_token": token, "error_class": "wrong colour", "note": "green", "board": ""},
        follow_redirects=True,
    )
    assert "Step 2: wrong colour." in r.text and "Decided: <strong>wrong colour</strong>" in r.text
    session.expire_all()
    assert session.scalar(select(Consolidation)).fixed_board is None  # the instructor's board stands


def test_executors_label_abstraction_and_admins_adopt_the_majority(session, admin_client):
    owner = make_user(session, "researcher")
    study = disagreement_study(session, owner, label_abstraction=True)
    assert study.kind_settings["label_abstraction"] == 1
    p1 = _items(session, study)["1"]
    stored = session.scalars(select(Annotation.response).where(Annotation.item_id == p1.id)).all()
    assert sorted(r["labels"][1]["level"] for r in stored) == [0, 1]
    assert stored[0]["labels"][0] == {"level": 2, "mechanisms": ["object"]}

    from app.errors import InputError
    from app.kinds.hexagons import KIND

    steps = json.dumps([{"board": b} for b in PROCEDURES["1"][1]])
    on = {"label_abstraction": 1}
    for labels, field in (
        ([{"level": 2, "mechanisms": ["loops"]}] * 2, "labels.0.mechanisms.0"),
        ([{"level": 4, "mechanisms": []}] * 2, "labels.0.level"),
        ([{"level": 1, "mechanisms": []}], "labels"),
    ):
        with pytest.raises(InputError) as exc:
            KIND.parse_response({"steps": steps, "labels": json.dumps(labels)}, p1.payload, on)
        assert exc.value.field == field
    with pytest.raises(InputError) as exc:  # a study without the option takes none
        KIND.parse_response({"steps": steps, "labels": json.dumps([{"level": 1}] * 2)}, p1.payload, {})
    assert exc.value.field == "labels"

    url = f"/api/v1/hexagons/studies/{study.id}/consolidation/{p1.id}"
    view = admin_client.get(f"{url}/1").json()
    assert view["labels"] == {"given": 2, "majority": {"level": 2, "mechanisms": ["object"]}}
    r = admin_client.put(f"{url}/1", json={"adopt_majority": True})
    assert r.status_code == 200, r.text
    # Step 2: the executors split 0 / 1, so no level is adopted; an admin labels it by hand.
    assert admin_client.get(f"{url}/2").json()["labels"]["majority"] == {"level": None, "mechanisms": []}
    r = admin_client.put(f"{url}/2", json={"abstraction": {"level": 7}})
    assert r.status_code == 422 and "abstraction.level" in r.text
    r = admin_client.put(f"{url}/2", json={"abstraction": {"level": 1, "mechanisms": ["symmetry", "object"]}})
    assert r.status_code == 200
    session.expire_all()
    assert session.get(Item, p1.id).reference["abstraction"] == [
        {"level": 2, "mechanisms": ["object"]},
        {"level": 1, "mechanisms": ["object", "symmetry"]},
    ]
    audited = session.scalars(
        select(AuditEntry).where(AuditEntry.action == "hexagons.abstraction").order_by(AuditEntry.id)
    ).all()
    assert [a.detail["adopted"] for a in audited] == [True, False]
    assert audited[1].detail["before"] == {"level": None, "mechanisms": []}

    # The page's abstraction form, and its help from the paper.
    token = admin_client.headers["X-CSRF-Token"]
    r = admin_client.post(
        f"/hexagons/studies/{study.id}/consolidation/{p1.id}/2/abstraction",
        data={"csrf_token": token, "level": "3", "mechanisms": ["recursion"]},
        follow_redirects=True,
    )
    assert "abstraction level 3" in r.text and "High-level abstraction" in r.text
    session.expire_all()
    assert session.get(Item, p1.id).reference["abstraction"][1] == {"level": 3, "mechanisms": ["recursion"]}


def test_only_admins_consolidate(session, app):
    owner = make_user(session, "researcher")
    study = disagreement_study(session, owner)
    with TestClient(app) as c:
        token = login(c, owner)
        assert c.get(f"/api/v1/hexagons/studies/{study.id}/consolidation").status_code == 403
        p1 = _items(session, study)["1"]
        r = c.put(
            f"/api/v1/hexagons/studies/{study.id}/consolidation/{p1.id}/2",
            json={"error_class": "other"},
            headers={"X-CSRF-Token": token},
        )
        assert r.status_code == 403
    assert session.scalar(select(Consolidation)) is None

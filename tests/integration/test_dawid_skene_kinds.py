"""Dawid-Skene labels beside the majority for every kind with a categorical judgement
(`TaskKind.label_value()`): A3DS's pick (`choice`), STS's marker (`marker`). Hexagons has
none (its verifiers execute boards), and an STS play study's answers are actions: neither
gets a row, and the sweeper does not refit them again and again.

Each study is hand-built: three annotators answer every item through the assignment engine,
one always right, one wrong on every fourth item, one always wrong (the flipper). On the
careless annotator's wrong items the flipper joins them and the majority is wrong; Dawid-Skene
reads the flipper backwards and gets every item right."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from app import jobs
from app.auth.models import User
from app.demo import simulate_task
from app.kinds import get_kind
from app.leaderboards.annotators import NAME, TASK, cached, dawid_skene, refresh
from app.quality import service as quality
from app.studies import services
from app.studies.models import Item, Participant
from tests.conftest import login, make_user


def _settings(title: str) -> services.StudySettings:
    return services.StudySettings(title=title, bundle_size=50, gold_rate=0.0, annotations_per_item=3)


def _a3ds(session, owner):
    # One speaker: a pair captioned twice is one exclusion group (a worker sees one caption of it).
    design = {"pairs": {"z": {"1": 4, "2": 4, "3": 4}}, "speakers": ["contrastive"], "seed": 5}
    return services.create_study(session, owner, "a3ds", _settings("DS A3DS"), json.dumps(design).encode(), "design")


def _sts(session, owner):
    from app.kinds.sts.demo import demo_lines

    lines = [x for x in demo_lines() if not x.get("reference")]
    chosen = [x for x in lines if x["agent"] == "expert"][:6] + [x for x in lines if x["agent"] == "random"][:6]
    return services.create_study(
        session, owner, "sts", _settings("DS STS"), "\n".join(json.dumps(x) for x in chosen).encode(), "continuations"
    )


def _a3ds_truth(item: Item) -> str:
    return str(item.reference["target"])


def _sts_truth(item: Item) -> str:
    from app.kinds.sts.score import truth

    return truth(item.reference)[0]


# kind -> (build the study, the field, the item's true label, the other label, the answer)
KINDS = {
    "a3ds": (_a3ds, "choice", _a3ds_truth, {"1": "2", "2": "1"}, lambda label: {"choice": label}),
    "sts": (
        _sts,
        "marker",
        _sts_truth,
        {"success": "failure", "failure": "success"},
        lambda label: {"marker": label, "step": 0},
    ),
}


@pytest.fixture(params=sorted(KINDS))
def built(request, session):
    """(kind, study, owner, {item id: true label}, the items the careless annotator gets wrong)."""
    kind = request.param
    build, _, truth_of, flip, answer = KINDS[kind]
    owner = make_user(session, "researcher")
    study = build(session, owner)
    services.set_state(session, study, "live", owner)
    items = session.scalars(
        select(Item).where(Item.study_id == study.id, Item.is_gold.is_(False)).order_by(Item.id)
    ).all()
    truth = {i.id: truth_of(i) for i in items}
    assert len(set(truth.values())) == 2, truth  # both labels are true somewhere
    careless_wrong = {i.id for k, i in enumerate(items) if k % 4 == 0}

    def worker(wrong):
        return lambda item, rng: answer(flip[truth[item.id]] if item.id in wrong else truth[item.id])

    for w, wrong in enumerate((set(), careless_wrong, set(truth))):  # careful, careless, flipper
        assert simulate_task(session, study, f"ds-{kind}-{w}", worker(wrong), 5.0, seed=w) == len(items)
    return kind, study, owner, truth, careless_wrong


def _worker(session, kind: str, w: int) -> User:
    return session.scalar(select(User).where(User.external_id == f"ds-{kind}-{w}"))


def _board(client, study) -> dict:
    r = client.get(f"/api/v1/studies/{study.id}/leaderboard")
    assert r.status_code == 200, r.text
    return r.json()


def _row(board: dict, kind: str) -> dict | None:
    return next((r for r in board["rows"] if r["type"] == kind), None)


def _fit_in_background(study) -> None:
    assert refresh(min_interval_s=0) == [study.id]
    assert jobs.run_queued_once() == 1


def test_the_kinds_name_their_categorical_judgement():
    assert get_kind("a3ds").label_value() == "choice"
    assert get_kind("sts").label_value() == "marker"
    assert get_kind("tom").label_value() == get_kind("tom").agreement_value() == "answer"
    assert get_kind("hexagons").label_value() is None  # verifiers execute boards: no label
    # The published agreement figures are unchanged: A3DS and STS still agree on the score.
    assert get_kind("a3ds").agreement_value() is None and get_kind("sts").agreement_value() is None


def test_dawid_skene_reads_the_flipper_backwards(session, built):
    kind, study, _, truth, careless_wrong = built
    _, field, _, flip, _ = KINDS[kind]
    result = dawid_skene(session, study)
    assert result["field"] == field
    assert result["labels"] == sorted(flip)
    assert result["annotations"] == 3 * len(truth) and result["items"] == len(truth)
    labels = {i: v["label"] for i, v in result["item_labels"].items()}
    assert labels == truth  # every item right, where the majority errs on careless_wrong
    assert result["differs_from_majority"] == len(careless_wrong) > 0
    matrices = {a["name"]: a["confusion"] for a in result["annotators"]}
    careful, flipper = (matrices[_worker(session, kind, w).pseudonym] for w in (0, 2))
    assert careful[0][0] > 0.95 and careful[1][1] > 0.95  # near the identity
    assert flipper[0][1] > 0.95 and flipper[1][0] > 0.95  # reversed
    assert result["row"]["accuracy"]["mean"] == 1.0


def test_the_row_beside_the_majority_and_the_review_page(client, session, built):
    kind, study, owner, truth, careless_wrong = built
    login(client, owner)
    assert _board(client, study)["dawid_skene"]["state"] == "computing"
    _fit_in_background(study)
    b = _board(client, study)
    assert b["dawid_skene"]["state"] == "done" and b["dawid_skene"]["fresh"]
    assert b["dawid_skene"]["differs_from_majority"] == len(careless_wrong)
    types = [r["type"] for r in b["rows"]]
    assert types.index("dawid_skene") == types.index("majority") + 1
    ds, maj = _row(b, "dawid_skene"), _row(b, "majority")
    assert ds["name"] == NAME and ds["answered"] == maj["answered"] == len(truth)
    assert ds["accuracy"]["mean"] == 1.0
    assert maj["accuracy"]["mean"] == pytest.approx(1 - len(careless_wrong) / len(truth))

    page = client.get(f"/studies/{study.id}/leaderboard").text
    table = page.split('id="dawid-skene-table"', 1)[1].split("</table>", 1)[0]
    assert NAME in table and "Human majority (per item)" in table

    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    client.post("/logout", data={"csrf_token": csrf})
    login(client, make_user(session, "admin"))
    review = client.get(f"/admin/studies/{study.id}/review")
    assert review.status_code == 200
    flipper = _worker(session, kind, 2).pseudonym
    m = re.search(r'data-worker="%s">(.*?)</table>' % re.escape(flipper), review.text, re.DOTALL)
    assert m, review.text[-3000:]
    cells = [float(x) for x in re.findall(r"<td>([0-9.]+)</td>", m.group(1))]
    assert len(cells) == 4 and cells[0] < 0.05 and cells[3] < 0.05 and cells[1] > 0.95 and cells[2] > 0.95


def test_a_rejected_flippers_answers_drop_out(client, session, built):
    kind, study, owner, truth, _ = built
    _fit_in_background(study)
    flipper = _worker(session, kind, 2)
    participant = session.scalar(
        select(Participant).where(Participant.study_id == study.id, Participant.worker_id == flipper.id)
    )
    quality.decide(session, study, [participant.id], "rejected", make_user(session, "admin"), reason="flips")
    assert cached(session, study)["state"] == "stale"
    _fit_in_background(study)
    status = cached(session, study)
    assert status["state"] == "done" and status["key"]["annotations"] == 2 * len(truth)
    result = status["result"]
    assert flipper.pseudonym not in {a["name"] for a in result["annotators"]}
    assert sum(a["answers"] for a in result["annotators"]) == result["annotations"] == 2 * len(truth)
    assert dawid_skene(session, study)["annotations"] == 2 * len(truth)


def test_a_study_without_a_label_gets_no_row_and_is_not_refitted_each_minute(client, session):
    """An STS play study: the answers are actions, not markers."""
    owner = make_user(session, "researcher")
    study = services.create_study(
        session,
        owner,
        "sts",
        _settings("DS play"),
        json.dumps({"level": "BabyAI-GoToLocal-v0", "seed": 2, "id": "m2"}).encode(),
        "missions",
    )
    services.set_state(session, study, "live", owner)
    assert simulate_task(session, study, "ds-player", lambda item, rng: {"actions": [0, 2]}, 5.0, seed=0) == 1
    assert dawid_skene(session, study) is None
    assert cached(session, study)["state"] == "computing"  # until its first fit says so
    _fit_in_background(study)
    assert cached(session, study) is None
    assert refresh(min_interval_s=0) == []  # nothing new to fit
    login(client, owner)
    assert _board(client, study)["dawid_skene"] is None
    done = session.scalars(select(jobs.Job).where(jobs.Job.task == TASK, jobs.Job.study_id == study.id)).all()
    assert [j.state for j in done] == ["done"]

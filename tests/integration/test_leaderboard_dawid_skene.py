"""Dawid-Skene labels beside the majority (app/leaderboards/annotators.py): computed by a
background job, cached and shown with its age on the leaderboard page, in the API and, as each
annotator's confusion matrix, on the admin review page; the job sweeper starts the job, never
a page; a rejected worker's answers drop out."""

from __future__ import annotations

import math
import re

import pytest
from sqlalchemy import func, select

from app import jobs
from app.auth.models import User
from app.kinds.tom.demo import simulate_worker
from app.leaderboards.annotators import NAME, TASK, refresh
from app.quality import service as quality
from app.studies.models import Annotation, Participant
from tests.conftest import create_tom_study, login, make_user


@pytest.fixture
def study(session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=40, gold_rate=0.1, annotations_per_item=3)
    # Two careful annotators and one who gives the wrong answer to every item (accuracy 0).
    for w, acc in enumerate((0.95, 0.9, 0.0)):
        simulate_worker(session, study, f"sim-{w}", acc, seed=w)
    return study, owner


def board(client, study) -> dict:
    r = client.get(f"/api/v1/studies/{study.id}/leaderboard")
    assert r.status_code == 200, r.text
    return r.json()


def ds_row(b: dict) -> dict | None:
    return next((r for r in b["rows"] if r["type"] == "dawid_skene"), None)


def valid_answers(session, study) -> int:
    return session.scalar(
        select(func.count())
        .select_from(Annotation)
        .where(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    )


def test_dawid_skene_row_from_the_background_job(client, session, study):
    study, owner = study
    login(client, owner)
    first = board(client, study)
    assert first["dawid_skene"]["state"] == "computing" and ds_row(first) is None
    assert 'id="dawid-skene-state">computing' in client.get(f"/studies/{study.id}/leaderboard").text
    assert not jobs.run_queued_once()  # a page starts nothing
    # The sweeper starts one job per study, never a second while one waits.
    assert jobs.refresh_cached_models() == [study.id]
    assert refresh(min_interval_s=0) == []
    assert jobs.run_queued_once() == 1

    b = board(client, study)
    assert b["dawid_skene"]["state"] == "done" and b["dawid_skene"]["fresh"]
    assert b["dawid_skene"]["annotations"] == valid_answers(session, study) == 108
    types = [r["type"] for r in b["rows"]]
    assert types.index("dawid_skene") == types.index("majority") + 1  # beside the majority
    row, maj = ds_row(b), next(r for r in b["rows"] if r["type"] == "majority")
    assert row["name"] == NAME
    assert set(row["accuracy"]) == {"mean", "low", "high", "n", "method"}
    assert row["accuracy"]["n"] == maj["accuracy"]["n"] == row["answered"] == 36  # items answered
    assert row["accuracy"]["method"] == maj["accuracy"]["method"]
    assert row["accuracy"]["low"] <= row["accuracy"]["mean"] <= row["accuracy"]["high"]
    # The flipper is outvoted on every item, so majority and DS agree here.
    assert row["accuracy"]["mean"] >= maj["accuracy"]["mean"]
    assert refresh(min_interval_s=0) == []  # fresh: nothing started again

    page = client.get(f"/studies/{study.id}/leaderboard").text
    table = page.split('id="dawid-skene-table"', 1)[1].split("</table>", 1)[0]
    assert NAME in table and "Human majority (per item)" in table
    assert re.search(r'id="dawid-skene-age">\d+ min ago', page)
    # The generic table's section comes first, the agreement after.
    assert page.index('id="leaderboard"') < page.index('id="dawid-skene"') < page.index("Agreement between")

    # The review page: each annotator's confusion matrix; the flipper's is reversed.
    admin = make_user(session, "admin")
    client.post("/logout", data={"csrf_token": re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)})
    login(client, admin)
    review = client.get(f"/admin/studies/{study.id}/review")
    assert review.status_code == 200
    flipper = session.scalar(select(User).where(User.external_id == "sim-2"))
    m = re.search(r'data-worker="%s">(.*?)</table>' % re.escape(flipper.pseudonym), review.text, re.DOTALL)
    assert m, review.text[-3000:]
    cells = [float(x) for x in re.findall(r"<td>([0-9.]+)</td>", m.group(1))]
    assert len(cells) == 4 and cells[0] < 0.05 and cells[3] < 0.05 and cells[1] > 0.95 and cells[2] > 0.95


def test_a_rejected_workers_answers_do_not_count(client, session, study):
    study, owner = study
    login(client, owner)
    refresh()
    jobs.run_queued_once()
    flipper = session.scalar(
        select(Participant).join(User, User.id == Participant.worker_id).where(User.external_id == "sim-2")
    )
    name = session.get(User, flipper.worker_id).pseudonym
    before = board(client, study)
    assert name in {a["name"] for a in jobs_result(session, study)["annotators"]}

    quality.decide(session, study, [flipper.id], "rejected", make_user(session, "admin"), reason="flips")
    stale = board(client, study)["dawid_skene"]
    assert stale["state"] == "stale" and stale["computed_for"]["annotations"] == 108
    assert stale["key"]["annotations"] == valid_answers(session, study) == 72
    assert ds_row(board(client, study)) == ds_row(before)  # the older result, with its age
    assert refresh() == []  # refitted at most every REFRESH_EVERY_S
    assert refresh(min_interval_s=0) == [study.id]
    assert jobs.run_queued_once() == 1
    after = board(client, study)
    assert after["dawid_skene"]["state"] == "done" and after["dawid_skene"]["annotations"] == 72
    result = jobs_result(session, study)
    assert name not in {a["name"] for a in result["annotators"]}
    assert sum(a["answers"] for a in result["annotators"]) == 72
    assert not math.isnan(ds_row(after)["accuracy"]["mean"])


def jobs_result(session, study) -> dict:
    session.expire_all()
    job = session.scalars(
        select(jobs.Job)
        .where(jobs.Job.task == TASK, jobs.Job.study_id == study.id, jobs.Job.state == "done")
        .order_by(jobs.Job.id.desc())
    ).first()
    return job.result["result"]

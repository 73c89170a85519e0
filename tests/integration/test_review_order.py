"""The review queue puts the workers most likely to be bad first: a straight-liner (one answer
to everything, fast) above careful workers, in a study's queue and in the queue of every study."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select, update

from app.auth.models import IMPORTED_PLATFORM, User
from app.kinds.tom.demo import simulate_worker
from app.quality import service as quality
from app.studies.imports import import_annotations
from app.studies.models import Item, Participant, Study
from tests.conftest import create_tom_study, login, make_user, statements_run


def _pseudonym(session, external_id: str) -> str:
    return session.scalar(select(User.pseudonym).where(User.external_id == external_id))


@pytest.fixture
def studies(session, monkeypatch):
    # Which slots of a task are gold is keyed by the app's secret (random per test process):
    # fixed here, so that each simulated worker gets the same items every run. Ten answers of a
    # careful worker can be lopsided by chance (8 of 10 alike: sameness 0.28); with the random
    # secret one run in three drew such a task and failed.
    from app.config import get_settings

    monkeypatch.setenv("SECRET_KEY", "review-order-Qv7Lr2Xp9Wm4Tz8Kc3Nb6Hd1Jf5Gs0Ya")
    get_settings.cache_clear()
    owner = make_user(session, "researcher")
    first = create_tom_study(session, owner, title="First", bundle_size=10, gold_rate=0.2, annotations_per_item=5)
    second = create_tom_study(session, owner, title="Second", bundle_size=10, gold_rate=0.2, annotations_per_item=5)
    for i, acc in enumerate((0.95, 0.9, 0.85, 0.8)):
        simulate_worker(session, first, f"careful-{i}", acc, seed=i)
        simulate_worker(session, second, f"careful-b{i}", acc, seed=10 + i)
    simulate_worker(session, first, "straight-liner", 0.0, seed=99, always="Yes")
    # A careful worker who is merely quick stays below the straight-liner.
    simulate_worker(session, second, "quick", 0.9, seed=50, median_s=4.0)
    yield first, second
    monkeypatch.undo()
    get_settings.cache_clear()  # the next test reads the process's own secret again


def test_a_straight_liner_ranks_first_in_the_study_queue(session, studies):
    first, _ = studies
    queue = quality.review_queue(session, first)
    liner = _pseudonym(session, "straight-liner")
    assert queue[0]["worker"] == liner
    assert queue[0]["signals"]["sameness"] == pytest.approx(1.0)
    assert queue[0]["signals"]["speed"] > 0.7  # about 1 s against a typical 9 s
    careful = [w for w in queue if w["worker"] != liner]
    assert len(careful) == 4
    assert all(queue[0]["risk"] > w["risk"] + 0.3 for w in careful)
    # Careful workers vary their answers as the study does, and keep its pace.
    assert all(w["signals"]["sameness"] < 0.2 and w["signals"]["speed"] < 0.5 for w in careful), [
        (w["external_id"], w["signals"]) for w in careful
    ]
    assert [w["risk"] for w in queue] == sorted((w["risk"] for w in queue), reverse=True)


def test_every_study_queue_orders_across_studies(session, studies, client):
    first, second = studies
    queue = quality.review_queue_all(session, "pending")
    assert {w["study_id"] for w in queue} == {first.id, second.id}
    assert len(queue) == 10
    assert queue[0]["worker"] == _pseudonym(session, "straight-liner")
    quick = next(w for w in queue if w["worker"] == _pseudonym(session, "quick"))
    assert quick["signals"]["speed"] > 0.2  # faster than the study's typical worker
    assert queue[0]["risk"] > quick["risk"]
    # The admin menu leads there; the page shows the same order.
    admin = make_user(session, "admin")
    login(client, admin)
    home = client.get("/studies").text
    assert 'href="/admin/review"' in home
    html = client.get("/admin/review").text
    rows = re.findall(r'<tr data-worker="([^"]+)" data-study="(\d+)"', html)
    assert [r[0] for r in rows] == [w["worker"] for w in queue]
    assert "Second" in html and "First" in html
    # A decision drops a worker from the pending queue.
    quality.decide(session, first, [queue[0]["participant_id"]], "rejected", admin, reason="straight-lining")
    html = client.get("/admin/review?status=pending").text
    assert _pseudonym(session, "straight-liner") not in html
    assert _pseudonym(session, "straight-liner") in client.get("/admin/review?status=rejected").text


def test_signals_are_none_without_data():
    assert quality.risk_score({}) is None
    signals = quality.risk_signals(None, 5.0, 10.0, {"Yes": 3}, {"Yes": 10, "No": 10})
    assert set(signals) == {"speed"}  # too few answers to judge their variety; no gold
    assert quality.risk_score(signals) == pytest.approx(0.5)
    one_value_study = quality.risk_signals(1.0, None, None, {"Yes": 9}, {"Yes": 30})
    assert set(one_value_study) == {"gold"}  # everyone gave the same answer: no sameness signal


def _tom_import(session, study, owner, n_annotators: int, answer: str = "Yes") -> None:
    """Earlier annotations pasted in by the import: real participants with no times (0 ms)."""
    ids = session.scalars(select(Item.external_id).where(Item.study_id == study.id).order_by(Item.id).limit(10)).all()
    data = "".join(
        json.dumps({"question_id": q, "answer": answer, "annotator": f"earlier-{k}"}) + "\n"
        for k in range(n_annotators)
        for q in ids
    ).encode()
    assert import_annotations(session, study, owner, data, "earlier")["annotators"] == n_annotators


def _signals(session, study) -> dict[str, dict]:
    return {w["worker"]: w["signals"] for w in quality.review_queue(session, study)}


def _same(a: dict[str, dict], b: dict[str, dict]) -> bool:
    return a.keys() == b.keys() and all(a[k] == pytest.approx(b[k]) for k in a)


def test_imported_annotators_neither_set_the_pace_nor_join_the_queue(session, client):
    """Imported annotators have no times: they must not drag the study's typical pace to 0
    (where the 2 s floor would become the reference), skew its answer spread, or top the queue
    as 'fast' workers of their own."""
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="With prior", bundle_size=10, gold_rate=0.2, annotations_per_item=5)
    for i, acc in enumerate((0.95, 0.9)):
        simulate_worker(session, study, f"careful-{i}", acc, seed=i)
    simulate_worker(session, study, "clicker", 0.0, seed=99, always="Yes")
    before = _signals(session, study)
    clicker = _pseudonym(session, "clicker")
    assert before[clicker]["speed"] > 0.8  # about 1 s against a typical 9 s
    _tom_import(session, study, owner, 4)
    queue = quality.review_queue(session, study)
    assert {w["worker"] for w in queue} == set(before)  # no imported annotator in the queue
    assert _same(_signals(session, study), before)  # nobody's signals moved
    # Nor in the queue of every study, whatever the status shown.
    admin = make_user(session, "admin")
    login(client, admin)
    imported = session.scalars(select(User.pseudonym).where(User.platform == IMPORTED_PLATFORM)).all()
    assert len(imported) == 4
    for status in ("approved", "all"):
        html = client.get(f"/admin/review?status={status}").text
        assert not any(p in html for p in imported)
        assert "fast: median 0.0s" not in html


def test_a_rejected_workers_answers_leave_the_studys_pace_and_spread(session):
    """Once the clicker is rejected their answers are out of every aggregate, the study's
    typical pace and answer spread included: the others' signals are as before they came."""
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Rejection", bundle_size=10, gold_rate=0.2, annotations_per_item=5)
    for i, acc in enumerate((0.95, 0.9, 0.85, 0.8)):
        simulate_worker(session, study, f"careful-{i}", acc, seed=i)
    before = _signals(session, study)
    simulate_worker(session, study, "clicker", 0.0, seed=99, always="Yes")
    clicker = _pseudonym(session, "clicker")
    with_clicker = _signals(session, study)
    assert not _same({k: v for k, v in with_clicker.items() if k != clicker}, before)  # they did count
    pid = next(w["participant_id"] for w in quality.review_queue(session, study) if w["worker"] == clicker)
    quality.decide(session, study, [pid], "rejected", make_user(session, "admin"), reason="always Yes")
    after = quality.review_queue(session, study)
    assert _same({w["worker"]: w["signals"] for w in after if w["worker"] != clicker}, before)
    # The rejected row still shows their own record.
    row = next(w for w in after if w["worker"] == clicker)
    assert row["status"] == "rejected" and row["median_seconds"] < 2.0 and row["signals"]["sameness"] == 1.0


def test_a_study_of_an_uninstalled_kind_does_not_break_the_queue(session, studies, client):
    """A study whose kind is no longer installed is left out of every study's queue, and the
    page says so, instead of the whole page failing."""
    first, second = studies
    session.execute(update(Study).where(Study.id == second.id).values(kind="retired-kind"))
    session.commit()
    session.expire_all()
    login(client, make_user(session, "admin"))
    r = client.get("/admin/review")
    assert r.status_code == 200, r.text
    rows = re.findall(r'<tr data-worker="[^"]+" data-study="(\d+)"', r.text)
    assert set(rows) == {str(first.id)} and len(rows) == 5
    note = re.search(r'<p id="review-skipped"[^>]*>(.*?)</p>', r.text, re.S).group(1)
    assert "1 study" in note and "Second" in note and "retired-kind" in note
    # That study's own pages say what is wrong (409), as page and as API, instead of a 500.
    for path in (f"/admin/studies/{second.id}/review", f"/studies/{second.id}"):
        page = client.get(path)
        assert page.status_code == 409 and "retired-kind" in page.text and "not installed" in page.text
    api = client.get(f"/api/v1/studies/{second.id}/review")
    assert api.status_code == 409 and "not installed" in api.json()["detail"]


def test_every_study_queue_shows_at_most_a_page_of_rows(session, client):
    """A big crowd is shown a page at a time (quality.PAGE_ROWS rows), with the count and a
    link to the next page."""
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Crowd", bundle_size=5, gold_rate=0.2)
    n = quality.PAGE_ROWS + 5
    users = [
        User(role="worker", platform="prolific", external_id=f"crowd-{i}", pseudonym=f"w-crowd-{i}") for i in range(n)
    ]
    session.add_all(users)
    session.flush()
    session.add_all([Participant(study_id=study.id, worker_id=u.id) for u in users])
    session.commit()
    login(client, make_user(session, "admin"))
    html = client.get("/admin/review").text
    first = re.findall(r'<tr data-worker="([^"]+)"', html)
    assert len(first) == quality.PAGE_ROWS
    assert f"1–{quality.PAGE_ROWS} of {n}" in html
    assert 'href="?status=pending&amp;page=2"' in html
    second = re.findall(r'<tr data-worker="([^"]+)"', client.get("/admin/review?status=pending&page=2").text)
    assert len(second) == 5 and not set(first) & set(second)
    assert set(first) | set(second) == {u.pseudonym for u in users}
    # Past the end (the queue shrank since the link was made): the last page.
    assert re.findall(r'<tr data-worker="([^"]+)"', client.get("/admin/review?page=9").text) == second
    for bad in ("0", "x"):
        assert client.get(f"/admin/review?page={bad}").status_code == 422


def test_deciding_from_a_replay_opened_in_every_studys_queue_goes_back_there(session, studies, client):
    first, _ = studies
    login(client, make_user(session, "admin"))
    queue = client.get("/admin/review").text
    liner = _pseudonym(session, "straight-liner")
    link = re.search(rf'<tr data-worker="{liner}".*?href="([^"]+/participants/\d+\?from=all)"', queue, re.S)
    assert link, "the replay link says where it was opened from"
    replay = client.get(link.group(1).replace("&amp;", "&")).text
    assert '<a href="/admin/review">Back to the review queue</a>' in replay
    form = re.search(r'<form method="post" action="([^"]+)" id="decide-form".*?</form>', replay, re.S)
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form.group(0)))
    assert fields["back"] == "all"
    r = client.post(
        form.group(1), data={**fields, "decision": "reject", "reason": "always Yes"}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"] == "/admin/review"
    assert "1 worker(s) rejected." in client.get(r.headers["location"]).text
    # Opened from the study's own queue, the replay goes back there.
    pid = re.search(r"/participants/(\d+)", link.group(1)).group(1)
    own = client.get(f"/admin/studies/{first.id}/participants/{pid}").text
    assert f'<a href="/admin/studies/{first.id}/review">Back to the review queue</a>' in own


def test_every_study_queue_takes_the_same_queries_for_more_studies(session, studies):
    """Each aggregate is grouped by study: a third study adds rows, not queries."""
    with statements_run(session.get_bind()) as statements:
        two = len(quality.review_queue_all(session, "pending"))
        n_two, statements[:] = len(statements), []
        third = create_tom_study(
            session,
            make_user(session, "researcher"),
            title="Third",
            bundle_size=10,
            gold_rate=0.2,
            annotations_per_item=5,
        )
        simulate_worker(session, third, "careful-c", 0.9, seed=30)
        statements[:] = []
        assert len(quality.review_queue_all(session, "pending")) == two + 1
        assert len(statements) == n_two, statements


def test_a_batch_decision_names_the_first_bad_id_as_given_and_changes_nothing(session, studies, client):
    first, second = studies
    mine = session.scalars(
        select(Participant.id).where(Participant.study_id == first.id).order_by(Participant.id)
    ).all()
    theirs = session.scalars(
        select(Participant.id).where(Participant.study_id == second.id).order_by(Participant.id)
    ).all()
    before = {p: session.get(Participant, p).status for p in mine}
    admin = make_user(session, "admin")
    session.commit()
    hdr = {"X-CSRF-Token": login(client, admin)}
    bad_first, bad_later = 10**6, theirs[0]  # the later one is the smaller id
    r = client.post(
        f"/api/v1/studies/{first.id}/review",
        json={"participant_ids": [mine[1], bad_first, mine[0], bad_later], "decision": "reject", "reason": "checked"},
        headers=hdr,
    )
    assert r.status_code == 404, r.text  # an id in the body naming no row, as in a path
    assert f"no participant {bad_first} in this study" in r.text
    session.expire_all()
    assert {p: session.get(Participant, p).status for p in mine} == before
    # Rejected participants in an approval batch: the first as given is named, here the one
    # of the larger id.
    for p in (mine[2], mine[4]):
        assert (
            client.post(
                f"/api/v1/studies/{first.id}/review",
                headers=hdr,
                json={"participant_ids": [p], "decision": "reject", "reason": "checked"},
            ).status_code
            == 200
        )
    r = client.post(
        f"/api/v1/studies/{first.id}/review",
        json={"participant_ids": [mine[3], mine[4], mine[2]], "decision": "approve"},
        headers=hdr,
    )
    assert r.status_code == 409 and f"participant {mine[4]} was rejected" in r.text, r.text
    session.expire_all()
    assert session.get(Participant, mine[3]).status == before[mine[3]]

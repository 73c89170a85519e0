"""Prolific from inside Proctor, against a local fake of Prolific's API (tests/fakes/prolific.py,
on loopback; the real service is never called): the token kept sealed, a study priced, made
and published, the review queue's decisions carried to its submissions, bonuses paid once
whatever fails between the steps, and `proctor prolific check`. On SQLite and PostgreSQL, but
for the tests marked SQLITE_ONLY (a token, a study made and published, the pages' forms):
one call to the fake after another, nothing that two transactions could race on."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import select, text

from app.audit import AuditEntry
from app.auth.security import create_token
from app.crowd import sealed
from app.crowd.models import BonusPayment, CrowdAccount
from app.quality import service as quality
from app.studies.models import Participant
from app.studies.consent import consent_version
from tests.conftest import create_tom_study, make_user
from tests.fakes.prolific import FakeProlific, Served

TOKEN = "prolific-token-" + "s3cret" * 4
# The payments, reviews, reclaimed slots and comprehension attempts stay on both backends: what
# is paid or counted once, whatever fails between the steps, rests on their transactions.
SQLITE_ONLY = pytest.mark.backend_agnostic("calls to the fake one after another, no race")


@pytest.fixture(scope="module")
def served():
    with Served(FakeProlific()) as fake:
        env = pytest.MonkeyPatch()
        env.setenv("PROLIFIC_API_URL", fake.url)
        yield fake
        env.undo()


@pytest.fixture
def fake(served):
    """The module's fake, emptied: a fresh Prolific for each test."""
    fresh = FakeProlific(url=served.url)
    served.__dict__.update({k: v for k, v in fresh.__dict__.items() if k != "url"})
    served.add_token(TOKEN)
    return served


@pytest.fixture
def world(fake, client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=4, gold_rate=0.0, title="Prolific study", estimated_minutes=12)
    headers = {"Authorization": f"Bearer {create_token(session, owner)}"}
    session.commit()
    return {"owner": owner, "study": study, "headers": headers, "client": client, "session": session}


def _api(w, method: str, path: str, **kw):
    return w["client"].request(method, f"/api/v1{path}", headers=w["headers"], **kw)


def _published(w, fake) -> str:
    """Token stored, study made on Prolific and published: its Prolific id."""
    assert _api(w, "PUT", "/prolific/token", json={"token": TOKEN}).status_code == 200
    r = _api(w, "POST", f"/studies/{w['study'].id}/prolific", json={"reward_cents": 150, "places": 20})
    assert r.status_code == 201, r.text
    pid = r.json()["prolific_id"]
    r = _api(w, "POST", f"/studies/{w['study'].id}/prolific/transition", json={"action": "publish"})
    assert r.status_code == 200 and r.json()["status"] == "ACTIVE", r.text
    return pid


def _arrive(w, fake, prolific_id: str, participant: str) -> str:
    """A participant starts the study on Prolific and follows its URL into Proctor: their
    submission's id (the SESSION_ID)."""
    sub = fake.join(prolific_id, participant)
    url = fake.studies[prolific_id]["external_study_url"]
    url = url.replace("{{%PROLIFIC_PID%}}", participant).replace("{{%STUDY_ID%}}", prolific_id)
    url = url.replace("{{%SESSION_ID%}}", sub)
    from urllib.parse import urlsplit

    from fastapi.testclient import TestClient

    link = urlsplit(url)
    with TestClient(w["client"].app) as browser:  # the participant's own browser
        r = browser.get(f"{link.path}?{link.query}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/task/{w['study'].slug}", r.text
    return sub


@SQLITE_ONLY
def test_token_is_checked_and_kept_sealed(world, fake):
    r = _api(world, "PUT", "/prolific/token", json={"token": "not-a-token-prolific-knows"})
    assert r.status_code == 422 and "does not accept" in r.json()["detail"]
    r = _api(world, "PUT", "/prolific/token", json={"token": TOKEN})
    assert r.status_code == 200 and r.json()["account"] == "researcher@example.org"
    session = world["session"]
    session.expire_all()
    stored = session.execute(text("SELECT token_sealed FROM crowd_accounts")).scalar_one()
    assert TOKEN not in stored and "s3cret" not in stored  # not readable in the database
    assert sealed.unseal(stored) == TOKEN  # but opens under this SECRET_KEY
    assert _api(world, "GET", "/prolific/account").json()["email"] == "researcher@example.org"
    calls = session.scalars(select(AuditEntry).where(AuditEntry.action == "prolific.call")).all()
    assert [(c.detail["path"], c.detail["status"]) for c in calls] == [
        ("users/me/", 401),
        ("users/me/", 200),
        ("users/me/", 200),
    ]


@SQLITE_ONLY
def test_token_sealed_under_another_key_is_refused_plainly(world, fake, monkeypatch):
    _api(world, "PUT", "/prolific/token", json={"token": TOKEN})
    from app.config import get_settings

    monkeypatch.setenv("SECRET_KEY", "another-key-" + "x" * 40)
    get_settings.cache_clear()
    r = _api(world, "GET", "/prolific/account")
    assert r.status_code == 409 and "store the token again" in r.json()["detail"]


@SQLITE_ONLY
def test_nothing_without_a_token(world, fake):
    r = _api(world, "POST", f"/studies/{world['study'].id}/prolific/cost", json={"reward_cents": 150, "places": 20})
    assert r.status_code == 409 and "no Prolific token" in r.json()["detail"]
    assert fake.calls == []


@SQLITE_ONLY
def test_study_priced_made_and_published(world, fake):
    study = world["study"]
    _api(world, "PUT", "/prolific/token", json={"token": TOKEN})
    r = _api(world, "POST", f"/studies/{study.id}/prolific/cost", json={"reward_cents": 150, "places": 20})
    # The fake's fee is a third: 150 x 20 = 3000 cents of rewards, 3999.9 -> 4000 in all.
    assert r.status_code == 200 and r.json()["total_cost_cents"] == 4000
    assert fake.studies == {}  # a price makes nothing
    r = _api(world, "POST", f"/studies/{study.id}/prolific", json={"reward_cents": 150, "places": 20})
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["status"] == "UNPUBLISHED" and made["total_cost_cents"] == 4000
    there = fake.studies[made["prolific_id"]]
    assert f"/s/{study.slug}?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}" in there["external_study_url"]
    assert [c["code"] for c in there["completion_codes"]] == [study.completion_code]
    assert (there["reward"], there["total_available_places"], there["estimated_completion_time"]) == (150, 20, 12)
    again = _api(world, "POST", f"/studies/{study.id}/prolific", json={"reward_cents": 150, "places": 20})
    assert again.status_code == 409 and len(fake.studies) == 1
    for action, status in (("publish", "ACTIVE"), ("pause", "PAUSED"), ("start", "ACTIVE")):
        r = _api(world, "POST", f"/studies/{study.id}/prolific/transition", json={"action": action})
        assert r.status_code == 200 and r.json()["status"] == status == fake.studies[made["prolific_id"]]["status"]
    r = _api(world, "POST", f"/studies/{study.id}/prolific/transition", json={"action": "start"})
    assert r.status_code == 409 and "Prolific refused" in r.json()["detail"]  # it is active already


@SQLITE_ONLY
def test_publishing_a_draft_study_is_refused(world, fake, session):
    study = world["study"]
    from app.studies import services

    services.set_state(session, study, "paused", world["owner"])
    _api(world, "PUT", "/prolific/token", json={"token": TOKEN})
    _api(world, "POST", f"/studies/{study.id}/prolific", json={"reward_cents": 150, "places": 20})
    r = _api(world, "POST", f"/studies/{study.id}/prolific/transition", json={"action": "publish"})
    assert r.status_code == 409 and "make it live" in r.json()["detail"]
    assert next(iter(fake.studies.values()))["status"] == "UNPUBLISHED"


def test_review_decisions_carried_to_submissions(world, fake, session):
    study = world["study"]
    prolific_id = _published(world, fake)
    subs = {p: _arrive(world, fake, prolific_id, p) for p in ("P-good", "P-bad", "P-unreviewed")}
    for sub in subs.values():
        fake.complete(sub, study.completion_code)
    parts = {p.worker_id: p for p in session.scalars(select(Participant).where(Participant.study_id == study.id)).all()}
    assert len(parts) == 3
    from app.auth.models import User

    by_pid = {u.external_id: u.id for u in session.scalars(select(User).where(User.platform == "prolific")).all()}
    owner = world["owner"]
    quality.decide(session, study, [parts[by_pid["P-good"]].id], "approved", owner)
    quality.decide(session, study, [parts[by_pid["P-bad"]].id], "rejected", owner, "Failed 3 of 4 gold items.")
    r = _api(world, "POST", f"/studies/{study.id}/prolific/reviews", json={})
    assert r.status_code == 200, r.text
    assert r.json() == {"approved": [subs["P-good"]], "rejected": [subs["P-bad"]]}
    assert fake.submissions[subs["P-good"]]["status"] == "APPROVED"
    assert fake.submissions[subs["P-bad"]]["status"] == "REJECTED"
    assert fake.submissions[subs["P-unreviewed"]]["status"] == "AWAITING REVIEW"
    # Running it again changes nothing (only submissions awaiting review are touched).
    r = _api(world, "POST", f"/studies/{study.id}/prolific/reviews", json={})
    assert r.json() == {"approved": [], "rejected": []}


def _bonus(w, key: str = "gold-bonus-1", worker: str = "P1", cents: int = 125):
    body = {"worker_id": worker, "amount_cents": cents, "key": key, "reason": "gold accuracy 100%"}
    return _api(w, "POST", f"/studies/{w['study'].id}/prolific/bonuses", json=body)


def _state(session, key: str) -> str:
    session.expire_all()
    return session.scalar(select(BonusPayment.state).where(BonusPayment.key == key))


def test_bonus_paid_once_and_a_retry_pays_nothing(world, fake, session):
    _arrive(world, fake, _published(world, fake), "P1")
    r = _bonus(world)
    assert r.status_code == 200 and r.json()["state"] == "paid", r.text
    assert _bonus(world).json()["state"] == "paid"
    assert fake.paid("P1") == [125] and fake.pay_calls() == 1
    other = _bonus(world, cents=300)  # the same key for another bonus: refused, nothing paid
    assert other.status_code == 409 and fake.paid("P1") == [125]
    unknown = _bonus(world, key="k-unknown", worker="P-never-here")
    assert unknown.status_code == 404 and fake.pay_calls() == 1
    actions = session.scalars(select(AuditEntry.action).where(AuditEntry.target_id == "gold-bonus-1")).all()
    assert {"prolific.bonus.intent", "prolific.bonus.created", "prolific.bonus.paid", "prolific.call"} <= set(actions)


def test_bonus_set_up_whose_answer_was_lost_is_paid_once(world, fake, session):
    _arrive(world, fake, _published(world, fake), "P1")
    fake.fail("create_bonus", "after")  # set up on Prolific, the answer lost: a crash before pay
    r = _bonus(world)
    assert r.status_code == 502 and _state(session, "gold-bonus-1") == "intent"
    assert fake.pay_calls() == 0 and len(fake.bonuses) == 1
    r = _bonus(world)
    assert r.status_code == 200 and r.json()["state"] == "paid", r.text
    assert fake.paid("P1") == [125] and fake.pay_calls() == 1  # the first bonus set up stays unpaid


def test_bonus_refused_at_pay_is_paid_with_its_own_id_later(world, fake, session):
    _arrive(world, fake, _published(world, fake), "P1")
    fake.fail("pay", "refuse")  # e.g. the balance was too low: nothing paid
    r = _bonus(world)
    assert r.status_code == 409 and _state(session, "gold-bonus-1") == "created"
    r = _bonus(world)
    assert r.status_code == 200 and r.json()["state"] == "paid"
    assert len(fake.bonuses) == 1 and fake.paid("P1") == [125] and fake.pay_calls() == 2


def test_bonus_paid_but_the_answer_lost_is_never_paid_again(world, fake, session):
    _arrive(world, fake, _published(world, fake), "P1")
    fake.fail("pay", "after")  # paid, then the answer lost: between pay and record
    r = _bonus(world)
    assert r.status_code == 502 and _state(session, "gold-bonus-1") == "paying"
    r = _bonus(world)  # the retry reads the submission on Prolific: paid already
    assert r.status_code == 200 and r.json()["state"] == "paid"
    assert fake.paid("P1") == [125] and fake.pay_calls() == 1


def test_bonus_whose_payment_is_not_shown_yet_waits(world, fake, session):
    _arrive(world, fake, _published(world, fake), "P1")
    assert _bonus(world, key="earlier", cents=50).json()["state"] == "paid"  # one bonus there before
    fake.pay_later = True  # Prolific pays "in the following minutes"
    fake.fail("pay", "after")
    assert _bonus(world).status_code == 502
    for _ in range(2):  # not shown yet: never sent again
        r = _bonus(world)
        assert r.status_code == 409 and "not sent again" in r.json()["detail"]
    assert fake.pay_calls() == 2 and _state(session, "gold-bonus-1") == "paying"
    fake.settle()
    assert _bonus(world).json()["state"] == "paid"
    assert fake.paid("P1") == [50, 125] and fake.pay_calls() == 2


def test_a_new_bonus_waits_for_an_unsettled_one(world, fake):
    _arrive(world, fake, _published(world, fake), "P1")
    fake.fail("pay", "after")
    assert _bonus(world).status_code == 502
    r = _bonus(world, key="second")
    assert r.status_code == 409 and "not settled" in r.json()["detail"]


@SQLITE_ONLY
def test_prolific_check_command(fake, monkeypatch, world):
    from app.cli import main

    runner = CliRunner()
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    r = runner.invoke(main, ["prolific", "check", "--api-url", fake.url])
    assert r.exit_code == 0 and "researcher@example.org" in r.output, r.output
    monkeypatch.setenv("PROLIFIC_TOKEN", "wrong")
    r = runner.invoke(main, ["prolific", "check"])  # PROLIFIC_API_URL: the fake's
    assert r.exit_code == 1 and "does not accept this token" in r.output and fake.url in r.output
    monkeypatch.delenv("PROLIFIC_TOKEN")
    _api(world, "PUT", "/prolific/token", json={"token": TOKEN})
    r = runner.invoke(main, ["prolific", "check", "--email", world["owner"].email])
    assert r.exit_code == 0 and "researcher@example.org" in r.output, r.output
    assert world["session"].scalar(select(CrowdAccount.account_name)) == "researcher@example.org"


def test_two_retries_at_once_pay_once(world, fake, session, db_url):
    """A double click: two requests retry a bonus whose pay was refused, at the same moment.
    Both read it `created`; only one may move it to `paying` and call pay."""
    import threading

    from app.auth.models import User
    from app.crowd import service
    from app.db import get_sessionmaker
    from app.errors import Conflict
    from app.studies.models import Study

    _arrive(world, fake, _published(world, fake), "P1")
    fake.fail("pay", "refuse")
    assert _bonus(world).status_code == 409 and _state(session, "gold-bonus-1") == "created"
    start, outcomes = threading.Barrier(2), []

    def retry() -> None:
        with get_sessionmaker(db_url)() as s:
            study, owner = s.get(Study, world["study"].id), s.get(User, world["owner"].id)
            start.wait()
            try:
                outcomes.append(service.pay_bonus(s, study, owner, "P1", 125, "gold-bonus-1").state)
            except Conflict as exc:
                outcomes.append(str(exc))

    threads = [threading.Thread(target=retry) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert "paid" in outcomes and len(outcomes) == 2, outcomes
    assert fake.paid("P1") == [125] and fake.pay_calls() == 2  # the refused call and one more
    assert _state(session, "gold-bonus-1") == "paid"


# ---- the pages (app/crowd/views.py) ----------------------------------------------------------


def _page_post(w, path: str, csrf: str, **form):
    return w["client"].post(path, data={"csrf_token": csrf, **form}, follow_redirects=False)


def _flash(w, path: str) -> str:
    return w["client"].get(path).text


@SQLITE_ONLY
def test_study_page_prices_publishes_pauses_and_resumes(world, fake, session):
    from tests.conftest import login

    study, client = world["study"], world["client"]
    csrf = login(client, world["owner"])
    page = client.get(f"/studies/{study.id}").text
    assert 'id="prolific-token"' in page and 'id="prolific-price"' not in page  # no token yet
    r = _page_post(world, f"/studies/{study.id}/prolific/token", csrf, token=TOKEN)
    assert r.status_code == 303 and r.headers["location"] == f"/studies/{study.id}#prolific"
    page = client.get(f"/studies/{study.id}").text
    assert "researcher@example.org" in page and 'id="prolific-price"' in page
    r = _page_post(world, f"/studies/{study.id}/prolific/cost", csrf, reward_cents="150", places="20")
    assert r.status_code == 200 and "<strong>4000 cents</strong>" in r.text and 'id="prolific-publish"' in r.text
    assert fake.studies == {}  # a price makes nothing
    r = _page_post(world, f"/studies/{study.id}/prolific/publish", csrf, reward_cents="150", places="20")
    assert r.status_code == 303
    (made,) = fake.studies.values()
    assert made["status"] == "ACTIVE" and made["reward"] == 150 and "filters" not in made
    page = client.get(f"/studies/{study.id}").text
    assert "Published on Prolific" in page and 'id="prolific-pause"' in page
    assert _page_post(world, f"/studies/{study.id}/prolific/move", csrf, action="pause").status_code == 303
    assert made["status"] == "PAUSED" and 'id="prolific-resume"' in client.get(f"/studies/{study.id}").text
    _page_post(world, f"/studies/{study.id}/prolific/move", csrf, action="start")
    assert made["status"] == "ACTIVE"
    # A refusal is the page's message, not an error page: Prolific will not start an active study.
    _page_post(world, f"/studies/{study.id}/prolific/move", csrf, action="start")
    assert "Not done: Prolific refused" in client.get(f"/studies/{study.id}").text
    # Without the CSRF token, nothing is sent to Prolific.
    calls = len(fake.calls)
    r = client.post(f"/studies/{study.id}/prolific/move", data={"action": "pause"}, follow_redirects=False)
    assert r.status_code == 403 and len(fake.calls) == calls and made["status"] == "ACTIVE"
    actions = set(session.scalars(select(AuditEntry.action).where(AuditEntry.target_id == str(study.id))).all())
    assert {"prolific.call", "prolific.study", "prolific.publish", "prolific.pause", "prolific.start"} <= actions


def test_review_page_approves_pays_once_and_blocks(world, fake, session):
    from app.auth.models import User
    from tests.conftest import login

    study, client = world["study"], world["client"]
    admin = make_user(session, "admin")
    csrf = login(client, admin)
    _page_post(world, f"/studies/{study.id}/prolific/token", csrf, token=TOKEN)
    _page_post(world, f"/studies/{study.id}/prolific/publish", csrf, reward_cents="150", places="20")
    (prolific_id,) = fake.studies
    subs = {p: _arrive(world, fake, prolific_id, p) for p in ("P-good", "P-bad")}
    for sub in subs.values():
        fake.complete(sub, study.completion_code)
    by_pid = {u.external_id: u.id for u in session.scalars(select(User).where(User.platform == "prolific")).all()}
    parts = {p.worker_id: p.id for p in session.scalars(select(Participant).where(Participant.study_id == study.id))}
    quality.decide(session, study, [parts[by_pid["P-good"]]], "approved", admin)
    quality.decide(session, study, [parts[by_pid["P-bad"]]], "rejected", admin, "Failed 3 of 4 gold items.")
    review = f"/admin/studies/{study.id}/review"
    page = client.get(review).text
    assert 'id="prolific-workers"' in page and 'data-worker="P-good"' in page and 'data-worker="P-bad"' in page
    r = _page_post(world, f"/studies/{study.id}/prolific/reviews", csrf)
    assert r.status_code == 303 and r.headers["location"] == f"{review}#prolific"
    assert "1 submission(s) approved, 1 rejected" in client.get(review).text
    assert fake.submissions[subs["P-good"]]["status"] == "APPROVED"
    assert fake.submissions[subs["P-bad"]]["status"] == "REJECTED"
    # The bonus: the second click pays nothing more, and says so.
    _page_post(world, f"/studies/{study.id}/prolific/bonus", csrf, worker_id="P-good", amount_cents="125")
    assert "Bonus of 125 cents paid to P-good" in client.get(review).text
    _page_post(world, f"/studies/{study.id}/prolific/bonus", csrf, worker_id="P-good", amount_cents="125")
    page = client.get(review).text
    assert "paid this bonus already" in page and "125 cents paid" in page
    _page_post(world, f"/studies/{study.id}/prolific/bonus", csrf, worker_id="P-good", amount_cents="500")
    assert "Bonus not paid" in client.get(review).text
    assert fake.paid("P-good") == [125] and fake.pay_calls() == 1
    # Each worker's record on this instance: studies, gold, reviews, pay (reward and bonus).
    page = client.get(review).text
    assert "1 study · gold — · 1 approved, 0 rejected · paid 275 cents" in page
    assert "1 study · gold — · 0 approved, 1 rejected · paid 0 cents" in page
    # A message to a worker, sent on Prolific with the study as its reason.
    _page_post(world, f"/studies/{study.id}/prolific/message", csrf, worker_id="P-good", body="Thank you!")
    assert "Message sent to P-good" in client.get(review).text
    assert fake.messages == [{"recipient_id": "P-good", "body": "Thank you!", "study_id": prolific_id}]
    _page_post(world, f"/studies/{study.id}/prolific/message", csrf, worker_id="P-never-here", body="Hello")
    assert "Not sent: no Prolific worker" in client.get(review).text and len(fake.messages) == 1
    # Blocked: on the block list on Prolific, and kept out of the studies made afterwards.
    _page_post(world, f"/studies/{study.id}/prolific/block", csrf, worker_id="P-bad")
    page = client.get(review).text
    assert "P-bad is blocked" in page and 'class="flag blocked"' in page
    _page_post(world, f"/studies/{study.id}/prolific/block", csrf, worker_id="P-bad")  # once
    ((group_id, group),) = fake.groups.items()
    assert group["participants"] == ["P-bad"] and group["workspace_id"] == fake.workspace_id
    later = create_tom_study(session, admin, bundle_size=4, gold_rate=0.0, title="The next study")
    _page_post(world, f"/studies/{later.id}/prolific/publish", csrf, reward_cents="150", places="5")
    (next_id,) = set(fake.studies) - {prolific_id}
    assert fake.studies[next_id]["filters"] == [
        {"filter_id": "participant_group_blocklist", "selected_values": [group_id]}
    ]
    assert not fake.eligible(next_id, "P-bad") and fake.eligible(next_id, "P-good")
    actions = session.scalars(select(AuditEntry.action).where(AuditEntry.action.like("prolific.%"))).all()
    assert {"prolific.review", "prolific.bonus.paid", "prolific.group", "prolific.block", "prolific.message"} <= set(
        actions
    )


def test_returned_and_timed_out_slots_are_reclaimed(world, fake, session):
    from collections import Counter

    from app.studies import assignment
    from app.studies.models import Assignment, Bundle, Item

    study = world["study"]
    prolific_id = _published(world, fake)
    subs = {p: _arrive(world, fake, prolific_id, p) for p in ("P-returns", "P-slow", "P-stays")}
    held = {}
    for p, sub in subs.items():
        bundle = session.scalar(select(Bundle).where(Bundle.external_assignment_id == sub))
        assignment.consent(session, study, bundle.id, consent_version(study))
        held[p] = assignment.next_item(session, study, bundle.id)
    session.expire_all()
    before = {a.item_id: session.get(Item, a.item_id).n_active for a in held.values()}
    assert sum(before.values()) >= 3  # each lease holds a place of its item
    fake.give_back(subs["P-returns"], "RETURNED")
    fake.give_back(subs["P-slow"], "TIMED-OUT")
    r = _api(world, "POST", f"/studies/{study.id}/prolific/reclaim")
    assert r.status_code == 200 and sorted(r.json()["freed"]) == sorted([subs["P-returns"], subs["P-slow"]])
    session.expire_all()
    # The places they held are back in the pool now, not when their leases run out.
    freed_places = Counter(held[p].item_id for p in ("P-returns", "P-slow"))
    for item_id, n in before.items():
        assert session.get(Item, item_id).n_active == n - freed_places[item_id]
    for p in ("P-returns", "P-slow"):
        assert session.get(Assignment, held[p].id).state == "returned"
        assert session.get(Bundle, held[p].bundle_id).finished_at is not None
    assert session.get(Assignment, held["P-stays"].id).state == "leased"
    # The late answer of a worker who returned the study is refused.
    from app.studies.assignment import NotAvailable

    with pytest.raises(NotAvailable):
        assignment.submit(
            session, study, held["P-returns"].bundle_id, held["P-returns"].id, {"answer": "Yes"}, "late-1"
        )
    session.rollback()
    assert _api(world, "POST", f"/studies/{study.id}/prolific/reclaim").json() == {"freed": []}  # once


def test_the_sweeper_reclaims_returned_slots_by_itself(world, fake, session):
    """Nobody presses the button: the sweeper's round (every minute) frees the slot."""
    from app.jobs import reclaim_returned
    from app.studies import assignment
    from app.studies.models import Assignment, Bundle

    study = world["study"]
    sub = _arrive(world, fake, _published(world, fake), "P-returns")
    bundle = session.scalar(select(Bundle).where(Bundle.external_assignment_id == sub))
    assignment.consent(session, study, bundle.id, consent_version(study))
    held = assignment.next_item(session, study, bundle.id)
    assert reclaim_returned() == []  # still at work
    fake.give_back(sub, "TIMED-OUT")
    assert reclaim_returned() == [sub]
    session.expire_all()
    assert session.get(Assignment, held.id).state == "returned"
    assert reclaim_returned() == []
    fake.fail("submissions", "before")  # Prolific down: logged, tried again next round
    assert reclaim_returned() == []


def _work(w, session, sub: str, right: bool) -> None:
    """The worker of the submission answers every item of their bundle, right or wrong."""
    from app.studies import assignment
    from app.studies.models import Bundle, Item

    study = w["study"]
    bundle = session.scalar(select(Bundle).where(Bundle.external_assignment_id == sub))
    assignment.consent(session, study, bundle.id, consent_version(study))
    while (held := assignment.next_item(session, study, bundle.id)) is not None:
        truth = session.get(Item, held.item_id).reference["answer"]
        answer = truth if right else {"Yes": "No", "No": "Yes"}[truth]
        assignment.submit(session, study, bundle.id, held.id, {"answer": answer}, f"k-{held.id}")


def test_allow_list_is_fed_by_the_workers_records(fake, client, session):
    from app.auth.models import User
    from app.studies.models import Participant

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=4, gold_rate=0.5, title="Gold study")
    w = {"owner": owner, "study": study, "client": client, "session": session}
    w["headers"] = {"Authorization": f"Bearer {create_token(session, owner)}"}
    session.commit()
    prolific_id = _published(w, fake)
    subs = {p: _arrive(w, fake, prolific_id, p) for p in ("P-good", "P-poor", "P-rejected", "P-idle")}
    for p, right in (("P-good", True), ("P-poor", False), ("P-rejected", True)):
        _work(w, session, subs[p], right)
    by_pid = {u.external_id: u.id for u in session.scalars(select(User).where(User.platform == "prolific"))}
    rejected = session.scalar(
        select(Participant).where(Participant.study_id == study.id, Participant.worker_id == by_pid["P-rejected"])
    )
    quality.decide(session, study, [rejected.id], "rejected", owner, "Copied answers.")

    rule = {"min_gold_accuracy": 0.8, "min_gold_items": 1, "no_rejections": True}
    r = _api(w, "PUT", "/prolific/allow-list", json=rule)
    assert r.status_code == 200, r.text
    # Only the worker right on the gold items, never rejected: the idle one has no record to go by.
    assert r.json()["members"] == ["P-good"]
    group = r.json()
    session.expire_all()
    account = session.scalar(select(CrowdAccount))
    assert fake.groups[account.allow_group_id]["participants"] == ["P-good"]
    # The next study made on Prolific admits only the allow list's members.
    later = create_tom_study(session, owner, title="Later study")
    session.commit()
    r = _api(w, "POST", f"/studies/{later.id}/prolific", json={"reward_cents": 100, "places": 5})
    assert r.status_code == 201, r.text
    filters = fake.studies[r.json()["prolific_id"]]["filters"]
    assert {"filter_id": "participant_group_allowlist", "selected_values": [account.allow_group_id]} in filters
    fake.studies[r.json()["prolific_id"]]["status"] = "ACTIVE"
    assert fake.eligible(r.json()["prolific_id"], "P-good")
    assert not fake.eligible(r.json()["prolific_id"], "P-poor")
    # A stricter rule takes members out; no rule, no allow list on the studies made next.
    r = _api(w, "PUT", "/prolific/allow-list", json={**rule, "min_gold_items": 50})
    assert r.json()["removed"] == ["P-good"] and fake.groups[account.allow_group_id]["participants"] == []
    assert group["added"] == ["P-good"]
    assert _api(w, "PUT", "/prolific/allow-list", json={**rule, "enabled": False}).json()["rule"] is None
    third = create_tom_study(session, owner, title="Open study")
    session.commit()
    r = _api(w, "POST", f"/studies/{third.id}/prolific", json={"reward_cents": 100, "places": 5})
    assert "filters" not in fake.studies[r.json()["prolific_id"]]
    bad = _api(w, "PUT", "/prolific/allow-list", json={**rule, "min_gold_accuracy": 1.5})
    assert bad.status_code == 422


def _timed(session, worker: str, study, seconds: list[float]) -> None:
    """The worker's answers in the study took these times, in the order given."""
    from app.auth.models import User
    from app.studies.models import Annotation

    uid = session.scalar(select(User.id).where(User.platform == "prolific", User.external_id == worker))
    rows = session.scalars(
        select(Annotation).where(Annotation.study_id == study.id, Annotation.worker_id == uid).order_by(Annotation.id)
    ).all()
    assert len(rows) == len(seconds)
    for a, s in zip(rows, seconds, strict=True):
        a.duration_ms = int(s * 1000)
    session.commit()


def test_worker_speed_in_the_record_the_review_page_and_the_allow_list(fake, client, session):
    """Speed across studies, worked by hand. Study A: P-slow 10, 12, 14, 16 s (median 13),
    P-mid 8, 9, 11, 30 (median 10), P-fast 1, 2, 3, 9 (median 2.5): A's typical pace is the
    median of the medians, 10 s, so under 3 s (30%) is too fast: P-fast's 1 and 2 (not 3).
    Study B: P-slow alone, 2 s an item (their own pace: none too fast). P-slow's median over
    both studies, pooled: 2, 2, 2, 2, 10, 12, 14, 16 -> (2 + 10) / 2 = 6 s."""
    from tests.conftest import login

    owner = make_user(session, "researcher")
    a = create_tom_study(session, owner, bundle_size=4, gold_rate=0.5, title="Study A")
    b = create_tom_study(session, owner, bundle_size=4, gold_rate=0.5, title="Study B")
    w = {"owner": owner, "study": a, "client": client, "session": session}
    w["headers"] = {"Authorization": f"Bearer {create_token(session, owner)}"}
    session.commit()
    subs = {}
    prolific_a = _published(w, fake)
    for p in ("P-slow", "P-mid", "P-fast"):
        subs[p] = _arrive(w, fake, prolific_a, p)
        _work(w, session, subs[p], right=True)
    wb = {**w, "study": b}
    _work(wb, session, _arrive(wb, fake, _published(wb, fake), "P-slow"), right=True)
    _timed(session, "P-slow", a, [10, 12, 14, 16])
    _timed(session, "P-mid", a, [8, 9, 11, 30])
    _timed(session, "P-fast", a, [1, 2, 3, 9])
    _timed(session, "P-slow", b, [2, 2, 2, 2])

    r = _api(w, "GET", f"/studies/{a.id}/prolific/workers")
    assert r.status_code == 200, r.text
    assert r.json()["on_prolific"] is True
    speed = {
        x["worker_id"]: {k: x["record"][k] for k in ("studies", "items", "median_s", "fast", "fast_share")}
        for x in r.json()["workers"]
    }
    assert speed == {
        "P-slow": {"studies": 2, "items": 8, "median_s": 6.0, "fast": 0, "fast_share": 0.0},
        "P-mid": {"studies": 1, "items": 4, "median_s": 10.0, "fast": 0, "fast_share": 0.0},
        "P-fast": {"studies": 1, "items": 4, "median_s": 2.5, "fast": 2, "fast_share": 0.5},
    }

    # The allow list's optional speed terms.
    rule = {"min_gold_accuracy": 0.8, "min_gold_items": 1, "no_rejections": True}
    assert _api(w, "PUT", "/prolific/allow-list", json=rule).json()["members"] == ["P-fast", "P-mid", "P-slow"]
    slow_enough = _api(w, "PUT", "/prolific/allow-list", json={**rule, "min_median_seconds": 8})
    assert slow_enough.json()["members"] == ["P-mid"]
    few_fast = _api(w, "PUT", "/prolific/allow-list", json={**rule, "max_fast_share": 0.4})
    assert few_fast.json()["members"] == ["P-mid", "P-slow"]
    assert _api(w, "PUT", "/prolific/allow-list", json={**rule, "max_fast_share": 1.5}).status_code == 422
    # The review page's record shows the same numbers.
    admin = make_user(session, "admin")
    login(client, admin)
    page = client.get(f"/admin/studies/{a.id}/review").text
    assert "median 2.5 s an item, 2/4 too fast (50%)" in page
    assert "median 6.0 s an item, 0/8 too fast (0%)" in page
    # The study page's allow list takes the least median time per item.
    csrf = login(client, owner)
    form = {"enabled": "on", "min_gold_accuracy": "80", "min_gold_items": "1", "no_rejections": "on"}
    _page_post(w, f"/studies/{a.id}/prolific/allow", csrf, **form, min_median_seconds="8")
    page = client.get(f"/studies/{a.id}").text
    assert "Allow list on Prolific: 1 worker(s) meet the rule" in page and 'name="min_median_seconds"' in page
    assert 'name="min_median_seconds" inputmode="decimal" size="4" value="8"' in page
    # ...and the most items answered too fast (in %), kept when the card is saved again.
    _page_post(w, f"/studies/{a.id}/prolific/allow", csrf, **form, max_fast_share="40")
    page = client.get(f"/studies/{a.id}").text
    assert "Allow list on Prolific: 2 worker(s) meet the rule" in page
    assert 'name="max_fast_share" inputmode="decimal" size="4" value="40"' in page


def test_a_rule_kept_before_the_speed_terms_means_any_pace():
    """Rules stored before the speed terms lack them: the sweeper applies them as before."""
    from app.crowd.service import meets

    fast = {"gold": 4, "gold_right": 4, "rejected": 0, "median_s": 2.5, "fast_share": 0.5}
    old = {"min_gold_accuracy": 0.8, "min_gold_items": 1, "no_rejections": True}
    assert meets(fast, old)
    assert not meets(fast, {**old, "min_median_seconds": 3.0, "max_fast_share": 1.0})
    assert not meets(fast, {**old, "min_median_seconds": 0.0, "max_fast_share": 0.25})
    assert meets(fast, {**old, "min_median_seconds": 2.5, "max_fast_share": 0.5})  # at the mark is in


def _hooked(w, fake):
    """Hooks subscribed from Proctor; the fake delivers them to the app (the test's client)."""
    r = _api(w, "POST", "/prolific/hooks")
    assert r.status_code == 200, r.text
    target = r.json()["target_url"]
    assert target.endswith(f"/api/v1/prolific/hooks/{target.rsplit('/', 1)[1]}")
    (hook,) = fake.subscriptions.values()
    assert hook["confirmed"] and hook["event_type"] == "submission.status.change" and hook["target_url"] == target
    answers = []

    def deliver(url, headers, body):
        from urllib.parse import urlsplit

        answers.append(w["client"].post(urlsplit(url).path, content=body, headers=headers))

    fake.deliver = deliver
    return answers


def test_hooks_free_a_returned_slot_at_once_and_once(world, fake, session):
    from app.studies import assignment
    from app.studies.models import Assignment, Bundle

    study = world["study"]
    prolific_id = _published(world, fake)
    answers = _hooked(world, fake)
    subs = {p: _arrive(world, fake, prolific_id, p) for p in ("P-returns", "P-stays")}
    held = {}
    for p, sub in subs.items():
        bundle = session.scalar(select(Bundle).where(Bundle.external_assignment_id == sub))
        assignment.consent(session, study, bundle.id, consent_version(study))
        held[p] = assignment.next_item(session, study, bundle.id)
    fake.give_back(subs["P-returns"], "RETURNED")  # Prolific calls the hook: no polling, no button
    assert [(a.status_code, a.json()) for a in answers] == [(200, {"freed": [subs["P-returns"]]})]
    session.expire_all()
    assert session.get(Assignment, held["P-returns"].id).state == "returned"
    assert session.get(Assignment, held["P-stays"].id).state == "leased"
    # Delivered again (Prolific delivers at least once): nothing more is freed.
    url, headers, body = fake.sent[-1]
    fake.deliver(url, headers, body)
    assert answers[-1].status_code == 200 and answers[-1].json() == {"freed": []}
    # A hook whose signature does not match its body is refused, and frees nothing.
    forged = body.replace(subs["P-returns"].encode(), subs["P-stays"].encode())
    fake.deliver(url, headers, forged)
    assert answers[-1].status_code == 401 and "X-Prolific-Request-Signature" in answers[-1].json()["detail"]
    fake.deliver(url, {k: v for k, v in headers.items() if "Signature" not in k}, body)
    assert answers[-1].status_code == 401
    # A signature header of latin-1 bytes that are not ASCII: refused as not matching (was a 500).
    odd = {k: v for k, v in headers.items() if "Signature" not in k} | {"X-Prolific-Request-Signature": b"\xe9" * 44}
    fake.deliver(url, odd, body)
    assert answers[-1].status_code == 401
    session.expire_all()
    assert session.get(Assignment, held["P-stays"].id).state == "leased"
    # Another status change (here a submission completed, then approved) frees nothing.
    fake.send_hook(next(iter(fake.subscriptions.values())), {
        "resource_id": subs["P-stays"], "event_type": "submission.status.change", "status": "APPROVED",
    })  # fmt: skip
    assert answers[-1].json() == {"freed": []}
    r = world["client"].post("/api/v1/prolific/hooks/999999", content=body, headers=headers)
    assert r.status_code == 404


@SQLITE_ONLY
def test_hooks_and_allow_list_from_the_study_page(world, fake, session):
    from tests.conftest import login

    sid, client = world["study"].id, world["client"]
    csrf = login(client, world["owner"])
    _page_post(world, f"/studies/{sid}/prolific/token", csrf, token=TOKEN)
    assert "Free returned slots at once" in client.get(f"/studies/{sid}").text
    assert _page_post(world, f"/studies/{sid}/prolific/hooks", csrf).status_code == 303
    page = client.get(f"/studies/{sid}").text
    assert "Prolific now tells Proctor at once" in page and 'id="prolific-hooks-on"' in page
    assert [h["confirmed"] for h in fake.subscriptions.values()] == [True]
    r = _page_post(
        world, f"/studies/{sid}/prolific/allow", csrf, enabled="on", min_gold_accuracy="80", min_gold_items="3"
    )
    assert r.status_code == 303
    assert "Allow list on Prolific: 0 worker(s) meet the rule" in client.get(f"/studies/{sid}").text
    session.expire_all()
    assert session.scalar(select(CrowdAccount)).allow_rule == {
        "min_gold_accuracy": 0.8, "min_gold_items": 3, "no_rejections": False,
        "min_median_seconds": 0.0, "max_fast_share": 1.0,  # no speed term: any pace
    }  # fmt: skip
    _page_post(
        world, f"/studies/{sid}/prolific/allow", csrf, enabled="on", min_gold_accuracy="lots", min_gold_items="3"
    )
    assert "Allow list not updated: min_gold_accuracy must be a number" in client.get(f"/studies/{sid}").text


def _enter(w, fake, prolific_id: str, participant: str):
    """A participant's own browser, entered from Prolific and past the consent: (browser, submission)."""
    import re

    from fastapi.testclient import TestClient

    sub = fake.join(prolific_id, participant)
    browser = TestClient(w["client"].app)
    slug = w["study"].slug
    browser.get(f"/s/{slug}?PROLIFIC_PID={participant}&STUDY_ID={prolific_id}&SESSION_ID={sub}")
    page = browser.get(f"/task/{slug}").text
    form = dict(re.findall(r'name="(csrf_token|consent_version)" value="([^"]*)"', page))
    assert browser.post(f"/task/{slug}/consent", data=form, follow_redirects=False).status_code == 303
    return browser, sub


def test_comprehension_check_two_attempts_then_return(world, fake, session):
    import re

    from app.studies.models import Assignment, Bundle, Item

    study, slug = world["study"], world["study"].slug
    c = world["client"]
    from tests.conftest import login

    csrf = login(c, world["owner"])
    page = c.get(f"/studies/{study.id}").text
    assert 'id="comprehension-default"' in page  # the kind has a default check
    r = _page_post(world, f"/studies/{study.id}/comprehension", csrf, mode="own", questions="Only a question")
    assert r.status_code == 422 and "line 1: a question needs two options" in r.text
    own = "What is marked?\n* The moment asked about\nThe end\n\nHow do you answer?\nIn prose\n* Yes or No\n"
    assert _page_post(world, f"/studies/{study.id}/comprehension", csrf, mode="own", questions=own).status_code == 303
    assert "2 question(s) before the first item" in c.get(f"/studies/{study.id}").text
    prolific_id = _published(world, fake)

    def token(page: str) -> str:
        return re.search(r'name="csrf_token" value="([^"]*)"', page).group(1)

    # One worker passes at the second try and goes on to the first item.
    browser, _ = _enter(world, fake, prolific_id, "P-careful")
    page = browser.get(f"/task/{slug}").text
    assert 'id="check"' in page and "What is marked?" in page and "* The moment" not in page  # no answer shown
    r = browser.post(f"/task/{slug}/check", data={"csrf_token": token(page), "q0": "The end", "q1": "Yes or No"})
    assert r.status_code == 422 and 'id="check-again"' in r.text
    # Items are not served before the check is passed, by the page or the API.
    assert browser.get(f"/api/v1/crowd/{slug}/next").status_code == 409
    right = {"q0": "The moment asked about", "q1": "Yes or No"}
    r = browser.post(f"/task/{slug}/check", data={"csrf_token": token(r.text), **right}, follow_redirects=False)
    assert r.status_code == 303
    assert 'name="assignment_id"' in browser.get(f"/task/{slug}").text  # the first item

    # Another fails twice: asked to return the study, the task ended, the slot free at once.
    browser, sub = _enter(world, fake, prolific_id, "P-hasty")
    tok = token(browser.get(f"/task/{slug}").text)
    wrong = {"q0": "The end", "q1": "In prose"}
    browser.post(f"/task/{slug}/check", data={"csrf_token": tok, **wrong})
    r = browser.post(f"/task/{slug}/check", data={"csrf_token": tok, **wrong})
    assert r.status_code == 422 and 'id="check-failed"' in r.text and "return the study on Prolific" in r.text
    session.expire_all()
    bundle = session.scalar(select(Bundle).where(Bundle.external_assignment_id == sub))
    assert bundle.finished_at is not None and bundle.check_failures == 2
    assert session.scalar(select(Assignment).where(Assignment.bundle_id == bundle.id)) is None  # no item held
    page = browser.get(f"/task/{slug}").text
    assert 'id="check-failed"' in page and 'id="check"' not in page  # a third try is not offered
    r = browser.post(f"/task/{slug}/check", data={"csrf_token": tok, **right})
    assert 'id="check-failed"' in r.text
    assert sum(i.n_active for i in session.scalars(select(Item).where(Item.study_id == study.id))) == 1


def test_comprehension_attempts_sent_at_once_count_as_two_tries(world, fake, session):
    """Attempts sent at once (one a combination of answers) each read the bundle before any
    wrote it: the two tries still hold, and the right answer sent third does not pass."""
    from sqlalchemy.orm import sessionmaker

    from app.studies import comprehension
    from app.studies.models import Bundle, Study
    from tests.conftest import login

    study = world["study"]
    csrf = login(world["client"], world["owner"])
    own = "What is marked?\n* The moment asked about\nThe end\n"
    assert _page_post(world, f"/studies/{study.id}/comprehension", csrf, mode="own", questions=own).status_code == 303
    _, sub = _enter(world, fake, _published(world, fake), "P-racer")
    session.expire_all()
    bundle_id = session.scalar(select(Bundle.id).where(Bundle.external_assignment_id == sub))
    opened = [sessionmaker(bind=session.get_bind())() for _ in range(3)]
    try:
        # Every request has read the study and the bundle (no failure yet) before any writes.
        rows = [(s.get(Study, study.id), s.get(Bundle, bundle_id)) for s in opened]
        outcomes = [
            comprehension.attempt(s, st, b, {"q0": answer})
            for s, (st, b), answer in zip(opened, rows, ["The end", "The end", "The moment asked about"])
        ]
    finally:
        for s in opened:
            s.close()
    assert outcomes == ["again", "failed", "failed"]
    session.expire_all()
    bundle = session.get(Bundle, bundle_id)
    assert (bundle.check_failures, bundle.checked_at is None, bundle.finished_at is not None) == (2, True, True)


def test_a_check_turned_on_mid_study_spares_workers_who_began(world, fake, session):
    import re

    from tests.conftest import login

    study, slug = world["study"], world["study"].slug
    prolific_id = _published(world, fake)
    early, _ = _enter(world, fake, prolific_id, "P-early")
    assert 'name="assignment_id"' in early.get(f"/task/{slug}").text  # working, no check yet
    csrf = login(world["client"], world["owner"])
    own = "What is marked?\n* The moment asked about\nThe end\n"
    assert _page_post(world, f"/studies/{study.id}/comprehension", csrf, mode="own", questions=own).status_code == 303
    # The worker who began goes on with their task; one who comes after takes the check.
    page = early.get(f"/task/{slug}").text
    assert 'name="assignment_id"' in page and 'id="check"' not in page
    late, _ = _enter(world, fake, prolific_id, "P-late")
    page = late.get(f"/task/{slug}").text
    assert 'id="check"' in page and "What is marked?" in page
    assert re.search(r'name="assignment_id"', page) is None


def test_a_check_passed_holds_for_the_workers_next_task_only(world, fake, session):
    """The check passed is the worker's, in this study: their second task (bundle) starts
    with its first item, on the page and in the API alike; another worker entering in the same
    browser afterwards still takes the check (the browser's session is not the record)."""
    import re

    from app.studies.models import Study

    study, slug = world["study"], world["study"].slug
    prolific_id = _checked_study(world, fake, session)
    browser, _ = _enter(world, fake, prolific_id, "P-twice")
    page = browser.get(f"/task/{slug}").text
    tok = re.search(r'name="csrf_token" value="([^"]*)"', page).group(1)
    r = browser.post(f"/task/{slug}/check", data={"csrf_token": tok, "q0": "The moment asked about"})
    assert r.status_code == 303 or 'name="assignment_id"' in r.text

    def consent(entry: str) -> str:
        browser.get(entry)
        page = browser.get(f"/task/{slug}").text
        form = dict(re.findall(r'name="(csrf_token|consent_version)" value="([^"]*)"', page))
        assert browser.post(f"/task/{slug}/consent", data=form, follow_redirects=False).status_code == 303
        return browser.get(f"/task/{slug}").text

    # Their second task, in the same browser: not asked again.
    page = consent(f"/s/{slug}?PROLIFIC_PID=P-twice&STUDY_ID={prolific_id}&SESSION_ID=second-task")
    assert 'name="assignment_id"' in page and 'id="check"' not in page
    assert browser.get(f"/api/v1/crowd/{slug}/next").json()["state"] == "item"
    # Another worker in that browser (a lab's shared computer): asked, whatever the session
    # holds (one task per worker again, so PostgreSQL's hot path would serve their items).
    session.get(Study, study.id).max_bundles_per_worker = 1
    session.commit()
    page = consent(f"/s/{slug}?PROLIFIC_PID=P-next&STUDY_ID={prolific_id}&SESSION_ID=other-worker")
    assert 'id="check"' in page and 'name="assignment_id"' not in page
    assert browser.get(f"/api/v1/crowd/{slug}/next").status_code == 409


def test_comprehension_check_through_the_json_api(world, fake, session):
    """A study's check set at creation and by PATCH, refused as the page refuses it (the line
    and the field named), shown in the study's JSON, documented in the OpenAPI schema; a
    worker then takes it before the first item."""
    import json

    from tests.conftest import ROOT

    client, headers = world["client"], world["headers"]
    questions = "What is marked?\n* The moment asked about\nThe end\n"

    def create(check):
        data = (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes()
        return client.post(
            "/api/v1/studies",
            headers=headers,
            data={"kind": "tom", "format": "csv", "settings": json.dumps({"title": "Checked", "comprehension": check})},
            files={"file": ("q.csv", data, "text/csv")},
        )

    r = create({"mode": "own", "questions": "What is marked?\n* The moment asked about\n\nAlone?\nyes\nno"})
    assert r.status_code == 422 and (r.json()["field"], r.json()["line"]) == ("comprehension", 1), r.text
    assert "a question needs two options" in r.json()["detail"]
    r = create({"mode": "own", "questions": "Fine?\n* yes\nno\n\nAlone?\nyes\nno"})
    assert r.status_code == 422 and (r.json()["field"], r.json()["line"]) == ("comprehension", 5), r.text
    r = create({"mode": "sometimes"})
    assert r.status_code == 422 and r.json()["field"] == "comprehension.mode", r.text
    r = create({"mode": "own", "questions": questions})
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["comprehension"] == [
        {
            "question": "What is marked?",
            "options": ["The moment asked about", "The end"],
            "answer": "The moment asked about",
        }
    ]
    sid = made["id"]
    r = client.patch(f"/api/v1/studies/{sid}", headers=headers, json={"comprehension": {"mode": "default"}})
    assert r.status_code == 200 and len(r.json()["comprehension"]) == 2  # Theory of Mind's default: two
    r = client.patch(
        f"/api/v1/studies/{sid}", headers=headers, json={"comprehension": {"mode": "own", "questions": ""}}
    )
    assert r.status_code == 422 and r.json()["field"] == "comprehension" and "at least one question" in r.text
    assert len(client.get(f"/api/v1/studies/{sid}", headers=headers).json()["comprehension"]) == 2  # unchanged
    r = client.patch(f"/api/v1/studies/{sid}", headers=headers, json={"comprehension": {"mode": "none"}})
    assert r.status_code == 200 and r.json()["comprehension"] is None
    # The same refusals as the page's card, and on the page the text the API set.
    r = client.patch(
        f"/api/v1/studies/{world['study'].id}",
        headers=headers,
        json={"comprehension": {"mode": "own", "questions": questions}},
    )
    assert r.status_code == 200
    browser, _ = _enter(world, fake, _published(world, fake), "P-api")
    assert "What is marked?" in browser.get(f"/task/{world['study'].slug}").text
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert set(schema["CheckIn"]["properties"]) == {"mode", "questions"}
    assert "comprehension" in schema["StudyEdit"]["properties"] and "comprehension" in schema["StudyOut"]["properties"]


def test_a_hook_signed_long_ago_or_in_the_future_frees_nothing(world, fake, session):
    """A signed delivery is taken only within minutes of its timestamp: one captured and
    replayed later (or dated ahead) frees nothing, and the slot it names stays held; it is
    answered 200, as its signature holds, so that Prolific does not send it again and again."""
    import time

    from app.studies import assignment
    from app.studies.models import Assignment, Bundle

    study = world["study"]
    prolific_id = _published(world, fake)
    answers = _hooked(world, fake)
    sub = _arrive(world, fake, prolific_id, "P-held")
    bundle = session.scalar(select(Bundle).where(Bundle.external_assignment_id == sub))
    assignment.consent(session, study, bundle.id, consent_version(study))
    held = assignment.next_item(session, study, bundle.id)
    hook = next(iter(fake.subscriptions.values()))
    event = {"resource_id": sub, "event_type": "submission.status.change", "status": "RETURNED"}
    for at in (time.time() - 6 * 60, time.time() + 5 * 60):
        fake.send_hook(hook, event, at=at)
        assert answers[-1].status_code == 200 and answers[-1].json() == {"freed": []}
    fake.deliver(*fake.sent[-1][:2], b"not even JSON")  # the signature is checked first, as before
    assert answers[-1].status_code == 401 and "Signature" in answers[-1].json()["detail"]
    session.expire_all()
    assert session.get(Assignment, held.id).state == "leased"
    fake.send_hook(hook, event, at=time.time() - 60)  # a minute on its way: taken
    assert answers[-1].status_code == 200 and answers[-1].json() == {"freed": [sub]}


def test_the_sweeper_keeps_the_allow_list_as_records_change(fake, client, session):
    """Nobody presses "Keep the allow list" again: each sweeper round re-applies the rule to
    the workers' records as they are now, and calls Prolific only when the members change."""
    from app.auth.models import User
    from app.jobs import refresh_allow_lists
    from app.studies.models import Participant

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=4, gold_rate=0.5, title="Gold study")
    w = {"owner": owner, "study": study, "client": client, "session": session}
    w["headers"] = {"Authorization": f"Bearer {create_token(session, owner)}"}
    session.commit()
    prolific_id = _published(w, fake)
    subs = {p: _arrive(w, fake, prolific_id, p) for p in ("P-good", "P-later")}
    rule = {"min_gold_accuracy": 0.8, "min_gold_items": 1, "no_rejections": True}
    assert _api(w, "PUT", "/prolific/allow-list", json=rule).json()["members"] == []  # no record yet
    session.expire_all()
    group = session.scalar(select(CrowdAccount)).allow_group_id
    assert refresh_allow_lists() == []  # nothing changed: Prolific is not asked
    _work(w, session, subs["P-good"], right=True)  # their record now meets the rule
    calls = len(fake.calls)
    assert refresh_allow_lists() == [{"user": owner.id, "added": ["P-good"], "removed": []}]
    assert fake.groups[group]["participants"] == ["P-good"]
    assert len(fake.calls) > calls
    calls = len(fake.calls)
    assert refresh_allow_lists() == [] and len(fake.calls) == calls  # the same members: no call
    # A rejection takes them out at the next round; Prolific down, the round after.
    by_pid = {u.external_id: u.id for u in session.scalars(select(User).where(User.platform == "prolific"))}
    good = session.scalar(
        select(Participant).where(Participant.study_id == study.id, Participant.worker_id == by_pid["P-good"])
    )
    quality.decide(session, study, [good.id], "rejected", owner, "Copied answers.")
    fake.fail("group_members", "before")
    assert refresh_allow_lists() == [] and fake.groups[group]["participants"] == ["P-good"]  # logged
    assert refresh_allow_lists() == [{"user": owner.id, "added": [], "removed": ["P-good"]}]
    assert fake.groups[group]["participants"] == []
    # No rule: the list is left as it is.
    _work(w, session, subs["P-later"], right=True)
    assert _api(w, "PUT", "/prolific/allow-list", json={**rule, "enabled": False}).status_code == 200
    assert refresh_allow_lists() == [] and fake.groups[group]["participants"] == []


def test_an_account_prolific_keeps_refusing_is_tried_less_and_less_often(fake, client, session):
    """A revoked token fails every round: after the first retry the sweeper waits 1, 3, 7 ...
    minutes (at most an hour) before calling Prolific for that account again, and tries at
    once again after a sync that works."""
    from app.crowd import service

    service._REFRESH_FAILED.clear()  # kept by the process: an earlier test's account 1 is not this one
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, bundle_size=4, gold_rate=0.5, title="Gold study")
    w = {"owner": owner, "study": study, "client": client, "session": session}
    w["headers"] = {"Authorization": f"Bearer {create_token(session, owner)}"}
    session.commit()
    sub = _arrive(w, fake, _published(w, fake), "P-good")
    rule = {"min_gold_accuracy": 0.8, "min_gold_items": 1, "no_rejections": True}
    assert _api(w, "PUT", "/prolific/allow-list", json=rule).status_code == 200
    _work(w, session, sub, right=True)  # the rule now picks P-good: the next round calls Prolific

    def round_at(minute: float) -> bool:
        """One sweeper round with Prolific refusing; whether it called Prolific."""
        calls = len(fake.calls)
        fake.fail("group_members", "before")
        assert service.refresh_allow_lists(now=1e9 + 60 * minute) == []
        called = len(fake.calls) > calls
        fake.faults.pop("group_members", None)
        return called

    tried = [m for m in range(12) if round_at(m)]
    assert tried == [0, 1, 2, 5]  # then after 0, 1, 3 and 7 minutes: the next at 5 + 7 = 12
    assert round_at(12)
    assert not round_at(13)  # 15 minutes now
    assert service.refresh_allow_lists(now=1e9 + 60 * 28) == [{"user": owner.id, "added": ["P-good"], "removed": []}]
    assert service._REFRESH_FAILED == {}
    service._REFRESH_FAILED.clear()


def test_the_study_preview_shows_the_comprehension_check(world, fake, session):
    """The preview's first page shows what a worker meets before the first item: the check's
    questions and options as the worker sees them, and to the researcher the right answers."""
    from tests.conftest import login

    study, client = world["study"], world["client"]
    csrf = login(client, world["owner"])
    page = client.get(f"/studies/{study.id}/preview").text
    assert 'id="preview-check"' not in page  # no check: none shown
    own = "What is marked?\n* The moment asked about\nThe end\n\nHow do you answer?\nIn prose\n* Yes or No\n"
    assert _page_post(world, f"/studies/{study.id}/comprehension", csrf, mode="own", questions=own).status_code == 303
    page = client.get(f"/studies/{study.id}/preview").text
    check = page.split('id="preview-check"', 1)[1].split("</section>", 1)[0]
    assert "What is marked?" in check and "How do you answer?" in check
    assert check.count('type="radio"') == 4 and 'value="In prose"' in check
    assert "Right (never in the worker's page): The moment asked about" in check
    assert "Right (never in the worker's page): Yes or No" in check
    assert page.index('id="consent-details"') < page.index('id="preview-check"') < page.index('id="preview-start"')
    # The worker's own check page shows the same questions, never the answers.
    browser, _ = _enter(world, fake, _published(world, fake), "P-shown")
    worker = browser.get(f"/task/{study.slug}").text
    assert "What is marked?" in worker and "Right (never" not in worker and worker.count('type="radio"') == 4


def test_a_check_failed_twice_is_not_tried_again_in_a_next_task(world, fake, session):
    """Two tries a worker, not two a task: one who failed twice and opens another task of the
    study (one that allows more) is asked to return it at once, and is served no item."""
    import re

    from app.studies.models import Assignment, Bundle

    slug = world["study"].slug
    prolific_id = _checked_study(world, fake, session)
    browser, _ = _enter(world, fake, prolific_id, "P-hasty")
    tok = re.search(r'name="csrf_token" value="([^"]*)"', browser.get(f"/task/{slug}").text).group(1)
    for _ in range(2):
        r = browser.post(f"/task/{slug}/check", data={"csrf_token": tok, "q0": "The end"})
    assert 'id="check-failed"' in r.text
    browser.get(f"/s/{slug}?PROLIFIC_PID=P-hasty&STUDY_ID={prolific_id}&SESSION_ID=second-task")
    page = browser.get(f"/task/{slug}").text
    form = dict(re.findall(r'name="(csrf_token|consent_version)" value="([^"]*)"', page))
    assert browser.post(f"/task/{slug}/consent", data=form, follow_redirects=False).status_code == 303
    assert browser.get(f"/api/v1/crowd/{slug}/next").status_code == 409  # before the page is seen
    page = browser.get(f"/task/{slug}").text
    assert 'id="check-failed"' in page and 'id="check"' not in page and 'name="assignment_id"' not in page
    r = browser.post(f"/task/{slug}/check", data={"csrf_token": tok, "q0": "The moment asked about"})
    assert 'id="check-failed"' in r.text  # a right answer now passes nothing
    assert 'id="check-failed"' in browser.get(f"/task/{slug}").text
    assert browser.get(f"/api/v1/crowd/{slug}/next").json()["state"] == "done"
    session.expire_all()
    second = session.scalar(select(Bundle).where(Bundle.external_assignment_id == "second-task"))
    assert second.finished_at is not None and second.checked_at is None
    assert session.scalar(select(Assignment).where(Assignment.bundle_id == second.id)) is None


def _checked_study(w, fake, session) -> str:
    """The world's study with its own check, two tasks a worker, published: its Prolific id."""
    from app.studies.models import Study
    from tests.conftest import login

    study = w["study"]
    csrf = login(w["client"], w["owner"])
    own = "What is marked?\n* The moment asked about\nThe end\n"
    assert _page_post(w, f"/studies/{study.id}/comprehension", csrf, mode="own", questions=own).status_code == 303
    session.get(Study, study.id).max_bundles_per_worker = 2
    session.commit()
    return _published(w, fake)


def _second_task(browser, slug: str, participant: str, prolific_id: str) -> str:
    """The worker opens another task of the study in their browser and agrees: its page."""
    import re

    browser.get(f"/s/{slug}?PROLIFIC_PID={participant}&STUDY_ID={prolific_id}&SESSION_ID=second-task")
    page = browser.get(f"/task/{slug}").text
    form = dict(re.findall(r'name="(csrf_token|consent_version)" value="([^"]*)"', page))
    assert browser.post(f"/task/{slug}/consent", data=form, follow_redirects=False).status_code == 303
    return browser.get(f"/task/{slug}").text


def test_tries_at_the_check_add_up_over_a_workers_tasks(world, fake, session):
    """One wrong try, the task returned, a new task: one try left, not two fresh ones (the
    page says so), and the second wrong try ends it as the second of one task would."""
    import re

    from app.studies import assignment
    from app.studies.models import Bundle

    study, slug = world["study"], world["study"].slug
    prolific_id = _checked_study(world, fake, session)
    browser, _ = _enter(world, fake, prolific_id, "P-returner")
    page = browser.get(f"/task/{slug}").text
    assert "You have 2 tries" in page
    tok = re.search(r'name="csrf_token" value="([^"]*)"', page).group(1)
    r = browser.post(f"/task/{slug}/check", data={"csrf_token": tok, "q0": "The end"})
    assert r.status_code == 422 and 'id="check-failed"' not in r.text
    first = session.scalar(select(Bundle).where(Bundle.study_id == study.id))
    assignment.give_back(session, first.id)  # returned on Prolific
    page = _second_task(browser, slug, "P-returner", prolific_id)
    assert 'id="check"' in page and "You have 1 try." in page
    r = browser.post(f"/task/{slug}/check", data={"csrf_token": tok, "q0": "The end"})
    assert 'id="check-failed"' in r.text  # the worker's second wrong try
    session.expire_all()
    second = session.scalar(select(Bundle).where(Bundle.external_assignment_id == "second-task"))
    assert (second.check_failures, second.checked_at, second.finished_at is not None) == (1, None, True)


def test_a_worker_spared_mid_study_takes_the_check_in_their_next_task(world, fake, session):
    """Spared the check in the task under way when it was turned on; their next task asks it.
    A worker who had failed it twice stays failed when the check is turned off and on again."""
    import re

    from app.studies.models import Study
    from tests.conftest import login

    study, slug = world["study"], world["study"].slug
    session.get(Study, study.id).max_bundles_per_worker = 2
    session.commit()
    csrf = login(world["client"], world["owner"])
    own = "What is marked?\n* The moment asked about\nThe end\n"
    prolific_id = _published(world, fake)
    # A worker fails the check twice; the check is turned off.
    assert _page_post(world, f"/studies/{study.id}/comprehension", csrf, mode="own", questions=own).status_code == 303
    hasty, _ = _enter(world, fake, prolific_id, "P-hasty")
    tok = re.search(r'name="csrf_token" value="([^"]*)"', hasty.get(f"/task/{slug}").text).group(1)
    for _ in range(2):
        r = hasty.post(f"/task/{slug}/check", data={"csrf_token": tok, "q0": "The end"})
    assert 'id="check-failed"' in r.text
    assert _page_post(world, f"/studies/{study.id}/comprehension", csrf, mode="none").status_code == 303
    early, _ = _enter(world, fake, prolific_id, "P-early")
    assert 'name="assignment_id"' in early.get(f"/task/{slug}").text  # no check now
    # On again: the early worker's task goes on without it...
    assert _page_post(world, f"/studies/{study.id}/comprehension", csrf, mode="own", questions=own).status_code == 303
    page = early.get(f"/task/{slug}").text
    assert 'name="assignment_id"' in page and 'id="check"' not in page
    # ...their next task asks it, and the worker who failed twice is still refused.
    page = _second_task(early, slug, "P-early", prolific_id)
    assert 'id="check"' in page and 'name="assignment_id"' not in page
    assert early.get(f"/api/v1/crowd/{slug}/next").status_code == 409
    page = _second_task(hasty, slug, "P-hasty", prolific_id)
    assert 'id="check-failed"' in page and 'name="assignment_id"' not in page

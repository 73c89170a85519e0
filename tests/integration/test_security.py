"""Security properties as a worker, a researcher and an outsider meet them: no gold or agent
leaks to workers and no reach into others' work (the queries that keep them out, on SQLite and
PostgreSQL), CSRF, escaping, password hashing, signed sessions, rate limits and upload limits
(decided before or beside any query: SQLITE_ONLY)."""

from __future__ import annotations

import base64
import csv
import gzip
import html
import io
import json
import re
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.agents.models import Agent
from app.audit import AuditEntry
from app.auth.models import ApiToken, User
from app.auth.security import create_token
from app.jobs import Job
from app.studies import services
from app.studies.models import Annotation, Assignment, Bundle, Item, Study
from tests.conftest import ROOT, consent_version_of, create_tom_study, csrf_of, login, make_user

FIXTURE = ROOT / "tests" / "fixtures" / "tom" / "questions.csv"
AGENT_NAMES = ("zeta-oracle-agent", "quokka-baseline-agent")
SQLITE_ONLY = pytest.mark.backend_agnostic("request checks made before or beside any query")


@pytest.fixture(autouse=True)
def _fresh_limits():
    """Cached settings never leak between tests (each app has its own rate limiter)."""
    from app.config import get_settings

    yield
    get_settings.cache_clear()


def _count(session, model, *where) -> int:
    session.expire_all()
    return session.scalar(select(func.count()).select_from(model).where(*where))


def enter(client: TestClient, slug: str, pid: str) -> str:
    """Enter a study as a Prolific worker; returns the session's CSRF token."""
    r = client.get(
        f"/s/{slug}", params={"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": pid}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"] == f"/task/{slug}", r.text
    return csrf_of(client)


def consent(client: TestClient, slug: str, token: str) -> None:
    """Agree to the consent text the task's page shows (the form sends its version)."""
    version = consent_version_of(client.get(f"/task/{slug}").text)
    r = client.post(
        f"/task/{slug}/consent", data={"csrf_token": token, "consent_version": version}, follow_redirects=False
    )
    assert r.status_code == 303, r.text


def hidden(page: str, name: str) -> str:
    m = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert m, f"no hidden {name} input"
    return m.group(1)


def _keys(obj, prefix="") -> set[str]:
    """Every key path of a JSON value, list positions folded (its shape)."""
    out = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(prefix + k)
            out |= _keys(v, prefix + k + ".")
    elif isinstance(obj, list):
        for v in obj:
            out |= _keys(v, prefix + "[].")
    return out


def _html_shape(page: str) -> str:
    """The item page with what legitimately differs between items blanked out: the dialogue,
    the question, the position and the per-request hidden values."""
    page = re.sub(r'(<section class="dialogue"[^>]*>).*?(</section>)', r"\1\2", page, flags=re.S)
    page = re.sub(r"(<legend>).*?(</legend>)", r"\1\2", page, flags=re.S)
    page = re.sub(r'(name="(?:csrf_token|assignment_id|idempotency_key)" value=")[^"]*', r"\1", page)
    page = re.sub(r"\d+", "0", page)
    return page


@pytest.fixture
def owner(session):
    return make_user(session, "researcher")


@pytest.fixture
def gold_study(session, owner):
    study = create_tom_study(session, owner, bundle_size=10, gold_rate=0.5, title="Security study")
    ids = session.scalars(select(Item.external_id).where(Item.study_id == study.id)).all()
    for n, name in enumerate(AGENT_NAMES):
        agent = services.register_agent(session, owner, "tom", name, description="secret")
        data = "".join(json.dumps({"question_id": i, "answer": "Yes" if n else "No"}) + "\n" for i in ids)
        services.import_agent_outputs(session, study, agent, data.encode())
    assert _count(session, Item, Item.study_id == study.id, Item.is_gold.is_(True)) > 0
    return study


# --------------------------------------------------------------------------------------------
# What a worker sees
# --------------------------------------------------------------------------------------------


def test_workers_never_see_gold_answers_agents_or_sources(app, session, gold_study):
    study = gold_study
    items = {i.id: i for i in session.scalars(select(Item).where(Item.study_id == study.id))}
    with TestClient(app) as w:
        token = enter(w, study.slug, "sec-worker-1")
        consent(w, study.slug, token)
        seen: dict[bool, tuple[str, dict]] = {}
        for _ in range(study.bundle_size):
            page = w.get(f"/task/{study.slug}")
            assert page.status_code == 200
            if "completion-code" in page.text:
                break
            nxt = w.get(f"/api/v1/crowd/{study.slug}/next")
            assert nxt.status_code == 200
            data = nxt.json()
            aid = int(hidden(page.text, "assignment_id"))
            assert data["assignment_id"] == aid  # the page and the API show the same lease
            session.expire_all()
            a = session.get(Assignment, aid)
            item = items[a.item_id]
            assert a.is_gold == item.is_gold
            seen.setdefault(item.is_gold, (page.text, data))
            _assert_nothing_leaks(page.text, data, item, study)
            r = w.post(
                f"/task/{study.slug}/answer",
                data={"csrf_token": token, "assignment_id": aid, "idempotency_key": uuid.uuid4().hex, "answer": "Yes"},
                follow_redirects=False,
            )
            assert r.status_code == 200, r.text  # the next item, in the same request
        assert set(seen) == {True, False}, "the bundle served no gold item (or only gold)"
        (gold_page, gold_json), (plain_page, plain_json) = seen[True], seen[False]
        # Same shape: nothing tells a gold item from a normal one.
        assert _keys(gold_json) == _keys(plain_json)
        assert _keys(gold_json) == {
            "state",
            "done",
            "assignment_id",
            "position",
            "of",
            "item",
            "item.question",
            "item.window",
            "item.window.[].index",
            "item.window.[].speaker",
            "item.window.[].text",
            "item.window.[].target",
        }
        assert _html_shape(gold_page) == _html_shape(plain_page)
        # The completion page and the consent page name no agent either.
        done = w.get(f"/task/{study.slug}").text
        for name in AGENT_NAMES:
            assert name not in done


def _assert_nothing_leaks(page: str, data: dict, item: Item, study: Study) -> None:
    text = json.dumps(data, ensure_ascii=False)
    forbidden_keys = {
        "reference",
        "answer",
        "is_gold",
        "gold",
        "source",
        "category",
        "cluster",
        "agent",
        "agents",
        "external_id",
        "id",
        "score",
        "response",
        "worker",
    }
    leaked = {k.rsplit(".", 1)[-1] for k in _keys(data)} & forbidden_keys
    assert not leaked, f"worker JSON carries {leaked}"
    for haystack in (text, page):
        low = haystack.lower()
        for word in ("reference", "is_gold", "gold", "dataset", "secret", *AGENT_NAMES):
            assert word not in low, f"{word!r} shown to a worker"
        assert item.external_id not in haystack  # ids derive from labels: they would hint
        assert item.cluster not in haystack
    # The page offers the two answers, none chosen, and no other inputs than its own.
    inputs = re.findall(r"<input[^>]*>", page)
    names = sorted(re.search(r'name="([^"]+)"', i).group(1) for i in inputs)
    assert names == ["answer", "answer", "assignment_id", "csrf_token", "idempotency_key"]
    assert not any("checked" in i for i in inputs)
    assert not re.search(r"data-(gold|answer|ref|correct)", page)


def test_worker_cannot_reach_research_admin_or_exports(app, session, owner, gold_study):
    study = gold_study
    jobs_before = _count(session, Job)
    with TestClient(app) as w:
        token = enter(w, study.slug, "sec-worker-2")
        worker = session.scalar(select(User).where(User.external_id == "sec-worker-2"))
        for path in (
            "/studies",
            f"/studies/{study.id}",
            f"/studies/{study.id}/leaderboard",
            f"/studies/{study.id}/progress",
            f"/admin/studies/{study.id}/review",
            "/admin/audit",
            "/account",
        ):
            r = w.get(path, follow_redirects=False)
            assert r.status_code == 303 and r.headers["location"].startswith("/login"), path
        r = w.post(f"/studies/{study.id}/exports", data={"csrf_token": token}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login")
        for path in (
            "/api/v1/studies",
            f"/api/v1/studies/{study.id}",
            f"/api/v1/studies/{study.id}/items",
            f"/api/v1/studies/{study.id}/review",
            f"/api/v1/studies/{study.id}/progress",
            "/api/v1/jobs/1",
            f"/api/v1/studies/{study.id}/leaderboard",
            "/api/v1/audit",
            "/api/v1/agents",
        ):
            assert w.get(path).status_code == 401, path
        r = w.post(f"/api/v1/studies/{study.id}/exports", headers={"X-CSRF-Token": token})
        assert r.status_code == 401
        # Even a token made out to a worker account opens nothing.
        wtoken = create_token(session, worker)
        session.commit()
        bearer = {"Authorization": f"Bearer {wtoken}"}
        for path in (f"/api/v1/studies/{study.id}/items", f"/api/v1/studies/{study.id}/review"):
            assert w.get(path, headers=bearer).status_code == 401
        assert w.post(f"/api/v1/studies/{study.id}/exports", headers=bearer).status_code == 401
    assert _count(session, Job) == jobs_before


def test_worker_cannot_answer_someone_elses_assignment(app, session, gold_study):
    study = gold_study
    with TestClient(app) as a, TestClient(app) as b:
        ta, tb = enter(a, study.slug, "sec-a"), enter(b, study.slug, "sec-b")
        consent(a, study.slug, ta)
        consent(b, study.slug, tb)
        a_page, b_page = a.get(f"/task/{study.slug}").text, b.get(f"/task/{study.slug}").text
        a_id, b_id = int(hidden(a_page, "assignment_id")), int(hidden(b_page, "assignment_id"))
        assert a_id != b_id
        before = _count(session, Annotation)

        # A answers B's current item: by the page form and by the API; refused, nothing stored.
        r = a.post(
            f"/task/{study.slug}/answer",
            data={"csrf_token": ta, "assignment_id": b_id, "idempotency_key": "steal-1", "answer": "Yes"},
            follow_redirects=False,
        )
        assert r.status_code in (403, 404, 409, 422), r.status_code
        r = a.post(
            f"/api/v1/crowd/{study.slug}/submit",
            json={"assignment_id": b_id, "idempotency_key": "steal-2", "response": {"answer": "Yes"}},
        )
        assert r.status_code in (403, 404, 409, 422) and r.json().get("field") == "assignment_id"
        assert _count(session, Annotation) == before
        session.expire_all()
        assert session.get(Assignment, b_id).state == "leased"

        # B answers; A can neither overwrite it nor replay B's idempotency key for itself.
        b_key = hidden(b_page, "idempotency_key")
        r = b.post(
            f"/task/{study.slug}/answer",
            data={"csrf_token": tb, "assignment_id": b_id, "idempotency_key": b_key, "answer": "No"},
            follow_redirects=False,
        )
        assert r.status_code == 200  # the next item, in the same request
        r = a.post(
            f"/api/v1/crowd/{study.slug}/submit",
            json={"assignment_id": b_id, "idempotency_key": "steal-3", "response": {"answer": "Yes"}},
        )
        assert 400 <= r.status_code < 500
        assert "annotation" not in r.json() and "response" not in r.json()  # nothing of B's echoed
        r = a.post(
            f"/api/v1/crowd/{study.slug}/submit",
            json={"assignment_id": a_id, "idempotency_key": b_key, "response": {"answer": "Yes"}},
        )
        assert 400 <= r.status_code < 500, "a replayed key of another worker returned their answer"
        assert "annotation" not in r.json()
        session.expire_all()
        rows = session.scalars(select(Annotation).where(Annotation.study_id == study.id)).all()
        assert [(x.assignment_id, x.response) for x in rows] == [(b_id, {"answer": "No"})]
        assert session.get(Assignment, a_id).state == "leased"
        # The worker's own answer still goes through.
        r = a.post(
            f"/api/v1/crowd/{study.slug}/submit",
            json={"assignment_id": a_id, "idempotency_key": "own-1", "response": {"answer": "Yes"}},
        )
        assert r.status_code == 200 and r.json()["stored"] is True


# --------------------------------------------------------------------------------------------
# CSRF
# --------------------------------------------------------------------------------------------


@SQLITE_ONLY
def test_cookie_form_posts_need_the_csrf_token(app, client, session, owner, gold_study):
    study = gold_study
    token = login(client, owner)
    audit_before = _count(session, AuditEntry)

    for bad in ({}, {"csrf_token": "forged"}, {"csrf_token": ""}):
        r = client.post(f"/studies/{study.id}/state", data={"state": "paused", **bad}, follow_redirects=False)
        assert r.status_code == 403, (bad, r.status_code)
    # a cross-site form can send text/plain; that is not a way around the token either
    r = client.post(
        "/api/v1/agents", content=json.dumps({"name": "csrf-agent"}), headers={"Content-Type": "text/plain"}
    )
    assert r.status_code == 403
    r = client.post(
        "/studies/new",
        data={"title": "CSRF", "action": "create"},
        files={"file": ("q.csv", FIXTURE.read_bytes(), "text/csv")},
        follow_redirects=False,
    )
    assert r.status_code == 403
    r = client.post("/account/tokens", data={"name": "csrf-token"}, follow_redirects=False)
    assert r.status_code == 403
    session.expire_all()
    assert session.get(Study, study.id).state == "live"
    assert _count(session, AuditEntry) == audit_before
    assert _count(session, Study) == 1
    assert _count(session, Agent, Agent.name == "csrf-agent") == 0
    assert _count(session, ApiToken) == 0

    r = client.post(f"/studies/{study.id}/state", data={"state": "paused", "csrf_token": token}, follow_redirects=False)
    assert r.status_code == 303
    session.expire_all()
    assert session.get(Study, study.id).state == "paused"
    r = client.post(
        f"/studies/{study.id}/state", data={"state": "live"}, headers={"X-CSRF-Token": token}, follow_redirects=False
    )
    assert r.status_code == 303  # the htmx header carries the token as well
    session.expire_all()
    assert session.get(Study, study.id).state == "live"
    r = client.post("/account/tokens", data={"name": "ok-token", "csrf_token": token})
    assert r.status_code == 200 and _count(session, ApiToken) == 1

    # A worker's consent form the same way.
    with TestClient(app) as w:
        wtoken = enter(w, study.slug, "csrf-worker")
        bundle = session.scalar(
            select(Bundle).join(User, User.id == Bundle.worker_id).where(User.external_id == "csrf-worker")
        )
        assert w.post(f"/task/{study.slug}/consent", follow_redirects=False).status_code == 403
        session.expire_all()
        assert session.get(Bundle, bundle.id).consented_at is None
        consent(w, study.slug, wtoken)
        session.expire_all()
        assert session.get(Bundle, bundle.id).consented_at is not None


# --------------------------------------------------------------------------------------------
# Escaping, passwords, sessions
# --------------------------------------------------------------------------------------------


def _script_csv() -> bytes:
    """The fixture with a <script> at the start of every dialogue line (questions must match
    the rules' template, so the payload goes into the context)."""
    rows = list(csv.reader(io.StringIO(FIXTURE.read_text("utf-8"), newline="")))
    col = rows[0].index("context")
    for row in rows[1:21]:
        row[col] = "\n".join(
            re.sub(r"^([AB]): ", r"\1: <script>alert('xss')</script> <b>bold</b> ", ln) for ln in row[col].split("\n")
        )
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows[:21])
    return out.getvalue().encode("utf-8")


@SQLITE_ONLY
def test_item_text_is_escaped_on_the_worker_page(app, client, session, owner):
    study = create_tom_study(
        session, owner, _script_csv(), bundle_size=3, gold_rate=0.0, title="<script>alert('title')</script> study"
    )
    token = enter(client, study.slug, "xss-worker")
    page = client.get(f"/task/{study.slug}").text  # the consent page shows the title
    assert "<script>alert(" not in page and "&lt;script&gt;alert(" in page
    consent(client, study.slug, token)
    page = client.get(f"/task/{study.slug}").text
    assert 'name="assignment_id"' in page
    assert "<script>alert(" not in page
    assert "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt;" in page
    # The JSON API hands the text back as data, unchanged.
    data = client.get(f"/api/v1/crowd/{study.slug}/next").json()
    assert any("<script>alert('xss')</script>" in u["text"] for u in data["item"]["window"])
    # And the researcher's list of studies escapes the title too.
    with TestClient(app) as r:
        login(r, owner)
        listing = r.get("/studies").text
        assert "<script>alert('title')" not in listing and "&lt;script&gt;alert(" in listing


@SQLITE_ONLY
def test_passwords_are_stored_as_argon2_hashes(client, session):
    user = make_user(session, "researcher", password="correct horse battery")
    session.expire_all()
    stored = session.get(User, user.id).password_hash
    assert stored.startswith("$argon2")
    assert "correct horse battery" not in stored
    token = csrf_of(client)
    r = client.post(
        "/login", data={"email": user.email, "password": "wrong", "csrf_token": token}, follow_redirects=False
    )
    assert r.status_code == 401
    login(client, user, "correct horse battery")
    assert client.get("/studies", follow_redirects=False).status_code == 200


@SQLITE_ONLY
def test_login_never_redirects_off_site(client, session):
    user = make_user(session, "researcher")
    for target in (
        "//evil.example/x",
        "https://evil.example/",
        "/\\evil.example",
        "/\t/evil.example",
        "http:evil.example",
        "javascript:alert(1)",
    ):
        client.cookies.clear()
        token = csrf_of(client)
        r = client.post(
            "/login",
            data={"email": user.email, "password": "pw-" + "x" * 8, "next": target, "csrf_token": token},
            follow_redirects=False,
        )
        assert r.status_code == 303
        location = r.headers["location"]
        assert location.startswith("/") and not location.startswith("//"), (target, location)
        assert "\\" not in location and "\t" not in location, (target, location)


def _session_cookie(client):
    return next(c for c in client.cookies.jar if c.name == "proctor_session")


@SQLITE_ONLY
def test_session_cookie_is_signed(app, client, session):
    from itsdangerous import TimestampSigner

    researcher = make_user(session, "researcher")
    admin = make_user(session, "admin")
    login(client, researcher)
    assert client.get("/studies", follow_redirects=False).status_code == 200
    cookie = _session_cookie(client)
    good = cookie.value
    payload, ts, sig = good.rsplit(".", 2)
    forged_payload = base64.b64encode(json.dumps({"uid": admin.id}).encode()).decode()
    other_signer = TimestampSigner("not-the-secret-key")
    tampered = {
        "flipped signature": f"{payload}.{ts}.{sig[:-2]}{'A' if sig[-2] != 'A' else 'B'}{sig[-1]}",
        "someone else's uid": f"{forged_payload}.{ts}.{sig}",
        "signed with another key": other_signer.sign(forged_payload.encode()).decode(),
        "unsigned": forged_payload,
    }
    for what, value in tampered.items():
        cookie.value = value
        r = client.get("/studies", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login"), what
        assert client.get("/admin/audit", follow_redirects=False).status_code == 303, what
    cookie = _session_cookie(client)
    cookie.value = good
    assert client.get("/studies", follow_redirects=False).status_code == 200


# --------------------------------------------------------------------------------------------
# Limits
# --------------------------------------------------------------------------------------------


def _set(monkeypatch, **env) -> None:
    from app.config import get_settings

    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    get_settings.cache_clear()


@SQLITE_ONLY
def test_entry_requests_are_rate_limited_per_client(app, client, session, owner, monkeypatch):
    study = create_tom_study(session, owner, bundle_size=3)
    _set(monkeypatch, RATE_LIMIT_ENTRY=3)
    for i in range(3):
        r = client.get(f"/s/{study.slug}", params={"PROLIFIC_PID": f"rl-{i}"}, follow_redirects=False)
        assert r.status_code == 303, (i, r.status_code)
    r = client.get(f"/s/{study.slug}", params={"PROLIFIC_PID": "rl-3"}, follow_redirects=False)
    assert r.status_code == 429
    r = client.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "rl-4"}})
    assert r.status_code == 429 and "too many" in r.json()["detail"]
    assert session.scalar(select(User).where(User.external_id.in_(("rl-3", "rl-4")))) is None
    with TestClient(app, client=("10.0.0.7", 40000)) as elsewhere:  # another client is not held up
        r = elsewhere.get(f"/s/{study.slug}", params={"PROLIFIC_PID": "rl-5"}, follow_redirects=False)
        assert r.status_code == 303


@SQLITE_ONLY
def test_uploads_over_the_size_limit_are_refused(app, client, session, owner, monkeypatch):
    study = create_tom_study(session, owner, bundle_size=3)
    agent = services.register_agent(session, owner, "tom", "size-agent")
    session.commit()
    data = FIXTURE.read_bytes()
    limit = 4096
    assert len(data) > limit
    _set(monkeypatch, MAX_UPLOAD_BYTES=limit)
    token = create_token(session, owner)
    session.commit()
    api = {"Authorization": f"Bearer {token}"}
    studies, items = _count(session, Study), _count(session, Item)

    r = client.post(
        "/api/v1/studies",
        headers=api,
        data={"settings": json.dumps({"title": "big"})},
        files={"file": ("q.csv", data, "text/csv")},
    )
    assert r.status_code == 422 and r.json()["field"] == "file", r.text
    assert "larger" in r.json()["detail"] and "field 'file'" in r.json()["detail"]
    # a small gzip that inflates past the limit (the limit is on the decompressed bytes)
    packed = gzip.compress(data)
    assert len(packed) < limit
    r = client.post(
        "/api/v1/studies",
        headers=api,
        data={"settings": json.dumps({"title": "bomb"})},
        files={"file": ("q.csv.gz", packed, "application/gzip")},
    )
    assert r.status_code == 422 and r.json()["field"] == "file", r.text
    answers = b"".join(json.dumps({"question_id": f"q{i}", "answer": "Yes"}).encode() + b"\n" for i in range(200))
    r = client.post(
        f"/api/v1/studies/{study.id}/agents/{agent.id}/outputs",
        headers=api,
        files={"file": ("a.jsonl", answers, "application/jsonl")},
    )
    assert r.status_code == 422 and r.json()["field"] == "file", r.text

    with TestClient(app) as page:
        csrf = login(page, owner)
        r = page.post(
            "/studies/new",
            data={"title": "big page", "action": "create", "csrf_token": csrf},
            files={"file": ("q.csv", data, "text/csv")},
            follow_redirects=False,
        )
        assert r.status_code == 422
        assert "field 'file'" in html.unescape(r.text) and "larger" in r.text
        r = page.post(
            f"/studies/{study.id}/agents",
            data={"name": "size-agent", "csrf_token": csrf},
            files={"file": ("a.jsonl", answers, "application/jsonl")},
            follow_redirects=False,
        )
        assert r.status_code == 422 and "field 'file'" in html.unescape(r.text)
    assert (_count(session, Study), _count(session, Item)) == (studies, items)

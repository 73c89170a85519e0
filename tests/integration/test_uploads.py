"""Bad uploads are refused whole, by the API (token) and by the researcher's page form, on SQLite
and PostgreSQL: an HTTP 4xx whose message names the line and the field where one applies, and
nothing half-imported (no study, no items, no changed agent outputs)."""

from __future__ import annotations

import csv
import gzip
import html
import io
import json
import re
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.agents.models import Agent, AgentOutput
from app.audit import AuditEntry
from app.auth.security import create_token
from app.studies import services
from app.studies.models import Item, Study
from tests.conftest import ROOT, create_tom_study, login, make_user

FIXTURE = ROOT / "tests" / "fixtures" / "tom" / "questions.csv"


def fixture_rows() -> list[list[str]]:
    return list(csv.reader(io.StringIO(FIXTURE.read_text("utf-8"), newline="")))


def to_csv(rows: list[list[str]]) -> tuple[bytes, list[int]]:
    """CSV bytes and the file line each row starts on (records span several lines)."""
    out, starts, line = io.StringIO(), [], 1
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        starts.append(line)
        before = out.tell()
        writer.writerow(row)
        line += out.getvalue()[before:].count("\n")
    return out.getvalue().encode("utf-8"), starts


@dataclass
class Case:
    data: bytes
    line: int | None
    field: str | None
    says: str  # a word the message must contain


def _cases() -> dict[str, Case]:
    rows = fixture_rows()[:8]
    header = rows[0]
    good, starts = to_csv(rows)
    cases = {}

    short = [list(r) for r in rows]
    short[3] = short[3][:-1]  # the record lost its last cell
    data, starts = to_csv(short)
    cases["malformed row"] = Case(data, starts[3], "context", "malformed")

    data, _ = to_csv(rows[:4])  # the unclosed record starts on the line after these
    cases["unclosed quote"] = Case(
        data + b'x:1,4,1,NB,PS,CT+,NA,NA,1,"never closed,No\n', data.count(b"\n") + 1, None, "malformed"
    )

    data, _ = to_csv([header + ["colour"]] + [r + ["red"] for r in rows[1:]])
    cases["unknown column"] = Case(data, 1, "colour", "unknown column")

    wrong = [list(r) for r in rows]
    wrong[2][header.index("belief_A")] = "MAYBE"
    data, starts = to_csv(wrong)
    cases["wrong label"] = Case(data, starts[2], "belief_A", "MAYBE")

    wrong = [list(r) for r in rows]
    wrong[5][header.index("answer")] = "Perhaps"
    data, starts = to_csv(wrong)
    cases["wrong answer"] = Case(data, starts[5], "answer", "Perhaps")

    cases["empty file"] = Case(b"", None, "file", "empty")
    cases["blank lines only"] = Case(b"\n\n\n", 1, None, "empty")
    cases["header only"] = Case(to_csv(rows[:1])[0], 2, None, "no questions")

    dup = [list(r) for r in rows]
    dup[4][0] = dup[1][0]
    data, starts = to_csv(dup)
    cases["duplicate question id"] = Case(data, starts[4], "question_id", "duplicate")

    long_id = [list(r) for r in rows]
    long_id[6][0] = "q" * 300  # longer than the stored id column: refused, not a server error
    data, starts = to_csv(long_id)
    cases["question id too long"] = Case(data, starts[6], "question_id", "longer")

    long_cid = [list(r) for r in rows]
    long_cid[2][header.index("cid")] = "c" * 300
    data, starts = to_csv(long_cid)
    cases["conversation id too long"] = Case(data, starts[2], "cid", "longer")

    cases["truncated gzip"] = Case(gzip.compress(good)[:-40], None, "file", "gzip")
    return cases


CASES = _cases()


def _counts(session) -> tuple[int, int, int]:
    session.expire_all()
    return tuple(session.scalar(select(func.count()).select_from(m)) for m in (Study, Item, AuditEntry))


def _check_message(message: str, case: Case) -> None:
    if case.line is not None:
        assert re.search(rf"\bline {case.line}\b", message), message
    else:
        assert not re.search(r"\bline \d", message), message
    if case.field is not None:
        assert f"field '{case.field}'" in message, message
    assert case.says.lower() in message.lower(), message


def _page_error(r) -> str:
    m = re.search(r'<p class="error" role="alert">(.*?)</p>', r.text, re.S)
    assert m, r.text[:500]
    return html.unescape(m.group(1))


@pytest.fixture
def researcher(session):
    return make_user(session, "researcher")


@pytest.mark.parametrize("name", list(CASES))
def test_bad_question_uploads_are_refused_whole(name, app, client, session, researcher):
    case = CASES[name]
    token = create_token(session, researcher)
    session.commit()
    before = _counts(session)
    filename = "q.csv.gz" if name == "truncated gzip" else "q.csv"

    r = client.post(
        "/api/v1/studies",
        headers={"Authorization": f"Bearer {token}"},
        data={"settings": json.dumps({"title": f"API {name}"})},
        files={"file": (filename, case.data, "text/csv")},
    )
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    body = r.json()
    assert body["line"] == case.line and body["field"] == case.field, body
    _check_message(body["detail"], case)
    assert _counts(session) == before

    with TestClient(app) as page:
        csrf = login(page, researcher)
        for action in ("preview", "create"):
            r = page.post(
                "/studies/new",
                data={"title": f"Page {name}", "action": action, "csrf_token": csrf},
                files={"file": (filename, case.data, "text/csv")},
                follow_redirects=False,
            )
            assert 400 <= r.status_code < 500, (action, r.status_code)
            message = _page_error(r)
            _check_message(message, case)
            assert message == body["detail"]  # the page says what the API says
            assert 'id="preview"' not in r.text
    assert _counts(session) == before
    assert session.scalar(select(Study).where(Study.title.like(f"%{name}"))) is None


def test_a_good_upload_after_a_bad_one_is_imported_whole(app, client, session, researcher):
    """The refusals above are not the app refusing everything: the same channels accept the
    good file, every item of it."""
    good, _ = to_csv(fixture_rows()[:8])
    token = create_token(session, researcher)
    session.commit()
    r = client.post(
        "/api/v1/studies",
        headers={"Authorization": f"Bearer {token}"},
        data={"settings": json.dumps({"title": "good"})},
        files={"file": ("q.csv", CASES["wrong label"].data, "text/csv")},
    )
    assert r.status_code == 422
    r = client.post(
        "/api/v1/studies",
        headers={"Authorization": f"Bearer {token}"},
        data={"settings": json.dumps({"title": "good"})},
        files={"file": ("q.csv.gz", gzip.compress(good), "application/gzip")},
    )
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    assert session.scalar(select(func.count()).select_from(Item).where(Item.study_id == sid)) == 7
    with TestClient(app) as page:
        csrf = login(page, researcher)
        r = page.post(
            "/studies/new",
            data={"title": "good page", "action": "create", "csrf_token": csrf},
            files={"file": ("q.csv", good, "text/csv")},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
    study = session.scalar(select(Study).where(Study.title == "good page"))
    assert session.scalar(select(func.count()).select_from(Item).where(Item.study_id == study.id)) == 7


# --------------------------------------------------------------------------------------------
# Agent answer imports
# --------------------------------------------------------------------------------------------


def _jsonl(*objs) -> bytes:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs).encode()


@pytest.fixture
def agent_world(session, researcher):
    data, _ = to_csv(fixture_rows()[:21])
    study = create_tom_study(session, researcher, data, title="Agent import study")
    ids = session.scalars(select(Item.external_id).where(Item.study_id == study.id).order_by(Item.id)).all()
    agent = services.register_agent(session, researcher, "tom", "steady-agent", "2")
    services.import_agent_outputs(
        session, study, agent, _jsonl(*({"question_id": i, "answer": "Yes"} for i in ids[:10]))
    )
    return study, agent, list(ids)


def _outputs(session, agent_id: int) -> dict:
    session.expire_all()
    return {
        o.item_id: (o.response, o.score)
        for o in session.scalars(select(AgentOutput).where(AgentOutput.agent_id == agent_id))
    }


def _agent_cases(ids: list[str]) -> dict[str, Case]:
    ok = [{"question_id": i, "answer": "No"} for i in ids[:6]]  # would change every output
    return {
        "bad JSON line": Case(
            _jsonl(ok[0], ok[1], '{"question_id": "%s", "answer": "No"' % ids[2], ok[3]), 3, None, "JSON"
        ),
        "unknown question id": Case(
            _jsonl(ok[0], {"question_id": "nope:1:2:A:CT+", "answer": "No"}, ok[2]),
            2,
            "question_id",
            "unknown question id",
        ),
        "bad answer value": Case(
            _jsonl(ok[0], ok[1], ok[2], {"question_id": ids[3], "answer": "Maybe"}, ok[4]), 4, "answer", "Maybe"
        ),
        "missing answer": Case(_jsonl(ok[0], {"question_id": ids[1]}), 2, "answer", "missing"),
        "duplicate answer": Case(_jsonl(ok[0], ok[1], ok[0]), 3, "question_id", "duplicate"),
        "not an object": Case(_jsonl(ok[0], "[1, 2]"), 2, None, "object"),
        "empty file": Case(b"", None, "file", "empty"),
        "truncated gzip": Case(gzip.compress(_jsonl(*ok))[:-30], None, "file", "gzip"),
    }


def test_bad_agent_answer_imports_are_refused_whole(app, client, session, researcher, agent_world):
    study, agent, ids = agent_world
    token = create_token(session, researcher)
    session.commit()
    outputs = _outputs(session, agent.id)
    assert len(outputs) == 10
    agents = session.scalar(select(func.count()).select_from(Agent))
    audit = _counts(session)[2]

    with TestClient(app) as page:
        csrf = login(page, researcher)
        for name, case in _agent_cases(ids).items():
            r = client.post(
                f"/api/v1/studies/{study.id}/agents/{agent.id}/outputs",
                headers={"Authorization": f"Bearer {token}"},
                files={"file": ("answers.jsonl", case.data, "application/jsonl")},
            )
            assert 400 <= r.status_code < 500, (name, r.status_code, r.text)
            body = r.json()
            assert (body["line"], body["field"]) == (case.line, case.field), (name, body)
            _check_message(body["detail"], case)
            assert _outputs(session, agent.id) == outputs, name

            # The page form: into the same agent, and as a new agent (which must not appear).
            for agent_name, version in ((agent.name, agent.version), (f"new {name}", "1")):
                r = page.post(
                    f"/studies/{study.id}/agents",
                    data={"name": agent_name, "version": version, "csrf_token": csrf},
                    files={"file": ("answers.jsonl", case.data, "application/jsonl")},
                    follow_redirects=False,
                )
                assert 400 <= r.status_code < 500, (name, r.status_code)
                message = _page_error(r)
                _check_message(message, case)
                assert message == body["detail"]
            assert _outputs(session, agent.id) == outputs, name
            assert session.scalar(select(func.count()).select_from(Agent)) == agents, name
    assert _counts(session)[2] == audit

    # And a good file still replaces them, whole.
    r = client.post(
        f"/api/v1/studies/{study.id}/agents/{agent.id}/outputs",
        headers={"Authorization": f"Bearer {token}"},
        files={
            "file": (
                "answers.jsonl",
                _jsonl(*({"question_id": i, "answer": "No"} for i in ids[:4])),
                "application/jsonl",
            )
        },
    )
    assert r.status_code == 200 and r.json() == {"imported": 4}
    assert sorted(v[0]["answer"] for v in _outputs(session, agent.id).values()) == ["No"] * 4

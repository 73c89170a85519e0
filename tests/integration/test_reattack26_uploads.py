"""Re-attack of issue 26.4: strings no database column can hold are refused at upload, never a 500.

Found from a fresh clone: a JSON string holding `\\u0000` (PostgreSQL text refuses U+0000) or a
lone surrogate `\\ud800` (no UTF-8 encodes it: hashing or storing it raises UnicodeEncodeError)
in an otherwise valid file answered 500: Hexagons procedures and the Common-ToM CG dialogues
(surrogates on both backends, U+0000 on PostgreSQL).

As in test_malformed_files.py the uploads are found through the registry: each kind's `demo()`
file of items, with its first strings replaced, through `POST /api/v1/studies`, and a JSONL
line of each bad string through every upload the kind takes.
"""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import func, select

from app import jsonsafe
from app.auth.security import create_token
from app.db import Base
from app.kinds import all_kinds
from app.studies import services
from app.studies.models import Study
from tests.conftest import make_user
from tests.integration.test_malformed_files import _fill, _targets

BAD = {"U+0000": '"x\\u0000y"', "lone surrogate": '"\\ud800"', "lone low surrogate": '"a\\udfffb"'}
KINDS = sorted(all_kinds())


def _counts(session) -> dict[str, int]:
    session.expire_all()
    return {t.name: session.scalar(select(func.count()).select_from(t)) for t in Base.metadata.sorted_tables}


def _sample_variants(kind) -> tuple[str, dict[str, bytes]]:
    demo = kind.demo() or {}
    if not demo.get("items") or demo.get("format") not in kind.item_formats:
        return "", {}
    text = demo["items"].decode("utf-8")
    out = {}
    for i, m in enumerate(list(re.finditer(r'(:\s*)"(?:[^"\\]|\\.)*"', text))[:4]):
        for name, value in BAD.items():
            out[f"sample string {i}: {name}"] = (text[: m.start()] + m.group(1) + value + text[m.end() :]).encode()
    return demo["format"], out


def test_the_json_parser_refuses_what_no_column_holds_with_its_line():
    for text, line in (('{"a": 1}\n{"b": "x\\u0000"}', 2), ('["ok", "\\ud800"]', 1), ('{"\\udc00": 1}', 1)):
        with pytest.raises(json.JSONDecodeError) as refused:
            jsonsafe.loads(text)
        assert refused.value.lineno == line, (text, refused.value)
    # A surrogate pair is one character; an escaped backslash before "u0000" is text.
    assert jsonsafe.loads('["\\ud83d\\ude00", "\\\\u0000", "\\\\\\\\ud800"]') == ["\U0001f600", "\\u0000", "\\\\ud800"]


@pytest.mark.parametrize("kind_name", KINDS)
def test_strings_no_column_holds_are_refused_by_every_upload(kind_name, app, session):
    from fastapi.testclient import TestClient

    kind = all_kinds()[kind_name]
    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    study = Study(
        kind=kind.name,
        owner_id=researcher.id,
        slug=f"reattack26-{kind.name}",
        title="bad text",
        completion_code="BADTEXT",
    )
    session.add(study)
    agent = services.register_agent(session, researcher, kind.name, "bad-text-agent")
    session.commit()
    fmt, samples = _sample_variants(kind)
    if samples and kind.demo().get("setup"):
        kind.demo()["setup"](session)
        session.commit()
    ids = {"study_id": study.id, "agent_id": agent.id}
    headers = {"Authorization": f"Bearer {token}"}
    lines = {
        f"JSONL {name}": (
            "upload.jsonl",
            ('{"id": %s, "question_id": %s, "answer": %s}\n' % (value, value, value)).encode(),
        )
        for name, value in BAD.items()
    }
    before = _counts(session)
    problems = []
    with TestClient(app, raise_server_exceptions=False) as client:
        for label, path, file_field, fields in _targets(kind):
            cases = dict(lines)
            if label == f"items:{fmt}":
                cases |= {name: ("sample", data) for name, data in samples.items()}
            for case, (filename, data) in cases.items():
                r = client.post(
                    _fill(path, ids),
                    headers=headers,
                    data=fields,
                    files={file_field: (filename, data, "application/octet-stream")},
                )
                where = f"{label} / {case}"
                if not 400 <= r.status_code < 500:
                    problems.append(f"{where}: {r.status_code} {r.text[:200]}")
                elif r.status_code == 422 and r.json().get("line") is None and r.json().get("field") is None:
                    problems.append(f"{where}: 422 names neither line nor field: {r.json()}")
                after = _counts(session)
                if after != before:
                    problems.append(f"{where}: rows changed")
                    before = after
    assert not problems, "\n".join(problems)


def _whole_file_refusals(kind, app, session, cases: dict) -> list[str]:
    from fastapi.testclient import TestClient

    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    study = Study(
        kind=kind.name, owner_id=researcher.id, slug=f"reattack26-gz-{kind.name}", title="gz", completion_code="GZIP"
    )
    session.add(study)
    agent = services.register_agent(session, researcher, kind.name, "gzip-agent")
    session.commit()
    ids = {"study_id": study.id, "agent_id": agent.id}
    headers = {"Authorization": f"Bearer {token}"}
    problems = []
    with TestClient(app, raise_server_exceptions=False) as client:
        for label, path, file_field, fields in _targets(kind):
            for case, (filename, data) in cases.items():
                r = client.post(
                    _fill(path, ids),
                    headers=headers,
                    data=fields,
                    files={file_field: (filename, data, "application/octet-stream")},
                )
                if not 400 <= r.status_code < 500:
                    problems.append(f"{label} / {case}: {r.status_code} {r.text[:200]}")
                elif r.status_code == 422 and r.json().get("line") is None and r.json().get("field") is None:
                    problems.append(f"{label} / {case}: 422 names neither line nor field: {r.json()}")
    return problems


@pytest.mark.parametrize("kind_name", KINDS)
def test_a_header_only_file_is_refused_naming_the_file(kind_name, app, session):
    """Found with the above: a CSV of a header only (STS missions) answered 422 naming neither
    line nor field. (A truncated gzip does too, on purpose: test_uploads.py pins it.)"""
    cases = {"CSV header only": ("upload.csv", b"id,level,instruction\n")}
    problems = _whole_file_refusals(all_kinds()[kind_name], app, session, cases)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("kind_name", KINDS)
def test_a_file_of_blank_lines_is_refused_naming_the_file(kind_name, app, session):
    """Not fixed with the above (the refusals are in app/studies/services.py, app/kinds/tom and
    app/kinds/sts/recordings.py): "the upload holds no items/outputs/questions/recordings"
    names neither line nor field, where an empty file's refusal does. Hexagons' and STS's
    formats name the file."""
    cases = {"blank lines only": ("upload.jsonl", b"\n  \n\n")}
    problems = _whole_file_refusals(all_kinds()[kind_name], app, session, cases)
    assert not problems, "\n".join(problems)

"""Every upload of every installed kind refuses malformed files with a 4xx, never a 500.

The uploads are found, not listed, so a new kind is covered without editing this file:

- each format in the kind's `item_formats`, through `POST /api/v1/studies` (a new study);
- its agents' outputs when `imports_outputs`, through
  `POST /api/v1/studies/{study}/agents/{agent}/outputs`;
- earlier annotations when it has a `prior_label`, through
  `POST /api/v1/studies/{study}/annotations/import`;
- every API route of the kind's own `routers()` (under `/api/`) that takes a file
  (a `File(...)` body parameter), e.g. STS's recordings and per-agent metrics. Its
  `{study_id}` and `{agent_id}` are a study and an agent of the kind; any other path
  parameter is a made-up name (a 404 there is still a refusal, not a crash).

The page forms (`/studies/new`, a kind's `/sts/...` forms) parse with the same importers and
answer with the same InputError; tests/integration/test_uploads.py checks that they say what
the API says, so only the API is driven here.

Each malformed file must be refused with a 4xx; a 422 must name a line or a field, and no
table's row count may change. The generic files stop most importers early (a missing field),
so where a kind's `demo()` has a file of items its format also gets variants of that file
(a NaN, an infinity or a 30-digit integer for its first number, an object for its first
text, its first record twice), which reach the importer's own checks; the file itself must
then still be accepted. The 30 MB line and the gzip bomb are made once per module.

A route refused before it reads the file (navigation's panoramas for an unknown building, its
generation runs without a speaker artifact) is only checked for a 4xx.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import re
import zipfile

import pytest
from fastapi import params
from fastapi.routing import APIRoute
from sqlalchemy import func, select

from app.auth.security import create_token
from app.db import Base
from app.kinds import all_kinds
from app.studies import services
from app.studies.models import Study
from tests.conftest import make_user

MB = 1024 * 1024
DEEP = 100_000


def _line(obj) -> bytes:
    return json.dumps(obj).encode() + b"\n"


@functools.cache
def _long_line() -> bytes:
    """A 30 MB line: one JSON object whose text is 30 MB (a CSV cell too, read as CSV)."""
    return b'{"id": "' + b"a" * (30 * MB) + b'"}\n'


@functools.cache
def _long_cell() -> bytes:
    """A CSV file whose second line holds a 30 MB cell (the csv module's limit is 131,072)."""
    return b"id,level\n" + b"a" * (30 * MB) + b",x\n"


@functools.cache
def _gzip_bomb(limit: int) -> bytes:
    """A small gzip that inflates past the upload limit (about 1,000 to 1)."""
    return gzip.compress(b"\n" * (limit + MB), compresslevel=6)


def _xlsx() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("xl/workbook.xml", "<workbook/>")
        z.writestr("xl/worksheets/sheet1.xml", "<worksheet/>")
    return out.getvalue()


# name -> (filename, bytes or a function of the upload limit)
CASES: dict[str, tuple] = {
    "empty": ("upload.jsonl", b""),
    "NUL bytes": ("upload.jsonl", _line({"id": "a"}) + b"\x00\x00\x00\x00\n"),
    "JSON 100,000 deep": ("upload.jsonl", b'{"id": ' + b"[" * DEEP + b"]" * DEEP + b"}\n"),
    "CSV-ish 100,000 deep": ("upload.csv", b"id,level\n" + b"[" * DEEP + b"\n"),
    "gzip bomb": ("upload.jsonl.gz", _gzip_bomb),
    "corrupt gzip": ("upload.jsonl.gz", gzip.compress(_line({"id": "a"}))[:-6] + b"garbage!"),
    "zip renamed .xlsx": ("upload.xlsx", _xlsx()),
    "UTF-16": ("upload.jsonl", _line({"id": "café", "level": "x"}).decode().encode("utf-16")),
    "Latin-1": ("upload.jsonl", '{"id": "café", "level": "x"}\n'.encode("latin-1")),
    "garbage after a BOM": ("upload.jsonl", b"\xef\xbb\xbf\xff\xfe\x80garbage\x81\n"),
    "30 MB line": ("upload.jsonl", lambda limit: _long_line()),
    "30 MB CSV cell": ("upload.csv", lambda limit: _long_cell()),
    "duplicate ids": ("upload.jsonl", _line({"id": "d", "question_id": "d", "answer": "Yes"}) * 2),
    "wrong JSON type": ("upload.jsonl", b'[1, 2, 3]\n"text"\n'),
    "an object for an id": ("upload.jsonl", b'{"id": {"x": 1}, "question_id": {"x": 1}}\n'),
    "NaN": ("upload.jsonl", b'{"id": NaN, "seed": NaN, "answer": NaN, "score": NaN}\n'),
    "30-digit integer": (
        "upload.jsonl",
        b'{"id": 123456789012345678901234567890, "seed": 123456789012345678901234567890}\n',
    ),
    # Past Python's 4,300 digits for int(): its ValueError is no JSON error (round 9: a 500 on
    # every JSON upload)
    "5,000-digit integer": ("upload.jsonl", b'{"id": "a", "seed": ' + b"1" * 5000 + b"}\n"),
}


def _file_routes(kind) -> list[tuple[str, str]]:
    """(path, the file parameter's name) of the kind's own API routes that take a file."""
    out = set()
    for router in kind.routers():
        for route in router.routes:
            if isinstance(route, APIRoute) and route.path.startswith("/api/") and "POST" in route.methods:
                out |= {
                    (route.path, f.alias) for f in route.dependant.body_params if isinstance(f.field_info, params.File)
                }
    return sorted(out)


def _targets(kind) -> list[tuple[str, str, str, dict]]:
    """(label, path template, file field, other form fields) of every upload the kind takes."""
    out = [
        (
            f"items:{fmt}",
            "/api/v1/studies",
            "file",
            {"kind": kind.name, "format": fmt, "settings": json.dumps({"title": "malformed"})},
        )
        for fmt in kind.item_formats
    ]
    if kind.imports_outputs:
        out.append(("outputs", "/api/v1/studies/{study_id}/agents/{agent_id}/outputs", "file", {}))
    if kind.prior_label:
        out.append(("annotations", "/api/v1/studies/{study_id}/annotations/import", "file", {"source": "malformed"}))
    out += [(f"route:{path}", path, name, {}) for path, name in _file_routes(kind)]
    return out


KINDS = sorted(all_kinds())


def _counts(session) -> dict[str, int]:
    """Every table's row count, in one statement: read after each of the ~1,000 uploads, one
    query a table cost ~30 ms a read on PostgreSQL."""
    session.expire_all()
    tables = Base.metadata.sorted_tables
    counts = select(*(select(func.count()).select_from(t).scalar_subquery().label(t.name) for t in tables))
    return dict(session.execute(counts).one()._mapping)


def _fill(path: str, ids: dict[str, int]) -> str:
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: str(ids.get(m.group(1), "malformed")), path)


BIG = "123456789012345678901234567890"


@functools.cache
def _demo(kind_name: str) -> dict:
    """A kind's `demo()` material, made once in the module (navigation's builds its houses:
    ~1 s, and each test needs it twice, on each backend)."""
    return all_kinds()[kind_name].demo() or {}


def _sample_cases(kind) -> tuple[str, bytes, dict[str, bytes]]:
    """(format, a file the kind accepts, malformed variants of it) from the kind's `demo()`
    material, when it has a file of items: the value cases then reach the importer's checks
    instead of stopping at a missing field. The first number becomes NaN or a 30-digit
    integer, the first text an object, and the first record is repeated."""
    demo = _demo(kind.name)
    if not demo.get("items") or demo.get("format") not in kind.item_formats:
        return "", b"", {}
    text = demo["items"].decode("utf-8")
    out = {}
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if len(lines) > 1:
        out["duplicate record"] = text.rstrip("\n") + "\n" + lines[0] + "\n"
    else:
        doc = json.loads(text)
        if isinstance(doc, list) and doc:
            out["duplicate record"] = json.dumps(doc + doc[:1])
    number = re.search(r"(:\s*)-?\d+(?:\.\d+)?(?=\s*[,}\]])", text)
    if number:
        for name, value in (("NaN", "NaN"), ("30-digit integer", BIG), ("Infinity", "-Infinity")):
            out[name] = text[: number.start()] + number.group(1) + value + text[number.end() :]
    string = re.search(r'(:\s*)"(?:[^"\\]|\\.)*"', text)
    if string:
        out["wrong JSON type"] = text[: string.start()] + string.group(1) + '{"not": ["text"]}' + text[string.end() :]
    return demo["format"], demo["items"], {f"sample {k}": v.encode() for k, v in out.items()}


@pytest.mark.parametrize("kind_name", KINDS)
def test_malformed_files_are_refused_by_every_upload(kind_name, app, session):
    from fastapi.testclient import TestClient

    from app.config import get_settings

    kind = all_kinds()[kind_name]
    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    study = Study(
        kind=kind.name,
        owner_id=researcher.id,
        slug=f"malformed-{kind.name}",
        title="malformed",
        completion_code="MALFORMED",
    )
    session.add(study)  # no items: a kind's importer would need real payloads, and none is asked for
    agent = services.register_agent(session, researcher, kind.name, "malformed-agent")
    session.commit()
    fmt, good, samples = _sample_cases(kind)
    if samples and _demo(kind.name).get("setup"):
        _demo(kind.name)["setup"](session)  # e.g. the building the sample's paths are in
        session.commit()
    ids = {"study_id": study.id, "agent_id": agent.id}
    headers = {"Authorization": f"Bearer {token}"}
    limit = get_settings().max_upload_bytes
    before = _counts(session)

    problems = []
    with TestClient(app, raise_server_exceptions=False) as client:  # a 500 is reported, not raised
        for label, path, file_field, fields in _targets(kind):
            cases = dict(CASES)
            if label == f"items:{fmt}":
                cases |= {name: ("sample", data) for name, data in samples.items()}
            for case, (filename, data) in cases.items():
                if callable(data):
                    data = data(limit)
                r = client.post(
                    _fill(path, ids),
                    headers=headers,
                    data=fields,
                    files={file_field: (filename, data, "application/octet-stream")},
                )
                where = f"{label} / {case}"
                if not 400 <= r.status_code < 500:
                    problems.append(f"{where}: {r.status_code} {r.text[:300]}")
                elif r.status_code == 422 and r.json().get("line") is None and r.json().get("field") is None:
                    problems.append(f"{where}: 422 names neither line nor field: {r.json()}")
                after = _counts(session)
                if after != before:
                    changed = {t: (before[t], after[t]) for t in after if after[t] != before[t]}
                    problems.append(f"{where}: rows changed {changed}")
                    before = after
        if good:  # the refusals are not the app refusing everything: the sample itself is taken
            r = client.post(
                "/api/v1/studies",
                headers=headers,
                data={"kind": kind.name, "format": fmt, "settings": json.dumps({"title": "good"})},
                files={"file": ("sample", good, "application/octet-stream")},
            )
            if r.status_code != 201:
                problems.append(f"items:{fmt} / the demo's own file: {r.status_code} {r.text[:300]}")
    assert not problems, "\n".join(problems)

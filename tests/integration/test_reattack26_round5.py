"""Issue 26, round five of the re-attack (from a fresh clone): the OpenAPI document and the code
still disagreed on what a body may hold. Each request below is judged by the document's own
schema (jsonschema, Draft 2020-12) and by the API, and the two must agree:

- JSON Schema's `integer` takes 1.0; pydantic's strict mode refused it (people-sample `n`, a
  study edit's `adaptive_floor`, the STS study's reference counts), answering 422;
- `"kind": ""` on a new agent was outside the schema's enum and was taken as the default kind;
- `\\S` is ECMA-262's in the schema and Python's `str.strip()` in the code: U+001C-U+001F and
  U+0085 are blank to Python only (refused with 422 though the schema allowed them), U+FEFF
  to ECMA only (taken though the schema forbade it).
"""

from __future__ import annotations

import re

import jsonschema
import pytest
from fastapi.testclient import TestClient

from app.auth.security import create_token
from app.params import NOT_BLANK
from tests.conftest import create_tom_study, make_user


def _body_schema(doc: dict, path: str, method: str) -> dict:
    schema = doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
    # The document's components, so that $ref resolves.
    return {**schema, "components": doc.get("components", {})}


def _agree(doc, c, method: str, path: str, template: str, body, expected: int) -> None:
    valid = jsonschema.Draft202012Validator(_body_schema(doc, template, method.lower())).is_valid(body)
    r = c.request(method, path, json=body)
    assert r.status_code == expected, (body, r.text)
    assert valid is (expected < 400 or expected in (404, 409)), (body, "the schema's verdict", valid)


def test_the_schema_and_the_code_agree_on_whole_numbers_and_names(app, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, live=False)
    token = create_token(session, owner, "round5")
    session.commit()
    doc = app.openapi()
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as c:
        sample = f"/api/v1/studies/{study.id}/people-sample"
        for body, expected in (({"n": 1.0}, 200), ({"n": "1"}, 422), ({"n": True}, 422), ({"n": 1.5}, 422)):
            _agree(doc, c, "PUT", sample, "/api/v1/studies/{study_id}/people-sample", body, expected)
        edit = f"/api/v1/studies/{study.id}"
        for body, expected in (({"adaptive_floor": 2.0}, 200), ({"adaptive_floor": "2"}, 422)):
            _agree(doc, c, "PATCH", edit, "/api/v1/studies/{study_id}", body, expected)
        suite = "/api/v1/sts/suites/{suite_id}/versions/{number}/study"
        body = {"title": "t", "agents": ["expert"], "reference": {"expert_successes": 3.0}}
        _agree(doc, c, "POST", "/api/v1/sts/suites/999/versions/1/study", suite, body, 404)  # no such suite
        for body, expected in (
            ({"name": "a1", "kind": ""}, 422),
            ({"name": "\u001c"}, 422),
            ({"name": "a2", "version": "\u001d"}, 422),
            ({"name": "\u0085"}, 422),
            ({"name": "\ufeff"}, 201),
            ({"name": "a3"}, 201),
        ):
            _agree(doc, c, "POST", "/api/v1/agents", "/api/v1/agents", body, expected)


def test_not_blank_is_pythons_blank_in_every_code_point():
    """NOT_BLANK matches a text exactly when str.strip() leaves something of it."""
    for cp in [*range(0x3100), *range(0xFE00, 0x10000)]:
        ch = chr(cp)
        if 0xD800 <= cp < 0xE000:
            continue
        assert bool(re.search(NOT_BLANK, ch)) is bool(ch.strip()), hex(cp)


@pytest.mark.parametrize("cp", [0x1C, 0x1F, 0x85, 0xFEFF, 0x3000, 0x41])
def test_not_blank_reads_the_same_in_ecma_262(cp):
    """The schema's regular expressions are ECMA-262's: the class must read alike there."""
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("no node here to read the pattern as ECMA-262 does")
    script = f"process.stdout.write(String(new RegExp({NOT_BLANK!r}).test(String.fromCodePoint({cp}))))"
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, check=True).stdout
    assert out == str(bool(chr(cp).strip())).lower()

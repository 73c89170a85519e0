"""The OpenAPI document says what the code accepts (issue 26): a query parameter with a fixed
set of values lists them and a value outside is refused (422) by FastAPI itself; a name the
code refuses when empty has minLength 1 in the schema; and a method a path does not answer is
a 405 whose Allow lists exactly the methods of that path, over every route on it. The fuzz
(test_api_fuzz.py) checks the same with every schemathesis check; these are the named cases."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.params import NOT_BLANK
from tests.conftest import make_user

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "the OpenAPI document and FastAPI's own parameter checks"
)

JSON = {"Accept": "application/json"}


@pytest.fixture(scope="module")
def doc():
    from app.main import create_app

    return create_app("sqlite://").openapi()


def _schema(doc, ref_or_schema: dict) -> dict:
    ref = ref_or_schema.get("$ref")
    return doc["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else ref_or_schema


def _json_body(doc, path: str, method: str = "post") -> dict:
    return _schema(doc, doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"])


def test_job_states_are_listed_and_others_refused(doc, app, session):
    from app.api import JOB_STATES
    from app.auth.security import create_token

    (state,) = [p for p in doc["paths"]["/api/v1/jobs"]["get"]["parameters"] if p["name"] == "state"]
    listed = [s for alt in state["schema"]["anyOf"] for s in alt.get("enum", [])]
    assert listed == list(JOB_STATES)
    token = create_token(session, make_user(session, "researcher"), "t")
    session.commit()
    with TestClient(app, headers={"Authorization": f"Bearer {token}", **JSON}) as c:
        assert c.get("/api/v1/jobs?state=done").status_code == 200
        for bad in ("whatever", ""):
            r = c.get(f"/api/v1/jobs?state={bad}")
            assert r.status_code == 422 and r.json()["field"] == "state", r.text


def test_empty_names_are_refused_as_the_schema_says(doc, app, session):
    from app.auth.security import create_token

    for path, field in (("/api/v1/agents", "name"), ("/api/v1/sts/suites", "name")):
        prop = _json_body(doc, path)["properties"][field]
        assert prop["minLength"] == 1 and prop["pattern"] == NOT_BLANK, (path, prop)
    decision = _json_body(doc, "/api/v1/studies/{study_id}/review")["properties"]["decision"]
    assert decision["enum"] == ["approve", "reject"]
    token = create_token(session, make_user(session, "admin"), "t")
    session.commit()
    with TestClient(app, headers={"Authorization": f"Bearer {token}", **JSON}) as c:
        for name in ("", "   "):
            for path in ("/api/v1/agents", "/api/v1/sts/suites"):
                r = c.post(path, json={"name": name})
                assert r.status_code == 422 and r.json()["field"] == "name", (path, name, r.text)
        assert c.post("/api/v1/agents", json={"name": "a"}).status_code == 201


def test_a_405_allows_exactly_the_methods_of_its_path(doc, app):
    """A path's GET and POST (or GET and PATCH) are separate routes: the 405 lists both."""
    with TestClient(app, headers=JSON) as c:
        for path, url in (
            ("/api/v1/studies", "/api/v1/studies"),
            ("/api/v1/agents", "/api/v1/agents"),
            ("/api/v1/studies/{study_id}", "/api/v1/studies/1"),
            ("/api/v1/jobs/{job_id}/cancel", "/api/v1/jobs/1/cancel"),
        ):
            documented = {m.upper() for m in doc["paths"][path]}
            for method in ("OPTIONS", "PUT", "DELETE", "TRACE"):
                if method in documented:
                    continue
                r = c.request(method, url)
                assert r.status_code == 405, (method, url, r.status_code)
                allow = {m.strip() for m in r.headers["allow"].split(",")} - {"HEAD"}
                assert allow == documented, (method, url, r.headers["allow"])


def test_a_pages_405_says_what_it_allows_too(app):
    """Re-attack round 5: the HTML error page dropped the exception's headers, so a page's 405
    (the healthz check, the login page, the docs) had no Allow, which RFC 9110 requires."""
    with TestClient(app) as c:
        for method, url, allowed in (
            ("DELETE", "/healthz", {"GET"}),
            ("PUT", "/openapi.json", {"GET"}),
            ("DELETE", "/login", {"GET", "POST"}),
            ("PATCH", "/help/statistics", {"GET"}),
        ):
            r = c.request(method, url)
            assert r.status_code == 405, (method, url, r.status_code)
            assert {m.strip() for m in r.headers.get("allow", "").split(",")} - {"HEAD"} == allowed, (url, r.headers)


def test_head_is_answered_as_get_without_the_body(app):
    """Re-attack round 5: HEAD / and HEAD /healthz were 405s. HEAD now has the GET's status and
    headers and no body; a path with no GET still refuses it."""
    with TestClient(app) as c:
        for url in ("/", "/healthz", "/openapi.json", "/static/favicon.svg"):
            got, head = c.get(url), c.head(url)
            assert head.status_code == got.status_code == 200, (url, head.status_code)
            assert head.content == b"" and got.content, url
            assert head.headers["content-type"] == got.headers["content-type"], url
            assert head.headers.get("content-length") == got.headers.get("content-length"), url
        assert c.head("/api/v1/crowd/x/submit").status_code == 405  # POST only


def test_upload_forms_type_their_closed_fields(doc, app, session):
    """Issue 26.8 (re-attack round 6): the upload routes' forms typed closed fields as free
    strings (an artifact's role and format, a generation's n, k, metric...), so the fuzzer had
    to exempt uploads from "a request the schema allows is taken". Now they say what the code
    takes; a role of another kind is the agent's kind refusing it (409), a role of no kind 422."""
    from app.agents.models import ARTIFACT_FORMATS
    from app.auth.security import create_token
    from app.kinds import all_kinds
    from app.studies import services

    def form(path: str) -> dict:
        return _schema(doc, doc["paths"][path]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"])

    upload = form("/api/v1/agents/{agent_id}/artifacts")["properties"]
    assert upload["role"]["enum"] == sorted({r for k in all_kinds().values() for r in k.artifact_roles})
    assert upload["format"]["enum"] == sorted(ARTIFACT_FORMATS)
    generations = form("/api/v1/studies/{study_id}/generations")
    (runs,) = [s for s in form("/api/v1/studies/{study_id}/runs")["anyOf"] if s["title"].startswith("navigation")]
    assert generations == runs  # the same fields, read the same way
    assert generations["properties"]["n"]["type"] == "integer"
    assert generations["properties"]["metric"]["enum"] == ["ndtw", "sdtw"]
    owner = make_user(session, "researcher")
    token = create_token(session, owner, "t")
    sts = services.register_agent(session, owner, "sts", "a policy")
    session.commit()
    with TestClient(app, headers={"Authorization": f"Bearer {token}", **JSON}) as c:
        url = f"/api/v1/agents/{sts.id}/artifacts"
        files = {"file": ("m.pt", b"PK\x03\x04", "application/octet-stream")}
        r = c.post(url, data={"role": "speaker", "format": "torchscript"}, files=files)
        assert r.status_code == 409 and r.json()["field"] == "role", r.text
        r = c.post(url, data={"role": "pilot", "format": "torchscript"}, files=files)
        assert r.status_code == 422 and r.json()["field"] == "role", r.text


def test_a_torchscript_upload_with_a_config_is_refused_as_the_schema_says(doc, app, session):
    """Issue 26.8 (round 7 of the re-attack): a TorchScript archive carries its own config, so the
    route refuses one sent with it (422 on `config`), and the form's schema allowed it. The
    schema now says so: with `format` torchscript, `config` is blank or an empty JSON object."""
    import io
    import zipfile

    import jsonschema

    from app.auth.security import create_token
    from app.studies import services

    body = doc["paths"]["/api/v1/agents/{agent_id}/artifacts"]["post"]["requestBody"]["content"]
    form = body["multipart/form-data"]["schema"]
    schema = {"allOf": [_schema(doc, form), {k: v for k, v in form.items() if k != "$ref"}]}
    valid = jsonschema.Draft202012Validator(schema).is_valid
    base = {"role": "speaker", "file": "x"}
    configs = {'{"hidden": 64}': False, "[]": False, "": True, " \n": True, "{}": True, " { } ": True}
    for config, taken in configs.items():
        assert valid({**base, "format": "torchscript", "config": config}) == taken, config
        assert valid({**base, "format": "safetensors", "config": config}), config  # the architecture's to check
    owner = make_user(session, "researcher")
    token = create_token(session, owner, "t")
    agent = services.register_agent(session, owner, "navigation", "a speaker")
    session.commit()
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:  # what the upload checks of an archive's shape
        z.writestr("m/code/__torch__.py", "")
        z.writestr("m/data.pkl", "")
    with TestClient(app, headers={"Authorization": f"Bearer {token}", **JSON}) as c:
        for config, taken in configs.items():
            files = {"file": ("m.pt", archive.getvalue(), "application/octet-stream")}
            data = {"role": "speaker", "format": "torchscript", "config": config}
            r = c.post(f"/api/v1/agents/{agent.id}/artifacts", data=data, files=files)
            if taken:
                assert r.status_code == 201, (config, r.text)
            else:
                assert r.status_code == 422 and r.json()["field"] == "config", (config, r.text)

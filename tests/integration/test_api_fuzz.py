"""Schemathesis over /openapi.json: every API operation fuzzed from its documented schema,
anonymously and with an admin's API token, checked for no 5xx and for answers that match the
schema (status code, content type, JSON body: our error shape, `ErrorOut`, for every 4xx).
Then what a fuzzer rarely reaches by chance, asked for on purpose: ids past int64, negative
offsets, JSON nested 10,000 deep in bodies, form fields and uploads: each a clear 4xx in the
API's shape, never a 500 or a RecursionError.

The fuzz runs on SQLite (one database for the module: cases build on each other's rows); the
explicit cases on SQLite and PostgreSQL. A deeper run: PROCTOR_FUZZ_EXAMPLES=500, and
PROCTOR_FUZZ_BACKEND=postgresql for what only PostgreSQL refuses (a string past its column).
"""

from __future__ import annotations

import json
import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from sqlalchemy import update

from tests.conftest import ROOT, _fresh_sqlite, _truncate, _use, create_tom_study, make_user

pytestmark = pytest.mark.timeout(300)

schemathesis.checks.load_all_checks()
# Every check schemathesis has (`--checks all`): no 5xx, answers as documented, a request the
# schema allows taken and one it forbids refused, a 405 with the right Allow for other methods.
CHECKS = schemathesis.checks.CHECKS.get_all()
# Small enough that the whole file runs in about a minute on two cores.
BUDGET = settings(
    max_examples=int(os.environ.get("PROCTOR_FUZZ_EXAMPLES", "15")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def fuzz_world(request, tmp_path_factory):
    """One app on one database for every fuzzed operation: an admin with a token, a live
    study and an agent (so small generated ids name real rows)."""
    from app.auth.security import create_token
    from app.config import get_settings
    from app.db import get_engine, get_sessionmaker
    from app.main import create_app
    from app.studies import services

    from tests.fakes.prolific import FakeProlific, Served

    served = Served(FakeProlific())  # Prolific's calls go to the fake: it knows none of the fuzzer's tokens
    fake = served.__enter__()
    folder = tmp_path_factory.mktemp("fuzz")
    if os.environ.get("PROCTOR_FUZZ_BACKEND", "sqlite") == "postgresql":
        url = request.getfixturevalue("pg_database")
        _truncate(url)
    else:
        url = _fresh_sqlite(request.getfixturevalue("sqlite_template"), folder)
    env = pytest.MonkeyPatch()
    _use(url, folder / "blobs", env)
    env.setenv("PROLIFIC_API_URL", fake.url)
    with get_sessionmaker(url)() as s:
        admin = make_user(s, "admin")
        create_tom_study(s, admin)
        services.register_agent(s, admin, "tom", "fuzz-agent")
        token = create_token(s, admin, "fuzz")
        s.commit()
    yield {"app": create_app(url), "token": token, "db_url": url}
    env.undo()
    served.__exit__()
    get_engine(url).dispose()
    get_engine.cache_clear()
    get_settings.cache_clear()


def _schema():
    # Read once, at collection, from an app with no database behind it (serving /openapi.json
    # touches none); the cases go to the fixture's app (`app=`). schemathesis.pytest.from_fixture
    # would do this lazily, but it sets a pytest attribute that pytest 9 no longer has.
    from app.main import create_app

    from schemathesis.config import SchemathesisConfig

    # No U+0000 in generated strings: no text column stores it (PostgreSQL refuses it), so the
    # API refuses it with a 422 naming where (app/jsonsafe.py); a lone surrogate is no UTF-8.
    config = SchemathesisConfig.from_dict({"generation": {"allow-x00": False}})
    return schemathesis.openapi.from_asgi("/openapi.json", create_app("sqlite://"), config=config)


schema = _schema()


def _opaque_parts() -> dict[tuple[str, str], dict[str, dict | None]]:
    """Per operation that takes a file: the form parts whose content the schema does not check,
    each with the content's schema where it gives one (JSON text: a study's settings) or None (a
    file: a CSV's columns, JSON lines, a model's weights; a model's config, whose schema is its
    architecture's). Its other fields are typed like any body's."""
    doc = schema.raw_schema
    found: dict[tuple[str, str], dict[str, dict | None]] = {}
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            form = op.get("requestBody", {}).get("content", {}).get("multipart/form-data", {}).get("schema", {})
            if "$ref" in form:
                form = doc["components"]["schemas"][form["$ref"].rsplit("/", 1)[-1]]
            for variant in form.get("anyOf", [form]):
                for name, prop in variant.get("properties", {}).items():
                    prop = prop.get("items", prop)
                    if "contentMediaType" in prop or prop.get("format") == "binary":
                        found.setdefault((method.upper(), path), {})[name] = prop.get("contentSchema")
    return found


OPAQUE = _opaque_parts()


def _content_is_bad(text: object, content_schema: dict | None) -> bool:
    """Whether a part's content breaks its schema (contentSchema is an annotation: a fuzzer's
    string need not be JSON, let alone of that shape), or the schema cannot say (None)."""
    import jsonschema

    if content_schema is None:
        return True
    try:
        return not jsonschema.Draft202012Validator(content_schema).is_valid(json.loads(str(text)))
    except (ValueError, RecursionError):
        return True


@schemathesis.check
def uploads_refuse_only_their_content(ctx, response, case):
    """positive_data_acceptance for an upload: a request the schema allows may be refused for
    what is in its file or JSON part (a 4xx naming a line, or naming a part whose content breaks
    its contentSchema or has none), never for a typed field."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code not in (400, 422):
        return None
    body = response.json()
    field = str(body.get("field") or "")
    parts, part = OPAQUE[(case.method, case.path)], field.split(".")[0].split("[")[0]
    sent = case.body if isinstance(case.body, dict) else {}  # schemathesis' NotSet: no body
    if body.get("line") is not None or (part in parts and _content_is_bad(sent.get(part), parts[part])):
        return None
    raise AssertionError(f"a request its schema allows was refused for {field or 'no field'}: {body.get('detail')}")


# Requests the schema describes that only doing the work can refuse, each for its reason.
REFUSED_BY_THE_WORK = {
    ("POST", "/api/v1/sts/recordings/expert"): "the expert may not win from a seed within max_steps",
    ("PUT", "/api/v1/studies/{study_id}/people-sample"): "n is at most the study's items and at least "
    "the items people have begun; one of n or width, and width with agreement",
    ("PUT", "/api/v1/studies/{study_id}/auto-pause"): "the marked comparisons are pairs of the study's "
    "agents (the probe's kind ranks none)",
    ("PATCH", "/api/v1/studies/{study_id}"): "adaptive allocation needs a kind that ranks agents (the "
    "probe's does not) and a floor within the study's annotations per item; a comprehension check's "
    "own questions are read block by block (two options or more, one marked right), and the default "
    "needs a kind that has one",
    ("POST", "/api/v1/plan"): "a plan's fields are checked together (one score needs a difference; "
    "people need a judge; the simulation's budget is agents x studies)",
    ("PUT", "/api/v1/prolific/token"): "Prolific (the fake) accepts only a token it issued",
    **{
        (method, f"/api/v1{path}"): "needs a Prolific token stored (none is: Prolific accepts none of the fuzzer's)"
        for method, path in (
            ("GET", "/prolific/account"),
            ("POST", "/studies/{study_id}/prolific/cost"),
            ("POST", "/studies/{study_id}/prolific"),
            ("POST", "/studies/{study_id}/prolific/transition"),
            ("POST", "/studies/{study_id}/prolific/reviews"),
            ("POST", "/studies/{study_id}/prolific/bonuses"),
            ("POST", "/studies/{study_id}/prolific/blocks"),
            ("POST", "/studies/{study_id}/prolific/reclaim"),
            ("POST", "/studies/{study_id}/prolific/messages"),
            ("PUT", "/prolific/allow-list"),
            ("POST", "/prolific/hooks"),
        )
    },
    ("POST", "/api/v1/prolific/hooks/{account_id}"): "a hook is taken only for an account subscribed to "
    "Prolific's hooks, signed with its secret",
}


def _check(case, fuzz_world, **kwargs):
    checks, excluded = CHECKS, []
    if (case.method, case.path) in REFUSED_BY_THE_WORK or (case.method, case.path) in OPAQUE:
        excluded = [schemathesis.checks.positive_data_acceptance]
    if (case.method, case.path) in OPAQUE:
        checks = [*CHECKS, uploads_refuse_only_their_content]
    case.call_and_validate(checks=checks, excluded_checks=excluded, app=fuzz_world["app"], **kwargs)


def _unrevoke(db_url: str) -> None:
    """A generated id may name the fuzzer's own token: revoking it would end the run early."""
    from app.auth.models import ApiToken
    from app.db import get_sessionmaker

    with get_sessionmaker(db_url)() as s:
        s.execute(update(ApiToken).values(revoked=False))
        s.commit()


@schema.parametrize()
@BUDGET
def test_api_anonymous(case, fuzz_world):
    _check(case, fuzz_world)


@schema.parametrize()
@BUDGET
def test_api_with_an_admin_token(case, fuzz_world):
    _unrevoke(fuzz_world["db_url"])
    _check(case, fuzz_world, headers={"Authorization": f"Bearer {fuzz_world['token']}"})


# --------------------------------------------------------------------------------------------
# Asked for on purpose (SQLite and PostgreSQL)
# --------------------------------------------------------------------------------------------

HUGE = "99999999999999999999999"  # past int64
INT4 = 2**31  # past PostgreSQL's integer, which ids are
DEEP = "[" * 10_000 + "]" * 10_000


def _refused(r, status: int = 422, field: str | None = None) -> dict:
    """A clear refusal in the API's shape: the status, JSON, a `detail` string."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    body = r.json()
    assert isinstance(body.get("detail"), str) and body["detail"], body
    if field is not None:
        assert body.get("field") == field, body
    return body


@pytest.fixture
def admin_api(app, session):
    from fastapi.testclient import TestClient

    from app.auth.security import create_token
    from app.studies import services

    admin = make_user(session, "admin")
    study = create_tom_study(session, admin)
    agent = services.register_agent(session, admin, "tom", "robust-agent")
    token = create_token(session, admin, "robust")
    nav = services.register_agent(session, admin, "navigation", "robust-nav")
    session.commit()
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as c:
        c.study, c.agent, c.nav_agent = study.id, agent.id, nav.id
        yield c


ID_ROUTES = [
    ("GET", "/api/v1/studies/{n}"),
    ("GET", "/api/v1/studies/{n}/items"),
    ("GET", "/api/v1/jobs/{n}"),
    ("POST", "/api/v1/jobs/{n}/cancel"),
    ("POST", "/api/v1/tokens/{n}/revoke"),
    ("GET", "/api/v1/agents/{n}/artifacts"),
    ("GET", "/api/v1/generations/{n}"),
    ("GET", "/api/v1/studies/{n}/annotations/{n}/trace.jsonl"),
    ("POST", "/api/v1/studies/{n}/exports"),
    ("GET", "/api/v1/studies/{n}/review"),
]


def test_ids_out_of_range_are_refused_as_input(admin_api):
    """An id past the database's range (or below 1) is a 422 naming the parameter, never sent
    to the database (PostgreSQL: "integer out of range", SQLite past int64: OverflowError; both
    a 500)."""
    for method, path in ID_ROUTES:
        for n in (HUGE, str(2**63), str(INT4), "-1", "0"):
            body = _refused(admin_api.request(method, path.format(n=n)))
            assert body["field"].startswith("path."), (path, n, body)
    assert admin_api.get(f"/api/v1/studies/{INT4 - 1}").status_code == 404  # the largest: looked up


def test_ids_out_of_range_on_the_pages_too(admin_api):
    r = admin_api.get(f"/studies/{HUGE}")
    assert r.status_code == 422 and "text/html" in r.headers["content-type"]
    assert admin_api.get(f"/admin/studies/1/participants/{HUGE}").status_code == 422


def test_ids_out_of_range_inside_json_bodies(admin_api):
    r = admin_api.post(
        f"/api/v1/studies/{admin_api.study}/review", json={"participant_ids": [INT4], "decision": "approve"}
    )
    _refused(r, field="participant_ids.0")
    r = admin_api.post(
        "/api/v1/crowd/nowhere/submit", json={"assignment_id": 2**64, "idempotency_key": "k", "response": {}}
    )
    _refused(r, field="assignment_id")
    r = admin_api.post(
        "/api/v1/crowd/nowhere/submit", json={"assignment_id": INT4, "idempotency_key": "k", "response": {}}
    )
    _refused(r, field="assignment_id")


def test_ids_out_of_range_in_form_fields(admin_api, session):
    """Ids a form carries as text are bounded too: a generation run's artifacts, the workers an
    admin decides on; and a number of days is ASCII digits ("²" is a digit to isdigit())."""
    from app.kinds.navigation.environments import import_house
    from app.kinds.navigation.house import generate_house, sample_paths, to_r2r
    from app.studies import services

    house = generate_house(1)
    import_house(session, house)
    paths = json.dumps(to_r2r(house, sample_paths(house, 2, rng=1), [["Go."], ["Go."]])).encode()
    admin = session.merge(make_user(session, "admin"))
    study = services.create_study(session, admin, "navigation", services.StudySettings(title="gen"), paths, "r2r")
    session.commit()
    # (the admin's token may manage every study)
    for ids in (
        {"speaker_artifact_id": str(INT4)},
        {"speaker_artifact_id": HUGE},
        {"speaker_artifact_id": "1", "listener_artifact_ids": f"[{INT4}]"},
    ):
        r = admin_api.post(
            f"/api/v1/studies/{study.id}/generations",
            data=ids,
            files={"file": ("paths.json", paths, "application/json")},
        )
        assert _refused(r)["field"] in ids, (ids, r.json())
    r = admin_api.post(
        f"/admin/studies/{admin_api.study}/review", data={"participant_id": [str(INT4), "²"], "decision": "approve"}
    )
    assert r.status_code == 422 and "select at least one worker" in r.text
    r = admin_api.post("/account/tokens", data={"name": "t", "expires_in_days": "²"})
    assert r.status_code == 422 and "a number of days" in r.text


def test_strings_past_their_column_are_refused(admin_api):
    """PostgreSQL refuses a string longer than its column (a 500 if it gets there); SQLite
    stores it. Refused first, on both; and a name that differs by spaces names the same agent
    (it was looked up unstripped and stored stripped: a second insert, a 500)."""
    first = admin_api.post("/api/v1/agents", json={"name": "spaced"})
    again = admin_api.post("/api/v1/agents", json={"name": "  spaced "})
    assert first.status_code == again.status_code == 201 and first.json()["id"] == again.json()["id"]
    _refused(admin_api.post("/api/v1/agents", json={"name": "n" * 256}), field="name")
    _refused(admin_api.post("/api/v1/agents", json={"name": "n", "version": "v" * 65}), field="version")
    from app.studies.models import Study
    from app.db import get_sessionmaker

    with get_sessionmaker(admin_api.app.state.database_url)() as s:
        slug = s.get(Study, admin_api.study).slug
    for params in (
        {"PROLIFIC_PID": "w" * 256},
        {"PROLIFIC_PID": "w", "SESSION_ID": "s" * 256},
        {"workerId": "w", "hitId": "h" * 256},
    ):
        _refused(admin_api.post(f"/api/v1/crowd/{slug}/enter", json={"params": params}), status=400)


def test_item_pages_out_of_range_are_refused(admin_api):
    """A negative LIMIT is "everything" to SQLite and an error to PostgreSQL: refused here."""
    for query, field in (
        ("offset=-1", "offset"),
        ("limit=-1", "limit"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        (f"offset={HUGE}", "offset"),
        (f"offset={INT4}", "offset"),
        ("offset=x", "offset"),
    ):
        _refused(admin_api.get(f"/api/v1/studies/{admin_api.study}/items?{query}"), field=field)


def test_item_pages_in_range(admin_api):
    page = admin_api.get(f"/api/v1/studies/{admin_api.study}/items?offset=2&limit=3")
    assert page.status_code == 200 and len(page.json()) == 3
    rest = admin_api.get(f"/api/v1/studies/{admin_api.study}/items?offset=2&limit=1000").json()
    assert [i["id"] for i in rest[:3]] == [i["id"] for i in page.json()]


def test_deeply_nested_json_bodies_are_refused_unparsed(admin_api):
    for path in (
        "/api/v1/agents",
        "/api/v1/crowd/nowhere/enter",
        "/api/v1/studies/1/state",
        "/api/v1/studies/1/review",
    ):
        for deep in (DEEP, '{"a":' * 65 + "1" + "}" * 65):
            r = admin_api.post(path, content=deep, headers={"Content-Type": "application/json"})
            assert "nested" in _refused(r, field="body")["detail"]
    # Nested within the bound: parsed, and refused (or taken) for what it says.
    ok = admin_api.post("/api/v1/agents", json={"name": "x", "description": [[[[1]]]]})
    assert ok.status_code == 422 and ok.json()["field"] == "description"


def test_a_json_body_with_an_integer_python_cannot_read_is_refused_naming_the_body(admin_api):
    # Round 9 of issue 26: 4,301 digits and more are a bare ValueError in json.loads, which
    # FastAPI answered 400 "There was an error parsing the body", with no field.
    for body in ('{"name": "x", "description": ' + "7" * 5000 + "}", "[" + "1" * 4301 + "]"):
        r = admin_api.post("/api/v1/agents", content=body, headers={"Content-Type": "application/json"})
        assert "4,300 digits" in _refused(r, field="body")["detail"]
    # 4,300 digits parse: refused for what they say, as any value out of range.
    ok = admin_api.post(
        "/api/v1/agents",
        content='{"name": "x", "description": ' + "7" * 4300 + "}",
        headers={"Content-Type": "application/json"},
    )
    assert ok.status_code == 422 and ok.json()["field"] == "description"


def test_an_oversized_json_body_is_refused_before_it_is_parsed(admin_api):
    from app.middleware import MAX_JSON_BODY

    big = b'{"name": "' + b"x" * MAX_JSON_BODY + b'"}'
    _refused(admin_api.post("/api/v1/agents", content=big, headers={"Content-Type": "application/json"}), status=413)


def test_deep_json_in_the_settings_field_of_a_new_study(admin_api):
    csv_bytes = (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes()
    for settings_text in (DEEP, '{"title": ' + "[" * 100 + "]" * 100 + "}"):
        r = admin_api.post(
            "/api/v1/studies", data={"settings": settings_text}, files={"file": ("q.csv", csv_bytes, "text/csv")}
        )
        assert "nested" in _refused(r, field="settings")["detail"]


def _deep_line(key: str = "question_id") -> bytes:
    return ('{"%s": ' % key + "[" * 10_000 + "]" * 10_000 + "}\n").encode()


def test_deep_json_lines_in_uploads_are_refused_with_their_line(admin_api):
    r = admin_api.post(
        f"/api/v1/studies/{admin_api.study}/agents/{admin_api.agent}/outputs",
        files={"file": ("a.jsonl", _deep_line(), "application/jsonl")},
    )
    assert _refused(r)["line"] == 1
    r = admin_api.post(
        f"/api/v1/studies/{admin_api.study}/annotations/import",
        data={"source": "deep"},
        files={"file": ("p.jsonl", b"\n" + _deep_line(), "application/jsonl")},
    )
    assert _refused(r)["line"] == 2
    # A kind's own JSONL items (the example kind), and a navigation study's R2R JSON.
    r = admin_api.post(
        "/api/v1/studies",
        data={"kind": "wordcount", "format": "jsonl", "settings": '{"title": "w"}'},
        files={"file": ("w.jsonl", _deep_line("id"), "application/jsonl")},
    )
    assert _refused(r)["line"] == 1
    r = admin_api.post(
        "/api/v1/studies",
        data={"kind": "navigation", "format": "r2r", "settings": '{"title": "n"}'},
        files={"file": ("r2r.json", DEEP.encode(), "application/json")},
    )
    assert "nested" in _refused(r)["detail"]


def test_deep_json_in_an_agents_artifact_config_and_header(admin_api):
    import struct

    upload = f"/api/v1/agents/{admin_api.nav_agent}/artifacts"
    weights = struct.pack("<Q", len(DEEP)) + DEEP.encode() + b"\0" * 8
    files = {"file": ("l.safetensors", weights, "application/octet-stream")}
    r = admin_api.post(upload, data={"role": "listener", "format": "safetensors", "config": DEEP}, files=files)
    assert "nested" in _refused(r, field="config")["detail"]
    r = admin_api.post(upload, data={"role": "listener", "format": "safetensors", "config": "{}"}, files=files)
    _refused(r, field="file")


def test_every_number_in_a_path_or_query_is_bounded():
    """Every route's integer path and query parameters (the kinds' routes too) carry bounds, so
    the check above holds for routes not yet written: use app.params.Id for ids."""
    import annotated_types

    from app.main import create_app
    from app.routes import served_routes

    app = create_app("sqlite://")

    def params(dependant):
        yield from dependant.path_params
        yield from dependant.query_params
        for sub in dependant.dependencies:
            yield from params(sub)

    unbounded = []
    for route in served_routes(app.routes):
        for p in params(getattr(route, "dependant", None) or _NoDependant):
            if p.field_info.annotation is int:
                kinds = {type(m) for m in p.field_info.metadata}
                if not (
                    {annotated_types.Ge, annotated_types.Gt} & kinds
                    and {annotated_types.Le, annotated_types.Lt} & kinds
                ):
                    unbounded.append(f"{route.path} {p.name}")
    assert not unbounded, f"integers with no bounds: {unbounded}"


class _NoDependant:
    path_params = query_params = dependencies = ()

"""Issue 26, round eleven of the re-attack (from a fresh clone).

- Blank lines were counted by no limit: every JSON-lines reader split the whole text into a
  list of lines before reading any, and the values limit counts none for a blank line. 8 MB of
  "  \\n" held 203 MB of the web process (a 50 MB one 1,250 MB, refused only at its last line);
  a CSV of 50 MB of blank lines took 21.6 s of CPU to read past, each a record of no cells.
- The study page's auto-pause form decoded its `pair` fields with `json.loads`: 100,000
  nested brackets answered 500 (RecursionError).
- Three page forms checked a number with `str.isdigit()`, which "²" passes and `int()` refuses,
  or passed 5,000 digits to `int()`, which refuses more than 4,300: A3DS's generation form,
  Hexagons' abstraction level, the admin's review form; each answered 500.
- A NUL (`%00`) in the crowd's paths and query or the login form answered 500 on PostgreSQL,
  whose text holds none: anyone's to send.
- SECRET_KEY: an IP address passed every rule (the documentation's IPv6 example, 39 characters).
- Off the CPU (a GPU's sandbox, RLIMIT_DATA) a model held 2 GB past its 512 MB limit in a
  shared anonymous mapping, or in one that grows down: RLIMIT_DATA counts neither (tested in
  test_sandbox_off_the_cpu.py, on a GPU too).
"""

from __future__ import annotations


import pytest

from app.auth.security import create_token
from app.kinds import all_kinds
from app.studies.models import Study
from tests.conftest import ROOT, csrf_of, login, make_user
from tests.integration.test_hex_consolidation import _items, admin_client, disagreement_study  # noqa: F401 (a fixture)
from tests.integration.test_upload_values import post_holding, post_items, set_env, study_rows

pytestmark = pytest.mark.backend_agnostic("the refusals come before any query")

MB = 1 << 20
FORMATS = [(name, fmt) for name, kind in sorted(all_kinds().items()) for fmt in kind.item_formats]


@pytest.mark.parametrize("kind, fmt", FORMATS)
def test_a_file_of_blank_lines_is_refused_holding_little(kind, fmt, app, client, session):
    """3 million lines of two spaces (9 MB), then a broken line: each blank line was a string
    of a list of every line (203 MB) before the first was read."""
    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    session.commit()
    before = study_rows(session)
    r, peak = post_holding(client, token, kind, fmt, b"  \n" * 3_000_000 + b"{")
    assert r.status_code == 422, r.text
    assert study_rows(session) == before
    # The request holds the 9 MB upload some seven times over (67 MB for a JSON document
    # refused at once); a list of its lines held 203 MB.
    assert peak < 100 * MB, f"refusing it held {peak // MB} MB"


def _csvs() -> list[tuple[str, str, bytes]]:
    """(kind, format, header) of the CSV readers a study upload reaches."""
    tom = (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes().split(b"\n", 1)[0] + b"\n"
    return [("tom", "csv", tom), ("sts", "missions", b"level,seed,id,instruction\n")]


@pytest.mark.parametrize("kind, fmt, header", _csvs(), ids=lambda v: v if isinstance(v, str) else "")
def test_blank_lines_of_a_csv_count_against_the_values_limit(kind, fmt, header, app, client, session, monkeypatch):
    """Each blank line is a record the reader reads in turn (52 million in 50 MB): counted
    as one, so the file is refused at the limit, not read to its end."""
    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    session.commit()
    before = study_rows(session)
    set_env(monkeypatch, MAX_UPLOAD_VALUES=1_000)
    r = post_items(client, token, kind, fmt, header + b"\n" * 5_000 + b"x\n")
    assert r.status_code == 422, r.text
    assert "more than 1,000 lines" in r.json()["detail"] and "MAX_UPLOAD_VALUES" in r.json()["detail"], r.json()
    assert study_rows(session) == before


def test_the_sts_metrics_csv_counts_its_blank_lines(monkeypatch):
    from app.errors import InputError
    from app.kinds.sts.agent_metrics import parse_metrics

    set_env(monkeypatch, MAX_UPLOAD_VALUES=1_000)
    with pytest.raises(InputError, match="more than 1,000 lines"):
        parse_metrics(b"agent,success\n" + b"\n" * 5_000 + b"expert,0.5\n")


def _study(client, session):
    researcher = make_user(session, "researcher")
    token = create_token(session, researcher)
    session.commit()
    demo = all_kinds()["a3ds"].demo()
    r = post_items(client, token, "a3ds", demo["format"], demo["items"])
    assert r.status_code == 201, r.text
    return researcher, r.json()["id"]


@pytest.mark.parametrize(
    "pair",
    ["[" * 100_000 + "]" * 100_000, '["a", "\\ud800"]', '["\\u0000", "b"]', '["a", ' + "1" * 5_000 + "]"],
    ids=["100,000 deep", "lone surrogate", "NUL", "5,000 digits"],
)
def test_the_auto_pause_form_refuses_malformed_pairs(pair, app, client, session):
    researcher, study_id = _study(client, session)
    csrf = login(client, researcher)
    r = client.post(f"/studies/{study_id}/auto-pause", data={"pair": pair, "csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 422, r.text[:300]


@pytest.mark.parametrize(
    "captioner, batch",
    [
        ("artifact:²", ""),
        ("artifact:" + "1" * 5_000, ""),
        ("artifact:" + "9" * 30, ""),
        ("speaker:x", "²"),
        ("speaker:x", "9" * 5_000),
        ("speaker:x", "9" * 30),
    ],
    ids=["superscript id", "5,000-digit id", "30-digit id", "superscript batch", "5,000-digit batch", "30-digit batch"],
)
def test_the_a3ds_generation_form_refuses_numbers_int_cannot_read(captioner, batch, app, client, session):
    """The form checked its numbers with str.isdigit(), which "²" passes and int() refuses, and
    int() refuses 5,000 digits: both answered 500."""
    researcher, study_id = _study(client, session)
    csrf = login(client, researcher)
    data = {"captioner": captioner, "batch_size": batch, "csrf_token": csrf}
    r = client.post(f"/a3ds/studies/{study_id}/generations", data=data, follow_redirects=False)
    assert r.status_code == 303, r.text[:300]
    assert "Not started" in client.get(f"/studies/{study_id}").text


def test_the_review_form_refuses_a_worker_id_of_5000_digits(app, client, session):
    """An admin's review form read each id with int() before its range: 5,000 digits answered 500."""
    researcher, study_id = _study(client, session)
    admin = make_user(session, "admin")
    session.commit()
    csrf = login(client, admin)
    data = {"participant_id": "1" * 5_000, "decision": "approve", "csrf_token": csrf}
    r = client.post(f"/admin/studies/{study_id}/review", data=data, follow_redirects=False)
    assert r.status_code == 422, r.text[:300]


@pytest.mark.parametrize("level", ["²", "1" * 5_000])
def test_the_hexagons_abstraction_form_refuses_a_level_int_cannot_read(level, session, admin_client):  # noqa: F811
    """The step page's level was checked with str.isdigit(), which "²" passes and int()
    refuses, as it refuses 5,000 digits: both answered 500."""
    study = disagreement_study(session, make_user(session, "researcher"), label_abstraction=True)
    item = _items(session, study)["1"]
    r = admin_client.post(
        f"/hexagons/studies/{study.id}/consolidation/{item.id}/2/abstraction",
        data={"csrf_token": admin_client.headers["X-CSRF-Token"], "level": level},
        follow_redirects=True,
    )
    assert r.status_code == 200 and "Not saved: field &#39;level&#39;: level must be 0, 1, 2 or 3" in r.text, r.text[
        :300
    ]


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_a_nul_in_a_crowd_link_or_the_login_form_is_refused_as_input(app, client, session):
    """PostgreSQL's text holds no U+0000 and psycopg refuses to send one: a NUL in the crowd's
    paths and query (anyone's to send) or in the login form answered 500 on PostgreSQL."""
    researcher, study_id = _study(client, session)
    slug = session.get(Study, study_id).slug
    nul = "a%00b"
    for url in (
        f"/s/{nul}",
        f"/s/{slug}?PROLIFIC_PID={nul}&STUDY_ID=x&SESSION_ID=y",
        f"/task/{nul}",
        f"/api/v1/crowd/{nul}/next",
        f"/api/v1/sts/play/{nul}/1",
    ):
        r = client.get(url, follow_redirects=False)
        assert 300 <= r.status_code < 500, (url, r.status_code, r.text[:200])
    client.cookies.clear()
    csrf = csrf_of(client)
    r = client.post("/login", data={"email": "a\x00b@example.org", "password": "x", "csrf_token": csrf})
    assert 400 <= r.status_code < 500, r.text[:200]


@pytest.mark.parametrize(
    "key",
    [
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",  # the documentation's example address
        "fe80:0000:0000:0000:0202:b3ff:fe1e:8329/64",
        "[2001:0db8:0000:0000:0000:ff00:0042:8329]",
    ],
)
def test_a_network_address_is_not_a_secret_key(key):
    from app.config import weak_secret_key

    assert "network address" in (weak_secret_key(key) or ""), weak_secret_key(key)

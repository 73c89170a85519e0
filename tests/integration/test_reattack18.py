"""Issue 26, round 18: the list tried again from a fresh clone, round 17's new code first.
What broke, each tested here:

- Item 4 (a form's text): a multipart form decodes its text fields in the charset its
  Content-Type names (Starlette), and UTF-7's "+2AA-" or unicode_escape's "\\ud800" is a lone
  surrogate, which no driver can send: an agent's name, a token's, a login's email answered 500
  on both backends (UnicodeEncodeError). A form in a charset other than UTF-8, ASCII or
  Latin-1 (which no browser sends; any of the charsets it names, as Starlette reads the last) is
  refused (415) before anything reads it. So is a JSON body
  in UTF-16 or UTF-32, which Python's parser reads: the body's check for an escaped U+0000 or
  lone surrogate reads UTF-8 bytes, so "\\ud800" in UTF-16 passed it, and a crowd link's worker
  id holding it answered 500 on both backends (its pseudonym's HMAC, and the drivers).
- Item 4 (importers): `app.jsonsafe.loads`, which every JSON importer parses with, read
  UTF-16 and UTF-32 bytes as Python's parser does, while its checks for an escaped U+0000 or
  lone surrogate and for an integer past 4,300 digits read UTF-8 bytes: in UTF-16 "\\ud800" and
  "\\u0000" were parsed into the text, and 5,000 digits raised the bare ValueError round 9
  closed. JSON bytes in another encoding are refused as bad JSON text (line 1).
- Item 5: a secret in double or single quotes ending in a backslash, as a shell line, an env
  file or a config echoed in an error writes it (`password="ab\\"`, `api_key: "ab\\"`), showed
  whole: round 17 read a quoted value's escapes, so its last quote was escaped and the value
  never ended, where round 16 blanked it. Such a value ends at its next quote again.
- Item 7 (false refusals): random bytes as od writes them (`od -An -tx1 -N16 /dev/urandom`:
  a space before the first byte) or as a hexdump format writes them ("%02x:", a separator
  after the last) were refused as "mostly common English words" (8% and 7% of 300 draws of 16
  bytes): round 17's reading of hex a byte at a time wanted the bytes and separators alone.
- Item 8: the crowd API's schema took MTurk's preview link (assignmentId
  "ASSIGNMENT_ID_NOT_AVAILABLE", whatever platform's worker id is beside it) as a valid entry,
  where the code refuses every preview (400).
"""

from __future__ import annotations

import random

import pytest

from tests.conftest import make_user
from tests.integration.test_reattack17 import schema_agrees_on_entry

# Item 4 ----------------------------------------------------------------------------------------


def _multipart(fields: dict[str, bytes], charset: str) -> tuple[bytes, dict[str, str]]:
    b = "r18boundary"
    parts = [
        f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n'.encode() + v + b"\r\n" for k, v in fields.items()
    ]
    return b"".join(parts) + f"--{b}--\r\n".encode(), {
        "Content-Type": f"multipart/form-data; boundary={b}; charset={charset}"
    }


@pytest.mark.parametrize(
    "charset, value", [("utf-7", b"+2AA-"), ("unicode_escape", b"\\ud800"), ("utf-8; charset=utf-7", b"+2AA-")]
)
def test_a_form_in_a_charset_that_makes_a_lone_surrogate_is_refused(client, session, charset, value):
    from sqlalchemy import func, select

    from app.agents.models import Agent
    from app.auth.models import ApiToken
    from tests.conftest import login
    from tests.integration.test_security import hidden

    csrf = login(client, make_user(session, "researcher")).encode()
    session.commit()
    for path, fields in (("/agents", {"name": value, "kind": b"navigation"}), ("/account/tokens", {"name": value})):
        body, headers = _multipart({**fields, "csrf_token": csrf}, charset)
        r = client.post(path, content=body, headers=headers, follow_redirects=False)
        assert r.status_code == 415 and "charset" in r.text, (path, r.status_code, r.text[:300])
    client.cookies.clear()
    page = client.get("/login")
    body, headers = _multipart(
        {"email": value, "password": b"x", "csrf_token": hidden(page.text, "csrf_token").encode()}, charset
    )
    r = client.post("/login", content=body, headers=headers, follow_redirects=False)
    assert r.status_code == 415, (r.status_code, r.text[:300])
    session.expire_all()
    assert session.scalar(select(func.count()).select_from(Agent)) == 0
    assert session.scalar(select(func.count()).select_from(ApiToken)) == 0


@pytest.mark.parametrize("charset", ["utf-8", "UTF8", "us-ascii", "iso-8859-1"])
def test_a_form_in_utf8_ascii_or_latin1_is_taken(client, session, charset):
    from sqlalchemy import func, select

    from app.auth.models import ApiToken
    from tests.conftest import login

    csrf = login(client, make_user(session, "researcher")).encode()
    session.commit()
    body, headers = _multipart({"name": b"t1", "csrf_token": csrf}, charset)
    r = client.post("/account/tokens", content=body, headers=headers, follow_redirects=False)
    assert r.status_code < 400, (r.status_code, r.text[:300])
    session.expire_all()
    assert session.scalar(select(func.count()).select_from(ApiToken)) == 1


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_a_json_body_not_in_utf8_is_refused(client, session, encoding):
    from tests.conftest import create_tom_study

    study = create_tom_study(session, make_user(session, "researcher"))
    session.commit()
    body = '{"params": {"PROLIFIC_PID": "w\\ud800"}}'.encode(encoding)
    r = client.post(f"/api/v1/crowd/{study.slug}/enter", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 415 and r.json()["field"] == "body", (r.status_code, r.text[:300])
    body = '\ufeff{"params": {"PROLIFIC_PID": "w1"}}'.encode()  # UTF-8 with a BOM is still UTF-8
    r = client.post(f"/api/v1/crowd/{study.slug}/enter", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 200, (r.status_code, r.text[:300])


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
@pytest.mark.parametrize(
    "text", ['["a\\ud800"]', '["a\\u0000"]', "[" + "1" * 5000 + "]"], ids=["surrogate", "nul", "digits"]
)
def test_json_bytes_not_in_utf8_are_refused_as_bad_json(encoding, text):
    import json

    from app import jsonsafe

    with pytest.raises(json.JSONDecodeError) as refused:
        jsonsafe.loads(text.encode(encoding))
    assert refused.value.lineno == 1, refused.value
    assert jsonsafe.loads(("\ufeff" + '["a"]').encode()) == ["a"]  # UTF-8 with a BOM is UTF-8


# Item 5 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        'export DB_PASSWORD="Xk29fLq0Zp3wR\\"',
        "password='Xk29fLq0Zp3wR\\' refused",
        'x-api-key: "Xk29fLq0Zp3wR\\"',
        '[("password", "Xk29fLq0Zp3wR\\")]',
    ],
)
def test_a_failure_reason_blanks_a_quoted_secret_ending_in_a_backslash(text):
    from app.jobs import redact

    shown = redact(text)
    assert "Xk29" not in shown and "<credentials>" in shown, shown


# Item 7 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout",
    [
        lambda b: " " + " ".join(f"{x:02x}" for x in b),  # od -An -tx1
        lambda b: "".join(f"{x:02x}:" for x in b),  # hexdump -e '16/1 "%02x:"'
        lambda b: "\n".join(" " + " ".join(f"{x:02x}" for x in b[i : i + 16]) for i in range(0, len(b), 16)),
    ],
    ids=["od", "hexdump", "od-lines"],
)
def test_random_hex_as_od_and_hexdump_write_it_passes(layout):
    from app.config import weak_secret_key

    rng = random.Random(18)  # seeded: a rare false refusal is a figure, not a failed run
    keys = [layout(rng.randbytes(n)) for n in (16, 20) for _ in range(300)]
    refused = [(k, why) for k in keys if (why := weak_secret_key(k))]
    assert not refused, (len(refused), refused[:2])


def test_weak_hex_as_od_writes_it_is_still_refused():
    from app.config import weak_secret_key

    for key in (
        " " + " ".join(f"{b:02x}" for b in range(32)),  # a counter
        " " + " ".join(f"{b:02x}" for b in b"this is a secret key for testing"),  # a text
        "".join(f"{b:02x}:" for b in b"this is a secret key for testing"),
        " " + " ".join(["de", "ad", "be", "ef"] * 8),
    ):
        assert weak_secret_key(key) is not None, key


# Item 8 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"workerId": "w1", "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "h1"},
        {"PROLIFIC_PID": "p1", "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"},
        {"participant": "d1", "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE"},
        {"workerId": "w1", "assignmentId": "a1", "hitId": "h1"},
    ],
)
def test_the_crowd_schema_refuses_a_preview_as_the_code_does(app, client, session, params):
    """A platform's preview is refused by the code whichever platform's worker id is beside it
    (crowd.is_preview); the schema took it for an entry."""
    schema_agrees_on_entry(app, client, session, params)

"""Issue 26, round 15: the list tried again from a fresh clone, round 14's new code first. What
broke, each tested here:

- Item 5: the redaction of a failure's text backtracked without bound on hostile text. A secret's
  name was read as `[\\w-]*(?:password|...)[\\w-]*` from every word boundary, so 20 KB of
  "a-a-a-..." (an exception quoting an uploaded value whole, as float() and KeyError do) took
  72 s to redact and 1 MB would take days, with the worker's job stuck in it; a backslash run
  (2.7 s at 20 KB), "x://" repeated (0.5 s) and "eyJ-" repeated were quadratic too.
- Item 2: a model could still call sync() and syncfs() (every dirty page of every file system on
  the machine, the database's among them, written back when the model likes) and make inotify
  instances (a watch was refused already; 128 instances are its user's whole allowance, and
  under a worker that is not root a sandbox is the worker's user).
- Item 4: an imported annotator's stored id ("study:source:annotator") passed its column with a
  200-character annotator and a 64-character source, a 500 on PostgreSQL.
- Item 7: Hardhat's and Anvil's development account keys (published, as FastAPI's example key
  is), the NATO spelling alphabet and programmers' placeholder names passed as SECRET_KEYs.
- Item 8: the crowd API's idempotency key was any string in the OpenAPI document.
- Item 9 (and names shown on pages): `unshowable` knew the bidi, zero-width and control
  characters but not the rest of Unicode's default-ignorable ones, which no page shows either:
  tag characters (U+E0000-E007F, "ASCII smuggling": "W1" and "W1" + U+E0041 look one), the
  Hangul fillers (an id of U+3164 alone looks empty), variation selectors, the combining
  grapheme joiner, Khmer's inherent vowels, Mongolian's variation selectors and the musical
  and shorthand format controls.

Held, and kept as a check: a worker whose Redis a failover demotes to a read-only replica (every
write refused with READONLY) lives on and runs the waiting job once Redis is a primary again
(test_reattack13.py::test_a_worker_outlives_a_redis_that_refuses_writes, beside a full Redis).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time

import pytest

from app import jobs
from tests.conftest import ROOT
from tests.integration.test_reattack26_round3 import needs_sandbox
from tests.integration.test_reattack26_round10 import Round10Probe

# Item 5 ----------------------------------------------------------------------------------------

HOSTILE_UNITS = {
    "words joined by hyphens": "a-",
    "a secret's name joined by hyphens": "password-",
    "backslashes": "\\",
    "schemes in one word": "x://",
    "a JWT's start joined by hyphens": "eyJ-",
    "escaped quotes": "\\'password\\': \\'",
    "hyphens before a name": "--token ",
}


def _redact_in(unit: str, size: int, seconds: float) -> bool:
    """Whether failure_reason() of a ValueError holding `unit` repeated to `size` characters
    returns within `seconds`, timed in a fresh interpreter (a regular expression in C cannot be
    interrupted, and a child forked from pytest's process can stall on a lock one of its threads
    held at the fork, as it did under CI's load)."""
    script = (
        "import sys, time\n"
        "from app import jobs\n"
        "unit, size = sys.argv[1], int(sys.argv[2])\n"
        "text = (unit * (size // len(unit) + 1))[:size]\n"
        "started = time.perf_counter()\n"
        "jobs.failure_reason(ValueError(text))\n"
        "print(time.perf_counter() - started)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, unit, str(size)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=seconds + 60,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return False
    return float(done.stdout.split()[-1]) < seconds


@pytest.mark.parametrize("name", HOSTILE_UNITS)
@pytest.mark.parametrize("size", [19_990, 1_000_000])
def test_a_hostile_failure_text_is_redacted_in_time(name, size):
    unit = HOSTILE_UNITS[name]
    assert _redact_in(unit, size, 3.0), f"redacting {size:,} characters of {unit!r} took over 3 s"


def test_a_long_failure_text_is_still_redacted():
    """Read to REDACT_READS: a secret before it is blanked, the cut word dropped (half a token
    matches no rule), a reason still shown."""
    token = "ghp_" + "A1b2C3d4" * 5
    head = "could not read 'password=hunter2' nor " + token + " "
    reason = jobs.failure_reason(ValueError(head + "a-" * 600_000))
    assert "hunter2" not in reason and "A1b2C3d4" not in reason, reason[:300]
    assert reason.startswith("could not read 'password=<credentials>' nor ghp_<credentials>"), reason[:300]
    long_token = "x " * (jobs.REDACT_READS // 2 - 10) + token  # a token cut by the limit
    assert "A1b2" not in jobs.redact(long_token)
    started = time.perf_counter()
    jobs.redact("postgresql://u:p@ss@host/db " + "x://a:b " * 2000 + "s3://bucket/key")
    assert time.perf_counter() - started < 1.0
    assert jobs.redact("postgresql://user:p@ss/w@db.example:5432/x") == "postgresql://<credentials>@db.example:5432/x"
    assert (
        jobs.redact("see https://alice@host/x and http://h/p@q") == "see https://<credentials>@host/x and http://h/p@q"
    )


# Item 9 ----------------------------------------------------------------------------------------

INVISIBLE = {
    "a tag letter": "\U000e0041",
    "a language tag": "\U000e0001",
    "a Hangul filler": "\u3164",
    "a Hangul choseong filler": "\u115f",
    "a halfwidth Hangul filler": "\uffa0",
    "a variation selector": "\ufe0f",
    "a supplementary variation selector": "\U000e0100",
    "a combining grapheme joiner": "\u034f",
    "a Khmer inherent vowel": "\u17b4",
    "a Mongolian variation selector": "\u180b",
    "a musical format control": "\U0001d173",
    "a shorthand format control": "\U0001bca0",
}


@pytest.mark.parametrize("name", INVISIBLE)
def test_a_worker_id_with_default_ignorable_characters_is_refused(app, client, session, name):
    """A worker id and the same id with a character no page shows look one on the researcher's
    review page and in completions.csv (an id of a Hangul filler alone looks empty)."""
    from app.jsonsafe import unshowable
    from tests.conftest import create_tom_study, make_user

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    session.commit()
    spoof = "5f3a9c0b1d2e4f60718293a4" + INVISIBLE[name]
    r = client.get(
        f"/s/{study.slug}", params={"PROLIFIC_PID": spoof, "STUDY_ID": "s", "SESSION_ID": "x"}, follow_redirects=False
    )
    assert r.status_code == 400 and "cannot be shown" in r.text, (r.status_code, r.text[:300])
    r = client.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": INVISIBLE[name]}})
    assert r.status_code == 400 and "cannot be shown" in r.json()["detail"], (r.status_code, r.text[:300])
    assert unshowable("turn left at the ❤ sofa") is None  # a symbol without its selector stays


def test_the_schemas_pattern_refuses_what_the_code_refuses():
    import re

    from app.jsonsafe import NAME_PATTERN, unshowable_name  # the crowd API's schema's and the code's

    for char in INVISIBLE.values():
        assert unshowable_name("a" + char) and not re.fullmatch(NAME_PATTERN, "a" + char)
    for text in ("A1B2C3", "Gérard", "北京", "Москва", "عربي", "😀"):
        assert unshowable_name(text) is None and re.fullmatch(NAME_PATTERN, text)


# Item 4 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
def test_an_import_of_long_annotator_ids_is_refused_not_a_500(db_url, client, session):
    """An imported annotator is stored as a user whose id is "study:source:annotator"; the
    importer took a source of 64 characters and an annotator id of 200, 266 and more in a column
    of 255, which PostgreSQL refused with an internal error (a 500; SQLite stores it)."""
    from sqlalchemy import func, select

    from app.auth.models import User
    from app.auth.security import create_token
    from tests.conftest import create_tom_study, make_user

    owner = make_user(session, "researcher")
    token = create_token(session, owner)
    study = create_tom_study(session, owner)
    session.commit()
    users = session.scalar(select(func.count()).select_from(User))
    line = json.dumps({"question_id": "trip-1:4:1:A:CT+", "answer": "Yes", "annotator": "a" * 200})
    r = client.post(
        f"/api/v1/studies/{study.id}/annotations/import",
        headers={"Authorization": f"Bearer {token}"},
        data={"source": "s" * 64},
        files={"file": ("answers.jsonl", line.encode() + b"\n", "application/json")},
    )
    assert r.status_code in (201, 200, 422), (r.status_code, r.text[:300])
    if r.status_code == 422:
        assert r.json().get("field") in ("annotator", "source"), r.text[:300]
        session.expire_all()
        assert session.scalar(select(func.count()).select_from(User)) == users
    line = json.dumps({"question_id": "trip-1:4:1:A:CT+", "answer": "Yes", "annotator": "\u202e" + "a1"})
    r = client.post(
        f"/api/v1/studies/{study.id}/annotations/import",
        headers={"Authorization": f"Bearer {token}"},
        data={"source": "prior"},
        files={"file": ("answers.jsonl", line.encode() + b"\n", "application/json")},
    )
    assert r.status_code == 422 and r.json().get("field") == "annotator", (r.status_code, r.text[:300])


# Item 8 ----------------------------------------------------------------------------------------


def test_the_schema_says_which_idempotency_keys_the_code_takes(app, client, session):
    """The crowd API's submit took any string as its idempotency key in the OpenAPI document,
    while the code refused an empty one and one past 64 characters (its column): a client built
    from the document sent keys the server refused."""
    from tests.conftest import create_tom_study, make_user

    key = app.openapi()["components"]["schemas"]["SubmitIn"]["properties"]["idempotency_key"]
    assert key.get("minLength") == 1 and key.get("maxLength") == 64, key
    study = create_tom_study(session, make_user(session, "researcher"))
    session.commit()
    for bad in ("", "k" * 65):
        r = client.post(
            f"/api/v1/crowd/{study.slug}/submit", json={"assignment_id": 1, "idempotency_key": bad, "response": {}}
        )
        assert r.status_code in (403, 422), (r.status_code, r.text[:300])


# Item 2 ----------------------------------------------------------------------------------------

LOADER = "tests.integration.test_reattack15:load"
# x86-64's numbers (needs_sandbox runs these tests there only).
SYS_SYNC, SYS_SYNCFS, SYS_INOTIFY_INIT, SYS_INOTIFY_ADD_WATCH, SYS_INOTIFY_INIT1 = 162, 306, 253, 254, 294


class Round15Probe(Round10Probe):
    def machine_calls(self) -> list[list]:
        """[call, errno] for each call (0: it worked)."""
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        r, _ = os.pipe()
        found = []
        for name, args in (
            ("sync", (SYS_SYNC,)),
            ("syncfs", (SYS_SYNCFS, r)),
            ("inotify_init", (SYS_INOTIFY_INIT,)),
            ("inotify_init1", (SYS_INOTIFY_INIT1, 0)),
        ):
            ctypes.set_errno(0)
            got = libc.syscall(*args)
            found.append([name, 0 if got >= 0 else ctypes.get_errno()])
            if name == "inotify_init1":
                ctypes.set_errno(0)
                watched = libc.syscall(SYS_INOTIFY_ADD_WATCH, got, b"/etc", 0xFFF)
                found.append(["inotify_add_watch", 0 if watched >= 0 else ctypes.get_errno()])
        return found


def load(fmt: str, data: bytes, config: dict | None) -> Round15Probe:
    return Round15Probe()


@needs_sandbox
def test_a_model_cannot_flush_the_machines_disks_or_take_inotify_instances(monkeypatch):
    from workers.sandbox import SandboxedModel

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel(LOADER, "probe", b"", None, limits={"call_s": 60, "memory_mb": 1024})
    try:
        found = model.machine_calls()
    finally:
        model.close()
    assert found == [[name, errno.EPERM] for name, _ in found], found


# Item 7 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        # Hardhat's and Anvil's first development accounts' private keys, printed by every
        # Ethereum tutorial and `npx hardhat node`: random, and public.
        "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
        "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
        # The NATO spelling alphabet, in order, and programmers' placeholder names.
        "AlphaBravoCharlieDeltaEchoFoxtrotGolfHotelIndia",
        "alpha-bravo-charlie-delta-echo-foxtrot-golf-hotel",
        "foobarbazquxquuxcorgegraultgarplywaldofred",
        "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8=",  # base64 of the same
    ],
)
def test_published_keys_and_spelled_sequences_are_not_a_secret_key(key):
    from app.config import weak_secret_key

    assert weak_secret_key(key) is not None


def test_random_keys_of_the_shapes_still_pass():
    import random
    import base64

    from app.config import weak_secret_key

    rng = random.Random(15)  # seeded: a rare false refusal is a figure, not a failed run
    nato = "alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike".split()
    keys = [rng.randbytes(32).hex() for _ in range(300)]
    keys += ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(40)) for _ in range(300)]
    keys += [base64.urlsafe_b64encode(rng.randbytes(32)).decode().rstrip("=") for _ in range(300)]
    refused = [k for k in keys if weak_secret_key(k)]
    assert not refused, refused[:3]
    assert weak_secret_key("-".join(rng.sample(nato, 8))) is not None  # still words

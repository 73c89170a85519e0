"""Issue 26, round 16: the list tried again from a fresh clone, rounds 14 and 15's new code first.
What broke, each tested here:

- Item 7: a weak key encoded and then wrapped passed where the bare encoding was refused: "0x" +
  hex of a text ("0x" + hex is valid base64 too, and its random-looking bytes passed), Laravel's
  "base64:" + base64 of a text, "hex:", a key in quotes (an env file read as it stands),
  "SECRET_KEY=" + the key pasted whole, hex in dashed groups, and base32 in lower case. A key
  that names itself ("acme_corp_prod_secret_key_2026_q4": a name, a place and a date beside the
  setting's name) and lorem ipsum with a year passed too.
- Item 5: a failed job's reason showed an OpenPGP private key's body ("PRIVATE KEY BLOCK"; the
  PEM rule wanted "PRIVATE KEY-----"), a camelCase secret's name before a colon (`apiKey: x`,
  `clientSecret: x`: only names with "-" or "_" were read so) and a name and its value as a pair
  in Python's repr (`[('password', 'x')]`, a mapping's items(), a parsed query string).
- Item 9 (names shown on pages): a worker id with a space no page shows as it is passed the
  check of round 14 and 15: a no-break, ideographic or thin space ("W1" + U+3000 looks "W1"), a
  Braille blank (U+2800 alone looks empty, as U+3164 did), a space at either end or two together
  (HTML collapses them: "W1 " is "W1" on the review page). So did an imported annotator's id
  and the import's source, part of each imported annotator's id. The crowd API's schema let a
  platform's other ids (an assignment's, a HIT's, a session's) be any string, where the code
  refuses what no page shows in them as in a worker's.
- Item 4 (a model's upload): navigation's safetensors config took any other field and stored it
  (500 KB of a field of its own, sent back in every listing of the agent's models), where the
  other kinds refuse one; and `step_size: true`.
- Item 4 (a worker's answer): the answer form's idempotency key, which no JSON body check reads,
  was stored with a U+0000 on SQLite and refused by PostgreSQL naming no field.
- Item 8: schemathesis, every check, 200 examples a operation: cancelling a job that has ended
  answered 422 ("Schema-valid request rejected"); a valid request the job's state refuses is a
  409 (errors.Conflict), and so is cancelling an ended generation or agent run (each kind's
  route and /api/v1/runs).
"""

from __future__ import annotations

import base64
import json
import random
import re

import pytest

from app import jobs
from tests.conftest import create_tom_study, make_user

# Item 7 ----------------------------------------------------------------------------------------

WEAK = b"this is a secret key for testing"


@pytest.mark.parametrize(
    "key",
    [
        "0x" + WEAK.hex(),
        "0X" + WEAK.hex().upper(),
        "hex:" + WEAK.hex(),
        "base64:" + base64.b64encode(WEAK).decode(),
        "base64:" + base64.b64encode(b"password123password123").decode(),
        "'" + base64.b64encode(WEAK).decode() + "'",
        '"' + WEAK.hex() + '"',
        "SECRET_KEY=" + base64.b64encode(WEAK).decode(),
        "-".join(WEAK.hex()[i : i + 8] for i in range(0, 64, 8)),
        base64.b32encode(WEAK).decode().lower(),
        "base64:" + base64.b64encode(bytes(range(32))).decode(),  # a counter's bytes
    ],
    ids=lambda k: k[:24],
)
def test_an_encoded_weak_key_is_refused_inside_what_wraps_it(key):
    from app.config import weak_secret_key

    assert weak_secret_key(key) is not None


@pytest.mark.parametrize(
    "key",
    ["acme_corp_prod_secret_key_2026_q4", "ACME-CORP-PROD-SECRET-KEY-2026-Q4", "lorem-ipsum-dolor-sit-amet-2026-prod"],
)
def test_a_key_that_names_itself_or_is_placeholder_text_is_refused(key):
    from app.config import weak_secret_key

    assert weak_secret_key(key) is not None


def test_random_keys_inside_the_same_wrappings_still_pass():
    import uuid

    from app.config import weak_secret_key

    rng = random.Random(16)  # seeded: a rare false refusal is a figure, not a failed run
    makers = [
        lambda: "0x" + rng.randbytes(32).hex(),
        lambda: "base64:" + base64.b64encode(rng.randbytes(32)).decode(),
        lambda: "'" + base64.urlsafe_b64encode(rng.randbytes(32)).decode().rstrip("=") + "'",
        lambda: "-".join(rng.randbytes(4).hex() for _ in range(8)),
        lambda: str(uuid.UUID(bytes=rng.randbytes(16), version=4)),
        lambda: base64.b32encode(rng.randbytes(20)).decode().lower(),
        lambda: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(32)),
    ]
    refused = [k for make in makers for k in (make() for _ in range(200)) if weak_secret_key(k)]
    assert not refused, refused[:3]


# Item 5 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, secret",
    [
        (
            "gpg: -----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGWx1bcBCADKr9Zq\n=Ab3x\n"
            "-----END PGP PRIVATE KEY BLOCK----- was refused",
            "lQOYBGWx1bcBCADKr9Zq",
        ),
        ("config {apiKey: Xk29fLq0Zp3wR7tY, region: eu}", "Xk29fLq0Zp3wR7tY"),
        ("clientSecret: 'Xk29fLq0Zp3wR7tY' is not valid", "Xk29fLq0Zp3wR7tY"),
        ('{accessToken: "Xk29 fLq0Zp3wR7tY"}', "fLq0Zp3wR7tY"),
        ("unexpected items [('user', 'ann'), ('password', 'Xk29fLq0Zp3wR7tY')]", "Xk29fLq0Zp3wR7tY"),
        ("query [('token', b'Xk29fLq0Zp3wR7tY')] refused", "Xk29fLq0Zp3wR7tY"),
    ],
)
def test_a_failure_reason_blanks_pgp_keys_camel_case_names_and_pairs(text, secret):
    reason = jobs.failure_reason(ValueError(text))
    assert secret not in reason and "<credentials>" in reason, reason


@pytest.mark.parametrize(
    "text",
    [
        "InvalidAccessKeyId: The AWS Access Key Id you provided does not exist in our records",
        "ExpiredToken: The provided token has expired",
        "a pair ('user', 'ann') and a call f('token', name)",
        "no token: set PROCTOR_TOKEN",
    ],
)
def test_a_failure_reason_still_keeps_ordinary_text_and_error_codes(text):
    assert jobs.failure_reason(ValueError(text)) == text


# Item 9 ----------------------------------------------------------------------------------------

SPACES = {
    "a no-break space at the end": "5f3a9c0b1d2e4f60718293a4\u00a0",
    "an ideographic space at the end": "5f3a9c0b1d2e4f60718293a4\u3000",
    "a thin space inside": "5f3a9c0b1d2e\u20094f60718293a4",
    "a Braille blank alone": "\u2800",
    "an ideographic space alone": "\u3000",
    "a space at the end": "5f3a9c0b1d2e4f60718293a4 ",
    "a space at the start": " 5f3a9c0b1d2e4f60718293a4",
    "two spaces together": "5f3a9c0b1d2e  4f60718293a4",
}


@pytest.mark.parametrize("name", SPACES)
def test_a_worker_id_with_a_space_no_page_shows_is_refused(app, client, session, name):
    """A worker id and the same id with a space no page shows as it is look one on the review
    page and in completions.csv (the HTML collapses spaces; other spaces look like U+0020)."""
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    session.commit()
    spoof = SPACES[name]
    r = client.get(
        f"/s/{study.slug}", params={"PROLIFIC_PID": spoof, "STUDY_ID": "s", "SESSION_ID": "x"}, follow_redirects=False
    )
    assert r.status_code == 400 and "cannot be shown" in r.text, (r.status_code, r.text[:300])
    r = client.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": spoof}})
    assert r.status_code in (400, 422), (r.status_code, r.text[:300])


def test_the_schemas_name_pattern_refuses_what_the_code_refuses():
    from app.jsonsafe import NAME_PATTERN, unshowable_name
    from app.studies.crowd_api import WORKER_ID

    assert WORKER_ID["pattern"] == NAME_PATTERN
    for text in SPACES.values():
        assert unshowable_name(text) and not re.fullmatch(NAME_PATTERN, text), repr(text)
    for text in ("A1B2C3", "participant 7", "Gérard Dupont", "北京", "😀"):
        assert unshowable_name(text) is None and re.fullmatch(NAME_PATTERN, text), text


def test_the_schema_holds_a_platforms_other_ids_to_what_the_code_takes(app, client, session):
    """An assignment's, a HIT's and a session's id are shown and checked as a worker's is (round
    14), yet the crowd API's schema let them be any string: a client built from it sent ids the
    server refused (400)."""
    from app import crowd
    from app.jsonsafe import NAME_PATTERN

    schema = app.openapi()["components"]["schemas"]["EnterIn"]["properties"]["params"]["anyOf"]
    for platform, alternative in zip(crowd.PLATFORMS, schema):
        for name in platform.other_params:
            assert alternative["properties"][name]["pattern"] == NAME_PATTERN, (platform.name, name)
    study = create_tom_study(session, make_user(session, "researcher"))
    session.commit()
    for bad in ("s1 ", "s\u202e1"):
        r = client.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "w1", "SESSION_ID": bad}})
        assert r.status_code in (400, 422), (r.status_code, r.text[:300])
        assert not re.fullmatch(NAME_PATTERN, bad)


@pytest.mark.parametrize(
    "source, annotator, field",
    [("prior", "a  1", "annotator"), ("prior", "\u2800", "annotator"), ("\u202eroirp", "a1", "source")],
)
def test_an_import_of_names_no_page_shows_is_refused(client, session, source, annotator, field):
    """An imported annotator is shown as "study:source:annotator": its source is part of it."""
    from app.auth.security import create_token

    owner = make_user(session, "researcher")
    token = create_token(session, owner)
    study = create_tom_study(session, owner)
    session.commit()
    line = json.dumps({"question_id": "trip-1:4:1:A:CT+", "answer": "Yes", "annotator": annotator})
    r = client.post(
        f"/api/v1/studies/{study.id}/annotations/import",
        headers={"Authorization": f"Bearer {token}"},
        data={"source": source},
        files={"file": ("answers.jsonl", line.encode() + b"\n", "application/json")},
    )
    assert r.status_code == 422 and r.json().get("field") == field, (r.status_code, r.text[:300])


# Item 4 ----------------------------------------------------------------------------------------


def test_a_navigation_weights_config_takes_no_field_of_its_own(client, session):
    """Every other kind's safetensors config refuses a field it does not know (a typo would be
    ignored); navigation's stored it with the weights, 500 KB of it sent back in every listing of
    the agent's models."""
    import torch
    from safetensors.torch import save

    from app.auth.security import create_token
    from app.studies import services

    owner = make_user(session, "researcher")
    token = create_token(session, owner)
    agent = services.register_agent(session, owner, "navigation", "tiny")
    session.commit()
    config = {
        "architecture": "gru-speaker",
        "feature_version": "proctor.nav.features/1",
        "hidden": 8,
        "embed": 8,
        "words": ["<pad>", "<bos>", "<eos>", "<unk>", "go"],
    }
    for extra, field in (({"junk": "x" * 500_000}, "config.junk"), ({"step_size": True}, "config.step_size")):
        r = client.post(
            f"/api/v1/agents/{agent.id}/artifacts",
            headers={"Authorization": f"Bearer {token}"},
            data={"role": "speaker", "format": "safetensors", "config": json.dumps({**config, **extra})},
            files={"file": ("m.safetensors", save({"x": torch.zeros(2)}), "application/octet-stream")},
        )
        assert r.status_code == 422 and r.json().get("field") == field, (r.status_code, r.text[:300])


def test_the_answer_forms_idempotency_key_holds_no_nul_on_either_backend(client, session):
    """The crowd API's JSON body refuses U+0000 before anything reads it; the answer form's key
    was stored as sent on SQLite and refused by PostgreSQL naming no field."""
    from sqlalchemy import func, select

    from app.studies.models import Annotation
    from tests.integration.test_crowd_integrity import tiny_study
    from tests.integration.test_security import consent, enter, hidden

    study = tiny_study(session, make_user(session, "researcher"), 12, bundle_size=3, lease_seconds=600)
    session.commit()
    consent(client, study.slug, enter(client, study.slug, "w-form-1"))
    page = client.get(f"/task/{study.slug}")
    form = {"csrf_token": hidden(page.text, "csrf_token"), "assignment_id": hidden(page.text, "assignment_id")}
    r = client.post(f"/task/{study.slug}/answer", data={**form, "idempotency_key": "k\x00ey", "answer": "Yes"})
    assert r.status_code == 422 and "idempotency key" in r.text, (r.status_code, r.text[:300])
    session.expire_all()
    assert session.scalar(select(func.count()).select_from(Annotation)) == 0


# Item 8 ----------------------------------------------------------------------------------------


def test_cancelling_a_job_that_has_ended_is_a_conflict_not_a_bad_request(client, session):
    """A schema-valid request the job's state refuses: 409, as errors.Conflict says and as the
    schema allows (schemathesis's every check, 200 examples: "Schema-valid request rejected",
    a 422 for cancelling a job twice)."""
    from app.auth.security import create_token

    owner = make_user(session, "researcher")
    token = create_token(session, owner)
    study = create_tom_study(session, owner)
    job = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    session.commit()
    headers = {"Authorization": f"Bearer {token}"}
    assert client.post(f"/api/v1/jobs/{job.id}/cancel", headers=headers).status_code == 200
    again = client.post(f"/api/v1/jobs/{job.id}/cancel", headers=headers)
    assert again.status_code == 409 and again.json()["field"] == "state", (again.status_code, again.text[:300])

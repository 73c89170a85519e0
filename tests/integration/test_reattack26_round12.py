"""Issue 26, round twelve of the re-attack (from a fresh clone).

- Off the CPU (a GPU's sandbox, RLIMIT_DATA and no RLIMIT_AS) a model mapped 512 GB of
  anonymous memory read-only and read a byte every 2 MB: nothing RLIMIT_DATA counts (it counts
  writable private mappings), yet each read held a page table of 4 KB in the kernel: 1 GB of
  them (VmPTE 1,051,572 kB) past a 512 MB limit, more with more address space. Making memory
  read-only with mprotect (what RLIMIT_DATA counted is then uncounted) did the same (tested in
  test_sandbox_off_the_cpu.py, on a GPU too).
- SECRET_KEY: the example keys printed in FastAPI's security tutorial and Flask's documentation
  (random hex, copied into many public projects) passed every rule.
- A Redis that takes the connection and never answers (stopped with SIGSTOP, hung, or cut off
  after the handshake) held a request that enqueued a job for good (still waiting after 40 s):
  only connecting had a timeout.
"""

from __future__ import annotations

import socket
import time

import pytest
from sqlalchemy import func, select

from app import jobs
from app.config import get_settings
from tests.conftest import SeededSecrets, create_tom_study, login, make_user

pytestmark = pytest.mark.backend_agnostic("a key's rules and a silent Redis: neither depends on the backend")


@pytest.mark.parametrize(
    "key",
    [
        "09d25e094faa6ca2556c818166b7a9563b93f7099f6f0f4caa6cf63b88e8d3e7",  # FastAPI's tutorial
        "192b9bdd22ab9ed4d12e236c78afcb9a393ec15f71bbf5dc987d54727823bcbf",  # Flask's documentation
        "192b9bdd22ab9ed4d12e236c78afcb9a393ec15f71bbf5dc987d54727823bcb1",  # a copy, edited
        "SECRET_KEY=09D25E094FAA6CA2556C818166B7A9563B93F7099F6F0F4CAA6CF63B88E8D3E7",  # pasted whole
    ],
    ids=["fastapi", "flask", "flask edited", "dotenv line"],
)
def test_an_example_key_from_a_frameworks_documentation_is_not_a_secret_key(key):
    """Random-looking, so every rule passed them; printed in documentation and copied into
    thousands of projects, so anyone can sign with them."""
    from app.config import weak_secret_key

    assert "example key printed in" in (weak_secret_key(key) or ""), weak_secret_key(key)


def test_random_keys_do_not_look_like_published_ones():
    from app.config import _published

    secrets = SeededSecrets(12)
    assert [k for _ in range(20_000) if _published(k := secrets.token_hex(32))] == []


@pytest.fixture
def silent_broker(monkeypatch):
    """A "Redis" that takes connections (the kernel's backlog) and never answers a byte."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{server.getsockname()[1]}/0")
        get_settings.cache_clear()
        yield
    get_settings.cache_clear()


@pytest.mark.timeout(120)
def test_a_broker_that_never_answers_is_a_503_not_a_hung_request(app, client, session, silent_broker):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner, title="Silent broker")
    csrf = login(client, owner)
    started = time.monotonic()
    r = client.post(f"/api/v1/studies/{study.id}/exports", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 503 and r.headers["Retry-After"] == "30", r.text
    assert time.monotonic() - started < 30  # 4 s here; before, still waiting after 40
    assert session.scalar(select(func.count()).select_from(jobs.Job)) == 0


class _Executor:
    """A Hexagons executor that answered a valid vocabulary to validation, and now this."""

    def __init__(self, words):
        self.words = words

    def vocabulary(self):
        return self.words

    def execute(self, tokens, board):
        import torch

        from app.kinds.hexagons.board import COLOURS, TILES

        return torch.zeros(len(board), TILES, len(COLOURS))


@pytest.mark.parametrize(
    "words",
    [
        ["<pad>", "<unk>", *(f"w{i}" for i in range(60_000))],  # past the 50,000 validation allows
        ["<pad>", "<unk>", "x" * 100_000],  # a word of 100,000 characters
        ["<pad>", "<unk>", ["a list"]],  # not a string (a TypeError in encode)
    ],
    ids=["60,000 words", "a 100,000-character word", "not a string"],
)
def test_a_hexagons_run_checks_the_executors_vocabulary_again(words):
    """A3DS's and navigation's runs check a model's vocabulary() again, as a model may answer
    otherwise than at validation (round 10); Hexagons' took whatever it answered."""
    from app.kinds.hexagons.board import TILES
    from workers.hexagons.executor import execute_procedures

    procedures = [(["put red on 1"], [0] * TILES, None)]
    with pytest.raises(ValueError, match=r"vocabulary\(\)"):
        execute_procedures(_Executor(words), procedures, "own")


@pytest.mark.parametrize(
    "text, secret",
    [
        ("could not connect with {'user': 'proctor', 'password': 'hunter2'}", "hunter2"),
        ('the config {"secret_key": "abc123def456"} was refused', "abc123def456"),
        ("request failed with x-api-key: AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ("SECRET_KEY: s3cr3t-v4lue in the environment", "s3cr3t-v4lue"),
        ("private-token: glpat-abcdefghij refused", "glpat-abcdefghij"),
        ("the bucket refused api-key=abc123def", "abc123def"),
    ],
    ids=["repr", "json", "header", "yaml", "private-token", "api-key="],
)
def test_a_failure_reason_blanks_a_secret_written_with_a_colon(text, secret):
    """Round 8 blanked `name=value` for names that say secret; the same value written as
    Python's repr or JSON writes a mapping, or as a header, showed whole."""
    shown = jobs.failure_reason(ValueError(text))
    assert secret not in shown and "<credentials>" in shown, shown


def test_a_sentence_about_a_token_is_left_alone():
    assert jobs.redact("no token: set PROLIFIC_TOKEN") == "no token: set PROLIFIC_TOKEN"

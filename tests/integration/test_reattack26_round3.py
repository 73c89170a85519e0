"""Issue 26, round three of the re-attack (from a fresh clone): what was found, each with the
test that failed before its fix.

- A sandbox signalled another through a file's owner: `fcntl(F_SETOWN, pid)` and
  `F_SETSIG(SIGKILL)` on a pipe of its own, then a write, and the kernel's SIGIO killed the
  other model's process (same user), which then read "ran past its CPU time limit".
- Every sandbox was `nobody`, so one model's threads used up the others' RLIMIT_NPROC headroom
  (their next thread failed: a false "raised RuntimeError").
- POSIX message queues (which outlive the process), kernel AIO contexts (a machine-wide pool)
  and `open_tree` (a file opened by name) were allowed.
- An answer's JSON header could take the call's whole answer cap (65 MB for a 1 MB tensor), and
  decoding `[{},{},...]` made the worker hold about 1.6 GB.
- Every previewed upload stayed in the blob store for good (uploads/), as did a created
  study's.
- Generated items could hold U+0000 or a lone surrogate (a model's vocabulary), which
  PostgreSQL refuses with an internal error.
- Two STS operations disagreed with their schema (a takeover step without its recording was
  taken; an empty agent name was allowed by the schema and refused by the code).
- SECRET_KEY: counters and interleaved runs ("000102...", "a0b1c2...") were accepted.

This module is also the probe's loader (`tests.integration.test_reattack26_round3:load`),
imported in the sandboxed child before the lock, as native code in an archive would be.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import threading
import time

import pytest

from tests.conftest import ROOT, login, make_user, untraced, SeededSecrets
from workers.sandbox import sandbox_available

LIBC = ctypes.CDLL(None, use_errno=True)
NR = {"io_setup": 206, "mq_open": 240, "open_tree": 428}  # x86-64
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15
AT_FDCWD = -100
ANSWERS_FD = 3  # the child's answers: a dup of its stdout, the first descriptor free


def _errno(ret: int) -> int:
    return ctypes.get_errno() if ret == -1 else 0


class Probe:
    def to(self, device):
        return self

    def eval(self):
        return self

    def pid(self):
        return os.getpid()

    def uid(self):
        return os.getuid()

    def sigio(self, pid: int, sig: int):
        """Asks the kernel to send `sig` to `pid` when this pipe has data, then writes to it:
        (errno of F_SETOWN, of F_SETSIG, of F_SETOWN_EX)."""
        r, w = os.pipe()
        owner = _errno(LIBC.fcntl(r, F_SETOWN, ctypes.c_int(pid)))
        signal_ = _errno(LIBC.fcntl(r, F_SETSIG, ctypes.c_int(sig)))
        ex = (ctypes.c_int * 2)(2, pid)  # struct f_owner_ex: F_OWNER_PGRP, pid
        owner_ex = _errno(LIBC.fcntl(r, F_SETOWN_EX, ex))
        LIBC.fcntl(r, 4, ctypes.c_int(os.O_ASYNC))  # F_SETFL
        os.write(w, b"x")
        return [owner, signal_, owner_ex]

    def syscall_errno(self, name: str):
        if name == "mq_open":
            args = (ctypes.c_char_p(b"proctor-r3"), ctypes.c_int(os.O_CREAT | os.O_RDWR), ctypes.c_int(0o600), None)
        elif name == "io_setup":
            args = (ctypes.c_uint(1), ctypes.byref(ctypes.c_ulong(0)))
        else:
            args = (ctypes.c_int(AT_FDCWD), ctypes.c_char_p(b"/etc/passwd"), ctypes.c_uint(0))
        return _errno(LIBC.syscall(ctypes.c_long(NR[name]), *args))

    def threads(self, n: int):
        """Starts up to n threads that wait (held until the process ends): how many started."""
        hold = threading.Event()
        made = 0
        try:
            for _ in range(n):
                threading.Thread(target=hold.wait, daemon=True).start()
                made += 1
        except RuntimeError:  # can't start new thread: RLIMIT_NPROC
            pass
        return made

    def one_thread(self):
        box = []
        t = threading.Thread(target=lambda: box.append(1))
        t.start()
        t.join()
        return len(box)

    def bloated_answer(self, tensor, size: int):
        """Writes an answer straight to the pipe, as native code could: a JSON header of `size`
        bytes of empty objects (within the call's cap, about 25 times that once decoded)."""
        body = b"{}," * (size // 3)
        header = b'{"result": [' + body[:-1] + b"]}"
        os.write(ANSWERS_FD, struct.pack("<QI", len(header), 0))
        view = memoryview(header)
        while view:
            view = view[os.write(ANSWERS_FD, view[: 1 << 20]) :]
        time.sleep(60)  # the parent must not wait for this


def load(fmt: str, data: bytes, config: dict | None) -> Probe:
    return Probe()


LOADER = "tests.integration.test_reattack26_round3:load"
# What the probe's tensor methods answer at most (workers/sandbox.py: the cap on an answer).
ANSWERS = {"bloated_answer": lambda tensor, size: [tensor.shape]}


needs_sandbox = pytest.mark.skipif(
    sandbox_available() is not None or platform.machine() != "x86_64",
    reason=f"no model sandbox here, or not x86-64 (the probe's call numbers): {sandbox_available()}",
)


@pytest.fixture
def sandboxes(monkeypatch):
    from workers.sandbox import SandboxedModel

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    made = []

    def make(**limits):
        made.append(SandboxedModel(LOADER, "probe", b"", None, limits=limits or None))
        return made[-1]

    yield make
    for model in made:
        model.close()


@needs_sandbox
def test_a_sandbox_cannot_signal_another_through_a_files_owner(sandboxes):
    one, other = sandboxes(), sandboxes()
    victim = other.call("pid")
    assert one.call("sigio", victim, 9) == [errno.EPERM] * 3
    time.sleep(0.5)
    assert other.call("pid") == victim  # alive, the same process
    # Nor the worker (the sandbox's own user when the worker is not root).
    assert one.call("sigio", os.getpid(), 9) == [errno.EPERM] * 3


@needs_sandbox
def test_message_queues_aio_and_open_tree_are_refused(sandboxes):
    model = sandboxes()
    outcomes = {name: model.call("syscall_errno", name) for name in ("mq_open", "io_setup", "open_tree")}
    assert outcomes == dict.fromkeys(outcomes, errno.EPERM), outcomes


@needs_sandbox
@pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes get users of their own only when the worker is root")
def test_sandboxes_have_users_of_their_own_and_so_thread_allowances_of_their_own(sandboxes):
    first, greedy = sandboxes(), sandboxes()
    assert first.call("one_thread") == 1
    users = {first.call("uid"), greedy.call("uid")}
    assert len(users) == 2 and 0 not in users, users
    assert greedy.call("threads", 500) < 500  # its own allowance ends it...
    assert first.call("one_thread") == 1  # ...and the other model's is untouched


@needs_sandbox
def test_an_answers_header_is_held_to_the_floor_whatever_the_call_sent(sandboxes):
    import torch

    from workers.sandbox import ANSWER_FLOOR, SandboxError, answer_limit

    model = sandboxes(call_s=30)
    tensor = torch.zeros(1 << 20, dtype=torch.uint8)
    assert answer_limit([tensor.shape]) > 8 << 20  # the answer may weigh that...
    started = time.monotonic()
    with pytest.raises(SandboxError, match="over its size limit"):
        model.call("bloated_answer", tensor, 4 * ANSWER_FLOOR)  # ...but its header not
    assert time.monotonic() - started < 20  # refused on the announced size, not read


def _uploads_of(user_id: int) -> list[str]:
    from app.storage import get_store

    folder = get_store().path(f"uploads/{user_id}/x").parent
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_a_researcher_keeps_one_previewed_upload_and_a_created_study_none(app, session):
    from fastapi.testclient import TestClient

    from app.storage import LocalBlobStore, get_store

    if not isinstance(get_store(), LocalBlobStore):
        pytest.skip("counts the local store's files")
    researcher = make_user(session, "researcher")
    session.commit()
    data = (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes()
    with TestClient(app) as page:
        csrf = login(page, researcher)
        for n in range(3):
            r = page.post(
                "/studies/new",
                data={"title": f"preview {n}", "action": "preview", "csrf_token": csrf},
                files={"file": ("q.csv", data, "text/csv")},
            )
            assert r.status_code == 200, r.text[:300]
        assert len([name for name in _uploads_of(researcher.id) if name != "latest"]) == 1
        token = r.text.split('name="upload_token" value="', 1)[1].split('"', 1)[0]
        r = page.post(
            "/studies/new",
            data={"title": "made", "action": "create", "csrf_token": csrf, "upload_token": token},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text[:300]
    assert _uploads_of(researcher.id) == []


@pytest.mark.parametrize("text", ["go\x00left", "go \ud800left"], ids=["NUL", "lone surrogate"])
def test_generated_items_with_text_no_column_stores_are_refused_naming_the_field(text, session):
    from sqlalchemy import func, select

    from app.errors import InputError
    from app.kinds.base import ItemSpec
    from app.studies import services
    from app.studies.models import Item
    from tests.conftest import create_tom_study

    study = create_tom_study(session, make_user(session, "researcher"), live=False)
    before = session.scalar(select(func.count(Item.id)).where(Item.study_id == study.id))
    spec = ItemSpec(external_id="gen-1", payload={"instructions": ["ok", text]})
    with pytest.raises(InputError) as refused:
        services.add_items(session, study, [spec])
    assert refused.value.field == "payload.instructions[1]"
    session.rollback()
    assert session.scalar(select(func.count(Item.id)).where(Item.study_id == study.id)) == before


def test_a_takeover_step_needs_its_one_recording_named(client, session):
    owner = make_user(session, "researcher")
    csrf = login(client, owner)

    def api(method, url, body=None):
        return client.request(method, url, json=body, headers={"X-CSRF-Token": csrf})

    r = api("POST", "/api/v1/sts/recordings/expert", {"level": "BabyAI-GoToLocal-v0", "seeds": [1]})
    assert r.status_code == 201, r.text
    suite = api("POST", "/api/v1/sts/suites", {"name": "one recording"}).json()["id"]
    # The owner has one recording; the schema still requires it named with a takeover step.
    r = api("POST", f"/api/v1/sts/suites/{suite}/versions/1/scenarios", {"takeover": 0})
    assert r.status_code == 422 and r.json()["field"] == "recordings", r.text


def test_the_study_schema_names_the_built_in_agents_the_code_takes(app):
    from app.kinds.sts.models import BUILTIN_AGENTS

    schema = app.openapi()["components"]["schemas"]["StudyIn"]["properties"]["agents"]["items"]
    names = [alt["enum"] for alt in schema["anyOf"] if "enum" in alt]
    assert names == [list(BUILTIN_AGENTS)], schema
    assert not any(alt.get("type") == "string" and "enum" not in alt for alt in schema["anyOf"]), schema


@pytest.mark.parametrize(
    "key",
    [
        bytes(range(32)).hex(),  # "000102...1f"
        "".join(a + b for a, b in zip("abcdefghijklmnopqrstuvwx", "012345678901234567890123")),
        "".join(a + b + c for a, b, c in zip("abcdefghijklmn", "01234567890123", "qwertyuiopasdf")),
    ],
    ids=["hex counter", "two runs interleaved", "three runs interleaved"],
)
def test_an_interleaved_pattern_is_not_a_secret_key(key):
    from app.config import weak_secret_key

    assert weak_secret_key(key) is not None


def test_random_keys_are_never_refused_for_their_interleaved_characters():
    from app.config import weak_secret_key

    secrets = SeededSecrets(3)
    for make in (lambda: secrets.token_hex(16), lambda: secrets.token_urlsafe(24)):
        with untraced():  # a calibration: the rules' lines are read by the refusals above
            refused = [k for k in (make() for _ in range(2000)) if weak_secret_key(k) is not None]
        assert refused == []

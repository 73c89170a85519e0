"""Issue 26, round 14: the list tried again from a fresh clone. What broke, each tested here:

- Item 2: a model held memory outside its limit in pipes: vmsplice() gives a pipe a reference to
  the model's own pages, which stay when the model unmaps them, and a page of a transparent huge
  page holds the whole 2 MB. 960 one-byte splices from 60 pipes held 1.9 GB of the machine past a
  1,024 MB limit (RLIMIT_AS counts mappings, not pages a pipe holds); 127 pipes would hold 4 GB.
  And RLIMIT_CPU counts seconds, not cores: a model's threads left computing after it answered
  could take every core of the machine (a process doing so took 15.2 of the H200 machine's 16).
- Item 3: a forged answer's header within its 4 MB and 50,000 containers held 900,000 floats,
  84 MB in the worker once decoded (300,000 keys: 37 MB).
- Item 5: failure reasons showed secrets in shapes the redaction did not know: a value written
  as a bytes literal (`{'secret': b'hunter2'}`, Python's repr of a mapping of bytes), `=>`,
  ODBC's `Pwd=`, Azure's `AccountKey=` and `SharedAccessKey=`, `passphrase=`, `PrivateKey =`,
  JSON quoted inside a JSON string (`\\"password\\": \\"x\\"`), `password%3Dx`, a `Cookie:`
  header, `--password x`, `<password>x</password>`, a Windows extended path (`\\\\?\\C:\\...`),
  and tokens known by their shape (npm, PyPI, SendGrid, Google OAuth, DigitalOcean, Shopify,
  Grafana, Vault); a safetensors verdict quoted our loader's error unredacted.
- Item 7: a SECRET_KEY of English words written upside down passed every rule.
- Item 9 (and names shown on pages): a vocabulary's words, which generated items show to
  workers, and a crowd worker's id, which the researcher's pages and completions.csv show, could
  hold bidi overrides, zero-width and control characters: a worker entering as
  "\\u202e" + another's id reversed is shown as that other worker on the review page.
- Flaky infrastructure: a read-only PostgreSQL (a hot standby after a failover) made writes
  answer 500, and a job's end was not written through it.

This module is also the sandbox probe's loader (`tests.integration.test_reattack14:load`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os

import pytest

from app import jobs
from tests.conftest import ROOT
from tests.integration.test_broker_outage import SLEEPY, sleepy_job  # noqa: F401 - a fixture
from tests.integration.test_reattack26_round3 import needs_sandbox
from tests.integration.test_reattack26_round8 import ANSWERS_FD
from tests.integration.test_reattack26_round10 import Round10Probe

LOADER = "tests.integration.test_reattack14:load"
HUGE_PAGE = 2 << 20
MADV_HUGEPAGE = 14


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class Round14Probe(Round10Probe):
    def splice_pages(self, pipes: int, per_pipe: int) -> list[int]:
        """Splices one byte of each of `per_pipe` fresh huge pages into each of `pipes` pipes,
        unmapping each page after; the pages spliced, and the errno that stopped them."""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.vmsplice.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        libc.vmsplice.restype = ctypes.c_ssize_t
        held, kept = 0, []
        for _ in range(pipes):
            r, w = os.pipe()
            kept += [r, w]
            for _ in range(per_pipe):
                mapped = libc.mmap(None, 2 * HUGE_PAGE, 3, 0x22, -1, 0)  # read/write, private anonymous
                if mapped in (None, ctypes.c_void_p(-1).value):
                    return [held, ctypes.get_errno()]
                page = (mapped + HUGE_PAGE - 1) // HUGE_PAGE * HUGE_PAGE
                libc.madvise(page, HUGE_PAGE, MADV_HUGEPAGE)
                ctypes.memset(page, 1, HUGE_PAGE)
                spliced = libc.vmsplice(w, ctypes.byref(_IoVec(page, 1)), 1, 0)
                err = ctypes.get_errno()
                libc.munmap(mapped, 2 * HUGE_PAGE)
                if spliced != 1:
                    return [held, err]
                held += 1
        self.kept = kept  # the pipes stay open with the process
        return [held, 0]

    def forge_values(self, shape: str, n: int):
        """Writes an answer of its own, a header of n small values (no tensors), then waits."""
        import struct
        import time

        values = ",".join(["0.5"] * n) if shape == "floats" else ",".join(f'"k{i}": 1' for i in range(n)).join("{}")
        raw = ('{"result": {"list": [' + values + "]}}").encode()
        os.write(ANSWERS_FD, struct.pack("<QI", len(raw), 0) + raw)
        time.sleep(5)

    def spin_everywhere(self) -> list[int]:
        """Leaves matrix products running in the background after answering, in a thread for
        each CPU of the machine (torch releases the GIL in each); the CPUs it may run on."""
        import threading

        import torch

        def spin() -> None:
            x = torch.randn(256, 256)
            while True:
                x @ x

        for _ in range(os.cpu_count() or 1):
            threading.Thread(target=spin, daemon=True).start()
        return sorted(os.sched_getaffinity(0))

    def widen(self) -> int:
        """0, or the errno of asking for every CPU of the machine."""
        try:
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        except OSError as e:
            return e.errno or -1
        return 0

    def forge_error(self, text: str):
        """Writes an error answer of its own naming `text` as the exception, then waits."""
        import struct
        import time

        raw = json.dumps({"error": text}).encode()
        os.write(ANSWERS_FD, struct.pack("<QI", len(raw), 0) + raw)
        time.sleep(5)

    def raise_named(self, name: str):
        """Raises an exception of a class of its own, named as it likes."""
        raise type(name, (Exception,), {})()


def load(fmt: str, data: bytes, config: dict | None) -> Round14Probe:
    return Round14Probe()


def load_failing(fmt: str, data: bytes, config: dict | None) -> Round14Probe:
    """Weights whose loading fails as a lazy import under the filter would: its message names a
    file of the server (and here a credential, as a connection string would)."""
    raise PermissionError(
        "[Errno 1] Operation not permitted: '/srv/proctor/venv/lib/python3.12/lazy.py' password=hunter2"
    )


@pytest.fixture
def sandbox(monkeypatch):
    from workers.sandbox import SandboxedModel

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel(LOADER, "probe", b"", None, limits={"call_s": 60, "memory_mb": 1024})
    yield model
    model.close()


@needs_sandbox
def test_a_model_cannot_hold_unmapped_pages_in_pipes(sandbox):
    """Each spliced page stays with the pipe after the model unmaps it, outside RLIMIT_AS (and
    RLIMIT_DATA off the CPU); a huge page's one byte holds 2 MB. 128 of them were 256 MB past
    the limit here; a model's 127 pipes of 16 could hold 4 GB. vmsplice is refused now (a model
    writes to its pipes, which copies, within the pipe's 64 KB)."""
    held, err = sandbox.call("splice_pages", 8, 16)
    assert held == 0 and err == errno.EPERM, f"{held} pages ({held * 2} MB) held by pipes, errno {err}"
    assert sandbox.call("echo", 1) == 1  # the process goes on


@needs_sandbox
@pytest.mark.parametrize("shape, n", [("floats", 900_000), ("keys", 300_000)])
def test_an_answers_header_of_many_small_values_is_refused_before_it_is_decoded(sandbox, shape, n):
    """A header within its 4 MB and its 50,000 objects and arrays may still hold 900,000 floats
    ("0.5,", 3.5 MB): decoded twice over (json, then the answer's own lists) the worker held 84
    MB, where the most was said to be 36 MB; 300,000 keys of a mapping 37 MB. Values are counted
    by their separators before decoding too (a vocabulary of 50,000 words, the most any answer
    holds, has 50,000)."""
    import tracemalloc

    import torch  # noqa: F401 - imported by the call otherwise, and counted

    from workers.sandbox import SandboxError

    sandbox.start()
    tracemalloc.start()
    try:
        with pytest.raises(SandboxError, match="over its size limit"):
            sandbox.call("forge_values", shape, n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"the worker held {peak >> 20} MB reading the answer"


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@needs_sandbox
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to take")
def test_a_model_computes_on_as_many_cpus_as_its_threads(sandbox):
    """RLIMIT_CPU counts a process's CPU seconds, not the cores it takes at once: a model that
    left matrix products running in a thread for each CPU after it answered kept
    every core of the machine busy (a process doing so on the lent H200 machine took 15.2 CPU
    seconds a second of its 16) for as long as its job held it, the web server's and other sandboxes' included, until its hour of CPU time ran out.
    A sandbox now runs on as many CPUs as its `threads` limit (1), chosen by its pid, and may
    not widen that."""
    import time

    cpus = sandbox.call("spin_everywhere")
    assert len(cpus) == 1, f"the model may run on CPUs {cpus}"
    assert sandbox.call("widen") == errno.EPERM
    pid = sandbox._proc.pid
    before, start = _cpu_seconds(pid), time.monotonic()
    time.sleep(3)
    rate = (_cpu_seconds(pid) - before) / (time.monotonic() - start)
    assert rate < 1.3, f"the model used {rate:.1f} CPU seconds a second"


@needs_sandbox
def test_a_weights_loading_error_shows_no_server_path(monkeypatch):
    """A safetensors upload's verdict quotes our loader's error (the weights' own problem, in
    its words); a verdict is not a failed job's reason and was not redacted, so an error naming
    a server file (a lazy import refused under the filter) or a credential showed whole to the
    researcher."""
    from workers.sandbox import SandboxedModel, SandboxError

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    model = SandboxedModel("tests.integration.test_reattack14:load_failing", "safetensors", b"", None)
    with pytest.raises(SandboxError) as refused:
        model.start()
    shown = str(refused.value)
    assert "could not load the model: PermissionError" in shown, shown
    assert "/srv" not in shown and "hunter2" not in shown, shown


@needs_sandbox
@pytest.mark.parametrize("how", ["forge_error", "raise_named"])
def test_a_verdict_names_no_exception_the_model_made_up(sandbox, how):
    """A verdict says which method raised what ("score() raised RuntimeError"), never the
    model's own text; but the exception's name came from the model's process as it was: a
    class of its own, or an answer forged on the pipe, put up to 100 characters of its words
    in the verdict ("score() raised Your account is locked: visit evil.example"). Only the
    names of Python's own exceptions are shown now."""
    from workers.sandbox import ModelRaised

    text = "Your account is locked: visit evil.example" if how == "forge_error" else "VisitEvilExampleNow"
    with pytest.raises(ModelRaised) as raised:
        sandbox.call(how, text)
    assert "evil" not in str(raised.value).lower() and "Evil" not in str(raised.value), str(raised.value)
    assert str(raised.value) == f"{how}() raised an error of its own", str(raised.value)


# Item 5: secrets and paths in failure reasons, shapes earlier rounds did not try.
SECRET = "hunter2xyzzy"


@pytest.mark.parametrize(
    "text",
    [
        f"{{'secret': b'{SECRET}'}}",  # Python's repr of a mapping of bytes
        f'password=b"{SECRET}"',
        f'password => "{SECRET}"',  # Ruby, Perl, PHP
        f'{{"password" => "{SECRET}"}}',
        f"Server=db;Database=p;Uid=sa;Pwd={SECRET};",  # ODBC, ADO.NET
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={SECRET}==;EndpointSuffix=core.windows.net",
        f"Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={SECRET}",
        f"passphrase={SECRET}",
        f"PrivateKey = {SECRET}+lXXJte14tji3zlMNq=",  # WireGuard
        f'body: {{\\"password\\": \\"{SECRET}\\"}}',  # JSON quoted inside a JSON string
        f"'{{\\'password\\': \\'{SECRET}\\'}}'",
        f"GET /x?q=1&password%3D{SECRET}",
        f"Cookie: proctor_session={SECRET}.Z3x1bw.abcdefsig; other=1",
        f"ran: tool --password {SECRET} --verbose",
        f"<password>{SECRET}</password>",
    ],
)
def test_a_failure_reason_blanks_secrets_of_other_shapes(text):
    shown = jobs.failure_reason(ValueError(text))
    assert SECRET not in shown, shown


@pytest.mark.parametrize(
    "token",
    [
        "npm_" + "a1B2c3D4e5" * 3 + "f6G7h8",
        "pypi-AgEIcHlwaS5vcmc" + "Ab3d" * 12,
        "SG." + "aB3dEf6hIj9kLm2oPq5sTu" + "." + "x" * 43,
        "ya29." + "a0AfH6SM" * 6,
        "dop_v1_" + "0123456789abcdef" * 4,
        "shpat_" + "0123456789abcdef" * 2,
        "glsa_" + "aB3dEf6hIj9kLm2oPq5sTu7wXy0zAb1C" + "_0123abcd",
        "hvs." + "CAESIJ" + "aB3dEf6hIj9kLm2oPq5sTu7w",
    ],
)
def test_a_failure_reason_blanks_more_tokens_known_by_their_shape(token):
    shown = jobs.failure_reason(ValueError(f"the registry refused {token} for this upload"))
    assert token not in shown and "<credentials>" in shown, shown


@pytest.mark.parametrize(
    "path",
    [r"\\?\C:\Users\alice\secret models\x.pt", r"\\?\UNC\fileserver\share\alice\x.pt"],
)
def test_a_failure_reason_blanks_windows_extended_paths(path):
    shown = jobs.failure_reason(ValueError(f"could not read {path}"))
    assert "alice" not in shown, shown


@pytest.mark.parametrize(
    "text",
    [
        "expected 3 fields, saw 2 => check the header",  # "=>" in a sentence with no secret name
        "pwd is not set",
        "the private key's size is 2048 bits",
        "Cookies are required",
        "npm_install failed",
    ],
)
def test_a_failure_reason_still_keeps_ordinary_text(text):
    assert jobs.failure_reason(ValueError(text)) == text


# Names shown on pages: a vocabulary's words (in generated items, shown to workers) and a worker's
# id (on the researcher's pages and in completions.csv).
UNSHOWABLE = {
    "a right-to-left override": "\u202e",
    "a zero-width space": "\u200b",
    "a first-strong isolate": "\u2068",
    "an escape": "\x1b",
    "a byte order mark": "\ufeff",
}


@pytest.mark.parametrize("name", UNSHOWABLE)
def test_a_speakers_words_are_refused_with_characters_no_page_shows(client, session, name):
    """A speaker's vocabulary is what generation writes into items: a word holding a bidi override
    reversed the rest of an instruction on the worker's page (and a zero-width space makes two
    words look one). Refused at upload as a word with a space is, naming config.words."""
    from safetensors.torch import save as save_safetensors

    from tests.integration.test_agent_artifacts import WORDS, Speaker, researcher, upload  # noqa: F401

    agent = researcher.__wrapped__(session, client)
    words = [*WORDS, "left" + UNSHOWABLE[name] + "right"]
    model = Speaker(words, hidden=8, embed=8)
    data = save_safetensors({k: v.contiguous() for k, v in model.state_dict().items()})
    r = upload(client, agent.id, data, "speaker", "safetensors", model.config())
    assert r.status_code == 422 and r.json()["field"] == "config.words", (r.status_code, r.text[:300])
    assert "control or format character" in r.json()["detail"], r.json()


@pytest.mark.parametrize("kind", ["navigation", "a3ds"])
def test_a_vocabulary_answered_by_a_model_is_held_to_showable_words(kind):
    """The same check where a run reads a TorchScript model's vocabulary() (its answer at run time
    may differ from validation's)."""
    import importlib

    arch = importlib.import_module(f"app.kinds.{kind}.architectures")
    specials = list(arch.SPECIALS)
    for ch in UNSHOWABLE.values():
        why = arch.check_vocabulary([*specials, "fine", f"bad{ch}word"])
        assert isinstance(why, str) and "control or format character" in why, (kind, repr(ch), why)
    assert arch.check_vocabulary([*specials, "fine", "café", "naïve"]) == [*specials, "fine", "café", "naïve"]


@pytest.mark.parametrize("name", UNSHOWABLE)
def test_a_worker_id_with_characters_no_page_shows_is_refused(app, client, session, name):
    """A crowd worker writes their own id into the entry link. One holding a right-to-left
    override and another worker's id reversed was shown on the researcher's review page and in
    completions.csv as that other worker (whom the researcher would then reject or block on the
    platform); a zero-width space made two ids look one. Refused at entry (400), page and API."""
    from tests.conftest import create_tom_study, make_user

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    session.commit()
    victim = "5f3a9c0b1d2e4f60718293a4"
    spoof = UNSHOWABLE[name] + victim[::-1] if name == "a right-to-left override" else victim + UNSHOWABLE[name]
    r = client.get(
        f"/s/{study.slug}",
        params={"PROLIFIC_PID": spoof, "STUDY_ID": "s", "SESSION_ID": "x"},
        follow_redirects=False,
    )
    assert r.status_code == 400 and "cannot be shown" in r.text, (r.status_code, r.text[:300])
    r = client.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": spoof}})
    assert r.status_code == 400 and "cannot be shown" in r.json()["detail"], (r.status_code, r.text[:300])
    r = client.get(
        f"/s/{study.slug}", params={"PROLIFIC_PID": victim, "STUDY_ID": "s", "SESSION_ID": "x"}, follow_redirects=False
    )
    assert r.status_code == 303, r.text[:300]


# Item 7: a SECRET_KEY of English words written upside down passed every rule.


@pytest.mark.parametrize(
    "key",
    [
        "ɔoɹɹǝɔʇɥoɹsǝqɐʇʇǝɹʎsʇɐdlǝdɐssʍoɹp",  # "correcthorsebatterystaplepassword", upside down
        "ʎǝʞʇǝɹɔǝsʎɯsᴉsᴉɥʇʎǝʞʇǝɹɔǝsʎɯsᴉsᴉɥʇ",  # "thisismysecretkey" twice
    ],
)
def test_words_written_upside_down_are_not_a_secret_key(key):
    from app.config import weak_secret_key

    assert weak_secret_key(key) is not None


def test_random_keys_of_turned_letters_still_pass():
    """Keys drawn from the upside-down letters and the others at random are not read as words."""
    import random

    from app.config import weak_secret_key

    rng = random.Random(14)
    alphabet = "ɐɔǝɟƃɥᴉɾʞɯɹʇʌʍʎ" + "abcdefghijklmnopqrstuvwxyz0123456789"
    refused = [k for k in ("".join(rng.choice(alphabet) for _ in range(40)) for _ in range(500)) if weak_secret_key(k)]
    assert not refused, refused[:3]


# Flaky infrastructure (the database-outage row): a PostgreSQL that takes connections and refuses
# every write, as a hot standby does when a failover points the app at it for a while, or a
# database set `default_transaction_read_only`.


@pytest.fixture
def read_only_database(db_url):
    """A switch that makes the test's database read-only for new transactions (its connections
    dropped, as by a failover) and writable again."""
    from sqlalchemy import create_engine, text

    name = db_url.rsplit("/", 1)[1].split("?")[0]
    admin = create_engine(db_url.rsplit("/", 1)[0] + "/postgres", isolation_level="AUTOCOMMIT")

    state = {"on": False}

    def switch(on: bool) -> None:
        state["on"] = on
        with admin.connect() as c:
            setting = "SET default_transaction_read_only = on" if on else "RESET default_transaction_read_only"
            c.execute(text(f'ALTER DATABASE "{name}" {setting}'))
            c.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n AND pid <> pg_backend_pid()"
                ),
                {"n": name},
            )

    try:
        yield switch
    finally:
        if state["on"]:
            switch(False)
        admin.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_read_only_database_is_an_outage_not_a_500(db_url, app, session, read_only_database):
    """Writes refused with "cannot execute ... in a read-only transaction" (SQLSTATE 25006)
    answered a bare 500: a worker's entry, the crowd API and a researcher's change. They are the
    database being unavailable, as a stopped one is: 503 with Retry-After, and the request
    goes through once it is writable again."""
    from fastapi.testclient import TestClient

    from app.auth.security import create_token
    from tests.conftest import create_tom_study, make_user

    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    token = create_token(session, owner)
    session.commit()
    session.close()
    client = TestClient(app, raise_server_exceptions=False)
    api = {"Authorization": f"Bearer {token}"}

    def requests():
        link = {"PROLIFIC_PID": "ro-worker", "STUDY_ID": "s", "SESSION_ID": "x"}
        yield "entry", client.get(f"/s/{study.slug}", params=link, follow_redirects=False)
        yield "crowd API", client.post(f"/api/v1/crowd/{study.slug}/enter", json={"params": {"PROLIFIC_PID": "ro-api"}})
        yield "API", client.patch(f"/api/v1/studies/{study.id}", json={"title": "renamed"}, headers=api)

    read_only_database(True)
    for what, r in requests():
        assert r.status_code == 503 and r.headers.get("Retry-After"), (what, r.status_code, r.text[:200])
    read_only_database(False)
    assert [r.status_code for _, r in requests()] == [303, 200, 200]


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_jobs_end_is_written_through_a_read_only_spell(db_url, session, read_only_database, sleepy_job):  # noqa: F811
    """A job's end is written again while the database refuses writes, as through a restart
    (round 13b): before, the refusal raised at once and the job stayed "running" until the
    sweeper ran it again 15 minutes later."""
    import threading
    import time

    from tests.conftest import make_user

    owner = make_user(session, "researcher")
    job = jobs.create_job(session, SLEEPY, owner_id=owner.id, marks="", steps=1)
    job.state, job.attempts = "running", 1
    session.commit()
    read_only_database(True)
    writable = threading.Timer(2.0, read_only_database, (False,))
    writable.start()
    start = time.monotonic()
    assert jobs._end(job.id, {"ok": 1}, None) == "done"
    assert time.monotonic() - start >= 1.5
    writable.join()  # its connections dropped too, before the test's session reads
    session.expire_all()
    assert session.get(jobs.Job, job.id).state == "done"

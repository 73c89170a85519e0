"""Shared fixtures. Real services only: SQLite files, a real PostgreSQL and Redis on
loopback (started if possible, else the tests that need them skip with the reason)."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import importlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
PG_ADMIN_URL = os.environ.get("PROCTOR_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def _redis_for_this_process(url: str) -> str:
    """Under pytest-xdist each worker process (gw0, gw1, ...) gets its own Redis database,
    counting down from the configured one, so two workers' Celery queues never meet."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
    base, _, db = url.rpartition("/")
    return f"{base}/{int(db or 0) - worker}" if worker else url


REDIS_URL = _redis_for_this_process(os.environ.get("PROCTOR_TEST_REDIS", "redis://127.0.0.1:6379/15"))

os.environ.setdefault("SECRET_KEY", "test-secret-" + secrets.token_hex(24))
# No test calls the real Prolific: a closed loopback port unless a test serves the fake
# (tests/fakes/prolific.py) and names its address.
os.environ["PROLIFIC_API_URL"] = "http://127.0.0.1:9/api/v1"

# One torch thread per test process and in the processes tests start (the CLI, the Celery
# worker): pytest-xdist already runs one process per core, and the tests' models are small
# enough that a second thread only contends with the other worker (the sandbox sets its own).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# SQLite's commits not written through to the disk one by one (app/config.py): a test's rows
# outlive no power cut, and the demo's seed took a fifth longer with a flush a commit. The
# default, "full", is tested in tests/unit/test_sqlite_synchronous.py.
os.environ.setdefault("SQLITE_SYNCHRONOUS", "normal")


@pytest.fixture(scope="session", autouse=True)
def _cheap_password_hashing():
    """argon2id at its lowest cost in this process: the same algorithm and hash format, but a
    test user costs a millisecond instead of half a second (the cost is the point in
    production, and processes started by tests keep it)."""
    from argon2 import PasswordHasher

    from app.auth import security

    production = security._hasher
    security._hasher = PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    yield
    security._hasher = production


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _try_start(cmd: str, port: int) -> bool:
    if _port_open("127.0.0.1", port):
        return True
    try:
        subprocess.run(cmd, shell=True, timeout=30, capture_output=True)
    except Exception:
        return False
    for _ in range(50):
        if _port_open("127.0.0.1", port):
            return True
        time.sleep(0.2)
    return False


@pytest.fixture(scope="session")
def pg_server() -> str:
    ok = _try_start("pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start", 5432)
    if not ok:
        pytest.skip("PostgreSQL is not running on 127.0.0.1:5432 and could not be started")
    return PG_ADMIN_URL


@pytest.fixture(scope="session")
def redis_server() -> str:
    ok = _try_start('redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no', 6379)
    if not ok:
        pytest.skip("Redis is not running on 127.0.0.1:6379 and could not be started")
    return REDIS_URL


def _create_pg_database(admin_url: str) -> str:
    name = f"proctor_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    eng = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
        # A test database need not survive a crash of the server: commits return without
        # waiting for the WAL to reach the disk (what they see and lock is unchanged). The
        # fault tests run servers of their own, with the default.
        c.execute(text(f'ALTER DATABASE "{name}" SET synchronous_commit = off'))
    eng.dispose()
    return admin_url.rsplit("/", 1)[0] + "/" + name


def _drop_pg_database(admin_url: str, url: str) -> None:
    from app.db import get_engine

    get_engine.cache_clear()
    name = url.rsplit("/", 1)[1]
    eng = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    eng.dispose()


@pytest.fixture(scope="session")
def pg_database(pg_server):
    """One migrated PostgreSQL database for the session; tests truncate it."""
    from app.cli import migrate_db

    url = _create_pg_database(pg_server)
    migrate_db(url)
    yield url
    _drop_pg_database(pg_server, url)


def _truncate(url: str) -> None:
    """Empty every table and restart its ids, as TRUNCATE ... RESTART IDENTITY would. As a
    superuser (the default PROCTOR_TEST_PG) by DELETE with triggers and foreign-key checks off
    (session_replication_role = replica): ~10 ms instead of TRUNCATE's ~500 ms, which makes new
    files for 31 tables and their indexes, before each of the ~370 PostgreSQL tests."""
    from app.models import load_models

    tables = load_models().metadata.sorted_tables
    eng = create_engine(url)
    with eng.begin() as c:
        if c.scalar(text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")):
            c.execute(text("SET LOCAL session_replication_role = replica"))
            c.execute(text("; ".join(f'DELETE FROM "{t.name}"' for t in tables)))
            c.execute(
                text(
                    "SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, start_value, false) "
                    "FROM pg_sequences WHERE schemaname = current_schema()"
                )
            )
        else:
            names = ", ".join(f'"{t.name}"' for t in tables)
            c.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    eng.dispose()


def _use(url: str, storage: Path, monkeypatch) -> None:
    from app.config import get_settings
    from app.db import get_engine, get_sessionmaker
    from app.storage import clear_store_cache

    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("STORAGE_URL", f"file://{storage}")
    monkeypatch.setenv("REDIS_URL", "")
    for cache in (get_settings, get_engine, get_sessionmaker):
        cache.cache_clear()
    clear_store_cache()
    from app.studies import hotpath

    hotpath.reset()  # ids start again after TRUNCATE ... RESTART IDENTITY: forget them


EXAMPLE_KIND = ROOT / "tests" / "example_kind"
TEST_KINDS = ROOT / "var" / "test-kinds"


def _example_kind_sources() -> str:
    files = sorted(
        p
        for p in EXAMPLE_KIND.rglob("*")
        if p.is_file() and not any(part in ("build", "__pycache__") or part.endswith(".egg-info") for part in p.parts)
    )
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(EXAMPLE_KIND)).encode() + b"\0" + p.read_bytes())
    return digest.hexdigest()


def install_example_kind() -> Path:
    """Install the example kind (tests/example_kind) as a package, the way a lab installs its
    own: pip, into var/test-kinds (re-installed when its sources change). This process and
    every process it starts (PYTHONPATH: the CLI, `proctor serve`, the Celery worker) then find
    it through the `proctor.kinds` entry points, like the built-in kinds."""
    stamp = TEST_KINDS / ".sources-sha256"
    digest = _example_kind_sources()
    # scripts/test.sh starts two pytest processes at once (the fuzzing beside the rest): on a
    # fresh clone both found no stamp and installed into one folder, each removing the other's
    # build (CI: "could not install the example kind", exit 3). One installs; the other waits.
    TEST_KINDS.parent.mkdir(parents=True, exist_ok=True)
    with open(TEST_KINDS.parent / "test-kinds.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.exists() and stamp.read_text() == digest):
            _install_example_kind(stamp, digest)
    if str(TEST_KINDS) not in sys.path:
        sys.path.insert(0, str(TEST_KINDS))
        importlib.invalidate_caches()
    paths = [str(TEST_KINDS), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return TEST_KINDS


def _install_example_kind(stamp: Path, digest: str) -> None:
    shutil.rmtree(TEST_KINDS, ignore_errors=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(TEST_KINDS),
            str(EXAMPLE_KIND),
        ],
        capture_output=True,
        text=True,
    )
    for leftover in (EXAMPLE_KIND / "build", *EXAMPLE_KIND.glob("*.egg-info")):
        shutil.rmtree(leftover, ignore_errors=True)
    if done.returncode:
        raise RuntimeError(f"could not install the example kind:\n{done.stdout}{done.stderr}")
    stamp.write_text(digest)


def pytest_configure(config):
    # Before any test module is collected: importing app.cli loads the kinds.
    install_example_kind()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    # pytest-xdist runs one test per node id: tests that share one (schemathesis's per-operation
    # tests) would silently run once, so scripts/test.sh runs them outside it, and any other
    # such test stops the run here, named.
    seen: dict[str, int] = {}
    for nodeid in ids:
        seen[nodeid] = seen.get(nodeid, 0) + 1
    twice = sorted(n for n, c in seen.items() if c > 1)
    if twice:
        pytest.exit(
            f"{len(twice)} node ids are shared by several tests, which pytest-xdist would run "
            f"once each: {twice[:3]}; run them outside it (see scripts/test.sh)",
            returncode=4,
        )


# Seconds each file of 17 s or more took (wall, PROCTOR_TEST_TIMES of a whole `make test`,
# 2026-11-30 at 22f658e, beside a helper's tests; mypy's check as it takes with a cold cache);
# other files are counted from their number of tests.
# Under pytest-xdist the files go out longest first (scripts/test.sh turns off xdist's own
# order, most tests first, which sent the one-test files of a minute each out last, to one
# worker while the other sat idle).
SLOW_FILES = {
    "test_cli_demo.py": 90,
    "test_reattack13.py": 72,
    "test_api_roles.py": 71,
    "test_broker_outage.py": 69,
    "test_malformed_files.py": 48,
    "test_faults.py": 40,
    "test_reattack14.py": 37,
    "test_secrets.py": 31,
    "test_sandbox.py": 31,
    "test_prolific.py": 29,
    "test_types.py": 28,
    "test_sts_policies.py": 27,
    "test_client.py": 26,
    "test_adaptive.py": 26,
    "test_reattack26_round11.py": 25,
    "test_install.py": 25,
    "test_nav_owners.py": 24,
    "test_accessibility.py": 23,
    "test_concurrency.py": 22,
    "test_agents_e2e.py": 22,
    "test_walk_fit.py": 21,
    "test_prolific_pages.py": 21,
    "test_generation_forms.py": 21,
    "test_bench_gpu.py": 20,
    "test_sts_e2e.py": 19,
    "test_reattack26_round9.py": 19,
    "test_leaderboard.py": 19,
    "test_a3ds_captioners.py": 19,
    "test_kind_words_and_fit.py": 19,
    "test_reattack15.py": 17,
}
PER_TEST_S = {"unit": 0.05, "integration": 0.3, "browser": 1.5}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the files in their usual order
    counts: dict[str, int] = {}
    for item in items:
        counts[item.fspath.strpath] = counts.get(item.fspath.strpath, 0) + 1

    def weight(path: str) -> float:
        p = Path(path)
        return SLOW_FILES.get(p.name) or counts[path] * PER_TEST_S.get(p.parent.name, 0.3)

    order = {path: i for i, path in enumerate(sorted(counts, key=lambda f: -weight(f)))}
    items.sort(key=lambda item: order[item.fspath.strpath])  # stable: a file keeps its order


# PROCTOR_TEST_TIMES=FOLDER writes each test process's seconds per file there (wall, and CPU
# of the process and the children it has reaped: the servers, workers and browsers the file's
# fixtures started), for refreshing SLOW_FILES and finding where the suite's CPU goes
# (`python scripts/test_times.py FOLDER` sums them).
_TIMES: dict[str, list[float]] = {}


def _cpu() -> float:
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not os.environ.get("PROCTOR_TEST_TIMES"):
        yield
        return
    wall, cpu = time.monotonic(), _cpu()
    yield  # a module's fixtures end with its last test, so their reaped children count there
    times = _TIMES.setdefault(item.location[0], [0.0, 0.0, 0])
    times[0] += time.monotonic() - wall
    times[1] += _cpu() - cpu
    times[2] += 1


def pytest_sessionfinish(session):
    if (folder := os.environ.get("PROCTOR_TEST_TIMES")) and _TIMES:
        out = Path(folder) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{os.getpid()}.tsv"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(f"{f}\t{w:.2f}\t{c:.2f}\t{n}\n" for f, (w, c, n) in _TIMES.items()))


def pytest_sessionstart(session):
    # Every table, the kinds' included, before any test opens a session (as create_app, the
    # CLI and the Celery app do at start-up).
    from app.models import load_models

    load_models()


# PROCTOR_TEST_BACKENDS=sqlite (or postgresql) narrows the matrix; `make mutants` runs the
# SQLite pass this way and the PostgreSQL-only engine paths in a second pass.
BACKENDS = [b for b in os.environ.get("PROCTOR_TEST_BACKENDS", "sqlite,postgresql").split(",") if b]
# A module or a test marked `pytest.mark.backend_agnostic("why")` runs its database tests on
# SQLite only: what it checks (forms, messages, permissions, files, pages) goes through the ORM
# the same way on both, and the modules where the backend matters (the engine, the hot path,
# totals and triggers, rejection races, crowd integrity, migrations, leaderboards, row locks)
# stay on both.
# PROCTOR_TEST_ALL_BACKENDS=1 runs those modules on both backends again.
ALL_BACKENDS = os.environ.get("PROCTOR_TEST_ALL_BACKENDS", "") not in ("", "0")


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc):
    """Before the fixture params apply: a backend-agnostic module's tests that take `db_url`
    (directly or through `session`, `app`, `client`...) are parametrized with SQLite alone,
    unless the test parametrizes `db_url` itself."""
    if ALL_BACKENDS or "db_url" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("backend_agnostic") is None:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if "db_url" in ([n.strip() for n in names.split(",")] if isinstance(names, str) else names):
            return
    metafunc.definition.add_marker(
        pytest.mark.parametrize("db_url", ["sqlite"], indirect=True), append=False
    )  # first, as the fixture's params: same ids


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    """One SQLite file migrated to head; each test gets a copy (Alembic once, not per test)."""
    from app.cli import migrate_db

    path = tmp_path_factory.mktemp("template") / "proctor.db"
    migrate_db(f"sqlite:///{path}")
    return path


def _ram_folder() -> Path | None:
    """A folder in RAM (tmpfs) for the tests' SQLite files, when the machine has one: a commit
    there costs ~0.05 ms instead of an fsync's ~5 ms, and the suite commits tens of thousands of
    times. The app's own SQLite settings are unchanged; removed when the session ends."""
    shm = Path("/dev/shm")
    # A container's /dev/shm may be 64 MiB: too small for a run's databases, so disk then.
    if not (shm.is_dir() and os.access(shm, os.W_OK)) or shutil.disk_usage(shm).free < 2 << 30:
        return None
    for old in shm.glob("proctor-tests-*-*"):  # left by a run that was killed
        try:
            os.kill(int(old.name.split("-")[2]), 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(old, ignore_errors=True)
        except PermissionError:
            pass
    folder = Path(tempfile.mkdtemp(prefix=f"proctor-tests-{os.getpid()}-", dir=shm))
    atexit.register(shutil.rmtree, folder, True)
    return folder


RAM = _ram_folder()


def _fresh_sqlite(template: Path, tmp_path: Path) -> str:
    target = (RAM / uuid.uuid4().hex if RAM else tmp_path) / "proctor.db"
    target.parent.mkdir(exist_ok=True)
    shutil.copyfile(template, target)
    return f"sqlite:///{target}"


def _remove_sqlite(url: str) -> None:
    path = Path(url.removeprefix("sqlite:///"))
    if RAM and RAM in path.parents:
        shutil.rmtree(path.parent, ignore_errors=True)


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path, monkeypatch):
    """Each test that takes this runs on both backends, on a fresh schema."""
    if request.param not in BACKENDS:  # a test parametrized for one backend, left out here
        pytest.skip(f"PROCTOR_TEST_BACKENDS={','.join(BACKENDS)} leaves out {request.param}")
    if request.param == "sqlite":
        url = _fresh_sqlite(request.getfixturevalue("sqlite_template"), tmp_path)
    else:
        url = request.getfixturevalue("pg_database")
        _truncate(url)
    _use(url, tmp_path / "blobs", monkeypatch)
    yield url
    from app.db import get_engine

    get_engine(url).dispose()
    get_engine.cache_clear()
    _remove_sqlite(url)


@pytest.fixture
def sqlite_url(sqlite_template, tmp_path, monkeypatch):
    url = _fresh_sqlite(sqlite_template, tmp_path)
    _use(url, tmp_path / "blobs", monkeypatch)
    yield url
    _remove_sqlite(url)


@pytest.fixture
def session(db_url):
    from app.db import get_sessionmaker

    s = get_sessionmaker(db_url)()
    yield s
    s.close()


_APPS: dict = {}


def app_for(url: str):
    """create_app(url); or, when the settings and the installed kinds are those an earlier
    test's app was made with, that app pointed at this database with fresh state (create_app's
    only other side effect, the request log's level, done again). Building an app's ~430 routes
    (their FastAPI/pydantic models) costs 0.5-1 s; ~530 tests take an app. Nothing in the app
    but app.state depends on the database or on what earlier requests did."""
    from app.config import get_settings
    from app.kinds import all_kinds
    from app.main import REQUEST_LOG, create_app

    settings = get_settings()
    kinds = tuple(all_kinds().items())
    key = (
        # BASE_URL differs for each live server (its port); create_app reads only its scheme
        # (the session cookie's https_only), the pages read the setting at each request.
        settings.model_dump_json(exclude={"database_url", "storage_url", "base_url"}),
        settings.base_url.startswith("https"),
        tuple((name, id(kind)) for name, kind in kinds),
    )
    if key not in _APPS:
        _APPS[key] = (create_app(url), kinds)  # the kinds kept alive: their ids stay theirs
        return _APPS[key][0]
    app = _APPS[key][0]
    app.state._state.clear()  # e.g. the in-process rate limiter's counts
    app.state.database_url = url
    REQUEST_LOG.setLevel(settings.log_level.upper())
    return app


@pytest.fixture
def app(db_url):
    return app_for(db_url)


@pytest.fixture
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        yield c


@pytest.fixture(autouse=True)
def _settings_follow_the_environment():
    """After each test, settings are read again from the environment: a test that set a
    variable and cleared get_settings' cache (MAX_UPLOAD_VALUES=1000) left its settings cached
    once monkeypatch restored the variable, and a later test in the process (one reading a
    1,945-line fixture) was held to them. 1.5 ms a test."""
    yield
    from app.config import get_settings

    get_settings.cache_clear()


@contextlib.contextmanager
def statements_run(engine):
    """The SQL statements `engine` sends inside the block, a list that fills as they run (a
    test counts a page's or an answer's queries with it)."""
    from sqlalchemy import event

    statements: list[str] = []

    def count(conn, cursor, statement, *args):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", count)


@contextlib.contextmanager
def untraced():
    """Runs a simulation, a calibration or a training loop without coverage's tracer, here and
    in the processes it starts: branch tracing makes such loops 2-5 times slower (about half
    of what tracing added to the unit folder's time), and the lines they run are covered by the hand-worked tests beside them.
    What the loop asserts is unchanged."""
    import coverage

    # Every measurement this process runs: an xdist worker has pytest-cov's and the one its
    # start-up began (it inherits COVERAGE_PROCESS_CONFIG), and stopping the one on top resumes
    # the one below.
    stopped = []
    while (cov := coverage.Coverage.current()) is not None:
        cov.stop()
        stopped.append(cov)
    saved = {k: os.environ.pop(k) for k in ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START") if k in os.environ}
    try:
        yield
    finally:
        for cov in reversed(stopped):
            cov.start()
        os.environ.update(saved)


class SeededSecrets:
    """`secrets`' calls from a fixed seed, for tests that draw random keys to show the SECRET_KEY
    rules refuse none: the same keys every run. Drawn afresh each run, a rule's rare false
    refusal (a base64 key of 24 random bytes read as English: 1 in CI's 7,500, 0 in 30,000
    drawn after) failed a run by chance; docs/security.md gives the rates measured."""

    def __init__(self, seed: int):
        import random

        self._rng = random.Random(seed)

    def token_bytes(self, n: int) -> bytes:
        return self._rng.randbytes(n)

    def token_hex(self, n: int) -> str:
        return self.token_bytes(n).hex()

    def token_urlsafe(self, n: int) -> str:
        import base64

        return base64.urlsafe_b64encode(self.token_bytes(n)).rstrip(b"=").decode()

    def choice(self, seq):
        return self._rng.choice(seq)


def make_user(session, role: str, email: str | None = None, password: str = "pw-" + "x" * 8):
    from app.demo import ensure_user

    return ensure_user(session, email or f"{role}-{uuid.uuid4().hex[:6]}@example.org", role, password)


def expire_lease(session, a) -> None:
    """Let a lease run out without waiting for it."""
    from datetime import timedelta

    from sqlalchemy import update

    from app.studies.models import Assignment

    session.execute(
        update(Assignment).where(Assignment.id == a.id).values(lease_expires_at=a.leased_at - timedelta(seconds=1))
    )
    session.commit()


def csrf_of(client) -> str:
    """Fetch a page to get the session's CSRF token."""
    import re

    html = client.get("/login").text
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def consent_version_of(html: str) -> str:
    """The version of the consent text a consent page shows (its form sends it back)."""
    import re

    return re.search(r'name="consent_version" value="([^"]+)"', html).group(1)


def login(client, user, password: str = "pw-" + "x" * 8):
    token = csrf_of(client)
    r = client.post(
        "/login", data={"email": user.email, "password": password, "csrf_token": token}, follow_redirects=False
    )
    assert r.status_code == 303, r.text
    return csrf_of(client)


@pytest.fixture
def hexagons_kind():
    """The Hexagons kind, registered for the test when the venv predates its `hexagons` entry
    point (and unregistered after)."""
    from app.kinds import all_kinds, register_kind, unregister_kind
    from app.kinds.hexagons import KIND

    added = "hexagons" not in all_kinds()
    if added:
        register_kind(KIND)
    yield KIND
    if added:
        unregister_kind("hexagons")


@pytest.fixture
def tom_csv() -> bytes:
    return (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes()


def create_tom_study(session, owner, data: bytes | None = None, live: bool = True, **settings):
    from app.studies import services

    if data is None:
        data = (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes()
    s = services.StudySettings(title=settings.pop("title", "Test study"), **settings)
    study = services.create_study(session, owner, "tom", s, data, "csv")
    if live:
        services.set_state(session, study, "live", owner)
    return study


class LiveServer:
    def __init__(self, url: str, db_url: str):
        self.url, self.db_url = url, db_url


@pytest.fixture
def live_server(sqlite_url, tmp_path):
    """The real app under uvicorn in a thread, with the in-process job worker."""
    import uvicorn

    from app.jobs import start_inprocess_worker

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ["BASE_URL"] = f"http://127.0.0.1:{port}"
    from app.cli import server_options

    server = uvicorn.Server(
        uvicorn.Config(app_for(sqlite_url), host="127.0.0.1", port=port, **server_options())
    )  # as `proctor serve` runs it
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    stop = threading.Event()
    start_inprocess_worker(stop)
    for _ in range(100):
        if _port_open("127.0.0.1", port):
            break
        time.sleep(0.05)
    yield LiveServer(f"http://127.0.0.1:{port}", sqlite_url)
    stop.set()
    server.should_exit = True
    thread.join(5)
    os.environ.pop("BASE_URL", None)


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import expect, sync_playwright

    # expect()'s own default is 5 s; on two loaded cores (xdist beside PostgreSQL) ReDoc took
    # longer than that to lay out the whole schema, so waits match the page's 10 s actions.
    expect.set_options(timeout=10000)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context()
    pg = ctx.new_page()
    pg.set_default_timeout(10000)
    # A page's text shows before its scripts run (app.js is deferred behind each kind's
    # item.js), so a key pressed the moment a heading appears could reach no handler; on loaded
    # CI cores that gap was hundreds of ms. A person presses keys on a loaded page: each key
    # here waits for the "load" event first (at once when it has fired).
    kb = pg.keyboard
    for name in ("press", "type", "down", "insert_text"):

        def waiting(*a, _orig=getattr(kb, name), **kw):
            pg.wait_for_load_state("load")
            return _orig(*a, **kw)

        setattr(kb, name, waiting)
    yield pg
    ctx.close()

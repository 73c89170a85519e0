"""Fault run (issue 10): a crowd answers a live study while PostgreSQL restarts, the web server
is killed and Redis stops; afterwards the database says what was lost or stored twice.

    .venv/bin/python bench/faults.py                         # 16 workers, 60 s, every fault: ~2 min
    .venv/bin/python bench/faults.py --workers 8 --seconds 30 --json /tmp/faults.json

Everything runs on servers of its own, on free loopback ports, removed afterwards: a PostgreSQL
cluster made by initdb (run as the `postgres` user when this runs as root), a redis-server, and
the app under uvicorn with two worker processes, its rate limiter counting in that Redis. The
schema comes from `proctor migrate`; the study is a live `tom` study of --items items.

Each simulated worker is a thread with its own httpx client (its own cookie jar), closed loop:
enter, next item, submit. A dropped connection, a timeout, a 5xx or a 429 is retried after a
short backoff, a submit with the very same body (assignment, idempotency key, answer), as the
task page does; a submit in flight when the time is up keeps trying for --grace seconds.

Meanwhile the faults run one after another, spaced out: PostgreSQL is stopped (pg_ctl -m fast,
or --pg-mode immediate: a crash) and started again, the web server's whole process group is
killed with SIGKILL and started again, and redis-server is stopped and started again.

Printed: answers acknowledged (2xx), stored, lost (acknowledged but not stored), duplicated
(an assignment with two annotations or two acknowledged ids, a key stored twice, an item over
annotations_per_item), answers acknowledged only after a retry (and how many of those an
earlier try had stored: the idempotency key at work), per fault the errors the clients saw in its window and the answers
acknowledged per second, and the database's own invariants (bench/crowd.py's checks).
Exit status: 0 when nothing was lost or duplicated and every invariant holds, 1 otherwise,
2 when the run itself failed (a server that did not come back, nothing acknowledged).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from crowd import db_checks, free_port, pg_conninfo  # noqa: E402

SETTLE_S = 3.0  # a fault's window runs on this long after its server is back
REDIS_FALLBACK = "Redis is unreachable"  # what the rate limiter logs when it counts on its own


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def find_binaries() -> tuple[Path | None, str | None, str]:
    """(PostgreSQL's bin folder, redis-server, why not) for what this machine has."""
    bins = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    initdb = bins[-1] if bins else shutil.which("initdb")
    redis = shutil.which("redis-server")
    why = []
    if not initdb:
        why.append("no initdb (PostgreSQL server binaries)")
    if not redis:
        why.append("no redis-server")
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            why.append("running as root but there is no `postgres` user to run PostgreSQL as")
    return (Path(initdb).parent if initdb else None), redis, "; ".join(why)


class Postgres:
    """A cluster of our own; stop() and start() are the fault."""

    def __init__(self, bin_dir: Path, folder: Path, max_connections: int = 200):
        self.bin, self.dir, self.port = bin_dir, folder, free_port()
        self.data, self.log = folder / "data", folder / "server.log"
        self.as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_pg:
            shutil.chown(folder, "postgres", "postgres")
        subprocess.run(
            self.as_pg
            + [
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )
        self.opts = f"-p {self.port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections={max_connections}"
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/proctor"

    def _ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.as_pg + [str(self.bin / "pg_ctl"), "-D", str(self.data), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    def start(self) -> None:
        done = self._ctl("-o", self.opts, "-l", str(self.log), "-w", "-t", "60", "start")
        if done.returncode:
            raise RuntimeError(f"PostgreSQL did not start: {done.stderr or done.stdout}")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-m", mode, "-w", "-t", "60", "stop")

    def ready(self) -> bool:
        return (
            subprocess.run(
                [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)], capture_output=True
            ).returncode
            == 0
        )

    def create_database(self) -> None:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as c:
            c.execute('CREATE DATABASE "proctor"')


class Redis:
    """redis-server of our own, no persistence; stop() and start() are the fault."""

    def __init__(self, binary: str, folder: Path):
        self.binary, self.dir, self.port, self.proc = binary, folder, free_port(), None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with open(self.dir / "redis.log", "ab") as out:
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.dir),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while not self.ready():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"redis-server did not start (see {self.dir / 'redis.log'})")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False


class Web:
    """The app under uvicorn (a supervisor and its worker processes, one process group)."""

    def __init__(self, env: dict, workers: int, log_path: Path):
        self.env, self.workers, self.log = env, workers, log_path
        self.port, self.proc = free_port(), None
        self.base = f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> None:
        import httpx

        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "app.main:create_app",
                    "--factory",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--workers",
                    str(self.workers),
                    "--no-access-log",
                    "--log-level",
                    "warning",
                    "--timeout-graceful-shutdown",
                    "5",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the web server exited with {self.proc.returncode} (see {self.log})")
            try:
                if httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the web server did not answer /healthz in {timeout:.0f} s (see {self.log})")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)  # the supervisor and every worker process at once
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def ready(self) -> bool:
        import httpx

        try:
            return httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def log_count(self, needle: str) -> int:
        try:
            return self.log.read_text(errors="replace").count(needle)
        except OSError:
            return 0


# ------------------------------------------------------------------------------ the study


def make_study(url: str, n_items: int, cap: int) -> tuple[int, str]:
    """A live `tom` study of n_items (5% gold), as tests/integration/test_concurrency.py makes
    one: rows through the app's own models."""
    from app.auth.models import User
    from app.db import get_sessionmaker
    from app.models import load_models
    from app.studies.models import Item, Study

    load_models()
    rng = random.Random(11)
    with get_sessionmaker(url)() as s:
        owner = User(email="faults@example.org", role="researcher", name="faults")
        s.add(owner)
        s.flush()
        study = Study(
            slug=f"faults-{uuid.uuid4().hex[:8]}",
            title="Fault run",
            kind="tom",
            owner_id=owner.id,
            state="live",
            annotations_per_item=cap,
            bundle_size=10,
            gold_rate=0.1,
            lease_seconds=900,
            completion_code="FAULTS",
            kind_settings={"random_yes_rate": 0.5},
        )
        s.add(study)
        s.flush()
        n_gold = max(10, n_items // 20)
        s.add_all(
            Item(
                study_id=study.id,
                external_id=f"q{i}",
                is_gold=i < n_gold,
                source="gold" if i < n_gold else "dataset",
                payload={"question": f"Is {i} even?", "window": [f"A: {i}"]},
                reference={"answer": "Yes" if i % 2 == 0 else "No"},
                category=str(1 + i % 3),
                cluster=f"c{i // 4}",
                exclusion_group=f"g{i // 3}" if i % 5 == 0 else None,
                position=rng.random(),
                n_active=0,
            )
            for i in range(n_items)
        )
        s.commit()
        study_id, slug = study.id, study.slug
    from app.db import get_engine

    get_engine(url).dispose()  # no connection of ours crosses the faults
    return study_id, slug


# ------------------------------------------------------------------------------ the crowd


class Crowd:
    """Simulated workers, a thread each. Times are time.monotonic()."""

    def __init__(self, base: str, slug: str, n: int, think: float):
        self.base, self.slug, self.n, self.think = base, slug, n, think
        self.stop_at = float("inf")  # no new item after this
        self.deadline = float("inf")  # a submit in flight gives up after this
        self.acked: list = []  # (t, assignment_id, annotation_id, key)
        self.events: list = []  # (t, endpoint, what): every error a client saw
        self.refused: Counter = Counter()  # 4xx answers, by endpoint, status and detail
        self.unresolved: list = []  # submits still failing at the deadline
        self.retried: dict = {}  # annotation id -> wall time its last try began, if tried again
        self.sent: list = []  # every submit begun (its assignment id)
        self.threads: list[threading.Thread] = []

    def _request(self, client, endpoint: str, method: str, path: str, until: float, **kw):
        """(response, tries, wall-clock start of the last try), retried through connection
        errors, timeouts, 5xx and 429; the response is None when `until` passed first."""
        import httpx

        delay, tries = 0.2, 0
        while True:
            tries += 1
            started = time.time()
            try:
                r = client.request(method, path, **kw)
            except httpx.TimeoutException:
                what = "timeout"
            except httpx.TransportError:  # refused, reset, or cut off mid-response
                what = "connection"
            else:
                if r.status_code < 500 and r.status_code != 429:
                    return r, tries, started
                what = str(r.status_code)
                if r.status_code == 500:
                    self.refused[(endpoint, 500, r.text[:200])] += 1
            self.events.append((time.monotonic(), endpoint, what))
            if time.monotonic() > until:
                return None, tries, started
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(2.0, delay * 2)

    def _worker(self, i: int) -> None:
        import httpx

        wid = f"fault-w{i:03d}-{secrets.token_hex(2)}"
        rng = random.Random(wid)
        n_bundle = 0
        api = f"/api/v1/crowd/{self.slug}"
        with httpx.Client(base_url=self.base, timeout=httpx.Timeout(15.0, connect=3.0)) as c:

            def enter() -> bool:
                # One task per worker id (the studies' default cap), bound to this client's
                # browser secret (its cookie jar); then consent to the text shown.
                r, _, _ = self._request(
                    c,
                    "enter",
                    "POST",
                    f"{api}/enter",
                    self.stop_at,
                    json={
                        "params": {
                            "PROLIFIC_PID": f"{wid}-b{n_bundle}",
                            "STUDY_ID": "faults",
                            "SESSION_ID": f"{wid}-{n_bundle}",
                        }
                    },
                )
                if r is not None and r.status_code == 200:
                    r, _, _ = self._request(
                        c,
                        "consent",
                        "POST",
                        f"{api}/consent",
                        self.stop_at,
                        json={"consent_version": r.json()["consent_version"]},
                    )
                if r is not None and r.status_code != 200:
                    self.refused[(r.request.url.path.rsplit("/", 1)[-1], r.status_code, r.text[:200])] += 1
                    time.sleep(0.5)
                return r is not None and r.status_code == 200

            while time.monotonic() < self.stop_at and not enter():
                pass
            while time.monotonic() < self.stop_at:
                r, _, _ = self._request(c, "next", "GET", f"{api}/next", self.stop_at)
                if r is None:
                    break
                if r.status_code != 200:
                    self.refused[("next", r.status_code, r.text[:200])] += 1
                    time.sleep(0.5)
                    if r.status_code == 403:  # the session lost its bundle: enter again
                        enter()
                    continue
                body = r.json()
                if body.get("state") == "wait":  # every item left is leased to others: look again
                    time.sleep(min(2.0, float(body.get("retry_after", 1))))
                    continue
                if body["done"]:
                    n_bundle += 1
                    enter()
                    continue
                if self.think:
                    time.sleep(rng.uniform(0.5, 1.5) * self.think)
                a_id = body["assignment_id"]
                key = f"{wid}-{a_id}"
                payload = {
                    "assignment_id": a_id,
                    "idempotency_key": key,
                    "response": {"answer": rng.choice(["Yes", "No"])},
                }
                self.sent.append(a_id)
                # One body for every try: the server must store it once, whatever crossed.
                r, tries, last = self._request(c, "submit", "POST", f"{api}/submit", self.deadline, json=payload)
                if r is None:
                    self.unresolved.append((a_id, key))
                elif r.status_code == 200:
                    self.acked.append((time.monotonic(), a_id, r.json()["annotation"], key))
                    if tries > 1:
                        self.retried[r.json()["annotation"]] = last
                else:
                    self.refused[("submit", r.status_code, r.text[:200])] += 1

    def start(self) -> None:
        self.threads = [threading.Thread(target=self._worker, args=(i,), daemon=True) for i in range(self.n)]
        for t in self.threads:
            t.start()

    def join(self, timeout: float) -> int:
        end = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, end - time.monotonic()))
        return sum(t.is_alive() for t in self.threads)


# ------------------------------------------------------------------------------ the faults


class Fault:
    def __init__(self, name: str):
        self.name = name
        self.start = self.back = self.end = None
        self.down_seen = False  # the server was seen down (the fault happened)
        self.evidence = ""

    def window(self) -> tuple[float, float]:
        return self.start, self.end


def run_faults(
    faults: list, pg: Postgres, web: Web, redis: Redis, crowd: Crowd, down: float, lead: float, gap: float, pg_mode: str
) -> None:
    time.sleep(lead)
    for f in faults:
        f.start = time.monotonic()
        log(f"fault: {f.name}")
        if f.name.startswith("postgres"):
            pg.stop(pg_mode)
            f.down_seen = not pg.ready()
            time.sleep(down)
            pg.start()
        elif f.name.startswith("web"):
            web.kill(signal.SIGKILL)
            f.down_seen = not web.ready()
            time.sleep(down)
            web.start()
        else:
            before = web.log_count(REDIS_FALLBACK)
            redis.stop()
            f.down_seen = not redis.ready()
            time.sleep(down)
            redis.start()
        f.back = time.monotonic()
        time.sleep(SETTLE_S)
        f.end = time.monotonic()
        if f.name.startswith("redis"):
            fell_back = web.log_count(REDIS_FALLBACK) - before
            f.evidence = f"rate limiter counted in-process {fell_back} times"
            f.fell_back = fell_back
        log(f"fault: {f.name}: back after {f.back - f.start:.1f} s")
        if f is not faults[-1]:
            time.sleep(gap)


# ------------------------------------------------------------------------------ checks


def check(url: str, study_id: int, crowd: Crowd) -> dict:
    import psycopg

    acked = [(a, n) for _, a, n, _ in crowd.acked]
    ids_per_assignment: dict[int, set] = {}
    for a, n in acked:
        ids_per_assignment.setdefault(a, set()).add(n)
    with psycopg.connect(pg_conninfo(url)) as c:
        q = lambda sql, *a: c.execute(sql, a).fetchone()[0]  # noqa: E731
        stored = q("SELECT count(*) FROM annotations WHERE study_id=%s", study_id)
        two_per_assignment = q(
            "SELECT count(*) FROM (SELECT assignment_id FROM annotations WHERE study_id=%s "
            "GROUP BY 1 HAVING count(*) > 1) x",
            study_id,
        )
        key_twice = q(
            "SELECT count(*) FROM (SELECT idempotency_key FROM annotations WHERE study_id=%s "
            "GROUP BY 1 HAVING count(*) > 1) x",
            study_id,
        )
        over_cap = q(
            "SELECT count(*) FROM (SELECT item_id FROM annotations WHERE study_id=%s AND NOT is_gold "
            "GROUP BY 1 HAVING count(*) > (SELECT annotations_per_item FROM studies WHERE id=%s)) x",
            study_id,
            study_id,
        )
        rows = c.execute("SELECT id, assignment_id FROM annotations WHERE study_id=%s", (study_id,)).fetchall()
        # Stored by a try whose reply never arrived, and handed back to a later try: the
        # idempotency key at work (the web process and the client share this machine's clock).
        created = dict(
            c.execute(
                "SELECT id, extract(epoch FROM created_at) FROM annotations WHERE id = ANY(%s)", (list(crowd.retried),)
            ).fetchall()
        )
        replayed = sum(1 for n, last in crowd.retried.items() if n in created and float(created[n]) < last)
    have = {(a, n) for n, a in rows}
    lost = sum(1 for pair in set(acked) if pair not in have)
    acked_assignments = {a for a, _ in acked}
    invariants = db_checks(url, study_id, [(a, n, True) for a, n in acked])
    return {
        "acknowledged": len(acked),
        "acknowledged_distinct": len(set(acked)),
        "stored": stored,
        "lost": lost,
        "duplicated": two_per_assignment
        + key_twice
        + over_cap
        + sum(1 for ids in ids_per_assignment.values() if len(ids) > 1),
        "duplicated_detail": {
            "assignments_with_two_annotations": two_per_assignment,
            "keys_stored_twice": key_twice,
            "items_over_capacity": over_cap,
            "assignments_acknowledged_with_two_ids": sum(1 for ids in ids_per_assignment.values() if len(ids) > 1),
        },
        "stored_not_acknowledged": sum(1 for _, a in rows if a not in acked_assignments),
        "acknowledged_after_retries": len(crowd.retried),
        "replayed": replayed,
        "invariants": invariants,
    }


def summarise(crowd: Crowd, faults: list, t0: float, t1: float) -> dict:
    out = {}
    inside = set()
    for f in faults:
        start, end = f.window()
        events = [e for e in crowd.events if start <= e[0] <= end]
        inside.update(id(e) for e in events)
        acks = sum(1 for t, *_ in crowd.acked if start <= t <= end)
        out[f.name] = {
            "seconds": end - start,
            "back_after_s": f.back - f.start,
            "down_seen": f.down_seen,
            "errors": dict(Counter(what for _, _, what in events)),
            "errors_by_endpoint": dict(Counter(f"{ep} {what}" for _, ep, what in events)),
            "acked_per_s": acks / max(1e-9, end - start),
            "evidence": f.evidence,
            **({"rate_limiter_fell_back": f.fell_back} if hasattr(f, "fell_back") else {}),
        }
    rest = [e for e in crowd.events if id(e) not in inside]
    outside_s = (t1 - t0) - sum(f.end - f.start for f in faults)
    outside_acks = sum(1 for t, *_ in crowd.acked if not any(f.start <= t <= f.end for f in faults) and t <= t1)
    out["outside the faults"] = {
        "seconds": outside_s,
        "errors": dict(Counter(w for _, _, w in rest)),
        "acked_per_s": outside_acks / max(1e-9, outside_s),
    }
    return out


def show(args, figures: dict) -> None:
    r = figures["result"]
    print(
        f"\nfault run: {args.workers} workers, {figures['run_s']:.0f} s, a live study of {args.items} items "
        f"x {args.cap}; web: uvicorn with {args.web_workers} processes; PostgreSQL stop -m {args.pg_mode}"
    )
    rows = [
        ("answers acknowledged (2xx)", r["acknowledged"]),
        ("stored in the database", r["stored"]),
        ("lost (acknowledged, not stored)", r["lost"]),
        ("duplicated", r["duplicated"]),
        ("stored, never acknowledged", r["stored_not_acknowledged"]),
        ("submits unresolved at the end", figures["unresolved"]),
        ("acknowledged after a retry", r["acknowledged_after_retries"]),
        ("  of which stored by an earlier try", r["replayed"]),
    ]
    for label, v in rows:
        print(f"  {label:34s} {v:7d}")
    print(
        f"  throughput: {figures['acked_per_s']:.1f} answers acknowledged/s over the run "
        f"({figures['submits']} submits sent)"
    )
    print(f"\n  {'window':34s} {'length':>7s} {'back':>7s}  {'acked/s':>7s}  errors clients saw")
    for name, w in figures["windows"].items():
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(w["errors"].items())) or "none"
        back = f"{w['back_after_s']:5.1f} s" if "back_after_s" in w else "      -"
        print(
            f"  {name:34s} {w['seconds']:5.1f} s {back}  {w['acked_per_s']:7.1f}  {errors}"
            + (f"; {w['evidence']}" if w.get("evidence") else "")
        )
    if figures["refused"]:
        print("\n  refused (4xx) or failed (500) answers:")
        for k, v in figures["refused"].items():
            print(f"    {v:5d} x {k}")
    inv = r["invariants"]
    print("\n  from the database: " + ", ".join(f"{k}={v}" for k, v in inv.items()))
    print("  duplicated, by kind: " + ", ".join(f"{k}={v}" for k, v in r["duplicated_detail"].items()))


INVARIANTS = (
    "double_assignments",
    "two_in_one_group",
    "items_over_capacity",
    "n_active_drift",
    "completed_without_annotation",
    "bundle_count_drift",
    "lost_writes",
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=16, help="simulated crowd workers (threads)")
    ap.add_argument("--seconds", type=float, default=60, help="the run's length at least (the faults fit in it)")
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--cap", type=int, default=3, help="annotations_per_item")
    ap.add_argument("--down", type=float, default=3, help="seconds each server stays down")
    ap.add_argument("--think", type=float, default=0.1, help="mean seconds a worker looks at an item")
    ap.add_argument("--grace", type=float, default=60, help="seconds a submit in flight keeps trying after the end")
    ap.add_argument("--web-workers", type=int, default=2)
    ap.add_argument(
        "--pg-mode",
        choices=("fast", "immediate"),
        default="fast",
        help="pg_ctl stop mode: fast (clean) or immediate (a crash: recovery from WAL)",
    )
    ap.add_argument("--faults", default="postgres,web,redis", help="which, in order (comma-separated)")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the servers' folder (logs) afterwards")
    args = ap.parse_args(argv)

    pg_bin, redis_bin, why = find_binaries()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    names = {
        "postgres": f"postgres stop -m {args.pg_mode}/start",
        "web": "web kill -9/restart",
        "redis": "redis stop/start",
    }
    faults = [Fault(names[n.strip()]) for n in args.faults.split(",") if n.strip()]
    folder = Path(tempfile.mkdtemp(prefix="proctor-faults-"))
    folder.chmod(0o755)  # the postgres user must reach its own folder inside
    for sub in ("pg", "redis", "blobs"):
        (folder / sub).mkdir()
    pg = redis = web = None
    code = 2
    try:
        pg = Postgres(pg_bin, folder / "pg")
        pg.start()
        pg.create_database()
        redis = Redis(redis_bin, folder / "redis")
        redis.start()
        secret = secrets.token_urlsafe(48)
        env = {
            **os.environ,
            "DATABASE_URL": pg.url,
            "REDIS_URL": redis.url,
            "SECRET_KEY": secret,
            "STORAGE_URL": f"file://{folder / 'blobs'}",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            # High enough never to refuse (every worker is 127.0.0.1), so every entry and
            # submit still goes through the limiter's counter in Redis.
            "RATE_LIMIT_ENTRY": "100000",
            "RATE_LIMIT_SUBMIT": "100000",
        }
        log(f"PostgreSQL on port {pg.port}, Redis on {redis.port}; migrating")
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "migrate"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        if done.returncode:
            raise RuntimeError(f"proctor migrate failed: {done.stderr[-2000:]}")
        os.environ.update(SECRET_KEY=secret, DATABASE_URL=pg.url)
        study_id, slug = make_study(pg.url, args.items, args.cap)
        web = Web(env, args.web_workers, folder / "web.log")
        web.start()
        log(
            f"web on {web.base}; study {slug}: {args.workers} workers for {args.seconds:.0f} s "
            f"with faults: {', '.join(f.name for f in faults)}"
        )

        crowd = Crowd(web.base, slug, args.workers, args.think)
        lead = max(3.0, args.seconds / 6)
        gap = max(2.0, args.seconds / 6)
        t0 = time.monotonic()
        crowd.start()
        failure: list = []

        def faulting():
            try:
                run_faults(faults, pg, web, redis, crowd, args.down, lead, gap, args.pg_mode)
            except Exception as exc:  # noqa: BLE001 - the run failed; said below
                failure.append(exc)

        injector = threading.Thread(target=faulting, daemon=True)
        injector.start()
        injector.join(args.seconds + 600)
        remaining = args.seconds - (time.monotonic() - t0)
        if remaining > 0:
            time.sleep(remaining)
        t1 = time.monotonic()
        crowd.stop_at, crowd.deadline = t1, t1 + args.grace
        alive = crowd.join(args.grace + 30)
        log(f"the crowd stopped ({alive} threads still running)")
        if failure or injector.is_alive():
            raise RuntimeError(f"a fault did not complete: {failure[0] if failure else 'still running'}")
        web.kill(signal.SIGTERM)
        web = None

        result = check(pg.url, study_id, crowd)
        figures = {
            "args": vars(args),
            "run_s": t1 - t0,
            "submits": len(crowd.sent),
            "acked_per_s": sum(1 for t, *_ in crowd.acked if t <= t1) / (t1 - t0),
            "unresolved": len(crowd.unresolved),
            "result": result,
            "windows": summarise(crowd, faults, t0, t1),
            "refused": {f"{ep} {status}: {detail}": n for (ep, status, detail), n in crowd.refused.items()},
        }
        show(args, figures)
        broken = [k for k in INVARIANTS if result["invariants"].get(k)]
        if args.json:
            Path(args.json).write_text(json.dumps({**figures, "broken_invariants": broken}, indent=1))
        if result["acknowledged"] == 0:
            print("\nFAILED: no answer was acknowledged at all")
            code = 2
        elif result["lost"] or result["duplicated"] or broken:
            print(
                f"\nFAILED: lost {result['lost']}, duplicated {result['duplicated']}"
                + (f", invariants broken: {', '.join(broken)}" if broken else "")
            )
            code = 1
        else:
            print("\nOK: nothing acknowledged was lost, nothing was stored twice")
            code = 0
    except Exception as exc:  # noqa: BLE001
        print(f"\nthe run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 2
    finally:
        if web is not None:
            web.kill(signal.SIGKILL)
        if redis is not None:
            redis.stop()
        if pg is not None:
            pg.stop("immediate")
        if args.keep or code == 2:
            print(f"servers' folder kept: {folder} (web.log, pg/server.log, redis/redis.log)")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())

"""Crowd benchmark: many simulated workers doing entry -> next item -> submit on PostgreSQL.

Prints figures; asserts nothing about time. See bench/README.md and docs/benchmarks.md.

    .venv/bin/python bench/crowd.py --quick            # small sizes, under a minute
    .venv/bin/python bench/crowd.py                    # 100k items, 1M stored annotations

Steps:
1. a fresh database (created on 127.0.0.1 and dropped at the end, unless --database-url; or
   on a throwaway PostgreSQL cluster with --own-server);
2. seed one live study: items, past workers with participants, bundles, completed
   assignments and their annotations, all consistent (n_active = completed per item), by COPY;
3. the leaderboard over all stored annotations, median of 3: app.leaderboards.service.compute
   (from the running totals) and recompute_from_annotations (the scan it replaced);
4. for each mode (service: the engine's functions called in-process, one Session per call as
   the API does; http: the real app under uvicorn with --workers, clients over httpx
   keep-alive), a saturation run (no think time: the most the machine does) and a paced run
   (each worker waits so that the crowd offers --rate annotations/s: latency at that load);
   the CPU each component used per annotation is measured from /proc over the same window;
5. from the database afterwards: double assignments, items over capacity, lost writes
   (a submit that returned success with no stored annotation), n_active drift.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import math
import multiprocessing as mp
import os
import random
import resource
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ADMIN_URL = os.environ.get("PROCTOR_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
CAP = 12  # annotations per item: the seeded ~9 per item leave room for the runs
BUNDLE = 10
GOLD_RATE = 0.1
PER_PAST_WORKER = 100


# ------------------------------------------------------------------------------ helpers


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pg_conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def pct(values, q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def create_database(admin_url: str) -> str:
    import psycopg

    name = f"proctor_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(pg_conninfo(admin_url), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    return admin_url.rsplit("/", 1)[0] + "/" + name


def drop_database(admin_url: str, url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(pg_conninfo(admin_url), autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class OwnServer:
    """A throwaway PostgreSQL cluster (same version and defaults as the system one, but
    max_connections=300), so the run neither competes for nor starves the shared server's 100
    connections. Needs the server binaries and the `postgres` OS user; removed afterwards."""

    def __init__(self, max_connections: int = 300):
        import glob
        import shutil

        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not bins:
            raise SystemExit("--own-server: no /usr/lib/postgresql/*/bin/initdb here")
        self.bin = Path(bins[-1]).parent
        self.dir = Path(tempfile.mkdtemp(prefix="proctor-bench-pg-"))
        shutil.chown(self.dir, "postgres", "postgres")
        self.port = free_port()
        self.as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(
            self.as_pg
            + [
                str(self.bin / "initdb"),
                "-D",
                str(self.dir / "data"),
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
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections={max_connections}"
        subprocess.run(
            self.as_pg
            + [
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.dir / "data"),
                "-o",
                opts,
                "-l",
                str(self.dir / "server.log"),
                "-w",
                "start",
            ],
            check=True,
            capture_output=True,
        )
        self.admin_url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def settings(self) -> str:
        import psycopg

        names = ("server_version", "max_connections", "shared_buffers", "work_mem", "synchronous_commit", "fsync")
        with psycopg.connect(pg_conninfo(self.admin_url)) as c:
            return ", ".join(f"{n}={c.execute(f'SHOW {n}').fetchone()[0]}" for n in names)

    def stop(self) -> None:
        import shutil

        subprocess.run(
            self.as_pg + [str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop"],
            capture_output=True,
        )
        shutil.rmtree(self.dir, ignore_errors=True)


def _esc(value: str) -> str:
    """COPY text format: backslash, tab and newline are special."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


# ------------------------------------------------------------------------------ seeding


def seed(url: str, n_items: int, n_annotations: int, secret: str) -> dict:
    """One live `tom` study with n_items items and n_annotations stored annotations."""
    import psycopg

    t0 = time.perf_counter()
    rng = random.Random(1)
    now = datetime.now(timezone.utc)
    base = now - timedelta(days=30)
    ts = lambda sec: (base + timedelta(seconds=sec)).isoformat()  # noqa: E731

    n_gold = max(BUNDLE, n_items // 200)
    n_plain = n_items - n_gold
    grouped_cut = int(n_plain * 0.3) // 3 * 3  # 30% of items in exclusion groups of 3
    group_of = lambda i: f"g{i // 3}" if i < grouped_cut else None  # noqa: E731
    n_past = math.ceil(n_annotations / PER_PAST_WORKER)

    # Item ids: plain items 1..n_plain, gold n_plain+1..n_items.
    answer = ["Yes" if rng.random() < 0.55 else "No" for _ in range(n_items)]
    n_active = [0] * n_items
    assignments, annotations, bundles = [], [], []
    a_id = 0
    stride = max(1, n_past)
    for w in range(n_past):
        uid = w + 2  # user 1 is the owner
        seen_items, seen_groups = set(), set()
        j = 0
        for b in range(BUNDLE):
            bundle_id = w * BUNDLE + b + 1
            gold_slot = (w + b) % BUNDLE
            bundles.append((bundle_id, w + 1, uid, f"past-{w}-{b}", gold_slot))
            for slot in range(BUNDLE):
                if a_id >= n_annotations:
                    break
                if slot == gold_slot:
                    idx = n_plain + (w * 7 + b) % n_gold
                    while idx in seen_items:
                        idx = n_plain + (idx - n_plain + 1) % n_gold
                else:
                    idx = (w + j * stride) % n_plain
                    j += 1
                    while idx in seen_items or (group_of(idx) and group_of(idx) in seen_groups):
                        idx = (idx + 1) % n_plain
                    if group_of(idx):
                        seen_groups.add(group_of(idx))
                    n_active[idx] += 1
                seen_items.add(idx)
                a_id += 1
                start = w * 3600 + b * 300 + slot * 25
                ans = answer[idx] if rng.random() < 0.75 else ("No" if answer[idx] == "Yes" else "Yes")
                assignments.append((a_id, idx, uid, bundle_id, slot, start))
                annotations.append((a_id, idx, uid, ans, 1.0 if ans == answer[idx] else 0.0, start))
    if max(n_active) > CAP:
        raise SystemExit(f"{n_annotations} annotations over {n_items} items exceed {CAP} per item: use more items")
    log(f"seed: generated {a_id} annotations by {n_past} past workers in {time.perf_counter() - t0:.1f} s")

    with psycopg.connect(pg_conninfo(url), autocommit=False) as conn:
        cur = conn.cursor()
        try:
            cur.execute("SET session_replication_role = replica")  # rows are consistent by construction
        except psycopg.Error:
            conn.rollback()
        created = now.isoformat()
        cur.execute(
            "INSERT INTO users (id, role, email, name, created_at) VALUES "
            "(1, 'researcher', 'bench@example.org', 'bench', %s)",
            (created,),
        )
        slug = f"bench-{secrets.token_hex(3)}"
        cur.execute(
            "INSERT INTO studies (id, slug, title, kind, owner_id, state, annotations_per_item, "
            "bundle_size, gold_rate, lease_seconds, completion_code, redirect_url, consent_text, "
            "instructions, payment, kind_settings, created_at, max_bundles_per_worker, "
            "max_open_bundles_per_ip, answer_field) VALUES (1, %s, 'Bench', 'tom', 1, "
            "'live', %s, %s, %s, 900, 'BENCH', '', '', '', '', %s, %s, 1, 1000000, 'answer')",
            (slug, CAP, BUNDLE, GOLD_RATE, json.dumps({"random_yes_rate": 0.55}), created),
        )

        def copy(table: str, cols: str, lines) -> None:
            t = time.perf_counter()
            n = 0
            with cur.copy(f"COPY {table} ({cols}) FROM STDIN") as cp:
                buf = []
                for line in lines:
                    buf.append(line)
                    n += 1
                    if len(buf) >= 20000:
                        cp.write("".join(buf))
                        buf.clear()
                if buf:
                    cp.write("".join(buf))
            log(f"seed: COPY {table}: {n} rows in {time.perf_counter() - t:.1f} s")

        window = [
            "A: So, are we still doing the coast this weekend?",
            "B: I think so. I looked at the train times last night.",
            "A: Is there one early on Saturday?",
            "B: There's one at seven, but I'm not sure it runs at weekends. \U0001f6d1",
        ]

        def item_lines():
            for i in range(n_items):
                gold = i >= n_plain
                payload = json.dumps(
                    {
                        "question": f"At the time indicated by \U0001f6d1, is it the case "
                        f"that A believes a train leaves at seven ({i})?",
                        "window": window,
                    },
                    ensure_ascii=False,
                )
                g = group_of(i) if not gold else None
                yield (
                    "\t".join(
                        [
                            str(i + 1),
                            "1",
                            f"q{i}",
                            _esc(payload),
                            json.dumps({"answer": answer[i]}),
                            "t" if gold else "f",
                            "gold" if gold else "dataset",
                            str(1 + i % 3),
                            f"c{i // 4}",
                            g if g else "\\N",
                            repr(rng.random()),
                            str(0 if gold else n_active[i]),
                        ]
                    )
                    + "\n"
                )

        copy(
            "items",
            "id, study_id, external_id, payload, reference, is_gold, source, category, "
            "cluster, exclusion_group, position, n_active",
            item_lines(),
        )

        def user_lines():
            for w in range(n_past):
                ext = f"PAST{w:07d}"
                digest = hmac.new(secret.encode(), f"prolific:{ext}".encode(), hashlib.sha256).hexdigest()
                yield f"{w + 2}\tworker\t\\N\t\tprolific\t{ext}\tw-{digest[:16]}\t{created}\n"

        copy("users", "id, role, email, name, platform, external_id, pseudonym, created_at", user_lines())
        copy(
            "participants",
            "id, study_id, worker_id, status, reason, created_at",
            (f"{w + 1}\t1\t{w + 2}\tpending\t\t{created}\n" for w in range(n_past)),
        )
        copy(
            "bundles",
            "id, study_id, participant_id, worker_id, external_assignment_id, hit_id, "
            "size, gold_slots, n_done, consented_at, finished_at, created_at",
            (
                f"{bid}\t1\t{pid}\t{uid}\t{ext}\t\t{BUNDLE}\t[{gs}]\t{BUNDLE}\t{created}\t{created}\t{created}\n"
                for bid, pid, uid, ext, gs in bundles
            ),
        )
        gold_from = n_plain

        def assignment_lines():
            for aid, idx, uid, bid, slot, start in assignments:
                g = group_of(idx) if idx < gold_from else None
                yield (
                    f"{aid}\t1\t{idx + 1}\t{uid}\t{bid}\t{g or chr(92) + 'N'}\t{slot}\t"
                    f"{'t' if idx >= gold_from else 'f'}\tcompleted\t{ts(start)}\t{ts(start + 900)}\t"
                    f"{ts(start + 20)}\n"
                )

        copy(
            "assignments",
            "id, study_id, item_id, worker_id, bundle_id, exclusion_group, slot, "
            "is_gold, state, leased_at, lease_expires_at, completed_at",
            assignment_lines(),
        )

        def annotation_lines():
            for aid, idx, uid, ans, score, start in annotations:
                yield (
                    f"{aid}\t{aid}\t1\t{idx + 1}\t{uid}\t{'t' if idx >= gold_from else 'f'}\t"
                    f'{{"answer": "{ans}"}}\t{score}\t20000\t{{}}\tpast-{aid}\tf\t{ts(start + 20)}\n'
                )

        copy(
            "annotations",
            "id, assignment_id, study_id, item_id, worker_id, is_gold, response, "
            "score, duration_ms, client, idempotency_key, excluded, created_at",
            annotation_lines(),
        )
        for table in ("users", "studies", "items", "participants", "bundles", "assignments", "annotations"):
            cur.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT coalesce(max(id), 1) FROM {table}))"
            )
        conn.commit()
    # COPY under session_replication_role = replica fired no triggers: count the leaderboard
    # totals (app/leaderboards/models.py) once, as migration 0011 does for stored annotations.
    from sqlalchemy import create_engine

    from app.leaderboards.totals import rebuild

    t = time.perf_counter()
    eng = create_engine(url)
    with eng.begin() as c:
        rebuild(c, 1)
    eng.dispose()
    log(f"seed: leaderboard totals counted in {time.perf_counter() - t:.1f} s")
    with psycopg.connect(pg_conninfo(url), autocommit=True) as conn:
        t = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        log(f"seed: VACUUM ANALYZE in {time.perf_counter() - t:.1f} s")
    log(f"seed: done in {time.perf_counter() - t0:.1f} s")
    return {
        "study_id": 1,
        "slug": slug,
        "items": n_items,
        "gold": n_gold,
        "annotations": a_id,
        "past_workers": n_past,
        "seed_s": time.perf_counter() - t0,
    }


# ------------------------------------------------------------------------------ leaderboard


def time_leaderboard(url: str, study_id: int, repeats: int = 3) -> dict:
    """The page's leaderboard (compute with the page's annotators), the whole board (compute,
    every annotator: the export's and the API's default) and, for the before figure, the same
    counted from the annotations (recompute_from_annotations); median of `repeats` each, with
    the CPU of this process and of its PostgreSQL backend (from /proc, where it is local)."""
    from sqlalchemy import text

    from app.db import get_sessionmaker
    from app.leaderboards.service import compute, recompute_from_annotations
    from app.studies.models import Study
    from app.studies.views import ANNOTATORS_ON_PAGE

    out = {}
    with get_sessionmaker(url)() as s:
        study = s.get(Study, study_id)
        backend = s.execute(text("SELECT pg_backend_pid()")).scalar_one()
        s.rollback()
        runs = (
            ("page", lambda s, st: compute(s, st, annotators=(0, ANNOTATORS_ON_PAGE))),
            ("totals", compute),
            ("scan", recompute_from_annotations),
        )
        for name, fn in runs:
            times, py, pg = [], [], []
            for _ in range(repeats):
                c0, b0, t = time.process_time(), cpu_s(backend), time.perf_counter()
                board = fn(s, study)
                s.rollback()
                times.append(time.perf_counter() - t)
                py.append(time.process_time() - c0)
                pg.append(cpu_s(backend) - b0)
            out[name] = {
                "median_s": statistics.median(times),
                "runs_s": times,
                "rows": len(board["rows"]),
                "python_cpu_s": py,
                "pg_cpu_s": pg,
                "load": os.getloadavg()[0],
            }
    return {**out["totals"], "page": out["page"], "scan": out["scan"]}


# ------------------------------------------------------------------------------ the crowd


class Pacer:
    """Per worker: the k-th annotation is due at start + k * interval (open-loop-ish)."""

    def __init__(self, interval: float, start: float, rng: random.Random):
        self.interval = interval
        self.first = self.next = start + rng.uniform(0, interval)  # a paced crowd arrives spread out

    def wait_time(self) -> float:
        if self.interval <= 0:
            return 0.0
        delay = self.next - time.monotonic()
        self.next = max(self.next + self.interval, time.monotonic() - self.interval)
        return max(0.0, delay)


class StartGate:
    """Children get ready (imports, clients), then all start at one time the parent sets."""

    def __init__(self, ctx, n: int):
        self.ready, self.go, self.times, self.n = ctx.Queue(), ctx.Event(), ctx.Array("d", 3), n

    def wait(self) -> tuple[float, float, float]:  # in a child
        self.ready.put(os.getpid())
        self.go.wait()
        return tuple(self.times[:])

    def open(self, warmup: float, duration: float, timeout: float = 120) -> tuple[float, float, float]:
        for _ in range(self.n):
            self.ready.get(timeout=timeout)
        start = time.monotonic() + 0.3
        self.times[:] = [start, start + warmup, start + warmup + duration]
        self.go.set()
        return tuple(self.times[:])


def _service_process(url: str, slug: str, worker_ids: list, gate: StartGate, interval: float, out) -> None:
    """One OS process of simulated workers: a thread each, calling the engine in-process the
    way the API does (a Session per call, the study looked up by slug)."""
    os.environ["DATABASE_URL"] = url
    from sqlalchemy import select

    from app.db import get_engine, get_sessionmaker
    from app.studies import assignment, services
    from app.studies.models import Bundle, Item, Study

    get_engine.cache_clear()
    get_sessionmaker.cache_clear()
    sm = get_sessionmaker(url)
    from sqlalchemy import event

    statements = [0]
    start_at = measure_from = stop_at = float("inf")

    @event.listens_for(get_engine(url), "before_cursor_execute")
    def _count(*_a):
        if measure_from <= time.monotonic() <= stop_at:
            statements[0] += 1

    lat = {"enter": [], "consent": [], "next": [], "submit": []}
    stored: list = []
    errors: Counter = Counter()
    from app.studies import hotpath

    fast = hotpath.enabled(url)

    def timed(name, fn):
        t = time.monotonic()
        try:
            return fn()
        finally:
            if t >= measure_from and time.monotonic() <= stop_at:
                lat[name].append((time.monotonic() - t) * 1000)

    def call(fn):
        with sm() as s:
            study = s.scalar(select(Study).where(Study.slug == slug))
            return fn(s, study)

    def worker(wid: str) -> None:
        rng = random.Random(wid)
        pacer = Pacer(interval, start_at, rng)
        n_bundle = 0
        while time.monotonic() < pacer.first:
            time.sleep(0.01)

        # As a browser of its own at an address of its own (the caps per address are not what
        # is measured here).
        browser = assignment.browser_hash(f"bench-browser-{wid}")
        address = assignment.address_pseudonym(f"bench/{wid}")

        def enter() -> int:
            """As the API's enter and consent: one statement each in the common case."""
            # One task per person (the study's default): each task is a new worker id.
            ext, session_id = f"{wid}-b{n_bundle}", f"{wid}-s{n_bundle}"

            def entered():
                info = hotpath.study(url, slug) if fast else None
                got = info and hotpath.enter(url, info, "prolific", ext, session_id, "bench", browser, address)
                return (
                    got.bundle_id
                    if got
                    else call(
                        lambda s, st: (
                            assignment.enter(
                                s, st, "prolific", ext, session_id, "bench", browser=browser, address=address
                            ).id
                        )
                    )
                )

            bundle_id = timed("enter", entered)

            def consented():
                info = hotpath.study(url, slug) if fast else None
                if not (info and hotpath.consent(url, info, bundle_id, info.consent_version, browser)):
                    call(lambda s, st: assignment.consent(s, st, bundle_id, services.consent_version(st)))

            timed("consent", consented)
            return bundle_id

        def engine_next(s, st):
            b = s.get(Bundle, bundle_id)
            if b.finished_at is not None:
                return None
            a = assignment.next_item(s, st, bundle_id)
            if a is None:
                assignment.finish_early(s, bundle_id)
                return None
            s.get(Item, a.item_id)  # the API loads the item to show it
            return a.id

        def next_id():
            """As the API's next: one statement in the common case, else the engine."""
            if fast:
                conf = hotpath.study(url, slug)
                lease = hotpath.next_lease(url, conf, bundle_id, browser) if conf else None
                if lease is not None:
                    return lease.assignment_id
            return call(engine_next)

        def submit(a_id, key, response):
            """As the API's submit: store, then the next item in the same call."""
            ann = None
            if fast:
                conf = hotpath.study(url, slug)
                got = conf and hotpath.submit(
                    url, conf, bundle_id, a_id, response, key, {"user_agent": "bench"}, browser
                )
                if got:
                    if got.ended:  # the API answers the end from the answer's statement
                        return got.annotation_id, None
                    ann = got.annotation_id
            if ann is None:
                ann = call(
                    lambda s, st: assignment.submit(s, st, bundle_id, a_id, response, key, {"user_agent": "bench"}).id
                )
            try:
                return ann, next_id()
            except assignment.NotAvailable:
                return ann, None

        try:
            bundle_id = enter()
            a_id = timed("next", next_id)
            while time.monotonic() < stop_at:
                if a_id is None:
                    n_bundle += 1
                    bundle_id = enter()
                    a_id = timed("next", next_id)
                    continue
                time.sleep(pacer.wait_time())
                key = f"{wid}-{a_id}"
                try:
                    ann_id, following = timed(
                        "submit", lambda: submit(a_id, key, {"answer": rng.choice(["Yes", "No"])})
                    )
                    stored.append((a_id, ann_id, time.monotonic() >= measure_from and time.monotonic() <= stop_at))
                    a_id = following
                except assignment.NotAvailable as exc:
                    errors[f"submit refused: {exc}"] += 1
                    a_id = timed("next", next_id)
        except Exception as exc:  # noqa: BLE001 - counted and printed
            errors[f"{type(exc).__name__}: {str(exc)[:160]}"] += 1

    # As a web process does at start (create_app): the kinds' imports (torch, minigrid) take
    # seconds, which the first answers would otherwise wait out inside a short window.
    from app.kinds import all_kinds

    all_kinds()
    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in worker_ids]
    start_at, measure_from, stop_at = gate.wait()
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(1.0, stop_at - time.monotonic() + 60))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out.put(
        {
            "lat": lat,
            "stored": stored,
            "errors": dict(errors),
            "cpu_s": ru.ru_utime + ru.ru_stime,
            "maxrss_mb": ru.ru_maxrss / 1024,
            "alive": sum(t.is_alive() for t in threads),
            "statements": statements[0],
            "hot": dict(hotpath.stats),
        }
    )


def run_service(
    url: str, slug: str, n_workers: int, procs: int, duration: float, warmup: float, interval: float, tag: str
) -> dict:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    gate = StartGate(ctx, procs)
    ids = [f"{tag}-w{i:04d}" for i in range(n_workers)]
    ps = [
        ctx.Process(target=_service_process, args=(url, slug, ids[p::procs], gate, interval, out)) for p in range(procs)
    ]
    rt_dir = tempfile.mkdtemp(prefix="proctor-bench-rt-")
    saved = dict(os.environ)
    os.environ.update(roundtrip_env(rt_dir))  # the spawned interpreters count their round trips
    try:
        for p in ps:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    meter = CpuMeter(url, {"simulated workers (app code in-process)": lambda: [p.pid for p in ps]}, rt_dir)
    start_at, measure_from, stop_at = gate.open(warmup + interval, duration)
    wait_until(measure_from)
    a = meter.snap()
    wait_until(stop_at)
    b = meter.snap()
    results = [out.get(timeout=duration + warmup + 180) for _ in ps]
    for p in ps:
        p.join(30)
    merged = _merge(results, duration, measure_from, stop_at)
    merged["cpu"] = CpuMeter.diff(a, b)
    import shutil

    shutil.rmtree(rt_dir, ignore_errors=True)
    return merged


def _merge(results: list, duration: float, measure_from: float, stop_at: float) -> dict:
    lat = {k: [] for k in ("enter", "consent", "next", "submit")}
    stored, errors = [], Counter()
    for r in results:
        for k, v in r["lat"].items():
            lat[k].extend(v)
        stored.extend(r["stored"])
        errors.update(r["errors"])
    in_window = sum(1 for *_, inside in stored if inside)
    return {
        "throughput": in_window / duration,
        "stored_total": len(stored),
        "stored_window": in_window,
        "latency_ms": {
            k: {"n": len(v), "p50": pct(v, 50), "p99": pct(v, 99), "max": max(v, default=float("nan"))}
            for k, v in lat.items()
        },
        "errors": dict(errors),
        "stored": stored,
        "client_cpu_s": sum(r.get("cpu_s", 0) for r in results),
        "statements_per_annotation": (
            sum(r.get("statements", 0) for r in results) / in_window
            if in_window and any("statements" in r for r in results)
            else None
        ),
        "alive_threads": sum(r.get("alive", 0) for r in results),
        "submits_with_next": sum(r.get("with_next", 0) for r in results),
        "hot_path": dict(sum((Counter(r.get("hot", {})) for r in results), Counter())),
    }


# ---- HTTP mode: the real app under uvicorn, clients with httpx keep-alive


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_web(url: str, port: int, web_workers: int, secret: str, storage: str, rt_dir: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": "",
        "SECRET_KEY": secret,
        "STORAGE_URL": f"file://{storage}",
        "RATE_LIMIT_ENTRY": "0",
        "RATE_LIMIT_SUBMIT": "0",
        **roundtrip_env(rt_dir),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "app.main:create_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(web_workers),
            "--no-access-log",
            "--log-level",
            "warning",
            "--no-proxy-headers",
        ],  # as `proctor serve`: the app alone reads X-Forwarded-For
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the web app did not start")


def process_tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def pg_backends(dbname: str) -> tuple[list[int], list[int]]:
    """PostgreSQL processes: backends serving `dbname`, and the server's own (WAL writer...)."""
    ours, aux = [], []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if not cmd.startswith("postgres: "):
            continue
        if f" {dbname} " in cmd:
            ours.append(int(d))
        elif "127.0.0.1(" not in cmd and "[local]" not in cmd:
            aux.append(int(d))
    return ours, aux


def pg_server_cpu(dbname: str) -> dict:
    """CPU of the PostgreSQL server that serves `dbname`: the postmaster, what it reaped from
    backends that exited (pooled connections come and go) and its live children. On a shared
    server this includes other databases' backends too."""
    ours, _ = pg_backends(dbname)
    if not ours:
        return {}
    with open(f"/proc/{ours[0]}/stat") as f:
        pm = int(f.read().rsplit(")", 1)[1].split()[1])
    with open(f"/proc/{pm}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    hz = os.sysconf("SC_CLK_TCK")
    res = {pm: sum(int(x) for x in fields[11:15]) / hz}  # utime stime cutime cstime
    for p in process_tree(pm):
        if p != pm:
            res[p] = cpu_s(p)
    return res


def pg_sessions(url: str) -> int:
    """Connections ever opened to this database (pg_stat_database.sessions, PostgreSQL 14+)."""
    import psycopg

    with psycopg.connect(pg_conninfo(url)) as c:
        c.execute("SELECT pg_stat_clear_snapshot()")
        return c.execute(
            "SELECT coalesce(sessions, 0) FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]


RT_DIR = ROOT / "bench" / "roundtrips"


def roundtrip_env(folder: str) -> dict:
    """What a measured process needs to count its PostgreSQL round trips at the driver
    (bench/roundtrips/sitecustomize.py)."""
    path = os.pathsep.join(x for x in (str(RT_DIR), str(ROOT), os.environ.get("PYTHONPATH", "")) if x)
    return {"PYTHONPATH": path, "PROCTOR_BENCH_ROUNDTRIPS": folder}


def roundtrips(folder: str | None) -> int:
    total = 0
    for name in os.listdir(folder) if folder else ():
        try:
            with open(os.path.join(folder, name), "rb") as f:
                total += int.from_bytes(f.read(8), "little", signed=True)
        except OSError:
            pass
    return total


def machine_jiffies() -> tuple[int, int]:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v[:8]) - idle, sum(v[:8])


class CpuMeter:
    """CPU seconds by component over the measured window, and what the rest of the machine used."""

    def __init__(self, url: str, groups: dict, rt_dir: str | None = None):
        self.url, self.dbname, self.groups = url, url.rsplit("/", 1)[1], groups  # name -> pids()
        self.rt_dir = rt_dir
        self.pg_label = "postgres (the whole server)"

    def snap(self) -> dict:
        out = {name: {p: cpu_s(p) for p in fn()} for name, fn in self.groups.items()}
        out[self.pg_label] = pg_server_cpu(self.dbname)
        busy, total = machine_jiffies()
        return {
            "pids": out,
            "busy": busy,
            "total": total,
            "t": time.monotonic(),
            "sessions": pg_sessions(self.url),
            "roundtrips": roundtrips(self.rt_dir),
            "load": os.getloadavg(),
        }

    @staticmethod
    def diff(a: dict, b: dict) -> dict:
        hz = os.sysconf("SC_CLK_TCK")
        res = {}
        for name, now in b["pids"].items():
            before = a["pids"].get(name, {})
            res[name] = sum(v - before.get(p, 0.0) for p, v in now.items())
        wall = b["t"] - a["t"]
        res["machine busy"] = (b["busy"] - a["busy"]) / hz
        res["machine capacity"] = (b["total"] - a["total"]) / hz
        res["everything else"] = res["machine busy"] - sum(
            v for k, v in res.items() if k not in ("machine busy", "machine capacity")
        )
        res["wall"] = wall
        res["pg_connections_opened"] = b["sessions"] - a["sessions"] - 1
        res["pg_round_trips"] = b["roundtrips"] - a["roundtrips"]
        res["load_average"] = b["load"]
        return res


def wait_until(t: float) -> None:
    while (d := t - time.monotonic()) > 0:
        time.sleep(min(d, 0.5))


class RssSampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.stop, self.peak = pid, threading.Event(), {}

        self.helpers: set[int] = set()

    def run(self) -> None:
        while not self.stop.is_set():
            for p in process_tree(self.pid):
                self.peak[p] = max(self.peak.get(p, 0.0), rss_mb(p))
                if p not in self.helpers:
                    try:
                        with open(f"/proc/{p}/cmdline", "rb") as f:
                            if b"resource_tracker" in f.read():
                                self.helpers.add(p)
                    except OSError:
                        pass
            self.stop.wait(0.5)


class LeanClient:
    """One simulated browser over one kept-alive HTTP/1.1 connection: requests written as bytes,
    answers read by their Content-Length, cookies kept by name. The load generator shares the
    2 cores with the server; httpx costs it 3-4 ms of CPU per annotation, this 0.2-0.3 ms
    (`--client httpx` runs the other, for comparison). Only what the crowd API needs: no TLS,
    no redirects, no chunked answers (uvicorn sends JSON with a Content-Length)."""

    class Error(OSError):
        """The connection broke or answered what this client cannot read: retried like
        httpx's TransportError."""

    class Answer:
        def __init__(self, status: int, body: bytes):
            self.status_code, self.content = status, body

        def json(self):
            return json.loads(self.content)

        @property
        def text(self) -> str:
            return self.content.decode("utf-8", "replace")

    def __init__(self, base: str):
        host, _, port = base.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port or 80)
        self.cookies: dict[str, str] = {}
        self.reader = self.writer = None

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None

    async def request(self, method: str, path: str, json: dict | None = None):
        import json as _json

        body = _json.dumps(json).encode() if json is not None else b""
        head = [
            f"{method} {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "User-Agent: bench-lean/1",
            "Accept: application/json",
        ]
        if json is not None:
            head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        if self.cookies:
            head.append("Cookie: " + "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        data = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        for last_try in (False, True):
            # The server closes a connection left idle past its keep-alive timeout (uvicorn: 5 s,
            # shorter than a paced worker's think time): open a new one, as browsers do.
            reused = self.writer is not None
            if reused and (self.reader.at_eof() or self.writer.is_closing()):
                await self.close()
                reused = False
            try:
                if self.writer is None:
                    self.reader, self.writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 60)
                self.writer.write(data)
                return await asyncio.wait_for(self._answer(), 60)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as exc:
                await self.close()
                if reused and not last_try:
                    continue  # closed as we wrote: once more on a new connection
                raise self.Error(f"{type(exc).__name__}: {exc}") from exc

    async def _answer(self):
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length, close = 0, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding":
                raise ValueError("a chunked answer")
            elif name == "connection" and value.lower() == "close":
                close = True
            elif name == "set-cookie":
                pair, _, attrs = value.partition(";")
                key, _, val = pair.strip().partition("=")
                if "max-age=0" in attrs.lower().replace(" ", "") or "1970" in attrs:
                    self.cookies.pop(key, None)
                else:
                    self.cookies[key] = val
        body = await self.reader.readexactly(length) if length else b""
        if close:
            await self.close()
        return self.Answer(status, body)


def _http_process(
    base: str, slug: str, worker_ids: list, gate: StartGate, interval: float, out, lean: bool = True
) -> None:
    import ssl

    import httpx

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    lat = {"enter": [], "consent": [], "next": [], "submit": []}
    stored: list = []
    errors: Counter = Counter()
    start_at = measure_from = stop_at = float("inf")
    with_next = [0]  # submits in the window whose answer carried the next state
    t_window = lambda now: measure_from <= now <= stop_at  # noqa: E731

    async def req(client, name, method, path, **kw):
        """All three calls are safe to repeat (entry by its parameters, next returns the same
        lease, submit by its idempotency key), so a dropped connection is retried, as a
        browser would; the latency counts from the first try."""
        t = time.monotonic()
        for attempt in range(4):
            try:
                r = await client.request(method, path, **kw)
                break
            except (httpx.TransportError, LeanClient.Error) as exc:
                errors[f"{name}: {type(exc).__name__} (retried)"] += 1
                if attempt == 3:
                    raise
                await asyncio.sleep(0.1)
        if t >= measure_from and time.monotonic() <= stop_at:
            lat[name].append((time.monotonic() - t) * 1000)
        return r

    async def worker(wid: str, client) -> None:
        rng = random.Random(wid)
        pacer = Pacer(interval, start_at, rng)
        n_bundle = 0
        async with client:
            await asyncio.sleep(max(0.0, pacer.first - time.monotonic()))
            try:

                async def enter():
                    # One task per worker id (the default cap), all bound to this client's
                    # browser secret (its cookie jar); then consent to the text shown.
                    while time.monotonic() < stop_at:
                        r = await req(
                            client,
                            "enter",
                            "POST",
                            f"/api/v1/crowd/{slug}/enter",
                            json={
                                "params": {
                                    "PROLIFIC_PID": f"{wid}-b{n_bundle}",
                                    "STUDY_ID": "bench",
                                    "SESSION_ID": f"{wid}-s{n_bundle}",
                                }
                            },
                        )
                        if r.status_code == 200:
                            r = await req(
                                client,
                                "consent",
                                "POST",
                                f"/api/v1/crowd/{slug}/consent",
                                json={"consent_version": r.json()["consent_version"]},
                            )
                            if r.status_code == 200:
                                return
                        errors[f"enter {r.status_code}: {r.text[:120]}"] += 1
                        await asyncio.sleep(0.5)

                await enter()
                body = None  # the next state, when the last submit brought it
                while time.monotonic() < stop_at:
                    if body is None:
                        r = await req(client, "next", "GET", f"/api/v1/crowd/{slug}/next")
                        if r.status_code != 200:
                            errors[f"next {r.status_code}: {r.text[:120]}"] += 1
                            await asyncio.sleep(0.5)
                            if r.status_code == 403:  # no bundle in the session: enter again
                                await enter()
                            continue
                        body = r.json()
                    if body["state"] == "wait":  # others' leases may come back
                        await asyncio.sleep(body["retry_after"])
                        body = None
                        continue
                    if body["done"]:
                        n_bundle += 1
                        await enter()
                        body = None
                        continue
                    await asyncio.sleep(pacer.wait_time())
                    a_id = body["assignment_id"]
                    body = None
                    r = await req(
                        client,
                        "submit",
                        "POST",
                        f"/api/v1/crowd/{slug}/submit",
                        json={
                            "assignment_id": a_id,
                            "idempotency_key": f"{wid}-{a_id}",
                            "response": {"answer": rng.choice(["Yes", "No"])},
                        },
                    )
                    if r.status_code == 200:
                        now = time.monotonic()
                        answer = r.json()
                        stored.append((a_id, answer["annotation"], measure_from <= now <= stop_at))
                        body = answer.get("next")  # one annotation, one request
                        if body is not None and t_window(now):
                            with_next[0] += 1
                    else:
                        errors[f"submit {r.status_code}: {r.text[:120]}"] += 1
            except Exception as exc:  # noqa: BLE001
                errors[f"{type(exc).__name__}: {str(exc)[:160]}"] += 1

    async def main():
        nonlocal start_at, measure_from, stop_at
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        tls = ssl.create_default_context()  # one context: making 200 of them takes seconds
        clients = [
            LeanClient(base) if lean else httpx.AsyncClient(base_url=base, limits=limits, timeout=60, verify=tls)
            for _ in worker_ids
        ]
        start_at, measure_from, stop_at = await asyncio.get_running_loop().run_in_executor(None, gate.wait)
        await asyncio.gather(*(worker(w, c) for w, c in zip(worker_ids, clients)))

    asyncio.run(main())
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out.put(
        {
            "lat": lat,
            "stored": stored,
            "errors": dict(errors),
            "with_next": with_next[0],
            "cpu_s": ru.ru_utime + ru.ru_stime,
            "maxrss_mb": ru.ru_maxrss / 1024,
        }
    )


def run_http(
    url: str,
    slug: str,
    n_workers: int,
    client_procs: int,
    web_workers: int,
    duration: float,
    warmup: float,
    interval: float,
    tag: str,
    secret: str,
    client: str = "lean",
) -> dict:
    port = free_port()
    storage = tempfile.mkdtemp(prefix="proctor-bench-blobs-")
    rt_dir = tempfile.mkdtemp(prefix="proctor-bench-rt-")
    web = start_web(url, port, web_workers, secret, storage, rt_dir)
    sampler = RssSampler(web.pid)
    sampler.start()
    try:
        tree = process_tree(web.pid)
        cpu0 = sum(cpu_s(p) for p in tree)
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        gate = StartGate(ctx, client_procs)
        ids = [f"{tag}-w{i:04d}" for i in range(n_workers)]
        ps = [
            ctx.Process(
                target=_http_process,
                args=(f"http://127.0.0.1:{port}", slug, ids[p::client_procs], gate, interval, out, client == "lean"),
            )
            for p in range(client_procs)
        ]
        for p in ps:
            p.start()
        meter = CpuMeter(
            url,
            {
                "web (uvicorn workers)": lambda: process_tree(web.pid),
                f"load generator ({client} clients)": lambda: [p.pid for p in ps],
            },
            rt_dir,
        )
        start_at, measure_from, stop_at = gate.open(warmup + interval, duration)
        wait_until(measure_from)
        a = meter.snap()
        wait_until(stop_at)
        b = meter.snap()
        results = [out.get(timeout=duration + warmup + 240) for _ in ps]
        for p in ps:
            p.join(30)
        web_cpu = sum(cpu_s(p) for p in process_tree(web.pid)) - cpu0
    finally:
        sampler.stop.set()
        sampler.join(2)
        os.killpg(web.pid, signal.SIGTERM)
        try:
            web.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(web.pid, signal.SIGKILL)
        import shutil

        shutil.rmtree(storage, ignore_errors=True)
        shutil.rmtree(rt_dir, ignore_errors=True)
    merged = _merge(results, duration, measure_from, stop_at)
    peaks = sampler.peak
    merged["web_rss_mb"] = {
        "master": peaks.get(web.pid, 0.0),
        "workers": sorted((v for p, v in peaks.items() if p != web.pid and p not in sampler.helpers), reverse=True),
        "helpers": sum(v for p, v in peaks.items() if p in sampler.helpers),
        "total": sum(peaks.values()),
    }
    merged["web_cpu_s"] = web_cpu
    merged["cpu"] = CpuMeter.diff(a, b)
    return merged


# ------------------------------------------------------------------------------ checks


def db_checks(url: str, study_id: int, stored: list) -> dict:
    """Counted from the database; `stored` is what the clients were told was stored."""
    import psycopg

    with psycopg.connect(pg_conninfo(url)) as c:
        q = lambda sql, *a: c.execute(sql, a).fetchone()[0]  # noqa: E731
        double_item = q(
            "SELECT count(*) FROM (SELECT worker_id, item_id FROM assignments WHERE study_id=%s "
            "GROUP BY 1, 2 HAVING count(*) > 1) x",
            study_id,
        )
        double_group = q(
            "SELECT count(*) FROM (SELECT a.worker_id, i.exclusion_group FROM assignments a "
            "JOIN items i ON i.id = a.item_id WHERE a.study_id=%s AND i.exclusion_group IS NOT NULL "
            "GROUP BY 1, 2 HAVING count(*) > 1) x",
            study_id,
        )
        over_cap = q(
            "SELECT count(*) FROM (SELECT item_id FROM assignments WHERE study_id=%s AND "
            "state='completed' AND NOT is_gold GROUP BY 1 HAVING count(*) > "
            "(SELECT annotations_per_item FROM studies WHERE id=%s)) x",
            study_id,
            study_id,
        )
        drift = q(
            "SELECT count(*) FROM items i LEFT JOIN (SELECT item_id, count(*) n FROM assignments "
            "WHERE study_id=%s AND state IN ('completed','leased') AND NOT is_gold GROUP BY 1) a "
            "ON a.item_id = i.id WHERE i.study_id=%s AND NOT i.is_gold AND i.n_active <> coalesce(a.n, 0)",
            study_id,
            study_id,
        )
        orphan = q(
            "SELECT count(*) FROM assignments a LEFT JOIN annotations n ON n.assignment_id = a.id "
            "WHERE a.study_id=%s AND a.state='completed' AND n.id IS NULL",
            study_id,
        )
        bundle_drift = q(
            "SELECT count(*) FROM bundles b LEFT JOIN (SELECT bundle_id, count(*) n FROM assignments "
            "WHERE state='completed' GROUP BY 1) a ON a.bundle_id=b.id "
            "WHERE b.study_id=%s AND b.n_done <> coalesce(a.n, 0)",
            study_id,
        )
        c.execute("CREATE TEMP TABLE told (assignment_id int, annotation_id int)")
        with c.cursor().copy("COPY told FROM STDIN") as cp:
            for a_id, ann_id, _ in stored:
                cp.write_row((a_id, ann_id))
        lost = q(
            "SELECT count(*) FROM told t LEFT JOIN annotations n ON n.id = t.annotation_id "
            "AND n.assignment_id = t.assignment_id WHERE n.id IS NULL"
        )
        total = q("SELECT count(*) FROM annotations WHERE study_id=%s", study_id)
    return {
        "double_assignments": double_item,
        "two_in_one_group": double_group,
        "items_over_capacity": over_cap,
        "n_active_drift": drift,
        "completed_without_annotation": orphan,
        "bundle_count_drift": bundle_drift,
        "lost_writes": lost,
        "annotations_now": total,
    }


# ------------------------------------------------------------------------------ report


def show(name: str, r: dict, checks: dict) -> None:
    print(f"\n== {name}")
    print(
        f"  annotations committed/s (in the measured window): {r['throughput']:.0f}"
        f"  ({r['stored_window']} in window, {r['stored_total']} in all)"
    )
    for k, v in r["latency_ms"].items():
        print(f"  {k:7s} n={v['n']:6d}  p50={v['p50']:7.1f} ms  p99={v['p99']:7.1f} ms  max={v['max']:7.1f} ms")
    if "web_rss_mb" in r:
        w = r["web_rss_mb"]
        print(
            f"  web RSS peak: each worker process {', '.join(f'{x:.0f}' for x in w['workers'])} MB; "
            f"supervisor {w['master']:.0f} MB, multiprocessing resource tracker {w['helpers']:.0f} MB; "
            f"all together {w['total']:.0f} MB"
        )
    n = max(1, r["stored_window"])
    cpu = r.get("cpu", {})
    if cpu:
        cap = cpu["machine capacity"]
        print(
            f"  CPU in the window ({cpu['wall']:.0f} s, {cap:.0f} CPU-s available, "
            f"{100 * cpu['machine busy'] / cap:.0f}% busy), ms of CPU per annotation:"
        )
        for k, v in cpu.items():
            if k not in (
                "machine busy",
                "machine capacity",
                "wall",
                "pg_connections_opened",
                "pg_round_trips",
                "load_average",
            ) and (v or "postgres" not in k):
                print(f"    {k:42s} {1000 * v / n:7.1f} ms  ({100 * v / cap:4.1f}% of the machine)")
    if cpu:
        print(f"  PostgreSQL connections opened in the window: {cpu['pg_connections_opened']}")
        server = next((v for k, v in cpu.items() if k.startswith(("web", "simulated"))), 0.0)
        pg = next((v for k, v in cpu.items() if k.startswith("postgres")), 0.0)
        print(
            f"  per annotation: server CPU {1000 * server / n:.2f} ms, PostgreSQL CPU "
            f"{1000 * pg / n:.2f} ms, PostgreSQL round trips {cpu['pg_round_trips'] / n:.2f} "
            f"(counted at the driver; entry and consent included); load average "
            f"{' '.join(f'{x:.2f}' for x in cpu['load_average'])}"
        )
    if r.get("hot_path"):
        print(f"  hot path (statements that answered / left it to the engine): {r['hot_path']}")
    if r.get("submits_with_next"):
        print(f"  submits whose answer carried the next state: {r['submits_with_next']}")
    if r.get("statements_per_annotation"):
        print(
            f"  SQL statements through SQLAlchemy per annotation (the engine's path): "
            f"{r['statements_per_annotation']:.1f}"
        )
    print(f"  errors: {r['errors'] or 'none'}")
    print("  from the database: " + ", ".join(f"{k}={v}" for k, v in checks.items()))


def _warn_connections(url: str) -> None:
    import psycopg

    with psycopg.connect(pg_conninfo(url)) as c:
        limit, used = c.execute(
            "SELECT current_setting('max_connections')::int, count(*) FROM pg_stat_activity"
        ).fetchone()
    if limit - used < 90:
        print(
            f"warning: only {limit - used} of {limit} connections are free; two web processes use up to "
            f"80 (pool 20+20 each). Consider --own-server.",
            flush=True,
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--database-url", help="an empty database to migrate and seed (kept); default: a fresh one, dropped after"
    )
    ap.add_argument("--admin-url", default=ADMIN_URL)
    ap.add_argument("--workers", type=int, default=200)
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--annotations", type=int, default=1_000_000)
    ap.add_argument("--duration", type=float, default=60, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument(
        "--rate",
        default="20",
        help="annotations/s the paced runs offer, comma-separated "
        "(default 20: 200 workers taking 10 s per item); 0 or empty: no paced runs",
    )
    ap.add_argument("--modes", default="service,http")
    ap.add_argument("--procs", type=int, default=2, help="service mode: processes (threads inside)")
    ap.add_argument("--web-workers", type=int, default=2)
    ap.add_argument("--client-procs", type=int, default=1)
    ap.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="HTTP mode's simulated browsers: a minimal keep-alive client, or httpx",
    )
    ap.add_argument("--no-saturation", action="store_true", help="only the paced runs")
    ap.add_argument("--quick", action="store_true", help="small sizes: 40 workers, 5k items, 20k annotations, 4 s runs")
    ap.add_argument("--keep", action="store_true", help="do not drop the database made here")
    ap.add_argument(
        "--own-server",
        action="store_true",
        help="run a throwaway PostgreSQL cluster (max_connections=300) instead of using "
        "--admin-url's server: 200 workers on 2 web processes need up to 80 connections",
    )
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    if args.quick:  # smaller defaults; options given on the command line still win
        ap.set_defaults(workers=40, items=5000, annotations=20000, duration=4, warmup=1, rate="20")
        args = ap.parse_args(argv)

    # The app refuses keys under 32 characters (issue 10.5).
    secret = os.environ.get("SECRET_KEY") or "bench-" + secrets.token_urlsafe(36)
    os.environ["SECRET_KEY"] = secret
    server = OwnServer() if args.own_server and not args.database_url else None
    if server:
        args.admin_url = server.admin_url
    made = args.database_url is None
    url = args.database_url or create_database(args.admin_url)
    os.environ["DATABASE_URL"] = url
    print(
        f"machine: {os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; "
        f"python {sys.version.split()[0]}; database {url.rsplit('@', 1)[-1]}"
        + (f" (own server: {server.settings()})" if server else "")
    )
    _warn_connections(url)
    figures: dict = {"args": vars(args)}
    try:
        from app.cli import migrate_db

        migrate_db(url)
        info = seed(url, args.items, args.annotations, secret)
        figures["seed"] = info
        lb = time_leaderboard(url, info["study_id"])
        figures["leaderboard"] = lb

        def runs(r):
            return (
                f"median {r['median_s']:.2f} s of {', '.join(f'{t:.2f}' for t in r['runs_s'])}; CPU "
                f"{', '.join(f'{a:.2f}+{b:.2f}' for a, b in zip(r['python_cpu_s'], r['pg_cpu_s']))} s "
                f"(Python+PostgreSQL), load {r['load']:.1f}"
            )

        print(
            f"\nleaderboard over {info['annotations']} annotations ({info['items']} items):\n"
            f"  the page ({lb['page']['rows']} rows), from the running totals: {runs(lb['page'])}\n"
            f"  every annotator ({lb['rows']} rows), from the running totals: {runs(lb)}\n"
            f"  every annotator, counted from the annotations (before): {runs(lb['scan'])}"
        )
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            plans = [] if args.no_saturation else [("saturation", 0.0)]
            for rate in [float(x) for x in str(args.rate).split(",") if x.strip() and float(x) > 0]:
                plans.append((f"paced {rate:g}/s", args.workers / rate))
            for label, interval in plans:
                tag = f"{mode[:1]}{label[:3]}{secrets.token_hex(2)}"
                log(f"{mode} / {label}: {args.workers} workers, {args.duration:.0f} s")
                if mode == "service":
                    r = run_service(
                        url, info["slug"], args.workers, args.procs, args.duration, args.warmup, interval, tag
                    )
                elif mode == "http":
                    r = run_http(
                        url,
                        info["slug"],
                        args.workers,
                        args.client_procs,
                        args.web_workers,
                        args.duration,
                        args.warmup,
                        interval,
                        tag,
                        secret,
                        args.client,
                    )
                else:
                    raise SystemExit(f"unknown mode {mode}")
                checks = db_checks(url, info["study_id"], r.pop("stored"))
                name = f"{mode}, {label}, {args.workers} workers"
                show(name, r, checks)
                figures[name] = {**r, "db": checks}
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1, default=str))
    finally:
        from app.db import get_engine

        get_engine.cache_clear()
        if server:
            server.stop()
        elif made and not args.keep:
            drop_database(args.admin_url, url)
        elif made:
            print(f"kept {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""PostgreSQL round trips per crowd request, counted at the driver as bench/crowd.py counts them
(bench/roundtrips/sitecustomize.py: each statement psycopg sends, the BEGIN it sends first
outside autocommit, each COMMIT/ROLLBACK, the pool's pre-ping).

One worker at a time goes through whole bundles by the API (FastAPI's TestClient, in this
process) on a freshly seeded bench study (bench/crowd.py's seed, 2,000 items); the count is
read around each request and printed per kind of request, then per annotation. The first
worker's requests warm the process's caches (as a long-running web process has them) and are
left out.

    python bench/request_roundtrips.py [--workers 4] [--admin-url postgresql+psycopg://...]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import secrets
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _counter(folder: str):
    """The round-trip counter, installed in this process (read back with read(folder))."""
    os.environ["PROCTOR_BENCH_ROUNDTRIPS"] = folder
    spec = importlib.util.spec_from_file_location("rt_counter", ROOT / "bench" / "roundtrips" / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--admin-url", default=os.environ.get(
        "PROCTOR_BENCH_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"))
    ap.add_argument("--workers", type=int, default=4, help="workers, one bundle each (the first warms up)")
    ap.add_argument("--items", type=int, default=2000)
    args = ap.parse_args(argv)

    os.environ["SECRET_KEY"] = os.environ.get("SECRET_KEY") or "bench-" + secrets.token_urlsafe(36)
    os.environ["REDIS_URL"] = ""
    scratch = tempfile.mkdtemp(prefix="proctor-rt-")
    os.environ["STORAGE_URL"] = f"file://{scratch}/storage"
    folder = os.path.join(scratch, "rt")
    os.makedirs(folder)
    counter = _counter(folder)

    from bench.crowd import create_database, drop_database, seed

    url = create_database(args.admin_url)
    os.environ["DATABASE_URL"] = url
    per = defaultdict(list)
    try:
        from fastapi.testclient import TestClient

        from app.cli import migrate_db
        from app.main import create_app

        migrate_db(url)
        info = seed(url, args.items, 0, os.environ["SECRET_KEY"])
        slug = info["slug"]
        app = create_app(url)
        for w in range(args.workers):
            with TestClient(app) as client:
                rows = []

                def call(name, method, path, **kw):
                    before = counter.read(folder)
                    r = client.request(method, path, **kw)
                    assert r.status_code == 200, (name, r.status_code, r.text[:300])
                    rows.append((name, counter.read(folder) - before))
                    return r.json()

                params = {"PROLIFIC_PID": f"rt-{w}", "STUDY_ID": "st", "SESSION_ID": f"rt-{w}"}
                body = call("enter", "POST", f"/api/v1/crowd/{slug}/enter", json={"params": params})
                call("consent", "POST", f"/api/v1/crowd/{slug}/consent",
                     json={"consent_version": body["consent_version"]})
                nxt = call("next", "GET", f"/api/v1/crowd/{slug}/next")
                while nxt["state"] == "item":
                    last = nxt["position"] == nxt["of"]
                    stored = call("submit that ends the bundle" if last else "submit", "POST",
                                  f"/api/v1/crowd/{slug}/submit",
                                  json={"assignment_id": nxt["assignment_id"],
                                        "idempotency_key": secrets.token_hex(8),
                                        "response": {"answer": "Yes"}})
                    nxt = stored["next"] or call("next", "GET", f"/api/v1/crowd/{slug}/next")
                assert nxt["state"] == "done", nxt
            if w:  # the first worker warms the caches
                for name, n in rows:
                    per[name].append(n)
    finally:
        from app.db import get_engine

        get_engine.cache_clear()
        try:
            from app.studies import hotpath

            hotpath.reset()
        except ImportError:
            pass
        drop_database(args.admin_url, url)

    print(f"round trips per request ({args.workers - 1} workers after one to warm up; median):")
    total, annotations = 0, 0
    for name in ("enter", "consent", "next", "submit", "submit that ends the bundle"):
        counts = per.get(name, [])
        if counts:
            print(f"  {name:30s} {statistics.median(counts):5g}   (min {min(counts)}, max {max(counts)}, n {len(counts)})")
        total += sum(counts)
    annotations = len(per["submit"]) + len(per["submit that ends the bundle"])
    print(f"  per annotation, entry included: {total / annotations:.2f} ({total} round trips, {annotations} annotations)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Server CPU per crowd request, by kind of request: the whole ASGI app (every middleware,
routing, the endpoint, the hot path's statement, the JSON answer) called in this process with
no network and no load generator beside it, one request at a time, so the process's CPU time
around each call is that request's own.

Workers go one after another through whole bundles (enter, consent, next, submit... as
bench/crowd.py's HTTP clients do) on a freshly seeded bench study (bench/crowd.py's seed); the
first worker warms the caches and is left out. Printed: CPU ms per request (median, p90) and per
annotation, entry and consent included. bench/crowd.py measures the same cost under load
(uvicorn's HTTP parsing included); this isolates it, so that two versions of the request path
can be compared run against run.

    python bench/request_cpu.py [--workers 21] [--items 5000] [--profile out.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class Client:
    """A browser's cookie jar and the ASGI calls, with nothing in between."""

    def __init__(self, app):
        self.app, self.cookies = app, {}

    async def call(self, method: str, path: str, body: dict | None = None):
        raw = json.dumps(body).encode() if body is not None else b""
        headers = [(b"host", b"bench"), (b"user-agent", b"bench/1"), (b"accept", b"application/json")]
        if body is not None:
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
        if self.cookies:
            headers.append((b"cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()).encode()))
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "root_path": "", "headers": headers, "client": ("127.0.0.1", 40000),
                 "server": ("127.0.0.1", 8000), "state": {}}
        sent = False

        async def receive():
            nonlocal sent
            if sent:
                await asyncio.sleep(3600)
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}

        status, chunks = 0, []

        async def send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                for k, v in message.get("headers", []):
                    if k.lower() == b"set-cookie":
                        name, _, rest = v.decode().partition("=")
                        self.cookies[name] = rest.split(";", 1)[0]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, b"".join(chunks)


async def one_worker(app, slug: str, w: int, rows: list) -> None:
    client = Client(app)

    async def call(name, method, path, body=None):
        t = time.process_time()
        status, raw = await client.call(method, path, body)
        rows.append((name, (time.process_time() - t) * 1000))
        if status != 200:
            raise SystemExit(f"{name}: {status} {raw[:300]!r}")
        return json.loads(raw)

    params = {"PROLIFIC_PID": f"cpu-{w}-{secrets.token_hex(3)}", "STUDY_ID": "st", "SESSION_ID": f"cpu-{w}"}
    body = await call("enter", "POST", f"/api/v1/crowd/{slug}/enter", {"params": params})
    await call("consent", "POST", f"/api/v1/crowd/{slug}/consent", {"consent_version": body["consent_version"]})
    nxt = await call("next", "GET", f"/api/v1/crowd/{slug}/next")
    while nxt["state"] == "item":
        last = nxt["position"] == nxt["of"]
        stored = await call("submit that ends the bundle" if last else "submit", "POST",
                            f"/api/v1/crowd/{slug}/submit",
                            {"assignment_id": nxt["assignment_id"], "idempotency_key": secrets.token_hex(8),
                             "response": {"answer": "Yes"}})
        nxt = stored["next"] or await call("next", "GET", f"/api/v1/crowd/{slug}/next")
    if nxt["state"] != "done":
        raise SystemExit(f"the bundle did not end: {nxt}")


def report(name: str, per: dict) -> None:
    print(f"{name}: server CPU per request, ms (median / p90 / n)")
    total, annotations = 0.0, 0
    for kind in ("enter", "consent", "next", "submit", "submit that ends the bundle"):
        values = sorted(per.get(kind, []))
        if values:
            p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
            print(f"  {kind:30s} {statistics.median(values):6.2f} {p90:6.2f}  n={len(values)}")
            total += sum(values)
    annotations = len(per.get("submit", [])) + len(per.get("submit that ends the bundle", []))
    print(f"  per annotation, entry and consent included: {total / max(annotations, 1):.2f} ms")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--admin-url", default=os.environ.get(
        "PROCTOR_BENCH_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"))
    ap.add_argument("--workers", type=int, default=21, help="workers, one bundle of 10 each (the first warms up)")
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3, help="repeats of the workers")
    ap.add_argument("--profile", help="write yappi's CPU profile of every thread here (yappi must be importable)")
    args = ap.parse_args(argv)

    os.environ["SECRET_KEY"] = os.environ.get("SECRET_KEY") or "bench-" + secrets.token_urlsafe(36)
    os.environ.update(REDIS_URL="", RATE_LIMIT_ENTRY="0", RATE_LIMIT_SUBMIT="0", LOG_LEVEL="WARNING")
    scratch = tempfile.mkdtemp(prefix="proctor-cpu-")
    os.environ["STORAGE_URL"] = f"file://{scratch}/storage"

    from bench.crowd import create_database, drop_database, seed

    url = create_database(args.admin_url)
    os.environ["DATABASE_URL"] = url
    try:
        from app.cli import migrate_db
        from app.main import create_app

        migrate_db(url)
        slug = seed(url, args.items, 0, os.environ["SECRET_KEY"])["slug"]
        app = create_app(url)
        per: dict = defaultdict(list)

        async def run() -> None:
            await one_worker(app, slug, 0, [])  # warms the caches and the thread pool
            if args.profile:
                import yappi

                yappi.set_clock_type("cpu")
                yappi.start()
            for r in range(args.rounds):
                for w in range(1, args.workers):
                    rows: list = []
                    await one_worker(app, slug, r * args.workers + w, rows)
                    for kind, ms in rows:
                        per[kind].append(ms)
            if args.profile:
                yappi.stop()
                with open(args.profile, "w") as f:
                    yappi.get_func_stats().sort("tsub").print_all(out=f, columns={
                        0: ("name", 90), 1: ("ncall", 10), 2: ("tsub", 8), 3: ("ttot", 8), 4: ("tavg", 8)})

        asyncio.run(run())
        report("this tree", per)
    finally:
        from app.db import get_engine
        from app.studies import hotpath

        get_engine.cache_clear()
        hotpath.reset()
        drop_database(args.admin_url, url)
    return 0


if __name__ == "__main__":
    sys.exit(main())

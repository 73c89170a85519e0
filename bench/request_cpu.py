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

import asyncio
import json
import secrets
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.request_common import KINDS, answer, bench_settings, bench_study, bundle, options, walk_async  # noqa: E402


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
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
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

    async def send(kind, method, path, body):
        t = time.process_time()
        status, raw = await client.call(method, path, body)
        rows.append((kind, (time.process_time() - t) * 1000))
        return answer(kind, status, raw)

    params = {"PROLIFIC_PID": f"cpu-{w}-{secrets.token_hex(3)}", "STUDY_ID": "st", "SESSION_ID": f"cpu-{w}"}
    await walk_async(bundle(slug, params), send)


def report(name: str, per: dict) -> None:
    print(f"{name}: server CPU per request, ms (median / p90 / n)")
    total = 0.0
    for kind in KINDS:
        values = sorted(per.get(kind, []))
        if values:
            p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
            print(f"  {kind:30s} {statistics.median(values):6.2f} {p90:6.2f}  n={len(values)}")
            total += sum(values)
    annotations = len(per.get("submit", [])) + len(per.get("submit that ends the bundle", []))
    print(f"  per annotation, entry and consent included: {total / max(annotations, 1):.2f} ms")


def main(argv=None) -> int:
    ap = options(__doc__, 21, "workers, one bundle of 10 each (the first warms up)", 5000)
    ap.add_argument("--rounds", type=int, default=3, help="repeats of the workers")
    ap.add_argument("--profile", help="write yappi's CPU profile of every thread here (yappi must be importable)")
    args = ap.parse_args(argv)

    bench_settings("proctor-cpu-", RATE_LIMIT_ENTRY="0", RATE_LIMIT_SUBMIT="0", LOG_LEVEL="WARNING")
    with bench_study(args.admin_url, args.items) as (app, slug):
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
                    yappi.get_func_stats().sort("tsub").print_all(
                        out=f,
                        columns={0: ("name", 90), 1: ("ncall", 10), 2: ("tsub", 8), 3: ("ttot", 8), 4: ("tavg", 8)},
                    )

        asyncio.run(run())
        report("this tree", per)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

import importlib.util
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.request_common import KINDS, answer, bench_settings, bench_study, bundle, options, walk  # noqa: E402


def _counter(folder: str):
    """The round-trip counter, installed in this process (read back with read(folder))."""
    os.environ["PROCTOR_BENCH_ROUNDTRIPS"] = folder
    spec = importlib.util.spec_from_file_location("rt_counter", ROOT / "bench" / "roundtrips" / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    args = options(__doc__, 4, "workers, one bundle each (the first warms up)", 2000).parse_args(argv)

    scratch = bench_settings("proctor-rt-")
    folder = os.path.join(scratch, "rt")
    os.makedirs(folder)
    counter = _counter(folder)

    per = defaultdict(list)
    with bench_study(args.admin_url, args.items) as (app, slug):
        from fastapi.testclient import TestClient

        for w in range(args.workers):
            with TestClient(app) as client:
                rows = []

                def send(kind, method, path, body):
                    before = counter.read(folder)
                    r = client.request(method, path, json=body)
                    rows.append((kind, counter.read(folder) - before))
                    return answer(kind, r.status_code, r.content)

                params = {"PROLIFIC_PID": f"rt-{w}", "STUDY_ID": "st", "SESSION_ID": f"rt-{w}"}
                walk(bundle(slug, params), send)
            if w:  # the first worker warms the caches
                for kind, n in rows:
                    per[kind].append(n)

    print(f"round trips per request ({args.workers - 1} workers after one to warm up; median):")
    total, annotations = 0, 0
    for kind in KINDS:
        counts = per.get(kind, [])
        if counts:
            print(
                f"  {kind:30s} {statistics.median(counts):5g}   (min {min(counts)}, max {max(counts)}, n {len(counts)})"
            )
        total += sum(counts)
    annotations = len(per["submit"]) + len(per["submit that ends the bundle"])
    print(
        f"  per annotation, entry included: {total / annotations:.2f} ({total} round trips, {annotations} annotations)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

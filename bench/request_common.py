"""What bench/request_cpu.py and bench/request_roundtrips.py share: their options, the app's
settings in this process, the scratch bench study they run on, and one worker's walk through
a bundle by the crowd API.

The walk is a generator of requests that is sent each answer (as app/studies/hotpath.py's steps
are of statements), so that each bench sends the requests its own way (hand-made ASGI calls,
FastAPI's TestClient) and measures around the call alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import tempfile

# The kinds of request, in the order a bundle makes them (the benches print them so).
KINDS = ("enter", "consent", "next", "submit", "submit that ends the bundle")


def options(doc: str, workers: int, workers_help: str, items: int) -> argparse.ArgumentParser:
    """The options both benches take (a bench adds its own)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument(
        "--admin-url",
        default=os.environ.get("PROCTOR_BENCH_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"),
    )
    ap.add_argument("--workers", type=int, default=workers, help=workers_help)
    ap.add_argument("--items", type=int, default=items)
    return ap


def bench_settings(prefix: str, **env: str) -> str:
    """The app's settings for a bench in this process, set before the app is imported: no
    Redis, uploads in a scratch folder (returned), and `env`."""
    os.environ["SECRET_KEY"] = os.environ.get("SECRET_KEY") or "bench-" + secrets.token_urlsafe(36)
    os.environ.update(REDIS_URL="", **env)
    scratch = tempfile.mkdtemp(prefix=prefix)
    os.environ["STORAGE_URL"] = f"file://{scratch}/storage"
    return scratch


@contextlib.contextmanager
def bench_study(admin_url: str, items: int):
    """(the app, the study's slug) on a fresh database, migrated, with bench/crowd.py's seeded
    bench study; the database is dropped after, once this process's pools are closed."""
    from bench.crowd import create_database, drop_database, seed

    url = create_database(admin_url)
    os.environ["DATABASE_URL"] = url
    try:
        from app.cli import migrate_db
        from app.main import create_app

        migrate_db(url)
        slug = seed(url, items, 0, os.environ["SECRET_KEY"])["slug"]
        yield create_app(url), slug
    finally:
        from app.db import get_engine
        from app.studies import hotpath

        get_engine.cache_clear()
        hotpath.reset()
        drop_database(admin_url, url)


def bundle(slug: str, params: dict):
    """One worker's whole bundle by the crowd API, as bench/crowd.py's HTTP clients go: enter,
    consent, next, then a submit per item (its answer carries the next item). Yields (kind of
    request, method, path, JSON body or None) and is sent the answer's JSON (`answer`)."""
    api = f"/api/v1/crowd/{slug}"
    body = yield "enter", "POST", f"{api}/enter", {"params": params}
    yield "consent", "POST", f"{api}/consent", {"consent_version": body["consent_version"]}
    nxt = yield "next", "GET", f"{api}/next", None
    while nxt["state"] == "item":
        last = nxt["position"] == nxt["of"]
        stored = yield (
            ("submit that ends the bundle" if last else "submit"),
            "POST",
            f"{api}/submit",
            {
                "assignment_id": nxt["assignment_id"],
                "idempotency_key": secrets.token_hex(8),
                "response": {"answer": "Yes"},
            },
        )
        nxt = stored["next"] or (yield "next", "GET", f"{api}/next", None)
    if nxt["state"] != "done":
        raise SystemExit(f"the bundle did not end: {nxt}")


def answer(kind: str, status: int, raw: bytes) -> dict:
    """The answer's JSON; a request that failed stops the bench (its figures would be wrong)."""
    if status != 200:
        raise SystemExit(f"{kind}: {status} {raw[:300]!r}")
    return json.loads(raw)


def walk(steps, send) -> None:
    """Drive `bundle`'s requests through send(kind, method, path, body) -> the answer's JSON."""
    try:
        request = next(steps)
        while True:
            request = steps.send(send(*request))
    except StopIteration:
        pass


async def walk_async(steps, send) -> None:
    """`walk` with an async send."""
    try:
        request = next(steps)
        while True:
            request = steps.send(await send(*request))
    except StopIteration:
        pass

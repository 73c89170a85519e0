"""The crowd hot path on PostgreSQL: `next` and `submit` each in one statement, one round trip;
`enter` and `consent` in one round trip each, and the answer that ends a bundle (with the
automatic review) in two (the section "entry and consent" below).

The engine in app/studies/assignment.py (ORM, a transaction of several statements) stays the
reference and the fallback: these statements handle only the common case and, where anything
is out of the ordinary, change nothing and answer None, so that the caller runs the engine's
own path, which gives the worker the right answer (an error, a wait, the end of the task):

- next: the bundle's live lease, or a new lease on a free item (depth first, or adaptive
  allocation's order where the study has it on: app/leaderboards/adaptive.py; a gold item in a
  gold slot), when the bundle is consented, unfinished, bound to this browser, its study live,
  its worker not rejected, no lease of theirs expired unanswered, and the study allows one
  bundle per worker (several bundles per worker end the other bundles' leases: engine path);
- submit: the answer to the bundle's live lease, while the item's reference is the one it was
  scored against and the study is the version whose settings parsed it; the answer that ends
  the bundle also closes it, and the automatic review follows in the same transaction (the
  one place where a submit is more than a statement). Replays, late answers and refusals take
  the engine path.

Both statements lock the bundle first (FOR UPDATE), as the engine does, so they serialise with
it. One statement reads one snapshot, taken before any lock wait: two `next` of one bundle at
once could both see no lease; the unique index of one live lease per bundle refuses the second
(IntegrityError), which then takes the engine path and sees the first's lease. A rejection
locks the worker's bundles too: `next` then locks the participant (FOR SHARE) to read the
rejection it waited for; `submit` finds the lease no longer leased.

Each statement runs in autocommit (its own transaction: no BEGIN/COMMIT round trips) on a pool
without a pre-ping; a connection found broken is dropped and the statement tried once more on
a fresh one (both are idempotent: a submit already stored replays, a lease already taken is
returned). The pool is its own and small (DB_HOT_POOL_SIZE, 10: a statement holds a connection
for milliseconds); a burst past it waits for a free one, at most DB_POOL_TIMEOUT, then the
request is answered 503 with Retry-After. SQLite (the embedded default) always takes the engine
path, under its process lock.

Where the engine and these statements do the same, they do it alike: every time stamped or
compared (a lease's start and expiry, an answer's time and duration, consent, a bundle's end,
the per-address cap) is the app's clock (the engine's `utcnow`), passed in as a parameter,
never PostgreSQL's now(), which is another machine's clock when the database is; a new bundle's
gold slots follow the engine's rule (`assignment.gold_slots`: the slots of the smallest md5 of
a keyed "salt:worker:slot"), so one (study, worker, assignment id) gets the same slots by
either path.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, cast

from app.config import get_settings
from app.db import pg_connect_args
from app.errors import InputError
from app.studies.consent import consent_details, consent_text, consent_version

if TYPE_CHECKING:  # imported late at run time (SQLite never loads psycopg)
    import psycopg
    from sqlalchemy import Engine
    from sqlalchemy.pool import PoolProxiedConnection

# The engine's `_open_to`: never an item the worker had, nor one of a group they had, nor one
# they wrote. W is the bundle's worker. (An item of no group matches no assignment's group: a
# NULL never equals; written without the IS NULL test, the statements fit psycopg's cache.)
_OPEN = """
      AND NOT EXISTS (SELECT 1 FROM assignments m WHERE m.item_id = i.id AND m.worker_id = {w})
      AND i.author_id IS DISTINCT FROM {w}
      AND NOT EXISTS (SELECT 1 FROM assignments g WHERE g.study_id = %(study)s AND g.worker_id = {w}
                      AND g.exclusion_group = i.exclusion_group)"""

_NEXT_HEAD = """
WITH b AS (
    SELECT id, worker_id, participant_id, n_done, size, gold_slots, finished_at, consented_at,
           browser_hash, checked_at, check_spared
    FROM bundles WHERE id = %(bundle)s AND study_id = %(study)s FOR UPDATE
), ctx AS (
    SELECT b.*, s.state AS study_state, s.annotations_per_item AS cap, s.lease_seconds,
           s.max_bundles_per_worker AS per_worker, s.xmin::text AS version, p.status AS pstatus,
           s.adaptive, s.adaptive_floor AS floor,
           coalesce(b.gold_slots @> to_jsonb(b.n_done), false) AS want_gold,
           -- What the engine checks before it returns even the current lease.
           ((b.browser_hash IS NULL OR b.browser_hash = %(browser)s)
            AND b.consented_at IS NOT NULL AND b.finished_at IS NULL AND s.state = 'live'
            AND p.status <> 'rejected'
            -- A comprehension check passed in this task, or spared it; else the engine, which
            -- also reads a pass in another task of the worker's (comprehension.passed: such a
            -- task takes the engine's path, the statement kept within psycopg's cache).
            AND (NOT coalesce(jsonb_typeof(s.comprehension) = 'array', false)
                 OR b.checked_at IS NOT NULL OR b.check_spared)) AS ok
    FROM b JOIN studies s ON s.id = %(study)s JOIN participants p ON p.id = b.participant_id
    -- A rejection locks the bundle, then the participant. A `next` that waited for the bundle
    -- would read the participant from its snapshot, taken before: still pending, and it would
    -- lease the rejected worker an item. Locked, it is read as the rejection left it.
    FOR SHARE OF p
), cur AS (
    -- A live lease is always for the bundle's current slot. The slot test matters: `b` waited
    -- for the bundle's lock and reads its latest row, but this reads the statement's snapshot,
    -- which may predate a submit that committed while we waited; its lease, answered since,
    -- still looks live here, and returning it would show the answered item again (and drop the
    -- second answer as a replay). With the test it is skipped and the next slot is leased.
    SELECT a.id, a.item_id, a.slot, a.lease_expires_at <= %(now)s AS expired
    FROM assignments a WHERE a.bundle_id = %(bundle)s AND a.state = 'leased'
      AND a.slot = (SELECT n_done FROM b)
    ORDER BY a.id DESC LIMIT 1
), go AS (
    SELECT worker_id AS w, id, n_done, lease_seconds, want_gold, cap, NOT want_gold AND adaptive AS ad,
           least(floor, cap) AS fl FROM ctx
    WHERE ok AND n_done < size AND per_worker = 1 AND NOT EXISTS (SELECT 1 FROM cur)
"""
_NEXT_PLAIN = (
    """
), plain AS (
    -- Depth first, as the engine's _pick: the index ix_items_pick walked backwards.
    SELECT i.id, i.exclusion_group, i.is_gold FROM items i
    WHERE (SELECT NOT want_gold AND NOT ad FROM go) AND i.study_id = %(study)s AND NOT i.is_gold
      AND i.n_active < (SELECT cap FROM go) AND i.for_people """
    + _OPEN.format(w="(SELECT w FROM go)")
    + """
    ORDER BY i.n_active DESC, i.position DESC LIMIT 1
    -- NO KEY UPDATE: only n_active changes. A plain FOR UPDATE would skip every item whose row
    -- another transaction's foreign-key check holds FOR KEY SHARE (an answer being stored, the
    -- totals' rebuild), and a worker could be told there is no work left.
    FOR NO KEY UPDATE OF i SKIP LOCKED
"""
)
_NEXT_ADAPTIVE = (
    """
), below AS (
    -- Adaptive allocation (app/leaderboards/adaptive.py), as the engine's _pick: first the items
    -- under the floor, by the priority the periodic job wrote, then depth first; the index
    -- ix_items_priority walked backwards (n_active < floor checked on its entries). Only while
    -- an item is under the floor (the least n_active: ix_items_pick's first entry, whatever the
    -- plan): past the floor phase the walk read the study's whole index (10 ms, 200,000 items).
    SELECT i.id, i.exclusion_group, i.is_gold FROM items i
    WHERE (SELECT ad FROM go) AND i.study_id = %(study)s AND NOT i.is_gold
      AND (SELECT min(n_active) FROM items WHERE study_id = %(study)s AND NOT is_gold AND for_people)
          < (SELECT fl FROM go)
      AND i.n_active < (SELECT fl FROM go) AND i.for_people """
    + _OPEN.format(w="(SELECT w FROM go)")
    + """
    ORDER BY i.priority DESC, i.n_active DESC, i.position DESC LIMIT 1
    FOR NO KEY UPDATE OF i SKIP LOCKED
), above AS (
    -- None under the floor for this worker: the others, in the same order (none left under the
    -- floor is open to this worker, so the floor needs no second test here).
    SELECT i.id, i.exclusion_group, i.is_gold FROM items i
    WHERE (SELECT ad FROM go) AND NOT EXISTS (SELECT 1 FROM below)
      AND i.study_id = %(study)s AND NOT i.is_gold
      AND i.n_active < (SELECT cap FROM go) AND i.for_people """
    + _OPEN.format(w="(SELECT w FROM go)")
    + """
    ORDER BY i.priority DESC, i.n_active DESC, i.position DESC LIMIT 1
    FOR NO KEY UPDATE OF i SKIP LOCKED
"""
)
_NEXT_TAIL = (
    """
), gold AS (
    -- Gold is shared: spread by a per-worker start in [0, 1), wrapping round; the start is
    -- assignment.gold_start's (the first 20 bits of md5 of the worker id, over 2^20).
    SELECT i.id, i.exclusion_group, i.is_gold FROM items i
    WHERE (SELECT want_gold FROM go) AND i.study_id = %(study)s AND i.is_gold """
    + _OPEN.format(w="(SELECT w FROM go)")
    + """
    ORDER BY i.position < (SELECT ('x' || left(md5(w::text), 5))::bit(20)::int
                                  / 1048576.0 FROM go), i.position
    LIMIT 1
), l AS (
    INSERT INTO assignments (study_id, item_id, worker_id, bundle_id, exclusion_group, slot,
                             is_gold, state, leased_at, lease_expires_at)
    SELECT %(study)s, p.id, go.w, go.id, p.exclusion_group, go.n_done, p.is_gold,
           'leased', %(now)s, %(now)s + make_interval(secs => go.lease_seconds)
    FROM go, (SELECT * FROM {picks} UNION ALL SELECT * FROM gold) p
    RETURNING id, item_id, slot, is_gold
), took AS (
    UPDATE items SET n_active = n_active + 1 FROM l
    WHERE items.id = l.item_id AND NOT l.is_gold
)
SELECT ctx.ok, ctx.version, ctx.n_done, ctx.size, coalesce(l.id, cur.id), l.id IS NOT NULL,
       coalesce(l.slot, cur.slot), cur.expired, i.id, i.payload, i.reference::text
FROM ctx LEFT JOIN cur ON true LEFT JOIN l ON true
LEFT JOIN items i ON i.id = coalesce(l.item_id, cur.item_id)
"""
)

# The next-item statement in two forms, for studies with adaptive allocation and for the rest:
# each alone fits psycopg's cache of parsed statements (4 KB; both in one did not). Which runs
# follows the cached study (StudyConf.adaptive); each one's picks are guarded by the study's
# own column too, so a study switched meanwhile leases nothing here and takes the engine's
# path, whose answer is right either way.
NEXT_SQL = _NEXT_HEAD + _NEXT_PLAIN + _NEXT_TAIL.format(picks="plain")
NEXT_ADAPTIVE_SQL = _NEXT_HEAD + _NEXT_ADAPTIVE + _NEXT_TAIL.format(picks="below UNION ALL SELECT * FROM above")


SUBMIT_SQL = """
WITH b AS (
    SELECT id, worker_id, participant_id, n_done, size, browser_hash
    FROM bundles WHERE id = %(bundle)s AND study_id = %(study)s FOR UPDATE
), ok AS (
    SELECT b.id, b.worker_id FROM b
    JOIN studies s ON s.id = %(study)s JOIN participants p ON p.id = b.participant_id
    WHERE s.xmin::text = %(version)s AND s.state IN ('live', 'paused') AND p.status <> 'rejected'
      AND (b.browser_hash IS NULL OR b.browser_hash = %(browser)s) AND b.n_done + 1 < b.size
), done AS (
    UPDATE assignments a SET state = 'completed', completed_at = %(now)s FROM ok
    WHERE a.id = %(assignment)s AND a.bundle_id = ok.id AND a.state = 'leased'
      AND a.item_id = %(item)s
      AND EXISTS (SELECT 1 FROM items i WHERE i.id = %(item)s
                  AND i.reference::text IS NOT DISTINCT FROM %(reference)s)
    RETURNING a.id, a.item_id, a.is_gold, a.leased_at, ok.worker_id
), stored AS (
    INSERT INTO annotations (assignment_id, study_id, item_id, worker_id, is_gold, response,
                             score, scores, duration_ms, client, idempotency_key, excluded,
                             created_at)
    SELECT id, %(study)s, item_id, worker_id, is_gold, %(response)s, %(score)s, %(scores)s,
           (extract(epoch FROM %(now)s - leased_at) * 1000)::int, %(client)s, %(key)s, false, %(now)s
    FROM done RETURNING id
), counted AS (
    UPDATE bundles SET n_done = n_done + 1 FROM done WHERE bundles.id = %(bundle)s
    RETURNING bundles.n_done
)
SELECT (SELECT id FROM stored), (SELECT n_done FROM counted),
       (SELECT xmin::text FROM studies WHERE id = %(study)s)
"""

# The answer that ends the bundle: the participant is locked too (bundle -> participant ->
# assignment, the engine's order), the bundle is closed, and the automatic review runs after it
# in the same transaction (_run_end): the one place where a submit takes more than a statement.
SUBMIT_END_SQL = (
    SUBMIT_SQL.replace("SELECT b.id, b.worker_id FROM b", "SELECT b.id, b.worker_id, b.participant_id FROM b")
    .replace("AND b.n_done + 1 < b.size\n)", "AND b.n_done + 1 = b.size\n    FOR UPDATE OF p\n)")
    .replace("SET n_done = n_done + 1 FROM done", "SET n_done = n_done + 1, finished_at = %(now)s FROM done")
    .replace("n_done, size, browser_hash\n", "n_done, size, browser_hash, external_assignment_id\n")
    .replace(
        "(SELECT xmin::text FROM studies WHERE id = %(study)s)",
        "(SELECT xmin::text FROM studies WHERE id = %(study)s), (SELECT participant_id FROM ok),\n"
        "       (SELECT size FROM b), (SELECT external_assignment_id FROM b)",
    )
)
assert SUBMIT_END_SQL.count("FOR UPDATE OF p") == 1 and "finished_at = %(now)s" in SUBMIT_END_SQL
assert "browser_hash, external_assignment_id" in SUBMIT_END_SQL

# Sent with the answer that ends the bundle, after it in the same query and transaction: what
# the automatic review reads (the participant, locked by the answer; their gold answers, the one
# just stored included), and the bundle's external id for the completion code.
GOLD_SQL = """
SELECT p.id, p.status = 'pending' AND p.reviewed_by IS NULL,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(i.external_id, a.score, a.scores) ORDER BY a.id),
                        '[]'::jsonb)
        FROM annotations a JOIN items i ON i.id = a.item_id
        WHERE a.study_id = %(study)s AND a.worker_id = p.worker_id AND a.is_gold)
FROM bundles b JOIN participants p ON p.id = b.participant_id WHERE b.id = %(bundle)s
"""

# The automatic approval (app/quality/service.auto_review, audit.record) and the commit.
APPROVE_SQL = """
UPDATE participants SET status = 'approved', reason = %(reason)s, reviewed_at = %(now)s
WHERE id = %(participant)s;
INSERT INTO audit_log (actor_id, action, target_type, target_id, detail, created_at)
VALUES (NULL, 'worker.approved', 'participant', %(target)s, %(detail)s, %(now)s);
COMMIT
"""

# The study as the hot path keeps it (StudyConf): what the statements need, and the texts that
# entry, consent and a bundle's end show (the columns app/studies/consent.py reads for them).
STUDY_SQL = """SELECT id, kind, kind_settings, xmin::text, title, instructions, consent_text,
                      contact, estimated_minutes, payment, completion_code, redirect_url, adaptive,
                      COALESCE(jsonb_typeof(comprehension) = 'array', false)
               FROM studies WHERE slug = %(slug)s"""
ITEM_SQL = """SELECT i.id, i.payload, i.reference::text, b.n_done + 1 >= b.size
              FROM assignments a JOIN items i ON i.id = a.item_id JOIN bundles b ON b.id = a.bundle_id
              WHERE a.id = %(assignment)s AND a.bundle_id = %(bundle)s"""


@dataclass(frozen=True)
class StudyConf:
    """What the hot path needs of a study in Python (the rest it reads in SQL), and what entry,
    consent and a bundle's end show of it, all of one read of the row. `version` is the row's
    xmin: any change to the study row changes it, and every statement that acts on the study
    checks it (a changed study is read again, and the request takes the engine path)."""

    id: int
    slug: str
    kind: str
    kind_settings: dict[str, Any]
    version: str
    title: str  # the item page's heading
    instructions: str
    consent: str
    consent_details: tuple[tuple[str, str], ...]
    consent_version: str
    completion_code: str
    redirect_url: str
    adaptive: bool = False  # which next-item statement runs (NEXT_ADAPTIVE_SQL or NEXT_SQL)
    # A comprehension check before the first item (app/studies/comprehension.py): the engine's
    # path until the worker passed it (the next statement reads it, as the engine does).
    check: bool = False


@dataclass(frozen=True)
class Lease:
    assignment_id: int
    new: bool
    slot: int
    n_done: int
    size: int
    item_id: int
    payload: dict[str, Any]


@dataclass(frozen=True)
class Stored:
    annotation_id: int
    # The answer ended the bundle (it is closed, reviewed and committed): what its end shows.
    ended: bool = False
    n_done: int = 0
    size: int = 0
    external_assignment_id: str = ""


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")
# A row of a statement here (psycopg's default rows), and what an operation's generator yields.
Row = tuple[Any, ...]
Step = tuple[str, dict[str, Any]]


class _Lru(Generic[K, V]):
    def __init__(self, size: int):
        self.data: OrderedDict[K, V]
        self.size, self.data, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key: K) -> V | None:
        with self.lock:
            value = self.data.get(key)
            if value is not None:
                self.data.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self.lock:
            self.data[key] = value
            self.data.move_to_end(key)
            while len(self.data) > self.size:
                self.data.popitem(last=False)

    def drop(self, key: K) -> None:
        with self.lock:
            self.data.pop(key, None)

    def clear(self) -> None:
        with self.lock:
            self.data.clear()


# How often each statement answered or left the request to the engine (bench/crowd.py prints it).
stats: dict[str, int] = {"next": 0, "next_engine": 0, "submit": 0, "submit_engine": 0, "item_read": 0}

# (url, slug) -> StudyConf, dropped when its version is seen to change
_studies: _Lru[tuple[str, str], StudyConf] = _Lru(1000)
# (url, item id) -> (payload, reference as text): what scoring needs
_items: _Lru[tuple[str, int], tuple[dict[str, Any], str | None]] = _Lru(20000)
# (url, assignment id) -> (item id, whether its answer ends the bundle)
_leases: _Lru[tuple[str, int], tuple[int, bool]] = _Lru(50000)


def reset() -> None:
    """Forget every cached row and close the pools (tests: a database emptied under us)."""
    for c in (_studies, _items, _leases):
        c.clear()
    for url in list(_urls):
        _engine(url).dispose()
    _urls.clear()
    _engine.cache_clear()


_urls: set[str] = set()


def forget_study(url: str, slug: str) -> None:
    _studies.drop((url, slug))


def enabled(url: str) -> bool:
    return url.startswith("postgresql")


@lru_cache
def _engine(url: str) -> Engine:
    from sqlalchemy import create_engine

    _urls.add(url)
    # Its own pool: autocommit (each statement its own transaction) and no pre-ping (a broken
    # connection is found by the statement itself, and _run tries once more). Small: a
    # statement holds its connection for milliseconds (DB_HOT_POOL_SIZE, app/config.py); a
    # burst waits for one, at most DB_POOL_TIMEOUT, and is then answered 503 (_connect).
    settings = get_settings()
    return create_engine(
        url,
        pool_size=settings.db_hot_pool_size,
        max_overflow=0,
        pool_timeout=settings.db_pool_timeout,
        isolation_level="AUTOCOMMIT",
        pool_reset_on_return=None,
        connect_args=pg_connect_args(url),  # a server that never answers: 503 in seconds
    )


def _connect(url: str) -> PoolProxiedConnection:
    """A pooled connection; the server down or refusing, or the pool still empty after
    DB_POOL_TIMEOUT (a burst past what the pool holds), raise as the engine's errors do: the
    app answers 503 with Retry-After, and the client tries again shortly."""
    import psycopg
    from sqlalchemy.exc import OperationalError, TimeoutError

    try:
        return _engine(url).raw_connection()
    except psycopg.OperationalError as exc:
        raise OperationalError("connect", None, exc) from exc
    except TimeoutError as exc:
        raise OperationalError("connect: no free connection in the pool", None, exc) from exc


@lru_cache(maxsize=64)
def _compact(sql: str) -> str:
    """The statement without its comments and runs of blanks. psycopg keeps the parsed form of
    a query only up to 4 KB; the longer statements here would be parsed again (a regex pass
    over the whole text) at every call, about a tenth of a request's CPU."""
    out, i, n, quote = [], 0, len(sql), False
    while i < n:
        c = sql[i]
        if quote:
            out.append(c)
            quote = c != "'"
        elif c == "'":
            out.append(c)
            quote = True
        elif sql.startswith("--", i):
            i = sql.find("\n", i)
            i = n if i < 0 else i
            continue
        elif c.isspace():
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


@lru_cache(maxsize=1)
def _refusals() -> tuple[type[Exception], ...]:
    """The errors by which PostgreSQL refuses a statement of the hot path, having changed
    nothing: a unique key (a lease or an answer another request made first) or a lock. The
    caller then takes the engine's path, which answers the case. (psycopg is imported late
    here, as everywhere in this module: SQLite never loads it.)"""
    from psycopg import errors

    return (errors.IntegrityError, errors.DeadlockDetected, errors.LockNotAvailable, errors.SerializationFailure)


def _attempt(url: str, what: str, work: Callable[[psycopg.Connection[Row]], T]) -> T | None:
    """`work(connection)` on a pooled connection of the hot path: its result, or None when
    refused (_refusals). A broken connection is dropped and `work` tried once more on a fresh
    one: every statement here is idempotent, and a broken one committed nothing (the retry
    finds the lease still open, or replays the stored answer). Broken twice, it raises as the
    engine's errors do: the app answers 503 with Retry-After, and the client tries again."""
    import psycopg
    from sqlalchemy.exc import OperationalError

    for attempt in (0, 1):
        raw = _connect(url)
        # A pooled connection just checked out: psycopg's (SQLAlchemy types it Any, None once detached).
        conn = cast("psycopg.Connection[Row]", raw.driver_connection)
        try:
            return work(conn)
        except _refusals():  # before OperationalError: a deadlock or a lock refused is one too
            return None
        except psycopg.OperationalError as exc:
            raw.invalidate()
            if attempt:
                raise OperationalError(what[:80], None, exc) from exc
        finally:
            # Never hand a connection inside a transaction back to the pool (_run_end opens
            # one; autocommit statements leave none).
            if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                try:
                    conn.execute("ROLLBACK")
                except psycopg.Error:
                    raw.invalidate()
            raw.close()
    return None


def _run(url: str, sql: str, params: dict[str, Any], client: bool = False) -> Row | None:
    """One statement, its first row; None when refused (the caller takes the engine path).
    `client`: several statements bound in the client and sent as one query (one round trip,
    one implicit transaction): the first row of the last statement."""
    sql = _compact(sql)

    def work(conn: psycopg.Connection[Row]) -> Row | None:
        if not client:
            return conn.execute(sql, params).fetchone()
        import psycopg

        cur = psycopg.ClientCursor(conn)
        cur.execute(sql, params)
        while cur.nextset():
            pass
        return cur.fetchone()

    return _attempt(url, sql, work)


# Each operation is a generator that yields (sql, params) and receives the row, run by _drive
# on a pooled connection. (Async endpoints on psycopg's async pool drove the same generators:
# they measured no faster here, docs/benchmarks.md, and were taken out.)

P = ParamSpec("P")


def _study_operation(
    steps: Callable[Concatenate[str, StudyConf, P], Generator[Step, Row | None, T]],
) -> Callable[Concatenate[str, StudyConf, P], T]:
    """A study's operation from its steps, as contextlib.contextmanager makes a context manager
    from a generator: called with the same arguments, it runs them (_drive) and returns what the
    steps return."""

    @functools.wraps(steps)
    def run(url: str, conf: StudyConf, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return _drive(url, steps(url, conf, *args, **kwargs), conf)

    return run


def _study_steps(url: str, slug: str) -> Generator[Step, Row | None, StudyConf | None]:
    key = (url, slug)
    conf = _studies.get(key)
    if conf is None:
        row = yield STUDY_SQL, {"slug": slug}
        if row is None:
            return None
        conf = _study_conf(slug, row)
        _studies.put(key, conf)
    return conf


def _study_conf(slug: str, row: Row) -> StudyConf:
    """The texts a worker is shown are app.studies.consent's functions of the Study (one definition,
    the engine's): given a transient Study of the columns they read."""
    from app.studies.models import Study

    (
        id_,
        kind,
        kind_settings,
        version,
        title,
        instructions,
        researchers_consent,
        contact,
        minutes,
        payment,
        completion_code,
        redirect_url,
        adaptive,
        check,
    ) = row
    shown = Study(consent_text=researchers_consent, contact=contact, estimated_minutes=minutes, payment=payment)
    return StudyConf(
        id=id_,
        slug=slug,
        kind=kind,
        kind_settings=kind_settings or {},
        version=version,
        title=title,
        instructions=instructions,
        consent=consent_text(shown),
        consent_details=tuple(consent_details(shown)),
        consent_version=consent_version(shown),
        completion_code=completion_code,
        redirect_url=redirect_url or "",
        adaptive=bool(adaptive),
        check=bool(check),
    )


def _now() -> datetime:
    """The app's clock, the engine's own (assignment.utcnow), passed into every statement that
    stamps or compares a time: PostgreSQL's now() is the database machine's clock, and a lease
    must be judged expired by one clock whichever path made it or looks at it."""
    from app.studies import assignment

    return assignment.utcnow()


def _seen(url: str, conf: StudyConf, version: str | None) -> None:
    if version != conf.version:  # changed, or gone
        forget_study(url, conf.slug)


@_study_operation
def next_lease(
    url: str, conf: StudyConf, bundle_id: int, browser: str | None
) -> Generator[Step, Row | None, Lease | None]:
    """The bundle's current lease or a new one, in one statement; None: take the engine path."""
    sql = NEXT_ADAPTIVE_SQL if conf.adaptive else NEXT_SQL
    row = yield sql, {"bundle": bundle_id, "study": conf.id, "browser": browser, "now": _now()}
    if row is None:  # no such bundle in this study (or the cached study is gone): read it again
        forget_study(url, conf.slug)
        stats["next_engine"] += 1
        return None
    ok, version, n_done, size, a_id, new, slot, expired, item_id, payload, reference = row
    _seen(url, conf, version)
    if not ok or a_id is None or expired or item_id is None:
        stats["next_engine"] += 1
        return None
    stats["next"] += 1
    _items.put((url, item_id), (payload, reference))
    _leases.put((url, a_id), (item_id, n_done + 1 >= size))
    return Lease(assignment_id=a_id, new=new, slot=slot, n_done=n_done, size=size, item_id=item_id, payload=payload)


@_study_operation
def submit(
    url: str,
    conf: StudyConf,
    bundle_id: int,
    assignment_id: int,
    response: dict[str, Any],
    key: str,
    client: dict[str, Any],
    browser: str | None,
) -> Generator[Step, Row | None, Stored | None]:
    """Store the answer to the bundle's live lease in one statement: the annotation's id (and
    whether it ended the bundle), or None (nothing stored: take the engine path, which also
    answers an answer the kind refuses, after its own checks of the worker and the study)."""
    from psycopg.types.json import Jsonb

    from app.kinds import get_kind

    if not key or len(key) > 64 or "\x00" in key:
        return None  # the engine refuses it with its message
    item_id, last = _leases.get((url, assignment_id)) or (None, False)
    cached = _items.get((url, item_id)) if item_id is not None else None
    if cached is None:  # leased by another process, or before a restart: one read more
        stats["item_read"] += 1
        row = yield ITEM_SQL, {"assignment": assignment_id, "bundle": bundle_id}
        if row is None:
            stats["submit_engine"] += 1
            return None
        item_id, cached, last = row[0], (row[1], row[2]), row[3]
        _items.put((url, item_id), cached)
    payload, reference_text = cached
    assert item_id is not None  # known with `cached` (the lease's, or read with it)
    reference = json.loads(reference_text) if reference_text is not None else None
    kind = get_kind(conf.kind)
    try:
        parsed = kind.parse_response(response, payload=payload, settings=conf.kind_settings or {})
    except InputError:
        # Refused here, before any statement checked the browser, the study's state or version
        # and the worker: the engine checks those first and parses under the study's current
        # settings, so its answer (403, 409 or this 422) is the one to give.
        forget_study(url, conf.slug)
        stats["submit_engine"] += 1
        return None
    scores = kind.score_details(payload, reference, parsed)
    row = yield (
        SUBMIT_END_SQL if last else SUBMIT_SQL,
        {
            "bundle": bundle_id,
            "study": conf.id,
            "version": conf.version,
            "browser": browser,
            "assignment": assignment_id,
            "item": item_id,
            "reference": reference_text,
            "response": Jsonb(parsed),
            "score": kind.score(payload, reference, parsed),
            # None as JSON null, as the ORM stores it (JSON(none_as_null=False)).
            "scores": Jsonb(scores),
            "client": Jsonb(client or {}),
            "key": key,
            "now": _now(),
        },
    )
    annotation_id, _, version = row[:3] if row is not None else (None, None, conf.version)
    _seen(url, conf, version)
    if annotation_id is None:
        _items.drop((url, item_id))  # its reference may have changed: read it again next time
        stats["submit_engine"] += 1
        return None
    stats["submit"] += 1
    _leases.drop((url, assignment_id))
    if last:
        assert row is not None  # annotation_id came from it
        return Stored(annotation_id, ended=True, n_done=row[1], size=row[4], external_assignment_id=row[5])
    return Stored(annotation_id)


def _run_end(url: str, conf: StudyConf, params: dict[str, Any]) -> Row | None:
    """The bundle's last answer and the automatic review, in one transaction of two round trips
    on the hot path's own connection: `BEGIN; <the answer>; <the worker's gold record>` as one
    query (the record's statement runs after the answer's locks, on a fresh snapshot, so it sees
    what the engine's auto_review would read), the kind's verdict in Python (the same rule as
    app/quality/service.auto_review: only a pending worker no admin reviewed, never an automatic
    rejection), then `COMMIT`, or the approval, its audit entry and `COMMIT` as one query."""
    import psycopg
    from psycopg.types.json import Jsonb

    from app.kinds import get_kind
    from app.kinds.base import GoldResult

    def work(conn: psycopg.Connection[Row]) -> Row | None:
        cur = psycopg.ClientCursor(conn)
        cur.execute("BEGIN;\n" + SUBMIT_END_SQL + ";\n" + GOLD_SQL, params)
        cur.nextset()
        row = cur.fetchone()
        cur.nextset()
        record = cur.fetchone()
        if row is None or row[0] is None or record is None:
            conn.execute("ROLLBACK")
            return row
        participant_id, reviewable, gold = record
        verdict, reason = None, ""
        if reviewable:
            verdict, reason = get_kind(conf.kind).auto_review(
                [GoldResult(item=e, score=sc, scores=d) for e, sc, d in gold], conf.kind_settings or {}
            )
        if verdict == "approved":
            psycopg.ClientCursor(conn).execute(
                APPROVE_SQL,
                {
                    "participant": participant_id,
                    "target": str(participant_id),
                    "reason": reason,
                    "now": params["now"],
                    "detail": Jsonb({"study": conf.id, "reason": reason, "auto": True}),
                },
            )
        else:
            conn.execute("COMMIT")
        return row

    return _attempt(url, SUBMIT_END_SQL, work)


def _drive(url: str, steps: Generator[Step, Row | None, T], conf: StudyConf | None = None) -> T:
    try:
        sql, params = next(steps)
        while True:
            if sql is SUBMIT_END_SQL:
                assert conf is not None  # only submit's steps end a bundle; _study_operation passes its study
                row = _run_end(url, conf, params)
            else:
                row = _run(url, sql, params)
            sql, params = steps.send(row)
    except StopIteration as done:
        value: T = done.value  # the generator's return value
        return value


def study(url: str, slug: str) -> StudyConf | None:
    """The study of this slug, read once per version per process (entry, consent, next and
    submit share the one read); None: no such study (the engine's 404)."""
    return _drive(url, _study_steps(url, slug))


# ---- entry and consent ------------------------------------------------------------------
#
# Entry is several statements sent as one query (one round trip): psycopg's client-side binding
# sends them in one simple-protocol message, which PostgreSQL runs as one implicit transaction,
# each statement on a fresh snapshot (READ COMMITTED). That is what the caps need: the worker's
# participant row is locked first (as the engine does before it creates a bundle), and only the
# statement after the lock counts their bundles, so two entries of one worker at once cannot
# both see "no bundle yet". The get-or-creates are INSERT ... ON CONFLICT DO NOTHING: a row
# another entry is inserting is waited for, and the next statement sees it.

ENTER_SQL = """
-- Only into a live study of the cached version: an entry the engine would refuse for the
-- study's state leaves no worker or participant behind (the engine's transaction rolls back).
INSERT INTO users (role, name, platform, external_id, pseudonym, created_at, session_version)
SELECT 'worker', '', %(platform)s, %(ext)s, %(pseudonym)s, %(now)s, 0
WHERE EXISTS (SELECT 1 FROM studies WHERE id = %(study)s AND state = 'live' AND xmin::text = %(version)s)
ON CONFLICT (platform, external_id) DO NOTHING;
INSERT INTO participants (study_id, worker_id, status, reason, created_at)
SELECT %(study)s, u.id, 'pending', '', %(now)s FROM users u
WHERE u.platform = %(platform)s AND u.external_id = %(ext)s
  AND EXISTS (SELECT 1 FROM studies WHERE id = %(study)s AND state = 'live' AND xmin::text = %(version)s)
ON CONFLICT (study_id, worker_id) DO NOTHING;
-- One new bundle at a time per worker: the lock the engine takes (only when there is no bundle
-- to resume: resuming locks nothing, so the lock order bundle -> participant holds).
SELECT p.id FROM participants p JOIN users u ON u.id = p.worker_id
WHERE u.platform = %(platform)s AND u.external_id = %(ext)s AND p.study_id = %(study)s
  AND NOT EXISTS (SELECT 1 FROM bundles b WHERE b.study_id = %(study)s AND b.worker_id = u.id
                  AND b.external_assignment_id = %(assignment)s)
FOR UPDATE OF p;
WITH s AS (
    SELECT state, xmin::text AS version, bundle_size, gold_rate, lease_seconds,
           max_bundles_per_worker AS cap, max_open_bundles_per_ip AS ip_cap
    FROM studies WHERE id = %(study)s
), w AS (
    SELECT id FROM users WHERE platform = %(platform)s AND external_id = %(ext)s
), p AS (
    SELECT id, status FROM participants WHERE study_id = %(study)s AND worker_id = (SELECT id FROM w)
), mine AS (
    SELECT id, size, n_done, consented_at, browser_hash FROM bundles
    WHERE study_id = %(study)s AND worker_id = (SELECT id FROM w)
      AND external_assignment_id = %(assignment)s
), ok AS (
    -- The engine's refusals before it looks for the bundle: a study not live, a rejected worker.
    SELECT s.*, p.id AS participant_id FROM s, p
    WHERE s.version = %(version)s AND s.state = 'live' AND p.status <> 'rejected'
), go AS (
    -- _admit: no bundle of theirs bound to another browser, under the bundles per worker,
    -- under the bundles open at once from this address; only consented bundles count (an
    -- entry never agreed to holds nothing; consent binds the browser and checks again).
    SELECT ok.* FROM ok
    WHERE NOT EXISTS (SELECT 1 FROM mine)
      AND NOT EXISTS (SELECT 1 FROM bundles b WHERE b.study_id = %(study)s
                      AND b.worker_id = (SELECT id FROM w) AND b.consented_at IS NOT NULL
                      AND b.browser_hash IS NOT NULL AND b.browser_hash <> %(browser)s)
      AND (SELECT count(*) FROM bundles b WHERE b.study_id = %(study)s
           AND b.worker_id = (SELECT id FROM w) AND b.consented_at IS NOT NULL) < ok.cap
      AND (SELECT count(*) FROM bundles b WHERE b.study_id = %(study)s AND b.ip_hash = %(address)s
           AND b.finished_at IS NULL AND b.consented_at IS NOT NULL
           AND (b.consented_at > %(now)s - make_interval(secs => ok.lease_seconds)
                OR EXISTS (SELECT 1 FROM assignments a WHERE a.bundle_id = b.id
                           AND a.state = 'leased' AND a.lease_expires_at > %(now)s))) < ok.ip_cap
), made AS (
    INSERT INTO bundles (study_id, worker_id, external_assignment_id, participant_id, hit_id,
                         size, gold_slots, n_done, browser_hash, ip_hash, created_at)
    SELECT %(study)s, (SELECT id FROM w), %(assignment)s, go.participant_id, %(hit)s,
           go.bundle_size,
           -- round(size x gold rate) slots (a double rounds half to even, as Python's round
           -- does): those of the smallest md5 of "salt:worker:slot", sorted, the engine's rule
           -- (assignment.gold_slots), so both paths place one bundle's gold alike.
           (SELECT coalesce(jsonb_agg(x ORDER BY x), '[]'::jsonb) FROM (
                SELECT x FROM generate_series(0, go.bundle_size - 1) x
                ORDER BY md5(%(gold_salt)s || ':' || (SELECT id FROM w)::text || ':' || x::text)
                         COLLATE "C", x
                LIMIT round(go.bundle_size * go.gold_rate)::int) g),
           0, NULL, %(address)s, %(now)s
    FROM go RETURNING id, size, n_done
)
SELECT coalesce(made.id, mine.id), coalesce(made.size, mine.size),
       coalesce(made.n_done, mine.n_done), mine.consented_at IS NOT NULL,
       made.id IS NOT NULL, mine.browser_hash = %(browser)s,
       EXISTS (SELECT 1 FROM ok), (SELECT version FROM s)
FROM (SELECT 1) one LEFT JOIN made ON true LEFT JOIN mine ON true
"""

# Consent: the bundle's first agreement to the text the worker was shown (checked in Python
# against the cached text's version, and here that the study is still that version), which
# binds it to the consenting browser. Three statements, one round trip, as the engine's
# `consent`: the bundle locked, then the participant (one consent of the worker at a time),
# then, on a fresh snapshot, the caps: no other consented bundle of theirs with another (or no)
# browser, fewer than the bundles per worker, fewer open at once from the bundle's address
# (assignment._admit). Anything else takes the engine path.
CONSENT_SQL = """
SELECT id FROM bundles WHERE id = %(bundle)s AND study_id = %(study)s FOR UPDATE;
SELECT p.id FROM participants p JOIN bundles b ON b.participant_id = p.id
WHERE b.id = %(bundle)s FOR UPDATE OF p;
UPDATE bundles b SET consented_at = %(now)s, consent_version = %(shown)s, browser_hash = %(browser)s
FROM studies s
WHERE b.id = %(bundle)s AND b.study_id = %(study)s AND s.id = %(study)s
  AND s.xmin::text = %(version)s AND b.consented_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM bundles o WHERE o.study_id = b.study_id AND o.worker_id = b.worker_id
                  AND o.id <> b.id AND o.consented_at IS NOT NULL
                  AND o.browser_hash IS DISTINCT FROM %(browser)s)
  AND (SELECT count(*) FROM bundles o WHERE o.study_id = b.study_id AND o.worker_id = b.worker_id
       AND o.id <> b.id AND o.consented_at IS NOT NULL) < s.max_bundles_per_worker
  AND (b.ip_hash IS NULL OR (SELECT count(*) FROM bundles o WHERE o.study_id = b.study_id
       AND o.ip_hash = b.ip_hash AND o.id <> b.id AND o.finished_at IS NULL AND o.consented_at IS NOT NULL
       AND (o.consented_at > %(now)s - make_interval(secs => s.lease_seconds)
            OR EXISTS (SELECT 1 FROM assignments a WHERE a.bundle_id = o.id
                       AND a.state = 'leased' AND a.lease_expires_at > %(now)s))) < s.max_open_bundles_per_ip)
RETURNING b.id
"""


@dataclass(frozen=True)
class Entered:
    bundle_id: int
    size: int
    n_done: int
    consented: bool


stats.update({"enter": 0, "enter_engine": 0, "consent": 0, "consent_engine": 0})


def enter(
    url: str,
    info: StudyConf,
    platform: str,
    external_worker_id: str,
    external_assignment_id: str,
    hit_id: str,
    browser: str,
    address: str,
) -> Entered | None:
    """Find or start the worker's bundle in one round trip; None: nothing refused here, take the
    engine path (it gives the refusal's message, or finds the bundle an entry made meanwhile)."""
    from app.studies.assignment import gold_salt, pseudonym

    row = _run(
        url,
        ENTER_SQL,
        {
            "study": info.id,
            "version": info.version,
            "platform": platform,
            "ext": external_worker_id,
            "pseudonym": pseudonym(platform, external_worker_id),
            "assignment": external_assignment_id,
            "hit": hit_id,
            "browser": browser,
            "address": address,
            "now": _now(),
            "gold_salt": gold_salt(info.id, external_assignment_id),
        },
        client=True,
    )
    if row is None:
        stats["enter_engine"] += 1
        return None
    bundle_id, size, n_done, consented, made, same_browser, ok, version = row
    if version != info.version:
        forget_study(url, info.slug)
    # A bundle not consented to is bound to no browser; a consented one to its own only (one
    # the researcher released, models.RELEASED, the engine binds to this browser).
    if bundle_id is None or not ok or not (made or not consented or same_browser):
        stats["enter_engine"] += 1
        return None
    stats["enter"] += 1
    return Entered(bundle_id=bundle_id, size=size, n_done=n_done, consented=bool(consented))


def consent(url: str, info: StudyConf, bundle_id: int, shown: str, browser: str | None) -> bool:
    """Record the first consent to the text of `shown` in one statement; False: take the engine
    path (consent given before, a changed text, another browser: it answers as it always did)."""
    import hmac

    if browser is None or not hmac.compare_digest(str(shown or "").encode(), info.consent_version.encode()):
        stats["consent_engine"] += 1
        return False
    row = _run(
        url,
        CONSENT_SQL,
        {
            "bundle": bundle_id,
            "study": info.id,
            "version": info.version,
            "shown": info.consent_version,
            "browser": browser,
            "now": _now(),
        },
        client=True,
    )
    if row is None:
        forget_study(url, info.slug)  # the study may have changed: read it again
        stats["consent_engine"] += 1
        return False
    stats["consent"] += 1
    return True

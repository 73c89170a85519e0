"""Background jobs: one table, one way to run a job, two transports.

The web side only creates a Job row and enqueues its id by task name. In production a
Celery worker (`workers/tasks.py`) picks it up from Redis; in the embedded default a thread
of the web process polls the table. Either way `run_job` does the work, so both paths run
the same code. Handlers are named by dotted path so the web side never imports `workers`.
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, ForeignKey, String, Text, func, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.config import get_settings
from app.db import Base, get_sessionmaker, unavailable, utcnow
from app.errors import Conflict

log = logging.getLogger(__name__)

# The core's jobs, task name -> "module:function"; the function takes (session, job, progress).
# Each kind adds its own as "<kind>.<job>" (TaskKind.jobs).
CORE_HANDLERS: dict[str, str] = {
    "export": "app.studies.exports:run_export",
    # Dawid-Skene labels and annotators' confusion matrices, cached in the job's row
    # (app/leaderboards/annotators.py).
    "dawid_skene": "app.leaderboards.annotators:run_job",
}
CORE_QUEUES: dict[str, str] = {"export": "exports", "dawid_skene": "exports"}


def handlers() -> dict[str, str]:
    from app.kinds import job_handlers

    return {**CORE_HANDLERS, **job_handlers()}


def queues() -> dict[str, str]:
    """Task name -> the queue it waits in. Two queues, each with its own Celery queue
    (`proctor.<queue>`) so a deployment can give them separate workers: "models" (uploaded and
    trained models: validation, generation, training; long, GPU) and "exports" (exports and
    aggregation). An export never waits behind a six-hour generation run."""
    from app.kinds import job_queues

    return {**CORE_QUEUES, **job_queues()}


def celery_queue(queue: str) -> str:
    return f"proctor.{queue}"


# A running job whose heartbeat (its last progress report) is older than this is taken to have
# lost its worker (killed mid-job); a redelivered message may then claim it again. Handlers
# must be idempotent (generation skips the paths it has stored) and report progress more often.
STALE_AFTER_S = 900
# A job whose worker died this many times (killed, out of memory) fails instead of running again.
MAX_ATTEMPTS = 3
# A queued job no worker has claimed for this long lost its message (or was never sent): the
# sweeper sends it again (claiming is atomic, so a second message never runs it twice).
RESEND_AFTER_S = 300
CELERY_TASK = "proctor.run_job"
SWEEP_TASK = "proctor.sweep_jobs"


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(primary_key=True)
    task: Mapped[str] = mapped_column(String(64))
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    state: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    params: Mapped[dict] = mapped_column(default=dict)  # type: ignore[type-arg]  # JSON (app.db)
    done: Mapped[int] = mapped_column(default=0)
    total: Mapped[int] = mapped_column(default=0)
    log: Mapped[str] = mapped_column(Text, default="")
    result: Mapped[dict] = mapped_column(default=dict)  # type: ignore[type-arg]  # JSON (app.db)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()
    heartbeat_at: Mapped[datetime | None] = mapped_column()
    # A failed job's traceback: server paths and code, for admins and the log, never its owner.
    traceback: Mapped[str | None] = mapped_column(Text)
    # Times a worker has claimed it (a second claim means the first worker died).
    attempts: Mapped[int] = mapped_column(default=0, server_default="0")

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else (1.0 if self.state == "done" else 0.0)


def create_job(
    session: Session, task: str, *, study_id: int | None = None, owner_id: int | None = None, **params: Any
) -> Job:
    if task not in handlers():
        raise ValueError(f"unknown task {task!r}")
    job = Job(task=task, study_id=study_id, owner_id=owner_id, params=params)
    session.add(job)
    session.flush()
    return job


def cancel(session: Session, job: Job, reason: str = "cancelled by the researcher") -> Job:
    """Mark a queued or running job cancelled; a running handler sees it at its next check and
    stops (what it stored stays). Commits. Conflict (409) for a job that has already ended: the
    request is well formed, the job's state refuses it (round 16 of issue 26: a 422, which the
    schema does not allow for a valid request, was what schemathesis's every check caught)."""
    if job.state not in ("queued", "running"):
        raise Conflict(f"the job is {job.state}: only a queued or running job can be cancelled", field="state")
    job.state, job.finished_at = "cancelled", utcnow()
    job.log += reason + "\n"
    session.commit()
    return job


# How long enqueue waits for each answer from Redis (issue 26, re-attack round 12).
BROKER_SOCKET_TIMEOUT_S = 3


class BrokerUnavailable(RuntimeError):
    """The job queue (Redis) cannot be reached; the caller withdraws what it stored and the
    request answers 503 with Retry-After (app/error_pages.py)."""


def enqueue(job_id: int, task: str | None = None) -> None:
    """Call after the job's row is committed. Raises BrokerUnavailable, quickly, when the
    broker cannot be reached (the caller then withdraws the job: see submit).

    The message is a turn in the job's queue, not an order to run that job: the worker that
    takes it runs the queue's fairest job (claim_next), so one researcher's hundred jobs do not
    starve another's one. Each job sends one message, so every queued job gets a turn."""
    settings = get_settings()
    if settings.redis_url:
        if task is None:
            with get_sessionmaker()() as s:
                task = s.scalar(select(Job.task).where(Job.id == job_id))
        queue = celery_queue(queues().get(task, "models") if task is not None else "models")  # None: the job is gone
        from celery import Celery  # only the client side: no task code is imported
        from kombu.exceptions import OperationalError

        client = Celery(broker=settings.redis_url)
        client.conf.broker_connection_timeout = 3
        # A Redis that takes the connection and never answers (stopped, hung, cut off after the
        # handshake) held the request for good: each read waits BROKER_SOCKET_TIMEOUT_S at most.
        client.conf.broker_transport_options = {"socket_timeout": BROKER_SOCKET_TIMEOUT_S}
        try:
            client.send_task(
                CELERY_TASK,
                args=[job_id],
                queue=queue,
                retry=True,
                retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 1},
            )
        except (OperationalError, OSError) as exc:
            raise BrokerUnavailable(
                f"the job queue cannot be reached ({type(exc).__name__}): nothing was started; try again in a minute"
            ) from exc
    else:
        _wake.set()


# Each Celery worker's main process marks every queue it reads, in Redis, every
# CONSUMER_BEAT_S seconds, for CONSUMER_TTL_S (workers/celery_app.py): a queue with no mark has
# no worker, and the pages that list its jobs say so (a job there waits until one starts).
CONSUMER_KEY = "proctor:consumers:{queue}"
CONSUMER_BEAT_S = 30
CONSUMER_TTL_S = 90
_CONSUMERS_CACHE_S = 15.0
_consumers_cache: dict[str, tuple[float, bool]] = {}


def queues_without_worker(names: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """Of the queues `names` ("models", "exports"; all when None), those no Celery worker has
    read for CONSUMER_TTL_S. Cheap: one Redis read per queue, at most every 15 s, with a
    half-second timeout; [] without Redis (the in-process worker reads every queue) or when
    Redis cannot be asked (the job queue itself is then what is missing)."""
    from app.kinds import QUEUES

    settings = get_settings()
    if not settings.redis_url:
        return []
    names = list(QUEUES if names is None else names)
    now = time.monotonic()
    stale = [q for q in names if now - _consumers_cache.get(q, (-1e9, True))[0] > _CONSUMERS_CACHE_S]
    if stale:
        import redis

        try:
            client = redis.Redis.from_url(settings.redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
            try:
                found = client.mget([CONSUMER_KEY.format(queue=q) for q in stale])
            finally:
                client.close()
        except Exception as exc:  # noqa: BLE001 - a page never fails for want of this note
            log.info("cannot tell which queues have a worker: %s", exc)
            found = ["unknown"] * len(stale)  # nothing to say; ask again in 15 s
        for q, mark in zip(stale, found):
            _consumers_cache[q] = (now, mark is not None)
    return [q for q in names if not _consumers_cache[q][1]]


def submit(
    session: Session,
    job: Job,
    *,
    withdraw: tuple[tuple[type[Any], int], ...] = (),
    cleanup: Callable[[], object] | None = None,
) -> Job:
    """Commit the job and send it to the queue. When the queue cannot be reached, delete what
    was made for it (the rows `withdraw` names as (Model, id) pairs, then the job; `cleanup()`
    for what is not a row, e.g. a stored blob), so nothing is left waiting for a worker that
    will never come, and raise BrokerUnavailable (the request answers 503)."""
    session.commit()
    try:
        enqueue(job.id, job.task)
    except BrokerUnavailable:
        session.rollback()
        rows: tuple[tuple[type[Any], int], ...] = (*withdraw, (Job, job.id))
        for model, row_id in rows:
            if (row := session.get(model, row_id)) is not None:
                session.delete(row)
                session.flush()  # in order: a row that points at the job goes first
        session.commit()
        if cleanup is not None:
            cleanup()
        raise
    return job


def _job(s: Session, job_id: int) -> Job:
    # A claimed job's row: only its study's deletion (ON DELETE CASCADE) takes it meanwhile, and
    # then the caller fails on the None as it always has (no check of its own).
    return cast(Job, s.get(Job, job_id))


class Progress:
    """Handed to handlers: updates are committed in their own session so pages see them."""

    def __init__(self, job_id: int):
        self.job_id = job_id

    def __call__(self, done: int, total: int | None = None, message: str | None = None) -> None:
        with get_sessionmaker()() as s:
            job = _job(s, self.job_id)
            job.done = done
            job.heartbeat_at = utcnow()
            if total is not None:
                job.total = total
            if message:
                job.log += redact(message.rstrip()) + "\n"
            s.commit()

    def cancelled(self) -> bool:
        """Whether the job was cancelled meanwhile: a handler checks between batches and
        returns early (what it stored stays)."""
        with get_sessionmaker()() as s:
            return _job(s, self.job_id).state == "cancelled"


def run_job(job_id: int, stale_after: float | None = None) -> str:
    """Claim and run one job; safe to call twice (a retried delivery finds it claimed).

    With `stale_after` (seconds), a job still "running" with no heartbeat for that long (its
    worker was killed) is claimed again. A job cancelled while it runs stays "cancelled"."""
    with get_sessionmaker()() as s:
        claimable = Job.state == "queued"
        if stale_after is not None:
            cutoff = utcnow() - timedelta(seconds=stale_after)
            claimable = claimable | (
                (Job.state == "running") & (func.coalesce(Job.heartbeat_at, Job.started_at) < cutoff)
            )
        if not _claim(s, job_id, claimable):
            state = s.scalar(select(Job.state).where(Job.id == job_id))
            # "busy": another worker holds it with a fresh heartbeat (the caller may look again
            # later); "skipped": it has ended, or is gone.
            return "busy" if state == "running" else "skipped"
    return _execute(job_id)


def run_turn(job_id: int, stale_after: float | None = None) -> str:
    """What a queue message does (workers/tasks.py): run the fairest queued job of the queue
    `job_id` waits in, which may be another researcher's; when none is queued, look after
    `job_id` itself (a redelivery after its worker died, see run_job)."""
    with get_sessionmaker()() as s:
        task = s.scalar(select(Job.task).where(Job.id == job_id))
    if task is not None and (claimed := claim_next(queues().get(task, "models"))) is not None:
        return _execute(claimed)
    return run_job(job_id, stale_after=stale_after)


def claim_next(queue: str | None = None) -> int | None:
    """Claim the fairest queued job of `queue` (every queue when None) and return its id.

    Fair between owners: first the owner with the fewest jobs running in the queue, then the
    one served longest ago (round robin), then the oldest job. Two workers asking at once may
    pick the same job; the claim is atomic, so the loser picks again."""
    # "models" is every task but the exports queue's, so a job whose kind is gone is still
    # claimed (and fails, saying why) instead of waiting forever.
    exports = [t for t, q in queues().items() if q == "exports"]
    in_queue = (
        Job.id.is_not(None)
        if queue is None
        else Job.task.in_(exports)
        if queue == "exports"
        else Job.task.not_in(exports)
    )
    owner = func.coalesce(Job.owner_id, 0)  # jobs started from the command line: one owner
    with get_sessionmaker()() as s:
        for _ in range(5):
            oldest = dict(
                s.execute(
                    select(owner, func.min(Job.id))
                    .where(Job.state == "queued", in_queue, Job.attempts < MAX_ATTEMPTS)
                    .group_by(owner)
                ).all()
            )
            if not oldest:
                return None
            running = dict(
                s.execute(select(owner, func.count()).where(Job.state == "running", in_queue).group_by(owner)).all()
            )
            served = dict(
                s.execute(
                    select(owner, func.max(Job.started_at))
                    .where(in_queue, Job.started_at.is_not(None), owner.in_(list(oldest)))
                    .group_by(owner)
                ).all()
            )
            # Never served sorts first; equal Nones compare equal and fall through to the id.
            order = sorted(oldest, key=lambda o: (running.get(o, 0), o in served, served.get(o), oldest[o]))
            for o in order:
                if _claim(s, oldest[o], Job.state == "queued"):
                    return oldest[o]
    return None


def _claim(s: Session, job_id: int, claimable: ColumnElement[bool]) -> bool:
    now = utcnow()
    updated = s.execute(
        update(Job)
        .where(Job.id == job_id, claimable, Job.attempts < MAX_ATTEMPTS)
        .values(state="running", started_at=now, heartbeat_at=now, attempts=Job.attempts + 1)
    )
    # An UPDATE's result is a CursorResult (Session.execute is typed with the plain Result).
    claimed = cast(CursorResult[Any], updated).rowcount
    s.commit()
    return bool(claimed)


# Paths of this machine, as an exception's text may carry them (a file not found): any absolute
# or home-relative path of two or more parts (not a URL's: no scheme or host before it), a
# bare top-level folder of the usual ones, anything under "~/", and a path relative to the
# working folder ("./var/blobs", "../../srv"). A path holds any character but a line's end, and
# may hold spaces ("/srv/my data/blobs/x.csv", "~/My  Documents/Q1, Q2/x.pt", issue 26): it runs
# on across up to seven words of its line into the last one that goes on with a slash (not a
# new path, a URL nor a fraction such as 3/4; not past a colon or semicolon ending a word, which
# ends a clause: "x.csv: expected JSON/CSV"), then into a file name with a letter extension
# right after a space ("My Documents/private notes.txt"; not "has version 1.2" nor "loaded with
# config.yaml", which are the sentence's). Punctuation that ends it belongs to the sentence. A
# last folder or a file name of several words after a space ("/srv/My Documents", "/srv/final
# model v2.pt") cannot be told from the sentence's next words. A path may start with "//" (POSIX
# and pathlib keep two; round 10 of issue 26's re-attack), unless a scheme's ":" is before it.
_PATH_START = re.compile(
    r"(?<![\w/.~])(?:(?P<alone>~[\w.-]*/\S*|\.{1,2}/\S+|(?:(?<!:)/)?/[^\s/]+/\S*"
    r"|(?:(?<!:)/)?/(?:home|root|srv|opt|usr|var|tmp|work|app|etc|proc|mnt|data)\b\S*)|/[^\s/]+)"
)
_NEXT_WORD = re.compile(r"[^\S\r\n]+(\S+)")
_FILE_NAME_AFTER = re.compile(r"[^\S\r\n]+[\w-]+\.[A-Za-z]\w{0,7}(?![\w.])")
_FRACTION = re.compile(r"[(\[]?\d+(?:\.\d+)?/\d+(?:\.\d+)?[)\].,:;%]*")
_ENDS_SENTENCE_PART = "'\",:;)]}>.!?"
_PATH_WORDS = 7


def _blank_paths(text: str) -> str:
    out, at = [], 0
    for m in _PATH_START.finditer(text):
        if m.start() < at:  # inside a path already blanked
            continue
        end, pos = m.end(), m.end()
        for _ in range(_PATH_WORDS):  # the last word of the line's next few that goes on with a slash
            if text[pos - 1] in ":;":  # "x.csv: expected JSON/CSV": the sentence's clause
                break
            word = _NEXT_WORD.match(text, pos)
            if word is None or word.group(1)[0] in "~/." or "://" in word.group(1):
                break
            pos = word.end()
            if "/" in word.group(1) and not _FRACTION.fullmatch(word.group(1)):
                end = pos
        if end == m.end() and m.group("alone") is None:  # "/api" alone is a word of the sentence
            continue
        out += [text[at : m.start()], "<path>"]
        at = _path_end(text, m.start(), end, 2)
    return "".join(out) + text[at:]


def _path_end(text: str, start: int, end: int, shortest: int) -> int:
    """Where a path found at `start` and running to `end` ends: past the file name after it,
    less the punctuation that ends the sentence (keeping at least `shortest` characters)."""
    while name := _FILE_NAME_AFTER.match(text, end):
        end = name.end()
    while end > start + shortest and text[end - 1] in _ENDS_SENTENCE_PART:
        end -= 1
    return end


# Quoted as Python's repr quotes it: the quote it chose escaped inside ('/srv/it\'s "x"/y').
_QUOTED_PATH = re.compile(r"""(['"])(?:~|\.{1,2})?/(?:\\.|(?!\1)[^\\\n])+\1""")
# A file: URL names a path too (the pattern above leaves URLs alone), and a URL's user and
# password (a database's or a bucket's address in a connection error) are credentials.
_FILE_URL = re.compile(r"\bfile:[^\s'\"<>]*", re.IGNORECASE)
# A password may hold "/" or "@" (round 8 of issue 26's re-attack showed "pa/ss" whole and
# "ss" of "p@ss"): after "user:", up to the last "@"; an "@" after the host's "/" is the path's.
# Round 15: found without backtracking (_blank_url_credentials): the pattern's scan to the last
# "@" ran from every scheme in a word, and 20 KB of "x://x://..." took 0.5 s; 1 MB, minutes.
_URL_SCHEME = re.compile(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*+://", re.IGNORECASE)
_URL_WORD_END = re.compile(r"[\s'\"<>]")
_USER_INFO_END = re.compile(r"[/@:]")
# Round 5 of issue 26's re-attack: a SQLite URL is a path; so is one relative to the working
# folder ("./var/blobs", "../../srv"); a query's token or signature, and a libpq keyword
# connection string's password, are credentials.
_SQLITE_URL = re.compile(r"\bsqlite(?:\+\w+)?:/{2,}[^\s'\"<>]*", re.IGNORECASE)
_QUERY_SECRET = re.compile(
    r"([?&](?:token|access_token|api_key|apikey|key|sig|signature|secret|password|pass|auth)=)[^&#\s'\"<>]+",
    re.IGNORECASE,
)
# Any `name=value` whose name says secret (round 8: `aws_secret_access_key=`, `session_token=`,
# a presigned URL's `X-Amz-Signature=` and `X-Amz-Credential=`), and a bearer or basic token.
# Round 14: ODBC's `Pwd=`, Azure's `AccountKey=` and `SharedAccessKey=`, `passphrase=`, and a
# private key's name (WireGuard's `PrivateKey =`).
# Round 15: read as a whole word of letters, digits, "_" and "-" that holds one of these, from
# the word's start only and without giving any back (the lookahead finds the name, the possessive
# run takes the word): "[\w-]*(?:password|...)[\w-]*" after "\b" tried every start inside a long
# word and every split of it, and 20 KB of "a-a-a-..." in a failure's text took 72 s to redact.
_SECRET_WORD = (
    r"(?:password|passwd|passphrase|pwd|secret|token|signature|credential|access_?key|account_?key"
    r"|private_?key|api[-_]?key)"
)
_SECRET_NAME = rf"(?<![\w-])(?=[\w-]*?{_SECRET_WORD})[\w-]++"
# A value: quoted (a bytes literal too: Python's repr of a mapping of bytes, round 14), or a word.
# Round 17: a quote escaped inside does not end it (repr writes a text holding both quotes with
# its ' escaped: 'a\'b"c' showed from "b" on).
# Round 18: or, when no quote of its kind ends it so, at its next quote as before (a shell
# line or an env file writes no escapes: `password="ab\"` showed whole).
_QUOTED = r"""(?:'(?:[^'\\]|\\.)*+'|"(?:[^"\\]|\\.)*+"|'[^']*+'|"[^"]*+")"""
# Round 17: and its first item when it is a list or a tuple (parse_qs's mapping of lists).
_OPENER = r"(?:[\[(]\s*)?"
_SECRET_VALUE = rf"""{_OPENER}(?:[bB]?{_QUOTED}|[^\s'"&;,]+)"""
# Round 13: double-quoted too (`password="x"` in a call, `export X_SECRET="x y"` in a shell).
# Round 14: `=>` too (Ruby's, Perl's and PHP's mappings), and a command line's `--password x` (x
# of 8 characters or with a digit: "--token or PROCTOR_TOKEN" is a sentence).
_DSN_PASSWORD = re.compile(
    rf"""({_SECRET_NAME}\s*=>?\s*|(?<![\w-])--(?=[\w-]*?{_SECRET_WORD})[\w-]++\s+(?=[^\s-]\S*\d|[^\s-]\S{{7}}))(?!>){_SECRET_VALUE}""",
    re.IGNORECASE,
)
# Round 12: the same names before a colon, as Python's repr and JSON write a mapping
# ('password': 'x', "secret_key": "x") and a header or YAML a field (x-api-key: x, SECRET_KEY: x:
# a name with "-" or "_", as "no token: set it" is a sentence); and "api-key=" too.
# Round 16: a camelCase name too (`apiKey: x`, `clientSecret: x`, a JavaScript object's or YAML's
# field; not AWS's error codes, "ExpiredToken: ..."), and a name and its quoted value as a pair in
# Python's repr (`[('password', 'x')]`, what a mapping's items() and a parsed query string show).
_MAPPED_SECRET = re.compile(
    rf"""((['"]){_SECRET_NAME}\2\s*(?::|=>)\s*|(?<![\w-])(?=[\w-]*?[-_]|(?-i:[a-z]\w*?[A-Z])){_SECRET_NAME}\s*:\s*)"""
    rf"""{_SECRET_VALUE}""",
    re.IGNORECASE,
)
# Round 17: its value quoted either way whatever it holds (a text holding ' is repr'd in double
# quotes, and showed whole), or a list of one; a pair of bytes too (a query string parsed from
# bytes, an ASGI scope's headers).
_PAIRED_SECRET = re.compile(
    rf"""(\(\s*[bB]?(['"]){_SECRET_NAME}\2,\s*){_OPENER}[bB]?{_QUOTED}(?=[\])]?\))""", re.IGNORECASE
)
_AUTHORIZATION = re.compile(r"\b((?:Bearer|Basic)\s+)[^\s'\"]+", re.IGNORECASE)
# A PEM private key's body (round 13), to its END line or, cut short, to the text's end; an
# OpenPGP one's too ("PRIVATE KEY BLOCK", round 16).
_PRIVATE_KEY = re.compile(
    r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----).*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S
)
# Round 14: a mapping quoted inside a string, its quotes escaped (JSON in a JSON string,
# \"password\": \"x\"; a repr in a repr), to the value's closing escaped quote.
_ESCAPED_SECRET = re.compile(
    rf"""((?<!\\)\\++(['"]){_SECRET_NAME}\\++\2\s*(?::|=>)\s*\\++(['"]))(?:[^\\\n]++|\\++(?!\3))*+""",
    re.IGNORECASE,
)
# ... percent-encoded (`password%3Dx`, in a URL's query), as an XML element, and a Cookie header's
# cookies (a session's among them), to the line's end or a quote.
_ENCODED_SECRET = re.compile(rf"""({_SECRET_NAME}%3D)(?:(?!%26)[^\s'"&;,<>])+""", re.IGNORECASE)
_XML_SECRET = re.compile(rf"""(<({_SECRET_NAME})>)[^<]*(?=</\2>)""", re.IGNORECASE)
_COOKIE_HEADER = re.compile(r"""\b((?:Set-)?Cookie['"]?\s*:\s*['"]?)[^\n'"]+""", re.IGNORECASE)

# Round 13b: tokens no name labels, known by their own shape (the prefix kept, to say which):
# GitHub's classic and fine-grained, Stripe's secret and restricted keys and webhook secrets,
# Slack's, Hugging Face's, GitLab's, OpenAI's and Anthropic's, Google's API keys, AWS access key
# ids (long-lived AKIA, session ASIA), and a JWT (two base64url JSON objects, "eyJ" each, and a
# signature). A digest, an id or a word beside such a prefix is not one (no prefix, or too short).
_SHAPED_TOKEN = re.compile(
    r"\b(gh[pousr]_(?=[A-Za-z0-9]{30})|github_pat_(?=\w{30})|[sr]k_(?:live|test)_(?=[A-Za-z0-9]{10})"
    r"|whsec_(?=[A-Za-z0-9]{20})|xox[abposr]-(?=[A-Za-z0-9-]{10})|xapp-(?=[A-Za-z0-9-]{10})|hf_(?=[A-Za-z]{30})"
    r"|glpat-(?=[\w-]{20})|sk-(?:proj-|ant-(?:api\d\d-)?)?(?=[\w-]{20})|AIza(?=[\w-]{35})"
    r"|(?:AKIA|ASIA)(?=[A-Z0-9]{16}\b)"
    # Round 14: npm's, PyPI's, DigitalOcean's, Shopify's, Grafana's service account tokens.
    r"|npm_(?=[A-Za-z0-9]{36})|pypi-(?=AgE[\w-]{50})|do[por]_v1_(?=[a-f0-9]{64})|shp(?:at|ss|ca|pa)_(?=[a-fA-F0-9]{32})"
    r"|glsa_(?=[A-Za-z0-9]{32}_))[\w-]+"
    r"|\beyJ[\w-]{4,}+\.eyJ[\w-]{4,}+\.[\w-]*"  # possessive: "eyJ-eyJ-..." scanned once (round 15)
    # SendGrid's (SG. and two base64url parts), Google's OAuth access tokens, Vault's tokens.
    r"|\b(SG\.)[\w-]{22}\.[\w-]{43}|\b(ya29\.)[\w-]{30,}|\b(hv[sb]\.)[\w-]{24,}"
)
# Round 13b: `Authorization:` with any scheme a server names (Token, as Django REST framework's
# and GitHub's; Digest, Bot, ApiKey, ...) or none, in a header or a mapping; "Token expired"
# alone is a sentence.
_AUTH_SCHEMES = r"(?:Bearer|Basic|Token|Digest|Bot|ApiKey|Api-Key|Key|JWT|OAuth|Negotiate|NTLM|HMAC|SSWS|GenieKey)"
_AUTHORIZATION_HEADER = re.compile(
    rf"""\b((?:Proxy-)?Authorization['"]?\s*[:=]\s*['"]?(?:{_AUTH_SCHEMES}\s+)?)[^\s'",;]+""", re.IGNORECASE
)
# Round 13b: an object store's address names a bucket and a key as a path names a folder and a
# file (s3://, gs://, Azure's and HDFS's), quoted or not (a key may hold spaces, as a path may).
_BUCKET_QUOTED = re.compile(r"""(['"])(?:s3[an]?|gs|gcs|az|abfss?|wasbs?|hdfs|oss|r2)://(?:(?!\1)[^\n])+\1""", re.I)
_BUCKET_URL = re.compile(r"\b(?:s3[an]?|gs|gcs|az|abfss?|wasbs?|hdfs|oss|r2)://[^\s'\"<>]+", re.IGNORECASE)
# Round 13b: a Windows path (a drive's "C:\" with a name of two characters or more after it, so
# a repr's "x:\n" is not one; or a UNC share's "\\server\share"), in Python's repr (its
# backslashes doubled) or not, quoted or running on across the words of its line as a path with
# "/" does (_blank_paths).
# Round 14: an extended path's "\\?\" (\\?\C:\..., \\?\UNC\server\share) starts one too.
_WINDOWS_START = r"(?:[A-Za-z]:\\{1,2}(?=[^\s'\"<>|\\]{2}|[^\s'\"<>|\\]\\)|\\{2,4}(?=[\w$.?-]+\\))"
_WINDOWS_QUOTED = re.compile(rf"""(['"])(?<![\w\\]['"]){_WINDOWS_START}(?:(?!\1)[^\n])*\1""")
_WINDOWS_PATH = re.compile(rf"""(?<![\w\\]){_WINDOWS_START}[^\s'"<>|]*""")


def _blank_url_credentials(text: str) -> str:
    """A URL's user and password blanked: after "user:", to the word's last "@" (a password may
    hold "/" or "@"); a user alone, to the first "@" if no "/" is before it."""
    out, at, word_end, last_at = [], 0, -1, -1
    for m in _URL_SCHEME.finditer(text):
        if m.start() < at:
            continue
        if m.end() > word_end:  # a word of its own: where it ends and its last "@", once
            end = _URL_WORD_END.search(text, m.end())
            word_end = end.start() if end else len(text)
            last_at = text.rfind("@", m.end(), word_end)
        if last_at < m.end():  # no "@" left in the word: no later scheme in it has one either
            continue
        first = _USER_INFO_END.search(text, m.end(), word_end)
        if first is None:
            continue
        if first.group() == ":":
            stop = last_at
        elif first.group() == "@" and first.start() > m.end():
            stop = first.start()
        else:
            continue
        out += [text[at : m.end()], "<credentials>"]
        at = stop
    return "".join(out) + text[at:]


def _bucket_path(m: re.Match[str]) -> str:
    url = m.group(0)
    kept = url.rstrip(_ENDS_SENTENCE_PART)  # punctuation that ends it is the sentence's
    return "<path>" + url[len(kept) :]


def _blank_windows_paths(text: str) -> str:
    text = _WINDOWS_QUOTED.sub(r"\1<path>\1", text)
    out, at = [], 0
    for m in _WINDOWS_PATH.finditer(text):
        if m.start() < at:
            continue
        end, pos = m.end(), m.end()
        for _ in range(_PATH_WORDS):  # the last of the line's next few words that goes on with "\"
            if text[pos - 1] in ":;":
                break
            word = _NEXT_WORD.match(text, pos)
            if word is None or _WINDOWS_PATH.match(word.group(1)) or "://" in word.group(1):
                break
            pos = word.end()
            if "\\" in word.group(1):
                end = pos
        out += [text[at : m.start()], "<path>"]
        at = _path_end(text, m.start(), end, 3)
    return "".join(out) + text[at:]


# Round 15: the most of a text redact reads. A failure's reason shows 2,000 characters; a text
# of any length (an exception quoting an uploaded value whole, as float() and KeyError do) is
# read to here, its last word dropped when cut inside it (half a token matches no rule).
REDACT_READS = 20_000


def redact(text: str) -> str:
    """What a job's owner may read of a server-side text: paths of this machine, file: URLs and
    the credentials in a URL blanked (the job's traceback keeps them, for admins)."""
    if len(text) > REDACT_READS:
        text = text[:REDACT_READS]
        text = text[: max(text.rfind(" "), text.rfind("\n"), 0)] + " [cut]"
    text = text.replace("\x00", "\\x00")  # a row holds none (app.db): written as repr writes it
    text = _PRIVATE_KEY.sub(r"\1<credentials>", text)
    text = _SHAPED_TOKEN.sub(lambda m: next((g for g in m.groups() if g), "") + "<credentials>", text)
    text = _ESCAPED_SECRET.sub(r"\1<credentials>", text)
    text = _COOKIE_HEADER.sub(r"\1<credentials>", text)
    text = _XML_SECRET.sub(r"\1<credentials>", _ENCODED_SECRET.sub(r"\1<credentials>", text))
    text = _AUTHORIZATION_HEADER.sub(r"\1<credentials>", text)
    text = _BUCKET_URL.sub(_bucket_path, _BUCKET_QUOTED.sub(r"\1<path>\1", text))
    text = _blank_windows_paths(text)
    text = _blank_url_credentials(text)
    text = _DSN_PASSWORD.sub(r"\1<credentials>", _QUERY_SECRET.sub(r"\1<credentials>", text))
    text = _PAIRED_SECRET.sub(r"\1<credentials>", _MAPPED_SECRET.sub(r"\1<credentials>", text))
    text = _AUTHORIZATION.sub(r"\1<credentials>", text)
    text = _QUOTED_PATH.sub(r"\1<path>\1", text)
    return _blank_paths(_FILE_URL.sub("<path>", _SQLITE_URL.sub("<path>", text)))


def failure_reason(exc: BaseException) -> str:
    """What a job's owner reads of its failure: the message of a refusal our code raises on
    purpose (ValueError and its InputError, LookupError, a sandbox's verdict on a model),
    redacted; for anything else only the exception's type (the traceback is in
    the log and in the job's row, for admins)."""
    shown = isinstance(exc, (ValueError, LookupError, TimeoutError)) or any(
        c.__name__ == "SandboxError" for c in type(exc).__mro__
    )
    if not shown:
        return f"an internal error ({type(exc).__name__}); an administrator can see the details"
    return redact(str(exc))[:2000]


def _execute(job_id: int) -> str:
    """Run a job this worker has claimed; record how it ended."""
    with get_sessionmaker()() as s:
        try:
            # Inside the guard: a handler that fails to import (or a kind uninstalled since the
            # job was queued) fails the job with the reason instead of leaving it running.
            job = _job(s, job_id)
            target = handlers().get(job.task)
            if target is None:
                raise LookupError(f"no installed kind offers the job {job.task!r}")
            module, func_name = target.split(":")
            handler = getattr(importlib.import_module(module), func_name)
            result = handler(s, job, Progress(job_id))
            s.commit()
        except Exception as exc:  # a failed job reports why instead of vanishing
            # The traceback names server paths and code: the log and admins get it, not the owner.
            # No U+0000 in either (round 17 of issue 26: a refusal quoting an upload's cell
            # held one, and the job's end could not be written; it stayed "running").
            failure = (failure_reason(exc), traceback.format_exc(limit=12)[-20_000:].replace("\x00", "\\x00"))
            log.exception("job %s failed", job_id)
            try:
                s.rollback()
            except SQLAlchemyError:  # the database gone: _end waits for it
                pass
            state = _end(job_id, None, failure, again=unavailable(exc))
            if state == "queued":
                try:
                    enqueue(job_id)
                except BrokerUnavailable:
                    pass  # the sweeper sends it
            return state
    return _end(job_id, result, None)


# How long the worker tries to write a job's end through a database outage (round 13b of issue
# 26): a PostgreSQL restart or failover takes seconds, and a job whose end was not written stays
# "running" until the sweeper sends it again (STALE_AFTER_S, 15 minutes) to be run again whole.
END_WRITE_RETRY_S = 30.0


def _end(job_id: int, result: dict[str, Any] | None, failure: tuple[str, str] | None, again: bool = False) -> str:
    """Write how a job ended, in a session of its own, again after 0.5, 1, 2, 4, 5, 5... s while
    the database cannot be reached, for up to END_WRITE_RETRY_S; then raise (the sweeper's
    case, as before). Written once: a retry after a commit whose answer was lost finds it.

    `again`: the job failed for want of the database (a restart under it, or it read-only): it
    is queued to run again, as the sweeper would have sent it 15 minutes later (handlers are
    idempotent), unless it has been claimed MAX_ATTEMPTS times."""
    delay, deadline = 0.5, time.monotonic() + END_WRITE_RETRY_S
    while True:
        try:
            with get_sessionmaker()() as s:
                job = _job(s, job_id)
                if job.state in ("done", "failed", "queued"):  # written already: by an attempt whose
                    return job.state  # commit's answer was lost, or the sweeper after MAX_ATTEMPTS
                if failure is None:
                    if job.state == "cancelled":  # set by the researcher meanwhile: keep it
                        job.result = result or {}
                    else:
                        job.state, job.result, job.finished_at = "done", result or {}, utcnow()
                elif again and job.state == "running" and job.attempts < MAX_ATTEMPTS:
                    job.state, job.heartbeat_at = "queued", None
                    job.log += "the database could not be reached: queued to run again\n"
                    job.traceback = failure[1]
                else:
                    if job.state != "cancelled":
                        job.state, job.finished_at = "failed", utcnow()
                    job.log += f"failed: {failure[0]}\n"
                    job.traceback = failure[1]
                s.commit()
                return job.state
        except SQLAlchemyError as exc:  # gone, or read-only for a while (a failover; round 14)
            if not unavailable(exc) or time.monotonic() + delay > deadline:
                raise
            log.warning("job %s: the database cannot be reached to record its end; again in %.1f s", job_id, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def sweep(stale_after: float = STALE_AFTER_S, resend_after: float = RESEND_AFTER_S) -> dict[str, int]:
    """What keeps jobs from hanging when a worker dies or a message is lost (run every minute by
    Celery beat, or by the in-process worker): a running job with no heartbeat for
    `stale_after` seconds is sent again, or fails after MAX_ATTEMPTS claims; a queued job nobody
    claimed for `resend_after` seconds is sent again."""
    now = utcnow()
    stale_cutoff = now - timedelta(seconds=stale_after)
    resend_cutoff = now - timedelta(seconds=resend_after)
    beat = func.coalesce(Job.heartbeat_at, Job.started_at)
    with get_sessionmaker()() as s:
        failed = s.execute(
            update(Job)
            .where(Job.state == "running", beat < stale_cutoff, Job.attempts >= MAX_ATTEMPTS)
            .values(
                state="failed",
                finished_at=now,
                log=Job.log + f"failed: its worker stopped {MAX_ATTEMPTS} times (killed, or out of "
                "memory) before it finished\n",
            )
        )
        gave_up = cast(CursorResult[Any], failed).rowcount  # an UPDATE's (as in _claim)
        resend = s.scalars(
            select(Job.id)
            .where(
                ((Job.state == "running") & (beat < stale_cutoff))
                | ((Job.state == "queued") & (Job.created_at < resend_cutoff))
            )
            .order_by(Job.id)
        ).all()
        s.commit()
    settings = get_settings()
    if settings.redis_url:
        for job_id in resend:
            enqueue(job_id)
    else:  # the in-process worker runs them itself
        for job_id in resend:
            run_job(job_id, stale_after=stale_after)
    return {"failed": gave_up, "resent": len(resend)}


def refresh_cached_models() -> list[int]:
    """Start the background fits whose cached results are stale (Dawid-Skene labels:
    app/leaderboards/annotators.py); run with the sweeper, every minute."""
    # By name, as TASKS are: the fits build on this module's jobs (no import loop).
    module, name = "app.leaderboards.annotators:refresh".split(":")
    started: list[int] = getattr(importlib.import_module(module), name)()
    return started


def refresh_priorities() -> list[int]:
    """Write the item priorities of the studies allocated adaptively (app/leaderboards/
    adaptive.py); run with the sweeper, every minute."""
    module, name = "app.leaderboards.adaptive:refresh".split(":")
    done: list[int] = getattr(importlib.import_module(module), name)()
    return done


def reclaim_returned() -> list[str]:
    """Give back the slots of returned and timed-out submissions of the studies on Prolific
    (app/crowd/service.py, reclaim_all); run with the sweeper, every minute."""
    module, name = "app.crowd.service:reclaim_all".split(":")
    freed: list[str] = getattr(importlib.import_module(module), name)()
    return freed


def refresh_allow_lists() -> list[dict[str, Any]]:
    """Keep the researchers' allow lists on Prolific as the workers' records change
    (app/crowd/service.py, refresh_allow_lists); run with the sweeper, every minute."""
    module, name = "app.crowd.service:refresh_allow_lists".split(":")
    changed: list[dict[str, Any]] = getattr(importlib.import_module(module), name)()
    return changed


_wake = threading.Event()


def run_queued_once() -> int:
    """Run queued jobs, fairest first (claim_next), until none is left; how many ran."""
    n = 0
    while (job_id := claim_next()) is not None:
        _execute(job_id)
        n += 1
    return n


def start_inprocess_worker(stop: threading.Event | None = None) -> threading.Thread:
    """The embedded worker: a daemon thread that runs queued jobs as they arrive."""
    # The caller (create_app, the CLI) has imported every model in its own thread: two threads
    # importing the same packages at once can deadlock on Python's import locks.

    stop = stop or threading.Event()

    def loop() -> None:
        last_sweep = 0.0
        while not stop.is_set():
            try:
                run_queued_once()
                if time.monotonic() - last_sweep > 60:  # jobs a killed web process left running
                    last_sweep = time.monotonic()
                    sweep()
                    refresh_cached_models()
                    refresh_priorities()
                    reclaim_returned()
                    refresh_allow_lists()
            except Exception:
                log.exception("in-process worker")
            _wake.wait(2.0)
            _wake.clear()

    t = threading.Thread(target=loop, name="proctor-worker", daemon=True)
    t.start()
    return t

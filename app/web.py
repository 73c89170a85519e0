"""Shared page helpers: templates, flash messages, rate limits, upload reading."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sized
from typing import Any
from pathlib import Path

import jinja2
from markupsafe import Markup, escape
from fastapi import HTTPException, Request, Response, UploadFile
from fastapi.templating import Jinja2Templates
from fastapi.responses import RedirectResponse

from app.auth.security import RateLimiter, csrf_token
from app.config import ROOT, get_settings
from app.errors import InputError
from app.textfiles import gunzips_past, limit_text
from app.kinds import get_kind
from app.leaderboards.rows import MIN_INTERVAL_N


class KindTemplates(jinja2.BaseLoader):
    """ "kinds/<name>/<file>" from that kind's package (its templates/ folder). Kinds live in a
    namespace of their own, so none can shadow a core template."""

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str | None, Callable[[], bool] | None]:
        parts = template.split("/", 2)
        if len(parts) != 3 or parts[0] != "kinds" or not parts[2]:
            raise jinja2.TemplateNotFound(template)
        _, name, rest = parts
        try:
            folder = get_kind(name).templates_dir()
        except KeyError:
            raise jinja2.TemplateNotFound(template) from None
        if folder is None:
            raise jinja2.TemplateNotFound(template)
        return jinja2.FileSystemLoader(str(folder)).get_source(environment, rest)


templates = Jinja2Templates(
    env=jinja2.Environment(
        loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(ROOT / "templates")), KindTemplates()]), autoescape=True
    )
)  # model text is untrusted: never mark it safe

# Signs a worker must see, drawn by our own icons: many machines have no emoji font and would
# show an empty box. Longest first, so the variation-selector spelling goes whole.
ICONS = (("\U0001f6d1\ufe0f", "stop", "stop sign"), ("\U0001f6d1", "stop", "stop sign"))


def with_icons(text: object) -> Markup:
    """`text`, escaped, with each sign in ICONS replaced by its icon (alt text for readers)."""
    out = str(escape(text if text is not None else ""))
    for sign, name, alt in ICONS:
        out = out.replace(sign, f'<img class="icon" src="/static/icons/{name}.svg" alt="{alt}">')
    return Markup(out)


templates.env.filters["icons"] = with_icons


def no_worker_note(queue: str, waiting: Sized, what: str, key: object = "") -> Markup:
    """Under a list of jobs (exports, model checks, generation runs): while some wait
    (`waiting` not empty) and no Celery worker reads their queue, a note saying they wait until
    one starts (issue 26.1); nothing otherwise. Redis is asked only then, and at most every 15 s
    (jobs.queues_without_worker)."""
    from app import jobs

    if not waiting or queue not in jobs.queues_without_worker([queue]):
        return Markup("")
    return Markup(
        '<p class="flash warn" role="status" id="no-worker-{}{}">No worker is reading the {} '
        "queue: {} wait until one starts (<code>proctor worker --queues {}</code>).</p>"
    ).format(queue, f"-{key}" if key else "", queue, what, queue)


templates.env.globals["no_worker_note"] = no_worker_note
# One cutoff for "too few for an interval" in the tables and the plots (app.leaderboards.rows).
templates.env.globals["min_interval_n"] = MIN_INTERVAL_N


def wants_json(request: Request) -> bool:
    """An API call, or a page's script asking for JSON (static/app.js's inline forms): errors
    and answers as JSON, not pages."""
    return request.url.path.startswith("/api/") or "application/json" in request.headers.get("accept", "")


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    context.setdefault("user", getattr(request.state, "user", None))
    context["csrf"] = csrf_token(request.session)
    context["flash"] = request.session.pop("flash", None)
    return templates.TemplateResponse(request, name, context, status_code=status_code)


def flash(request: Request, message: str, level: str = "ok") -> None:
    request.session["flash"] = {"message": message, "level": level}


def back(request: Request, url: str, message: str, level: str = "ok") -> RedirectResponse:
    """A form's answer: the message shown once on the page at `url` (303, so a reload does
    not post again)."""
    flash(request, message, level)
    return RedirectResponse(url, status_code=303)


_LIMITER_LOCK = threading.Lock()


# A form's whole numbers are stored or looked up in 64-bit columns at most: SQLite's driver
# refuses a larger one with an OverflowError (a 500; issue 26, round 13: an STS scenario's
# recording id of 2^63).
_FORM_INT_RANGE = range(-(2**63), 2**63)


def form_number(text: str, field: str, kind: type = int) -> int | float | None:
    """A form's optional number field: None when blank, else `kind(text)`; an InputError naming
    the field otherwise (a page's forms send every field as text), and for a whole number
    past 64 bits."""
    text = text.strip()
    if not text:
        return None
    what = "a whole number" if kind is int else "a number"
    try:
        number: int | float = kind(text)
    except ValueError:  # int() refuses 4,300 digits and more with a ValueError too
        raise InputError(f"{field} must be {what}", field=field) from None
    if kind is int and number not in _FORM_INT_RANGE:
        raise InputError(f"{field} must be {what} of at most 19 digits", field=field)
    return number


def client_address(request: Request) -> str:
    """The address a request comes from, as the server sees it (no proxy headers trusted)."""
    return request.client.host if request.client else "unknown"


def rate_limit(request: Request, bucket: str, per_minute: int, key: str | None = None) -> None:
    """Refuse (429) past `per_minute` requests per client address, or per `key` when given
    (e.g. an account, whatever address the attempts come from)."""
    # One limiter per app (per web process): with REDIS_URL set, the processes share their
    # counts through Redis (falling back to their own when it is unreachable); without it each
    # counts on its own.
    state = request.app.state
    limiter = getattr(state, "rate_limiter", None)
    if limiter is None:
        with _LIMITER_LOCK:  # the first requests arrive together: one limiter, one local count
            limiter = getattr(state, "rate_limiter", None)
            if limiter is None:
                settings = get_settings()
                limiter = state.rate_limiter = RateLimiter(settings.redis_url, settings.rate_limit_namespace)
    client = client_address(request)
    if not limiter.allow(f"{bucket}:{key if key is not None else client}", per_minute):
        raise HTTPException(429, "too many requests: wait a minute and try again")


async def read_upload(upload: UploadFile | None, field: str = "file") -> bytes:
    """Read an upload up to the size limit; larger files are refused, not truncated."""
    from app.errors import InputError

    if upload is None or not upload.filename:
        raise InputError("choose a file to upload", field=field)
    limit = get_settings().max_upload_bytes
    data = await upload.read(limit + 1)
    # The limit is on the decompressed bytes: a small gzip may not inflate past it.
    if len(data) > limit or gunzips_past(data, limit):
        raise InputError(f"the file is larger than the {limit_text(limit)} limit", field=field)
    if not data:
        raise InputError("the file is empty", field=field)
    if is_excel(data):
        raise InputError("this is an Excel workbook: save it as CSV (UTF-8)", field=field)
    return data


# An .xlsx is a zip whose entries sit under xl/ (their names are stored in the clear); an .xls
# is an OLE compound file. Either would otherwise fail as "not UTF-8", which does not say why.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def is_excel(data: bytes) -> bool:
    """Whether the upload is an Excel workbook rather than the text file asked for."""
    if data[:8] == OLE_MAGIC:
        return True
    return data[:4] == b"PK\x03\x04" and b"xl/" in data


def static_dir() -> Path:
    return ROOT / "static"

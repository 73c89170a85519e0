"""The ASGI middleware every request passes through (app/main.py adds them, innermost first):
security headers, the body size limit and JSON guard, refusing an unauthenticated body before
it is read, the host a trusted proxy names, HEAD answered as GET, and the request log."""

from __future__ import annotations

import codecs
import hashlib
import hmac
import json
import logging
import time
from urllib.parse import parse_qsl

import anyio
from fastapi import HTTPException, Request
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.datastructures import Headers

from app import crowd
from app.error_pages import error_response
from app.jsonsafe import MAX_DEPTH, MAX_INT_DIGITS, past_int_digits, too_deep, unstorable_escape
from app.routes import DOCS_CSP, OAUTH2_REDIRECT, served_routes

# The crowd's pages may be framed by the crowd platforms that show them in a frame (MTurk's
# ExternalQuestion) and post their completion form there (app/crowd); no other page may be
# framed at all (clickjacking).
CROWD_FRAMERS = crowd.framers()
# Scripts only from our own files (no inline script, handler or javascript: link): an injected
# tag runs nothing. Styles may be inline (style attributes, the kinds' <style> blocks, htmx's
# indicator style). Images also from data: and blob: URLs (boards, panorama strips) and from the
# blob store's host when it is S3 (presigned links: panoramas, STS frames).
BASE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:{blobs}; connect-src 'self'; object-src 'none'; base-uri 'self'"
)
HSTS = b"max-age=31536000"


def blob_origin(settings) -> str:
    """The origin of the blob store's download links when they are not ours (S3's presigned
    links), for img-src; '' for the local store, whose links are /blobs/ here."""
    if not settings.storage_url.startswith("s3://"):
        return ""
    from urllib.parse import urlsplit

    from app.storage import get_store

    try:  # presigning is local: no request to the bucket
        link = urlsplit(get_store(settings).url("csp-probe"))
    except Exception:  # noqa: BLE001 - no S3 client here: the app starts, S3 images are refused
        return ""
    return f"{link.scheme}://{link.netloc}" if link.scheme in ("http", "https") else ""


class SecurityHeaders:
    """Adds the security headers to every response (a plain ASGI middleware: nothing is
    buffered): one Content-Security-Policy (frame-ancestors included), X-Frame-Options
    outside the crowd's pages, nosniff, Referrer-Policy, and HSTS when the request came over
    https (the scheme a trusted proxy names: it runs inside ProxyHeadersMiddleware). A response
    that sets its own policy keeps it (the API docs, which start with an inline script): two
    policies would both be enforced."""

    def __init__(self, app, blobs: str = ""):
        self.app = app
        base = BASE_CSP.format(blobs=f" {blobs}" if blobs else "")
        self.crowd_csp = (
            f"{base}; form-action 'self' {CROWD_FRAMERS}; frame-ancestors 'self' {CROWD_FRAMERS}"
        ).encode()
        self.own_csp = f"{base}; form-action 'self'; frame-ancestors 'none'".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        crowd = path.startswith(("/s/", "/task/"))
        # Swagger UI's OAuth2 page is FastAPI's, an inline script: the docs' policy.
        csp = DOCS_CSP.encode() if path == OAUTH2_REDIRECT else self.crowd_csp if crowd else self.own_csp
        https = scope.get("scheme") == "https"

        started = False

        async def with_headers(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                # same-origin: a worker's entry link (with their id in the query) is never sent
                # to another site in a Referer; the crowd platforms need none (they get the
                # code in a link or a form).
                extra = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin")]
                if b"content-security-policy" not in names:
                    extra.append((b"content-security-policy", csp))
                if not crowd:
                    extra.append((b"x-frame-options", b"DENY"))
                if https:
                    extra.append((b"strict-transport-security", HSTS))
                headers += [(k, v) for k, v in extra if k not in names]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, with_headers)
        except Exception:
            # An error no handler knows: Starlette's ServerErrorMiddleware, outside this one,
            # would answer a bare 500 without these headers (issue 26, round 13). Answered
            # here, with them; raised on, so the server logs the traceback (and the outer
            # middleware, seeing the answer started, sends nothing more).
            if not started:
                api = path.startswith("/api/")
                body = b'{"detail":"internal server error"}' if api else b"Internal Server Error"
                kind = b"application/json" if api else b"text/plain; charset=utf-8"
                headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
                await with_headers({"type": "http.response.start", "status": 500, "headers": headers})
                await with_headers({"type": "http.response.body", "body": body})
            raise


class ForwardedHost:
    """The Host a trusted proxy was asked for (X-Forwarded-Host, its first value) becomes the
    request's Host, so links built from the request (the study page's entry links) name the
    server workers reach. Only from a proxy in TRUSTED_PROXIES: anyone else's header is ignored.
    It must wrap uvicorn's ProxyHeadersMiddleware, which replaces the peer with the client."""

    def __init__(self, app, trusted: list[str]):
        import ipaddress

        self.app = app
        self.trusted = [ipaddress.ip_network(t, strict=False) for t in trusted]

    def _trusted(self, scope) -> bool:
        import ipaddress

        try:
            peer = ipaddress.ip_address((scope.get("client") or ("",))[0])
        except ValueError:
            return False
        return any(peer in net for net in self.trusted)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self._trusted(scope):
            forwarded = Headers(scope=scope).get("x-forwarded-host", "").split(",")[0].strip()
            if forwarded:
                scope = {
                    **scope,
                    "headers": [(k, v) for k, v in scope["headers"] if k != b"host"]
                    + [(b"host", forwarded.encode("latin-1"))],
                }
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuses a request body larger than the largest upload the app takes (413), before any of
    it is parsed or spooled: by its Content-Length when it has one, else by counting as it
    arrives. FastAPI reads a form before the route checks who posts it: AuthBeforeBody turns
    away callers without an account first, and this bounds what the others may send (the
    crowd's routes, and accounts). The routes anyone may post to (the crowd's, the login form,
    Prolific's hooks) take no upload: SMALL_BODY at most (issue 26, round 13: a worker's
    browser could send the largest upload's size to the answer form, read whole before its
    fields were checked)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        limit = min(self.limit, SMALL_BODY) if path.startswith(SMALL_BODY_PATHS) else self.limit
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            return await self._refuse(send, limit)
        seen = 0
        refused = False

        async def counting():
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    refused = True
                    return {"type": "http.disconnect"}
            return message

        started = False

        async def tracking(message):
            nonlocal started
            if refused and not started:
                return  # the app's answer to a cut-off body: ours (413) goes instead
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting, tracking)
        except Exception:
            if not refused:
                raise
        if refused and not started:
            await self._refuse(send, limit)

    @staticmethod
    async def _refuse(send, limit: int):
        mb = limit // (1024 * 1024)
        await _send_json(send, 413, {"detail": f"the request is larger than the {mb} MB limit"})


# What the routes anyone may post to take at most (BodyLimit): a crowd answer, a consent, a
# login, a hook's event. The largest answer (a Hexagons procedure's boards) is some 100 KB.
SMALL_BODY = 4 << 20
SMALL_BODY_PATHS = ("/task/", "/s/", "/api/v1/crowd/", "/login", "/logout", "/api/v1/prolific/hooks/")


async def _send_json(send, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The largest JSON body the app takes (a navigation answer's 20,000-frame trace is under 2 MB);
# FastAPI reads a JSON body whole into memory before anything checks it.
MAX_JSON_BODY = 4 << 20


def _is_json(content_type: str) -> bool:
    ctype = content_type.split(";")[0].strip().lower()
    return ctype == "application/json" or (ctype.startswith("application/") and ctype.endswith("+json"))


# Starlette decodes a multipart form's text in the charset its Content-Type names: UTF-7's
# "+2AA-" and unicode_escape's "\\ud800" are lone surrogates, which no driver sends (round 18 of
# issue 26: a form's name answered 500). No browser names one; these three make none (an unknown
# one is read as Latin-1).
FORM_CHARSETS = frozenset({"utf-8", "ascii", "iso8859-1"})


def _form_charset(ctype: str) -> str | None:
    """The charset a multipart form's Content-Type names, when it is one the app refuses."""
    if not ctype.split(";")[0].strip().lower().startswith("multipart/"):
        return None
    for param in ctype.split(";")[1:]:  # each one: Starlette reads the last
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            try:
                charset = codecs.lookup(value.strip().strip('"')).name
            except LookupError:
                continue
            if charset not in FORM_CHARSETS:
                return charset
    return None


class JsonBodyGuard:
    """Reads a JSON request body before the app does and refuses it, unparsed, when it is
    larger than `limit` (413) or nested deeper than MAX_DEPTH levels (422): Python's parser
    recurses once per level, so 10,000 nested brackets would be a RecursionError. A JSON body
    not in UTF-8, and a form in a charset that can make a lone surrogate, are refused (415)."""

    def __init__(self, app, limit: int = MAX_JSON_BODY):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            return await self.app(scope, receive, send)
        ctype = Headers(scope=scope).get("content-type", "")
        if charset := _form_charset(ctype):
            detail = f"a form's charset is UTF-8, not {charset}"
            return await _send_json(send, 415, {"detail": detail, "field": "charset"})
        if not _is_json(ctype):
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away: nobody to answer
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                return await _send_json(
                    send,
                    413,
                    {"detail": f"a JSON body is larger than the {self.limit >> 20} MB limit", "field": "body"},
                )
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        # Python's parser reads UTF-16 and UTF-32 too, where the checks below, of UTF-8 bytes,
        # see no escape (round 18 of issue 26: "\ud800" in UTF-16 reached a worker id: a 500).
        # JSON between systems is UTF-8 (RFC 8259).
        if body and json.detect_encoding(body) not in ("utf-8", "utf-8-sig"):
            return await _send_json(send, 415, {"detail": "a JSON body is UTF-8", "field": "body"})
        if too_deep(body):
            return await _send_json(
                send, 422, {"detail": f"the JSON body is nested more than {MAX_DEPTH} levels deep", "field": "body"}
            )
        if past_int_digits(body):  # Python's parser refuses it with a bare ValueError: a 400 of no field
            return await _send_json(
                send,
                422,
                {"detail": f"an integer in the JSON body has more than {MAX_INT_DIGITS:,} digits", "field": "body"},
            )
        if unstorable_escape(body):  # PostgreSQL text refuses U+0000; no UTF-8 holds a lone surrogate
            return await _send_json(
                send, 422, {"detail": "a string in the JSON body holds U+0000 or a lone surrogate", "field": "body"}
            )
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _calls(dependant):
    for dep in dependant.dependencies:
        yield dep.call
        yield from _calls(dep)


async def _unread():
    return {"type": "http.disconnect"}


class AuthBeforeBody:
    """Refuses a write before any of its body is read when the headers already say the caller
    may not: to a route that needs an account (one with a `require` dependency), a caller with
    none (anonymous, a crowd worker, a bad token, a logged-out session); to any route that
    checks CSRF, a cookie session that cannot pass (no token in the session, or a wrong
    X-CSRF-Token). FastAPI reads, and spools, a form before it runs the route's dependencies:
    without this an anonymous client could make the server parse any upload before being
    refused. The answer is the one the route's own dependencies would give."""

    def __init__(self, app):
        self.app = app
        self._routes = None

    def _route_for(self, scope):
        """(roles, checks CSRF) of the route that will serve this write, or None."""
        if self._routes is None:
            from app.auth.deps import verify_csrf

            self._routes = []
            for route in served_routes(scope["app"].router.routes):
                dependant, methods = getattr(route, "dependant", None), getattr(route, "methods", None)
                if dependant is None or not (set(methods or ()) & BODY_METHODS):
                    continue
                calls = list(_calls(dependant))
                roles = next((c.roles for c in calls if getattr(c, "roles", None)), None)
                self._routes.append((route.path_regex, methods, roles, verify_csrf in calls))
        for regex, methods, roles, csrf in self._routes:  # the router's order: the first match serves
            if scope["method"] in methods and regex.match(scope["path"]):
                return (roles, csrf) if roles or csrf else None
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            return await self.app(scope, receive, send)
        route = self._route_for(scope)
        refused = None if route is None else await self._refusal(scope, *route)
        if refused is None:
            return await self.app(scope, receive, send)
        response = error_response(Request(scope), refused)
        await response(scope, _unread, send)

    @staticmethod
    async def _refusal(scope, roles, checks_csrf):
        from app.auth.deps import CSRF_REFUSED, caller, csrf_from_headers, refusal
        from app.db import get_sessionmaker

        headers = Headers(scope=scope)
        session_data = scope.get("session") or {}
        # In the order the app checks: the router's CSRF check, then the route's account.
        if checks_csrf and csrf_from_headers(scope["method"], headers, session_data) is False:
            return HTTPException(403, CSRF_REFUSED)
        if not roles:
            return None  # open to anyone (the crowd's forms, the login form)
        authorization = headers.get("authorization", "")
        if not authorization.lower().startswith("bearer ") and not session_data.get("uid"):
            return refusal(scope["path"], None, roles)

        def look_up():
            with get_sessionmaker(scope["app"].state.database_url)() as session:
                try:
                    return refusal(scope["path"], caller(session, authorization, session_data), roles)
                except HTTPException as exc:
                    return exc

        try:
            return await anyio.to_thread.run_sync(look_up)
        except (OperationalError, PoolTimeout):
            return None  # the database is away or busy: the route answers 503 as it always does


REQUEST_LOG = logging.getLogger("proctor.requests")


def _hidden(value: str, key: bytes) -> str:
    """A short keyed hash: lines about one worker can be matched, the id cannot be read."""
    return "h:" + hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:10]


def logged_target(path: str, query: bytes, key: bytes) -> str:
    """The path, and the query with every value hashed: a query carries worker ids
    (each crowd platform's worker id), signatures and tokens, none of which goes in a log."""
    if not query:
        return path
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    return path + "?" + "&".join(f"{k}={_hidden(v, key) if v else ''}" for k, v in pairs)


class HeadAsGet:
    """HEAD answered as the GET it asks about, without the body (RFC 9110: a server that answers
    GET answers HEAD; FastAPI's routes declare GET alone, so HEAD was a 405). The status and
    headers are the GET's, Content-Length included."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)

        async def bodiless(message):
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return  # a streamed body's chunks are not sent
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, bodiless)


class RequestLog:
    """One line per request: method, path (query values hashed), status, milliseconds."""

    def __init__(self, app, key: bytes):
        self.app, self.key = app, key

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.perf_counter(), 500

        async def noting(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            ms = (time.perf_counter() - start) * 1000
            REQUEST_LOG.log(
                logging.WARNING if status >= 500 else logging.INFO,
                "%s %s %d %.1fms",
                scope["method"],
                logged_target(scope["path"], scope.get("query_string", b""), self.key),
                status,
                ms,
            )

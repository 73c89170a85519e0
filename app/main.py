"""create_app(): routers, middleware, error pages."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from pathlib import Path
from urllib.parse import parse_qsl

import anyio
from fastapi import FastAPI, HTTPException, Request
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.middleware.sessions import SessionMiddleware

from app.config import SECRET_KEY_HELP, get_settings, trusted_proxies, weak_secret_key
from app.db import lost_a_race
from app.errors import ERROR_RESPONSES, InputError
from app.jobs import BrokerUnavailable
from app.jsonsafe import MAX_DEPTH, too_deep
from app.kinds import KindNotInstalled
from app.studies.assignment import NotAvailable
from app.web import render, static_dir, wants_json


class RouteClash(RuntimeError):
    """Two routes (a kind's and the core's, or two kinds') answer the same method and path."""


def served_routes(routes):
    """Every route as served, those of included routers too (FastAPI >= 0.16x wraps them)."""
    for r in routes:
        candidates = getattr(r, "effective_candidates", None)
        if callable(candidates):
            yield from served_routes(candidates())
        else:
            yield r


def allowed_methods(app, scope) -> list[str]:
    """Every method the request's path answers, over all the routes on it: Starlette's 405
    names only the first route that matched the path (a path's GET and POST are often two
    routes, from two routers), so its `Allow` left the others out."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in served_routes(app.router.routes):
        if getattr(route, "methods", None) and route.matches(scope)[0] is not Match.NONE:
            methods |= route.methods
    return sorted(methods)


def _refuse_clashes(app: FastAPI) -> None:
    seen: dict[tuple[str, str], str] = {}
    for route in served_routes(app.router.routes):
        owner = getattr(getattr(route, "endpoint", None), "__module__", "?")
        for method in (getattr(route, "methods", None) or set()) - {"HEAD"}:
            key = (method, route.path)
            if key in seen:
                raise RouteClash(f"{method} {route.path} is declared twice: by {seen[key]} and {owner}")
            seen[key] = owner


# The crowd's pages may be framed by MTurk (ExternalQuestion shows them in an iframe on the
# worker's site); no other page may be framed at all (clickjacking). The done page of an MTurk
# task posts to externalSubmit on www.mturk.com or the sandbox (app/studies/views.py), which
# may redirect on within MTurk: form-action follows redirects, so every MTurk host is named.
MTURK_FRAMERS = "https://worker.mturk.com https://workersandbox.mturk.com https://www.mturk.com"
# Scripts only from our own files (no inline script, handler or javascript: link): an injected
# tag runs nothing. Styles may be inline (style attributes, the kinds' <style> blocks, htmx's
# indicator style). Images also from data: and blob: URLs (boards, panorama strips) and from the
# blob store's host when it is S3 (presigned links: panoramas, STS frames).
BASE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:{blobs}; connect-src 'self'; object-src 'none'; base-uri 'self'")
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
        self.crowd_csp = (f"{base}; form-action 'self' {MTURK_FRAMERS}; "
                          f"frame-ancestors 'self' {MTURK_FRAMERS}").encode()
        self.own_csp = f"{base}; form-action 'self'; frame-ancestors 'none'".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        crowd = path.startswith(("/s/", "/task/"))
        # Swagger UI's OAuth2 page is FastAPI's, an inline script: the docs' policy.
        csp = DOCS_CSP.encode() if path == OAUTH2_REDIRECT else self.crowd_csp if crowd else self.own_csp
        https = scope.get("scheme") == "https"

        async def with_headers(message):
            if message["type"] == "http.response.start":
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

        await self.app(scope, receive, with_headers)


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
                scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"host"]
                         + [(b"host", forwarded.encode("latin-1"))]}
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuses a request body larger than the largest upload the app takes (413), before any of
    it is parsed or spooled: by its Content-Length when it has one, else by counting as it
    arrives. FastAPI reads a form before the route checks who posts it: AuthBeforeBody turns
    away callers without an account first, and this bounds what the others may send (the
    crowd's routes, and accounts)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return await self._refuse(scope, send)
        seen = 0
        refused = False

        async def counting():
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
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
            await self._refuse(scope, send)

    async def _refuse(self, scope, send):
        mb = self.limit // (1024 * 1024)
        await _send_json(send, 413, {"detail": f"the request is larger than the {mb} MB limit"})


async def _send_json(send, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The largest JSON body the app takes (a navigation answer's 20,000-frame trace is under 2 MB);
# FastAPI reads a JSON body whole into memory before anything checks it.
MAX_JSON_BODY = 4 << 20


def _is_json(scope) -> bool:
    ctype = Headers(scope=scope).get("content-type", "").split(";")[0].strip().lower()
    return ctype == "application/json" or (ctype.startswith("application/") and ctype.endswith("+json"))


class JsonBodyGuard:
    """Reads a JSON request body before the app does and refuses it, unparsed, when it is
    larger than `limit` (413) or nested deeper than MAX_DEPTH levels (422): Python's parser
    recurses once per level, so 10,000 nested brackets would be a RecursionError."""

    def __init__(self, app, limit: int = MAX_JSON_BODY):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS or not _is_json(scope):
            return await self.app(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away: nobody to answer
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                return await _send_json(send, 413, {
                    "detail": f"a JSON body is larger than the {self.limit >> 20} MB limit", "field": "body"})
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if too_deep(body):
            return await _send_json(send, 422, {
                "detail": f"the JSON body is nested more than {MAX_DEPTH} levels deep", "field": "body"})
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


def error_response(request: Request, exc: StarletteHTTPException):
    """An HTTPException as the app answers it: a redirect, the API's JSON or the error page."""
    if exc.status_code in (301, 302, 303, 307) and exc.headers:
        return RedirectResponse(exc.headers["Location"], status_code=303)
    if wants_json(request):
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
    return render(request, "error.html", status_code=exc.status_code,
                  title={403: "Not allowed", 404: "Not found", 429: "Slow down"}.get(
                      exc.status_code, "Error"), message=str(exc.detail))


OAUTH2_REDIRECT = "/docs/oauth2-redirect"
# FastAPI's docs pages start the viewers with an inline script; ReDoc searches in a blob: worker.
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; worker-src 'self' blob:; frame-ancestors 'none'")


def _docs_pages(app: FastAPI) -> None:
    """Swagger UI and ReDoc from static/vendor (npm, scripts/vendor.sh), so the API docs work
    with no internet; no Google fonts either. The CSP keeps them from fetching anything else
    (ReDoc's footer logo is on cdn.redoc.ly): a page that works offline, not one that waits."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html

    def own_only(response):
        response.headers["Content-Security-Policy"] = DOCS_CSP
        return response

    @app.get("/api/docs", include_in_schema=False)
    def swagger_ui():
        return own_only(get_swagger_ui_html(openapi_url=app.openapi_url, title=f"{app.title} API",
                                   swagger_js_url="/static/vendor/swagger-ui-bundle.js",
                                   swagger_css_url="/static/vendor/swagger-ui.css",
                                   swagger_favicon_url="/static/favicon.svg",
                                   oauth2_redirect_url=OAUTH2_REDIRECT))

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    def swagger_ui_redirect():
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/api/redoc", include_in_schema=False)
    def redoc():
        return own_only(get_redoc_html(openapi_url=app.openapi_url, title=f"{app.title} API",
                                       redoc_js_url="/static/vendor/redoc.standalone.js",
                                       redoc_favicon_url="/static/favicon.svg", with_google_fonts=False))


REQUEST_LOG = logging.getLogger("proctor.requests")


def _hidden(value: str, key: bytes) -> str:
    """A short keyed hash: lines about one worker can be matched, the id cannot be read."""
    return "h:" + hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:10]


def logged_target(path: str, query: bytes, key: bytes) -> str:
    """The path, and the query with every value hashed: a query carries worker ids
    (PROLIFIC_PID, workerId), signatures and tokens, none of which goes in a log."""
    if not query:
        return path
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    return path + "?" + "&".join(f"{k}={_hidden(v, key) if v else ''}" for k, v in pairs)


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
            REQUEST_LOG.log(logging.WARNING if status >= 500 else logging.INFO, "%s %s %d %.1fms",
                            scope["method"], logged_target(scope["path"], scope.get("query_string", b""),
                                                           self.key), status, ms)


class InsecureSettings(RuntimeError):
    """The server refuses to start with a key anyone could know."""


def create_app(database_url: str | None = None) -> FastAPI:
    settings = get_settings()
    if (why := weak_secret_key(settings.secret_key)) is not None:
        raise InsecureSettings(f"{why}: {SECRET_KEY_HELP}")
    try:
        proxies = trusted_proxies(settings)
    except ValueError as exc:
        raise InsecureSettings(str(exc)) from None
    app = FastAPI(title="Proctor", version="0.1.0",
                  description="Human evaluation of grounded language agents.",
                  # Our own docs routes below: FastAPI's load Swagger UI and ReDoc from a CDN.
                  docs_url=None, redoc_url=None, openapi_url="/openapi.json",
                  # Our error shape, not FastAPI's list of validation errors: the handlers
                  # below answer every refusal as ErrorOut, and the schema says so.
                  responses=ERROR_RESPONSES)
    app.state.database_url = database_url or settings.database_url
    # Innermost first: each add wraps the ones before it.
    app.add_middleware(JsonBodyGuard)
    app.add_middleware(AuthBeforeBody)  # inside the session: it reads the session cookie
    app.add_middleware(SessionMiddleware, secret_key=settings.secret_key,
                       session_cookie="proctor_session", same_site="lax", max_age=14 * 24 * 3600,
                       https_only=settings.base_url.startswith("https"))
    # The largest upload (a model, or an item file), plus room for the form around it.
    app.add_middleware(BodyLimit, limit=max(settings.max_upload_bytes, settings.max_artifact_bytes) + (1 << 20))
    # Outside BodyLimit (its 413 has them too), inside the proxies' handling below (the scheme a
    # trusted proxy names decides HSTS).
    app.add_middleware(SecurityHeaders, blobs=blob_origin(settings))
    if proxies:
        # Outermost: every check (rate limits, login limits) sees the client a trusted proxy
        # names, never an address the client wrote itself (uvicorn's own handling is off,
        # app/cli.py). The rightmost untrusted X-Forwarded-For hop is the client.
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=proxies)
        app.add_middleware(ForwardedHost, trusted=proxies)  # outside it: it sees the proxy's address
    try:
        REQUEST_LOG.setLevel(settings.log_level.upper())
    except ValueError:
        raise InsecureSettings(f"LOG_LEVEL={settings.log_level!r}: use DEBUG, INFO, WARNING or ERROR") from None
    app.add_middleware(RequestLog, key=settings.secret_key.encode())  # outermost: every answer

    from app.agents.views import router as agents_router
    from app.api import crowd_router, router as api_router
    from app.auth.views import router as auth_router
    from app.kinds import all_kinds
    from app.models import load_models
    from app.quality.views import router as quality_router
    from app.studies.views import router as studies_router

    load_models()
    app.include_router(crowd_router)  # first: the requests a live study gets most (app/studies/crowd_api.py)
    app.include_router(auth_router)
    app.include_router(studies_router)
    app.include_router(quality_router)
    app.include_router(agents_router)
    app.include_router(api_router)
    for kind in all_kinds().values():
        for router in kind.routers():
            app.include_router(router)
        if (folder := kind.static_dir()) is not None:
            # Before /static below, which would otherwise answer for these paths.
            app.mount(f"/static/kinds/{kind.name}", StaticFiles(directory=str(folder)),
                      name=f"static-{kind.name}")
    app.mount("/static", StaticFiles(directory=str(static_dir())), name="static")

    @app.get("/blobs/{key:path}", include_in_schema=False)
    def blob(key: str, exp: str = "", sig: str = "", filename: str | None = None):
        from app.storage import content_disposition, get_store

        store = get_store()
        if not store.verify(key, exp, sig, filename=filename):
            raise HTTPException(403, "this download link is invalid or has expired")
        name = filename or key.rsplit("/", 1)[-1]
        return StreamingResponse(store.open(key), media_type="application/octet-stream",
                                 headers={"Content-Disposition": content_disposition(name)})

    _docs_pages(app)

    @app.get("/help/statistics", include_in_schema=False)
    def statistics_help(request: Request):
        """docs/statistics.md, which every leaderboard table links to: what each figure is, as
        a page of the site (its text as written: tables and formulas read as they stand)."""
        doc = Path(__file__).resolve().parent.parent / "docs" / "statistics.md"
        if not doc.is_file():  # an install without the repository's docs
            raise HTTPException(404, "docs/statistics.md is not installed here; it is in the "
                                     "repository's docs folder")
        return render(request, "help.html", title="How each figure is computed",
                      text=doc.read_text("utf-8"))

    @app.get("/healthz", include_in_schema=False)
    def health():
        return PlainTextResponse("ok")

    @app.exception_handler(InputError)
    async def input_error(request: Request, exc: InputError):
        if wants_json(request):
            return JSONResponse(exc.as_dict(), status_code=exc.status_code)
        return render(request, "error.html", status_code=422, title="That input was refused",
                      message=str(exc))

    @app.exception_handler(KindNotInstalled)
    async def kind_not_installed(request: Request, exc: KindNotInstalled):
        detail = (f"the task kind {exc.name!r} is not installed on this server: install the package "
                  f"that provides it and restart, or ask the administrator")
        if wants_json(request):
            return JSONResponse({"detail": detail}, status_code=409)
        return render(request, "error.html", status_code=409, title="Task kind not installed",
                      message=detail)

    @app.exception_handler(BrokerUnavailable)
    async def broker_unavailable(request: Request, exc: BrokerUnavailable):
        headers = {"Retry-After": "30"}
        if wants_json(request):
            return JSONResponse({"detail": str(exc)}, status_code=503, headers=headers)
        response = render(request, "error.html", status_code=503, title="Try again in a minute",
                          message=str(exc))
        response.headers.update(headers)
        return response

    @app.exception_handler(OperationalError)
    @app.exception_handler(PoolTimeout)
    async def database_unavailable(request: Request, exc: OperationalError | PoolTimeout):
        # The database went away (a restart, a failover), or a burst found no free pooled
        # connection within DB_POOL_TIMEOUT: say so and when to retry, rather than a bare 500
        # (or a wait without end); nothing was stored by the request that failed.
        headers = {"Retry-After": "10"}
        detail = "the database cannot be reached right now: try again in a few seconds"
        if lost_a_race(exc):
            # Aborted by a deadlock or a serialisation failure, after the retries a writer
            # makes (a rejection meeting other writers): nothing was stored, and it is busy,
            # not unreachable.
            detail = "the database is busy with other writes to the same rows: try again in a few seconds"
        if wants_json(request):
            return JSONResponse({"detail": detail}, status_code=503, headers=headers)
        return PlainTextResponse(detail, status_code=503, headers=headers)

    @app.exception_handler(NotAvailable)
    async def not_available(request: Request, exc: NotAvailable):
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
        if wants_json(request):
            return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers=headers)
        response = render(request, "error.html", status_code=exc.status,
                          title={429: "Try again later"}.get(exc.status, "Not available"),
                          message=str(exc))
        response.headers.update(headers)
        return response

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"] if p not in ("body", "query", "form"))
        detail = f"field '{field}': {err['msg']}"
        if wants_json(request):
            return JSONResponse({"detail": detail, "field": field}, status_code=422)
        return render(request, "error.html", status_code=422, title="That input was refused",
                      message=detail)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 405 and (methods := allowed_methods(request.app, request.scope)):
            exc = StarletteHTTPException(405, exc.detail, headers={**(exc.headers or {}),
                                                                   "Allow": ", ".join(methods)})
        return error_response(request, exc)

    _refuse_clashes(app)
    return app

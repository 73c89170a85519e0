"""How the app answers a refusal or a failure: JSON for the API and page scripts, the error
page for a browser. `install(app)` registers the handlers; `error_response` answers an
HTTPException."""

from __future__ import annotations

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from sqlalchemy.exc import DataError, InternalError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.db import lost_a_race, read_only
from app.errors import InputError
from app.jobs import BrokerUnavailable
from app.kinds import KindNotInstalled
from app.routes import allowed_methods
from app.studies.assignment import NotAvailable
from app.web import render, wants_json


def error_response(request: Request, exc: StarletteHTTPException) -> Response:
    """An HTTPException as the app answers it: a redirect, the API's JSON or the error page."""
    if exc.status_code in (301, 302, 303, 307) and exc.headers:
        return RedirectResponse(exc.headers["Location"], status_code=303)
    if wants_json(request):
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
    response = render(
        request,
        "error.html",
        status_code=exc.status_code,
        title={403: "Not allowed", 404: "Not found", 429: "Slow down"}.get(exc.status_code, "Error"),
        message=str(exc.detail),
    )
    response.headers.update(exc.headers or {})  # a 405's Allow, a 429's Retry-After: the page's too
    return response


def install(app: FastAPI) -> None:
    """Every exception handler of the app."""

    @app.exception_handler(InputError)
    async def input_error(request: Request, exc: InputError) -> Response:
        if wants_json(request):
            return JSONResponse(exc.as_dict(), status_code=exc.status_code)
        return render(request, "error.html", status_code=422, title="That input was refused", message=str(exc))

    @app.exception_handler(KindNotInstalled)
    async def kind_not_installed(request: Request, exc: KindNotInstalled) -> Response:
        detail = (
            f"the task kind {exc.name!r} is not installed on this server: install the package "
            f"that provides it and restart, or ask the administrator"
        )
        if wants_json(request):
            return JSONResponse({"detail": detail}, status_code=409)
        return render(request, "error.html", status_code=409, title="Task kind not installed", message=detail)

    @app.exception_handler(BrokerUnavailable)
    async def broker_unavailable(request: Request, exc: BrokerUnavailable) -> Response:
        headers = {"Retry-After": "30"}
        if wants_json(request):
            return JSONResponse({"detail": str(exc)}, status_code=503, headers=headers)
        response = render(request, "error.html", status_code=503, title="Try again in a minute", message=str(exc))
        response.headers.update(headers)
        return response

    @app.exception_handler(DataError)
    @app.exception_handler(psycopg.DataError)  # the crowd's hot path speaks psycopg itself
    async def data_error(request: Request, exc: DataError | psycopg.DataError) -> Response:
        # PostgreSQL's text holds no U+0000, and psycopg refuses to send one: a NUL in a
        # request's path, query or form (a crowd link's slug or worker id, a login's email)
        # is input no row can match or hold, refused as such rather than a 500. Its JSON holds
        # none either, and says so otherwise (round 13: a NUL in an STS scenario's tags or a
        # failure's note answered 500). Any other DataError is the server's.
        orig = getattr(exc, "orig", None) or exc
        json_nul = isinstance(orig, psycopg.errors.UntranslatableCharacter) and "\\u0000" in str(orig)
        if "NUL (0x00)" not in str(orig) and not json_nul:
            raise exc
        return await input_error(request, InputError("a value holds U+0000 (NUL), which no text column holds"))

    @app.exception_handler(OperationalError)
    @app.exception_handler(PoolTimeout)
    async def database_unavailable(request: Request, exc: Exception) -> Response:
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

    @app.exception_handler(InternalError)
    @app.exception_handler(psycopg.InternalError)  # the crowd's hot path speaks psycopg itself
    async def read_only_database(request: Request, exc: Exception) -> Response:
        # A database that refuses writes for being read-only (a hot standby after a failover):
        # unavailable, as a stopped one is (issue 26, round 14: a bare 500). Any other internal
        # error is the server's.
        if not read_only(exc):
            raise exc
        return await database_unavailable(request, exc)

    @app.exception_handler(NotAvailable)
    async def not_available(request: Request, exc: NotAvailable) -> Response:
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
        if wants_json(request):
            return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers=headers)
        response = render(
            request,
            "error.html",
            status_code=exc.status,
            title={429: "Try again later"}.get(exc.status, "Not available"),
            message=str(exc),
        )
        response.headers.update(headers)
        return response

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"] if p not in ("body", "query", "form"))
        detail = f"field '{field}': {err['msg']}"
        if wants_json(request):
            return JSONResponse({"detail": detail, "field": field}, status_code=422)
        return render(request, "error.html", status_code=422, title="That input was refused", message=detail)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 405 and (methods := allowed_methods(request.app, request.scope)):
            exc = StarletteHTTPException(405, exc.detail, headers={**(exc.headers or {}), "Allow": ", ".join(methods)})
        return error_response(request, exc)

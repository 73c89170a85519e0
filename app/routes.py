"""Route bookkeeping (two routes on one method and path refused at start-up; the methods a path
allows, for a 405's Allow) and the core's few routes of its own: the API docs pages, signed
blob downloads, the statistics help page and the health check."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute
from starlette.types import Scope

from app.web import render


class RouteClash(RuntimeError):
    """Two routes (a kind's and the core's, or two kinds') answer the same method and path."""


def served_routes(routes: Iterable[BaseRoute]) -> Iterator[Any]:
    """Every route as served, those of included routers too (FastAPI >= 0.16x wraps them).
    Any: each kind of route has its own attributes (BaseRoute declares no path or methods)."""
    for r in routes:
        candidates = getattr(r, "effective_candidates", None)
        if callable(candidates):
            yield from served_routes(candidates())
        else:
            yield r


def allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """Every method the request's path answers, over all the routes on it: Starlette's 405
    names only the first route that matched the path (a path's GET and POST are often two
    routes, from two routers), so its `Allow` left the others out."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in served_routes(app.router.routes):
        if getattr(route, "methods", None) and route.matches(scope)[0] is not Match.NONE:
            methods |= route.methods
    return sorted(methods)


def refuse_clashes(app: FastAPI) -> None:
    seen: dict[tuple[str, str], str] = {}
    for route in served_routes(app.router.routes):
        owner = getattr(getattr(route, "endpoint", None), "__module__", "?")
        for method in (getattr(route, "methods", None) or set()) - {"HEAD"}:
            key = (method, route.path)
            if key in seen:
                raise RouteClash(f"{method} {route.path} is declared twice: by {seen[key]} and {owner}")
            seen[key] = owner


OAUTH2_REDIRECT = "/docs/oauth2-redirect"
# FastAPI's docs pages start the viewers with an inline script; ReDoc searches in a blob: worker.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; frame-ancestors 'none'"
)


def docs_pages(app: FastAPI) -> None:
    """Swagger UI and ReDoc from static/vendor (npm, scripts/vendor.sh), so the API docs work
    with no internet; no Google fonts either. The CSP keeps them from fetching anything else
    (ReDoc's footer logo is on cdn.redoc.ly): a page that works offline, not one that waits."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html

    def page(path: str, make: Callable[..., HTMLResponse], **options: Any) -> None:
        """At `path`, the page `make` writes for the app's schema (create_app sets its URL) under
        the app's name, fetching only its own."""

        @app.get(path, include_in_schema=False)
        def docs_page() -> HTMLResponse:
            response = make(openapi_url=cast(str, app.openapi_url), title=f"{app.title} API", **options)
            response.headers["Content-Security-Policy"] = DOCS_CSP
            return response

    page(
        "/api/docs",
        get_swagger_ui_html,
        swagger_js_url="/static/vendor/swagger-ui-bundle.js",
        swagger_css_url="/static/vendor/swagger-ui.css",
        swagger_favicon_url="/static/favicon.svg",
        oauth2_redirect_url=OAUTH2_REDIRECT,
    )
    page(
        "/api/redoc",
        get_redoc_html,
        redoc_js_url="/static/vendor/redoc.standalone.js",
        redoc_favicon_url="/static/favicon.svg",
        with_google_fonts=False,
    )

    @app.get(OAUTH2_REDIRECT, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()


def own_routes(app: FastAPI) -> None:
    """Blobs, the API docs, /help/statistics and /healthz."""

    @app.get("/blobs/{key:path}", include_in_schema=False)
    def blob(key: str, exp: str = "", sig: str = "", filename: str | None = None) -> StreamingResponse:
        from app.storage import LocalBlobStore, content_disposition, get_store

        # Only the local store links here (S3's links are its own, presigned): it has verify().
        store = cast(LocalBlobStore, get_store())
        if not store.verify(key, exp, sig, filename=filename):
            raise HTTPException(403, "this download link is invalid or has expired")
        name = filename or key.rsplit("/", 1)[-1]
        return StreamingResponse(
            store.open(key),
            media_type="application/octet-stream",
            headers={"Content-Disposition": content_disposition(name)},
        )

    docs_pages(app)

    @app.get("/help/statistics", include_in_schema=False)
    def statistics_help(request: Request) -> Response:
        """docs/statistics.md, which every leaderboard table links to: what each figure is, as
        a page of the site (its text as written: tables and formulas read as they stand)."""
        doc = Path(__file__).resolve().parent.parent / "docs" / "statistics.md"
        if not doc.is_file():  # an install without the repository's docs
            raise HTTPException(404, "docs/statistics.md is not installed here; it is in the repository's docs folder")
        return render(request, "help.html", title="How each figure is computed", text=doc.read_text("utf-8"))

    @app.get("/healthz", include_in_schema=False)
    def health() -> PlainTextResponse:
        return PlainTextResponse("ok")

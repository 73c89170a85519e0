"""create_app(): the settings checked, the middleware (app/middleware.py), the routers of the
core and the kinds, static files, the core's own routes (app/routes.py) and the error
handlers (app/error_pages.py)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.middleware.sessions import SessionMiddleware

from app.config import SECRET_KEY_HELP, get_settings, trusted_proxies, weak_secret_key
from app.error_pages import install as install_error_handlers
from app.errors import ERROR_RESPONSES
from app.middleware import (
    HeadAsGet,
    REQUEST_LOG,
    AuthBeforeBody,
    BodyLimit,
    ForwardedHost,
    JsonBodyGuard,
    RequestLog,
    SecurityHeaders,
    blob_origin,
)
from app.routes import own_routes, refuse_clashes
from app.web import static_dir


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
    app = FastAPI(
        title="Proctor",
        version="0.1.0",
        description="Human evaluation of grounded language agents.",
        # Our own docs routes below: FastAPI's load Swagger UI and ReDoc from a CDN.
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        # Our error shape, not FastAPI's list of validation errors: the handlers
        # below answer every refusal as ErrorOut, and the schema says so.
        responses=ERROR_RESPONSES,
    )
    app.state.database_url = database_url or settings.database_url
    # Innermost first: each add wraps the ones before it.
    app.add_middleware(JsonBodyGuard)
    app.add_middleware(AuthBeforeBody)  # inside the session: it reads the session cookie
    app.add_middleware(
        SessionMiddleware,
        secret_key=settings.secret_key,
        session_cookie="proctor_session",
        same_site="lax",
        max_age=14 * 24 * 3600,
        https_only=settings.base_url.startswith("https"),
    )
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
    app.add_middleware(HeadAsGet)  # inside the log, which then says HEAD
    app.add_middleware(RequestLog, key=settings.secret_key.encode())  # outermost: every answer

    from app.agents.views import router as agents_router
    from app.api import crowd_router
    from app.api import router as api_router
    from app.auth.views import router as auth_router
    from app.crowd.views import router as prolific_pages
    from app.kinds import all_kinds
    from app.models import load_models
    from app.quality.views import router as quality_router
    from app.runs.views import router as runs_router
    from app.studies.views import router as studies_router

    load_models()
    app.include_router(crowd_router)  # first: the requests a live study gets most (app/studies/crowd_api.py)
    app.include_router(auth_router)
    app.include_router(studies_router)
    app.include_router(quality_router)
    app.include_router(prolific_pages)
    app.include_router(agents_router)
    app.include_router(runs_router)
    app.include_router(api_router)
    for kind in all_kinds().values():
        for router in kind.routers():
            app.include_router(router)
        if (folder := kind.static_dir()) is not None:
            # Before /static below, which would otherwise answer for these paths.
            app.mount(f"/static/kinds/{kind.name}", StaticFiles(directory=str(folder)), name=f"static-{kind.name}")
    app.mount("/static", StaticFiles(directory=str(static_dir())), name="static")

    own_routes(app)
    install_error_handlers(app)
    refuse_clashes(app)
    return app

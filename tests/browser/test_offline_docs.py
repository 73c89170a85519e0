"""The API docs render with no internet: Swagger UI and ReDoc come from our static folder."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def _offline(page, server_url: str) -> list[str]:
    """Abort every request not to the test server; returns the URLs that were refused."""
    ours = urlparse(server_url).netloc
    refused: list[str] = []

    def handle(route):
        if urlparse(route.request.url).netloc == ours:
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", handle)
    return refused


def test_swagger_ui_lists_the_operations_offline(live_server, page):
    refused = _offline(page, live_server.url)
    page.goto(f"{live_server.url}/api/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Proctor")
    ops = page.locator(".opblock-summary-path")
    expect(ops.first).to_be_visible()
    assert ops.count() > 20
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/studies").first).to_be_visible()
    assert refused == []


def test_redoc_lists_the_operations_offline(live_server, page):
    refused = _offline(page, live_server.url)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{live_server.url}/api/redoc")
    expect(page.locator("h1", has_text="Proctor")).to_be_visible()
    # One section per operation once the schema is rendered.
    ops = page.locator("[data-section-id*='operation/']")
    expect(ops.first).to_be_attached()
    assert ops.count() > 20
    expect(page.get_by_role("heading", name="Create Study").first).to_be_visible()
    assert refused == [] and errors == []


def test_pages_link_our_favicon(live_server, page):
    page.goto(f"{live_server.url}/login")
    href = page.locator("link[rel=icon]").get_attribute("href")
    r = page.request.get(live_server.url + href)
    assert r.status == 200 and r.headers["content-type"].startswith("image/svg+xml")

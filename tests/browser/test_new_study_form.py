"""The new-study form in a real browser follows the chosen kind without a reload: only that
kind's upload formats, options, help and default instructions show; the upload preview comes
into view by itself and shows the items in the worker's own page; and a kind's option set on
the form reaches the study."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_first_hour import _log_in
from tests.conftest import make_user
from tests.browser.a3ds_pictures import pictures_loaded

pytestmark = pytest.mark.browser


def _shown_formats(page) -> list[str]:
    return page.locator("#format option").evaluate_all(
        "os => os.filter(o => !o.hidden && !o.disabled).map(o => o.value)"
    )


def test_the_form_switches_with_the_kind_and_the_preview_shows_the_workers_page(live_server, page, tmp_path):
    from app.db import get_sessionmaker
    from app.kinds import all_kinds
    from app.studies.models import Item, Study
    from sqlalchemy import select

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        email = make_user(s, "researcher").email
    _log_in(page, live_server.url, email)
    page.goto(f"{live_server.url}/studies/new")
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)

    kinds = all_kinds()
    for name, kind in reversed(list(kinds.items())):
        page.locator("#kind").select_option(name)
        assert _shown_formats(page) == list(kind.item_formats), name
        assert page.locator("#format").input_value() == kind.item_formats[0]
        if kind.form_help:
            expect(page.locator(f"#{name}-help")).to_be_visible()
        for other in kinds:
            if other != name:
                expect(page.locator(f"#{other}-help")).to_be_hidden()
                expect(page.locator(f"#{other}-options")).to_be_hidden()
        if kind.option_fields:
            fieldset = page.locator(f"#{name}-options")
            expect(fieldset).to_be_visible()
            # The hidden kinds' fields are not sent.
            assert page.locator("[data-kind-panel]:not([hidden]) :is(input, select, textarea):disabled").count() == 0
            assert page.locator("[data-kind-panel][hidden] :is(input, select, textarea):enabled").count() == 0
    assert navigations == []  # no reload
    # Common-ToM wording only on a Common-ToM form.
    page.locator("#kind").select_option("navigation")
    expect(page.get_by_text("Common-ToM questions only")).to_be_hidden()
    expect(page.get_by_text("Navigation following only")).to_be_visible()

    # An A3DS design, previewed: the preview scrolls into view with the worker's page in it.
    design = tmp_path / "design.json"
    design.write_text(json.dumps({"pairs": {"z": {"1": 2, "2": 1}}, "speakers": ["literal"], "seed": 2}))
    page.get_by_label("Title").fill("Form study")
    page.locator("#kind").select_option("a3ds")
    expect(page.locator("#a3ds-options")).to_be_visible()
    page.locator("#a3ds-options").get_by_label("can't tell").select_option("0")  # the default is yes
    page.locator("input[type=file][name=file]").set_input_files(str(design))
    page.get_by_role("button", name="Preview items").click()
    expect(page.locator("#preview")).to_be_in_viewport()
    expect(page.locator("#kind")).to_have_value("a3ds")
    assert _shown_formats(page) == ["design", "captions"]
    expect(page.locator("#a3ds-options").get_by_label("can't tell")).to_have_value("0")
    worker = page.frame_locator("#preview iframe.worker-view").first
    expect(worker.locator(".a3ds-caption")).to_be_visible()
    expect(worker.locator(".a3ds-scene img")).to_have_count(2)
    expect(worker.locator(".a3ds-pick input[value=none]")).to_have_count(0)  # as the option says
    page.wait_for_function(pictures_loaded("document.querySelector('#preview iframe').contentDocument"))
    # Another kind: that preview no longer applies and is hidden.
    page.locator("#kind").select_option("tom")
    expect(page.locator("#preview")).to_be_hidden()
    page.locator("#kind").select_option("a3ds")
    expect(page.locator("#preview")).to_be_visible()

    page.get_by_role("button", name="Create study").click()
    expect(page).to_have_url(re.compile(r"/studies/\d+$"))
    with Session() as s:
        study = s.scalar(select(Study).where(Study.title == "Form study"))
        assert study.kind == "a3ds"
        payloads = s.scalars(select(Item.payload).where(Item.study_id == study.id)).all()
        assert payloads and not any(p.get("cant_tell") for p in payloads)

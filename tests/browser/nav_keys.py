"""Walking the follower page by keyboard, as a person would: turn until the marker of the
next viewpoint is highlighted, then Enter."""

from __future__ import annotations

import math


def _angle(a: float, b: float) -> float:
    return (b - a + math.pi) % (2 * math.pi) - math.pi


def follow_to(page, graph, here: str, there: str) -> None:
    page.wait_for_function("(v) => proctorViewer.state().viewpoint === v", arg=here)
    target = graph.heading(here, there)
    for _ in range(26):
        if page.evaluate("proctorViewer.highlighted()") == there:
            break
        heading = page.evaluate("proctorViewer.state().heading")
        page.keyboard.press("ArrowRight" if _angle(heading, target) > 0 else "ArrowLeft")
    assert page.evaluate("proctorViewer.highlighted()") == there, (here, there)
    page.keyboard.press("Enter")
    page.wait_for_function("(v) => proctorViewer.state().viewpoint === v", arg=there)


def skip_practice(page) -> None:
    """The first instruction of a bundle comes after a practice episode: skip it."""
    page.locator("#nav-practice-done").click()

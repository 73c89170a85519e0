"""Pages and API of the STS suites (paper 004, sections 3.1-3.2 and 5.1): recordings, suites and
their versions, scenarios mined in bulk or on a recording's timeline, personal tags,
generation runs, and a study built from a published version; the play study's two routes,
the grid a worker plays on and the plays stored as recordings; and the human row (a play study
of a version's scenarios, its plays stored as the agent "people", in study.py).

Researchers and admins only, but for the play grid (the crowd worker whose task holds the
item); another researcher's suite, scenario, recording, run or study is 404. A published
version refuses every change with 409.

One module per sub-area; each has its pages (`router`) and API (`api`), gathered here."""

from __future__ import annotations

from fastapi import APIRouter

from app.kinds.sts.views import failures, metrics, recordings, runs, study, suites

# The sub-areas' routes in one flat list each (their prefix and dependencies are bound to each
# route already): whoever reads a kind's routers() (`proctor kinds`, the upload tests) sees
# routes, not included routers.
router = APIRouter()
api = APIRouter()
for area in (recordings, suites, runs, study, metrics, failures):
    router.routes.extend(area.router.routes)
    api.routes.extend(area.api.routes)

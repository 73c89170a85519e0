"""Who may call what: every route of the app, walked with every role on SQLite, and with the
owner, another researcher and an admin on PostgreSQL (see SQLITE_ONLY below).

The table ACCESS below is the decision, per route and caller, of what the app answers. A route
that the app serves but the table does not mention fails the test, so a new route cannot ship
before someone has decided who may use it (add a row here).

Callers (columns):
  anon     a browser with no account (it has a session, hence a CSRF token)
  worker   a crowd worker's browser that entered the study by /s/<slug>?PROLIFIC_PID=...
  owner    the researcher who owns the study (cookie session)
  other    another researcher (cookie session)
  admin    an admin (cookie session)
  t_owner  / t_other / t_admin: the same three people calling with an API token
  t_bad    a revoked API token

Cells: an HTTP status, or `login` for a 303 redirect to /login (a page's way of saying 401).
A 303 elsewhere is the ordinary redirect after a successful form post. 404 on a study, agent or
job means "not among yours": another researcher's things are not revealed to exist.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from dataclasses import dataclass, field

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from app import jobs
from app.auth.security import create_token
from app.auth.models import ApiToken
from app.db import get_sessionmaker
from app.routes import served_routes
from app.storage import get_store
from app.studies import assignment, services
from app.studies.models import Bundle, Item, Study
from app.studies.consent import consent_version
from tests.conftest import ROOT, consent_version_of, create_tom_study, csrf_of, login, make_user

ROLES = ("anon", "worker", "owner", "other", "admin", "t_owner", "t_other", "t_admin", "t_bad")

ACCESS = """
route                                                   anon   worker owner  other  admin  t_owner t_other t_admin t_bad
# ---- public pages and the crowd entry link
GET  /                                                  200    200    303    303    303    303     303     303     401
GET  /login                                             200    200    200    200    200    200     200     200     200
POST /login                                             303    303    303    303    303    303     303     303     303
POST /logout                                            303    303    303    303    303    303     303     303     303
GET  /healthz                                           200    200    200    200    200    200     200     200     200
GET  /help/statistics                                   200    200    200    200    200    200     200     200     200
GET  /docs/oauth2-redirect                              200    200    200    200    200    200     200     200     200
GET  /api/redoc                                         200    200    200    200    200    200     200     200     200
GET  /blobs/{key:path}                                  200    200    200    200    200    200     200     200     200
GET  /s/{slug}                                          303    303    303    303    303    303     303     303     303
# ---- the worker's task pages: only the session that entered the study
GET  /task/{slug}                                       403    200    403    403    403    403     403     403     403
POST /task/{slug}/consent                               403    303    403    403    403    403     403     403     403
POST /task/{slug}/answer                                403    200    403    403    403    403     403     403     403
POST /task/{slug}/check                                 403    303    403    403    403    403     403     403     403
# ---- researcher pages
GET  /account                                           login  login  200    200    200    200     200     200     401
POST /account/tokens                                    login  login  200    200    200    200     200     200     401
POST /account/tokens/{token_id}/revoke                  login  login  303    404    303    303     404     303     401
GET  /studies                                           login  login  200    200    200    200     200     200     401
GET  /studies/new                                       login  login  200    200    200    200     200     200     401
POST /studies/new                                       login  login  303    303    303    303     303     303     401
POST /studies/new/plan                                  login  login  200    200    200    200     200     200     401
GET  /studies/{study_id}                                login  login  200    404    200    200     404     200     401
GET  /studies/{study_id}/progress                       login  login  200    404    200    200     404     200     401
GET  /studies/{study_id}/exports                        login  login  200    404    200    200     404     200     401
GET  /studies/{study_id}/preview                        login  login  200    404    200    200     404     200     401
POST /studies/{study_id}/preview                        login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/state                          login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/comprehension                  login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/release                        login  login  422    404    422    422     404     422     401
POST /studies/{study_id}/prolific/token                 login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/prolific/cost                  login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/prolific/publish               login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/prolific/move                  login  login  422    404    422    422     404     422     401
POST /studies/{study_id}/prolific/reclaim               login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/prolific/reviews               login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/prolific/bonus                 login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/prolific/block                 login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/prolific/message               login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/prolific/allow                 login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/prolific/hooks                 login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/people-sample                  login  login  422    404    422    422     404     422     401
POST /studies/{study_id}/adaptive                       login  login  422    404    422    422     404     422     401
POST /studies/{study_id}/auto-pause                     login  login  422    404    422    422     404     422     401
POST /studies/{study_id}/agents                         login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/exports                        login  login  303    404    303    303     404     303     401
POST /studies/{study_id}/annotations/import             login  login  303    404    303    303     404     303     401
GET  /studies/{study_id}/leaderboard                    login  login  200    404    200    200     404     200     401
GET  /studies/{study_id}/generations                    login  login  200    404    200    200     404     200     401
POST /studies/{study_id}/generations                    login  login  422    404    422    422     404     422     401
# ---- the example kind's page and API route (tests/example_kind), on its own study
GET  /wordcount/studies/{study_id}/tally                login  login  200    404    200    200     404     200     401
POST /api/v1/wordcount/studies/{study_id}/tally         401    401    202    404    202    202     404     202     401
GET  /agents                                            login  login  200    200    200    200     200     200     401
POST /agents                                            login  login  303    303    303    303     303     303     401
GET  /agents/{agent_id}/artifacts                       login  login  200    404    200    200     404     200     401
POST /agents/{agent_id}/artifacts                       login  login  303    404    303    303     404     303     401
# ---- admin pages
GET  /admin/review                                      login  login  403    403    200    403     403     200     401
GET  /admin/studies/{study_id}/review                   login  login  403    403    200    403     403     200     401
POST /admin/studies/{study_id}/review                   login  login  403    403    303    403     403     303     401
GET  /admin/studies/{study_id}/participants/{pid}       login  login  403    403    200    403     403     200     401
GET  /admin/audit                                       login  login  403    403    200    403     403     200     401
# ---- navigation: a building's walkable view (researchers; workers of a navigation study,
#      which the probe worker, in a ToM study, is not: tests/integration/test_navigation.py)
GET  /env/{scan}/view.json                              403    403    200    200    200    200     200     200     401
# ---- navigation: panoramas of a building (buildings are read by any researcher, but changed
#      only by the one who imported them or an admin: another researcher's upload is 403)
POST /api/v1/environments/{scan}/panoramas              401    401    200    403    200    200     403     200     401
# ---- API: researchers (token or cookie session)
GET  /api/v1/studies                                    401    401    200    200    200    200     200     200     401
GET  /api/v1/kinds                                      401    401    200    200    200    200     200     200     401
GET  /api/v1/tokens                                     401    401    200    200    200    200     200     200     401
POST /api/v1/tokens/{token_id}/revoke                   401    401    200    404    200    200     404     200     401
POST /api/v1/studies                                    401    401    201    201    201    201     201     201     401
POST /api/v1/plan                                       401    401    200    200    200    200     200     200     401
GET  /api/v1/studies/{study_id}                         401    401    200    404    200    200     404     200     401
POST /api/v1/studies/{study_id}/state                   401    401    200    404    200    200     404     200     401
PATCH /api/v1/studies/{study_id}                        401    401    200    404    200    200     404     200     401
GET  /api/v1/studies/{study_id}/progress                401    401    200    404    200    200     404     200     401
PUT  /api/v1/studies/{study_id}/people-sample           401    401    200    404    200    200     404     200     401
DELETE /api/v1/studies/{study_id}/people-sample         401    401    200    404    200    200     404     200     401
GET  /api/v1/studies/{study_id}/auto-pause              401    401    200    404    200    200     404     200     401
PUT  /api/v1/studies/{study_id}/auto-pause              401    401    422    404    422    422     404     422     401
GET  /api/v1/studies/{study_id}/items                   401    401    200    404    200    200     404     200     401
GET  /api/v1/studies/{study_id}/annotations/{annotation_id}/trace.jsonl 401 401 200 404 200 200 404 200 401
GET  /api/v1/studies/{study_id}/leaderboard             401    401    200    404    200    200     404     200     401
POST /api/v1/studies/{study_id}/exports                 401    401    202    404    202    202     404     202     401
POST /api/v1/studies/{study_id}/annotations/import      401    401    201    404    201    201     404     201     401
GET  /api/v1/jobs                                       401    401    200    200    200    200     200     200     401
GET  /api/v1/jobs/{job_id}                              401    401    200    404    200    200     404     200     401
POST /api/v1/jobs/{job_id}/cancel                       401    401    200    404    200    200     404     200     401
GET  /api/v1/agents                                     401    401    200    200    200    200     200     200     401
POST /api/v1/agents                                     401    401    201    201    201    201     201     201     401
GET  /api/v1/agents/{agent_id}/artifacts                401    401    200    404    200    200     404     200     401
POST /api/v1/agents/{agent_id}/artifacts                401    401    201    404    201    201     404     201     401
POST /api/v1/studies/{study_id}/agents/{agent_id}/outputs 401  401    200    404    200    200     404     200     401
# generation runs: the probe sends no paths file and the probe run has no job, so the callers
# who may use them get 409 (starting: a study not of navigation's kind; cancelling: a run with
# no job to stop), the others 404
POST /api/v1/studies/{study_id}/generations             401    401    409    404    409    409     404     409     401
GET  /api/v1/generations/{run_id}                       401    401    200    404    200    200     404     200     401
POST /api/v1/generations/{run_id}/cancel                401    401    409    404    409    409     404     409     401
# ---- STS suites (app/kinds/sts/views/): researchers, each on their own suites, recordings
#      and runs. The probe suite's version 1 is published (scenario A), version 2 a draft
#      (scenario B): a new version while 2 is open is 409, and so is removing A.
GET  /sts/suites                                        login  login  200    200    200    200     200     200     401
POST /sts/suites                                        login  login  303    303    303    303     303     303     401
POST /sts/recordings                                    login  login  303    303    303    303     303     303     401
POST /sts/recordings/expert                             login  login  303    303    303    303     303     303     401
GET  /sts/suites/{suite_id}                             login  login  200    404    200    200     404     200     401
GET  /sts/suites/{suite_id}/runs                        login  login  200    404    200    200     404     200     401
POST /sts/suites/{suite_id}/scenarios                   login  login  303    404    303    303     404     303     401
POST /sts/suites/{suite_id}/versions                    login  login  303    404    303    303     404     303     401
POST /sts/suites/{suite_id}/versions/{number}/publish   login  login  303    404    303    303     404     303     401
POST /sts/suites/{suite_id}/versions/{number}/generations login login 303    404    303    303     404     303     401
GET  /sts/scenarios/{scenario_id}                       login  login  200    404    200    200     404     200     401
POST /sts/scenarios/{scenario_id}/takeover              login  login  303    404    303    303     404     303     401
POST /sts/scenarios/{scenario_id}/tags                  login  login  303    404    303    303     404     303     401
POST /api/v1/sts/recordings                             401    401    201    201    201    201     201     201     401
POST /api/v1/sts/recordings/expert                      401    401    201    201    201    201     201     201     401
GET  /api/v1/sts/recordings                             401    401    200    200    200    200     200     200     401
POST /api/v1/sts/suites                                 401    401    201    201    201    201     201     201     401
GET  /api/v1/sts/suites                                 401    401    200    200    200    200     200     200     401
GET  /api/v1/sts/suites/{suite_id}                      401    401    200    404    200    200     404     200     401
GET  /api/v1/sts/suites/{suite_id}/versions             401    401    200    404    200    200     404     200     401
POST /api/v1/sts/suites/{suite_id}/versions             401    401    409    404    409    409     404     409     401
POST /api/v1/sts/suites/{suite_id}/versions/{number}/publish 401 401  200    404    200    200     404     200     401
GET  /api/v1/sts/suites/{suite_id}/versions/{number}/scenarios 401 401 200   404    200    200     404     200     401
POST /api/v1/sts/suites/{suite_id}/versions/{number}/scenarios 401 401 201   404    201    201     404     201     401
GET  /api/v1/sts/suites/{suite_id}/versions/{number}/agents 401  401  200    404    200    200     404     200     401
POST /api/v1/sts/suites/{suite_id}/versions/{number}/generations 401 401 202 404    202    202     404     202     401
POST /api/v1/sts/suites/{suite_id}/versions/{number}/study 401   401  201    404    201    201     404     201     401
POST /api/v1/sts/suites/{suite_id}/versions/{number}/play-study 401 401 201  404    201    201     404     201     401
# the probe's play study is of missions, not of a suite's scenarios: 409 where allowed
POST /api/v1/sts/continuations/from-study               401    401    409    404    409    409     404     409     401
GET  /api/v1/sts/generations/{run_id}                   401    401    200    404    200    200     404     200     401
PATCH /api/v1/sts/scenarios/{scenario_id}               401    401    200    404    200    200     404     200     401
DELETE /api/v1/sts/scenarios/{scenario_id}              401    401    409    404    409    409     404     409     401
POST /api/v1/sts/scenarios/{scenario_id}/tags           401    401    200    404    200    200     404     200     401
DELETE /api/v1/sts/scenarios/{scenario_id}/tags/{tag}   401    401    200    404    200    200     404     200     401
POST /sts/suites/{suite_id}/versions/{number}/study     login  login  303    404    303    303     404     303     401
POST /sts/suites/{suite_id}/versions/{number}/play-study login login 303  404    303    303     404     303     401
POST /sts/studies/{study_id}/people                     login  login  303    404    303    303     404     303     401
# ---- an STS study of the probe suite: metrics to correlate with (the study's managers), and
#      failed continuations classified with the paper's error types (admins only)
POST /sts/studies/{study_id}/metrics                    login  login  303    404    303    303     404     303     401
POST /sts/studies/{study_id}/metrics/delete             login  login  303    404    303    303     404     303     401
POST /api/v1/sts/studies/{study_id}/metrics             401    401    200    404    200    200     404     200     401
DELETE /api/v1/sts/studies/{study_id}/metrics/{name}    401    401    200    404    200    200     404     200     401
GET  /sts/studies/{study_id}/failures                   login  login  403    403    200    403     403     200     401
GET  /sts/studies/{study_id}/failures/{item_id}         login  login  403    403    200    403     403     200     401
POST /sts/studies/{study_id}/failures/{item_id}         login  login  403    403    303    403     403     303     401
GET  /api/v1/sts/studies/{study_id}/failures            401    401    403    403    200    403     403     200     401
PUT  /api/v1/sts/studies/{study_id}/failures/{item_id}  401    401    403    403    200    403     403     200     401
# ---- STS play studies: the owner's (or an admin's) plays stored as recordings; the grid a
#      worker plays on, for the crowd session whose task holds the item (the probe worker's
#      task is in a ToM study: 404, tests/integration/test_sts_play.py plays one)
POST /sts/studies/{study_id}/recordings                 login  login  303    404    303    303     404     303     401
POST /api/v1/sts/recordings/from-study                  401    401    201    404    201    201     404     201     401
GET  /api/v1/sts/play/{slug}/{assignment_id}            403    404    403    403    403    403     403     403     403
GET  /api/v1/sts/preview/{study_id}/{item_id}           401    401    200    404    200    200     404     200     401
# ---- Hexagons consolidation of an execution study: admins only
GET  /hexagons/studies/{study_id}/consolidation         login  login  403    403    200    403     403     200     401
GET  /hexagons/studies/{study_id}/consolidation/{item_id}/{step} login login 403 403 200 403     403     200     401
POST /hexagons/studies/{study_id}/consolidation/{item_id}/{step} login login 403 403 303 403     403     303     401
POST /hexagons/studies/{study_id}/consolidation/{item_id}/{step}/abstraction login login 403 403 303 403 403 303 401
GET  /api/v1/hexagons/studies/{study_id}/consolidation  401    401    403    403    200    403     403     200     401
GET  /api/v1/hexagons/studies/{study_id}/consolidation/{item_id}/{step} 401 401 403 403 200 403 403   200     401
PUT  /api/v1/hexagons/studies/{study_id}/consolidation/{item_id}/{step} 401 401 403 403 200 403 403   200     401
# ---- Hexagons description and verification studies (app/kinds/hexagons/views.py): the
#      study's managers. Targets go to a draft description study; verification takes a live
#      one with a written procedure; the agreement is read on its verification study.
GET  /hexagons/studies/{study_id}/targets               login  login  200    404    200    200     404     200     401
POST /hexagons/studies/{study_id}/targets               login  login  303    404    303    303     404     303     401
POST /hexagons/studies/{study_id}/verification          login  login  303    404    303    303     404     303     401
GET  /hexagons/studies/{study_id}/verification          login  login  200    404    200    200     404     200     401
POST /api/v1/hexagons/studies/{study_id}/targets        401    401    201    404    201    201     404     201     401
POST /api/v1/hexagons/studies/{study_id}/verification   401    401    201    404    201    201     404     201     401
GET  /api/v1/hexagons/studies/{study_id}/verification   401    401    200    404    200    200     404     200     401
GET  /api/v1/hexagons/studies/{study_id}/verification.jsonl 401 401   200    404    200    200     404     200     401
# ---- Hexagons executor runs (app/kinds/hexagons/views.py): the study's managers. The probe
#      names an artifact nobody has (404, as a body's missing row is) and the probe run has
#      ended (cancel: 409)
GET  /hexagons/studies/{study_id}/generations           login  login  200    404    200    200     404     200     401
POST /hexagons/studies/{study_id}/generations           login  login  303    404    303    303     404     303     401
POST /api/v1/hexagons/studies/{study_id}/generations    401    401    404    404    404    404     404     404     401
GET  /api/v1/hexagons/studies/{study_id}/generations    401    401    200    404    200    200     404     200     401
GET  /api/v1/hexagons/generations/{job_id}              401    401    200    404    200    200     404     200     401
POST /api/v1/hexagons/generations/{job_id}/cancel       401    401    409    404    409    409     404     409     401
# ---- A3DS scene pictures: any account, or a crowd worker inside a study
GET  /a3ds/scenes/{scene_id}                            403    200    200    200    200    200     200     200     401
# ---- A3DS captioner runs (app/kinds/a3ds/views.py): the study's managers. The probe names no
#      captioner (422) and the probe run has ended (cancel: 409)
GET  /a3ds/studies/{study_id}/generations               login  login  200    404    200    200     404     200     401
POST /a3ds/studies/{study_id}/generations               login  login  303    404    303    303     404     303     401
POST /api/v1/a3ds/studies/{study_id}/generations        401    401    422    404    422    422     404     422     401
GET  /api/v1/a3ds/studies/{study_id}/generations        401    401    200    404    200    200     404     200     401
GET  /api/v1/a3ds/generations/{job_id}                  401    401    200    404    200    200     404     200     401
POST /api/v1/a3ds/generations/{job_id}/cancel           401    401    409    404    409    409     404     409     401
# ---- agent runs (app/runs/api.py), one path for every kind: the study's managers, or the
#      target's (an STS suite). The probe run is the ended Hexagons executor run (cancel: 409);
#      a start names no artifact (422), an STS start another kind's agent (409)
GET  /studies/{study_id}/runs                           login  login  200    404    200    200     404     200     401
POST /api/v1/studies/{study_id}/runs                    401    401    422    404    422    422     404     422     401
POST /api/v1/runs                                       401    401    409    404    409    409     404     409     401
GET  /api/v1/runs                                       401    401    200    200    200    200     200     200     401
GET  /api/v1/runs/{run_id}                              401    401    200    404    200    200     404     200     401
POST /api/v1/runs/{run_id}/cancel                       401    401    409    404    409    409     404     409     401
# ---- Prolific with the researcher's own token (app/crowd/api.py): the probe stores no token
#      (a blank one is refused, 422), so every call that needs one is 409 for its callers
PUT  /api/v1/prolific/token                             401    401    422    422    422    422     422     422     401
GET  /api/v1/prolific/account                           401    401    409    409    409    409     409     409     401
POST /api/v1/studies/{study_id}/prolific/cost           401    401    409    404    409    409     404     409     401
POST /api/v1/studies/{study_id}/prolific                401    401    409    404    409    409     404     409     401
POST /api/v1/studies/{study_id}/prolific/transition     401    401    409    404    409    409     404     409     401
POST /api/v1/studies/{study_id}/prolific/reviews        401    401    409    404    409    409     404     409     401
POST /api/v1/studies/{study_id}/prolific/bonuses        401    401    409    404    409    409     404     409     401
POST /api/v1/studies/{study_id}/prolific/blocks         401    401    409    404    409    409     404     409     401
POST /api/v1/studies/{study_id}/prolific/reclaim        401    401    409    404    409    409     404     409     401
POST /api/v1/studies/{study_id}/prolific/messages       401    401    409    404    409    409     404     409     401
# The study's Prolific workers and their records: read here only, no token needed (the probe
# study is not on Prolific: no worker)
GET  /api/v1/studies/{study_id}/prolific/workers        401    401    200    404    200    200     404     200     401
PUT  /api/v1/prolific/allow-list                        401    401    409    409    409    409     409     409     401
POST /api/v1/prolific/hooks                             401    401    409    409    409    409     409     409     401
# Prolific's hooks: no session or token, only the signature; the probe's account has none (404)
POST /api/v1/prolific/hooks/{account_id}                404    404    404    404    404    404     404     404     404
# ---- API: admins
GET  /api/v1/studies/{study_id}/review                  401    401    403    403    200    403     403     200     401
POST /api/v1/studies/{study_id}/review                  401    401    403    403    200    403     403     200     401
GET  /api/v1/audit                                      401    401    403    403    200    403     403     200     401
# ---- API: crowd (the worker's signed session; entering is open to anyone with the link)
POST /api/v1/crowd/{slug}/enter                         200    200    200    200    200    200     200     200     200
POST /api/v1/crowd/{slug}/consent                       403    200    403    403    403    403     403     403     403
GET  /api/v1/crowd/{slug}/next                          403    200    403    403    403    403     403     403     403
POST /api/v1/crowd/{slug}/submit                        403    200    403    403    403    403     403     403     403
"""

SKIPPED = ("/static", "/openapi.json", "/api/docs")


def parse_access(text: str) -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {}
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("#")]
    header = lines[0].split()
    assert tuple(header[1:]) == ROLES, header
    for ln in lines[1:]:
        method, path, *cells = ln.split()
        assert len(cells) == len(ROLES), f"row {method} {path} has {len(cells)} cells"
        key = f"{method} {path}"
        assert key not in table, f"{key} appears twice in the table"
        table[key] = dict(zip(ROLES, cells))
    return table


def app_routes(app) -> dict[str, object]:
    """'METHOD /path' -> route, for every route the app serves (HEAD not counted)."""
    out = {}
    for r in served_routes(app.routes):
        path = getattr(r, "path", None)
        if path is None or any(path == s or path.startswith(s + "/") for s in SKIPPED):
            continue
        methods = getattr(r, "methods", None) or {"GET"}
        for m in sorted(set(methods) - {"HEAD"}):
            out[f"{m} {path}"] = r
    return out


# --------------------------------------------------------------------------------------------
# The world the probes run in: real rows for every path parameter
# --------------------------------------------------------------------------------------------


def small_csv(n: int = 30) -> bytes:
    """The fixture's header and first n questions (records span several lines)."""
    text = (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_text("utf-8")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows[: n + 1])
    return out.getvalue().encode("utf-8")


@dataclass
class World:
    db_url: str
    app: object
    study: Study
    agent_id: int
    job_id: int
    pid: int
    bundle_id: int
    blob_url: str
    users: dict
    tokens: dict = field(default_factory=dict)
    clients: dict = field(default_factory=dict)
    saved: dict = field(default_factory=dict)
    csrf: dict = field(default_factory=dict)
    items: list = field(default_factory=list)
    nav: dict = field(default_factory=dict)  # a navigation study and a follower's annotation
    run_id: int = 0  # a generation run (no job) of the study
    sts: dict = field(default_factory=dict)  # an STS suite, its versions, scenarios and a run
    spare_token: int = 0  # an API token of the owner's that the probes may revoke
    hexagons: dict = field(default_factory=dict)  # a Hexagons study with disagreements to consolidate
    hex: dict = field(default_factory=dict)  # Hexagons description and verification studies
    hexrun: dict = field(default_factory=dict)  # a Hexagons study and an ended executor run
    a3dsrun: dict = field(default_factory=dict)  # an A3DS draft study and an ended captioner run

    def session(self):
        return get_sessionmaker(self.db_url)()

    def current_assignment(self) -> int:
        """The worker's current lease (a fresh one when the last was answered)."""
        with self.session() as s:
            study = s.get(Study, self.study.id)
            a = assignment.next_item(s, study, self.bundle_id)
            assert a is not None, "the probe worker's bundle ran out"
            return a.id

    def reset(self) -> None:
        """Undo what a probe may have changed that other probes rely on."""
        with self.session() as s:
            s.execute(update(Study).where(Study.id == self.study.id).values(state="live"))
            s.execute(update(jobs.Job).where(jobs.Job.id == self.job_id).values(state="queued"))
            # A probe of POST /logout ends every session of its account: bring the saved ones back.
            from app.auth.models import User

            s.execute(update(User).values(session_version=0))
            if self.sts:
                _reset_sts(s, self.sts)
            if self.hex:  # the written procedure is again not yet verified
                s.execute(
                    update(Study).where(Study.id == self.hex["described"]).values(kind_settings=self.hex["settings"])
                )
            s.commit()

    def call(self, role: str, method: str, path: str, **kw):
        client = self.clients[role]
        client.cookies.jar.clear()  # every probe starts from the role's own session cookie
        for c in self.saved[role]:
            client.cookies.jar.set_cookie(c)
        refused = False
        try:
            r = client.request(method, path, follow_redirects=False, **kw)
            refused = r.status_code in (401, 403, 404) or (
                r.status_code == 303 and r.headers.get("location", "").startswith("/login")
            )
            return r
        finally:
            # A read changes nothing the reset restores, nor does a refusal: a refused call that
            # did change something then shows in the probes after it, as in the traces checked
            # after the table (the reset cost ~5 ms a call, half of them refusals).
            if method not in ("GET", "HEAD") and not refused:
                self.reset()


def _enter_worker(client: TestClient, slug: str, pid: str) -> None:
    """Enter and agree to the consent text shown, as the probe worker's browser."""
    r = client.get(
        f"/s/{slug}", params={"PROLIFIC_PID": pid, "STUDY_ID": "st", "SESSION_ID": pid}, follow_redirects=False
    )
    assert r.status_code == 303 and r.headers["location"] == f"/task/{slug}", r.text
    page = client.get(r.headers["location"]).text
    r = client.post(
        f"/task/{slug}/consent",
        follow_redirects=False,
        data={"csrf_token": csrf_of(client), "consent_version": consent_version_of(page)},
    )
    assert r.status_code == 303, r.text


@pytest.fixture
def world(app, session, db_url):
    owner = make_user(session, "researcher")
    other = make_user(session, "researcher")
    admin = make_user(session, "admin")
    make_user(session, "researcher", email="probe-login@example.org")
    study = create_tom_study(session, owner, bundle_size=40, gold_rate=0.1, title="Roles study")
    agent = services.register_agent(session, owner, "tom", "roles-agent")
    items = (
        session.execute(select(Item.external_id).where(Item.study_id == study.id).order_by(Item.id).limit(20))
        .scalars()
        .all()
    )
    services.import_agent_outputs(session, study, agent, _outputs(items))
    job = jobs.create_job(session, "export", study_id=study.id, owner_id=owner.id)
    session.commit()
    from app.kinds.navigation.environments import import_house
    from app.kinds.navigation.house import generate_house

    house = generate_house(1)
    import_house(session, house, actor=owner)  # the owner's building: its panoramas are theirs to change
    nav = _nav_annotation(session, owner, house)
    # speakers and listeners are uploaded to navigation agents (the roles agent is a ToM one)
    nav["agent"] = services.register_agent(session, owner, "navigation", "roles-nav-agent").id
    from tests.integration.test_example_kind import make_study

    nav["wordcount"] = make_study(session, owner).id
    store = get_store()
    store.put("exports/roles/probe.txt", b"probe")
    blob_url = store.url("exports/roles/probe.txt")

    tokens = {
        "t_owner": create_token(session, owner),
        "t_other": create_token(session, other),
        "t_admin": create_token(session, admin),
    }
    bad = create_token(session, owner, "revoked")
    session.execute(update(ApiToken).where(ApiToken.name == "revoked").values(revoked=True))
    tokens["t_bad"] = bad
    create_token(session, owner, "spare")
    spare = session.scalar(select(ApiToken.id).where(ApiToken.name == "spare"))
    session.commit()

    clients = {}
    w = World(
        db_url=db_url,
        app=app,
        study=study,
        agent_id=agent.id,
        job_id=job.id,
        pid=0,
        run_id=_generation_run(session, owner, study),
        bundle_id=0,
        blob_url=blob_url,
        users={"owner": owner, "other": other, "admin": admin},
        tokens=tokens,
        items=list(items),
        nav=nav,
        spare_token=spare,
    )
    for role in ROLES:
        headers = {"Authorization": f"Bearer {tokens[role]}"} if role in tokens else {}
        clients[role] = TestClient(app, headers=headers).__enter__()
    w.sts = _sts_world(session, owner)
    from tests.integration.test_hex_consolidation import disagreement_study

    hex_study = disagreement_study(session, owner)
    w.hexagons = {"study": hex_study.id, "item": session.scalar(select(Item.id).where(Item.study_id == hex_study.id))}
    w.hexrun = _hexrun_world(session, owner)
    w.a3dsrun = _a3dsrun_world(session, owner)
    w.hex = _hex_world(session, owner)
    w.clients = clients
    w.csrf["anon"] = csrf_of(clients["anon"])
    _enter_worker(clients["worker"], study.slug, "roles-worker")
    w.csrf["worker"] = csrf_of(clients["worker"])
    for role in ("owner", "other", "admin"):
        w.csrf[role] = login(clients[role], w.users[role])
    for role in ROLES:  # token callers keep no cookies between probes
        w.saved[role] = list(clients[role].cookies.jar) if role in w.csrf else []
    worker_row = session.scalar(select(Bundle).where(Bundle.study_id == study.id))
    w.bundle_id, w.pid = worker_row.id, worker_row.participant_id
    yield w
    for c in clients.values():
        c.__exit__(None, None, None)


def _nav_annotation(session, owner, house) -> dict:
    """A navigation study on the house with one followed instruction (by the probe worker's
    account, so "only the worker who entered answered" still holds), for the trace export."""
    from app.kinds.navigation.house import sample_paths, to_r2r

    data = json.dumps(to_r2r(house, sample_paths(house, 1, rng=1), [["Walk to the end."]])).encode()
    study = services.create_study(session, owner, "navigation", services.StudySettings(title="Roles nav"), data, "r2r")
    services.set_state(session, study, "live", owner)
    bundle = assignment.enter(session, study, "prolific", "roles-worker")
    a = assignment.next_item(session, study, bundle.id)
    path = session.get(Item, a.item_id).reference["path"]
    ann = assignment.submit(
        session,
        study,
        bundle.id,
        a.id,
        {"path": path, "trace": [[v, 0.0, 0.0, 100.0 * k] for k, v in enumerate(path)], "rating": 4},
        uuid.uuid4().hex,
    )
    return {"study": study.id, "annotation": ann.id}


def _listener_upload() -> tuple[dict, dict]:
    """A tiny built-in listener as safetensors weights plus its config (docs/agents.md)."""
    from safetensors.torch import save

    from workers.navigation.features import SPECIALS
    from workers.navigation.listener import Listener

    listener = Listener([*SPECIALS, "go"], hidden=4, embed=4)
    return (
        {"role": "listener", "format": "safetensors", "config": json.dumps(listener.config())},
        {"file": ("listener.safetensors", save(listener.state_dict()), "application/octet-stream")},
    )


def _generation_run(session, owner, study) -> int:
    """A stored generation run (rows only: no job, no model behind its artifact)."""
    from tests.nav_fixtures import stored_generation_run

    return stored_generation_run(session, owner, study).id


def _sts_world(session, owner) -> dict:
    """An STS suite of the owner's: version 1 published with scenario A, version 2 a draft with
    scenario B; the built-in agents' continuations of A (for the study probe) and a finished
    generation run; and a play study with one play, by the probe worker's account."""
    from app.kinds.sts import generation, suites
    from app.kinds.sts.policies import policy_for_agent
    from app.kinds.sts.recordings import expert_recording

    (rec,), _ = suites.expert_recordings(session, owner, "BabyAI-GoToLocal-v0", [2])
    suite = suites.create_suite(session, owner, "Roles suite")
    v1 = suites.latest_version(session, suite)
    a = suites.add_scenarios(session, v1, takeover=0, recordings=[rec.id], continuation=8)["added"][0]["id"]
    suites.publish(session, v1)
    v2 = suites.new_version(session, suite)
    b = suites.add_scenarios(session, v2, takeover=1, recordings=[rec.id], continuation=8)["added"][0]["id"]
    scenario = session.get(suites.Scenario, a)
    for name in ("expert", "random"):
        agent = suites.builtin_agent(session, owner.id, name)
        session.commit()
        generation.generate(session, agent, [(scenario, 0)], 0, policy_for_agent(session, agent))
    run = generation.create_run(
        session, owner, suite, v1, suites.builtin_agent(session, owner.id, "expert"), continuations=1
    )
    session.get(jobs.Job, run.job_id).state = "done"
    session.commit()
    # A study of version 1 with a metric to correlate with, and a continuation marked a failure.
    from app.kinds.sts.study import build_study

    study, _ = build_study(
        session, owner, suite, v1, services.StudySettings(title="Roles STS"), agents=["expert", "random"]
    )
    study.kind_settings = {**study.kind_settings, "agent_metrics": {"probe": {"expert": 1.0}}}
    services.set_state(session, study, "live", owner)
    bundle = assignment.enter(session, study, "prolific", "roles-sts-annotator")
    lease = assignment.next_item(session, study, bundle.id)
    assignment.submit(session, study, bundle.id, lease.id, {"marker": "failure", "step": 0}, uuid.uuid4().hex)
    play = services.create_study(
        session,
        owner,
        "sts",
        services.StudySettings(title="Roles play"),
        b'{"level": "BabyAI-GoToLocal-v0", "seed": 2}',
        "missions",
    )
    services.set_state(session, play, "live", owner)
    bundle = assignment.enter(session, play, "prolific", "roles-worker")
    a_play = assignment.next_item(session, play, bundle.id)
    assignment.submit(
        session,
        play,
        bundle.id,
        a_play.id,
        {"actions": expert_recording("BabyAI-GoToLocal-v0", 2).actions},
        uuid.uuid4().hex,
    )
    return {
        "suite": suite.id,
        "v2": v2.id,
        "a": a,
        "b": b,
        "run": run.id,
        "recording": rec.id,
        "study": study.id,
        "item": lease.item_id,
        "settings": dict(study.kind_settings),
        "play": play.id,
        "play_item": a_play.item_id,
    }


HEX_TARGET = [4, 5] + [0] * 178


def _hex_world(session, owner) -> dict:
    """Hexagons: a draft description study (targets are added to drafts), a live one with one
    procedure written (by the probe worker's account) and the verification study made of it."""
    from app.kinds.hexagons.verification import make_verification_study

    targets = json.dumps({"id": "probe", "board": HEX_TARGET}).encode()
    draft = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Roles hex draft"), targets, "targets"
    )
    described = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Roles hex"), targets, "targets"
    )
    services.set_state(session, described, "live", owner)
    settings = dict(described.kind_settings)
    bundle = assignment.enter(session, described, "prolific", "roles-worker")
    a = assignment.next_item(session, described, bundle.id)
    assignment.submit(
        session,
        described,
        bundle.id,
        a.id,
        {"steps": [{"instruction": "Paint tile 0 red.", "board": [4] + [0] * 179, "actions": [[0, 4, 100]]}]},
        uuid.uuid4().hex,
    )
    verification = make_verification_study(session, described, owner)
    return {"draft": draft.id, "described": described.id, "verification": verification.id, "settings": settings}


def _hexrun_world(session, owner) -> dict:
    """A Hexagons study of the owner's with one ended executor run (a job row: no model behind it)."""
    blank = [0] * 180
    line = json.dumps(
        {
            "index": 1,
            "annotation_round": 1,
            "category": "simple",
            "image_id": "P1",
            "instructor_id": 1,
            "number_of_drawing_steps": 1,
            "agreement_tags": ["A"],
            "agreement_scores": [[1, 1, 1]],
            "drawing_procedure": [[0, "NONE", blank], [1, "tile 0 red", [4] + blank[1:]]],
        }
    )
    study = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Roles hex"), line.encode(), "procedures"
    )
    job = jobs.create_job(
        session,
        "hexagons.generate",
        study_id=study.id,
        owner_id=owner.id,
        artifact_id=1,
        agent_id=1,
        on="gold",
        batch_size=8,
    )
    job.state = "done"
    from app.runs.models import AgentRun

    run = AgentRun(kind="hexagons", study_id=study.id, params=job.params, job_id=job.id, owner_id=owner.id)
    session.add(run)
    session.commit()
    return {"study": study.id, "job": job.id, "run": run.id}


def _a3dsrun_world(session, owner) -> dict:
    """An A3DS draft study of the owner's with one ended captioner run (a job row)."""
    design = {"pairs": {"z": {"1": 1}}, "speakers": ["literal"], "seed": 0}
    study = services.create_study(
        session, owner, "a3ds", services.StudySettings(title="Roles a3ds"), json.dumps(design).encode(), "design"
    )
    job = jobs.create_job(
        session, "a3ds.generate", study_id=study.id, owner_id=owner.id, speaker="short", captioner="short", batch_size=8
    )
    job.state = "done"
    from app.runs.models import AgentRun

    session.add(AgentRun(kind="a3ds", study_id=study.id, params=job.params, job_id=job.id, owner_id=owner.id))
    session.commit()
    return {"study": study.id, "job": job.id}


def _reset_sts(s, sts: dict) -> None:
    """Undo the STS probes: version 2 a draft again, scenario B as it was, and no scenario or
    generation run but the world's."""
    from sqlalchemy import delete

    from app.kinds.sts.models import GenerationRun, Scenario, SuiteVersion

    s.execute(update(SuiteVersion).where(SuiteVersion.id == sts["v2"]).values(state="draft", published_at=None))
    s.execute(delete(Scenario).where(Scenario.suite_id == sts["suite"], Scenario.id.not_in([sts["a"], sts["b"]])))
    s.execute(update(Scenario).where(Scenario.id == sts["b"]).values(takeover=1, category="go to"))
    probe_jobs = list(s.scalars(select(GenerationRun.job_id).where(GenerationRun.id != sts["run"])))
    s.execute(delete(GenerationRun).where(GenerationRun.id != sts["run"]))
    s.execute(delete(jobs.Job).where(jobs.Job.id.in_([j for j in probe_jobs if j is not None])))
    s.execute(update(Study).where(Study.id == sts["study"]).values(kind_settings=sts["settings"]))


def _sts_recording_line(name: str) -> bytes:
    from app.kinds.sts.recordings import expert_recording

    rec = expert_recording("BabyAI-GoToLocal-v0", 3)
    return json.dumps(
        {"id": f"probe-{name}", "level": rec.level, "seed": rec.seed, "mission": rec.mission, "actions": rec.actions}
    ).encode()


def _outputs(ids, answer: str = "Yes") -> bytes:
    return "".join(json.dumps({"question_id": i, "answer": answer}) + "\n" for i in ids).encode()


# --------------------------------------------------------------------------------------------
# How each route is called: path parameters and a body that the route accepts
# --------------------------------------------------------------------------------------------


def request_for(w: World, key: str, role: str) -> tuple[str, str, dict]:
    method, template = key.split(" ", 1)
    path = (
        template.replace("{study_id}", str(w.study.id))
        .replace("{slug}", w.study.slug)
        .replace("{agent_id}", str(w.agent_id))
        .replace("{job_id}", str(w.job_id))
        .replace("{pid}", str(w.pid))
        .replace("{scan}", "house-1")
        .replace("{run_id}", str(w.run_id))
        .replace("{token_id}", str(w.spare_token))
        .replace("{scene_id}", "12500")
        .replace("{account_id}", "1")
    )
    if "wordcount/" in template:  # the example kind's routes serve its own studies
        path = template.replace("{study_id}", str(w.nav["wordcount"]))
    if "/agents/{agent_id}/artifacts" in template:
        path = template.replace("{agent_id}", str(w.nav["agent"]))
    if "/sts/" in template:
        # Publishing and adding scenarios take the draft (2); the rest the published version (1).
        number = "2" if template.endswith("/publish") or (method == "POST" and template.endswith("/scenarios")) else "1"
        path = (
            template.replace("{suite_id}", str(w.sts["suite"]))
            .replace("{number}", number)
            .replace("{study_id}", str(w.sts["study"]))
            .replace("{item_id}", str(w.sts["item"]))
            .replace("{name}", "probe")
            .replace("{run_id}", str(w.sts["run"]))
            .replace("{tag}", "probe tag")
            .replace("{scenario_id}", str(w.sts["a"] if method == "DELETE" and "tags" not in template else w.sts["b"]))
            .replace("{slug}", w.study.slug)
            .replace("{assignment_id}", "1")
        )
    if "/hexagons/" in template:
        if "/generations" in template:
            path = template.replace("{study_id}", str(w.hexrun["study"])).replace("{job_id}", str(w.hexrun["job"]))
        elif "/consolidation" in template:
            path = (
                template.replace("{study_id}", str(w.hexagons["study"]))
                .replace("{item_id}", str(w.hexagons["item"]))
                .replace("{step}", "1")
            )
        else:
            which = "draft" if "targets" in template else "described" if method == "POST" else "verification"
            path = template.replace("{study_id}", str(w.hex[which]))
    if template.startswith("/api/v1/runs") or template.endswith("/studies/{study_id}/runs"):
        path = template.replace("{study_id}", str(w.hexrun["study"])).replace("{run_id}", str(w.hexrun["run"]))
    if "/a3ds/" in template and "/generations" in template:
        path = template.replace("{study_id}", str(w.a3dsrun["study"])).replace("{job_id}", str(w.a3dsrun["job"]))
    if template == "/api/v1/sts/preview/{study_id}/{item_id}":  # a play study's mission
        path = f"/api/v1/sts/preview/{w.sts['play']}/{w.sts['play_item']}"
    if template == "/sts/studies/{study_id}/recordings":
        path = f"/sts/studies/{w.sts['play']}/recordings"
    if "{annotation_id}" in template:
        path = template.replace("{study_id}", str(w.nav["study"])).replace("{annotation_id}", str(w.nav["annotation"]))
    kw: dict = {}
    form: dict | None = None
    files = None
    study_state = "paused"
    if template == "/blobs/{key:path}":
        path = w.blob_url
    elif template == "/s/{slug}":
        kw["params"] = {"PROLIFIC_PID": f"probe-{role}", "STUDY_ID": "st", "SESSION_ID": "se"}
    elif key == "POST /login":
        form = {"email": "probe-login@example.org", "password": "pw-" + "x" * 8, "next": "/studies"}
    elif key in (
        "POST /logout",
        "POST /studies/{study_id}/exports",
        "POST /account/tokens/{token_id}/revoke",
        "POST /studies/{study_id}/release",
    ):  # no worker id: refused (422) where allowed
        form = {}
    elif key == "POST /studies/{study_id}/people-sample":
        form = {"n": "0"}  # refused (422) where allowed: nothing changes for the probe's worker
    elif key == "POST /studies/{study_id}/adaptive":
        form = {"adaptive": "on"}  # refused (422) where allowed: the probe's kind ranks no agents
    elif key == "POST /studies/{study_id}/auto-pause":
        form = {}  # refused (422) where allowed: the probe's kind ranks no agents to mark
    elif key == "PUT /api/v1/studies/{study_id}/auto-pause":
        kw["json"] = {"pairs": []}  # refused (422) likewise
    elif key in ("POST /task/{slug}/check", "POST /studies/{study_id}/comprehension"):
        form = {}  # no check on the probe's study: on to its items; "none" kept
    elif key == "POST /task/{slug}/consent":
        form = {"consent_version": consent_version(w.study)}
    elif key == "POST /studies/{study_id}/preview":
        form = {"n": "1", "answer": "Yes"}
    elif key == "POST /task/{slug}/answer":
        form = {"assignment_id": str(w.current_assignment()), "answer": "Yes", "idempotency_key": uuid.uuid4().hex}
    elif key == "POST /account/tokens":
        form = {"name": f"probe-{role}"}
    elif key == "POST /studies/new":
        form = {"title": f"Probe {role}", "action": "create"}
        files = {"file": ("q.csv", small_csv(), "text/csv")}
    elif key == "POST /studies/new/plan":
        form = {"scores": "0.8, 0.7", "items": "20", "studies": "10"}
    elif key == "PUT /api/v1/prolific/token":
        kw["json"] = {"token": " "}  # blank: refused before Prolific is asked
    elif key in ("POST /api/v1/studies/{study_id}/prolific/cost", "POST /api/v1/studies/{study_id}/prolific"):
        kw["json"] = {"reward_cents": 150, "places": 20}
    elif key == "POST /api/v1/studies/{study_id}/prolific/transition":
        kw["json"] = {"action": "publish"}
    elif key in (
        "POST /api/v1/studies/{study_id}/prolific/reviews",
        "POST /api/v1/studies/{study_id}/prolific/reclaim",
    ):
        kw["json"] = {}
    elif key == "POST /api/v1/studies/{study_id}/prolific/bonuses":
        kw["json"] = {"worker_id": "probe", "amount_cents": 1, "key": "probe"}
    elif key == "POST /api/v1/studies/{study_id}/prolific/blocks":
        kw["json"] = {"worker_id": "probe"}
    elif key == "POST /api/v1/studies/{study_id}/prolific/messages":
        kw["json"] = {"worker_id": "probe", "body": "Hello"}
    elif key in ("PUT /api/v1/prolific/allow-list", "POST /api/v1/prolific/hooks"):
        kw["json"] = {}
    elif key == "POST /api/v1/prolific/hooks/{account_id}":
        kw["json"] = {"resource_id": "probe", "event_type": "submission.status.change", "status": "RETURNED"}
    elif key.startswith("POST /studies/{study_id}/prolific/"):
        # No token stored, no study on Prolific: each form's refusal is its page's message
        # (a 303 back), a bad action a 422; nothing reaches Prolific.
        form = {"reward_cents": "150", "places": "20", "worker_id": "probe", "amount_cents": "1", "body": "Hello"}
    elif key == "POST /api/v1/plan":
        kw["json"] = {"scores": [0.8, 0.7], "items": 20, "studies": 10}
    elif key == "POST /studies/{study_id}/state":
        form = {"state": study_state}
    elif key == "POST /studies/{study_id}/agents":
        form = {"name": f"page-agent-{role}", "version": "1"}
        files = {"file": ("a.jsonl", _outputs(w.items[:5]), "application/jsonl")}
    elif key == "POST /admin/studies/{study_id}/review":
        form = {"participant_id": str(w.pid), "decision": "approve"}
    elif key == "POST /api/v1/studies":
        form = {"settings": json.dumps({"title": f"API probe {role}"})}
        files = {"file": ("q.csv", small_csv(), "text/csv")}
    elif key == "POST /api/v1/studies/{study_id}/state":
        kw["json"] = {"state": study_state}
    elif key == "PATCH /api/v1/studies/{study_id}":
        kw["json"] = {"max_open_bundles_per_ip": 100}
    elif key == "DELETE /api/v1/studies/{study_id}/people-sample":
        pass  # no body: people judge every item again
    elif key == "PUT /api/v1/studies/{study_id}/people-sample":
        kw["json"] = {"n": len(w.items), "seed": 1}  # every item: the probe's worker keeps working
    elif key == "POST /api/v1/agents":
        kw["json"] = {"name": f"api-agent-{role}"}
    elif key == "POST /api/v1/environments/{scan}/panoramas":
        from app.kinds.navigation.environments import get_graph
        from tests.integration.test_nav_panoramas import panorama_png

        files = [("files", (f"{get_graph('house-1').viewpoints[0]}.png", panorama_png(width=64), "image/png"))]
    elif key == "POST /agents":
        form = {"name": f"page-nav-agent-{role}"}
    elif key in ("POST /agents/{agent_id}/artifacts", "POST /api/v1/agents/{agent_id}/artifacts"):
        form, files = _listener_upload()
    elif key in ("POST /studies/{study_id}/annotations/import", "POST /api/v1/studies/{study_id}/annotations/import"):
        # A fresh source per call: the same annotators may be imported once per source.
        form = {"source": f"probe-{role}-{uuid.uuid4().hex[:8]}"}
        files = {
            "file": (
                "prior.jsonl",
                "".join(
                    json.dumps({"question_id": i, "answer": "Yes", "annotator": "p1"}) + "\n" for i in w.items[:3]
                ).encode(),
                "application/jsonl",
            )
        }
    elif key == "POST /api/v1/studies/{study_id}/agents/{agent_id}/outputs":
        files = {"file": ("a.jsonl", _outputs(w.items[:10], "No"), "application/jsonl")}
    elif key in (
        "POST /api/v1/studies/{study_id}/exports",
        "POST /api/v1/generations/{run_id}/cancel",
        "POST /api/v1/jobs/{job_id}/cancel",
        "POST /api/v1/tokens/{token_id}/revoke",
        "POST /api/v1/wordcount/studies/{study_id}/tally",
    ):
        pass
    elif key in ("POST /api/v1/studies/{study_id}/generations", "POST /studies/{study_id}/generations"):
        # The API's schema requires the file: sent, so that another's study is a 404 (and one's
        # own refused for what is in it), not a 422 for a missing field.
        form = {"speaker_artifact_id": "1"}
        if key.startswith("POST /api/"):
            files = {"file": ("paths.json", b"[]", "application/json")}
    elif key == "POST /api/v1/hexagons/studies/{study_id}/generations":
        kw["json"] = {"artifact_id": 999999}  # required by the schema; no such artifact
    elif key in ("POST /hexagons/studies/{study_id}/generations", "POST /api/v1/hexagons/generations/{job_id}/cancel"):
        form = {} if key.startswith("POST /hexagons/") else None
    elif key == "POST /api/v1/studies/{study_id}/runs":
        kw["json"] = {"on": "gold"}  # no artifact_id
    elif key == "POST /api/v1/runs":
        # A ToM agent of the owner's: 409 for the owner, the suite not found by the others.
        kw["json"] = {"kind": "sts", "target": {"suite_id": w.sts["suite"], "version": 1}, "agent_id": w.agent_id}
    elif key == "POST /api/v1/runs/{run_id}/cancel":
        pass
    elif key == "POST /api/v1/a3ds/studies/{study_id}/generations":
        kw["json"] = {}
    elif key in ("POST /a3ds/studies/{study_id}/generations", "POST /api/v1/a3ds/generations/{job_id}/cancel"):
        form = {} if key.startswith("POST /a3ds/") else None
    elif key == "POST /sts/suites":
        form = {"name": f"page-probe-{role}"}
    elif key in ("POST /sts/recordings", "POST /api/v1/sts/recordings"):
        name = f"{'api' if '/api/' in key else 'page'}-{role}"  # a recording id is unique per owner
        form, files = {}, {"file": ("r.jsonl", _sts_recording_line(name), "application/jsonl")}
    elif key == "POST /sts/recordings/expert":
        form = {"level": "BabyAI-GoToLocal-v0", "seeds": "2"}
    elif key == "POST /sts/suites/{suite_id}/scenarios":
        form = {"rule": "first step", "continuation": "8"}
    elif key in ("POST /sts/suites/{suite_id}/versions", "POST /sts/suites/{suite_id}/versions/{number}/publish"):
        form = {}
    elif key == "POST /sts/suites/{suite_id}/versions/{number}/generations":
        form = {"agent": "random", "continuations": "1"}
    elif key == "POST /sts/scenarios/{scenario_id}/takeover":
        form = {"takeover": "2"}
    elif key == "POST /sts/scenarios/{scenario_id}/tags":
        form = {"tag": f"page {role}"}
    elif key == "POST /sts/studies/{study_id}/recordings":
        form = {}
    elif key in ("POST /api/v1/sts/recordings/from-study", "POST /api/v1/sts/continuations/from-study"):
        kw["json"] = {"study_id": w.sts["play"]}
    elif key == "POST /api/v1/sts/suites/{suite_id}/versions/{number}/play-study":
        kw["json"] = {"title": f"Probe play {role}"}
    elif key in ("POST /sts/suites/{suite_id}/versions/{number}/play-study", "POST /sts/studies/{study_id}/people"):
        form = {}
    elif key == "POST /api/v1/sts/recordings/expert":
        kw["json"] = {"level": "BabyAI-GoToLocal-v0", "seeds": [2]}
    elif key == "POST /sts/suites/{suite_id}/versions/{number}/study":
        form = {"title": f"Page probe {role}", "agents": ["expert", "random"]}
    elif key in ("POST /sts/studies/{study_id}/metrics", "POST /api/v1/sts/studies/{study_id}/metrics"):
        form, files = {}, {"file": ("m.csv", b"agent,probe\nexpert,2\n", "text/csv")}
    elif key == "POST /sts/studies/{study_id}/metrics/delete":
        form = {"name": "probe"}
    elif key == "POST /sts/studies/{study_id}/failures/{item_id}":
        form = {"error_type": "empty"}
    elif key == "PUT /api/v1/sts/studies/{study_id}/failures/{item_id}":
        kw["json"] = {"error_type": "empty", "note": "probe"}
    elif key == "POST /hexagons/studies/{study_id}/consolidation/{item_id}/{step}":
        form = {"error_class": "other"}
    elif key == "POST /hexagons/studies/{study_id}/consolidation/{item_id}/{step}/abstraction":
        form = {"level": "1"}
    elif key == "PUT /api/v1/hexagons/studies/{study_id}/consolidation/{item_id}/{step}":
        kw["json"] = {"error_class": "other", "note": "probe"}
    elif key == "DELETE /api/v1/sts/studies/{study_id}/metrics/{name}":
        pass
    elif key == "POST /api/v1/sts/suites":
        kw["json"] = {"name": f"api-probe-{role}"}
    elif key in (
        "POST /api/v1/sts/suites/{suite_id}/versions",
        "POST /api/v1/sts/suites/{suite_id}/versions/{number}/publish",
        "DELETE /api/v1/sts/scenarios/{scenario_id}",
        "DELETE /api/v1/sts/scenarios/{scenario_id}/tags/{tag}",
    ):
        pass
    elif key == "POST /api/v1/sts/suites/{suite_id}/versions/{number}/scenarios":
        kw["json"] = {"takeover": 2, "recordings": [w.sts["recording"]], "continuation": 8}
    elif key == "POST /api/v1/sts/suites/{suite_id}/versions/{number}/generations":
        kw["json"] = {"agent": "random", "continuations": 1}
    elif key == "POST /api/v1/sts/suites/{suite_id}/versions/{number}/study":
        kw["json"] = {
            "title": f"STS probe {role}",
            "agents": ["expert", "random"],
            "reference": {"expert_successes": 1},
        }
    elif key == "PATCH /api/v1/sts/scenarios/{scenario_id}":
        kw["json"] = {"category": f"probe {role}"}
    elif key == "POST /api/v1/sts/scenarios/{scenario_id}/tags":
        kw["json"] = {"tag": f"api {role}"}
    elif key == "POST /hexagons/studies/{study_id}/targets":
        form = {"target_id": f"page-{role}", "board": json.dumps(HEX_TARGET)}
    elif key == "POST /api/v1/hexagons/studies/{study_id}/targets":
        kw["json"] = {"id": f"api-{role}", "board": HEX_TARGET}
    elif key == "POST /hexagons/studies/{study_id}/verification":
        form = {}
    elif key == "POST /api/v1/hexagons/studies/{study_id}/verification":
        pass
    elif key == "POST /api/v1/studies/{study_id}/review":
        kw["json"] = {"participant_ids": [w.pid], "decision": "approve"}
    elif key == "POST /api/v1/crowd/{slug}/enter":
        kw["json"] = {"params": {"PROLIFIC_PID": f"api-probe-{role}", "STUDY_ID": "st", "SESSION_ID": "se"}}
    elif key == "POST /api/v1/crowd/{slug}/consent":
        kw["json"] = {"consent_version": consent_version(w.study)}
    elif key == "POST /api/v1/crowd/{slug}/submit":
        kw["json"] = {
            "assignment_id": w.current_assignment(),
            "idempotency_key": uuid.uuid4().hex,
            "response": {"answer": "No"},
        }
    elif method != "GET":
        raise AssertionError(f"no request body is defined for {key}: add one to request_for()")
    if files is not None or form is not None:
        form = dict(form or {})
        if role in w.csrf:  # cookie sessions send their form token, as the pages do
            form["csrf_token"] = w.csrf[role]
        kw["data"] = form
        if files is not None:
            kw["files"] = files
    elif method != "GET" and role in w.csrf:  # bodiless posts send it as the htmx header
        kw["headers"] = {"X-CSRF-Token": w.csrf[role]}
    return method, path, kw


def check(expected: str, r) -> str | None:
    """None when the response is what the table says, else a description of the mismatch."""
    location = r.headers.get("location", "")
    if expected == "login":
        if r.status_code == 303 and location.startswith("/login"):
            return None
    elif r.status_code == int(expected):
        if r.status_code != 303 or not location.startswith("/login"):
            return None
    got = f"{r.status_code}" + (f" -> {location}" if location else "")
    return f"expected {expected}, got {got}: {r.text[:160]!r}"


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


# The table is an authorisation check: what a caller may do is decided in Python over the rows
# the ORM loads, the same on both backends, except on the crowd paths, which PostgreSQL serves
# through the hot path's own statements (the browser, the consent, a rejection decided in SQL).
# So it runs whole on SQLite; on PostgreSQL every route is probed by five callers: the owner's
# session (allowed), another researcher's token (refused by ownership as 404), an admin's session
# (past ownership), the worker and anonymous (the crowd paths' refusals and answers); the other
# token callers are refused before any query of the handler's, no different there.
# PROCTOR_TEST_ALL_BACKENDS=1 runs the whole table on PostgreSQL too.
SQLITE_ONLY = pytest.mark.backend_agnostic("who may call what is decided in Python, the same on both backends")
POSTGRESQL_ROLES = ("anon", "worker", "owner", "t_other", "admin")


@SQLITE_ONLY
def test_every_route_is_in_the_access_table(app):
    table = parse_access(ACCESS)
    served = app_routes(app)
    missing = sorted(set(served) - set(table))
    stale = sorted(set(table) - set(served))
    assert not missing, "routes with no decision about who may use them; add rows to ACCESS: " + ", ".join(missing)
    assert not stale, "ACCESS rows for routes the app no longer serves: " + ", ".join(stale)


@SQLITE_ONLY
def test_every_route_answers_every_role_as_the_table_says(world, session):
    _probe_the_table(world, session, ROLES)


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_every_route_answers_five_callers_on_postgresql(world, session):
    _probe_the_table(world, session, POSTGRESQL_ROLES)


def _probe_the_table(world, session, roles) -> None:
    """Every route called by each of `roles`, checked against ACCESS; then what the refused
    callers among them left behind."""
    table = parse_access(ACCESS)
    served = app_routes(world.app)
    assert set(table) == set(served)
    failures = []
    for key in table:
        for role in roles:
            method, path, kw = request_for(world, key, role)
            r = world.call(role, method, path, **kw)
            problem = check(table[key][role], r)
            if problem:
                failures.append(f"{key} as {role}: {problem}")
    assert not failures, f"{len(failures)} access mismatches:\n" + "\n".join(failures)

    # The refused callers left no trace: no study, agent, token or answer of theirs.
    titles = set(session.scalars(select(Study.title)))
    for role in roles:
        allowed = table["POST /studies/new"][role] == "303"
        assert (f"Probe {role}" in titles) == allowed, role
        allowed = table["POST /api/v1/studies"][role] == "201"
        assert (f"API probe {role}" in titles) == allowed, role
    from app.agents.models import Agent

    agent_names = set(session.scalars(select(Agent.name)))
    for role in roles:
        assert (f"page-agent-{role}" in agent_names) == (role in ("owner", "admin", "t_owner", "t_admin"))
        assert (f"api-agent-{role}" in agent_names) == (
            role in ("owner", "other", "admin", "t_owner", "t_other", "t_admin")
        )
    names = set(session.scalars(select(ApiToken.name)))
    for role in roles:
        assert (f"probe-{role}" in names) == (table["POST /account/tokens"][role] == "200"), role
    # only the worker who entered answered anything
    from app.studies.models import Annotation

    from app.auth.models import IMPORTED_PLATFORM, User

    workers = set(
        session.scalars(
            select(Annotation.worker_id)
            .join(User, User.id == Annotation.worker_id)
            .where(
                User.platform != IMPORTED_PLATFORM,
                Annotation.study_id != world.sts["study"],  # the world's own marker
                Annotation.study_id != world.hexagons["study"],
            )  # and executions
            .distinct()
        )
    )
    bundle = session.get(Bundle, world.bundle_id)
    assert workers == {bundle.worker_id}
    # Earlier annotations were imported only by those allowed to (the source names the caller).
    sources = [
        e.split(":")[1] for e in session.scalars(select(User.external_id).where(User.platform == IMPORTED_PLATFORM))
    ]
    assert {s.split("-")[1] for s in sources} == {"owner", "admin", "t_owner", "t_admin"} & set(roles)


@SQLITE_ONLY
def test_another_researchers_agent_is_not_yours(world):
    """The owner of the study may not import outputs into someone else's agent."""
    with world.session() as s:
        other = s.merge(world.users["other"])
        theirs = services.register_agent(s, other, "tom", "not-yours")
        s.commit()
        theirs_id = theirs.id
    files = {"file": ("a.jsonl", _outputs(world.items[:3]), "application/jsonl")}
    r = world.call("t_owner", "POST", f"/api/v1/studies/{world.study.id}/agents/{theirs_id}/outputs", files=files)
    assert r.status_code == 404, r.text
    from app.agents.models import AgentOutput

    with world.session() as s:
        assert s.scalar(select(func.count()).select_from(AgentOutput).where(AgentOutput.agent_id == theirs_id)) == 0


@SQLITE_ONLY
def test_unsigned_or_tampered_blob_links_are_refused(world):
    good = world.blob_url
    for url in (good.split("?")[0], good.replace("sig=", "sig=0"), good.replace("probe.txt", "x.txt")):
        for role in ("anon", "admin", "t_admin"):
            r = world.call(role, "GET", url)
            assert r.status_code == 403, (url, role, r.status_code)


@SQLITE_ONLY
def test_openapi_lists_the_api_routes_and_only_those(client, app):
    r = client.get("/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    documented = {f"{m.upper()} {p}" for p, ops in spec["paths"].items() for m in ops}
    served = app_routes(app)
    api = {k for k in served if k.split(" ", 1)[1].startswith("/api/v1/")}
    assert api, "no /api/v1 routes found"
    assert api <= documented, f"API routes missing from /openapi.json: {sorted(api - documented)}"
    pages = set(served) - api
    assert not (pages & documented), f"page routes in the API schema: {sorted(pages & documented)}"
    assert documented <= api, f"/openapi.json documents routes not served: {sorted(documented - api)}"
    assert client.get("/api/docs").status_code == 200

"""The study page's "start a run" forms in a real browser (navigation generation runs, A3DS
captioner runs, Hexagons executor runs): while a run is going the runs list refreshes itself
every 3 s, and what the researcher is typing into the start form (the chosen file, the ticked
listeners, N and M, the chosen captioner or board, the batch) stays as it is."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.conftest import make_user

pytestmark = pytest.mark.browser
PASSWORD = "pw-" + "x" * 8


def _artifact(session, owner, kind: str, role: str, name: str):
    """A validated model row: the page lists it; no run here loads it."""
    from app.agents.models import AgentArtifact
    from app.studies import services

    agent = services.register_agent(session, owner, kind, name)
    art = AgentArtifact(
        agent_id=agent.id,
        version=1,
        role=role,
        format="safetensors",
        blob_key=f"x/{name}",
        config={},
        size=1,
        sha256="0" * 64,
        state="valid",
    )
    session.add(art)
    session.flush()
    return agent, art


def _going_job(session, study, task: str, total: int, **params):
    """A run's job that a worker is on (fresh heartbeat): the in-process worker leaves it be."""
    from app import jobs
    from app.db import utcnow
    from app.runs.models import AgentRun

    job = jobs.Job(
        task=task,
        study_id=study.id,
        owner_id=study.owner_id,
        state="running",
        params=params,
        total=total,
        done=1,
        started_at=utcnow(),
        heartbeat_at=utcnow(),
        attempts=1,
    )
    session.add(job)
    session.flush()
    session.add(AgentRun(kind=study.kind, study_id=study.id, params=params, job_id=job.id, owner_id=study.owner_id))
    return job


def _navigation(s, owner, tmp_path) -> dict:
    from app.kinds.navigation.environments import import_house
    from app.kinds.navigation.generation import parse_paths
    from app.kinds.navigation.models import GenerationRun
    from app.studies import services
    from tests.integration.test_nav_quality import house, r2r_file

    import_house(s, house())
    paths = r2r_file(4)
    study = services.create_study(s, owner, "navigation", services.StudySettings(title="Gen form"), paths, "r2r")
    _, speaker = _artifact(s, owner, "navigation", "speaker", "form-speaker")
    _, listener = _artifact(s, owner, "navigation", "listener", "form-listener")
    job = _going_job(s, study, "navigation.generate", 4)
    run = GenerationRun(
        study_id=study.id,
        owner_id=owner.id,
        speaker_artifact_id=speaker.id,
        listener_artifact_ids=[],
        n=10,
        k=0,
        m=3,
        metric="ndtw",
        design="evaluation",
        max_len=60,
        seed=0,
        batch_size=8,
        paths=parse_paths(paths, "evaluation"),
        job_id=job.id,
        state="running",
    )
    s.add(run)
    file = tmp_path / "paths.json"
    file.write_bytes(paths)

    def fill(page):
        form = page.locator("#generation-start")
        form.locator("input[type=file]").set_input_files(str(file))
        form.locator(f'input[name=listener][value="{listener.id}"]').check()
        form.get_by_label("N (instructions per path)").fill("7")
        form.get_by_label("M (follows per candidate)").fill("2")

    def kept(page):
        form = page.locator("#generation-start")
        assert form.locator("input[type=file]").evaluate("el => el.files.length") == 1
        expect(form.locator(f'input[name=listener][value="{listener.id}"]')).to_be_checked()
        expect(form.get_by_label("N (instructions per path)")).to_have_value("7")
        expect(form.get_by_label("M (follows per candidate)")).to_have_value("2")

    return {
        "study": study,
        "job": job,
        "list": "#generations",
        "progress": "2 of 4 paths",
        "poll": "/generations",
        "fill": fill,
        "kept": kept,
    }


def _a3ds(s, owner, tmp_path) -> dict:
    from app.studies import services

    design = json.dumps({"pairs": {"z": {"1": 2}}, "speakers": ["literal"], "seed": 2}).encode()
    study = services.create_study(s, owner, "a3ds", services.StudySettings(title="Caption form"), design, "design")
    job = _going_job(s, study, "a3ds.generate", 5, captioner="speaker:literal", speaker="literal", batch_size=32)
    chosen = "speaker:short"

    def fill(page):
        form = page.locator("#captioner-runs #captioner-form")
        form.get_by_label("Captioner").select_option(chosen)
        form.get_by_label("Batch").fill("5")

    def kept(page):
        form = page.locator("#captioner-runs #captioner-form")
        expect(form.get_by_label("Captioner")).to_have_value(chosen)
        expect(form.get_by_label("Batch")).to_have_value("5")

    return {
        "study": study,
        "job": job,
        "list": "#captioner-runs",
        "progress": "2 of 5 pairs",
        "poll": "/runs",
        "fill": fill,
        "kept": kept,
    }


def _hexagons(s, owner, tmp_path) -> dict:
    from app.studies import services
    from tests.preview_fixtures import _procedure

    study = services.create_study(
        s, owner, "hexagons", services.StudySettings(title="Executor form"), _procedure(1).encode(), "procedures"
    )
    agent, art = _artifact(s, owner, "hexagons", "executor", "form-executor")
    job = _going_job(s, study, "hexagons.generate", 3, artifact_id=art.id, agent_id=agent.id, on="gold", batch_size=32)

    def fill(page):
        form = page.locator("#executor-runs form")
        form.get_by_label("Each step on").select_option("own")
        form.get_by_label("Batch").fill("5")

    def kept(page):
        form = page.locator("#executor-runs form")
        expect(form.get_by_label("Each step on")).to_have_value("own")
        expect(form.get_by_label("Batch")).to_have_value("5")

    return {
        "study": study,
        "job": job,
        "list": "#executor-runs",
        "progress": "2 of 3 procedures",
        "poll": "/runs",
        "fill": fill,
        "kept": kept,
    }


@pytest.mark.parametrize("make", [_navigation, _a3ds, _hexagons], ids=["navigation", "a3ds", "hexagons"])
def test_the_start_form_keeps_its_values_while_the_runs_list_refreshes(live_server, page, tmp_path, make):
    from app import jobs
    from app.db import get_sessionmaker

    Session = get_sessionmaker(live_server.db_url)
    with Session() as s:
        owner = make_user(s, "researcher")
        email = owner.email
        case = make(s, owner, tmp_path)
        study_id, job_id = case["study"].id, case["job"].id
        s.commit()
    page.goto(f"{live_server.url}/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Studies")).to_be_visible()

    page.goto(f"{live_server.url}/studies/{study_id}")
    runs = page.locator(case["list"])
    expect(runs).to_contain_text("1 of")
    case["fill"](page)
    with Session() as s:  # the run moves on: the next poll shows it
        s.get(jobs.Job, job_id).done = 2
        s.commit()
    polled = lambda r: r.url.endswith(case["poll"]) and r.request.method == "GET"  # noqa: E731
    for _ in range(2):  # two polls, 3 s apart
        with page.expect_response(polled, timeout=10000):
            pass
    expect(runs).to_contain_text(case["progress"])
    case["kept"](page)

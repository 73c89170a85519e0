"""Generation runs (issue 4) on SQLite and PostgreSQL, with tiny built-in models stored as
valid safetensors artifacts: candidates, listener rollouts, the chosen candidate (eq. 13),
gamma, the study's items, retry after a crash, cancellation, the API and the study page; and
one run through a real Celery worker over Redis."""

from __future__ import annotations

import hashlib
import json
import math
import time

import markupsafe
import pytest
from sqlalchemy import func, select

from app import jobs
from app.runs.models import AgentRun
from app.kinds.navigation.generation import create_run
from app.kinds.navigation.models import Candidate, GenerationRun, Rollout
from app.agents.models import AgentArtifact
from app.kinds.navigation.environments import import_house
from app.kinds.navigation.grammar import describe_path
from app.kinds.navigation.house import generate_house, sample_paths, to_r2r
from app.storage import get_store
from app.studies import services
from app.studies.models import Item, Study
from tests.conftest import ROOT, login, make_user

pytestmark = pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
    "torch generation over stored artifacts (the Celery run below stays on PostgreSQL)"
)


N, M, PATHS = 3, 2, 4


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> dict:
    """An untrained speaker and two untrained listeners (hidden 16) in the upload format."""
    import torch

    from workers.navigation.features import Vocabulary
    from workers.navigation.listener import Listener
    from workers.navigation.speaker import Speaker
    from workers.navigation.train import make_dataset
    from workers.training import save_model

    data = make_dataset(range(100, 102), paths_per_house=5)
    vocab = Vocabulary.build([t for e in data.examples for t in e.instructions])
    folder = tmp_path_factory.mktemp("models")
    out = {}
    for name, model in (
        ("speaker", Speaker(vocab.words, hidden=16, embed=8)),
        ("listener0", Listener(vocab.words, hidden=16, embed=8)),
        ("listener1", Listener(vocab.words, hidden=16, embed=8)),
    ):
        torch.manual_seed(len(out))
        weights, config = save_model(model, folder, name)
        out[name] = (weights.read_bytes(), json.loads(config.read_text()))
    return out


def _artifact(session, owner, models, name, role, agent_name) -> AgentArtifact:
    blob, config = models[name]
    return stored_artifact(session, owner, agent_name, role, blob, "safetensors", config)


def stored_artifact(session, owner, agent_name, role, data: bytes, fmt: str, config: dict) -> AgentArtifact:
    """A navigation agent of `owner` with one artifact, stored and valid (as validation leaves
    it): what a generation run is started from."""
    agent = services.register_agent(session, owner, "navigation", agent_name)
    key = f"artifacts/{agent.id}/1.{'pt' if fmt == 'torchscript' else fmt}"
    get_store().put(key, data)
    art = AgentArtifact(
        agent_id=agent.id,
        version=1,
        role=role,
        format=fmt,
        blob_key=key,
        config=config,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        state="valid",
    )
    session.add(art)
    session.flush()
    return art


def _paths_file(house, n=PATHS) -> bytes:
    paths = sample_paths(house, n, rng=3)
    return json.dumps(to_r2r(house, paths, [describe_path(house, p, rng=k, n=1) for k, p in enumerate(paths)])).encode()


@pytest.fixture
def setup(session, tiny_models):
    return _setup(session, tiny_models)


def _setup(session, tiny_models) -> dict:
    owner = make_user(session, "researcher")
    house = generate_house(100)
    import_house(session, house)
    paths = _paths_file(house)
    study = services.create_study(session, owner, "navigation", services.StudySettings(title="Gen"), paths, "r2r")
    speaker = _artifact(session, owner, tiny_models, "speaker", "speaker", "tiny-speaker")
    listeners = [
        _artifact(session, owner, tiny_models, f"listener{i}", "listener", f"tiny-listener-{i}") for i in range(2)
    ]
    session.commit()
    return {"owner": owner, "study": study, "paths": paths, "speaker": speaker, "listeners": listeners, "house": house}


def _run(session, s, design="evaluation", listeners=True, **kw) -> GenerationRun:
    run = create_run(
        session,
        s["study"],
        s["owner"],
        speaker_artifact_id=s["speaker"].id,
        listener_artifact_ids=[a.id for a in s["listeners"]] if listeners else [],
        paths_data=s["paths"],
        n=N,
        m=M,
        design=design,
        max_len=12,
        batch_size=2,
        **kw,
    )
    session.commit()  # create_run only flushes: the runs service commits as it queues
    return run


def _candidates(session, run) -> dict[str, list[Candidate]]:
    out: dict[str, list[Candidate]] = {}
    for c in session.scalars(select(Candidate).where(Candidate.run_id == run.id).order_by(Candidate.k)):
        out.setdefault(c.path_key, []).append(c)
    return out


def _gen_items(session, study) -> list[Item]:
    return session.scalars(
        select(Item).where(Item.study_id == study.id, Item.source == "agent").order_by(Item.external_id)
    ).all()


def test_evaluation_run_reranks_with_listeners_and_adds_items(session, setup):
    run = _run(session, setup)
    assert jobs.run_job(run.job_id) == "done", session.get(jobs.Job, run.job_id).log
    session.expire_all()
    run = session.get(GenerationRun, run.id)
    by_path = _candidates(session, run)
    assert len(by_path) == PATHS
    for _key, cands in by_path.items():
        assert [c.k for c in cands] == list(range(1 + N))
        assert [c.role for c in cands] == ["inference"] + ["sample"] * N
        assert all(math.isfinite(c.speaker_score) and c.speaker_score <= 0 for c in cands)
        for c in cands:
            rolls = session.scalars(select(Rollout).where(Rollout.candidate_id == c.id)).all()
            assert sorted((r.listener, r.m) for r in rolls) == [(k, m) for k in range(2) for m in range(M)]
            assert c.listener_score == pytest.approx(sum(r.ndtw for r in rolls) / len(rolls), abs=1e-5)
            assert all(r.path[0] == rolls[0].path[0] and 0 <= r.sdtw <= r.ndtw <= 1 for r in rolls)
        chosen = [c for c in cands if c.chosen]
        assert len(chosen) == 1
        assert chosen[0].listener_score == max(c.listener_score for c in cands)

    # gamma: the share of paths where the inference output outscores every sample (a sample
    # with its words or its score is a tie: half)
    def outcome(cs):
        words = " ".join(cs[0].instruction.split())
        others = [c.speaker_score for c in cs[1:] if " ".join(c.instruction.split()) != words]
        if others and max(others) > cs[0].speaker_score:
            return 0.0
        return 0.5 if len(others) < len(cs) - 1 or (others and max(others) == cs[0].speaker_score) else 1.0

    expected = sum(outcome(cs) for cs in by_path.values()) / PATHS
    assert run.gamma == pytest.approx(expected)
    items = _gen_items(session, setup["study"])
    assert len(items) == PATHS
    for it in items:
        chosen = next(c for c in by_path[it.exclusion_group] if c.chosen)
        assert it.payload["instruction"] == chosen.instruction
        assert it.category == "tiny-speaker" and it.cluster == it.exclusion_group
        assert it.reference["candidate"] == chosen.k and "path" in it.reference
    assert "tiny-speaker" in session.get(Study, setup["study"].id).kind_settings["speakers"]
    # Each listener's first rollout on an item's instruction is stored as that listener agent's
    # output, scored like a follower's path (what the agreement table compares with people).
    from app.agents.models import AgentOutput
    from app.kinds.navigation.metrics import score_trajectory
    from app.kinds.navigation.environments import get_graph

    graph = get_graph(setup["house"].scan)
    for it in items:
        chosen = next(c for c in by_path[it.exclusion_group] if c.chosen)
        for j, art in enumerate(setup["listeners"]):
            out = session.scalar(
                select(AgentOutput).where(AgentOutput.item_id == it.id, AgentOutput.agent_id == art.agent_id)
            )
            first = session.scalar(
                select(Rollout).where(Rollout.candidate_id == chosen.id, Rollout.listener == j, Rollout.m == 0)
            )
            assert out.response["path"] == first.path
            success = score_trajectory(graph, it.reference["path"], first.path)["success"]
            assert out.score == (1.0 if success else 0.0)

    # A retry after a crash (the job set back to running, its heartbeat stale, or to queued)
    # duplicates no candidate, rollout or item.
    counts = (
        session.scalar(select(func.count(Candidate.id))),
        session.scalar(select(func.count(Rollout.id))),
        session.scalar(select(func.count(Item.id))),
        session.scalar(select(func.count(AgentOutput.id))),
    )
    assert counts[3] == 2 * PATHS
    job = session.get(jobs.Job, run.job_id)
    job.state = "running"
    session.commit()
    assert jobs.run_job(run.job_id) == "busy"  # a live worker's job is left alone (looked at later)
    assert jobs.run_job(run.job_id, stale_after=-1) == "done"
    session.expire_all()
    assert (
        session.scalar(select(func.count(Candidate.id))),
        session.scalar(select(func.count(Rollout.id))),
        session.scalar(select(func.count(Item.id))),
        session.scalar(select(func.count(AgentOutput.id))),
    ) == counts


def test_capability_run_without_listeners(session, setup):
    run = _run(session, setup, design="capability", listeners=False)
    assert jobs.run_job(run.job_id) == "done", session.get(jobs.Job, run.job_id).log
    session.expire_all()
    by_path = _candidates(session, run)
    assert session.scalar(select(func.count(Rollout.id))) == 0
    for cands in by_path.values():
        assert [c.chosen for c in cands] == [True] + [False] * N  # no listeners: the inference output
        assert all(c.listener_score is None for c in cands)
    items = session.scalars(
        select(Item).where(Item.study_id == setup["study"].id, Item.reference["role"].isnot(None))
    ).all()
    roles = [i.reference.get("role") for i in items if i.reference.get("role")]
    assert len(roles) == PATHS * (1 + N + 1)
    assert roles.count("inference") == PATHS and roles.count("sample") == PATHS * N
    assert roles.count("reference") == PATHS
    for it in items:
        if it.reference.get("role") == "reference":
            assert math.isfinite(it.reference["speaker_score"])
    assert session.get(Study, setup["study"].id).kind_settings["design"] == "capability"


def test_a_crash_mid_run_resumes_without_duplicates(session, setup):
    """Paths stored before the crash are skipped; the rest are generated on the retry."""
    run = _run(session, setup)
    from workers.navigation import generate

    job = session.get(jobs.Job, run.job_id)
    original = generate._generate_batch
    calls = []

    def crash_on_second(*args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("worker killed")
        return original(*args, **kw)

    generate._generate_batch = crash_on_second
    try:
        assert jobs.run_job(job.id) == "failed"
    finally:
        generate._generate_batch = original
    session.expire_all()
    assert len(_candidates(session, run)) == 2  # the first batch (2 paths) was committed
    job = session.get(jobs.Job, run.job_id)
    job.state = "queued"
    session.commit()
    assert jobs.run_job(job.id) == "done"
    session.expire_all()
    by_path = _candidates(session, run)
    assert len(by_path) == PATHS and all(len(c) == 1 + N for c in by_path.values())
    assert len(_gen_items(session, setup["study"])) == PATHS
    assert "2 already stored" in session.get(jobs.Job, run.job_id).log


def test_cancel_stops_between_batches(session, setup):
    from app.kinds.navigation.generation import cancel_run
    from workers.navigation import generate

    run = _run(session, setup)
    original = generate._generate_batch

    def cancel_after_first(s, r, *args, **kw):
        original(s, r, *args, **kw)
        from app.db import get_sessionmaker

        with get_sessionmaker()() as other:  # the researcher, in another session
            cancel_run(other, other.get(GenerationRun, r.id))

    generate._generate_batch = cancel_after_first
    try:
        assert jobs.run_job(run.job_id) == "cancelled"
    finally:
        generate._generate_batch = original
    session.expire_all()
    assert len(_candidates(session, run)) == 2
    assert _gen_items(session, setup["study"]) == []
    assert session.get(GenerationRun, run.id).state == "cancelled"
    assert "cancelled" in session.get(jobs.Job, run.job_id).log


def test_bad_requests_store_nothing(session, setup):
    from app.errors import InputError

    bad = [
        dict(n=0),
        dict(m=99),
        dict(metric="bleu"),
        dict(design="other"),
        dict(speaker_artifact_id=setup["listeners"][0].id),
        dict(listener_artifact_ids=[setup["speaker"].id]),
        dict(paths_data=b"[]"),
        dict(paths_data=b"not json"),
    ]
    base = dict(speaker_artifact_id=setup["speaker"].id, listener_artifact_ids=[], paths_data=setup["paths"])
    for change in bad:
        with pytest.raises(InputError):
            create_run(session, setup["study"], setup["owner"], **{**base, **change})
        session.rollback()
    for top_p in (0, 0.0, -0.5, 1.0001, 2, float("nan"), float("inf"), True, "0.9", None):
        with pytest.raises(InputError) as err:
            create_run(session, setup["study"], setup["owner"], **base, top_p=top_p)
        assert err.value.field == "top_p", top_p
        session.rollback()
    setup["speaker"].state = "pending"
    session.commit()
    with pytest.raises(InputError, match="pending"):
        create_run(session, setup["study"], setup["owner"], **base)
    session.rollback()
    assert session.scalar(select(func.count(GenerationRun.id))) == 0
    assert session.scalar(select(func.count(jobs.Job.id)).where(jobs.Job.task == "navigation.generate")) == 0


def test_api_and_page(session, setup, client):
    owner = setup["owner"]
    csrf = login(client, owner)
    study = setup["study"]
    form = {
        "speaker_artifact_id": str(setup["speaker"].id),
        "listener_artifact_ids": ",".join(str(a.id) for a in setup["listeners"]),
        "n": str(N),
        "m": str(M),
        "max_len": "12",
        "csrf_token": csrf,
    }
    r = client.post(
        f"/api/v1/studies/{study.id}/generations",
        data={**form, "n": "0"},
        files={"file": ("paths.json", setup["paths"], "application/json")},
    )
    assert r.status_code == 422 and "n must be" in r.text
    for bad in ("0", "-0.1", "1.5", "nan", "inf", "ninety", "true"):
        r = client.post(
            f"/api/v1/studies/{study.id}/generations",
            data={**form, "top_p": bad},
            files={"file": ("paths.json", setup["paths"], "application/json")},
        )
        assert r.status_code == 422 and r.json()["field"] == "top_p", (bad, r.text)
    assert session.scalar(select(func.count(GenerationRun.id))) == 0
    form["top_p"] = "0.9"
    r = client.post(
        f"/api/v1/studies/{study.id}/generations",
        data=form,
        files={"file": ("paths.json", setup["paths"], "application/json")},
    )
    assert r.status_code == 202, r.text
    run_id, job_id = r.json()["run"], r.json()["job"]
    assert jobs.run_job(job_id) == "done"
    got = client.get(f"/api/v1/generations/{run_id}").json()
    assert got["state"] == "done", got["log"]
    assert got["state"] == "done" and got["candidates"] == PATHS * (1 + N)
    assert got["rollouts"] == PATHS * (1 + N) * 2 * M and got["items"] == PATHS
    assert got["gamma"] is not None
    assert got["top_p"] == 0.9 and got["sampling"] == "nucleus p=0.9"
    assert "nucleus p=0.9" in got["log"]
    r = client.post(f"/api/v1/generations/{run_id}/cancel", headers={"X-CSRF-Token": csrf})
    assert r.status_code == 409 and "cancelled" in r.text
    page = client.get(f"/studies/{study.id}")
    assert page.status_code == 200
    first = session.scalars(select(Candidate).where(Candidate.run_id == run_id, Candidate.chosen)).first()
    from html import escape

    agent_run = session.scalar(select(AgentRun).where(AgentRun.job_id == job_id))
    assert f"Candidates of run #{agent_run.id}" in page.text and escape(first.instruction) in page.text
    assert "N=3 (nucleus p=0.9)" in page.text
    part = client.get(f"/studies/{study.id}/generations")
    assert part.status_code == 200 and "gamma" in part.text


# -- nucleus (top-p) sampling -----------------------------------------------------------------


def _texts(session, run) -> list[tuple]:
    return [
        (c.path_key, c.k, c.instruction, c.speaker_score) for cands in _candidates(session, run).values() for c in cands
    ]


def test_top_p_one_draws_the_same_candidates_as_pure_sampling(session, setup):
    """top_p = 1 is pure ancestral sampling: for the same seed, the very candidates of a run
    started without the parameter."""
    runs = [_run(session, setup, listeners=False, seed=5), _run(session, setup, listeners=False, seed=5, top_p=1.0)]
    for run in runs:
        assert jobs.run_job(run.job_id) == "done", session.get(jobs.Job, run.job_id).log
    session.expire_all()
    plain, one = (session.get(GenerationRun, r.id) for r in runs)
    assert plain.top_p == one.top_p == 1.0
    assert _texts(session, plain) == _texts(session, one)
    assert len(_texts(session, one)) == PATHS * (1 + N)
    from app.kinds.navigation.generation import summary

    assert summary(session, one)["sampling"] == "pure sampling"
    assert "pure sampling" in session.get(jobs.Job, one.job_id).log


def test_a_tiny_top_p_samples_only_the_most_probable_word(session, setup):
    """With p below every step's top probability the nucleus is the argmax alone: every sample
    is the greedy inference output, with its score (so gamma, strictly higher, is 0)."""
    run = _run(session, setup, listeners=False, top_p=1e-6)
    assert jobs.run_job(run.job_id) == "done", session.get(jobs.Job, run.job_id).log
    session.expire_all()
    run = session.get(GenerationRun, run.id)
    assert run.top_p == 1e-6
    for cands in _candidates(session, run).values():
        assert len(cands) == 1 + N
        assert all(c.instruction == cands[0].instruction for c in cands[1:])
        assert all(c.speaker_score == pytest.approx(cands[0].speaker_score, abs=1e-5) for c in cands[1:])
    assert run.gamma == 0.5  # every sample is the inference output: a tie on every path, half each
    assert "nucleus p=1e-06" in session.get(jobs.Job, run.job_id).log


def test_a_speaker_without_top_p_still_samples_purely_and_refuses_nucleus(session, setup, tiny_models):
    """An uploaded TorchScript speaker whose sample() has no top_p runs as before at top_p 1;
    a nucleus run with it fails with a log that says why."""
    import io
    from typing import List

    import torch

    from workers.navigation.train import load_model as load_builtin

    class OldInterfaceSpeaker(torch.nn.Module):
        """Scripted before top_p: sample() takes the five arguments of the first interface."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        @torch.jit.export
        def feature_version(self) -> str:
            return self.inner.feature_version()

        @torch.jit.export
        def vocabulary(self) -> List[str]:
            return self.inner.vocabulary()

        @torch.jit.export
        def score(self, steps, step_mask, tokens, token_mask):
            return self.inner.score(steps, step_mask, tokens, token_mask)

        @torch.jit.export
        def sample(self, steps, step_mask, max_len: int, greedy: bool, temperature: float):
            return self.inner.sample(steps, step_mask, max_len, greedy, temperature)

    blob, config = tiny_models["speaker"]
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(OldInterfaceSpeaker(load_builtin(blob, config))), buf)
    art = stored_artifact(session, setup["owner"], "old-scripted-speaker", "speaker", buf.getvalue(), "torchscript", {})
    session.commit()
    old = {**setup, "speaker": art}
    pure = _run(session, old, listeners=False)
    assert jobs.run_job(pure.job_id) == "done", session.get(jobs.Job, pure.job_id).log
    nucleus = _run(session, old, listeners=False, top_p=0.9)
    assert jobs.run_job(nucleus.job_id) == "failed"
    session.expire_all()
    assert "takes no top_p argument" in session.get(jobs.Job, nucleus.job_id).log
    assert len(_candidates(session, session.get(GenerationRun, pure.id))) == PATHS
    assert _candidates(session, session.get(GenerationRun, nucleus.id)) == {}


# -- a real Celery worker over Redis (PostgreSQL: the worker is another process) ---------------

from tests.integration.test_celery import JOB_TIMEOUT_S, celery_env, celery_worker  # noqa: E402,F401


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_generation_runs_on_a_real_celery_worker(celery_env, celery_worker, db_url, tiny_models):  # noqa: F811 (the fixtures imported above)
    from fastapi.testclient import TestClient

    from app.auth.security import create_token
    from app.db import get_sessionmaker
    from app.main import create_app

    # The worker reads the artifacts and the house from the blob folder this process writes.
    session = get_sessionmaker(db_url)()
    s = _setup(session, tiny_models)
    token = create_token(session, s["owner"], "ci")
    session.commit()
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(db_url)) as client:
        r = client.post(
            f"/api/v1/studies/{s['study'].id}/generations",
            headers=headers,
            data={
                "speaker_artifact_id": str(s["speaker"].id),
                "listener_artifact_ids": f"[{s['listeners'][0].id}]",
                "n": "2",
                "m": "1",
                "max_len": "10",
            },
            files={"file": ("paths.json", s["paths"], "application/json")},
        )
        assert r.status_code == 202, r.text
        run_id = r.json()["run"]
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while (got := client.get(f"/api/v1/generations/{run_id}", headers=headers).json())["state"] in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline, celery_worker.log()[-4000:]
            time.sleep(0.25)
    assert got["state"] == "done", got["log"] + celery_worker.log()[-3000:]
    assert got["candidates"] == PATHS * 3 and got["rollouts"] == PATHS * 3 and got["items"] == PATHS
    celery_worker.wait_for(rf"Task {jobs.CELERY_TASK}\[[^\]]+\] succeeded in [\d.]+s: 'done'", 10)
    session.close()


def test_a_torchscript_listener_reranks_beside_a_built_in_one(session, setup, tiny_models):
    """An uploaded TorchScript listener joins the rerank through its own encode/act; every
    candidate gets K x M rollouts in the run's listener order."""
    import io

    import torch

    from workers.navigation.train import load_model as load_builtin

    blob, config = tiny_models["listener1"]
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(load_builtin(blob, config)), buf)
    data = buf.getvalue()
    agent = services.register_agent(session, setup["owner"], "navigation", "scripted-listener")
    key = f"artifacts/{agent.id}/1.pt"
    get_store().put(key, data)
    scripted_art = AgentArtifact(
        agent_id=agent.id,
        version=1,
        role="listener",
        format="torchscript",
        blob_key=key,
        config={},
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        state="valid",
    )
    session.add(scripted_art)
    session.commit()
    setup = {**setup, "listeners": [setup["listeners"][0], scripted_art]}
    run = _run(session, setup)
    assert jobs.run_job(run.job_id) == "done", session.get(jobs.Job, run.job_id).log
    session.expire_all()
    for cands in _candidates(session, session.get(GenerationRun, run.id)).values():
        for c in cands:
            rolls = session.scalars(select(Rollout).where(Rollout.candidate_id == c.id)).all()
            assert sorted((r.listener, r.m) for r in rolls) == [(k, m) for k in range(2) for m in range(M)]
            assert c.listener_score == pytest.approx(sum(r.ndtw for r in rolls) / len(rolls), abs=1e-5)
        assert sum(c.chosen for c in cands) == 1


def test_gamma_counts_a_sample_with_the_inference_outputs_words_or_score_as_half(session):
    """Four paths: a win, a tie by words (batching noise in the score), a tie by score, a loss."""
    from tests.nav_fixtures import stored_generation_run
    from workers.navigation.generate import gamma

    owner = make_user(session, "researcher")
    study = services.create_study(
        session,
        owner,
        "tom",
        services.StudySettings(title="g"),
        (ROOT / "tests" / "fixtures" / "tom" / "questions.csv").read_bytes(),
        "csv",
    )
    run = stored_generation_run(session, owner, study)
    cases = {
        "win": [("go left", -1.0), ("go right", -2.0)],
        "same words": [("go  left", -1.0), ("go left", -0.9999999)],
        "same score": [("go left", -1.0), ("turn", -1.0)],
        "loss": [("go left", -1.0), ("go left", -1.0000001), ("walk on", -0.5)],
    }
    for key, cands in cases.items():
        for k, (text, score) in enumerate(cands):
            session.add(
                Candidate(
                    run_id=run.id,
                    path_key=key,
                    k=k,
                    role="sample" if k else "inference",
                    instruction=text,
                    speaker_score=score,
                )
            )
    session.commit()
    assert gamma(session, run) == pytest.approx((1 + 0.5 + 0.5 + 0) / 4)


def test_a_run_the_queue_cannot_take_is_withdrawn_with_503(client, session, setup, monkeypatch):
    """With the broker unreachable, starting a run answers 503 and leaves neither the run nor
    its job behind (nothing waits for a worker that will never come)."""
    from app.config import get_settings

    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:9/0")  # the discard port
    get_settings.cache_clear()
    csrf = login(client, setup["owner"])
    r = client.post(
        f"/api/v1/studies/{setup['study'].id}/generations",
        headers={"X-CSRF-Token": csrf},
        data={"speaker_artifact_id": str(setup["speaker"].id), "n": "2", "m": "1"},
        files={"file": ("paths.json", setup["paths"], "application/json")},
    )
    get_settings.cache_clear()
    assert r.status_code == 503 and r.headers["Retry-After"], r.text
    assert "try again in a minute" in r.json()["detail"]
    assert session.scalar(select(func.count()).select_from(GenerationRun)) == 0
    assert session.scalar(select(func.count()).select_from(jobs.Job)) == 0


def test_a_run_is_started_from_the_study_page(session, setup, client):
    """The study page's form starts a run (the listeners are the checked boxes); a refusal shows
    in the section, in the site's layout; the run then shows with its progress and Cancel."""
    owner, study = setup["owner"], setup["study"]
    csrf = login(client, owner)
    page = client.get(f"/studies/{study.id}").text
    assert 'id="generation-start"' in page and f'value="{setup["speaker"].id}"' in page
    assert all(f'name="listener" value="{a.id}"' in page for a in setup["listeners"])
    form = {
        "csrf_token": csrf,
        "speaker_artifact_id": str(setup["speaker"].id),
        "n": "0",
        "m": str(M),
        "listener": [str(a.id) for a in setup["listeners"]],
    }
    files = {"file": ("paths.json", setup["paths"], "application/json")}
    r = client.post(f"/studies/{study.id}/generations", data=form, files=files)
    assert r.status_code == 422 and 'id="generations-error"' in r.text and "n must be" in r.text
    assert "<header" in r.text  # the site's layout
    assert session.scalar(select(func.count(GenerationRun.id))) == 0
    r = client.post(f"/studies/{study.id}/generations", data={**form, "n": str(N)}, files=files, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/studies/{study.id}#generations"
    run = session.scalar(select(GenerationRun))
    assert run.n == N and sorted(run.listener_artifact_ids) == sorted(a.id for a in setup["listeners"])
    page = client.get(f"/studies/{study.id}").text
    agent_run = session.scalar(select(AgentRun).where(AgentRun.job_id == run.job_id))  # the one runs list
    assert f"#{agent_run.id}" in page and f"/api/v1/runs/{agent_run.id}/cancel" in page
    assert agent_run.artifact_ids == [setup["speaker"].id, *run.listener_artifact_ids]


def test_the_page_and_the_api_start_runs_from_the_same_options(session, setup, client):
    """One function parses and starts a run for both routes: every option the API takes, the
    study page's route takes too (its form asks for the sampling p), the same fields make the
    same run, and a refusal is the same."""
    owner, study = setup["owner"], setup["study"]
    csrf = login(client, owner)
    assert 'name="top_p"' in client.get(f"/studies/{study.id}").text
    ids = [str(a.id) for a in setup["listeners"]]
    options = {
        "speaker_artifact_id": str(setup["speaker"].id),
        "n": "2",
        "m": "1",
        "k": "2",
        "metric": "sdtw",
        "design": "evaluation",
        "top_p": "0.9",
        "seed": "7",
        "max_len": "20",
        "batch_size": "3",
    }
    files = {"file": ("paths.json", setup["paths"], "application/json")}
    r = client.post(
        f"/api/v1/studies/{study.id}/generations",
        headers={"X-CSRF-Token": csrf},
        data={**options, "listener_artifact_ids": ",".join(ids)},
        files=files,
    )
    assert r.status_code == 202, r.text
    r = client.post(
        f"/studies/{study.id}/generations",
        data={**options, "csrf_token": csrf, "listener": ids},
        files=files,
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text[-600:]
    api_run, page_run = session.scalars(select(GenerationRun).order_by(GenerationRun.id)).all()
    columns = (
        "speaker_artifact_id",
        "listener_artifact_ids",
        "n",
        "k",
        "m",
        "metric",
        "design",
        "max_len",
        "seed",
        "batch_size",
        "top_p",
        "paths",
    )
    assert {c: getattr(page_run, c) for c in columns} == {c: getattr(api_run, c) for c in columns}
    assert (page_run.top_p, page_run.seed, page_run.max_len, page_run.batch_size) == (0.9, 7, 20, 3)
    for bad, says in (({"k": "1"}, "k = 1 but 2 listener_artifact_ids are given"), ({"top_p": "0"}, "top_p")):
        api = client.post(
            f"/api/v1/studies/{study.id}/generations",
            headers={"X-CSRF-Token": csrf},
            data={**options, **bad, "listener_artifact_ids": ",".join(ids)},
            files=files,
        )
        page = client.post(
            f"/studies/{study.id}/generations",
            files=files,
            data={**options, **bad, "csrf_token": csrf, "listener": ids},
        )
        assert api.status_code == page.status_code == 422 and says in api.json()["detail"]
        assert str(markupsafe.escape(api.json()["detail"])) in page.text
    assert session.scalar(select(func.count(GenerationRun.id))) == 2


def test_the_one_runs_api_starts_a_navigation_run_from_a_form_or_json(session, setup, client):
    """POST /api/v1/studies/{id}/runs (docs/runs.md) takes the paths file as an upload or, in
    JSON, as the file's content; the run reads back at /api/v1/runs/{id} with the kind's own
    run in its detail, and is cancelled there."""
    csrf = login(client, setup["owner"])
    study, headers = setup["study"], {"X-CSRF-Token": csrf}
    fields = {
        "speaker_artifact_id": setup["speaker"].id,
        "listener_artifact_ids": [a.id for a in setup["listeners"]],
        "n": N,
        "m": M,
        "max_len": 12,
        "batch_size": 2,
    }
    r = client.post(
        f"/api/v1/studies/{study.id}/runs",
        headers=headers,
        data={k: ",".join(map(str, v)) if isinstance(v, list) else str(v) for k, v in fields.items()},
        files={"file": ("paths.json", setup["paths"], "application/json")},
    )
    assert r.status_code == 202 and r.json()["kind"] == "navigation", r.text
    form_run = r.json()
    assert form_run["artifact_ids"] == [setup["speaker"].id, *(a.id for a in setup["listeners"])]
    assert jobs.run_job(form_run["job_id"]) == "done"
    got = client.get(f"/api/v1/runs/{form_run['id']}").json()
    assert got["state"] == "done" and got["detail"]["candidates"] == PATHS * (1 + N) and got["detail"]["paths"] == PATHS
    grun = session.get(GenerationRun, got["detail"]["generation_run"])
    assert grun.job_id == form_run["job_id"]

    r = client.post(
        f"/api/v1/studies/{study.id}/runs", headers=headers, json={**fields, "file": json.loads(setup["paths"])}
    )
    assert r.status_code == 202, r.text
    json_run = r.json()
    assert client.post(f"/api/v1/runs/{json_run['id']}/cancel", headers=headers).json()["state"] == "cancelled"
    assert (
        session.get(
            GenerationRun, client.get(f"/api/v1/runs/{json_run['id']}").json()["detail"]["generation_run"]
        ).state
        == "cancelled"
    )
    # A file field sent as text is no file: it could name one on the server (the review found
    # a path read this way), and deep JSON in a form field is refused, not a RecursionError.
    form = {"speaker_artifact_id": str(setup["speaker"].id)}
    for text_file in ("/etc/hostname", str(tmp_path_of(setup["paths"]))):
        r = client.post(f"/api/v1/studies/{study.id}/runs", headers=headers, data={**form, "file": text_file})
        assert r.status_code == 422 and r.json()["field"] == "file" and "upload" in r.json()["detail"], r.text
    r = client.post(
        f"/api/v1/studies/{study.id}/runs",
        headers=headers,
        data={**form, "listener_artifact_ids": "[" * 5000 + "]" * 5000},
        files={"file": ("paths.json", setup["paths"], "application/json")},
    )
    assert r.status_code == 422 and r.json()["field"] == "listener_artifact_ids", r.text
    for bad, field in (
        ({**fields, "file": "not paths"}, "references"),
        ({k: v for k, v in fields.items() if k != "speaker_artifact_id"}, "file"),
    ):
        r = client.post(f"/api/v1/studies/{study.id}/runs", headers=headers, json=bad)
        assert r.status_code == 422 and r.json()["field"] == field, r.text


def tmp_path_of(data: bytes):
    """The paths file written where the server could read it, as a path a caller might send."""
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "paths.json"
    path.write_bytes(data)
    return path

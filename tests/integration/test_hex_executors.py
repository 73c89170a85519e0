"""Hexagons executors (docs/kinds/hexagons.md, "Executors"): uploads checked by
the sandboxed `hexagons.validate` job, a tiny executor trained here run over a study's
procedures by the `hexagons.generate` job (from the gold previous board and from its own), its
outputs on the leaderboard, cancel and retry, refusals that name the field, and the training
command. The run to the leaderboard and the cancelled and retried run (stored once) on both
backends; the uploads, refusals, page and training job, which store rows through the ORM as
test_agent_artifacts.py's and test_generation.py's do, on SQLite only (SQLITE_ONLY)."""

from __future__ import annotations

import io
import json

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import save as save_safetensors
from sqlalchemy import select
from torch import Tensor, nn

from app import jobs
from app.errors import InputError
from app.agents.models import AgentOutput
from app.auth.security import create_token
from app.kinds.hexagons import KIND
from app.kinds.hexagons.architectures import check_config
from app.kinds.hexagons.execution import executed_on
from app.kinds.hexagons.formats import parse_procedures
from app.studies import services
from app.studies.models import Item
from tests.conftest import create_tom_study, csrf_of, login, make_user
from workers.hexagons.executor import HexExecutor, execute_procedures
from workers.hexagons.train import build_vocabulary, train_executor
from workers.sandbox import sandbox_available

pytestmark = pytest.mark.skipif(sandbox_available() is not None, reason=f"no model sandbox here: {sandbox_available()}")

SQLITE_ONLY = pytest.mark.backend_agnostic("model uploads, refusals and pages, as test_agent_artifacts.py")
BLANK = [0] * 180
COLOURS = ("white", "black", "yellow", "green", "red", "blue", "purple", "orange")


def _board(painted: dict[int, int]) -> list[int]:
    b = list(BLANK)
    for t, c in painted.items():
        b[t] = c
    return b


def procedure(index: int) -> dict:
    """Three steps: two tiles, then a third; the gold boards carry over."""
    t, c = (index * 7) % 170, 1 + index % 7
    steps = [
        (f"paint tile {t} {COLOURS[c]}", {t: c}),
        (f"paint tile {t + 1} {COLOURS[c]} too", {t: c, t + 1: c}),
        (f"and tile {t + 9} {COLOURS[c]}", {t: c, t + 1: c, t + 9: c}),
    ]
    return {
        "index": index,
        "annotation_round": 1,
        "category": "simple",
        "image_id": f"IMG{index}",
        "instructor_id": 1,
        "number_of_drawing_steps": 3,
        "agreement_tags": ["A", "A", "A"],
        "agreement_scores": [[1, 1, 1]] * 3,
        "drawing_procedure": [[0, "NONE", BLANK]] + [[k + 1, text, _board(p)] for k, (text, p) in enumerate(steps)],
    }


def jsonl(indices) -> bytes:
    return "\n".join(json.dumps(procedure(i)) for i in indices).encode()


@pytest.fixture(scope="module")
def trained() -> HexExecutor:
    """A tiny executor trained for a moment: quality is the training command's business."""
    procs = parse_procedures(jsonl(range(12)))
    return train_executor(procs, build_vocabulary(procs, 1), embed=8, hidden=8, channels=8, epochs=2, seed=0)


class WrongShape(nn.Module):
    """Answers [B, 180] (the next board itself) instead of logits [B, 180, 8]."""

    @torch.jit.export
    def vocabulary(self) -> list[str]:
        return ["<pad>", "<unk>", "red"]

    @torch.jit.export
    def execute(self, tokens: Tensor, board: Tensor) -> Tensor:
        return board.float()


class NoVocabulary(nn.Module):
    @torch.jit.export
    def execute(self, tokens: Tensor, board: Tensor) -> Tensor:
        return torch.zeros(board.shape[0], 180, 8)


def scripted(model: nn.Module) -> bytes:
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(model), buf)
    return buf.getvalue()


@pytest.fixture
def researcher(session, client):
    owner = make_user(session, "researcher")
    token = create_token(session, owner)
    session.commit()
    client.headers["Authorization"] = f"Bearer {token}"
    return owner


def agent_of(session, owner, name: str) -> int:
    agent = services.register_agent(session, owner, "hexagons", name)
    session.commit()
    return agent.id


def upload(client, agent_id: int, data: bytes, fmt: str, config: dict | None = None):
    form = {"role": "executor", "format": fmt}
    if config is not None:
        form["config"] = json.dumps(config)
    return client.post(
        f"/api/v1/agents/{agent_id}/artifacts",
        data=form,
        files={"file": ("executor.bin", data, "application/octet-stream")},
    )


def verdicts(client, agent_id: int) -> dict[int, dict]:
    jobs.run_queued_once()  # what the worker does
    return {a["version"]: a for a in client.get(f"/api/v1/agents/{agent_id}/artifacts").json()}


def valid_executor(client, session, owner, trained, name: str = "gru") -> tuple[int, int]:
    agent_id = agent_of(session, owner, name)
    r = upload(client, agent_id, save_safetensors(trained.state_dict()), "safetensors", trained.config())
    assert r.status_code == 201, r.text
    got = verdicts(client, agent_id)[1]
    assert got["state"] == "valid", got
    return agent_id, got["id"]


@SQLITE_ONLY
def test_validation_refuses_a_bad_executor_and_accepts_a_trained_one(client, session, researcher, trained):
    agent_id = agent_of(session, researcher, "uploads")
    assert upload(client, agent_id, scripted(WrongShape()), "torchscript").status_code == 201
    assert upload(client, agent_id, scripted(NoVocabulary()), "torchscript").status_code == 201
    # Weights of hidden 8 under a config that says 16: the shapes are checked before loading.
    assert (
        upload(
            client, agent_id, save_safetensors(trained.state_dict()), "safetensors", {**trained.config(), "hidden": 16}
        ).status_code
        == 201
    )
    assert (
        upload(client, agent_id, save_safetensors(trained.state_dict()), "safetensors", trained.config()).status_code
        == 201
    )
    assert upload(client, agent_id, scripted(trained), "torchscript").status_code == 201
    got = verdicts(client, agent_id)
    assert got[1]["state"] == "invalid"
    assert got[1]["verdict"] == (
        "execute() returned shape [4, 180], expected [4, 180, 8] (logits over the 8 colours of each of the 180 tiles)"
    )
    assert got[2]["state"] == "invalid" and got[2]["verdict"].startswith("missing method vocabulary()")
    assert got[3]["state"] == "invalid" and "tensor 'gru.weight_ih_l0' has shape [24, 8]" in got[3]["verdict"]
    assert got[4]["state"] == "valid"
    assert got[4]["verdict"].startswith("gru-attend-conv executor: execute() ran on 4 steps, alone and batched")
    assert got[5]["state"] == "valid" and got[5]["verdict"].startswith("executor: execute() ran on 4 steps")


@SQLITE_ONLY
def test_a_config_that_is_not_an_executor_is_refused_at_upload_naming_the_field(client, session, researcher, trained):
    agent_id = agent_of(session, researcher, "configs")
    weights = save_safetensors(trained.state_dict())
    for config, field in (
        ({**trained.config(), "hidden": 0}, "config.hidden"),
        ({**trained.config(), "words": ["red", "<pad>"]}, "config.words"),
        ({**trained.config(), "architecture": "lstm"}, "config.architecture"),
        ({**trained.config(), "hiden": 8}, "config.hiden"),
    ):
        r = upload(client, agent_id, weights, "safetensors", config)
        assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert client.get(f"/api/v1/agents/{agent_id}/artifacts").json() == []  # nothing half-stored
    with pytest.raises(InputError, match="role|listener|executor"):
        check_config("listener", trained.config())


def test_an_executor_runs_over_a_study_from_gold_and_own_boards_and_reaches_the_leaderboard(
    client, session, researcher, trained
):
    study = services.create_study(
        session, researcher, "hexagons", services.StudySettings(title="Executors"), jsonl(range(20, 26)), "procedures"
    )
    gru, artifact = valid_executor(client, session, researcher, trained)
    own = agent_of(session, researcher, "gru (own boards)")
    r = client.post(f"/api/v1/hexagons/studies/{study.id}/generations", json={"artifact_id": artifact})
    assert r.status_code == 202 and r.json()["state"] == "queued" and r.json()["on"] == "gold", r.text
    gold_run = r.json()["id"]
    r = client.post(
        f"/api/v1/hexagons/studies/{study.id}/generations",
        json={"artifact_id": artifact, "agent_id": own, "on": "own", "batch_size": 4},
    )
    assert r.status_code == 202, r.text
    jobs.run_queued_once()
    for run in (gold_run, r.json()["id"]):
        got = client.get(f"/api/v1/hexagons/generations/{run}").json()
        assert got["state"] == "done" and got["done"] == got["total"] == 6 and got["outputs"] == 6, got
    assert [g["id"] for g in client.get(f"/api/v1/hexagons/studies/{study.id}/generations").json()] == [
        r.json()["id"],
        gold_run,
    ]

    items = {i.id: i for i in session.scalars(select(Item).where(Item.study_id == study.id))}
    outputs = {
        (o.agent_id, o.item_id): o for o in session.scalars(select(AgentOutput).where(AgentOutput.study_id == study.id))
    }
    assert len(outputs) == 12
    differ = 0
    for item_id, item in items.items():
        ref = item.reference
        spec = [(item.payload["instructions"], item.payload["initial"], ref["boards"])]
        for agent_id, on in ((gru, "gold"), (own, "own")):
            out = outputs[(agent_id, item_id)]
            # The stored boards are the executor's own, in the shape execution.py documents.
            assert out.response["on"] == on
            assert [s["board"] for s in out.response["steps"]] == execute_procedures(trained, spec, on)[0]
            assert out.score == KIND.score(item.payload, ref, out.response)
        gold_on = executed_on(outputs[(gru, item_id)].response, ref["initial"], ref["boards"])
        own_on = executed_on(outputs[(own, item_id)].response, ref["initial"], ref["boards"])
        assert gold_on[1:] == ref["boards"][:-1]  # oracle: every step on the gold board before it
        differ += gold_on != own_on
    assert differ  # the executor's own boards are not the gold ones

    board = client.get(f"/api/v1/studies/{study.id}/leaderboard").json()
    text = json.dumps(board)
    assert "gru v1" in text and "gru (own boards) v1" in text


def test_a_run_can_be_cancelled_and_a_retried_run_stores_nothing_twice(client, session, researcher, trained):
    study = services.create_study(
        session, researcher, "hexagons", services.StudySettings(title="Retry"), jsonl(range(30, 34)), "procedures"
    )
    gru, artifact = valid_executor(client, session, researcher, trained)
    run = client.post(f"/api/v1/hexagons/studies/{study.id}/generations", json={"artifact_id": artifact}).json()["id"]
    r = client.post(f"/api/v1/hexagons/generations/{run}/cancel")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    jobs.run_queued_once()
    assert client.get(f"/api/v1/hexagons/generations/{run}").json()["outputs"] == 0
    r = client.post(f"/api/v1/hexagons/generations/{run}/cancel")
    assert r.status_code == 409 and r.json()["field"] == "state"

    run = client.post(f"/api/v1/hexagons/studies/{study.id}/generations", json={"artifact_id": artifact}).json()["id"]
    jobs.run_queued_once()
    first = {o.item_id: o.response for o in session.scalars(select(AgentOutput).where(AgentOutput.agent_id == gru))}
    assert len(first) == 4
    # Its worker "died" after storing: a redelivery runs it again and keeps what it stored.
    job = session.get(jobs.Job, run)
    job.state = "queued"
    session.commit()
    assert jobs.run_job(run) == "done"
    session.expire_all()
    again = {o.item_id: o.response for o in session.scalars(select(AgentOutput).where(AgentOutput.agent_id == gru))}
    assert again == first
    assert "4 stored" in client.get(f"/api/v1/hexagons/generations/{run}").json()["log"]


@SQLITE_ONLY
def test_bad_requests_are_refused_naming_the_field(client, session, researcher, trained):
    study = services.create_study(
        session, researcher, "hexagons", services.StudySettings(title="Refusals"), jsonl(range(40, 42)), "procedures"
    )
    gru, artifact = valid_executor(client, session, researcher, trained)
    url = f"/api/v1/hexagons/studies/{study.id}/generations"
    for body, field in (
        ({}, "artifact_id"),
        ({"artifact_id": artifact, "on": "sideways"}, "on"),
    ):
        r = client.post(url, json=body)
        assert r.status_code == 422 and r.json()["field"] == field, r.text
    # A well-formed id of nothing: not found, as a path's id would be.
    r = client.post(url, json={"artifact_id": 2**31 - 1})
    assert r.status_code == 404 and r.json()["field"] == "artifact_id", r.text
    assert client.post(url, json={"artifact_id": artifact, "batch_size": 0}).status_code == 422
    # Another researcher's executor, agent and study are not theirs to use.
    other = make_user(session, "researcher")
    theirs = agent_of(session, other, "theirs")
    r = client.post(url, json={"artifact_id": artifact, "agent_id": theirs})
    assert r.status_code == 404 and r.json()["field"] == "agent_id"
    token = create_token(session, other)
    session.commit()
    as_other = {"Authorization": f"Bearer {token}"}
    assert client.post(url, json={"artifact_id": artifact}, headers=as_other).status_code == 404
    r = client.post(f"/api/v1/hexagons/studies/{study.id}/generations", json={"artifact_id": artifact})
    assert client.get(f"/api/v1/hexagons/generations/{r.json()['id']}", headers=as_other).status_code == 404
    tom = create_tom_study(session, researcher)
    r = client.post(f"/api/v1/hexagons/studies/{tom.id}/generations", json={"artifact_id": artifact})
    assert r.status_code == 409 and r.json()["field"] == "study"  # a study of another kind
    # Only the one accepted request made a job.
    assert len(session.scalars(select(jobs.Job).where(jobs.Job.task == "hexagons.generate")).all()) == 1


@SQLITE_ONLY
def test_the_study_page_starts_and_shows_runs(client, session, trained):
    owner = make_user(session, "researcher")
    session.commit()
    study = services.create_study(
        session, owner, "hexagons", services.StudySettings(title="Page"), jsonl(range(50, 52)), "procedures"
    )
    token = create_token(session, owner)
    session.commit()
    client.headers["Authorization"] = f"Bearer {token}"
    gru, artifact = valid_executor(client, session, owner, trained)
    del client.headers["Authorization"]
    login(client, owner)
    page = client.get(f"/studies/{study.id}").text
    assert 'id="executor-runs"' in page and "gru v1, model v1 (safetensors)" in page
    r = client.post(
        f"/hexagons/studies/{study.id}/generations",
        follow_redirects=False,
        data={"csrf_token": csrf_of(client), "artifact_id": str(artifact), "on": "own"},
    )
    assert r.status_code == 303 and r.headers["location"] == f"/studies/{study.id}#executor-runs"
    page = client.get(f"/studies/{study.id}").text
    assert "queued." in page and 'hx-trigger="every 3s"' in page  # watched while it goes
    r = client.post(
        f"/hexagons/studies/{study.id}/generations",
        follow_redirects=False,
        data={"csrf_token": csrf_of(client), "artifact_id": "x"},
    )
    page = client.get(r.headers["location"]).text
    assert "Not started: field &#39;artifact_id&#39;: artifact_id must be a whole number" in page
    jobs.run_queued_once()
    section = client.get(f"/hexagons/studies/{study.id}/generations").text
    assert "every 3s" not in section and "2 of 2 procedures" in section and "own" in section


def test_the_training_command_writes_an_uploadable_executor_and_reports_scores(tmp_path):
    from app.cli import main

    for split, indices in (("train", range(0, 10)), ("dev", range(10, 13)), ("test", range(13, 16))):
        (tmp_path / f"{split}.jsonl").write_bytes(jsonl(indices))
    out = tmp_path / "out"
    r = CliRunner().invoke(
        main,
        [
            "train",
            "hex-executor",
            "--data",
            str(tmp_path),
            "--epochs",
            "1",
            "--embed",
            "8",
            "--hidden",
            "8",
            "--channels",
            "8",
            "--out",
            str(out),
            "--device",
            "cpu",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "dev (3 procedures, 9 steps):" in r.output and "predicted board-state" in r.output
    config = json.loads((out / "executor.json").read_text())
    assert check_config("executor", config)["hidden"] == 8
    report = json.loads((out / "executor-quality.json").read_text())
    assert set(report["scores"]) == {"dev", "test"}
    assert set(report["scores"]["test"]) == {"no_action", "oracle", "predicted"}
    r = CliRunner().invoke(main, ["train", "hex-executor", "--data", str(tmp_path / "none"), "--out", str(out)])
    assert r.exit_code != 0 and "no train.jsonl" in r.output


@SQLITE_ONLY
def test_training_as_a_job_uploads_a_new_version_of_the_agents_executor(client, session, researcher, tmp_path):
    for split, indices in (("train", range(0, 8)), ("dev", range(8, 10))):
        (tmp_path / f"{split}.jsonl").write_bytes(jsonl(indices))
    agent_id = agent_of(session, researcher, "trained by a worker")
    session.commit()
    from app.cli import main

    # Queued by the command, whose every training option reaches the job.
    r = CliRunner().invoke(
        main,
        [
            "train",
            "hex-executor",
            "--agent-id",
            str(agent_id),
            "--data",
            str(tmp_path),
            "--epochs",
            "1",
            "--embed",
            "8",
            "--hidden",
            "8",
            "--channels",
            "8",
            "--batch",
            "3",
            "--lr",
            "0.01",
            "--min-count",
            "1",
            "--change-weight",
            "2.5",
            "--seed",
            "4",
        ],
    )
    assert r.exit_code == 0 and "queued job" in r.output, r.output
    job = session.scalars(select(jobs.Job).where(jobs.Job.task == "hexagons.train")).one()
    assert {k: job.params[k] for k in ("epochs", "batch", "lr", "min_count", "change_weight", "seed")} == {
        "epochs": 1,
        "batch": 3,
        "lr": 0.01,
        "min_count": 1,
        "change_weight": 2.5,
        "seed": 4,
    }
    jobs.run_queued_once()  # the training, then the validation it queues
    session.refresh(job)
    assert job.state == "done", job.log
    assert "epoch 1: loss" in job.log and "oracle board-state" in job.log
    got = client.get(f"/api/v1/agents/{agent_id}/artifacts").json()
    assert [(a["id"], a["state"], a["role"]) for a in got] == [(job.result["artifact"], "valid", "executor")]
    assert set(job.result["scores"]["dev"]) == {"no_action", "oracle", "predicted"}
    assert client.get(f"/api/v1/agents/{agent_id}/artifacts").json()[0]["config"]["hidden"] == 8

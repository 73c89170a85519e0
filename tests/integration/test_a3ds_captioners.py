"""A3DS captioners as models (docs/kinds/a3ds.md, "Captioner models" and "Captioner runs"):
uploads are validated in the sandbox with a verdict naming the failed check; a trained
captioner (seconds) captions a study's pairs through the job runner and its captions become
items named by it; runs cancel and retry without duplicates; the training command and job."""

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
from app.auth.security import create_token
from app.kinds.a3ds.architectures import check_config
from app.studies import services
from app.studies.models import Item
from tests.conftest import csrf_of, login, make_user
from workers.a3ds.captioner import Captioner, caption_pairs
from workers.a3ds.train import run_training
from workers.sandbox import sandbox_available

pytestmark = pytest.mark.skipif(sandbox_available() is not None, reason=str(sandbox_available()))

DESIGN = {"pairs": {"z": {"1": 2, "3": 1}}, "speakers": ["literal"], "seed": 3}


class NoCaption(nn.Module):
    @torch.jit.export
    def vocabulary(self) -> list[str]:
        return ["<pad>", "<start>", "<end>", "red"]

    def forward(self, x: Tensor) -> Tensor:
        return x


class OneDimensional(NoCaption):
    @torch.jit.export
    def caption(self, target: Tensor, distractor: Tensor) -> Tensor:
        return torch.full([target.shape[0]], 3, dtype=torch.int64)


@pytest.fixture(scope="module")
def trained() -> Captioner:
    model, _ = run_training(
        pairs=40,
        dev_pairs=5,
        epochs=2,
        embed=8,
        hidden=16,
        channels=4,
        with_distractor=True,
        echo=lambda line: None,
        bars=False,
    )
    return model


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
    agent = services.register_agent(session, owner, "a3ds", name)
    session.commit()
    return agent.id


def upload(client, agent_id: int, data: bytes, fmt: str, config: dict | None = None):
    form = {"role": "captioner", "format": fmt}
    if config is not None:
        form["config"] = json.dumps(config)
    return client.post(
        f"/api/v1/agents/{agent_id}/artifacts",
        data=form,
        files={"file": ("captioner.bin", data, "application/octet-stream")},
    )


def verdicts(client, agent_id: int) -> dict[int, dict]:
    jobs.run_queued_once()  # what the worker does
    return {a["version"]: a for a in client.get(f"/api/v1/agents/{agent_id}/artifacts").json()}


def valid_captioner(client, session, owner, trained, name: str = "cnn-gru") -> int:
    agent_id = agent_of(session, owner, name)
    r = upload(client, agent_id, save_safetensors(trained.state_dict()), "safetensors", trained.config())
    assert r.status_code == 201, r.text
    got = verdicts(client, agent_id)[1]
    assert got["state"] == "valid", got
    return got["id"]


def study_of(session, owner, title: str):
    return services.create_study(
        session, owner, "a3ds", services.StudySettings(title=title), json.dumps(DESIGN).encode(), "design"
    )


def generated(session, study_id: int, captioner: str) -> dict[tuple[int, int], Item]:
    """A run's items by pair: `captioner` a built-in speaker, or "a<artifact id>" for a model."""
    rows = session.scalars(
        select(Item).where(Item.study_id == study_id, Item.external_id.startswith(f"gen:{captioner}:"))
    )
    return {(i.reference["target_id"], i.reference["distractor_id"]): i for i in rows}


def test_bad_uploads_are_refused_with_the_reason_and_a_trained_one_is_valid(client, session, researcher, trained):
    agent_id = agent_of(session, researcher, "uploads")
    assert upload(client, agent_id, scripted(NoCaption()), "torchscript").status_code == 201
    assert upload(client, agent_id, scripted(OneDimensional()), "torchscript").status_code == 201
    # Weights of hidden 16 under a config that says 32: the shapes are checked before loading.
    assert (
        upload(
            client, agent_id, save_safetensors(trained.state_dict()), "safetensors", {**trained.config(), "hidden": 32}
        ).status_code
        == 201
    )
    assert upload(client, agent_id, scripted(trained), "torchscript").status_code == 201
    got = verdicts(client, agent_id)
    assert got[1]["state"] == "invalid" and got[1]["verdict"].startswith("missing method caption()")
    assert got[2]["state"] == "invalid"
    assert got[2]["verdict"] == "caption() returned shape [4], expected [4, L] with L from 1 to 48"
    assert got[3]["state"] == "invalid" and "tensor 'project.weight' has shape [16, 128]" in got[3]["verdict"]
    assert got[4]["state"] == "valid" and got[4]["verdict"].startswith("captioner: caption() ran on 4 pairs")

    weights = save_safetensors(trained.state_dict())
    for config, field in (
        ({**trained.config(), "hidden": 0}, "config.hidden"),
        ({**trained.config(), "words": ["red", "<pad>"]}, "config.words"),
        ({**trained.config(), "with_distractor": "yes"}, "config.with_distractor"),
        ({**trained.config(), "architecture": "lstm"}, "config.architecture"),
    ):
        r = upload(client, agent_id, weights, "safetensors", config)
        assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert len(client.get(f"/api/v1/agents/{agent_id}/artifacts").json()) == 4  # nothing half-stored


def test_a_trained_captioner_captions_a_study_and_its_captions_become_items(client, session, researcher, trained):
    study = study_of(session, researcher, "Captioners")
    before = session.scalar(select(Item.id).where(Item.study_id == study.id).limit(1))
    assert before is not None
    artifact = valid_captioner(client, session, researcher, trained)
    r = client.post(f"/api/v1/a3ds/studies/{study.id}/generations", json={"artifact_id": artifact, "batch_size": 2})
    assert r.status_code == 202 and r.json()["state"] == "queued" and r.json()["captioner"] == "cnn-gru v1", r.text
    model_run = r.json()["id"]
    r = client.post(f"/api/v1/a3ds/studies/{study.id}/generations", json={"speaker": "contrastive"})
    assert r.status_code == 202, r.text
    jobs.run_queued_once()
    for run in (model_run, r.json()["id"]):
        got = client.get(f"/api/v1/a3ds/generations/{run}").json()
        assert got["state"] == "done" and got["done"] == got["total"] == 3 and got["items"] == 3, got

    # Keyed by the model, named by agent and version: another version is another captioner.
    items = generated(session, study.id, f"a{artifact}")
    assert len(items) == 3
    captions = caption_pairs(trained, list(items))
    for (pair, item), caption in zip(items.items(), captions):
        # The caption shown is the model's own, judged like any other: pair, order, metrics.
        assert item.payload["caption"] == caption and item.reference["captioner"] == "cnn-gru v1"
        assert sorted(item.payload["scenes"]) == sorted(pair) and not item.is_gold
        assert str(item.reference["metrics"]["z"]) == item.category in ("1", "3")
    contrastive = generated(session, study.id, "contrastive")
    assert set(contrastive) == set(items)
    assert all(i.reference["metrics"]["discriminative"] for i in contrastive.values())

    # The leaderboard compares the captioners on the study's pairs.
    services.set_state(session, session.merge(study), "live", researcher)
    text = json.dumps(client.get(f"/api/v1/studies/{study.id}/leaderboard").json())
    assert "cnn-gru v1" in text and "contrastive" in text and "literal" in text


def test_a_run_can_be_cancelled_and_a_retried_run_adds_nothing_twice(client, session, researcher):
    study = study_of(session, researcher, "Retry")
    run = client.post(f"/api/v1/a3ds/studies/{study.id}/generations", json={"speaker": "short"}).json()["id"]
    r = client.post(f"/api/v1/a3ds/generations/{run}/cancel")
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    jobs.run_queued_once()
    assert client.get(f"/api/v1/a3ds/generations/{run}").json()["items"] == 0
    r = client.post(f"/api/v1/a3ds/generations/{run}/cancel")
    assert r.status_code == 409 and r.json()["field"] == "state"

    run = client.post(
        f"/api/v1/a3ds/studies/{study.id}/generations", json={"speaker": "short", "batch_size": 1}
    ).json()["id"]
    jobs.run_queued_once()
    first = {k: i.payload for k, i in generated(session, study.id, "short").items()}
    assert len(first) == 3
    # Its worker "died" after storing: a redelivery runs it again and adds nothing.
    job = session.get(jobs.Job, run)
    job.state = "queued"
    session.commit()
    assert jobs.run_job(run) == "done"
    session.expire_all()
    assert {k: i.payload for k, i in generated(session, study.id, "short").items()} == first
    assert "3 stored" in client.get(f"/api/v1/a3ds/generations/{run}").json()["log"]


def test_bad_requests_are_refused_naming_the_field(client, session, researcher):
    study = study_of(session, researcher, "Refusals")
    url = f"/api/v1/a3ds/studies/{study.id}/generations"
    for body, field in (
        ({}, "speaker"),
        ({"speaker": "short", "artifact_id": 1}, "speaker"),
        ({"speaker": "poet"}, "speaker"),
    ):
        r = client.post(url, json=body)
        assert r.status_code == 422 and r.json()["field"] == field, (body, r.text)
    r = client.post(url, json={"artifact_id": 999999})  # well formed, names nothing: 404
    assert r.status_code == 404 and r.json()["field"] == "artifact_id", r.text
    services.set_state(session, session.merge(study), "live", researcher)
    r = client.post(url, json={"speaker": "short"})
    assert r.status_code == 409 and r.json()["field"] == "study" and "draft" in r.json()["detail"]
    assert client.get(url).json() == []  # nothing queued


def test_the_study_page_starts_and_shows_runs(client, session):
    owner = make_user(session, "researcher", email="a3ds-page@example.org")
    session.commit()
    study = study_of(session, owner, "Page")
    login(client, owner)
    page = client.get(f"/studies/{study.id}").text
    assert "Captioner runs" in page and "built-in speaker: minimal" in page
    r = client.post(
        f"/a3ds/studies/{study.id}/generations",
        data={"captioner": "speaker:minimal", "csrf_token": csrf_of(client)},
        follow_redirects=False,
    )
    assert r.status_code == 303
    jobs.run_queued_once()
    section = client.get(f"/a3ds/studies/{study.id}/generations").text
    assert "minimal" in section and "3 of 3 pairs" in section and "every 3s" not in section


def test_the_training_command_writes_an_uploadable_captioner_and_reports_metrics(tmp_path):
    from app.cli import main

    out = tmp_path / "out"
    r = CliRunner().invoke(
        main,
        [
            "train",
            "a3ds-captioner",
            "--pairs",
            "20",
            "--dev-pairs",
            "4",
            "--epochs",
            "1",
            "--embed",
            "8",
            "--hidden",
            "8",
            "--channels",
            "4",
            "--out",
            str(out),
            "--device",
            "cpu",
            "--with-distractor",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "captions from the contrastive speaker, with the distractor" in r.output
    assert "held out (4 pairs), captioner: discriminativity" in r.output
    config = check_config("captioner", json.loads((out / "captioner.json").read_text()))
    assert config["hidden"] == 8 and config["with_distractor"] is True
    report = json.loads((out / "captioner-quality.json").read_text())
    assert {"discriminative", "contrastive_efficiency", "relevance", "optimal"} <= set(report["held_out"])
    r = CliRunner().invoke(main, ["train", "a3ds-captioner", "--device", "tpu"])
    assert r.exit_code != 0 and "cpu or cuda" in r.output


def test_training_as_a_job_uploads_a_new_version_of_the_agents_captioner(client, session, researcher):
    agent_id = agent_of(session, researcher, "trained by a worker")
    session.commit()
    from app.cli import main

    # Queued by the command, whose every training option reaches the job.
    r = CliRunner().invoke(
        main,
        [
            "train",
            "a3ds-captioner",
            "--agent-id",
            str(agent_id),
            "--pairs",
            "20",
            "--dev-pairs",
            "4",
            "--epochs",
            "1",
            "--embed",
            "8",
            "--hidden",
            "16",
            "--channels",
            "4",
            "--batch",
            "5",
            "--lr",
            "0.01",
            "--speaker",
            "short",
            "--with-distractor",
        ],
    )
    assert r.exit_code == 0 and "queued job" in r.output, r.output
    job = session.scalars(select(jobs.Job).where(jobs.Job.task == "a3ds.train")).one()
    assert {k: job.params[k] for k in ("pairs", "dev_pairs", "batch", "lr", "speaker", "with_distractor")} == {
        "pairs": 20,
        "dev_pairs": 4,
        "batch": 5,
        "lr": 0.01,
        "speaker": "short",
        "with_distractor": True,
    }
    jobs.run_queued_once()  # the training, then the validation it queues
    session.refresh(job)
    assert job.state == "done", job.log
    assert "epoch 1: loss" in job.log and "held out" in job.log
    got = client.get(f"/api/v1/agents/{agent_id}/artifacts").json()
    assert [(a["id"], a["state"], a["role"]) for a in got] == [(job.result["artifact"], "valid", "captioner")]
    assert (got[0]["config"]["hidden"], got[0]["config"]["with_distractor"]) == (16, True)

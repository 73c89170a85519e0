"""Uploaded STS policies (docs/kinds/sts-policies.md): upload through the agents API, the
`sts.validate` job's verdicts, hostile TorchScript refused by the sandbox, and the policy an
agent acts with in continuations (app/kinds/sts/policies.py)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch
from safetensors.torch import save as save_safetensors
from sqlalchemy import func, select
from torch import Tensor, nn

from app import jobs
from app.agents.models import AgentArtifact
from app.auth.security import create_token
from app.errors import InputError
from app.kinds.sts import policies
from app.kinds.sts.env import BabyAISimulator
from app.kinds.sts.mining import mine
from app.kinds.sts.models import BUILTIN_VERSION
from app.kinds.sts.recordings import expert_recording
from app.kinds.sts.rollout import expert_policy, jobs_for, rollout_batched, rollout_sequential
from app.studies import services
from tests.conftest import make_user
from workers.sandbox import SandboxedModel, sandbox_available
from workers.sts.policy import FilmPolicy, TorchPolicy
from workers.sts.train import demonstrations, train_policy
from workers.sts.validate import Invalid, observations, validate_bytes

pytestmark = [
    pytest.mark.skipif(sandbox_available() is not None, reason=f"no model sandbox here: {sandbox_available()}"),
    pytest.mark.backend_agnostic(  # on SQLite only: see tests/conftest.py
        "policy uploads and sandbox verdicts; the rows are plain inserts"
    ),
]

SIM = BabyAISimulator()
VALID = "policy: act() ran on 8 observations from 4 BabyAI levels, alone and batched"
SECRET = "proctor-secret-" + "q7w8e9"


@pytest.fixture(scope="module")
def trained() -> FilmPolicy:
    """A tiny policy trained for a moment on expert steps: quality is the unit tests' business."""
    data = demonstrations(["BabyAI-GoToObj-v0", "BabyAI-GoToLocal-v0"], range(10), SIM)
    return train_policy(data, embed=8, channels=8, hidden=16, epochs=3, batch=32, seed=0)


def scripted(model: nn.Module) -> bytes:
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(model), buf)
    return buf.getvalue()


@pytest.fixture
def researcher(session, client):
    owner = make_user(session, "researcher")
    agent = services.register_agent(session, owner, "sts", "bc")
    token = create_token(session, owner)
    session.commit()
    client.headers["Authorization"] = f"Bearer {token}"
    return agent


def upload(client, agent_id, data: bytes, fmt: str, config: dict | None = None, role: str = "policy"):
    form = {"role": role, "format": fmt}
    if config is not None:
        form["config"] = json.dumps(config)
    return client.post(
        f"/api/v1/agents/{agent_id}/artifacts",
        data=form,
        files={"file": ("policy.bin", data, "application/octet-stream")},
    )


def verdicts(client, agent_id) -> dict[int, dict]:
    jobs.run_queued_once()  # what the worker does
    r = client.get(f"/api/v1/agents/{agent_id}/artifacts")
    assert r.status_code == 200, r.text
    return {a["version"]: a for a in r.json()}


def in_process(model: nn.Module) -> np.ndarray:
    with torch.no_grad():
        return torch.softmax(TorchPolicy(model.eval()).logits(observations()).double(), -1).numpy()


def test_the_agents_page_offers_sts_policies(client, session):
    from tests.conftest import login

    owner = make_user(session, "researcher")
    session.commit()
    login(client, owner)
    page = client.get("/agents").text
    assert "an STS policy (BabyAI observation and mission to action logits" in page
    assert '<option value="sts">Standardised Test Suite (BabyAI continuations)</option>' in page
    token = create_token(session, owner)
    session.commit()
    r = client.post("/api/v1/agents", json={"name": "bc", "kind": "sts"}, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 201 and r.json()["kind"] == "sts"
    page = client.get("/agents").text
    assert '<option value="policy">policy</option>' in page


def test_a_trained_policy_uploaded_as_safetensors_is_valid_and_acts(client, researcher, session, trained):
    r = upload(client, researcher.id, save_safetensors(trained.state_dict()), "safetensors", trained.config())
    assert r.status_code == 201, r.text
    assert r.json()["state"] == "pending" and r.json()["role"] == "policy" and r.json()["version"] == 1
    got = verdicts(client, researcher.id)
    assert got[1]["state"] == "valid" and got[1]["verdict"] == f"film-cnn-gru {VALID}"

    policy = policies.policy_for_agent(session, researcher)
    assert isinstance(policy.model, FilmPolicy) and not policy.model.training
    probs = policy(observations())
    assert probs.shape == (8, 7) and np.allclose(probs.sum(1), 1.0)
    assert np.allclose(probs, in_process(trained), atol=1e-6)


def test_configs_and_weights_that_do_not_fit_are_refused_naming_the_field(client, researcher, session, trained):
    weights = save_safetensors(trained.state_dict())
    # the config is checked at upload: 422, nothing stored
    for config, field in (
        ({**trained.config(), "hidden": 0}, "config.hidden"),
        ({**trained.config(), "vocab_version": "proctor.sts.vocab/0"}, "config.vocab_version"),
        ({**trained.config(), "architecture": "gru-speaker"}, "config.architecture"),
        ({**trained.config(), "layers": 3}, "config.layers"),
    ):
        r = upload(client, researcher.id, weights, "safetensors", config)
        assert r.status_code == 422 and r.json()["field"] == field, r.text
    # A navigation role on an STS agent: the agent's kind refuses it (409); a role of no kind: 422
    r = upload(client, researcher.id, weights, "safetensors", trained.config(), role="speaker")
    assert r.status_code == 409 and r.json()["field"] == "role"
    assert r.json()["detail"] == "field 'role': role must be one of policy for a sts agent"
    r = upload(client, researcher.id, weights, "safetensors", trained.config(), role="pilot")
    assert r.status_code == 422 and r.json()["field"] == "role", r.text
    session.expire_all()
    assert session.scalar(select(func.count()).select_from(AgentArtifact)) == 0
    # weights that do not match a well-formed config: the validation job names the tensor
    r = upload(client, researcher.id, weights, "safetensors", {**trained.config(), "hidden": 32})
    assert r.status_code == 201, r.text
    missing = {k: v for k, v in trained.state_dict().items() if k != "head.4.bias"}
    assert upload(client, researcher.id, save_safetensors(missing), "safetensors", trained.config()).status_code == 201
    got = verdicts(client, researcher.id)
    assert got[1]["state"] == got[2]["state"] == "invalid"
    assert got[1]["verdict"] == (
        "film-cnn-gru weights: could not load the model: ValueError: tensor "
        "'gru.weight_ih_l0' has shape [48, 8], but the config (embed 8, channels 8, "
        "hidden 32) needs [96, 8]"
    )
    assert got[2]["verdict"] == (
        "film-cnn-gru weights: could not load the model: ValueError: tensor "
        "'head.4.bias' is missing (the config: embed 8, channels 8, hidden 16)"
    )
    # an agent with only invalid uploads has no policy to act with, and is told why
    with pytest.raises(InputError) as refused:
        policies.policy_for_agent(session, researcher)
    assert refused.value.field == "agent"
    assert refused.value.message.startswith(
        "agent 'bc' has no policy to act with: its newest upload, v2, is "
        "invalid: film-cnn-gru weights: could not load the model"
    )


def test_a_torchscript_policy_runs_sandboxed_and_answers_as_in_process(client, researcher, session, trained):
    r = upload(client, researcher.id, scripted(trained), "torchscript")
    assert r.status_code == 201, r.text
    got = verdicts(client, researcher.id)
    assert got[1]["state"] == "valid" and got[1]["verdict"] == VALID
    policy = policies.policy_for_agent(session, researcher)
    try:
        assert isinstance(policy.model, SandboxedModel)
        assert np.allclose(policy(observations()), in_process(trained), atol=1e-6)
        # continuations: batched (one sandboxed call per step for the whole batch) == one at a time
        recs = [
            expert_recording(level, 2, simulator=SIM, id=level)
            for level in ("BabyAI-GoToObj-v0", "BabyAI-GoToLocal-v0", "BabyAI-PickupLoc-v0")
        ]
        scenario_jobs = jobs_for(
            mine(recs, "first step", 6, simulator=SIM), {r.id: r for r in recs}, continuations=2, seed=5
        )
        batched = rollout_batched(scenario_jobs, policy, SIM, batch_size=4)
        assert batched == rollout_sequential(scenario_jobs, policy, SIM)
        assert all(len(c.actions) >= 1 for c in batched)
    finally:
        policy.close()
    assert policy.model._proc is None  # the sandboxed process is gone


def test_policy_for_agent_prefers_the_newest_valid_upload(client, researcher, session, trained):
    other = FilmPolicy(8, 8, 16)
    assert (
        upload(
            client, researcher.id, save_safetensors(trained.state_dict()), "safetensors", trained.config()
        ).status_code
        == 201
    )
    assert (
        upload(
            client, researcher.id, save_safetensors(other.state_dict()), "safetensors", {**other.config(), "hidden": 32}
        ).status_code
        == 201
    )  # v2: invalid
    got = verdicts(client, researcher.id)
    assert [got[1]["state"], got[2]["state"]] == ["valid", "invalid"]
    policy = policies.policy_for_agent(session, researcher)
    assert policy.artifact_id == got[1]["id"]
    assert np.allclose(policy(observations()), in_process(trained), atol=1e-6)

    # batched continuations with the uploaded policy equal one-at-a-time ones
    recs = [
        expert_recording(level, 3, simulator=SIM, id=level)
        for level in ("BabyAI-GoToLocal-v0", "BabyAI-OpenDoor-v0", "BabyAI-PutNextLocal-v0")
    ]
    scenario_jobs = jobs_for(
        mine(recs, "first step", 10, simulator=SIM)
        + mine(recs, "before success", 10, k=2, simulator=SIM, skip_inapplicable=True),
        {r.id: r for r in recs},
        continuations=3,
        seed=11,
    )
    assert len(scenario_jobs) >= 12
    batched = rollout_batched(scenario_jobs, policy, SIM, batch_size=5)
    assert batched == rollout_sequential(scenario_jobs, policy, SIM)
    assert batched != rollout_batched(scenario_jobs, policies.BUILT_IN["random"](), SIM, batch_size=5)


def test_built_in_agents_and_agents_without_a_policy(session):
    owner = make_user(session, "researcher")
    expert = services.register_agent(session, owner, "sts", "expert", version=BUILTIN_VERSION)
    random_ = services.register_agent(session, owner, "sts", "random", version=BUILTIN_VERSION)
    empty = services.register_agent(session, owner, "sts", "mine")
    own_expert = services.register_agent(session, owner, "sts", "expert")  # the researcher's own
    nav = services.register_agent(session, owner, "navigation", "speaker")
    session.commit()
    assert policies.policy_for_agent(session, expert) is expert_policy
    obs = observations()
    assert np.allclose(policies.policy_for_agent(session, random_)(obs), np.full((8, 7), 1 / 7))
    with pytest.raises(InputError) as refused:
        policies.policy_for_agent(session, empty)
    assert refused.value.message == (
        "agent 'mine' has no policy to act with: it has no upload. Upload a policy "
        "(docs/kinds/sts-policies.md) or use a built-in agent (expert, random)"
    )
    with pytest.raises(InputError, match="agent 'expert' has no policy to act with: it has no upload"):
        policies.policy_for_agent(session, own_expert)
    with pytest.raises(InputError, match="agent 'speaker' is a navigation agent, not an STS one"):
        policies.policy_for_agent(session, nav)


# -- hostile and broken TorchScript policies (validate_bytes, as tests/integration/test_sandbox.py) --


class FileReadingPolicy(FilmPolicy):
    """act() reads a file and hides its bytes in the logits."""

    def __init__(self, target: str):
        super().__init__(4, 4, 8)
        self.target = target

    @torch.jit.export
    def act(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        stolen = torch.from_file(self.target, shared=False, size=7, dtype=torch.uint8)
        return stolen.to(torch.float32).unsqueeze(0).expand(image.shape[0], 7)


class LoopingPolicy(FilmPolicy):
    @torch.jit.export
    def act(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        x = torch.zeros(1)
        while bool(x[0] >= 0):
            x = x + 1
        return x


class RaisingPolicy(FilmPolicy):
    @torch.jit.export
    def act(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        raise RuntimeError("proctor-secret-q7w8e9")


class TalkativePolicy(FilmPolicy):
    @torch.jit.export
    def vocab_version(self) -> str:
        return "proctor-secret-q7w8e9"


class SixActionPolicy(FilmPolicy):
    @torch.jit.export
    def act(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        return torch.zeros(image.shape[0], 6)


class NaNPolicy(FilmPolicy):
    @torch.jit.export
    def act(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        return torch.full((image.shape[0], 7), float("nan"))


class DicePolicy(FilmPolicy):
    @torch.jit.export
    def act(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        return torch.randn(image.shape[0], 7)


class BatchNormPolicy(FilmPolicy):
    """Normalises over the batch: alone, an observation gets another answer."""

    @torch.jit.export
    def act(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        x = image.float().flatten(1)[:, :7]
        return (x - x.mean(0)) * 3.0


class ActOnly(nn.Module):
    """No vocab_version(): the vocabulary it was built for is unknown."""

    def forward(self, image: Tensor, direction: Tensor, mission: Tensor) -> Tensor:
        return torch.zeros(image.shape[0], 7)


def test_a_policy_cannot_read_the_workers_files(tmp_path):
    secret = tmp_path / "another-researchers-upload.bin"
    secret.write_text(SECRET)
    # outside the sandbox the same archive does read it: the test would catch a sandbox that stopped
    free = torch.jit.load(io.BytesIO(scripted(FileReadingPolicy(str(secret)))))
    leaked = free.act(
        torch.zeros((1, 7, 7, 3), dtype=torch.uint8),
        torch.zeros(1, dtype=torch.long),
        torch.zeros((1, 1), dtype=torch.long),
    )
    assert bytes(leaked[0].to(torch.uint8).tolist()) == SECRET.encode()[:7]
    for target in (str(secret), "/etc/passwd"):
        with pytest.raises(Invalid) as refused:
            validate_bytes("policy", "torchscript", scripted(FileReadingPolicy(target)), None)
        assert str(refused.value) == "act() raised RuntimeError"


def test_a_policy_that_never_answers_is_stopped():
    with pytest.raises(Invalid) as refused:
        validate_bytes("policy", "torchscript", scripted(LoopingPolicy(4, 4, 8)), None, limits={"call_s": 3})
    assert str(refused.value) == "the model did not answer act() within 3 s (wall-clock limit)"
    with pytest.raises(Invalid) as refused:
        validate_bytes(
            "policy", "torchscript", scripted(LoopingPolicy(4, 4, 8)), None, limits={"cpu_s": 2, "call_s": 120}
        )
    assert str(refused.value).startswith("the model ran past its CPU time limit (2 s)")


def test_broken_policies_get_a_verdict_naming_the_failed_check():
    cases = [
        (RaisingPolicy(4, 4, 8), "act() raised RuntimeError"),
        (
            TalkativePolicy(4, 4, 8),
            "vocab_version() does not return 'proctor.sts.vocab/1', the mission vocabulary "
            "this platform encodes (docs/kinds/sts-policies.md)",
        ),
        (SixActionPolicy(4, 4, 8), "act() returned shape [8, 6], expected [8, 7] (logits over minigrid's 7 actions)"),
        (NaNPolicy(4, 4, 8), "act() returned NaN"),
        (
            DicePolicy(4, 4, 8),
            "act() answered the same observations differently the second time: a policy must be "
            "deterministic (the platform samples its actions from the probabilities)",
        ),
        (
            BatchNormPolicy(4, 4, 8),
            "act() answered observation 0 differently alone than in a batch of 8: a policy's "
            "answer must not depend on the other observations or on the missions' padding",
        ),
        (
            ActOnly(),
            "missing methods vocab_version(), act(): a policy implements vocab_version(), act() "
            "(docs/kinds/sts-policies.md)",
        ),
    ]
    for model, verdict in cases:
        with pytest.raises(Invalid) as refused:
            validate_bytes("policy", "torchscript", scripted(model), None)
        assert str(refused.value) == verdict
        assert "q7w8e9" not in str(refused.value)
    with pytest.raises(Invalid, match=r"^TorchScript archive: could not load the model: RuntimeError$"):
        validate_bytes("policy", "torchscript", b"PK\x03\x04" + b"\0" * 100, None)

"""The policy an STS agent acts with in continuations (rollout.py's policy interface).

Built-in agents (version "built-in", made by the suites for their owner) are named for their
policy: "expert" (the skyline, BabyAIBot) and "random"; a researcher's own agent of that name
is not one.
Any other agent acts with its newest valid uploaded policy (docs/kinds/sts-policies.md):
a TorchScript archive runs in its sandboxed process, safetensors weights for our built-in
architecture run in this one (validation already ran them sandboxed). torch is imported only
when an uploaded policy is loaded: the web side never imports it.
"""

from __future__ import annotations

import os

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.agents.models import Agent, AgentArtifact
from app.errors import InputError
from app.kinds.sts import rollout
from app.kinds.sts.models import BUILTIN_VERSION

BUILT_IN = {"expert": lambda: rollout.expert_policy, "random": lambda: rollout.random_policy()}
ROLE = "policy"
# Where uploaded policies run: "cpu", "cuda", "cuda:1"...; unset: CUDA when there is one.
DEVICE_ENV = "PROCTOR_STS_DEVICE"


def policy_for_agent(session: Session, agent: Agent):
    """The agent's rollout policy: its newest valid uploaded policy, else the built-in one its
    name gives; InputError (field "agent") when it has neither."""
    if agent.kind != "sts":
        raise InputError(f"agent {agent.name!r} is a {agent.kind} agent, not an STS one", field="agent")
    artifact = newest_valid_policy(session, agent)
    if artifact is not None:
        return uploaded_policy(session, artifact)
    if agent.version == BUILTIN_VERSION and agent.name in BUILT_IN:
        return BUILT_IN[agent.name]()
    latest = session.scalar(
        select(AgentArtifact).where(AgentArtifact.agent_id == agent.id).order_by(AgentArtifact.version.desc()).limit(1)
    )
    why = (
        f"its newest upload, v{latest.version}, is {latest.state}" + (f": {latest.verdict}" if latest.verdict else "")
        if latest is not None
        else "it has no upload"
    )
    raise InputError(
        f"agent {agent.name!r} has no policy to act with: {why}. Upload a policy "
        f"(docs/kinds/sts-policies.md) or use a built-in agent ({', '.join(BUILT_IN)})",
        field="agent",
    )


def newest_valid_policy(session: Session, agent: Agent) -> AgentArtifact | None:
    return session.scalar(
        select(AgentArtifact)
        .where(AgentArtifact.agent_id == agent.id, AgentArtifact.role == ROLE, AgentArtifact.state == "valid")
        .order_by(AgentArtifact.version.desc())
        .limit(1)
    )


def pick_device(device: str | None = None) -> str:
    """The device argument, else $PROCTOR_STS_DEVICE, else CUDA when available, else the CPU."""
    import torch

    device = device or os.environ.get(DEVICE_ENV) or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"device {device!r}: CUDA is not available here", field="device")
    return device


def uploaded_policy(session: Session, artifact: AgentArtifact, device: str | None = None):
    """A validated upload as a rollout policy (workers.sts.policy.TorchPolicy): it takes
    batch_obs and answers action probabilities [B, 7] (the softmax of its logits). A TorchScript
    archive runs in a sandboxed process (on `device` there), safetensors weights in our own
    architecture here, in eval mode without gradients. Call `.close()` when done (it ends the
    sandboxed process; garbage collection does too).

    Only valid artifacts run: anything else raises InputError, as does a blob whose bytes no
    longer match the checksum taken at upload."""
    from workers.artifacts import load_validated
    from workers.sts.loading import LOADER, load_bytes
    from workers.sts.policy import TorchPolicy

    if artifact.role != ROLE:
        raise InputError(
            f"artifact {artifact.id} (agent {artifact.agent_id} v{artifact.version}) is a "
            f"{artifact.role}, not a policy",
            field="agent",
        )
    device = pick_device(device)
    try:
        model = load_validated(artifact, LOADER, load_bytes, device)
    except ValueError as exc:
        raise InputError(str(exc), field="agent") from None
    if artifact.format == "torchscript":
        model.start()
    else:
        model = model.to(device)
    policy = TorchPolicy(model, device="cpu" if artifact.format == "torchscript" else device)
    policy.artifact_id = artifact.id
    return policy


__all__ = ["BUILT_IN", "newest_valid_policy", "pick_device", "policy_for_agent", "uploaded_policy"]

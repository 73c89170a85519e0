"""The policy that acts for an STS agent in a generation run (rollout.py's policy interface)."""

from __future__ import annotations

from app.errors import InputError
from app.kinds.sts import rollout
from app.kinds.sts.models import BUILTIN_VERSION


def policy_for_agent(session, agent):
    """The built-in agents' policies (the expert, a uniform random policy); an agent without
    a valid uploaded policy is refused."""
    if agent.kind == "sts" and agent.version == BUILTIN_VERSION:
        if agent.name == "expert":
            return rollout.expert_policy
        if agent.name == "random":
            return rollout.random_policy()
    raise InputError("this agent has no valid policy uploaded", field="agent")

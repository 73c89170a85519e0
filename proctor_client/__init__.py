"""Proctor's Python client: the JSON API from a script (docs/client.md). Needs only httpx."""

from proctor_client.client import (
    ApiError,
    Client,
    Forbidden,
    InvalidInput,
    JobFailed,
    NotFound,
    ProctorError,
    ServerUnreachable,
    Unauthorized,
    WatchTimeout,
)
from proctor_client.types import (
    Agent,
    Artifact,
    Estimate,
    GenerationRun,
    Job,
    Kind,
    Leaderboard,
    LeaderboardRow,
    Study,
)

__all__ = [
    "Agent",
    "ApiError",
    "Artifact",
    "Client",
    "Estimate",
    "Forbidden",
    "GenerationRun",
    "InvalidInput",
    "Job",
    "JobFailed",
    "Kind",
    "Leaderboard",
    "LeaderboardRow",
    "NotFound",
    "ProctorError",
    "ServerUnreachable",
    "Study",
    "Unauthorized",
    "WatchTimeout",
]

"""What a kind declares about its agent runs (TaskKind.agent_runs): the fields a start takes,
how it checks them and makes its job, and what a run has stored so far. The core does the
rest: the table, ownership, the API (app/runs/api.py), the page section, cancelling."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from app import jobs


@dataclass(frozen=True)
class Param:
    """One field a run's start takes: its type ("int", "float", "ints": 3,4 or [3, 4] in a form,
    "text", "file": an upload, in JSON the file's content), its bounds (inclusive; `above`: a
    float strictly above it), a text's choices, a list's most items (distinct), and for a whole
    number that `counts` another field (a list), its number of items (0 when absent). The core reads a
    form by it (service.from_form), refuses what is outside it (service.checked) and writes the
    API's schema from it (api._schema_of): the schema says exactly what the service takes."""

    type: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    above: float | None = None
    most: int | None = None
    counts: str | None = None


def an_id(type: str = "int", most: int | None = None) -> Param:
    """A row's id (or, "ints", distinct ids): from 1 to the ids' range."""
    from app.params import MAX_ID

    return Param(type, 1, MAX_ID, most=most)


@dataclass
class Started:
    """What a kind's start made, added to the session and flushed, not committed."""

    job: jobs.Job
    agent_id: int | None = None
    artifact_ids: list[int] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)  # as checked, for the run's row
    # The kind's own rows made for the run, (Model, id), deleted with it when the queue cannot
    # be reached (jobs.submit's withdraw).
    withdraw: tuple[tuple[Any, int], ...] = ()


class AgentRuns(ABC):
    """A kind's runs. `start` gets the study (None for a kind's own target) and the fields the
    request set (files as bytes; a missing field is absent: the kind's default)."""

    # What one run is called on pages and in messages ("captioner run").
    noun: ClassVar[str] = "run"
    # The fields a start takes (others are refused); those it cannot start without; groups of
    # which exactly one is given (a model by artifact or a built-in by name).
    fields: ClassVar[dict[str, Param]] = {}
    required: ClassVar[tuple[str, ...]] = ()
    one_of: ClassVar[tuple[tuple[str, ...], ...]] = ()
    # What a run is over, when not a study (its target's keys, e.g. ("suite_id", "version")).
    target_keys: ClassVar[tuple[str, ...]] = ()
    # The runs list on the page (templates/runs/list.html): the kind's columns, (header, key of
    # describe()'s dict), and what its job's progress counts ("pairs").
    columns: ClassVar[tuple[tuple[str, str], ...]] = ()
    unit: ClassVar[str] = "steps"

    @abstractmethod
    def start(self, session: Any, user: Any, study: Any, target: dict[str, Any], params: dict[str, Any]) -> Started:
        """Check everything (InputError or Conflict naming the field) and make the job."""

    @abstractmethod
    def describe(self, session: Any, run: Any, job: jobs.Job | None) -> dict[str, Any]:
        """What the run has stored so far and what it ran, in the kind's words (counts, names)."""

    def may_see(self, session: Any, user: Any, run: Any) -> bool:
        """For a run over the kind's own target: whether the user may see it (its owner and
        admins always may)."""
        return False

    def cancel(self, session: Any, run: Any, job: jobs.Job) -> None:
        """Stop it at its next progress check; what it stored stays."""
        jobs.cancel(session, job)


def usable_artifact(
    session: Any, user: Any, artifact_id: object, kind: str, role: str, noun: str, field: str = "artifact_id"
) -> tuple[Any, Any]:
    """(artifact, agent): a validated model of the caller's (an admin's: anyone's) of `kind`
    in `role` (`noun` names that, "an A3DS captioner"); InputError naming `field` otherwise."""
    from app.agents.models import Agent, AgentArtifact
    from app.errors import Conflict, InputError, Missing
    from app.params import MAX_ID

    if isinstance(artifact_id, bool) or not isinstance(artifact_id, int):
        raise InputError(f"{field} must be an artifact id (an integer)", field=field)
    # Past the ids' range the database would fail on it (a 500), not find nothing.
    art = session.get(AgentArtifact, artifact_id) if 1 <= artifact_id <= MAX_ID else None
    agent = session.get(Agent, art.agent_id) if art else None
    # What the stored rows refuse: 404 when not among the caller's, 409 when not usable so.
    if art is None or agent is None or (user.role != "admin" and agent.owner_id != user.id):
        raise Missing(f"no artifact {artifact_id} among yours", field=field)
    if agent.kind != kind or art.role != role:
        raise Conflict(f"artifact {artifact_id} is a {agent.kind} {art.role}, not {noun}", field=field)
    if art.state != "valid":
        raise Conflict(f"artifact {artifact_id} is {art.state}: only validated artifacts can run", field=field)
    return art, agent

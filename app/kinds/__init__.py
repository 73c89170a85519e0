"""The kind registry: every protocol is a `TaskKind` found through the `proctor.kinds`
entry-point group, the built-in ones included (pyproject.toml), so a lab's own kind is a pip
package away and the core never names one (docs/kinds.md).

`PROCTOR_KINDS=tom,navigation` loads only the named kinds (a comma-separated list).
"""

from __future__ import annotations

import os
import threading
from importlib.metadata import entry_points

from app.kinds.base import ItemSpec, TaskKind

GROUP = "proctor.kinds"

_registry: dict[str, TaskKind] = {}


class KindError(RuntimeError):
    """A kind could not be loaded, or two kinds claim the same name."""


def _discover() -> dict[str, TaskKind]:
    wanted = {n.strip() for n in os.environ.get("PROCTOR_KINDS", "").split(",") if n.strip()}
    found: dict[str, TaskKind] = {}
    origin: dict[str, str] = {}
    for ep in entry_points(group=GROUP):
        if wanted and ep.name not in wanted:
            continue
        if ep.name in found:
            raise KindError(
                f"two packages declare the task kind {ep.name!r}: {origin[ep.name]} and {ep.value}; uninstall one"
            )
        try:
            kind = ep.load()
        except Exception as exc:
            raise KindError(f"task kind {ep.name!r} ({ep.value}) failed to load: {exc}") from exc
        if isinstance(kind, type):
            kind = kind()
        if not isinstance(kind, TaskKind):
            raise KindError(f"entry point {ep.name!r} ({ep.value}) is not a TaskKind")
        if kind.name != ep.name:
            raise KindError(f"entry point {ep.name!r} loads the kind named {kind.name!r}")
        _check_job_queues(kind)
        found[kind.name], origin[kind.name] = kind, ep.value
    if not found:
        raise KindError(
            f"no task kinds found in the entry-point group {GROUP!r}"
            + (
                f" among PROCTOR_KINDS={','.join(sorted(wanted))}"
                if wanted
                else ": install Proctor (pip install -e .) so its kinds are registered"
            )
        )
    missing = wanted - set(found)
    if missing:
        raise KindError(f"PROCTOR_KINDS names kinds that are not installed: {', '.join(sorted(missing))}")
    return dict(sorted(found.items(), key=lambda kv: (kv[1].position, kv[0])))


# The queues a job may wait in (app.jobs says what each is for).
QUEUES = ("models", "exports")


def _check_job_queues(kind: TaskKind) -> None:
    for job, queue in kind.job_queues.items():
        if job not in kind.jobs:
            raise KindError(f"task kind {kind.name!r} names a queue for {job!r}, which is not one of its jobs")
        if queue not in QUEUES:
            raise KindError(
                f"task kind {kind.name!r} puts {job!r} in the queue {queue!r}; the queues are {', '.join(QUEUES)}"
            )


_LOADING = threading.Lock()


def all_kinds() -> dict[str, TaskKind]:
    """Every loaded kind by name, in their `position` order. The first call imports every kind
    (seconds: torch, minigrid); concurrent first calls wait for that one instead of importing
    side by side under Python's module locks."""
    if not _registry:
        with _LOADING:
            if not _registry:
                _registry.update(_discover())
    return _registry


class KindNotInstalled(KeyError):
    """A kind asked for by name (a study's, a job's) that this server does not have: it was
    uninstalled since, or never installed here. Pages of such a study answer 409, not 500."""

    def __init__(self, name: str):
        super().__init__(f"unknown task kind {name!r}")
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])


def get_kind(name: str) -> TaskKind:
    try:
        return all_kinds()[name]
    except KeyError:
        raise KindNotInstalled(name) from None


def default_kind() -> str:
    """The kind forms and the API use when none is given: the first by position."""
    return next(iter(all_kinds()))


def register_kind(kind: TaskKind) -> None:
    """Add a kind for the life of this process (tests; one-off kinds without a package)."""
    kinds = all_kinds()
    _check_job_queues(kind)
    if kind.name in kinds and kinds[kind.name] is not kind:
        raise KindError(f"a task kind named {kind.name!r} is already registered")
    kinds[kind.name] = kind


def unregister_kind(name: str) -> None:
    all_kinds().pop(name, None)


def job_handlers() -> dict[str, str]:
    """Every kind's jobs as "<kind>.<job>" -> "module:function"."""
    return {f"{k.name}.{job}": target for k in all_kinds().values() for job, target in k.jobs.items()}


def job_queues() -> dict[str, str]:
    """Every kind's jobs as "<kind>.<job>" -> the queue it waits in ("models" unless declared)."""
    return {f"{k.name}.{job}": k.job_queues.get(job, "models") for k in all_kinds().values() for job in k.jobs}


__all__ = [
    "GROUP",
    "QUEUES",
    "ItemSpec",
    "KindError",
    "TaskKind",
    "all_kinds",
    "default_kind",
    "get_kind",
    "job_handlers",
    "job_queues",
    "register_kind",
    "unregister_kind",
]

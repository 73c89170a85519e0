"""What every kind's run job (`<kind>.generate`, app/runs) does around its own work: load the
run's validated model on the right device and close a sandboxed one at the end (model_on), and
go through the work in chunks, reporting progress after each and stopping before the next once
the run is cancelled (Chunks). What a chunk computes and stores is the kind's."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from app import jobs

T = TypeVar("T")


def scored_output(kind: Any, agent_id: int, study_id: int, item: Any, response: dict[str, Any]) -> Any:
    """An agent's answer on an item (its id, payload and reference) of the study as its row,
    scored by the kind as a person's answer is."""
    from app.agents.models import AgentOutput

    return AgentOutput(
        agent_id=agent_id,
        study_id=study_id,
        item_id=item.id,
        response=response,
        score=kind.score(item.payload, item.reference, response),
    )


@contextmanager
def model_on(session: Any, artifact: Any, load_artifact: Callable[[Any, Any], Any]) -> Iterator[tuple[Any, str]]:
    """(model in eval mode, device) for the validated artifact, loaded by the kind's loader."""
    import torch

    from workers.sandbox import SandboxedModel

    model = load_artifact(session, artifact)
    sandboxed = isinstance(model, SandboxedModel)
    # A sandboxed archive runs on the CPU; our own architecture on the GPU when there is one.
    device = "cuda" if torch.cuda.is_available() and not sandboxed else "cpu"
    try:
        yield model.to(device).eval(), device
    finally:
        if sandboxed:
            model.close()


class Chunks(Generic[T]):
    """`todo` in chunks of `size`. Before each chunk a cancelled run stops (the log says after
    how many of `total`, in `noun`); after each, `done` grows by the chunk and progress is
    reported: the caller stores and commits the chunk inside the loop, so a worker killed
    mid-run and run again skips what is stored."""

    def __init__(self, todo: Sequence[T], size: int, progress: jobs.Progress, done: int, total: int, noun: str):
        self.todo, self.size, self.progress = todo, size, progress
        self.done, self.total, self.noun = done, total, noun
        self.cancelled = False

    def __iter__(self) -> Iterator[Sequence[T]]:
        for start in range(0, len(self.todo), self.size):
            if self.progress.cancelled():
                self.progress(self.done, None, f"cancelled after {self.done} of {self.total} {self.noun}")
                self.cancelled = True
                return
            part = self.todo[start : start + self.size]
            yield part
            self.done += len(part)
            self.progress(self.done)

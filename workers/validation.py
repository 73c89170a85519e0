"""What every kind's model validation shares: the verdict's exception, calling the model in its
sandbox (`sandboxed_verdict`, `call_checked`) and how a `<kind>.validate` job records its
outcome on the artifact. The kind supplies `validate_bytes(role, format, data, config) ->
verdict` (run in the sandbox; workers/<kind>/validate.py) and the checks of its interface."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from app.agents.models import AgentArtifact
from app.db import utcnow
from app.storage import get_store

VERDICT_CHARS = 2000


class Invalid(Exception):
    """The artifact fails the interface; the message is the verdict."""


def call_checked(model, method: str, *args: Any) -> Any:
    """`model.method(*args)`; what the model raised, or the sandbox's limits, become the failed
    check's verdict in our words."""
    from workers.sandbox import ModelRaised, SandboxError

    try:
        return getattr(model, method)(*args)
    except (ModelRaised, SandboxError) as exc:
        raise Invalid(str(exc)[:500]) from exc


def check_interface(model, interface: tuple[str, ...] | list[str], what: str, doc: str) -> None:
    """The model has every method of its role's interface; Invalid naming the missing ones, and
    what `what` implements (e.g. "a policy"), otherwise."""
    missing = [m for m in interface if not callable(getattr(model, m, None))]
    if missing:
        names = ", ".join(f"{m}()" for m in missing)
        raise Invalid(
            f"missing method{'s' if len(missing) > 1 else ''} {names}: {what} implements "
            f"{', '.join(f'{m}()' for m in interface)} ({doc})"
        )


def checked_words(model, check_vocabulary: Callable[[Any], Any]) -> list[str]:
    """The model's vocabulary(), checked by the kind's rule; Invalid saying what is wrong."""
    words = check_vocabulary(call_checked(model, "vocabulary"))
    if isinstance(words, str):
        raise Invalid(f"vocabulary() {words}")
    return list(words)


def sandboxed_verdict(
    loader: str,
    fmt: str,
    data: bytes,
    config: dict | None,
    limits: dict | None,
    check: Callable[[Any], str],
    name_architecture: bool = True,
) -> str:
    """Load the upload in a sandboxed process and run `check(model) -> verdict` on it (raising
    Invalid at the first failed check). Every format runs sandboxed: safetensors weights that
    pass are known to load and run within the limits, so jobs may run them in-process. With
    `name_architecture`, a safetensors verdict starts with the config's architecture."""
    from workers.sandbox import SandboxedModel, SandboxError

    model = SandboxedModel(loader, fmt, data, config, limits=limits)
    try:
        try:
            model.start()
        except SandboxError as exc:
            what = "TorchScript archive" if fmt == "torchscript" else f"{(config or {}).get('architecture')} weights"
            raise Invalid(f"{what}: {exc}"[:VERDICT_CHARS]) from exc
        verdict = check(model)
        return (
            f"{(config or {}).get('architecture')} {verdict}" if fmt == "safetensors" and name_architecture else verdict
        )
    finally:
        model.close()


def record_validation(session: Session, job, progress, validate_bytes) -> dict:
    """Check the job's artifact with `validate_bytes` and store the verdict: "valid", or
    "invalid" with the failed check (never "pending" forever, whatever the model does)."""
    artifact = session.get(AgentArtifact, job.params["artifact_id"])
    if artifact is None:
        return {"skipped": "the artifact was deleted"}
    try:
        data = get_store().get(artifact.blob_key)
        if hashlib.sha256(data).hexdigest() != artifact.sha256:
            raise Invalid("the stored file does not match the uploaded one (sha256): upload it again")
        verdict, state = validate_bytes(artifact.role, artifact.format, data, artifact.config), "valid"
    except Invalid as exc:
        verdict, state = str(exc), "invalid"
    except Exception as exc:  # the model's own text never becomes the verdict
        verdict, state = f"validation failed: {type(exc).__name__}"[:VERDICT_CHARS], "invalid"
    artifact.state, artifact.verdict, artifact.validated_at = state, verdict[:VERDICT_CHARS], utcnow()
    session.commit()
    progress(1, 1, f"artifact {artifact.id}: {state}: {verdict}")
    return {"artifact": artifact.id, "state": state, "verdict": verdict}


def one_role(
    title: str, role: str, loader: Any, check: Callable[[Any], str]
) -> tuple[Callable[..., str], Callable[[Session, Any, Any], dict]]:
    """A kind whose agents upload one role of model: its validate_bytes (the verdict for a valid
    artifact, raising Invalid otherwise; every format runs sandboxed, so weights that pass are
    known to load and run within the limits and may later run in-process) and its
    run_validation job body."""
    article = "an" if role[:1] in "aeiou" else "a"

    def validate_bytes(given: str, fmt: str, data: bytes, config: dict | None, limits: dict | None = None) -> str:
        if given != role:
            raise Invalid(f"unknown role {given!r}: {title} agents upload {article} {role}")
        return sandboxed_verdict(loader, fmt, data, config, limits, check)

    def run_validation(session: Session, job: Any, progress: Any) -> dict:
        return record_validation(session, job, progress, validate_bytes)

    return validate_bytes, run_validation

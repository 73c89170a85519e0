"""What every kind's model validation shares: the verdict's exception and how a `<kind>.validate`
job records its outcome on the artifact. The kind supplies `validate_bytes(role, format, data,
config) -> verdict` (run in the sandbox; workers/<kind>/validate.py)."""

from __future__ import annotations

import hashlib

from sqlalchemy.orm import Session

from app.agents.models import AgentArtifact
from app.db import utcnow
from app.storage import get_store

VERDICT_CHARS = 2000


class Invalid(Exception):
    """The artifact fails the interface; the message is the verdict."""


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

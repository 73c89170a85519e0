"""What a worker agrees to before the first item: the consent text, the details shown with it,
and the version a worker's agreement is bound to. Apart from app.studies.services so that the
assignment engine reads the version without importing the services (an import cycle)."""

from __future__ import annotations

import hashlib

from app.studies.models import Study

DEFAULT_CONSENT = (
    "By continuing you agree to take part in this research study. Your answers are stored under a pseudonym."
)


def consent_text(study: Study) -> str:
    """The consent text a worker is shown (the default one when the study has none)."""
    return study.consent_text or DEFAULT_CONSENT


NOT_STATED = "not stated by the researcher"


def consent_details(study: Study) -> list[tuple[str, str]]:
    """What a worker should know before agreeing, one line each: whom to contact, how long the
    task takes, what it pays (said plainly when the researcher left one out)."""
    minutes = study.estimated_minutes
    return [
        ("Contact", study.contact or NOT_STATED),
        ("Estimated time", f"about {minutes} minute{'' if minutes == 1 else 's'}" if minutes else NOT_STATED),
        ("Payment", study.payment or NOT_STATED),
    ]


def consent_version(study: Study) -> str:
    """The version of the consent text, as shown: a worker agrees to exactly this text and
    these details (left out of the hash when none is given, so older versions still hold)."""
    shown = consent_text(study)
    if study.contact or study.estimated_minutes or study.payment:
        shown += "".join(f"\n{label}: {value}" for label, value in consent_details(study))
    return hashlib.sha256(shown.encode()).hexdigest()[:16]

"""Prior human annotations: people's answers from an earlier study (another platform, a released
dataset), loaded into a study as the work of external annotators, scored by the same code as
the study's own workers and shown on the same leaderboard, marked as imported.

Each annotator becomes a worker on the platform "imported" (their id scoped to the study and
the upload's source name, stored only as a pseudonym) with one finished bundle holding their
answers. Imported work does not take the crowd's quota (items' active counts are unchanged),
is not counted in the study's progress, and is approved: there is nothing to review here (the
review queue leaves imported annotators out, and their untimed answers out of a study's pace).
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app import audit
from app.auth.models import IMPORTED_PLATFORM, User
from app.db import utcnow
from app.errors import InputError
from app.kinds import get_kind
from app.jsonsafe import unshowable_name
from app.leaderboards.totals import lock_totals
from app.studies.assignment import pseudonym, scored_answer
from app.studies.models import Assignment, Bundle, Item, Participant, Study

IMPORTED = IMPORTED_PLATFORM  # the users' platform of imported annotators
MAX_SOURCE = 64
EXTERNAL_ID_LENGTH = 255  # User.external_id's column


def _external_id(study: Study, source: str, annotator: str) -> str:
    return f"{study.id}:{source}:{annotator}"


def import_annotations(
    session: Session, study: Study, actor: User, data: bytes, source: str = "prior"
) -> dict[str, Any]:
    """Store the upload's annotations (all or nothing); InputError names the line and field.
    An annotator already imported into this study under the same source is refused."""
    source = (source or "").strip() or "prior"
    if len(source) > MAX_SOURCE or ":" in source:
        raise InputError(f"the source is a short name (at most {MAX_SOURCE} characters, no ':')", field="source")
    if char := unshowable_name(source):  # part of each annotator's id (round 16 of issue 26)
        raise InputError(f"the source holds a character that cannot be shown ({char})", field="source")
    kind = get_kind(study.kind)
    items = {
        row.external_id: row
        for row in session.execute(
            select(Item.id, Item.external_id, Item.payload, Item.reference, Item.is_gold).where(
                Item.study_id == study.id
            )
        )
    }
    per_annotator = kind.import_annotations(data, set(items), {e: row.payload for e, row in items.items()})
    per_annotator = {who: answers for who, answers in per_annotator.items() if answers}
    if not per_annotator:
        raise InputError("the upload holds no annotations", field="file")
    ids = {who: _external_id(study, source, who) for who in per_annotator}
    for who, external_id in ids.items():
        # Stored as the user's id (255 characters; round 15 of issue 26: a 200-character id with
        # a 64-character source passed it, and PostgreSQL's refusal was a 500) and shown on the
        # review pages as a worker's id is, so held to what a page shows as itself too.
        if len(external_id) > EXTERNAL_ID_LENGTH:
            room = EXTERNAL_ID_LENGTH - len(_external_id(study, source, ""))
            raise InputError(
                f"annotator ids are at most {room} characters with the source {source!r}", field="annotator"
            )
        if char := unshowable_name(who):
            raise InputError(f"annotator {who!r} holds a character that cannot be shown ({char})", field="annotator")
    taken = session.scalars(
        select(User.external_id).where(User.platform == IMPORTED, User.external_id.in_(list(ids.values())))
    ).all()
    if taken:
        who = next(w for w, e in ids.items() if e in taken)
        raise InputError(
            f"annotator {who!r} of source {source!r} is already imported into this "
            "study: give the upload another source name",
            field="annotator",
        )
    # The totals' locks of every item answered, in item order, before the first answer is
    # written: two imports (or an import and a rejection) sharing items wait for each other
    # instead of deadlocking. Each of these items gets a counted answer below.
    lock_totals(
        session.connection(),
        study.id,
        items={items[ext].id for answers in per_annotator.values() for ext in answers if not items[ext].is_gold},
    )
    now = utcnow()
    stored = 0
    for who, answers in per_annotator.items():
        worker = User(
            role="worker", platform=IMPORTED, external_id=ids[who], pseudonym=pseudonym(IMPORTED, ids[who]), name=""
        )
        session.add(worker)
        session.flush()
        participant = Participant(
            study_id=study.id, worker_id=worker.id, status="approved", reason=f"imported from {source}", reviewed_at=now
        )
        session.add(participant)
        session.flush()
        bundle = Bundle(
            study_id=study.id,
            participant_id=participant.id,
            worker_id=worker.id,
            external_assignment_id=f"{IMPORTED}:{source}",
            size=len(answers),
            n_done=len(answers),
            finished_at=now,
        )
        session.add(bundle)
        session.flush()
        # No exclusion group: that rule is for what this platform hands out.
        leases = [
            Assignment(
                study_id=study.id,
                item_id=items[ext].id,
                worker_id=worker.id,
                bundle_id=bundle.id,
                slot=slot,
                is_gold=items[ext].is_gold,
                state="completed",
                leased_at=now,
                lease_expires_at=now,
                completed_at=now,
            )
            for slot, ext in enumerate(answers)
        ]
        session.add_all(leases)
        session.flush()  # one round trip for the annotator's assignment ids
        for a, (ext, response) in zip(leases, answers.items()):
            key = hashlib.sha256(f"{IMPORTED}:{ids[who]}:{ext}".encode()).hexdigest()
            session.add(scored_answer(kind, a, items[ext], response, 0, {IMPORTED: source}, key))
            stored += 1
    audit.record(
        session,
        actor.id,
        "study.import_annotations",
        "study",
        study.id,
        source=source,
        annotators=len(per_annotator),
        annotations=stored,
    )
    session.commit()
    return {"annotators": len(per_annotator), "annotations": stored, "source": source}

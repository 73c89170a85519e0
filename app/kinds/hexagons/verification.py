"""Verification (the paper's section 3.2; the data README's agreement): every procedure an
instructor wrote in a description study goes to two verifiers, who execute it without seeing
the image. The verification is an ordinary execution study (format procedures): payload the
instructions and a blank board, reference the instructor's aligned boards, two annotations per
item; kind_settings["verification_of"] names the description study. Each step gets the
release's agreement tag (A, V1, V2, VV, F by board exact match) and scores (I-V1, I-V2, V1-V2
board-based F1) from metrics.py once two verifiers answered; verifier 1 is the first to answer.

The description study's kind_settings["verified"] lists the annotations already sent, so a
second verification takes only the procedures written since.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from app import audit
from app.auth.models import User
from app.errors import InputError
from app.kinds.hexagons import metrics
from app.kinds.hexagons.description import BLANK
from app.studies import services
from app.studies.models import Annotation, Item, Study

VERIFIERS = 2
# The release's precision for agreement scores.
SCORE_DECIMALS = 2


def mode(study: Study) -> str:
    return (study.kind_settings or {}).get("mode") or "execution"


def step_agreement(
    reference_boards: Sequence[Sequence[int]], verifier_boards: Sequence[Sequence[Sequence[int]]]
) -> dict[int, dict] | None:
    """{step (1..n): {"tag", "scores": [I-V1, I-V2, V1-V2]}} from the instructor's board after
    each step and each verifier's (the first two verifiers count); None before two answered."""
    if len(verifier_boards) < VERIFIERS:
        return None
    v1, v2 = verifier_boards[0], verifier_boards[1]
    out = {}
    for k, gold in enumerate(reference_boards):
        # A verifier who sent fewer steps left the board as it was (as execution_metrics does).
        a = v1[min(k, len(v1) - 1)] if v1 else BLANK
        b = v2[min(k, len(v2) - 1)] if v2 else BLANK
        out[k + 1] = {"tag": metrics.agreement_tag(gold, a, b), "scores": list(metrics.agreement_scores(gold, a, b))}
    return out


def _verifier_boards(session: Session, study: Study) -> dict[int, list[tuple[int, list[list[int]]]]]:
    """item id -> [(annotation id, boards after each step)] of the valid answers, first first."""
    out: dict[int, list] = {}
    for ann_id, item_id, response in session.execute(
        select(Annotation.id, Annotation.item_id, Annotation.response)
        .where(Annotation.study_id == study.id, Annotation.excluded.is_(False))
        .order_by(Annotation.id)
    ):
        out.setdefault(item_id, []).append((ann_id, [s["board"] for s in response.get("steps", [])]))
    return out


def study_agreement(session: Session, study: Study) -> dict[int, dict[int, dict]]:
    """{item id: {step: {"tag", "scores", "verifiers": [annotation ids]}}} for the items of an
    execution study that two verifiers answered (items still waiting are absent)."""
    answers = _verifier_boards(session, study)
    out: dict[int, dict[int, dict]] = {}
    for item_id, ref in session.execute(select(Item.id, Item.reference).where(Item.study_id == study.id)):
        done = answers.get(item_id, [])
        steps = step_agreement(ref["boards"], [b for _, b in done]) if ref else None
        if steps is not None:
            ids = [a for a, _ in done[:VERIFIERS]]
            out[item_id] = {k: {**v, "verifiers": ids} for k, v in steps.items()}
    return out


# ---- from a description study to its verification ----------------------------------------------


def _procedure_line(ann_id: int, item: Item, response: dict, instructor: str) -> dict:
    """A described procedure as a line of the released JSONL, untagged (tags come from the
    verifiers)."""
    steps = response["steps"]
    ref = item.reference or {}
    return {
        "index": str(ann_id),
        "annotation_round": "description",
        "category": ref.get("category") or "NONE",
        "image_id": item.external_id,
        "instructor_id": instructor,
        "number_of_drawing_steps": len(steps),
        "agreement_tags": "None",
        "agreement_scores": "None",
        "drawing_procedure": [[0, "NONE", list(item.payload.get("initial") or BLANK)]]
        + [[k, s["instruction"], s["board"]] for k, s in enumerate(steps, 1)],
    }


def make_verification_study(session: Session, study: Study, actor: User, title: str = "") -> Study:
    """A draft execution study of the description study's procedures not yet verified, two
    verifiers each, never shown the image; stored with the description study's note of what
    was sent in one commit."""
    if mode(study) != "description":
        raise InputError("only a description study's procedures go to verification", field="study")
    sent = set((study.kind_settings or {}).get("verified") or [])
    rows = session.execute(
        select(Annotation.id, Annotation.response, Item, User.pseudonym, Annotation.worker_id)
        .join(Item, Item.id == Annotation.item_id)
        .join(User, User.id == Annotation.worker_id)
        .where(Annotation.study_id == study.id, Annotation.excluded.is_(False))
        .order_by(Annotation.id)
    ).all()
    lines = [
        _procedure_line(ann_id, item, response, who or "?")
        for ann_id, response, item, who, _ in rows
        if ann_id not in sent
    ]
    # The instructor never verifies their own procedure (Item.author_id).
    authors = {str(ann_id): worker for ann_id, _, _, _, worker in rows if ann_id not in sent}
    if not lines:
        raise InputError("no procedures to verify: none has been written since the last verification", field="study")
    title = (title or "").strip() or f"Verification: {study.title}"[:255]
    if len(title) > 255:  # StudySettings' own refusal is a ValidationError: a 500 on the page
        raise InputError("a title has at most 255 characters", field="title")
    settings = services.StudySettings(
        title=title,
        annotations_per_item=VERIFIERS,
        gold_rate=0.0,
        bundle_size=min(study.bundle_size, len(lines)),
        lease_seconds=study.lease_seconds,
        consent_text=study.consent_text,
        payment=study.payment,
        contact=study.contact,
        estimated_minutes=study.estimated_minutes,
        redirect_url=study.redirect_url,
    )
    # The description study's note rides on create_study's commit: both are stored or neither.
    study.kind_settings = {
        **(study.kind_settings or {}),
        "verified": sorted(sent | {int(line["index"]) for line in lines}),
    }
    audit.record(session, actor.id, "hexagons.verification", "study", study.id, procedures=len(lines))
    data = "\n".join(json.dumps(line) for line in lines).encode()
    return services.create_study(
        session, actor, "hexagons", settings, data, "procedures", {"verification_of": study.id, "authors": authors}
    )


def verifications_of(session: Session, study: Study) -> list[Study]:
    """The verification studies made from a description study."""
    return [
        s
        for s in session.scalars(select(Study).where(Study.kind == study.kind).order_by(Study.id))
        if (s.kind_settings or {}).get("verification_of") == study.id
    ]


# ---- a verification study's results --------------------------------------------------------------


def report(session: Session, study: Study) -> dict:
    """Per procedure and step: the instruction, and the tag and scores once two verifiers
    answered; tag counts over the tagged steps."""
    agreement = study_agreement(session, study)
    answered = {i: len(v) for i, v in _verifier_boards(session, study).items()}
    procedures, counts = [], {t: 0 for t in ("A", "V1", "V2", "VV", "F")}
    for item in session.scalars(select(Item).where(Item.study_id == study.id).order_by(Item.id)):
        steps = agreement.get(item.id)
        rows = []
        for k, text in enumerate(item.payload["instructions"], 1):
            a = steps[k] if steps else None
            if a:
                counts[a["tag"]] += 1
            rows.append(
                {"step": k, "instruction": text, "tag": a["tag"] if a else None, "scores": a["scores"] if a else None}
            )
        procedures.append(
            {
                "item": item.id,
                "index": item.external_id,
                "image_id": (item.reference or {}).get("image_id"),
                "verifiers": min(answered.get(item.id, 0), VERIFIERS),
                "steps": rows,
            }
        )
    tagged = sum(counts.values())
    agreed = sum(counts[t] for t in ("A", "V1", "V2"))
    return {
        "study": study.id,
        "verification_of": (study.kind_settings or {}).get("verification_of"),
        "procedures": procedures,
        "tags": counts,
        "tagged_steps": tagged,
        "agreed_steps": agreed,
        "complete": sum(1 for p in procedures if p["verifiers"] >= VERIFIERS),
    }


def export_jsonl(session: Session, study: Study) -> bytes:
    """The study's procedures in the released JSONL (the data README's fields), with the
    agreement tags and scores (two decimals, as released) where two verifiers answered, else
    "None" as the release writes untagged procedures."""
    agreement = study_agreement(session, study)
    out = []
    for item in session.scalars(select(Item).where(Item.study_id == study.id).order_by(Item.id)):
        ref = item.reference or {}
        steps = agreement.get(item.id)
        boards = ref.get("boards") or []
        out.append(
            json.dumps(
                {
                    "index": item.external_id,
                    "annotation_round": ref.get("annotation_round", ""),
                    "category": ref.get("category") or "NONE",
                    "image_id": ref.get("image_id", ""),
                    "instructor_id": ref.get("instructor_id", ""),
                    "number_of_drawing_steps": len(boards),
                    "agreement_tags": [steps[k]["tag"] for k in sorted(steps)] if steps else "None",
                    "agreement_scores": (
                        [[round(x, SCORE_DECIMALS) for x in steps[k]["scores"]] for k in sorted(steps)]
                        if steps
                        else "None"
                    ),
                    "drawing_procedure": [[0, "NONE", ref.get("initial") or list(BLANK)]]
                    + [
                        [k, text, board] for k, (text, board) in enumerate(zip(item.payload["instructions"], boards), 1)
                    ],
                }
            )
        )
    return ("\n".join(out) + "\n").encode() if out else b""


def study_context(session: Session, study: Study) -> dict:
    """The study page's Hexagons section (templates/description_study.html)."""
    settings = study.kind_settings or {}
    ctx: dict = {"hex_mode": mode(study)}
    if ctx["hex_mode"] == "description":
        written = session.scalars(
            select(Annotation.id).where(Annotation.study_id == study.id, Annotation.excluded.is_(False))
        ).all()
        sent = set(settings.get("verified") or [])
        ctx.update(
            hex_verifications=verifications_of(session, study),
            hex_written=len(written),
            hex_unverified=sum(1 for a in written if a not in sent),
        )
    elif settings.get("verification_of"):
        ctx.update(
            hex_verification_of=session.get(Study, settings["verification_of"]), hex_report=report(session, study)
        )
    return ctx

"""Creating studies from uploads, changing their state, importing agent outputs."""

from __future__ import annotations

import random
import re
import secrets
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator
from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session

from app import audit, crowd, jsonsafe
from app.agents.models import Agent, AgentOutput
from app.auth.models import User
from app.crowd.prolific import link_code
from app.db import utcnow
from app.errors import Conflict, InputError
from app.kinds import all_kinds, get_kind
from app.params import Whole
from app.studies import comprehension
from app.studies.comprehension import CheckIn
from app.kinds.base import ImportResult, TaskKind
from app.studies.models import Item, Study

# Closing deletes nothing (it only stops new tasks and answers), so a closed study may be
# reopened: its annotations, workers and leases are as they were.
TRANSITIONS = {"draft": {"live"}, "live": {"paused", "closed"}, "paused": {"live", "closed"}, "closed": {"live"}}


class StudySettings(BaseModel):
    title: str = Field(min_length=1, max_length=255)
    annotations_per_item: int = Field(3, ge=1, le=100)
    bundle_size: int = Field(10, ge=1, le=500)
    gold_rate: float = Field(0.1, ge=0.0, le=0.9)
    lease_seconds: int = Field(900, ge=30, le=7 * 24 * 3600)
    completion_code: str = Field("", max_length=64)
    # The schema says what _http_only checks (it words the refusal): empty, or http(s)://.
    redirect_url: str = Field("", max_length=1000, json_schema_extra={"pattern": r"^(https?://|$)"})
    consent_text: str = ""
    instructions: str = ""
    payment: str = Field("", max_length=100)
    # Who workers may write to, and how long a task takes: shown with the consent text.
    contact: str = Field("", max_length=255)
    estimated_minutes: int | None = Field(None, ge=1, le=24 * 60)
    # How many bundles one platform worker id may do in this study (a researcher raises it
    # for repeat work), and how many may be open at once from one network address.
    max_bundles_per_worker: int = Field(1, ge=1, le=10000)
    max_open_bundles_per_ip: int = Field(100, ge=1, le=100000)
    # Adaptive allocation (app/leaderboards/adaptive.py): off by default; the floor is the
    # annotations every item gets before any item gets more. Strict, as in StudyEdit: JSON's
    # "false" or 0 is not a yes or no, and true is not the number 1.
    adaptive: bool = Field(False, strict=True)
    adaptive_floor: Whole = Field(1, ge=1, le=100)  # 2.0 is JSON Schema's integer; "2" and true are not
    # A comprehension check before the first item (app/studies/comprehension.py); none if left out.
    comprehension: CheckIn | None = None

    @field_validator("redirect_url")
    @classmethod
    def _http_only(cls, v: str) -> str:
        if v and not re.match(r"^https?://", v):
            raise ValueError("must start with http:// or https://")
        return v


def study_code(settings: StudySettings) -> str:
    """The study's completion code: the one given, else the Prolific link's `cc`, else a random
    one. A link whose `cc` differs from the code given is refused: a worker who follows it
    would report a code the study never showed, and might go unpaid."""
    given, in_link = settings.completion_code.strip(), link_code(settings.redirect_url)  # Prolific's `cc`
    if given and in_link and given != in_link:
        raise InputError(
            f"the Prolific link's completion code (cc={in_link}) differs from the "
            f"completion code ({given}): give one code",
            field="redirect_url",
        )
    return given or in_link or secrets.token_hex(4).upper()


def code_earned(bundle: Any) -> bool:
    """Whether the bundle's required items are done, so that its completion code may be shown:
    every slot answered, its gold slots included. A bundle that ended early (the study had no
    more items for this worker) shows no code, whatever it holds."""
    return bool(bundle.n_done >= bundle.size)


def completion_code(study: Study, bundle: Any, platform: str | None) -> str:
    """The code a worker is shown and reports: the study's, or one of the bundle's own where
    the worker's platform wants that (app/crowd: MTurk)."""
    return crowd.platform(platform).completion_code(study.completion_code, bundle.id)


def parse_settings(data: dict[str, Any]) -> StudySettings:
    try:
        return StudySettings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(err["msg"], field=".".join(str(p) for p in err["loc"])) from None


def _slug(title: str) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40] or "study"
    return f"{base}-{secrets.token_hex(3)}"


def preview_items(kind_name: str, data: bytes, fmt: str, options: dict[str, Any] | None = None) -> ImportResult:
    return get_kind(kind_name).import_items(data, fmt, options or {})


def with_defaults(settings: StudySettings, defaults: dict[str, Any]) -> dict[str, Any]:
    """The study's settings: the researcher's, and the upload's suggestions where they left a
    field blank (navigation with a QC episode: bundles of 6, one QC slot in each)."""
    values = settings.model_dump(exclude={"completion_code"})
    given = settings.model_fields_set
    for key, value in defaults.items():
        if key in values and key not in given:
            values[key] = value
    per_bundle = defaults.get("gold_per_bundle")
    if per_bundle is not None and "gold_rate" not in given:
        # The engine gives a bundle round(size * gold_rate) gold slots.
        values["gold_rate"] = min(0.9, per_bundle / values["bundle_size"])
    return values


def fill_warning(items: Sequence[Any], values: dict[str, Any]) -> str | None:
    """What the researcher should know when tasks of `bundle_size` cannot all be completed with
    these items (ItemSpecs, or rows with is_gold and exclusion_group) and settings (a dict of
    the study's values); None when every task can be. A worker answers an item once and one item
    of an exclusion group, and gold is shared, so a task of size S with G gold slots needs S - G
    different plain items (groups counted once), and the plain items give items x annotations
    per item answers in all: tasks of S - G plain answers each, the rest a task that ends short
    and shows no completion code."""
    size = int(values.get("bundle_size") or 10)
    per_item = int(values.get("annotations_per_item") or 3)
    plain = [i for i in items if not i.is_gold]
    groups = {i.exclusion_group for i in plain if i.exclusion_group}
    distinct = sum(1 for i in plain if not i.exclusion_group) + len(groups)
    gold = len({i.exclusion_group or id(i) for i in items if i.is_gold})
    n_gold = min(round(size * float(values.get("gold_rate") or 0.0)), gold)
    need = size - n_gold
    if need <= 0:
        return None
    if distinct < need:
        one = "one item of each exclusion group, " if groups else ""
        return (
            f"No task can be completed: a task of {size} needs {_count(need, 'different plain item')} "
            f"(a worker answers each item once, {one}and {_count(n_gold, 'slot')} "
            f"{'is' if n_gold == 1 else 'are'} gold), and there {'is' if distinct == 1 else 'are'} "
            f"{distinct}. Every worker's task would end short, with no completion code: "
            f"make tasks of at most {distinct + n_gold} or add items."
        )
    answers = len(plain) * per_item
    whole, left = divmod(answers, need)
    if left:
        last = "the last answer goes" if left == 1 else f"the last {left} go"
        return (
            f"{_count(len(plain), 'plain item')} x {_count(per_item, 'annotation')} per item = "
            f"{_count(answers, 'answer')} make{'s' if answers == 1 else ''} "
            f"{_count(whole, 'complete task')} of {_count(need, 'plain answer')}; "
            f"{last} to a task that cannot be completed (it ends short, with no "
            f"completion code). Tasks of a size whose plain answers divide {answers} avoid it."
        )
    return None


def _count(n: int, noun: str) -> str:
    """n and the noun, plural unless n is 1: "1 annotation", "3 annotations"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def study_fill_warning(session: Session, study: Study) -> str | None:
    """fill_warning for a stored study, from its items and settings."""
    rows = session.execute(select(Item.is_gold, Item.exclusion_group).where(Item.study_id == study.id)).all()
    return fill_warning(
        rows,
        {
            "bundle_size": study.bundle_size,
            "gold_rate": study.gold_rate,
            "annotations_per_item": study.annotations_per_item,
        },
    )


def create_study(
    session: Session,
    owner: User,
    kind_name: str,
    settings: StudySettings,
    data: bytes,
    fmt: str,
    options: dict[str, Any] | None = None,
) -> Study:
    """Parse first, then store everything in one transaction: all items or none."""
    kind = get_kind(kind_name)
    check = settings.comprehension
    questions = comprehension.resolve(kind.name, check.mode, check.questions) if check else None
    result = kind.import_items(data, fmt, options or {})
    if not result.items:
        raise InputError("the upload holds no items", field="file")
    _check_finite(result.items)
    values = with_defaults(settings, result.study_defaults)
    values["comprehension"] = questions
    check_adaptive(
        kind,
        values["adaptive"],
        values["adaptive_floor"],
        values["annotations_per_item"],
        result.kind_settings,
        creating=True,
    )
    if not values.get("instructions", "").strip():
        values["instructions"] = kind.default_instructions  # what the form offers when left blank
    study = Study(
        kind=kind.name,
        owner_id=owner.id,
        slug=_slug(settings.title),
        **values,
        completion_code=study_code(settings),
        kind_settings=result.kind_settings,
        answer_field=kind.agreement_value(),
    )
    session.add(study)
    session.flush()
    rows = _insert_items(session, study, result.items, random.Random(study.id))
    audit.record(
        session,
        owner.id,
        "study.create",
        "study",
        study.id,
        items=len(rows),
        kind=kind.name,
        comprehension=len(questions or []),
    )
    session.commit()
    return study


def add_items(session: Session, study: Study, specs: list[Any]) -> int:
    """Add items (ItemSpecs) to a draft study, skipping external ids it already has (so a
    retried job adds nothing twice). Flushes; the caller commits. Returns how many were added."""
    if study.state != "draft":
        raise InputError(f"items can only be added to a draft study; this one is {study.state}", field="study")
    _check_finite(specs)
    have = set(session.scalars(select(Item.external_id).where(Item.study_id == study.id)))
    rows = _insert_items(
        session, study, [s for s in specs if s.external_id not in have], random.Random(f"{study.id}:{len(have)}")
    )
    return len(rows)


# The item's text columns with a length (PostgreSQL refuses a longer value: a 500 after the
# importer passed it; SQLite stores it). Checked here for every kind, whatever its importer does.
_ITEM_TEXT = {
    c.name: length for c in Item.__table__.columns if isinstance(length := getattr(c.type, "length", None), int)
}


def _check_finite(specs: list[Any]) -> None:
    """A NaN or infinity anywhere in an item's payload or reference, a text past its column
    (an id, a category), or U+0000 or a lone surrogate in its text (a generated item's words come
    from a model) is refused, naming the item, before anything is stored: JSON has no NaN, and
    PostgreSQL would fail the whole insert."""
    for spec in specs:
        for name, length in _ITEM_TEXT.items():
            value = getattr(spec, name, None)
            if isinstance(value, str) and len(value) > length:
                item = spec.external_id if name != "external_id" else spec.external_id[:40] + "..."
                raise InputError(
                    f"item {item!r}: {name} has {len(value)} characters, over the {length} it may have", field=name
                )
        for name in ("payload", "reference"):
            if (where := jsonsafe.non_finite(getattr(spec, name), name)) is not None:
                raise InputError(f"item {spec.external_id!r}: {where} is not a finite number", field=where)
            if (where := jsonsafe.unstorable_text(getattr(spec, name), name)) is not None:
                raise InputError(
                    f"item {spec.external_id!r}: {where} holds U+0000 or a lone surrogate, which cannot be stored",
                    field=where,
                )


def _insert_items(session: Session, study: Study, specs: list[Any], rng: random.Random) -> list[dict[str, Any]]:
    """Insert the items (ItemSpecs) at random positions, 5,000 rows a statement."""
    rows = [
        dict(
            study_id=study.id,
            external_id=s.external_id,
            payload=s.payload,
            reference=s.reference,
            is_gold=s.is_gold,
            source=s.source,
            category=s.category,
            cluster=s.cluster,
            exclusion_group=s.exclusion_group,
            author_id=s.author_id,
            position=rng.random(),
            n_active=0,
        )
        for s in specs
    ]
    for start in range(0, len(rows), 5000):
        session.execute(insert(Item), rows[start : start + 5000])
    return rows


def set_state(session: Session, study: Study, state: str, actor: User) -> Study:
    if state not in TRANSITIONS.get(study.state, set()):
        raise InputError(f"a {study.state} study cannot become {state}", field="state")
    audit.record(session, actor.id, f"study.{state}", "study", study.id, previous=study.state)
    study.state = state
    session.commit()
    return study


# The narrowest target width a plan takes: ±0.0005 already needs 3.8 million people alone; a
# narrower one would overflow the power analysis rather than say anything.
MIN_SAMPLE_WIDTH = 0.001


def plan_people_sample(session: Session, study: Study, width: float, agreement: float) -> dict[str, Any]:
    """How many of the study's non-gold items people must judge for a PPI++ 95% interval about
    `width` wide (high - low, on a 0-1 scale) beside an automatic judge agreeing with people on
    `agreement` of the items (stats.ppi_people_for_agreement's power analysis): its answer with
    the width and agreement it was made for."""
    from app.leaderboards import stats

    if not (MIN_SAMPLE_WIDTH <= width <= 1):
        raise InputError(f"width is the interval's width on a 0-1 scale: from {MIN_SAMPLE_WIDTH:g} to 1", field="width")
    if not (0 <= agreement <= 1):
        raise InputError("agreement is the share of items the judge agrees with people on, 0 to 1", field="agreement")
    items = session.scalar(
        select(func.count()).select_from(Item).where(Item.study_id == study.id, Item.is_gold.is_(False))
    )
    if not items:
        raise InputError("the study has no items to sample (gold items are always people's)", field="width")
    plan = stats.ppi_people_for_agreement(int(items), width / 2, agreement)
    return {
        "width": width,
        "agreement": agreement,
        "people": plan["people"],
        "people_alone": plan["people_alone"],
        "expected_width": round(2 * plan["expected_half_width"], 4),
        "reachable": plan["reachable"],
    }


def set_people_sample(
    session: Session,
    study: Study,
    n: int | None,
    actor: User,
    seed: int | None = None,
    plan: dict[str, Any] | None = None,
) -> Study:
    """People judge `n` of the study's (non-gold) items, drawn at random, and an automatic judge
    the rest; None: people judge every item again. Items people have begun (leased or
    answered) stay theirs and count among the n; the others are drawn uniformly with `seed`
    (made here when not given), so the items people judge are a random sample of those they
    had not begun, which is what keeps a prediction-powered estimate unbiased. Gold items are
    always for people. The draw is kept in `study.people_sample` and the audit log, with the
    `plan` (plan_people_sample's) n came from, if any: then n is its people, or the items
    people have begun where those are more."""
    from app.studies.models import Annotation

    non_gold = (Item.study_id == study.id, Item.is_gold.is_(False))
    begun_q = (Item.n_active > 0) | Item.id.in_(select(Annotation.item_id).where(Annotation.study_id == study.id))
    if plan is not None:
        n = plan["people"]
    if n is None:
        session.execute(update(Item).where(*non_gold).values(for_people=True))
        record = None
    else:
        ids = list(session.scalars(select(Item.id).where(*non_gold).order_by(Item.id)))
        begun = set(session.scalars(select(Item.id).where(*non_gold, begun_q)))
        if plan is not None:
            n = max(plan["people"], len(begun))  # begun items stay people's: more only narrows
        if n < 1 or n > len(ids):
            raise InputError(f"n is a number of items from 1 to {len(ids)} (the study's non-gold items)", field="n")
        if n < len(begun):
            raise InputError(f"people have already begun {len(begun)} items, so n is at least {len(begun)}", field="n")
        seed = secrets.randbelow(2**31) if seed is None else seed
        drawn = random.Random(seed).sample([i for i in ids if i not in begun], n - len(begun))
        # One statement: an item leased while this runs keeps its people (n_active > 0 is read
        # again on the row's latest version).
        session.execute(update(Item).where(*non_gold).values(for_people=Item.id.in_(drawn) | begun_q))
        # Counted after: an item leased meanwhile stayed with people on top of the n.
        kept = session.scalar(select(func.count()).select_from(Item).where(*non_gold, Item.for_people.is_(True))) or 0
        record = {"n": kept, "of": len(ids), "begun": kept - len(drawn), "seed": seed, "at": utcnow().isoformat()}
        if plan is not None:
            record["plan"] = plan
    audit.record(session, actor.id, "study.people_sample", "study", study.id, **(record or {"n": "all"}))
    study.people_sample = record
    session.commit()
    return study


def adaptive_offered(kind: TaskKind, settings: dict[str, Any] | None = None) -> bool:
    """Whether a study of the kind with these kind_settings ranks agents by people's
    judgements: what adaptive allocation reads (TaskKind.adaptive_for)."""
    return kind.adaptive_for(settings)


def check_adaptive(
    kind: TaskKind,
    adaptive: bool,
    floor: int,
    per_item: int,
    settings: dict[str, Any] | None = None,
    *,
    creating: bool = False,
) -> None:
    """Adaptive allocation needs a kind that ranks agents by people's judgements, and a floor
    no higher than the annotations per item."""
    if adaptive and not adaptive_offered(kind, settings):
        message = (
            f"adaptive allocation needs a kind whose items are agents' outputs ranked by people's "
            f"judgements; this {kind.name} study ranks none"
        )
        # At creation the request alone asks for both (422); on an existing study its kind (or
        # its mode: an STS play study) decides, not the request: a conflict.
        if creating:
            raise InputError(message, field="adaptive")
        raise Conflict(message, field="adaptive")
    if floor > per_item:
        raise InputError(
            f"the floor of annotations per item ({floor}) is more than the study's annotations per item ({per_item})",
            field="adaptive_floor",
        )


class StudyEdit(BaseModel):
    """What a researcher may change on a study after creating it, live or not: the texts shown
    to workers (a changed consent text must be agreed to again: see assignment.consent) and the
    caps on one crowd member."""

    consent_text: str | None = None
    instructions: str | None = None
    contact: str | None = Field(None, max_length=255)
    estimated_minutes: int | None = Field(None, ge=1, le=24 * 60)
    payment: str | None = Field(None, max_length=100)
    max_bundles_per_worker: int | None = Field(None, ge=1, le=10000)
    max_open_bundles_per_ip: int | None = Field(None, ge=1, le=100000)
    # Adaptive allocation on or off, and its floor (app/leaderboards/adaptive.py).
    # strict: JSON's 0 and 1 are not false and true here
    adaptive: bool | None = Field(None, strict=True)
    adaptive_floor: Whole | None = Field(None, ge=1, le=100)
    # The comprehension check (app/studies/comprehension.py), as the study page's card sets it.
    comprehension: CheckIn | None = None


def edit_study(session: Session, study: Study, edit: StudyEdit, actor: User) -> Study:
    changes = edit.model_dump(exclude_unset=True, exclude_none=True)
    check = edit.comprehension if changes.pop("comprehension", None) else None
    questions = comprehension.resolve(study.kind, check.mode, check.questions) if check else None
    check_adaptive(
        get_kind(study.kind),
        changes.get("adaptive", study.adaptive),
        changes.get("adaptive_floor", study.adaptive_floor),
        study.annotations_per_item,
        study.kind_settings,
    )
    # The log says what changed: numbers as set, texts by their length.
    audit.record(
        session,
        actor.id,
        "study.edit",
        "study",
        study.id,
        **{k: v if isinstance(v, int) else f"{len(v)} characters" for k, v in changes.items()},
    )
    for key, value in changes.items():
        setattr(study, key, value)
    if check:
        comprehension.apply(session, study, questions)
        audit.record(session, actor.id, "study.comprehension", "study", study.id, questions=len(questions or []))
    session.commit()
    return study


def can_manage(user: User, study: Study) -> bool:
    return user.role == "admin" or study.owner_id == user.id


def register_agent(
    session: Session, owner: User, kind_name: str, name: str, version: str = "1", description: str = ""
) -> Agent:
    if kind_name not in all_kinds():
        raise InputError(f"unknown task kind {kind_name!r}", field="kind")
    # Stripped before the lookup too: " x" and "x" are one agent (else a second insert, a 500).
    name, version = name.strip(), version.strip()
    if not name:
        raise InputError("an agent needs a name", field="name")
    if len(name) > 255:
        raise InputError("an agent's name has at most 255 characters", field="name")
    if not version or len(version) > 64:
        raise InputError("an agent's version has 1 to 64 characters", field="version")
    agent = session.scalar(
        select(Agent).where(Agent.owner_id == owner.id, Agent.name == name, Agent.version == version)
    )
    if agent is None:
        agent = Agent(owner_id=owner.id, kind=kind_name, name=name, version=version, description=description)
        session.add(agent)
        session.flush()
    return agent


def import_agent_outputs(session: Session, study: Study, agent: Agent, data: bytes) -> int:
    """Replace the agent's outputs on this study with the upload (all or nothing)."""
    kind = get_kind(study.kind)
    if agent.kind != study.kind:
        raise Conflict(f"agent is for {agent.kind}, study is {study.kind}", field="agent")  # the stored rows: 409
    items = {
        ext: (iid, payload, ref)
        for iid, ext, payload, ref in session.execute(
            select(Item.id, Item.external_id, Item.payload, Item.reference).where(Item.study_id == study.id)
        )
    }
    outputs = kind.import_agent_outputs(data, set(items), payloads={ext: v[1] for ext, v in items.items()})
    if not outputs:
        raise InputError("the upload holds no outputs", field="file")
    for ext, response in outputs.items():  # as for items (_check_finite): before anything goes
        if (where := jsonsafe.non_finite(response, "output")) is not None:
            raise InputError(f"the output for item {ext!r}: {where} is not a finite number", field=where)
        if (where := jsonsafe.unstorable_text(response, "output")) is not None:
            raise InputError(
                f"the output for item {ext!r}: {where} holds U+0000 or a lone surrogate, which cannot be stored",
                field=where,
            )
    session.query(AgentOutput).filter_by(agent_id=agent.id, study_id=study.id).delete()
    rows = []
    for ext, response in outputs.items():
        iid, payload, ref = items[ext]
        rows.append(
            dict(
                agent_id=agent.id,
                study_id=study.id,
                item_id=iid,
                response=response,
                score=kind.score(payload, ref, response),
            )
        )
    for start in range(0, len(rows), 5000):
        session.execute(insert(AgentOutput), rows[start : start + 5000])
    audit.record(session, agent.owner_id, "agent.import_outputs", "agent", agent.id, study=study.id, outputs=len(rows))
    session.commit()
    return len(rows)


def release_browser(session: Session, study: Study, external_worker_id: str, actor: User) -> int:
    """Unbind a worker's tasks in this study from the browser they consented in (a lost phone,
    cleared cookies: the refusal elsewhere tells them to ask): the next browser that opens the
    study's link with their id continues them; the browser that held them is refused until then
    (assignment.RELEASED). Audited; 0 when no task of theirs is bound."""
    from app.studies.models import RELEASED, Bundle

    workers = select(User.id).where(User.external_id == external_worker_id.strip(), User.role == "worker")
    bundles = session.scalars(
        select(Bundle)
        .where(
            Bundle.study_id == study.id,
            Bundle.worker_id.in_(workers),
            Bundle.browser_hash.is_not(None),
            Bundle.browser_hash != RELEASED,
        )
        .order_by(Bundle.id)
        .with_for_update()
    ).all()
    for bundle in bundles:
        bundle.browser_hash = RELEASED
    if bundles:
        pseudonyms = session.scalars(
            select(User.pseudonym).where(User.id.in_({b.worker_id for b in bundles})).order_by(User.pseudonym)
        ).all()
        audit.record(
            session,
            actor.id,
            "worker.browser_released",
            "study",
            study.id,
            workers=list(pseudonyms),
            bundles=[b.id for b in bundles],
        )
    session.commit()
    return len(bundles)

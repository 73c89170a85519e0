"""Demo data: accounts and a live study per kind, from each kind's demo() (its items, or a
function that builds the study in the researcher's account; optionally agents and simulated
annotators working through the real assignment engine)."""

from __future__ import annotations

import math
import random
import secrets
from datetime import timedelta
from typing import Any, Callable

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.auth.models import User
from app.auth.security import hash_password
from app.kinds import all_kinds
from app.studies import assignment, services
from app.studies.models import Assignment, Item, Study

# A simulated worker's time on an item: log-normal around a kind's typical time (response
# times are right-skewed; sigma 0.5 puts the middle 80% within about 0.5x to 1.9x the median).
TIME_SPREAD = 0.5

RESEARCHER = "researcher@example.org"
ADMIN = "admin@example.org"
# Where a demo study sends a worker who is done: Prolific's completion page, with a made-up code.
DEMO_REDIRECT = "https://app.prolific.com/submissions/complete?cc=DEMO"


def ensure_user(session: Session, email: str, role: str, password: str) -> User:
    user = session.scalar(select(User).where(User.email == email))
    if user is None:
        user = User(email=email, role=role, name=email.split("@")[0])
        session.add(user)
    user.role, user.password_hash = role, hash_password(password)
    session.commit()
    return user


def demo_settings(title: str, **fields: Any) -> services.StudySettings:
    """A demo study's settings: its title and `fields` (StudySettings'), sending workers who are
    done to DEMO_REDIRECT unless `fields` says otherwise."""
    return services.StudySettings(**{"title": title, "redirect_url": DEMO_REDIRECT, **fields})


def seconds_on_item(rng: random.Random, median_s: float, spread: float = TIME_SPREAD) -> float:
    """A time drawn from a log-normal with this median (a careful worker's, or a clicker's)."""
    return rng.lognormvariate(math.log(median_s), spread)


def simulate_task(
    session: Session,
    study: Study,
    worker: str,
    answer: Callable[[Item, random.Random], dict],
    median_s: float,
    seed: int,
    platform: str = "prolific",
) -> int:
    """One simulated worker's task through the real assignment engine: `answer(item, rng)` is
    their response to each item they are given, and each takes them a time drawn around
    `median_s`. The server measures time on an item from its lease, so the lease is dated back
    by that time before the answer goes in (the demo's workers answer in microseconds, and the
    review queue's pace signals would mean nothing). Returns the number of answers."""
    rng = random.Random(seed)
    bundle = assignment.enter(session, study, platform, worker, f"demo-{worker}", "demo")
    n = 0
    while (a := assignment.next_item(session, study, bundle.id)) is not None:
        if n >= bundle.size:  # the engine must end a bundle at its size; never loop on it
            raise RuntimeError(f"bundle {bundle.id} leased more than its {bundle.size} items")
        # Held until the answer is in: submit reads the same item, from the session's identity
        # map while something holds it (otherwise a second SELECT of the item per answer).
        item = session.get(Item, a.item_id)
        response: Any = answer(item, rng)
        took = timedelta(seconds=seconds_on_item(rng, median_s))
        # Committed before the submit: a retry inside submit would otherwise roll it back, and
        # the engine's statements may run on a connection of their own.
        session.execute(update(Assignment).where(Assignment.id == a.id).values(leased_at=a.leased_at - took))
        session.commit()
        assignment.submit(session, study, bundle.id, a.id, response, secrets.token_hex(8))
        n += 1
    return n


def seed(session: Session) -> dict:
    """Idempotent: passwords are reset and printed; each demo study is made once. The studies
    returned are every demo study of the researcher's, those a kind's demo adds beside its own
    (e.g. Hexagons's description study) too, in the order they were made."""
    r_pass, a_pass = secrets.token_urlsafe(9), secrets.token_urlsafe(9)
    researcher = ensure_user(session, RESEARCHER, "researcher", r_pass)
    ensure_user(session, ADMIN, "admin", a_pass)
    for kind in all_kinds().values():
        title = f"Demo: {kind.title}"
        study = session.scalar(select(Study).where(Study.title == title))
        if study is None:
            material = kind.demo()
            if not material:
                continue
            if material.get("setup"):
                material["setup"](session)  # e.g. the buildings a navigation study walks through
            settings = demo_settings(
                title,
                **{"annotations_per_item": 3, "bundle_size": 10, "gold_rate": 0.2, **material.get("settings", {})},
            )
            if material.get("build"):  # the kind makes its study through its own services
                study = material["build"](session, researcher, settings)
            else:
                study = services.create_study(
                    session, researcher, kind.name, settings, material["items"], material["format"]
                )
            services.set_state(session, study, "live", researcher)
            if material.get("simulate"):
                material["simulate"](session, study, researcher)  # agents, simulated workers
    studies = session.scalars(
        select(Study)
        .where(Study.owner_id == researcher.id, Study.title.startswith("Demo: "), Study.kind.in_(list(all_kinds())))
        .order_by(Study.id)
    ).all()
    return {"researcher": (RESEARCHER, r_pass), "admin": (ADMIN, a_pass), "studies": studies}

"""Demo data: accounts and a live study per kind, from each kind's demo() (its items, or a
function that builds the study in the researcher's account; optionally agents and simulated
annotators working through the real assignment engine)."""

from __future__ import annotations

import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.models import User
from app.auth.security import hash_password
from app.kinds import all_kinds
from app.studies import services
from app.studies.models import Study

RESEARCHER = "researcher@example.org"
ADMIN = "admin@example.org"


def ensure_user(session: Session, email: str, role: str, password: str) -> User:
    user = session.scalar(select(User).where(User.email == email))
    if user is None:
        user = User(email=email, role=role, name=email.split("@")[0])
        session.add(user)
    user.role, user.password_hash = role, hash_password(password)
    session.commit()
    return user


def seed(session: Session) -> dict:
    """Idempotent: passwords are reset and printed; the demo study is made once."""
    r_pass, a_pass = secrets.token_urlsafe(9), secrets.token_urlsafe(9)
    researcher = ensure_user(session, RESEARCHER, "researcher", r_pass)
    ensure_user(session, ADMIN, "admin", a_pass)
    studies = []
    for kind in all_kinds().values():
        title = f"Demo: {kind.title}"
        study = session.scalar(select(Study).where(Study.title == title))
        if study is None:
            material = kind.demo()
            if not material:
                continue
            if material.get("setup"):
                material["setup"](session)  # e.g. the buildings a navigation study walks through
            settings = services.StudySettings(**{
                "title": title, "annotations_per_item": 3, "bundle_size": 10, "gold_rate": 0.2,
                "redirect_url": "https://app.prolific.com/submissions/complete?cc=DEMO",
                **material.get("settings", {})})
            if material.get("build"):  # the kind makes its study through its own services
                study = material["build"](session, researcher, settings)
            else:
                study = services.create_study(session, researcher, kind.name, settings,
                                              material["items"], material["format"])
            services.set_state(session, study, "live", researcher)
            if material.get("simulate"):
                material["simulate"](session, study, researcher)  # agents, simulated workers
        studies.append(study)
    return {"researcher": (RESEARCHER, r_pass), "admin": (ADMIN, a_pass), "studies": studies}

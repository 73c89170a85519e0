"""Demo data: accounts, a live study per kind, two agents with imported outputs and a few
simulated annotators working through the real assignment engine."""

from __future__ import annotations

import json
import random
import secrets

from sqlalchemy import select
from tqdm import tqdm
from sqlalchemy.orm import Session

from app.auth.models import User
from app.auth.security import hash_password
from app.kinds import all_kinds
from app.studies import assignment, services
from app.studies.models import Item, Study

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


def _simulated_answers(items, accuracy: dict[str, float], seed: int) -> bytes:
    """An agent's JSONL: right with the given probability per category."""
    rng = random.Random(seed)
    lines = []
    for ext, ref, cat in items:
        right = rng.random() < accuracy.get(cat, accuracy.get("*", 0.5))
        ans = ref["answer"] if right else ("No" if ref["answer"] == "Yes" else "Yes")
        lines.append(json.dumps({"question_id": ext, "answer": ans}))
    return ("\n".join(lines) + "\n").encode()


def simulate_worker(session: Session, study: Study, worker: str, accuracy: float, seed: int,
                    always: str | None = None) -> int:
    rng = random.Random(seed)
    bundle = assignment.enter(session, study, "prolific", worker, f"demo-{worker}", "demo")
    n = 0
    while (a := assignment.next_item(session, study, bundle.id)) is not None:
        if n >= bundle.size:  # the engine must end a bundle at its size; never loop on it
            raise RuntimeError(f"bundle {bundle.id} leased more than its {bundle.size} items")
        ref = session.get(Item, a.item_id).reference["answer"]
        ans = always or (ref if rng.random() < accuracy else ("No" if ref == "Yes" else "Yes"))
        assignment.submit(session, study, bundle.id, a.id, {"answer": ans}, secrets.token_hex(8))
        n += 1
    return n


def _simulate(session: Session, study: Study, researcher: User, kind) -> None:
    """Two agents with imported outputs and a few simulated annotators (yes/no answers)."""
    items = session.execute(select(Item.external_id, Item.reference, Item.category)
                            .where(Item.study_id == study.id)).all()
    for name, acc, s in (("careful-reader", {"1": 0.92, "2": 0.85, "3": 0.8}, 1),
                         ("first-order-only", {"1": 0.9, "*": 0.5}, 2)):
        agent = services.register_agent(session, researcher, kind.name, name)
        services.import_agent_outputs(session, study, agent, _simulated_answers(items, acc, s))
    for i in tqdm(range(6), desc="simulated annotators", unit="worker", leave=False):
        simulate_worker(session, study, f"demo-annotator-{i + 1}", 0.85 + 0.02 * i, i)
    simulate_worker(session, study, "demo-clicker", 0.0, 99, always="Yes")


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
                "instructions": "Read the dialogue. The utterance marked 🛑 is the moment the "
                                "question asks about. Answer Yes or No: keys y and n, Enter to go on.",
                "redirect_url": "https://app.prolific.com/submissions/complete?cc=DEMO",
                **material.get("settings", {})})
            study = services.create_study(session, researcher, kind.name, settings,
                                          material["items"], material["format"])
            services.set_state(session, study, "live", researcher)
            if material.get("simulate", True):
                _simulate(session, study, researcher, kind)
        studies.append(study)
    return {"researcher": (RESEARCHER, r_pass), "admin": (ADMIN, a_pass), "studies": studies}

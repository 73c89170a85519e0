"""Common-ToM's demo: two agents with imported answers and simulated annotators (yes/no),
working through the real assignment engine."""

from __future__ import annotations

import json
import random

from sqlalchemy import select
from sqlalchemy.orm import Session
from tqdm import tqdm

from app.auth.models import User
from app.demo import simulate_task
from app.studies import services
from app.studies.models import Item, Study

KIND_NAME = "tom"


def _simulated_answers(items, accuracy: dict[str, float], seed: int) -> bytes:
    """An agent's JSONL: right with the given probability per category."""
    rng = random.Random(seed)
    lines = []
    for ext, ref, cat in items:
        right = rng.random() < accuracy.get(cat, accuracy.get("*", 0.5))
        ans = ref["answer"] if right else ("No" if ref["answer"] == "Yes" else "Yes")
        lines.append(json.dumps({"question_id": ext, "answer": ans}))
    return ("\n".join(lines) + "\n").encode()


# Seconds a careful annotator spends on an item (reading a dialogue window of a few lines and
# a question), and a clicker who answers without reading.
CAREFUL_SECONDS = 9.0
CLICKER_SECONDS = 1.0


def simulate_worker(
    session: Session,
    study: Study,
    worker: str,
    accuracy: float,
    seed: int,
    always: str | None = None,
    median_s: float | None = None,
) -> int:
    """A simulated annotator, right with probability `accuracy` (or giving `always` to every
    item, fast), taking a time drawn around `median_s` per item (app.demo.simulate_task)."""

    def answer(item: Item, rng: random.Random) -> dict:
        ref = item.reference["answer"]
        return {"answer": always or (ref if rng.random() < accuracy else ("No" if ref == "Yes" else "Yes"))}

    if median_s is None:
        median_s = CLICKER_SECONDS if always else CAREFUL_SECONDS
    return simulate_task(session, study, worker, answer, median_s, seed)


def simulate(session: Session, study: Study, researcher: User) -> None:
    """Two agents with imported outputs and a few simulated annotators (yes/no answers)."""
    items = session.execute(
        select(Item.external_id, Item.reference, Item.category).where(Item.study_id == study.id)
    ).all()
    for name, acc, s in (
        ("careful-reader", {"1": 0.92, "2": 0.85, "3": 0.8}, 1),
        ("first-order-only", {"1": 0.9, "*": 0.5}, 2),
    ):
        agent = services.register_agent(session, researcher, KIND_NAME, name)
        services.import_agent_outputs(session, study, agent, _simulated_answers(items, acc, s))
    for i in tqdm(range(6), desc="simulated annotators", unit="worker", leave=False):
        simulate_worker(session, study, f"demo-annotator-{i + 1}", 0.85 + 0.02 * i, i)
    simulate_worker(session, study, "demo-clicker", 0.0, 99, always="Yes")

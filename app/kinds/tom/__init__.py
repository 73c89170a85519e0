"""Common-ToM (Soubki et al. 2024): yes/no belief questions of order 1-3 about a point in a
dialogue, answered by people and agents, scored against answers the rules derive from
belief and common-ground labels."""

from __future__ import annotations

import hashlib
import math
from importlib import resources
from typing import Any, ClassVar, Literal

from pydantic import BaseModel
from sqlalchemy import case, func, select

from app.errors import InputError
from app.kinds.base import ImportResult, ItemSpec, TaskKind
from app.kinds.tom.formats import ToMQuestion, parse_answers_jsonl, parse_questions_csv, window
from app.kinds.tom.generate import generate_battery, parse_cg_dialogues
from app.leaderboards import stats


class ToMResponse(BaseModel):
    answer: Literal["Yes", "No"]


def _stable_rank(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# Yes and No answers per split of the released corpus (Soubki et al. 2024, Table 2). The paper's
# random baseline answers Yes at the training split's rate, 2371 / 5270 = 0.45 (section 4.1).
PAPER_SPLITS = {"train": (2371, 2899), "test": (965, 1139)}
ITEMS_SOURCE = "this study's items"
GIVEN_SOURCE = "given at study creation"


def baseline_rate(options: dict, questions: list[ToMQuestion]) -> tuple[float, str]:
    """(Yes rate, where it comes from) for the random baseline, from the importer's options:

    - `random_yes_split`: "train" or "test", the paper's split (Table 2), or "items";
    - `random_yes_rate`: a number in [0, 1];
    - neither, or "items": the share of Yes among the upload's questions (gold included).
    """
    split, rate = options.get("random_yes_split"), options.get("random_yes_rate")
    if isinstance(split, str):
        split = split.strip().lower() or None
    if split is not None and rate is not None:
        raise InputError("give the random baseline's Yes rate or name a split, not both", field="random_yes_split")
    if split in PAPER_SPLITS:
        yes, no = PAPER_SPLITS[split]
        return yes / (yes + no), f"{split} split"
    if split not in (None, "items"):
        raise InputError(
            f"unknown split {split!r}: use train, test (the paper's) or items (this study's)", field="random_yes_split"
        )
    if rate is not None:
        try:
            value = float(rate) if not isinstance(rate, bool) else math.nan
        except (TypeError, ValueError):
            value = math.nan
        if not 0.0 <= value <= 1.0:  # NaN fails too
            raise InputError(
                f"the random baseline's Yes rate must be a number from 0 to 1, not {rate!r}", field="random_yes_rate"
            )
        return value, GIVEN_SOURCE
    return sum(q.answer == "Yes" for q in questions) / len(questions), ITEMS_SOURCE


class CommonToM(TaskKind):
    name: ClassVar[str] = "tom"
    title: ClassVar[str] = "Common-ToM belief questions"
    Response = ToMResponse
    category_label: ClassVar[str] = "order"
    item_noun: ClassVar[str] = "Question"
    keyboard_hint: ClassVar[str] = "y: Yes, n: No, Enter: next."
    item_formats: ClassVar[tuple[str, ...]] = ("csv", "cg")
    position: ClassVar[int] = 10
    format_labels: ClassVar[dict[str, str]] = {
        "csv": "Common-ToM questions (CSV, optionally .gz)",
        "cg": "Common-ground-annotated dialogues (JSON/JSONL): generate the questions",
    }
    # The random baseline's Yes rate, by the paper's split or given, and how many questions
    # serve as gold.
    option_fields: ClassVar[dict[str, tuple]] = {
        "random_yes_split": ("text",),
        "random_yes_rate": ("float", 0.0, 1.0),
        "gold_count": ("int", 0, 10000),
    }
    options_template: ClassVar[str | None] = "kinds/tom/options.html"
    form_help: ClassVar[str] = (
        "Workers read a dialogue up to a marked moment and answer Yes or No to a question about what "
        "the speakers believe then. Upload the questions (CSV), or dialogues annotated with their "
        "common ground to generate them. See docs/kinds/tom.md."
    )
    default_instructions: ClassVar[str] = (
        "Read the dialogue. The utterance marked with 🛑 is the moment asked about. Answer Yes or No."
    )
    outputs_label: ClassVar[str] = 'Answers (JSONL: {"question_id": ..., "answer": "Yes"|"No"})'
    comprehension: ClassVar[list[dict[str, Any]]] = [
        {
            "question": "Which moment of the dialogue does each question ask about?",
            "options": ["The end of the dialogue", "The utterance marked with 🛑", "Any moment you choose"],
            "answer": "The utterance marked with 🛑",
        },
        {
            "question": "What do you answer?",
            "options": ["A summary of the dialogue", "Yes or No", "The speaker's name"],
            "answer": "Yes or No",
        },
    ]
    cluster_help: ClassVar[str] = (
        "a cluster is a proposition, i.e. a dialogue and event number, with "
        "all its questions at every point in time it is asked at"
    )
    cluster_noun: ClassVar[str] = "proposition"
    score_title: ClassVar[str] = (
        "Accuracy: the share of questions answered right; consistency: "
        "the share of propositions with every question right"
    )
    prior_label: ClassVar[str] = 'Format: JSONL, one answer per line, {"question_id", "answer", "annotator"}.'

    parts: ClassVar[dict[str, str | tuple[str, ...]]] = {"cli": ".cli:tom"}

    def score(self, payload, reference, response):
        if not reference:
            return None
        return 1.0 if response.get("answer") == reference.get("answer") else 0.0

    def questions(self, data: bytes, fmt: str) -> list[ToMQuestion]:
        if fmt == "csv":
            return parse_questions_csv(data)
        if fmt == "cg":
            return generate_battery(parse_cg_dialogues(data))
        raise InputError(f"unknown format {fmt!r}: use csv or cg", field="format")

    def import_items(self, data: bytes, fmt: str, options: dict) -> ImportResult:
        questions = self.questions(data, fmt)
        if not questions:
            raise InputError("the upload holds no questions", field="file")
        # Gold: first-order questions (the easiest), a fixed pseudo-random choice.
        n_gold = int(options.get("gold_count", min(30, max(5, len(questions) // 20))))
        first = sorted((q for q in questions if q.order == 1), key=lambda q: _stable_rank(q.question_id))
        gold_ids = {q.question_id for q in first[:n_gold]} if len(questions) > n_gold * 2 else set()
        rate, source = baseline_rate(options, questions)
        items = [
            ItemSpec(
                external_id=q.question_id,
                payload={"question": q.question, "window": window(q.utterances, q.sno)},
                reference={"answer": q.answer},
                is_gold=q.question_id in gold_ids,
                source="gold" if q.question_id in gold_ids else "dataset",
                # Consistency is judged per proposition, i.e. dialogue and event number, over all the
                # points in time it is asked at (paper section 3, "Query Creation"; section 4.5,
                # "Discussion": "all questions for a proposition correct"). eno is text: 12.1 != 12.4.
                category=str(q.order),
                cluster=f"{q.cid}:{q.eno}",
            )
            for q in questions
        ]
        yes = sum(q.answer == "Yes" for q in questions)
        # A released split as it is (Table 2's counts): the form names it and its baseline.
        released = next((name for name, (y, n) in PAPER_SPLITS.items() if (yes, len(questions) - yes) == (y, n)), None)
        return ImportResult(
            items=items,
            kind_settings={"random_yes_rate": rate, "random_yes_source": source},
            summary={
                "questions": len(questions),
                "gold": len(gold_ids),
                "yes": yes,
                "released_split": released,
                "baseline_rate": rate,
                "baseline_source": source,
                "by_order": {o: sum(q.order == o for q in questions) for o in (1, 2, 3)},
                "sample": questions[:50],
            },
        )

    def import_agent_outputs(
        self, data: bytes, known_ids: set[str], payloads: dict[str, dict] | None = None
    ) -> dict[str, dict]:
        return {qid: {"answer": a} for qid, a in parse_answers_jsonl(data, known_ids).items()}

    def import_annotations(
        self, data: bytes, known_ids: set[str], payloads: dict[str, dict] | None = None
    ) -> dict[str, dict[str, dict]]:
        """JSONL, one answer per line: {"question_id", "answer", "annotator"}."""
        from app.kinds.tom.formats import parse_annotator_answers_jsonl

        return {
            who: {qid: {"answer": a} for qid, a in answers.items()}
            for who, answers in parse_annotator_answers_jsonl(data, known_ids).items()
        }

    def agreement_value(self) -> str:
        return "answer"

    def baselines(self, session, study) -> list[dict]:
        """Answers Yes with the study's Yes rate p (the paper: the training split's): an item
        is right with probability p (gold Yes) or 1-p (gold No); a proposition with y Yes and
        m No questions is all right with probability p^y (1-p)^m. The row's name says p and
        where it came from (studies from before the source was kept: "source not recorded")."""
        from app.studies.models import Item

        p = float(study.kind_settings.get("random_yes_rate", 0.5))
        source = study.kind_settings.get("random_yes_source") or "source not recorded"
        is_yes = case((Item.reference["answer"].as_string() == "Yes", 1), else_=0)
        base = (Item.study_id == study.id, Item.is_gold.is_(False))
        if session.get_bind().dialect.name == "postgresql":
            # One scan of the items for both (GROUPING SETS; SQLite has none).
            rows = session.execute(
                select(Item.category, Item.cluster, func.grouping(Item.cluster), func.count(), func.sum(is_yes))
                .where(*base)
                .group_by(func.grouping_sets(Item.category, Item.cluster))
            ).all()
            by_cat = [(c, n, y) for c, _, g, n, y in rows if g]
            clusters = [(k, n, y) for _, k, g, n, y in rows if not g]
        else:
            by_cat = session.execute(
                select(Item.category, func.count(), func.sum(is_yes)).where(*base).group_by(Item.category)
            ).all()
            clusters = session.execute(
                select(Item.cluster, func.count(), func.sum(is_yes)).where(*base).group_by(Item.cluster)
            ).all()

        def est(n, y):
            return stats.mean_interval_bernoulli_sum([p] * y + [1 - p] * (n - y)).as_dict()

        n_all = sum(n for _, n, _ in by_cat)
        y_all = sum(y or 0 for _, _, y in by_cat)
        if not n_all:
            return []
        return [
            {
                "type": "baseline",
                "name": f"Random baseline (Yes rate {p:.2f}, {source})",
                "answered": n_all,
                "coverage": 1.0,
                "accuracy": est(n_all, y_all),
                "by_category": {c: est(n, y or 0) for c, n, y in by_cat},
                "consistency": stats.mean_interval_bernoulli_sum(
                    [p ** (y or 0) * (1 - p) ** (n - (y or 0)) for _, n, y in clusters]
                ).as_dict(),
            }
        ]

    def demo(self) -> dict:
        from app.kinds.tom.demo import simulate

        return {
            "items": resources.files(__package__).joinpath("demo_data/dialogues.jsonl").read_bytes(),
            "format": "cg",
            "simulate": simulate,
            "settings": {
                "instructions": "Read the dialogue. The utterance marked 🛑 is the moment "
                "the question asks about. Answer Yes or No: keys y and n, "
                "Enter to go on."
            },
        }


KIND = CommonToM()

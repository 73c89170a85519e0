"""Hexagons (Lachmy et al., TACL 2022): people execute an instructor's drawing procedure step
by step on a 10 x 18 hexagon board (the paper's Execution mode); each step's board is scored
against the instructor's with action- and board-based P/R/F1/EM (metrics.py).

A study's mode is its kind_settings["mode"], set by the upload's format: "execution" (the
default; format procedures) or "description" (format targets: instructors write procedures
for target images, description.py). An execution study made from a description study's
procedures is its verification (verification.py). Execution items: one per procedure, the
payload is the instructions (never the boards), the reference the instructor's gold boards,
agreement tags and category (docs/kinds/hexagons.md says what is left).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import ClassVar

from app.errors import InputError
from app.kinds.base import ImportResult, ItemSpec, model_jobs, model_parts, TaskKind
from app.leaderboards.ranking import Ranking
from app.kinds.hexagons import metrics
from app.kinds.hexagons.abstraction import LEVELS, MECHANISMS
from app.kinds.hexagons.board import layout
from app.kinds.hexagons.description import description_scores, is_description, parse_description, target_item
from app.kinds.hexagons.execution import Execution, execution_metrics, parse_execution

SCORE_METRICS = ("board_f1", "board_em", "action_f1", "action_em")
DEFAULT_SCORE = "board_f1"
DESCRIPTION_INSTRUCTIONS = (
    "You see a target image on the hexagon board. Write instructions that would let someone who never sees "
    "it draw it, one step at a time. After writing each step, paint on your own board exactly what that "
    "step says (no more), then add the step. Send when your board shows the image."
)


def _stable_rank(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Hexagons(TaskKind):
    name: ClassVar[str] = "hexagons"
    cli_aliases: ClassVar[tuple[str, ...]] = ("hex",)  # its commands' old name
    title: ClassVar[str] = "Hexagons drawing procedures (execution)"
    Response = Execution
    # Item scores are continuous (board F1 and the like): the generic majority and agreement
    # of exact score values mean nothing; the section's metrics table is the lead.
    primary_table: ClassVar[str | None] = "hexagons_metrics"
    # The settled table and adaptive allocation: a category's value on an image, the score
    # (0-1) of the first valid execution of one of its procedures there.
    ranking: ClassVar[Ranking | None] = Ranking(
        unit="image", measure="score", agent="category", value="its score (0-1, the study's score metric)."
    )
    generic_table: ClassVar[bool] = False
    item_noun: ClassVar[str] = "Procedure"
    # A description study's item is a target image the instructor describes (the paper's
    # Description mode), not a procedure (item_noun_for).
    description_item_noun: ClassVar[str] = "Target image"
    keyboard_hint: ClassVar[str] = (
        "Enter: next step; S: send (on the last step, once every step was shown); on the board Space paints."
    )
    # A description study's page types into a text box, so Enter and S are text there.
    description_keyboard_hint: ClassVar[str] = (
        "type each step's instruction in the box; Tab to your board: arrow keys move, 0-7 choose a "
        "colour, Space paints, Z undoes."
    )
    item_formats: ClassVar[tuple[str, ...]] = ("procedures", "targets")
    position: ClassVar[int] = 40
    format_labels: ClassVar[dict[str, str]] = {
        "procedures": "Hexagons drawing procedures (the released JSONL: train, dev or test)",
        "targets": (
            'Hexagons target images for a description study (JSONL: {"id", "board": [180], '
            '"category"?} a line, or released procedures: their final boards)'
        ),
    }
    # gold_count: how many procedures all of whose steps both verifiers reproduced (tags all
    # "A") serve as gold; score_metric: the metric an execution's score is the mean of;
    # label_abstraction: 1 makes executors label each step's abstraction (abstraction.py).
    option_fields: ClassVar[dict[str, tuple]] = {
        "gold_count": ("int", 0, 10000),
        "score_metric": ("text",),
        "label_abstraction": ("int", 0, 1),
    }
    option_labels: ClassVar[dict[str, str]] = {
        "gold_count": "Gold procedures (ones both verifiers reproduced at every step; blank: none)",
        "score_metric": "Score of an execution: board_f1, board_em, action_f1 or action_em (blank: board_f1)",
        "label_abstraction": "Executors also label each step's level of abstraction",
    }
    form_help: ClassVar[str] = (
        "Executors paint a drawing procedure on the hexagon board one instruction at a time; with "
        "target images, instructors describe an image step by step instead. See docs/kinds/hexagons.md."
    )
    default_instructions: ClassVar[str] = (
        "Read each instruction and paint the board as it says, one step at a time. You cannot see the "
        "target image: do exactly what the instruction asks, no more. Next step shows the next instruction."
    )
    outputs_label: ClassVar[str] = (
        'Predicted boards (JSONL: {"index", "step", "board": [180 colour codes], "previous": [180] optional})'
    )
    models: ClassVar[str | None] = "app.kinds.hexagons.models"
    # For the page's abstraction labels (item.html, with the study's label_abstraction).
    abstraction_levels: ClassVar[dict] = LEVELS
    abstraction_mechanisms: ClassVar[dict] = MECHANISMS

    study_template: ClassVar[str | None] = "kinds/hexagons/study.html"

    # Executors (docs/kinds/hexagons.md, "Executors"): uploaded or trained models whose boards
    # become an agent's outputs on a study.
    jobs: ClassVar[dict[str, str]] = model_jobs("hexagons", "validate", "generate", "train")
    artifact_roles: ClassVar[tuple[str, ...]] = ("executor",)
    artifact_help: ClassVar[str] = (
        "a Hexagons executor (instruction tokens and the current board to the next "
        "board's logits, docs/kinds/hexagons.md)"
    )

    parts: ClassVar[dict[str, str | tuple[str, ...]]] = model_parts("hexagons", ".generation:ExecutorRuns")

    def study_context(self, session, study) -> dict:
        """The study page's sections: a description study's way to verification; an execution
        study's agreement (when it verifies), consolidation link and executor runs."""
        from app.kinds.hexagons import generation, verification

        ctx = verification.study_context(session, study)
        if ctx["hex_mode"] != "description":
            ctx.update(generation.study_context(session, study))
        return ctx

    def parse_response(self, data: dict, payload: dict | None = None, settings: dict | None = None) -> dict:
        if (settings or {}).get("mode") == "description" or is_description(payload):
            return parse_description(data, payload)
        parsed = parse_execution(data, payload)
        if settings is not None and "labels" in parsed and not settings.get("label_abstraction"):
            raise InputError("this study does not take abstraction labels", field="labels")
        return parsed

    def item_noun_for(self, settings: dict | None = None) -> str:
        return self.description_item_noun if (settings or {}).get("mode") == "description" else self.item_noun

    def keyboard_hint_for(self, settings: dict | None = None) -> str:
        if (settings or {}).get("mode") == "description":
            return self.description_keyboard_hint
        return self.keyboard_hint

    def public_payload(self, payload: dict) -> dict:
        if is_description(payload):  # the instructor sees the target: it is what they describe
            return {"target": payload["target"], "initial": payload["initial"], "layout": layout()}
        return {"instructions": payload["instructions"], "initial": payload["initial"], "layout": layout()}

    def score(self, payload, reference, response):
        if is_description(payload):
            return description_scores(payload, response)["board_f1"]
        if not reference:
            return None
        return execution_metrics(reference, response)["mean"][reference.get("score_metric", DEFAULT_SCORE)]

    def score_details(self, payload, reference, response):
        if is_description(payload):
            return description_scores(payload, response)
        if not reference:
            return None
        m = execution_metrics(reference, response)
        return {**m["mean"], "per_step": m["steps"]}

    def replay_details(self, answer: dict) -> dict:
        from app.kinds.hexagons.replay import replay_boards

        return replay_boards(answer["payload"], answer.get("reference"), answer.get("response") or {})

    def import_items(self, data: bytes, fmt: str, options: dict) -> ImportResult:
        from app.kinds.hexagons.formats import parse_procedures

        if fmt not in self.item_formats:
            raise InputError(f"unknown format {fmt!r}: use procedures or targets", field="format")
        if fmt == "targets":
            return self._import_targets(data)
        metric = str(options.get("score_metric") or DEFAULT_SCORE).strip()
        label_abstraction = int(options.get("label_abstraction") or 0)
        if label_abstraction not in (0, 1):
            raise InputError("label_abstraction must be 0 or 1", field="label_abstraction")
        if metric not in SCORE_METRICS:
            raise InputError(f"score_metric must be one of {', '.join(SCORE_METRICS)}", field="score_metric")
        procs = parse_procedures(data)
        # Set only by verification.make_verification_study: each procedure's instructor.
        authors = options.get("authors") if isinstance(options.get("authors"), dict) else {}
        n_gold = int(options.get("gold_count", 0) or 0)
        agreed = sorted((p for p in procs if p.all_agreed), key=lambda p: _stable_rank(p.index))
        gold = {p.index for p in agreed[:n_gold]}
        items = [
            ItemSpec(
                external_id=p.index,
                payload={"instructions": [s.instruction for s in p.steps], "initial": list(p.initial)},
                reference={
                    "boards": [list(s.board) for s in p.steps],
                    "initial": list(p.initial),
                    "tags": [s.tag for s in p.steps],
                    "category": p.category,
                    "image_id": p.image_id,
                    "instructor_id": p.instructor_id,
                    "annotation_round": p.annotation_round,
                    "score_metric": metric,
                },
                is_gold=p.index in gold,
                source="gold" if p.index in gold else "dataset",
                # Procedures of one image: nobody executes two (the second would be drawn from memory).
                category=p.category,
                cluster=p.image_id,
                exclusion_group=f"image:{p.image_id}",
                author_id=authors.get(p.index),
            )
            for p in procs
        ]
        settings = {"score_metric": metric, "label_abstraction": label_abstraction}
        # Set only by verification.make_verification_study (no form or API field reaches it).
        if isinstance(options.get("verification_of"), int):
            settings["verification_of"] = options["verification_of"]
        return ImportResult(
            items=items,
            kind_settings=settings,
            summary={
                "procedures": len(procs),
                "steps": sum(len(p.steps) for p in procs),
                "gold": len(gold),
                "all_agreed": len(agreed),
            },
        )

    def _import_targets(self, data: bytes) -> ImportResult:
        from app.kinds.hexagons.formats import parse_targets

        targets, skipped = parse_targets(data)
        items = [target_item(t.id, list(t.board), t.category) for t in targets]
        return ImportResult(
            items=items,
            kind_settings={"mode": "description"},
            summary={"targets": len(targets), "procedures_of_a_repeated_image": skipped},
            study_defaults={"annotations_per_item": 1, "gold_rate": 0.0, "instructions": DESCRIPTION_INSTRUCTIONS},
        )

    def import_agent_outputs(
        self, data: bytes, known_ids: set[str], payloads: dict[str, dict] | None = None
    ) -> dict[str, dict]:
        """Predictions JSONL as `proctor hexagons score` reads it; each procedure predicted must be
        predicted at every step. Steps without `previous` were executed on the gold board."""
        from app.kinds.hexagons.formats import parse_predictions

        payloads = payloads or {}
        if any(is_description(p) for p in payloads.values()):
            raise InputError(
                "a description study takes no agent outputs: its items are target images, not procedures", field="file"
            )
        n_steps = {i: len(payloads[i]["instructions"]) for i in known_ids if i in payloads}
        by_index: dict[str, dict[int, dict]] = defaultdict(dict)
        for p in parse_predictions(data, n_steps):
            step = {"board": list(p.board), "actions": []}
            if p.previous is not None:
                step["previous"] = list(p.previous)
            by_index[p.index][p.step] = step
        out = {}
        for index, steps in by_index.items():
            missing = [k for k in range(1, n_steps[index] + 1) if k not in steps]
            if missing:
                raise InputError(f"procedure {index} has no prediction for step {missing[0]}", field="step")
            out[index] = {"steps": [steps[k] for k in sorted(steps)], "on": "gold"}
        return out

    def extra_leaderboard(self, session, study) -> dict | None:
        from app.kinds.hexagons.leaderboard import section

        if (study.kind_settings or {}).get("mode") == "description":
            return None
        return section(session, study)

    def baselines(self, session, study) -> list[dict]:
        """Execution studies only (a description study's items are target images, with no
        instructions to execute): "No action" (every step leaves the board as it was) and the
        paper's rule-based executor (rule_executor.py; each step executed on the gold board
        before it), the very rows of the Hexagons section (leaderboard.baseline_rows; the
        rule-based one left out where it paints nothing). Every procedure is executed; the
        study's score metric is averaged over STEPS with stats.mean_interval clustered by
        procedure (the unit resampled), overall and per category."""
        import numpy as np

        from app.kinds.hexagons import leaderboard
        from app.leaderboards.rows import clustered

        if (study.kind_settings or {}).get("mode") == "description":
            return []
        refs, payloads, procedures = leaderboard._procedures(session, study)
        if not refs:
            return []
        metric = (
            (study.kind_settings or {}).get("score_metric")
            or next((r.get("score_metric") for r in refs.values()), None)
            or DEFAULT_SCORE
        )
        col = metrics.KEYS.index(metric if metric in metrics.KEYS else DEFAULT_SCORE)
        out = []
        for row in leaderboard.baseline_rows(refs, payloads):
            values, ids, _ = leaderboard.row_steps(row, procedures)
            cats = np.array([procedures[int(i)].category for i in ids], dtype=object)
            out.append(
                {
                    "type": "baseline",
                    "name": row.who,
                    "answered": len(row.executions),
                    "coverage": 1.0,
                    # with the procedures counted, so a cell on too few says so (rows.clustered)
                    "accuracy": clustered(values[:, col], ids, "procedure"),
                    "by_category": {
                        c: clustered(values[cats == c, col], ids[cats == c], "procedure") for c in sorted(set(cats))
                    },
                    "consistency": None,
                }
            )
        return out

    def demo(self) -> dict:
        """An execution study of four short released dev procedures (two or three steps), when the data lies beside
        the checkout (../shared/data/hexagons, or HEXAGONS_DATA); it is never copied into the
        repository, so without it there is no Hexagons demo."""
        import json
        import os
        from pathlib import Path

        folder = Path(
            os.environ.get("HEXAGONS_DATA")
            or Path(__file__).resolve().parents[3].parent / "shared" / "data" / "hexagons"
        )
        dev = folder / "dev.jsonl"
        if not dev.is_file():
            return {}
        lines = [json.loads(line) for line in dev.read_text("utf-8").splitlines() if line.strip()]
        # Two or three steps each: short, yet a worker sees the board carry over between steps.
        short = sorted(
            (
                p
                for p in lines
                if isinstance(p.get("agreement_tags"), list) and 2 <= int(p["number_of_drawing_steps"]) <= 3
            ),
            key=lambda p: int(p["index"]),
        )[:4]

        def simulate(session, study, researcher) -> None:
            _demo_executors(session, study)
            _demo_description(session, researcher, short)

        # Three executions per procedure: the simulated executors give two, a newcomer the third.
        return {
            "items": "\n".join(json.dumps(p) for p in short).encode(),
            "format": "procedures",
            "settings": {
                "bundle_size": 2,
                "gold_rate": 0.0,
                "annotations_per_item": 3,
                "instructions": self.default_instructions,
            },
            "simulate": simulate,
        }


def _demo_executors(session, study) -> None:
    """Four simulated executors, a task of two procedures each, through the real engine, so the
    demo's leaderboard has figures: each step they paint the instructor's board, except that in
    about a third of the steps they miss a third of the tiles the step changes."""
    from app.demo import simulate_task

    def execute(item, rng) -> dict:
        board, steps = list(item.reference["initial"]), []
        for gold in item.reference["boards"]:
            target = list(gold)
            changed = [t for t in range(len(target)) if target[t] != board[t]]
            if changed and rng.random() < 1 / 3:
                for t in rng.sample(changed, max(1, len(changed) // 3)):
                    target[t] = board[t]
            steps.append(
                {"board": target, "actions": [[t, target[t], 500] for t in range(len(target)) if target[t] != board[t]]}
            )
            board = target
        return {"steps": steps}

    for n in range(1, 5):
        simulate_task(session, study, f"demo-executor-{n}", execute, median_s=90, seed=700 + n)


DEMO_DESCRIPTION = "Demo: Hexagons description"


def _demo_description(session, researcher, procedures: list[dict]) -> None:
    """The demo's description study beside its execution study: the same procedures' final
    boards as targets, two instructors each (so the answers fill whole tasks of two), live."""
    import json

    from sqlalchemy import select

    from app.demo import demo_settings
    from app.studies import services
    from app.studies.models import Study

    if session.scalar(select(Study.id).where(Study.title == DEMO_DESCRIPTION)):
        return
    settings = demo_settings(DEMO_DESCRIPTION, bundle_size=2, gold_rate=0.0, annotations_per_item=2)
    study = services.create_study(
        session, researcher, "hexagons", settings, "\n".join(json.dumps(p) for p in procedures).encode(), "targets"
    )
    services.set_state(session, study, "live", researcher)


KIND = Hexagons()

__all__ = ["KIND", "Hexagons", "metrics"]

"""The Standardised Test Suite (paper 004) on BabyAI: an agent is forced through a recorded
context, acts alone from the takeover point, and people watch the continuation and place one
marker, success or failure, at the first moment of either. Agents are ranked by the share of
continuations that succeed; reference episodes with known labels measure the annotators. In a
play study (format `missions`) people play missions by keyboard instead, and their plays become
recordings (play.py). In a side-by-side study (format `pairs`, pairs.py) people see two agents'
continuations of one scenario at once, mark each, and say which did better."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from app.errors import InputError
from app.kinds.base import ImportResult, ItemSpec, model_parts, TaskKind
from app.leaderboards.ranking import Ranking
from app.kinds.sts.score import truth as _truth

# Pixels per grid cell in the frames annotators watch (an 8 x 8 room is 64 px, drawn larger).
DEFAULT_TILE = 16
# Auto-approval: a worker whose balanced accuracy on reference episodes reaches this (with
# both labels seen) is approved; below it, an admin looks (study option `approve_at`).
DEFAULT_APPROVE_AT = 0.8
PLAY_INSTRUCTIONS = (
    "Do what the instruction says in the grid world. Left and right arrows turn, the up arrow moves "
    "forward, p picks up, d drops, t toggles (opens a door), Backspace undoes a move. When the mission "
    "is done the page says so: press Enter to send. If you cannot do it, press Enter twice to send anyway."
)


class STSResponse(BaseModel):
    marker: Literal["success", "failure"]
    # Steps after the takeover point where the marker sits.
    step: int = Field(ge=0, le=100_000)


class StandardisedTestSuite(TaskKind):
    name: ClassVar[str] = "sts"
    right_answer: ClassVar[str] = "a continuation's right answer: the simulator's own verdict, success or failure"
    title: ClassVar[str] = "Standardised Test Suite (BabyAI continuations)"
    Response = STSResponse
    # Items score an annotator's marker against the truth; agents are measured by the
    # success share of their continuations, which only the section computes.
    primary_table: ClassVar[str | None] = "sts_agents"
    # The settled table and adaptive allocation: an agent's value on a scenario, the first
    # valid answer's marker on one of its continuations there (1 for "success"). Pair studies
    # rank by their own Davidson model (ranking_for: none).
    ranking: ClassVar[Ranking | None] = Ranking(
        unit="scenario",
        measure="success share",
        agent="agent",
        value="1 when it marks a success, 0 for a failure.",
        agent_key=("reference", "agent"),
        value_of=lambda response, scores, score: {"success": 1.0, "failure": 0.0}.get(response.get("marker")),
    )
    generic_table: ClassVar[bool] = False
    item_noun: ClassVar[str] = "Episode"
    keyboard_hint: ClassVar[str] = (
        "Watching an episode: space plays, arrows step (shift: ten), s or f marks "
        "success or failure here. Playing a mission: arrows turn and move, p, d and t "
        "pick up, drop and toggle, Backspace undoes. Enter sends."
    )
    item_formats: ClassVar[tuple[str, ...]] = ("continuations", "missions", "pairs")
    # Side by side (pairs.py): a study of pairs of agents' continuations of one scenario.
    pairwise: ClassVar[bool] = True
    pair_keyboard_hint: ClassVar[str] = (
        "Watching a pair: space plays both, arrows step (shift: ten), a or b chooses the side, "
        "s or f marks success or failure on it, 1 or 2 says A or B did better, t a tie, "
        "r writes a reason. Enter sends."
    )
    position: ClassVar[int] = 30
    format_labels: ClassVar[dict[str, str]] = {
        "continuations": "Agent continuations (JSONL: scenario, agent, level, seed, mission, actions, takeover)",
        "missions": "Missions people play by keyboard (JSONL or CSV: level, seed, id, instruction)",
        "pairs": "Pairs of continuations judged side by side (JSONL: first, second, reference)",
    }
    option_fields: ClassVar[dict[str, tuple]] = {
        "approve_at": ("float", 0.0, 1.0),
        "tile": ("int", 4, 32),
        "control_length": ("int", 0, 1),
    }
    option_labels: ClassVar[dict[str, str]] = {
        "approve_at": f"Approve a worker automatically from this share of gold episodes marked right (0-1; blank: {DEFAULT_APPROVE_AT})",
        "tile": f"Pixels per grid cell in the frames workers see (4-32; blank: {DEFAULT_TILE})",
        "control_length": "Side by side (format pairs): control the ratings for the continuations' length "
        "(LMArena's style control; blank: off)",
    }
    form_help: ClassVar[str] = (
        "Workers watch an agent's episode from the point it takes over and mark the first moment of "
        "success or of failure; with missions, they play each mission by keyboard instead. "
        "Continuations can also come from a suite (STS suites page). See docs/kinds/sts.md."
    )
    default_instructions: ClassVar[str] = (
        "Watch the recording: at the marked point an agent takes over. Place one marker at the first "
        "moment the agent succeeds at the instruction, or the first moment it fails (at the end if it "
        "never succeeds)."
    )
    outputs_label: ClassVar[str] = (
        "An agent's continuations are the items of the study: upload them when you create "
        "it, or make the study from a suite"
    )
    imports_outputs: ClassVar[bool] = False
    models: ClassVar[str | None] = "app.kinds.sts.models"
    jobs: ClassVar[dict[str, str]] = {
        "generate": "app.kinds.sts.generation:run_generation",
        "validate": "workers.sts.validate:run_validation",
    }
    # Uploaded policies (docs/kinds/sts-policies.md): a rollout policy for continuations.
    artifact_roles: ClassVar[tuple[str, ...]] = ("policy",)
    artifact_help: ClassVar[str] = (
        "an STS policy (BabyAI observation and mission to action logits, docs/kinds/sts-policies.md)"
    )
    study_template: ClassVar[str | None] = "kinds/sts/study.html"

    parts: ClassVar[dict[str, str | tuple[str, ...]]] = model_parts("sts", ".generation:SuiteRuns")

    def study_context(self, session, study) -> dict:
        settings = study.kind_settings or {}
        return {
            "suite": settings.get("suite"),
            "play": settings.get("mode") == "play",
            "pairs": settings.get("mode") == "pairs",
            "agent_metrics": settings.get("agent_metrics") or {},
        }

    def preview_context(self, study, item) -> dict:
        from app.kinds.sts.play import is_play

        # A play item's page asks the server for each grid: in a preview, the owner's route.
        return {"play_url": f"/api/v1/sts/preview/{study.id}/{item.id}"} if is_play(item.payload) else {}

    def parse_response(self, data: dict, payload: dict | None = None, settings: dict | None = None) -> dict:
        from app.kinds.sts import play

        # A play item's answer is its actions; without the item, the answer's shape tells.
        from app.kinds.sts import pairs

        if play.is_play(payload) or (payload is None and "actions" in data and "marker" not in data):
            return play.parse_play(data, payload)
        if pairs.is_pair(payload) or (payload is None and "winner" in data):
            return pairs.parse_pair(data, payload)
        parsed = super().parse_response(data)
        if payload is not None:
            last = int(payload["n_frames"]) - 1 - int(payload["takeover"])
            if parsed["step"] > last:
                raise InputError(
                    f"the continuation has {last} steps after the takeover; the marker is at {parsed['step']}",
                    field="step",
                )
        return parsed

    def public_payload(self, payload: dict) -> dict:
        from app.kinds.sts import play
        from app.storage import get_store

        from app.kinds.sts import pairs

        if play.is_play(payload):
            return play.public_view(payload)
        if pairs.is_pair(payload):
            return pairs.public_view(payload)
        return {
            "instruction": payload["instruction"],
            "n_frames": payload["n_frames"],
            "takeover": payload["takeover"],
            "tile": payload["tile"],
            "frames_url": get_store().url(payload["frames_key"], expires_s=6 * 3600),
        }

    def score(self, payload, reference, response):
        from app.kinds.sts.play import is_play

        from app.kinds.sts import pairs

        if is_play(payload):  # the simulator's own success (parse_play replayed the actions)
            return 1.0 if response.get("success_step") is not None else 0.0
        if pairs.is_pair(payload):
            return pairs.score(reference, response)
        if not reference:
            return None
        truth, _ = _truth(reference)
        return 1.0 if response.get("marker") == truth else 0.0

    def score_details(self, payload, reference, response):
        from app.kinds.sts.play import is_play

        from app.kinds.sts import pairs

        if is_play(payload):
            return {"success_step": response.get("success_step"), "steps": len(response.get("actions") or [])}
        if pairs.is_pair(payload):
            return pairs.score_details(reference, response)
        if not reference:
            return None
        truth, at = _truth(reference)
        details = {"truth": truth, "marker": response.get("marker")}
        if response.get("marker") == truth and at is not None:
            details["step_error"] = abs(int(response.get("step", 0)) - int(at))
        return details

    def replay_details(self, answer: dict) -> dict:
        """The frames the admin's replay shows of a continuation: the takeover, where the
        worker put their marker and where the reference puts the outcome (frame = takeover +
        steps after it), cut from the strip the worker scrubbed."""
        from app.kinds.sts.play import is_play
        from app.storage import get_store

        payload, response = answer["payload"], answer.get("response") or {}
        if is_play(payload) or "frames_key" not in payload:
            return {}
        last, takeover = payload["n_frames"] - 1, payload["takeover"]
        frames = [{"label": "The agent takes over", "frame": takeover}]
        if response.get("marker"):
            frames.append(
                {
                    "label": f"Their marker: {response['marker']} (step {response.get('step', 0)} after the takeover)",
                    "frame": min(last, takeover + int(response.get("step") or 0)),
                }
            )
        if answer.get("reference"):
            truth, at = _truth(answer["reference"])
            if truth and at is not None:
                frames.append(
                    {
                        "label": f"The reference: {truth} (step {at} after the takeover)",
                        "frame": min(last, takeover + int(at)),
                    }
                )
        return {
            "frames_url": get_store().url(payload["frames_key"], expires_s=3600),
            "n_frames": payload["n_frames"],
            "frames": frames,
        }

    def auto_review(self, gold, settings=None) -> tuple[str | None, str]:
        """Approve a worker whose balanced accuracy on reference episodes (the mean of their
        rates on success- and failure-labelled ones) reaches the study's `approve_at`."""
        seen = {"success": [], "failure": []}
        for g in gold:
            d = g.scores or {}
            for side in [d, *(d.get("sides") or [])]:  # a reference pair: both of its sides
                if side.get("truth") in seen:
                    seen[side["truth"]].append(side.get("marker") == side["truth"])
        if not seen["success"] or not seen["failure"]:
            return None, ""  # both labels are needed for a balanced accuracy
        threshold = float((settings or {}).get("approve_at", DEFAULT_APPROVE_AT))
        ba = (sum(seen["success"]) / len(seen["success"]) + sum(seen["failure"]) / len(seen["failure"])) / 2
        n = len(seen["success"]) + len(seen["failure"])
        if ba >= threshold:
            return "approved", f"auto: balanced accuracy {ba:.0%} on {n} reference episodes"
        return None, f"reference episodes: balanced accuracy {ba:.0%} (below {threshold:.0%})"

    def import_items(self, data: bytes, fmt: str, options: dict) -> ImportResult:
        from app.kinds.sts.formats import parse_continuations
        from app.kinds.sts.frames import MAX_FRAMES, store_strips

        if fmt not in self.item_formats:
            raise InputError(f"unknown format {fmt!r}: use continuations or missions", field="format")
        tile = int(options.get("tile", DEFAULT_TILE))
        if fmt == "missions":
            return self._import_missions(data, tile)
        if fmt == "pairs":
            from app.kinds.sts.pairs import import_pairs

            return import_pairs(data, tile, bool(options.get("control_length")))
        continuations = parse_continuations(data)
        # Every continuation of a scenario shows its length (formats.py): the frame count
        # and the strip's size are the scenario's, never the outcome's.
        for c in continuations:
            if c.takeover + c.scenario_length + 1 > MAX_FRAMES:
                raise InputError(
                    f"{c.takeover + c.scenario_length + 1} frames (takeover and length); at most {MAX_FRAMES}",
                    line=c.line,
                    field="length",
                )
        keys = store_strips(
            [(c.recording, c.takeover + c.scenario_length + 1, c.scenario) for c in continuations], tile
        )
        items = []
        for c, key in zip(continuations, keys):
            n_frames = c.takeover + c.scenario_length + 1
            items.append(
                ItemSpec(
                    external_id=c.id,
                    payload={
                        "instruction": c.instruction,
                        "frames_key": key,
                        "n_frames": n_frames,
                        "takeover": c.takeover,
                        "tile": tile,
                    },
                    reference={
                        "agent": c.agent,
                        "scenario": c.scenario,
                        "continuation": c.continuation,
                        "level": c.recording.level,
                        "seed": c.recording.seed,
                        "tags": c.tags,
                        "simulator": c.simulator_outcome,
                        "success_step": c.success_step,
                        "length": c.length,
                        "scenario_length": c.scenario_length,
                        "label": c.label,
                        "label_step": c.label_step,
                        "suite_version": c.suite_version,
                    },
                    is_gold=c.reference,
                    source="reference" if c.reference else "agent",
                    category=c.category,
                    cluster=c.scenario,
                )
            )
        agents = sorted({c.agent for c in continuations if not c.reference})
        return ImportResult(
            items=items,
            kind_settings={"approve_at": float(options.get("approve_at", DEFAULT_APPROVE_AT))},
            summary={
                "continuations": len(continuations),
                "reference": sum(c.reference for c in continuations),
                "agents": agents,
                "scenarios": len({c.scenario for c in continuations}),
                "categories": sorted({c.category for c in continuations}),
            },
        )

    def _import_missions(self, data: bytes, tile: int) -> ImportResult:
        from app.kinds.sts.formats import parse_missions
        from app.kinds.sts.play import MODE, play_payload

        missions = parse_missions(data)
        items = [
            ItemSpec(external_id=m.id, payload=play_payload(m, tile), source="mission", category=m.category)
            for m in missions
        ]
        return ImportResult(
            items=items,
            kind_settings={"mode": MODE},
            summary={
                "missions": len(missions),
                "levels": sorted({m.level for m in missions}),
                "categories": sorted({m.category for m in missions}),
            },
            # Nothing here is gold: a play has no right answer to check a worker against.
            study_defaults={"instructions": PLAY_INSTRUCTIONS, "gold_rate": 0.0},
        )

    def import_agent_outputs(
        self, data: bytes, known_ids: set[str], payloads: dict[str, dict] | None = None
    ) -> dict[str, dict]:
        raise InputError("an STS agent's continuations are the study's items: upload them with the study", field="file")

    def extra_leaderboard(self, session, study) -> dict | None:
        from app.kinds.sts.leaderboard import pair_section, section

        if (study.kind_settings or {}).get("mode") == "pairs":
            return pair_section(session, study)
        return section(session, study)

    def item_priorities(self, session, study) -> dict[int, float] | None:
        from app.kinds.sts.pairs import item_priorities

        if (study.kind_settings or {}).get("mode") != "pairs":
            return None
        return item_priorities(session, study)

    def ranking_for(self, settings: dict | None = None) -> Ranking | None:
        # A pair study ranks by its own model; a play study's items are missions people play
        # (the human row comes from them later, people.py): neither ranks agents by markers.
        return None if (settings or {}).get("mode") in ("pairs", "play") else self.ranking

    def adaptive_for(self, settings: dict | None = None) -> bool:
        # A pair study: which pair next (pairs.item_priorities); otherwise the core's rule.
        return (settings or {}).get("mode") == "pairs" or super().adaptive_for(settings)

    def primary_table_for(self, settings: dict | None = None) -> str | None:
        return "sts_pair_ratings" if (settings or {}).get("mode") == "pairs" else self.primary_table

    def item_noun_for(self, settings: dict | None = None) -> str:
        return "Pair" if (settings or {}).get("mode") == "pairs" else self.item_noun

    def keyboard_hint_for(self, settings: dict | None = None) -> str:
        return self.pair_keyboard_hint if (settings or {}).get("mode") == "pairs" else self.keyboard_hint

    def straightline_value(self) -> str:
        return "marker"  # always the same pick, whatever the item, is straight-lining

    def label_value(self) -> str:
        return "marker"  # success or failure, for Dawid-Skene (a play's answer has none: left out)

    def demo(self) -> dict:
        from app.kinds.sts.demo import build_demo, simulate_markers

        return {
            "build": build_demo,
            "simulate": simulate_markers,
            "settings": {
                "bundle_size": 6,
                "gold_rate": 0.2,
                "annotations_per_item": 3,
                "instructions": self.default_instructions,
            },
        }


KIND = StandardisedTestSuite()

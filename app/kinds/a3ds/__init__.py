"""A3DS reference game (Tsvilodub & Franke 2023): a speaker captions the target of two 3DShapes
scenes; a person picks the scene the caption means. Listener accuracy per captioner comes from
the people; the pragmatic metrics (metrics.py) from the scenes' features.

One item per captioned pair: the payload holds the two scene ids in the order the worker sees
them (random per item, recorded) and the caption; the reference which of the two is the
target, the captioner and the caption's metrics. Studies come from a design (which pairs,
which built-in speakers: formats.parse_design) or from imported captions (JSONL)."""

from __future__ import annotations

import hashlib
import random
from typing import ClassVar, Literal

from pydantic import BaseModel

from app.errors import InputError
from app.kinds.base import ImportResult, ItemSpec, model_jobs, model_parts, TaskKind
from app.leaderboards.ranking import Ranking

CAPTIONS_LINE = '{"target": id, "distractor": id, "caption": str, "captioner": optional, "id": optional}'
CAPTIONS_AS_OUTPUTS = (
    "this is a captions file, not a listener's picks: captions make a study of their own (a new "
    "A3DS study from the captions format), or a captioner agent's run adds its captions to this "
    "study as items (Captioner runs, on the study page); an agent's outputs here are its picks, "
    '{"item": id, "choice": "1" | "2"} a line'
)


class Pick(BaseModel):
    # "1" or "2": the scene shown first (left) or second (right); "none": the worker can't tell.
    choice: Literal["1", "2", "none"]


def _stable_rank(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def is_clear(metrics: dict) -> bool:
    """A caption that names a contrastive feature in words that fit only the target and says
    nothing false: a listener who reads it can only pick the target (gold)."""
    return metrics["c"] >= 1 and not metrics["false"] and not metrics["ambiguous"] and not metrics["unparsed"]


class ReferenceGame(TaskKind):
    name: ClassVar[str] = "a3ds"
    cli_aliases: ClassVar[tuple[str, ...]] = ("refgame",)  # its commands' old name
    title: ClassVar[str] = "A3DS reference game (pick the captioned picture)"
    Response = Pick
    category_label: ClassVar[str] = "z (features that differ)"
    # Captioners are measured by the listeners' accuracy on their captions (the section);
    # the generic table is the listeners' own accuracy.
    primary_table: ClassVar[str | None] = "a3ds_accuracy"
    # The settled table and adaptive allocation: a captioner's value on a picture pair, whether
    # the first valid listener picked the target from its caption (the kind's score, 0/1).
    ranking: ClassVar[Ranking | None] = Ranking(
        unit="picture pair",
        measure="accuracy",
        agent="captioner",
        value="1 when the listener picked the target, 0 otherwise.",
        agent_key=("reference", "captioner"),
    )
    score_title: ClassVar[str] = "Listeners: the share of pictures picked right, per listener"
    item_noun: ClassVar[str] = "Picture pair"
    # "Can't tell" is offered unless the study's cant_tell option is 0 (import_items); the
    # instructions are the kind's, so they say "when offered".
    keyboard_hint: ClassVar[str] = (
        "1 or Left arrow: the left picture, 2 or Right arrow: the right one, 0: can't tell (when offered), Enter: next."
    )
    item_formats: ClassVar[tuple[str, ...]] = ("design", "captions")
    position: ClassVar[int] = 50
    format_labels: ClassVar[dict[str, str]] = {
        "design": 'Study design (JSON: {"pairs": {"random": n, "z": {"1": n, ..., "6": n}, "named": '
        '[{"features": [...], "count": n}]}, "speakers": ["literal", "short", "contrastive", '
        '"minimal"], "seed": 0, "gold": n})',
        "captions": f"Captions to judge (JSONL, one pair a line: {CAPTIONS_LINE})",
    }
    # gold_count: imported captions that name a contrastive feature clearly serve as gold (a
    # design's "gold" adds pairs of its own); cant_tell 1: the worker may answer "can't tell".
    option_fields: ClassVar[dict[str, tuple]] = {"gold_count": ("int", 0, 10000), "cant_tell": ("int", 0, 1)}
    option_labels: ClassVar[dict[str, str]] = {
        "gold_count": "Gold pairs among uploaded captions (ones that name a telling feature; blank: none)",
        "cant_tell": "Workers may answer “can't tell”",
    }
    # The upload preview's scene pictures (/a3ds/scenes/<id>) need the session.
    preview_needs_session: ClassVar[bool] = True
    form_help: ClassVar[str] = (
        "Workers see a caption and two pictures and pick the one it describes. A design generates "
        "the pairs and the built-in speakers' captions; or upload captions to judge. See docs/kinds/a3ds.md."
    )
    default_instructions: ClassVar[str] = (
        "Read the caption and pick the picture it describes: click it, or press 1 or the left arrow for the "
        "left one, 2 or the right arrow for the right one. If the caption fits both pictures or neither, "
        "press 0: “Can't tell” (when the page offers it). Enter goes on."
    )
    outputs_label: ClassVar[str] = 'A listener\'s picks (JSONL: {"item": id, "choice": "1"|"2"})'

    # Captioners as models (docs/kinds/a3ds.md, "Captioner models"): uploaded or trained; a
    # generation run adds their captions of a study's pairs as items.
    study_template: ClassVar[str | None] = "kinds/a3ds/generation.html"
    jobs: ClassVar[dict[str, str]] = model_jobs("a3ds", "validate", "generate", "train")
    artifact_roles: ClassVar[tuple[str, ...]] = ("captioner",)
    artifact_help: ClassVar[str] = (
        "an A3DS captioner (the two 64 x 64 scenes, target and distractor, to caption token ids, docs/kinds/a3ds.md)"
    )

    parts: ClassVar[dict[str, str | tuple[str, ...]]] = model_parts(
        "a3ds", ".generation:CaptionerRuns", study_context=".generation:study_context"
    )

    def parse_response(self, data: dict, payload: dict | None = None, settings: dict | None = None) -> dict:
        out = super().parse_response(data, payload, settings)
        if out["choice"] == "none" and payload is not None and not payload.get("cant_tell"):
            raise InputError("this study asks you to pick one of the two pictures", field="choice")
        return out

    def public_payload(self, payload: dict) -> dict:
        return {"scenes": payload["scenes"], "caption": payload["caption"], "cant_tell": bool(payload.get("cant_tell"))}

    def score(self, payload, reference, response):
        if not reference:
            return None
        # "Can't tell" did not find the target: it counts as a miss.
        return 1.0 if response.get("choice") == str(reference["target"]) else 0.0

    def import_items(self, data: bytes, fmt: str, options: dict) -> ImportResult:
        from app.kinds.a3ds.formats import parse_design, parse_pairs
        from app.kinds.a3ds.metrics import score_mentions
        from app.kinds.a3ds.captions import parse
        from app.kinds.a3ds.speakers import speak, telling_features
        from app.kinds.a3ds.scenes import pair_differing_in, FEATURES

        cant_tell = bool(int(options.get("cant_tell", 1)))
        if fmt == "design":
            pairs, seed, n_gold = parse_design(data)
            gold_pairs = []
            rng = random.Random(seed + 1)
            for k in range(n_gold):
                # Gold: one feature that tells them apart, named and nothing else.
                z = rng.randint(1, 6)
                pair = pair_differing_in(rng, rng.sample(FEATURES, z))
                while not telling_features(pair):
                    pair = pair_differing_in(rng, rng.sample(FEATURES, z))
                gold_pairs.append((f"gold-{k}", pair, speak("minimal", pair, seed)))
        elif fmt == "captions":
            pairs, seed = parse_pairs(data), 0
            gold_pairs = []
        else:
            raise InputError(f"unknown format {fmt!r}: use design or captions", field="format")
        items, by_captioner = [], {}
        scored = [(p, score_mentions(p.pair, parse(p.caption, p.pair.target)).stored()) for p in pairs]
        gold_ids: set[str] = set()
        if fmt == "captions":
            n_gold = int(options.get("gold_count", 0) or 0)
            clear = sorted((p.id for p, m in scored if is_clear(m)), key=_stable_rank)
            gold_ids = set(clear[:n_gold])
        for p, m in scored:
            by_captioner[p.captioner] = by_captioner.get(p.captioner, 0) + 1
            items.append(
                self._item(p.id, p.pair, p.caption, p.captioner, p.design, m, seed, cant_tell, gold=p.id in gold_ids)
            )
        for ident, pair, caption in gold_pairs:
            m = score_mentions(pair, parse(caption, pair.target)).stored()
            items.append(self._item(ident, pair, caption, "gold", "gold", m, seed, cant_tell, gold=True))
        return ImportResult(
            items=items,
            kind_settings={"seed": seed, "cant_tell": cant_tell},
            summary={
                "pairs": len(pairs),
                "gold": sum(i.is_gold for i in items),
                "captioners": by_captioner,
                "by_z": {z: sum(i.category == str(z) for i in items) for z in range(1, 7)},
            },
        )

    @staticmethod
    def _item(ident, pair, caption, captioner, design, metrics, seed, cant_tell, gold) -> ItemSpec:
        # The order on screen: random per item, fixed by the seed and the item, and recorded.
        flip = int(_stable_rank(f"{seed}|{ident}|order")[:8], 16) % 2 == 1
        scenes = [pair.distractor, pair.target] if flip else [pair.target, pair.distractor]
        a, b = sorted((pair.target, pair.distractor))
        return ItemSpec(
            external_id=ident,
            payload={"scenes": scenes, "caption": caption, "cant_tell": cant_tell},
            reference={
                "target": 2 if flip else 1,
                "target_id": pair.target,
                "distractor_id": pair.distractor,
                "captioner": captioner,
                "design": design,
                "metrics": metrics,
            },
            is_gold=gold,
            source="gold" if gold else "agent",
            # One worker never sees one pair twice (the second caption would be read knowing
            # the first pair's answer).
            category=str(pair.z),
            cluster=f"{pair.target}-{pair.distractor}",
            exclusion_group=f"pair:{a}-{b}",
        )

    def import_agent_outputs(
        self, data: bytes, known_ids: set[str], payloads: dict[str, dict] | None = None
    ) -> dict[str, dict]:
        """A model listener's picks: JSONL {"item": external id, "choice": "1" | "2"}."""
        from app.textfiles import jsonl_objects

        out = {}
        for line, obj in jsonl_objects(data):
            if "caption" in obj and "item" not in obj:
                # A captioner's captions are what workers judge, not a listener's picks.
                raise InputError(CAPTIONS_AS_OUTPUTS, line=line, field="caption")
            item = str(obj.get("item", ""))
            if item not in known_ids:
                raise InputError(f"no item {item!r} in this study", line=line, field="item")
            if obj.get("choice") not in ("1", "2", 1, 2):
                raise InputError("choice is 1 or 2", line=line, field="choice")
            out[item] = {"choice": str(obj["choice"])}
        return out

    def auto_review(self, gold, settings=None) -> tuple[str | None, str]:
        """Approve a worker who picked the target on every gold pair (at least two); a miss is
        left to an admin, flagged."""
        answered = [g for g in gold if g.score is not None]
        if len(answered) >= 2 and all(g.score == 1.0 for g in answered):
            return "approved", f"picked the target on all {len(answered)} gold pairs"
        misses = sum(g.score == 0.0 for g in answered)
        return None, f"missed {misses} of {len(answered)} gold pairs" if misses else ""

    def extra_leaderboard(self, session, study) -> dict | None:
        from app.kinds.a3ds.leaderboard import section

        return section(session, study)

    def straightline_value(self) -> str:
        return "choice"  # always the same pick, whatever the item, is straight-lining

    def label_value(self) -> str:
        return "choice"  # the listener's pick ("1", "2", or "none": can't tell), for Dawid-Skene

    def demo(self) -> dict:
        import json

        design = {
            "pairs": {"z": {"1": 2, "2": 2, "3": 1, "6": 1}},
            "speakers": ["literal", "short", "contrastive"],
            "seed": 1,
            "gold": 2,
        }
        return {
            "items": json.dumps(design).encode(),
            "format": "design",
            "settings": {
                "bundle_size": 6,
                "gold_rate": 0.2,
                "annotations_per_item": 2,
                "instructions": self.default_instructions,
            },
            "simulate": _demo_simulate,
        }


def _demo_simulate(session, study, researcher) -> None:
    _demo_listeners(session, study, researcher)
    _demo_ranking(session, researcher)


def _demo_listeners(session, study, researcher) -> None:
    """The demo's listeners, so that its leaderboard has figures: each picks the target with
    their own accuracy (a clear caption or not: simulated, not read), in about 6 s a pair."""
    from app.demo import simulate_task

    for i, accuracy in enumerate((0.95, 0.85, 0.75, 0.6)):

        def answer(item, rng, accuracy=accuracy):
            target = str(item.reference["target"])
            return {"choice": target if rng.random() < accuracy else ("2" if target == "1" else "1")}

        simulate_task(session, study, f"demo-listener-{i + 1}", answer, 6.0, seed=i)


# The demo's adaptive ranking study (issue 29: plan, adapt, stop): three speakers of clearly
# different quality on the same picture pairs, enough pairs that the clearest comparison
# settles within the seeded judgements while the others are still open. (The A3DS demo above,
# 6 picture pairs, is too small for any comparison to settle: a clean split needs about 18.)
RANKING_TITLE = "Demo: A3DS adaptive ranking"
RANKING_DESIGN = {
    "pairs": {"z": {"1": 20, "2": 20, "3": 20}},
    "speakers": ["contrastive", "literal", "short"],
    "seed": 3,
}
# Simulated listeners' accuracy per speaker (stated, not read from the caption): the contrastive
# caption names what tells the pictures apart; the literal one names all six features, and a
# listener loses the thread; the short one often fits both pictures ("can't tell": a miss).
RANKING_ACCURACY = {"contrastive": 0.95, "literal": 0.6, "short": 0.25}
# Judgements seeded: 40 of the 60 picture pairs, each captioned by the three speakers (one
# valid listener a caption counts); the rest are left for the researcher trying the demo.
RANKING_LISTENERS, RANKING_BUNDLE = 10, 12


def _demo_ranking(session, researcher):
    """The adaptive ranking study, live, with its simulated listeners: after each one the
    priorities are refreshed as the sweeper would, so the judgements go where the ranking is
    open. Made once (by title)."""
    import json

    from sqlalchemy import select

    from app.demo import demo_settings, simulate_task
    from app.leaderboards import adaptive
    from app.studies import services
    from app.studies.models import Study

    if session.scalar(select(Study.id).where(Study.title == RANKING_TITLE)):
        return None
    settings = demo_settings(
        RANKING_TITLE,
        annotations_per_item=1,
        bundle_size=RANKING_BUNDLE,
        gold_rate=0.0,
        instructions=KIND.default_instructions,
        adaptive=True,
    )
    study = services.create_study(
        session, researcher, KIND.name, settings, json.dumps(RANKING_DESIGN).encode(), "design"
    )
    services.set_state(session, study, "live", researcher)
    adaptive.refresh_study(session, study)
    session.commit()
    for i in range(RANKING_LISTENERS):

        def answer(item, rng):
            ref = item.reference
            if rng.random() < RANKING_ACCURACY[ref["captioner"]]:
                return {"choice": str(ref["target"])}
            return {"choice": rng.choice(["none", str(3 - ref["target"])])}

        simulate_task(session, study, f"demo-ranker-{i + 1}", answer, 6.0, seed=100 + i)
        adaptive.refresh_study(session, study)
        session.commit()
    return study


KIND = ReferenceGame()

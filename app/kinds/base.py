"""The one interface every task kind implements (DESIGN.md section 5)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from app.errors import InputError


@dataclass
class ItemSpec:
    """An item as an importer produces it, before it is stored."""

    external_id: str
    payload: dict
    reference: dict | None = None
    is_gold: bool = False
    source: str = "dataset"
    category: str = ""
    cluster: str = ""
    exclusion_group: str | None = None


@dataclass
class ImportResult:
    items: list[ItemSpec]
    # Kind settings derived from the upload (e.g. the random baseline's Yes rate).
    kind_settings: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    # Study settings the upload suggests where the researcher left them blank: StudySettings
    # fields, plus "gold_per_bundle" (that many gold slots in every bundle, whatever its size).
    study_defaults: dict = field(default_factory=dict)


@dataclass
class GoldResult:
    """A worker's answer on a gold item, as the automatic review rules see it."""

    item: str  # the item's external id
    score: float | None
    scores: dict | None = None


class TaskKind(ABC):
    name: ClassVar[str]
    title: ClassVar[str]
    # Jinja template (under templates/) that renders one item for the worker.
    item_template: ClassVar[str]
    Response: ClassVar[type[BaseModel]]
    category_label: ClassVar[str] = "category"
    # What the worker's pages call one item, and how to work it by keyboard.
    item_noun: ClassVar[str] = "Item"
    keyboard_hint: ClassVar[str] = ""
    # Importers by format name: upload bytes -> items. The first is the default.
    item_formats: ClassVar[tuple[str, ...]] = ()
    # Celery task that generates agent outputs for this kind, if any.
    generation_task: ClassVar[str | None] = None
    # Template (under templates/) that shows a worker's answers on the admin's replay page;
    # None: the generic table of answers beside the right ones.
    replay_template: ClassVar[str | None] = None

    def parse_response(self, data: dict, payload: dict | None = None, settings: dict | None = None) -> dict:
        """Validate a response; `payload` is the item's (kinds that check a response against
        the item, e.g. a path against the building's graph, use it), `settings` the study's
        kind_settings (kinds whose questions a study configures, e.g. extra Likert items)."""
        try:
            return self.Response.model_validate(data).model_dump()
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(err["msg"], field=".".join(str(p) for p in err["loc"]) or None) from None

    def public_payload(self, payload: dict) -> dict:
        """What a worker may see of an item: never the reference, source or agent."""
        return payload

    @abstractmethod
    def score(self, payload: dict, reference: dict | None, response: dict) -> float | None:
        """A response's score against the item's reference (None when there is none)."""

    def score_details(self, payload: dict, reference: dict | None, response: dict) -> dict | None:
        """Metrics derived beside the score (stored in Annotation.scores), if the kind has any."""
        return None

    @abstractmethod
    def import_items(self, data: bytes, fmt: str, options: dict) -> ImportResult:
        """Parse an upload into items; raise InputError (line, field) and store nothing."""

    @abstractmethod
    def import_agent_outputs(self, data: bytes, known_ids: set[str],
                             payloads: dict[str, dict] | None = None) -> dict[str, dict]:
        """Parse an agent's outputs: item external id -> response. `payloads` (external id ->
        item payload) is for kinds that check an output against its item (a listener's path
        against the instruction's building and start)."""

    def auto_review(self, gold: Sequence[GoldResult]) -> tuple[str | None, str]:
        """The automatic verdict on a worker from all their gold answers, taken when one of
        their tasks (bundles) ends: ("approved", reason) approves a worker still pending and
        never reviewed by an admin; (None, flag) leaves them to an admin, the flag ("" for
        none) shown first in the review queue. There is no automatic rejection."""
        return None, ""

    def replay_details(self, answer: dict) -> dict:
        """What replay_template shows about one answer beyond its stored fields (e.g. a map)."""
        return {}

    def agreement_value(self) -> str | None:
        """Response field whose value annotators agree on (for alpha/kappa), if any."""
        return None

    def baselines(self, session, study) -> list[dict]:
        """Leaderboard rows computed without people or agents (e.g. a random baseline)."""
        return []

    def extra_leaderboard(self, session, study) -> dict | None:
        """A kind's own leaderboard section, shown under the generic table, or None.

        {"tables": [{"key": str, "title": str, "note": str (optional),
                     "columns": [{"key": str, "label": str}, ...],
                     "rows": [{column key: cell, ...}, ...]}, ...]}
        A cell is a string, a number, None, or an estimate {"n", "mean", "low", "high"}
        (rendered as the mean with its interval)."""
        return None

    def demo(self) -> dict[str, Any]:
        """Demo material: {'items': bytes, 'format': str, 'agents': {name: outputs bytes}}."""
        return {}

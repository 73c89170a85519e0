"""A3DS reference game (Tsvilodub & Franke 2023): a speaker captions the target of two 3DShapes
scenes; a person picks the scene the caption means. Listener accuracy per captioner comes from
the people; the pragmatic metrics (metrics.py) from the scenes' features.

One item per captioned pair: the payload holds the two scene ids in the order the worker sees
them (random per item, recorded) and the caption; the reference which of the two is the
target, the captioner and the caption's metrics."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel

from app.errors import InputError
from app.kinds.base import ImportResult, TaskKind


class Pick(BaseModel):
    # "1" or "2": the scene shown first or second; "none": the worker can't tell.
    choice: Literal["1", "2", "none"]


class ReferenceGame(TaskKind):
    name: ClassVar[str] = "a3ds"
    title: ClassVar[str] = "A3DS reference game (pick the captioned scene)"
    item_template: ClassVar[str] = "kinds/a3ds/item.html"
    Response = Pick
    category_label: ClassVar[str] = "z (contrastive features)"
    item_noun: ClassVar[str] = "Picture pair"
    keyboard_hint: ClassVar[str] = "1 or Left: the left picture, 2 or Right: the right one, 0: can't tell."
    item_formats: ClassVar[tuple[str, ...]] = ("design", "captions")
    position: ClassVar[int] = 50

    def cli(self):
        from app.kinds.a3ds.cli import refgame

        return refgame

    def score(self, payload, reference, response):
        if not reference:
            return None
        return 1.0 if response.get("choice") == str(reference["target"]) else 0.0

    def import_items(self, data: bytes, fmt: str, options: dict) -> ImportResult:
        raise InputError("not yet", field="format")

    def import_agent_outputs(self, data: bytes, known_ids: set[str],
                             payloads: dict[str, dict] | None = None) -> dict[str, dict]:
        raise InputError("not yet", field="file")


KIND = ReferenceGame()

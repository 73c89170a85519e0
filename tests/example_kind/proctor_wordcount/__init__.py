"""Word counting: the worker reads a sentence and types how many words it has.

A small but complete task kind, shipped as its own package: it declares its items, answers
and score, a table (per-item tallies), a page and an API route, a command, a job and a
migration branch, all through `TaskKind`, and registers in the `proctor.kinds` entry-point
group. docs/kinds.md walks through it.
"""

from __future__ import annotations

import json
from typing import ClassVar

from pydantic import BaseModel, Field


from app.errors import InputError
from app.kinds.base import ImportResult, ItemSpec, TaskKind
from app.textfiles import jsonl_objects

MAX_SENTENCE = 2000


class CountResponse(BaseModel):
    words: int = Field(ge=0, le=1000)


def count_words(sentence: str) -> int:
    return len(sentence.split())


class WordCount(TaskKind):
    name: ClassVar[str] = "wordcount"
    title: ClassVar[str] = "Word counting (example kind)"
    item_template: ClassVar[str] = "kinds/wordcount/item.html"
    Response = CountResponse
    item_noun: ClassVar[str] = "Sentence"
    keyboard_hint: ClassVar[str] = "Type the number, Enter to go on."
    item_formats: ClassVar[tuple[str, ...]] = ("jsonl",)
    format_labels: ClassVar[dict[str, str]] = {"jsonl": "Word counting: sentences (JSONL {id, sentence})"}
    default_instructions: ClassVar[str] = "Count the words of each sentence and type the number."
    outputs_label: ClassVar[str] = 'Counts (JSONL: {"id": ..., "words": n})'
    position: ClassVar[int] = 1000
    models: ClassVar[str | None] = "proctor_wordcount.models"
    jobs: ClassVar[dict[str, str]] = {
        "tally": "proctor_wordcount.jobs:run_tally",
        "generate": "proctor_wordcount.runs:run_counter",
    }
    job_queues: ClassVar[dict[str, str]] = {"tally": "exports"}  # counting only: no model runs
    study_template: ClassVar[str | None] = "kinds/wordcount/runs.html"
    # Its parts, imported when asked for (docs/kinds.md: `parts`).
    parts: ClassVar[dict[str, str | tuple[str, ...]]] = {
        "routers": ("proctor_wordcount.views:pages", "proctor_wordcount.views:api"),
        "cli": "proctor_wordcount.cli:wordcount",
        "agent_runs": "proctor_wordcount.runs:CounterRuns",
        "study_context": "proctor_wordcount.runs:study_context",
    }

    def score(self, payload, reference, response):
        if not reference:
            return None
        return 1.0 if response.get("words") == reference.get("words") else 0.0

    def import_items(self, data: bytes, fmt: str, options: dict) -> ImportResult:
        if fmt != "jsonl":
            raise InputError(f"unknown format {fmt!r}: use jsonl", field="format")
        items, seen = [], set()
        for n, row in jsonl_objects(data):  # the core's reader: nesting, numbers and size bounded
            ext, sentence = row.get("id"), row.get("sentence")
            if not isinstance(ext, str) or not ext.strip():
                raise InputError("id must be a non-empty string", line=n, field="id")
            if ext in seen:
                raise InputError(f"id {ext!r} appears twice", line=n, field="id")
            if not isinstance(sentence, str) or not 0 < len(sentence) <= MAX_SENTENCE:
                raise InputError(
                    f"sentence must be a string of 1 to {MAX_SENTENCE} characters", line=n, field="sentence"
                )
            seen.add(ext)
            items.append(
                ItemSpec(external_id=ext, payload={"sentence": sentence}, reference={"words": count_words(sentence)})
            )
        return ImportResult(items=items, summary={"sentences": len(items)})

    def import_agent_outputs(
        self, data: bytes, known_ids: set[str], payloads: dict[str, dict] | None = None
    ) -> dict[str, dict]:
        out = {}
        for n, row in jsonl_objects(data):  # the core's reader: nesting, numbers and size bounded
            if not isinstance(row.get("id"), str) or row["id"] not in known_ids:
                raise InputError(f"unknown id {row.get('id')!r}", line=n, field="id")
            out[row["id"]] = self.parse_response({"words": row.get("words")})
        return out

    def demo(self) -> dict:
        sentences = [
            "The cat sat on the mat.",
            "Proctor counts what people do.",
            "Seven words make up this short sentence.",
        ]
        data = "".join(json.dumps({"id": f"s{k}", "sentence": s}) + "\n" for k, s in enumerate(sentences))
        return {"items": data.encode(), "format": "jsonl", "settings": {"bundle_size": 3, "gold_rate": 0.0}}


KIND = WordCount()

"""What a reader of each kind's leaderboard page reads beside the numbers (issue 25: "a new user
reading each kind's page can say what each number is"): every table's title, note, column
labels and column helps, and the words in its cells (each estimate's method, the reason a
cell is "—", a baseline's name), for every installed kind's section and the generic table,
each on a small study, against the text committed in tests/integration/expected/sections_prose/.

A change to any of them fails here with a diff: a label or help that no longer says what the
number is is a regression like a wrong number (the mutation samples in docs/testing.md found
such changes surviving every other test). To change the prose on purpose, rerun with
PROCTOR_UPDATE_PROSE=1, which rewrites the expected files, and commit them with the change:

    PROCTOR_UPDATE_PROSE=1 PROCTOR_TEST_BACKENDS=sqlite pytest tests/integration/test_sections_prose.py

Without it the test never writes: a missing or different file fails."""

from __future__ import annotations

import difflib
import json
import os
import re
import uuid
import zlib
from pathlib import Path

import pytest

from app.leaderboards.service import compute
from app.studies import assignment, services
from app.studies.models import Item, Study
from tests.conftest import make_user

EXPECTED = Path(__file__).parent / "expected" / "sections_prose"
UPDATE = os.environ.get("PROCTOR_UPDATE_PROSE") == "1"
# Cell keys whose strings are names the study's data gives (pseudonyms, ids), not prose.
NOT_PROSE = {"worker_id", "participant", "pseudonym", "external_id", "slug", "svg"}
PSEUDONYM = re.compile(r"\bw-[0-9a-f]{16}\b")  # an annotator's, from a random worker id


def _word(s: str) -> str:
    return PSEUDONYM.sub("w-<pseudonym>", s)


def _words(value, out: set[str]) -> set[str]:
    """Every string in `value` (however nested), but under NOT_PROSE keys."""
    if isinstance(value, str):
        out.add(_word(value))
    elif isinstance(value, dict):
        for k, v in value.items():
            if k not in NOT_PROSE:
                _words(v, out)
    elif isinstance(value, list):
        for v in value:
            _words(v, out)
    return out


def _table(t: dict) -> dict:
    return {
        "title": t.get("title"),
        "note": _word(t.get("note") or ""),
        "columns": [{"key": c.get("key"), "label": c.get("label"), "help": c.get("help")} for c in t["columns"]],
        "cells": sorted(_words(t.get("rows") or [], set())),
    }


def prose(board: dict) -> dict:
    """What the page says around its numbers, from the board the page and the API get."""
    board = json.loads(json.dumps(board, allow_nan=False))
    extra = board.get("extra") or {}
    generic = [
        # An annotator's row name is a pseudonym: its type and cells' words, not its name.
        sorted(_words({k: v for k, v in r.items() if r.get("type") != "annotator" or k != "name"}, set()))
        for r in board["rows"]
    ]
    return {
        "generic": {
            "category_label": board["category_label"],
            "categories": board["categories"],
            "rows": generic,
            "agreement": sorted(_words(board["agreement"], set())),
        },
        "tables": {t["key"]: _table(t) for t in extra.get("tables") or []},
        "extra": sorted(_words({k: v for k, v in extra.items() if k != "tables"}, set())),
    }


def _check(name: str, board: dict, *, figures: bool = True) -> None:
    """`figures=False`: every run of the study has other figures (which reference episodes the
    engine shows, and how often, is drawn at random), so each number is read as "#": the words
    are checked, the numbers in them are the section's own tests' business."""
    path = EXPECTED / f"{name}.json"
    got = json.dumps(prose(board), indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if not figures:
        got = re.sub(r"[0-9]+", "#", got)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing: run with PROCTOR_UPDATE_PROSE=1 to write it, then commit it"
    want = path.read_text(encoding="utf-8")
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), str(path), "this run", n=2))
        pytest.fail(
            f"The page's prose changed ({name}). If on purpose, rerun with PROCTOR_UPDATE_PROSE=1 and commit "
            f"{path.relative_to(Path(__file__).parents[2])}:\n{diff}",
            pytrace=False,
        )


def _board(session, study: Study) -> dict:
    session.expire_all()
    return compute(session, study)


# ---- the studies: the builders the sections' own tests use -----------------------------------


def test_navigation(session):
    from tests.integration.test_sections_shapes import _nav_with_two_toy_instructions_on_path_a

    study, _, _ = _nav_with_two_toy_instructions_on_path_a(session)
    _check("navigation", _board(session, study))


def test_navigation_pairs(session):
    from app.kinds.navigation.environments import import_house
    from tests.integration.test_nav_pairs import _winner, jsonl, judge_everything, pair_lines
    from tests.integration.test_navigation_leaderboard import house

    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    settings = services.StudySettings(title="Nav pairs", bundle_size=4, annotations_per_item=1, gold_rate=0.25)
    study = services.create_study(session, owner, "navigation", settings, jsonl(pair_lines(h)), "pairs", {"follow": 0})
    services.set_state(session, study, "live", owner)
    judge_everything(session, study, lambda item: {"winner": _winner(item)})
    _check("navigation_pairs", _board(session, study))


def test_navigation_followed_pairs(session):
    """The default pair study: each judge follows both instructions before picking (the
    followed table beside the ratings)."""
    from app.kinds.navigation.environments import import_house
    from tests.integration.test_nav_pairs import _followed, jsonl, judge_everything, pair_lines
    from tests.integration.test_navigation_leaderboard import house

    h = house()
    import_house(session, h)
    owner = make_user(session, "researcher")
    settings = services.StudySettings(title="Nav follow", bundle_size=4, annotations_per_item=1, gold_rate=0.25)
    study = services.create_study(session, owner, "navigation", settings, jsonl(pair_lines(h)), "pairs")
    services.set_state(session, study, "live", owner)

    def answer(item: Item) -> dict:  # human's instructions walked to the goal, the others not
        route = item.reference["route"]
        return _followed(item, {"human": route, "toy": route[:1], "other": route[:1]})

    judge_everything(session, study, answer)
    _check("navigation_followed_pairs", _board(session, study))


def test_a3ds(session):
    from tests.integration.test_sections_shapes import a3ds_picked_study

    study, _ = a3ds_picked_study(session)
    _check("a3ds", _board(session, study))


@pytest.mark.usefixtures("hexagons_kind")
def test_hexagons(session):
    from tests.integration.test_sections_shapes import hex_two_agents_study

    _check("hexagons", _board(session, hex_two_agents_study(session)))


@pytest.mark.usefixtures("hexagons_kind")
def test_hexagons_executors(session):
    from tests.integration.test_hex_consolidation import disagreement_study

    study = disagreement_study(session, make_user(session, "researcher"), label_abstraction=True)
    _check("hexagons_executors", _board(session, study))


def test_sts(session):
    from tests.integration.test_sts import _truth
    from tests.integration.test_sts_analysis import _mark_all, _sts_study, _three_agents

    study = _sts_study(session, make_user(session, "researcher"), _three_agents())

    def marker_of(item):
        """As test_sts_certified: some reference episodes and some of the random agent's
        continuations marked wrongly, so the correction bites; which, by the item (not by the
        order the engine hands them out), so every run has the same figures in its notes."""
        truth, step = _truth(item)
        if (item.is_gold or item.reference["agent"] == "random") and zlib.crc32(item.external_id.encode()) % 3 == 0:
            return ("failure" if truth == "success" else "success"), step
        return truth, step

    _mark_all(session, study, marker_of)
    _check("sts", _board(session, study), figures=False)


def test_sts_pairs(session):
    from tests.integration.test_nav_pairs import judge_everything
    from tests.integration.test_sts_pairs import _answer, _pair_upload, _side_of

    owner = make_user(session, "researcher")
    settings = services.StudySettings(title="Pairs", bundle_size=4, gold_rate=0.0, annotations_per_item=1)
    study = services.create_study(session, owner, "sts", settings, _pair_upload(), "pairs")
    services.set_state(session, study, "live", owner)

    def answer(item: Item) -> dict:
        agents = {item.reference[s]["agent"] for s in ("a", "b")}
        return _answer(item, _side_of(item, "expert") if "expert" in agents else ("a", "b")[item.id % 2])

    judge_everything(session, study, answer)
    _check("sts_pairs", _board(session, study))


def test_tom_generic_table(session):
    """Common-ToM: the generic table (agents, baseline, annotators, their majority, agreement)."""
    from tests.integration.test_tom_leaderboard import import_all_but_one, make_study

    owner = make_user(session, "researcher")
    study = make_study(session, owner, {"random_yes_rate": 0.45})
    import_all_but_one(session, owner, study)
    # Three annotators, one bundle each: the first always right, the others always "Yes".
    for n in range(3):
        bundle = assignment.enter(session, study, "prolific", f"T{n}")
        a = assignment.next_item(session, study, bundle.id)
        while a is not None:
            item = session.get(Item, a.item_id)
            answer = item.reference["answer"] if n == 0 else "Yes"
            assignment.submit(session, study, bundle.id, a.id, {"answer": answer}, uuid.uuid4().hex)
            a = assignment.next_item(session, study, bundle.id)
    _check("tom", _board(session, study))

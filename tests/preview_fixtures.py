"""A small study of every built-in kind (and both page types of STS and Hexagons), for the
preview tests, and the row count of every table, to show that a preview stores nothing."""

from __future__ import annotations

import json

from sqlalchemy import func, select

from app.db import Base
from app.studies import services

BLANK = [0] * 180
ONE = [4] + [0] * 179
TWO = [4, 5] + [0] * 178


def _procedure(index: int) -> str:
    return json.dumps(
        {
            "index": index,
            "annotation_round": 1,
            "category": "simple",
            "image_id": f"P{index}",
            "instructor_id": 3,
            "number_of_drawing_steps": 2,
            "agreement_tags": ["A", "A"],
            "agreement_scores": [[1, 1, 1]] * 2,
            "drawing_procedure": [[0, "NONE", BLANK], [1, "tile 0 red", ONE], [2, "tile 1 blue", TWO]],
        }
    )


def every_kind(session, owner) -> dict[str, int]:
    """Study ids by a name for the page type: tom, navigation, sts (a continuation to mark),
    sts-play (a mission to play), hexagons (a procedure to execute), hexagons-describe (a target
    to describe), a3ds. Each is live, as the researcher would preview it before or after launch."""
    from app.kinds.sts.demo import demo_lines
    from tests.conftest import create_tom_study
    from tests.integration.test_navigation import create_nav_study

    def make(kind, title, data, fmt, **settings):
        s = services.StudySettings(title=title, **{"gold_rate": 0.0, "annotations_per_item": 1, **settings})
        study = services.create_study(session, owner, kind, s, data, fmt)
        services.set_state(session, study, "live", owner)
        return study.id

    lines = {x.get("id") or f"{x['scenario']}/{x['agent']}/{x['continuation']}": x for x in demo_lines()}
    chosen = [lines["PutNextLocal-2/expert/0"], lines["reference/PutNextLocal-11/random"]]
    studies = {
        "tom": create_tom_study(session, owner, title="Preview ToM", bundle_size=3).id,
        "navigation": create_nav_study(session, owner, n=2, title="Preview navigation")[1].id,
        "sts": make(
            "sts", "Preview STS", "\n".join(json.dumps(x) for x in chosen).encode(), "continuations", bundle_size=2
        ),
        "sts-play": make(
            "sts",
            "Preview play",
            json.dumps({"level": "BabyAI-GoToLocal-v0", "seed": 2, "id": "m2"}).encode(),
            "missions",
            bundle_size=1,
        ),
        "hexagons": make("hexagons", "Preview Hexagons", _procedure(1).encode(), "procedures", bundle_size=1),
        "hexagons-describe": make(
            "hexagons",
            "Preview description",
            json.dumps({"id": "dot", "board": TWO}).encode(),
            "targets",
            bundle_size=1,
        ),
        "a3ds": make(
            "a3ds",
            "Preview A3DS",
            json.dumps({"pairs": {"z": {"1": 2}}, "speakers": ["literal"], "seed": 2}).encode(),
            "design",
            bundle_size=2,
        ),
    }
    session.commit()
    return studies


def row_counts(session) -> dict[str, int]:
    """Rows in every table (the core's and every kind's)."""
    session.expire_all()
    return {t.name: session.scalar(select(func.count()).select_from(t)) for t in Base.metadata.sorted_tables}

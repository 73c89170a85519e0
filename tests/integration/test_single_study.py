"""Which single-output study a side-by-side study's ranking is shown beside
(app/leaderboards/side_by_side.single_study), the one rule navigation's and STS's pair
sections share: the newest of the same kind and owner that is not side by side itself and
that fits the kind's test."""

from __future__ import annotations

import pytest

from app.leaderboards.side_by_side import single_study
from tests.conftest import create_tom_study, make_user

pytestmark = pytest.mark.backend_agnostic("one query of studies by kind, owner and id")


def test_the_newest_fitting_study_that_is_not_side_by_side_is_chosen(session):
    owner, other_owner = make_user(session, "researcher"), make_user(session, "researcher")
    older, unfit, newer, pair = (create_tom_study(session, owner, title=t) for t in ("older", "unfit", "newer", "pair"))
    newest_pair = create_tom_study(session, owner, title="newest pair")
    someone_elses = create_tom_study(session, other_owner, title="someone else's")
    for study in (pair, newest_pair):
        study.kind_settings = {"mode": "pairs"}
    session.commit()
    asked = []

    def fits(study):
        asked.append(study.title)
        return study is not unfit

    assert single_study(session, pair, fits) is newer
    # Newest first; side-by-side studies (and the pair study itself) are never asked about.
    assert asked == ["newer"]
    assert single_study(session, pair, lambda s: s is older) is older
    assert single_study(session, pair, lambda s: s is someone_elses) is None
    assert single_study(session, pair, lambda s: False) is None

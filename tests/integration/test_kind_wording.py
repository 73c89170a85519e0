"""A kind's pages speak its own words: the leaderboard explains consistency clusters in the
kind's terms (Common-ToM's propositions only on a Common-ToM study)."""

from __future__ import annotations

from app.kinds import all_kinds
from tests.conftest import create_tom_study, login, make_user


def test_the_leaderboard_explains_clusters_in_the_kinds_words(client, session):
    owner = make_user(session, "researcher")
    study = create_tom_study(session, owner)
    session.commit()
    login(client, owner)
    page = client.get(f"/studies/{study.id}/leaderboard").text
    assert "a cluster is a proposition, i.e. a dialogue and event number" in page
    # No other kind borrows Common-ToM's explanation.
    others = [k for name, k in all_kinds().items() if name != "tom"]
    assert others and not any("proposition" in k.cluster_help for k in others)

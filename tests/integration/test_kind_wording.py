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


# Words and controls that belong to one kind only: (kind, marker) never on another kind's pages.
OWN_WORDS = [
    ("tom", '"answer": "Yes"|"No"'),
    ("tom", "Common-ToM"),
    ("tom", "proposition"),
    ("tom", "Random baseline (Yes rate"),
    ("navigation", "Generation runs"),
    ("hexagons", "Executor runs"),
    ("a3ds", "Captioner runs"),
    ("sts", "Suites, recordings"),
]


def test_a_kinds_study_page_and_leaderboard_show_only_what_applies_to_it(client, session):
    from app.studies.models import Study
    from tests.preview_fixtures import every_kind

    owner = make_user(session, "researcher")
    studies = every_kind(session, owner)
    login(client, owner)
    for name, study_id in studies.items():
        kind = all_kinds()[session.get(Study, study_id).kind]
        page = client.get(f"/studies/{study_id}").text
        board = client.get(f"/studies/{study_id}/leaderboard").text
        for owner_kind, marker in OWN_WORDS:
            if owner_kind != kind.name:
                assert marker not in page and marker not in board, (name, marker)
        # An output import only where the kind's agents have outputs to import; an import of
        # earlier people's answers only where the kind reads them.
        assert ('id="agent-import"' in page) == kind.imports_outputs, name
        assert ('id="prior"' in page) == bool(kind.prior_label), name
        # The researcher's way to see the worker's pages stores nothing.
        assert f"/studies/{study_id}/preview" in page and "test worker" not in page
        # Consistency only where the items come in clusters (Common-ToM's propositions).
        clustered = any(
            r.get("consistency") for r in client.get(f"/api/v1/studies/{study_id}/leaderboard").json()["rows"]
        )
        assert ("Consistency</th>" in board) == clustered and ("consistency =" in board) == clustered, name
        # The exports card sits with its button.
        assert 'id="jobs"' in page and "Export annotations and scores" in page


def test_the_new_study_form_ties_each_kinds_fields_to_that_kind(client, session):
    import re

    login(client, make_user(session, "researcher"))
    page = client.get("/studies/new").text
    for name, kind in all_kinds().items():
        for fmt in kind.item_formats:
            assert f'value="{fmt}" data-kind="{name}"' in page, (name, fmt)
        if kind.option_fields:
            # The kind's options sit in its own panel, which the page hides for other kinds.
            panel = re.search(rf'<div data-kind-panel="{name}">(.*?)</fieldset>', page, re.S)
            assert panel is not None and f'id="{name}-options"' in panel.group(1), name
        if kind.form_help:
            assert f'data-kind-panel="{name}" id="{name}-help"' in page

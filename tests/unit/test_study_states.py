"""A study's states are listed once (app/studies/models.StudyState): the services' transitions
and the API's accepted values follow it, so a new state cannot be added in one place only."""

from app.studies.models import STUDY_STATES
from app.studies.services import TRANSITIONS


def test_transitions_cover_exactly_the_study_states():
    assert set(TRANSITIONS) == set(STUDY_STATES)
    assert set().union(*TRANSITIONS.values()) <= set(STUDY_STATES)


def test_the_api_offers_the_same_states():
    from app.api import StateIn

    schema = StateIn.model_json_schema()["properties"]["state"]
    assert tuple(schema["enum"]) == STUDY_STATES

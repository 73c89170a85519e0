"""What the Common-ToM importer stores: item ids and consistency clusters with event numbers
as written, and the random baseline's Yes rate with where it came from."""

import math
from pathlib import Path

import pytest

from app.errors import InputError
from app.kinds.tom import KIND

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tom"
DOTTED_CG = (FIXTURES / "dotted_enos.jsonl").read_bytes()
DOTTED_CSV = (FIXTURES / "dotted_enos.csv").read_bytes()
PROPOSITIONS = {"call-7:12.1", "call-7:12.4", "call-7:12.10", "call-8:3", "call-8:12.4"}


@pytest.mark.parametrize("data, fmt, n", [(DOTTED_CG, "cg", 126), (DOTTED_CSV, "csv", 42)])
def test_clusters_are_propositions_with_enos_as_written(data, fmt, n):
    """One cluster per proposition (dialogue, eno), across every point in time it is asked at."""
    result = KIND.import_items(data, fmt, {})
    assert len(result.items) == len({i.external_id for i in result.items}) == n
    assert {i.cluster for i in result.items} == PROPOSITIONS
    points = {}
    for i in result.items:
        cid, sno, eno, *_ = i.external_id.split(":")
        assert i.cluster == f"{cid}:{eno}"
        points.setdefault(i.cluster, set()).add(int(sno))
    # 12.1 of call-7 and 3 of call-8 are asked at two points; both points share one cluster.
    assert points == {
        "call-7:12.1": {12, 13},
        "call-7:12.4": {12},
        "call-7:12.10": {12},
        "call-8:3": {3, 4},
        "call-8:12.4": {12},
    }
    assert "call-7:13:12.1:AB:CT+" in {i.external_id for i in result.items}


def test_baseline_rate_defaults_to_the_uploads_yes_share():
    result = KIND.import_items(DOTTED_CG, "cg", {})
    yes = sum(i.reference["answer"] == "Yes" for i in result.items)
    assert result.kind_settings == {"random_yes_rate": yes / 126, "random_yes_source": "this study's items"}
    assert KIND.import_items(DOTTED_CG, "cg", {"random_yes_split": "items"}).kind_settings == result.kind_settings


@pytest.mark.parametrize(
    "options, rate, source",
    [
        ({"random_yes_split": "train"}, 2371 / 5270, "train split"),
        ({"random_yes_split": " Train "}, 2371 / 5270, "train split"),
        ({"random_yes_split": "test"}, 965 / 2104, "test split"),
        ({"random_yes_rate": 0.3}, 0.3, "given at study creation"),
        ({"random_yes_rate": "0.52"}, 0.52, "given at study creation"),
        ({"random_yes_rate": 0}, 0.0, "given at study creation"),
        ({"random_yes_rate": 1}, 1.0, "given at study creation"),
    ],
)
def test_baseline_rate_named_or_given(options, rate, source):
    settings = KIND.import_items(DOTTED_CG, "cg", options).kind_settings
    assert settings["random_yes_source"] == source
    assert settings["random_yes_rate"] == pytest.approx(rate, abs=1e-15)
    assert round(2371 / 5270, 2) == 0.45  # the paper's 0.45 (Table 2)


@pytest.mark.parametrize("rate", [1.5, -0.1, "1.01", "abc", math.nan, math.inf, True, [0.5]])
def test_baseline_rate_outside_0_1_refused(rate):
    with pytest.raises(InputError) as err:
        KIND.import_items(DOTTED_CG, "cg", {"random_yes_rate": rate})
    assert err.value.field == "random_yes_rate"
    assert str(err.value) == (
        f"field 'random_yes_rate': the random baseline's Yes rate must be a number from 0 to 1, not {rate!r}"
    )


def test_unknown_split_and_both_refused():
    with pytest.raises(InputError) as err:
        KIND.import_items(DOTTED_CG, "cg", {"random_yes_split": "dev"})
    assert str(err.value) == (
        "field 'random_yes_split': unknown split 'dev': use train, test (the paper's) or items (this study's)"
    )
    with pytest.raises(InputError) as err:
        KIND.import_items(DOTTED_CG, "cg", {"random_yes_split": "train", "random_yes_rate": 0.45})
    assert str(err.value) == ("field 'random_yes_split': give the random baseline's Yes rate or name a split, not both")

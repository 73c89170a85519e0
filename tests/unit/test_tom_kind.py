"""What the Common-ToM importer stores: item ids and consistency clusters with event numbers
as written."""

from pathlib import Path

import pytest

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
    assert points == {"call-7:12.1": {12, 13}, "call-7:12.4": {12}, "call-7:12.10": {12},
                      "call-8:3": {3, 4}, "call-8:12.4": {12}}
    assert "call-7:13:12.1:AB:CT+" in {i.external_id for i in result.items}


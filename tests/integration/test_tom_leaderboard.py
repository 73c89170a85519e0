"""The Common-ToM leaderboard as a researcher sees it: consistency per proposition across
time (Soubki et al. 2024, sections 3 and 4.5), and the random baseline's Yes rate with its
source."""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
from sqlalchemy import select

from app.leaderboards.service import compute
from app.studies import services
from app.studies.models import Item
from tests.conftest import login, make_user

DOTTED_CG = (Path(__file__).parents[1] / "fixtures" / "tom" / "dotted_enos.jsonl").read_bytes()
WRONG = "call-7:13:12.1:AB:CT+"  # the one question the agent gets wrong


def make_study(session, owner, options: dict, title: str = "Dotted"):
    study = services.create_study(
        session, owner, "tom", services.StudySettings(title=title), DOTTED_CG, "cg", {"gold_count": 0, **options}
    )
    services.set_state(session, study, "live", owner)
    return study


def import_all_but_one(session, owner, study) -> None:
    """An agent "all-but-one" whose answers are the gold ones but WRONG's, flipped."""
    items = session.execute(select(Item.external_id, Item.reference).where(Item.study_id == study.id)).all()
    agent = services.register_agent(session, owner, "tom", "all-but-one")
    flip = {"Yes": "No", "No": "Yes"}
    services.import_agent_outputs(
        session,
        study,
        agent,
        "\n".join(
            json.dumps({"question_id": ext, "answer": flip[ref["answer"]] if ext == WRONG else ref["answer"]})
            for ext, ref in items
        ).encode(),
    )


def page_rows(client, study) -> dict[str, list[str]]:
    """Leaderboard table rows as shown: first cell (who) -> the other cells' text."""
    r = client.get(f"/studies/{study.id}/leaderboard")
    assert r.status_code == 200
    body = r.text.split('<table class="grid" id="leaderboard">', 1)[1].split("</table>", 1)[0]
    rows = {}
    for tr in re.findall(r"<tr class=\"\w+\">(.*?)</tr>", body, re.DOTALL):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td>(.*?)</td>", tr, re.DOTALL)]
        rows[cells[0]] = cells[1:]
    return rows


def test_consistency_counts_each_proposition_once_across_time(client, session):
    owner = make_user(session, "researcher")
    login(client, owner)
    study = make_study(session, owner, {"random_yes_rate": 0.45})
    items = session.execute(
        select(Item.external_id, Item.reference, Item.cluster, Item.is_gold).where(Item.study_id == study.id)
    ).all()
    assert len(items) == 126 and not any(gold for *_, gold in items)
    import_all_but_one(session, owner, study)

    board = compute(session, study)
    row = next(r for r in board["rows"] if r["type"] == "agent")
    # Five propositions; 12.1 of call-7 has one wrong answer at its second point (sno 13),
    # so it is not consistent although its first point is all right: 4 of 5, not 6 of 7.
    assert (row["consistency"]["n"], row["consistency"]["mean"]) == (5, pytest.approx(0.8))
    shown = page_rows(client, study)
    assert shown["all-but-one v1"][-1].startswith("0.800 [")

    # The random baseline's chance of getting a whole proposition right: p^yes (1-p)^no over
    # all its questions, at every point; its consistency is the mean over the 5 propositions.
    p = 0.45
    counts = defaultdict(lambda: [0, 0])
    for ext, ref, *_ in items:
        cid, _, eno, *_ = ext.split(":")
        counts[cid, eno][ref["answer"] == "No"] += 1
    expected = sum(p**y * (1 - p) ** n for y, n in counts.values()) / len(counts)
    base = next(r for r in board["rows"] if r["type"] == "baseline")
    assert base["consistency"]["n"] == 5
    assert base["consistency"]["mean"] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    "options, name",
    [
        ({"random_yes_split": "train"}, "Random baseline (Yes rate 0.45, train split)"),
        ({"random_yes_split": "test"}, "Random baseline (Yes rate 0.46, test split)"),
        ({"random_yes_rate": 0.52}, "Random baseline (Yes rate 0.52, given at study creation)"),
        ({}, "Random baseline (Yes rate {share:.2f}, this study's items)"),
    ],
)
def test_baseline_row_names_its_rate_and_source(client, session, options, name):
    owner = make_user(session, "researcher")
    login(client, owner)
    study = make_study(session, owner, options)
    refs = session.scalars(select(Item.reference).where(Item.study_id == study.id)).all()
    name = name.format(share=sum(r["answer"] == "Yes" for r in refs) / len(refs))
    assert [r["name"] for r in compute(session, study)["rows"] if r["type"] == "baseline"] == [name]
    assert page_rows(client, study)[name][0] == "baseline"


def test_baseline_of_a_study_from_before_sources_were_kept(client, session):
    owner = make_user(session, "researcher")
    login(client, owner)
    study = make_study(session, owner, {"random_yes_rate": 0.45})
    study.kind_settings = {"random_yes_rate": 0.45}
    session.commit()
    assert "Random baseline (Yes rate 0.45, source not recorded)" in page_rows(client, study)


@pytest.mark.parametrize(
    "split, rate, name",
    [
        ("train", "", "Random baseline (Yes rate 0.45, train split)"),
        ("", "0.3", "Random baseline (Yes rate 0.30, given at study creation)"),
    ],
)
def test_the_form_and_the_api_name_the_baselines_split(client, session, split, rate, name):
    """The new-study form offers the paper's splits; the API takes the same field."""
    from app.studies.models import Study

    owner = make_user(session, "researcher")
    csrf = login(client, owner)
    form = client.get("/studies/new").text
    assert '<option value="train"' in form and 'name="tom.random_yes_split"' in form
    data = (Path(__file__).resolve().parents[1] / "fixtures" / "tom" / "questions.csv").read_bytes()
    r = client.post(
        "/api/v1/studies",
        headers={"X-CSRF-Token": csrf},
        data={
            "kind": "tom",
            "settings": json.dumps({"title": f"Split {split or rate}"}),
            "random_yes_split": split,
            "random_yes_rate": rate,
        },
        files={"file": ("q.csv", data, "text/csv")},
    )
    assert r.status_code == 201, r.text
    study = session.get(Study, r.json()["id"])
    names = [row["name"] for row in compute(session, study)["rows"] if row["type"] == "baseline"]
    assert names == [name]
    both = client.post(
        "/api/v1/studies",
        headers={"X-CSRF-Token": csrf},
        data={
            "kind": "tom",
            "settings": json.dumps({"title": "Both"}),
            "random_yes_split": "train",
            "random_yes_rate": "0.3",
        },
        files={"file": ("q.csv", data, "text/csv")},
    )
    assert both.status_code == 422 and both.json()["field"] == "random_yes_split"


def _split_csv(n_yes: int, n_no: int) -> bytes:
    """A question file with the counts of one of the paper's released splits (Table 2)."""
    import csv
    import io

    rows = list(
        csv.reader(
            io.StringIO(
                (Path(__file__).parents[1] / "fixtures" / "tom" / "questions.csv").read_text("utf-8"), newline=""
            )
        )
    )
    head, first = rows[0], rows[1]
    qid, answer, cid = head.index("question_id"), head.index("answer"), head.index("cid")
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(head)
    for i in range(n_yes + n_no):
        row = list(first)
        row[qid], row[cid] = f"{first[qid]}-{i}", f"{first[cid]}-{i // 18}"
        row[answer] = "Yes" if i < n_yes else "No"
        w.writerow(row)
    return out.getvalue().encode()


def test_a_released_split_is_named_with_the_papers_baseline_and_its_gold_left_out(client, session):
    csrf = login(client, make_user(session, "researcher"))
    form = {
        "csrf_token": csrf,
        "title": "Released",
        "kind": "tom",
        "format": "csv",
        "action": "preview",
        "tom.gold_count": "30",
    }

    def preview(data: bytes, **changed) -> str:
        r = client.post("/studies/new", data={**form, **changed}, files={"file": ("q.csv", data)})
        assert r.status_code == 200, r.text[-500:]
        return html.unescape(r.text)

    test_split = _split_csv(965, 1139)  # the paper's test split: 965 Yes, 1139 No
    page = preview(test_split)
    # 30 gold of 2104: the agents are scored on the other 2074.
    assert (
        "30 will serve as gold: they check workers and leave every score, agents' included, "
        "so agents are scored on 2074" in page
    )
    assert "This is the paper's released test split" in page and "2371 / 5270 = 0.4499" in page
    assert "this study would use 0.4587, test split" not in page  # the default: the file's own rate
    assert "this study would use 0.4587, this study's items" in page
    page = preview(test_split, **{"tom.random_yes_split": "train"})
    assert "2371 / 5270 = 0.4499, as chosen" in page
    # Not a released split: nothing claimed.
    assert 'id="tom-released"' not in preview(_split_csv(10, 12))

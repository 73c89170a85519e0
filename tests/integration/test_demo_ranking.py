"""The demo's adaptive ranking study (issue 29: "a researcher can plan, run adaptively and stop
a demo study from the pages"): seeded, its leaderboard shows a settled comparison and open
ones; the researcher marks an open one on the study page, more listeners answer, and the
sweeper pauses the study once it settles."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.demo import simulate_task
from app.kinds.a3ds import RANKING_TITLE, _demo_ranking
from app.leaderboards import adaptive
from app.studies.models import Item, Study
from tests.conftest import csrf_of, login, make_user


def _verdicts(html: str) -> list[str]:
    return re.findall(r"(\w+ above \w+, settled after \d+ picture pairs|open after \d+ picture pairs)", html)


def test_the_demo_ranking_settles_one_comparison_and_stops_on_a_marked_one(client, session):
    owner = make_user(session, "researcher")
    study = _demo_ranking(session, owner)
    assert _demo_ranking(session, owner) is None  # made once
    login(client, owner)

    # Seeded: live, adaptive, three speakers; the clearest pair settled, the others open.
    assert (study.state, study.adaptive, study.title) == ("live", True, RANKING_TITLE)
    board = client.get(f"/studies/{study.id}/leaderboard")
    assert board.status_code == 200
    settled = board.text[board.text.index('id="a3ds_settled"') :]
    verdicts = _verdicts(settled)
    assert len(verdicts) == 3, verdicts
    assert any(v.startswith("contrastive above short, settled after") for v in verdicts), verdicts
    assert sum(v.startswith("open after") for v in verdicts) == 2, verdicts

    # The study page: the plan card filled with the study's own figures (each speaker's score
    # so far, its 60 picture pairs, one annotation each), whose plan answers in place...
    page = client.get(f"/studies/{study.id}").text
    card = page[page.index('<section class="card" id="plan">') :]
    card = card[: card.index("</section>")]
    assert "contrastive, literal, short, in that order" in card
    scores = [float(x) for x in re.search(r'id="plan-scores" value="([^"]+)"', card)[1].split(",")]
    assert scores[0] > 0.85 and scores[2] < 0.4 and scores[0] > scores[1] > scores[2], scores
    assert 'name="items" type="number" min="2" value="60"' in card
    assert 'name="annotations" type="number" min="1" value="1"' in card
    fields = dict(re.findall(r'<input (?:type="hidden" )?name="(\w+)"[^>]* value="([^"]*)"', card))
    assert fields["kind"] == "a3ds" and fields["scores"] == ", ".join(f"{x:.2f}" for x in scores)
    planned = client.post("/studies/new/plan", data=fields)
    assert planned.status_code == 200 and 'id="plan-table"' in planned.text, planned.text
    # ...adaptive allocation on, and a box for each of the three comparisons.
    assert re.search(r'id="adaptive-on" checked', page)
    assert 'id="auto-pause"' in page and page.count('name="pair"') == 3

    # Stop: the open comparison of the best two marked; the sweeper leaves the study live.
    r = client.post(
        f"/studies/{study.id}/auto-pause",
        data={"csrf_token": csrf_of(client), "pair": ['["contrastive", "literal"]']},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    adaptive.refresh()
    session.expire_all()
    assert session.get(Study, study.id).state == "live"
    assert "contrastive vs literal: open after" in client.get(f"/studies/{study.id}").text

    # More listeners (the contrastive captions read right, the literal ones wrong) until the
    # marked comparison settles; the sweeper, running between them, then pauses the study.
    def answer(item: Item, rng) -> dict:
        ref = item.reference
        right = ref["captioner"] != "literal"
        return {"choice": str(ref["target"] if right else 3 - ref["target"])}

    for k in range(10):
        study = session.get(Study, study.id)
        if study.state != "live":
            break
        simulate_task(session, study, f"newcomer-{k}", answer, 6.0, seed=k)
        adaptive.refresh()
        session.expire_all()
    assert session.get(Study, study.id).state == "paused"
    page = client.get(f"/studies/{study.id}").text
    assert 'id="auto-paused"' in page and "Paused itself at" in page
    assert "contrastive vs literal: contrastive above literal, settled after" in page
    left = session.scalars(select(Item).where(Item.study_id == study.id, Item.n_active == 0)).all()
    assert left  # stopped before every picture pair was judged: the judgements saved

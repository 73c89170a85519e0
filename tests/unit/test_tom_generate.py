"""Battery generation from CG-annotated dialogues, the demo data, and `proctor tom check`."""

import dataclasses
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from app.errors import InputError
from app.kinds.tom.check import check_files
from app.kinds.tom.formats import parse_questions_csv, write_questions_csv
from app.kinds.tom.generate import generate_battery, parse_cg_dialogues
from app.kinds.tom.rules import BELIEFS, CG_LABELS

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "app" / "kinds" / "tom" / "demo_data" / "dialogues.jsonl"
FIXTURE = ROOT / "tests" / "fixtures" / "tom" / "questions.csv"


def lab(sno, ba, bb, ca, cb):
    return {"sno": sno, "belief_A": ba, "belief_B": bb, "cg_A": ca, "cg_B": cb}


def dialogue(**over):
    d = {
        "cid": "kitchen-1",
        "utterances": [
            {"speaker": "A", "text": "Did you stop smoking?"},
            {"speaker": "B", "text": "I did, last month."},
            "A: Good for you.",
            {"speaker": "B", "text": "Well, mostly. I had one on Friday."},
            {"speaker": "A", "text": "Ah."},
        ],
        "propositions": [
            {
                "eno": 1,
                "text": "B is now not smoking",
                "labels": [
                    lab(1, "NB", "NB", "NA", "NA"),
                    lab(2, "NB", "CT+", "NA", "NA"),
                    lab(3, "CT+", "CT+", "JA", "JA"),  # changed
                    lab(4, "CT+", "PS", "JA", "RT"),  # changed
                    lab(5, "CT+", "PS", "JA", "RT"),  # same as before: no questions
                ],
            }
        ],
    }
    d.update(over)
    return d


def refusal(data):
    with pytest.raises(InputError) as err:
        parse_cg_dialogues(data)
    return err.value


# --- generation -------------------------------------------------------------------------


def test_18_questions_per_point_only_where_labels_change():
    (d,) = parse_cg_dialogues(json.dumps(dialogue()).encode())
    qs = generate_battery([d])
    assert len(qs) == 4 * 18
    assert sorted(Counter(q.sno for q in qs).items()) == [(1, 18), (2, 18), (3, 18), (4, 18)]
    assert Counter(q.order for q in qs) == {1: 24, 2: 24, 3: 24}
    assert len({q.question_id for q in qs}) == len(qs)


def test_generated_questions_carry_labels_context_and_rule_answers():
    (d,) = parse_cg_dialogues(json.dumps(dialogue()).encode())
    qs = {q.question_id: q for q in generate_battery([d])}
    q = qs["kitchen-1:4:1:BA:CT-"]
    assert q.question == (
        "At the time indicated by 🛑, is it the case that B believes that A believes "
        "it is certainly not true that B is now not smoking?"
    )
    assert (q.belief_A, q.belief_B, q.cg_A, q.cg_B, q.order) == ("CT+", "PS", "JA", "RT", 2)
    assert q.answer == "No"  # Bel(A) is CT+, not CT-
    assert qs["kitchen-1:4:1:B:PS"].answer == "Yes"
    assert qs["kitchen-1:3:1:AB:PS"].answer == "Yes"  # CT+ with A's CG JA answers "possibly"
    assert (q.context_type, q.annotator, q.cid) == ("generated", "rules", "kitchen-1")
    assert q.context.splitlines()[3] == "B: Well, mostly. I had one on Friday. 🛑"
    assert q.context.count("🛑") == 1 and q.utterances[2] == ("A", "Good for you.")


def test_battery_round_trips_through_csv():
    qs = generate_battery(parse_cg_dialogues(DEMO.read_bytes()))
    back = parse_questions_csv(write_questions_csv(qs))
    assert [q.model_dump(exclude={"line"}) for q in back] == [q.model_dump(exclude={"line"}) for q in qs]


def test_demo_data():
    dialogues = parse_cg_dialogues(DEMO.read_bytes())
    assert len(dialogues) == 4
    assert all(14 <= len(d.utterances) <= 20 and 2 <= len(d.propositions) <= 4 for d in dialogues)
    labels = [lab for d in dialogues for p in d.propositions for lab in p.labels]
    assert {v for lab in labels for v in (lab.belief_A, lab.belief_B)} == set(BELIEFS)
    assert {v for lab in labels for v in (lab.cg_A, lab.cg_B)} == set(CG_LABELS)
    qs = generate_battery(dialogues)
    points = sum(len(p.points()) for d in dialogues for p in d.propositions)
    assert points < len(labels)  # some listed labels repeat the previous ones
    assert len(qs) == 18 * points and 300 <= len(qs) <= 1000
    for order in (1, 2, 3):
        assert {q.answer for q in qs if q.order == order} == {"Yes", "No"}


def test_fixture_is_the_first_demo_dialogue():
    """tests/fixtures/tom/questions.csv = the battery of trip-1's first two propositions."""
    first = parse_cg_dialogues(DEMO.read_bytes())[0]
    first = dataclasses.replace(first, propositions=first.propositions[:2])
    assert write_questions_csv(generate_battery([first])) == FIXTURE.read_bytes()


def test_json_array_and_jsonl_accepted():
    one, two = dialogue(), dialogue(cid="kitchen-2")
    as_array = parse_cg_dialogues(json.dumps([one, two], indent=2).encode())
    as_jsonl = parse_cg_dialogues((json.dumps(one) + "\n\n" + json.dumps(two) + "\n").encode())
    assert as_array == as_jsonl and [d.cid for d in as_jsonl] == ["kitchen-1", "kitchen-2"]


# --- refusals ---------------------------------------------------------------------------


def test_bad_json_names_line():
    err = refusal(b'{"cid": "x",\n "utterances": [\n}')
    assert err.line == 3 and "JSON" in err.message
    err = refusal((json.dumps(dialogue()) + "\n" + '{"cid": "y", ').encode())
    assert err.line == 2 and "JSON" in err.message


def test_empty_file():
    assert refusal(b"  \n").line == 1


def test_pretty_json_error_names_the_objects_line():
    d = dialogue()
    d["propositions"][0]["labels"][2]["cg_A"] = "XX"
    err = refusal(json.dumps(d, indent=2).encode())
    assert err.field == "propositions[0].labels[2].cg_A" and "XX" in err.message
    text = json.dumps(d, indent=2).splitlines()
    # the line of the "{" opening the offending label object
    assert text[err.line].strip().startswith('"sno": 3')


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d.update(cid=""), "cid"),
        (lambda d: d.pop("utterances"), "utterances"),
        (lambda d: d.update(utterances=[]), "utterances"),
        (lambda d: d["utterances"][1].update(speaker="C"), "utterances[1].speaker"),
        (lambda d: d["utterances"][1].update(text="two\nlines"), "utterances[1].text"),
        (lambda d: d["utterances"][1].update(text="has 🛑"), "utterances[1].text"),
        (lambda d: d["propositions"][0].update(eno="one"), "propositions[0].eno"),
        (lambda d: d["propositions"][0].update(text=""), "propositions[0].text"),
        (lambda d: d["propositions"][0].update(labels=[]), "propositions[0].labels"),
        (lambda d: d["propositions"].append(dict(d["propositions"][0])), "propositions[1].eno"),
        (lambda d: d["propositions"][0]["labels"][1].update(sno=9), "propositions[0].labels[1].sno"),
        (lambda d: d["propositions"][0]["labels"][1].update(sno=1), "propositions[0].labels[1].sno"),
        (lambda d: d["propositions"][0]["labels"][1].update(belief_B="CT"), "propositions[0].labels[1].belief_B"),
        (lambda d: d["propositions"][0]["labels"][1].pop("cg_B"), "propositions[0].labels[1].cg_B"),
    ],
)
def test_bad_dialogue_values(change, field):
    first, second = dialogue(cid="ok"), dialogue()
    change(second)
    err = refusal((json.dumps(first) + "\n" + json.dumps(second) + "\n").encode())
    assert (err.line, err.field) == (2, field)


def test_duplicate_cid():
    err = refusal((json.dumps(dialogue()) + "\n" + json.dumps(dialogue()) + "\n").encode())
    assert (err.line, err.field) == (2, "cid")


# --- checker ----------------------------------------------------------------------------


def flipped_fixture(tmp_path, flip=(3, 40)):
    qs = parse_questions_csv(FIXTURE.read_bytes())
    for i in flip:
        qs[i].answer = "No" if qs[i].answer == "Yes" else "Yes"
    path = tmp_path / "flipped.csv"
    path.write_bytes(write_questions_csv(qs))
    return path, qs


def test_check_clean_file():
    out = io.StringIO()
    assert check_files([str(FIXTURE)], out=out) == 0
    assert out.getvalue() == "0 of 108 questions disagree with the rules\n"


def test_check_reports_flipped_answers(tmp_path):
    path, qs = flipped_fixture(tmp_path)
    out = io.StringIO()
    assert check_files([str(path)], out=out) == 1
    lines = out.getvalue().splitlines()
    assert lines[-1] == "2 of 108 questions disagree with the rules"
    assert len(lines) == 3
    for line, q in zip(lines, (qs[3], qs[40])):
        rule = "No" if q.answer == "Yes" else "Yes"
        assert line == f"{path}:{q.line}: {q.question_id}: stored {q.answer}, rules say {rule}"


def test_check_counts_over_several_files(tmp_path):
    path, _ = flipped_fixture(tmp_path, flip=(0,))
    out = io.StringIO()
    assert check_files([str(FIXTURE), str(path)], out=out) == 1
    assert out.getvalue().splitlines()[-1] == "1 of 216 questions disagree with the rules"


def test_check_malformed_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(FIXTURE.read_bytes().replace(b",NB,PS,CT+,NA,", b",NB,PS,CT+,XX,", 1))
    out = io.StringIO()
    assert check_files([str(bad)], out=out) == 2
    assert out.getvalue().startswith(f"{bad}: line 2, field 'cg_A': ")
    out = io.StringIO()
    assert check_files([str(tmp_path / "missing.csv")], out=out) == 2


def test_overlong_conversation_id_is_refused():
    import json

    import pytest

    from app.errors import InputError
    from app.kinds.tom.generate import parse_cg_dialogues

    doc = {
        "cid": "c" * 201,
        "utterances": [{"speaker": "A", "text": "Hi."}],
        "propositions": [
            {
                "eno": 1,
                "text": "it rains",
                "labels": [{"sno": 1, "belief_A": "CT+", "belief_B": "NB", "cg_A": "JA", "cg_B": "NA"}],
            }
        ],
    }
    with pytest.raises(InputError) as err:
        parse_cg_dialogues(json.dumps(doc).encode())
    assert err.value.field == "cid"


# --- event numbers (eno) ----------------------------------------------------------------

DOTTED = ROOT / "tests" / "fixtures" / "tom" / "dotted_enos.jsonl"


def test_dotted_enos_kept_as_written():
    """JSON numbers 12.1, 12.4, 12.10 (three events, though 12.1 == 12.10 as floats), the
    string "12.4" and the whole number 3 all stay the text written."""
    d7, d8 = parse_cg_dialogues(DOTTED.read_bytes())
    assert [p.eno for p in d7.propositions] == ["12.1", "12.4", "12.10"]
    assert [p.eno for p in d8.propositions] == ["3", "12.4"]
    qs = generate_battery([d7, d8])
    assert len(qs) == 7 * 18 and len({q.question_id for q in qs}) == 7 * 18
    assert Counter((q.cid, q.eno) for q in qs) == {
        ("call-7", "12.1"): 36,
        ("call-7", "12.4"): 18,
        ("call-7", "12.10"): 18,
        ("call-8", "3"): 36,
        ("call-8", "12.4"): 18,
    }
    by_id = {q.question_id: q for q in qs}
    assert by_id["call-7:12:12.1:A:PS"].proposition == "B brings the bike over on Saturday morning"
    assert by_id["call-7:12:12.10:A:PS"].proposition == "A and B look at the bike on Saturday"
    assert by_id["call-8:12:12.4:B:CT+"].proposition == "B buys a seeded loaf on the way home"


def test_number_and_string_of_one_eno_are_one_event():
    d = dialogue()
    d["propositions"] = [dict(d["propositions"][0], eno=12.4), dict(d["propositions"][0], eno="12.4")]
    err = refusal(json.dumps(d).encode())
    assert err.field == "propositions[1].eno" and err.message == "proposition 12.4 appears twice"


@pytest.mark.parametrize(
    "raw, shown",
    [
        ('"one"', "'one'"),
        ("-1", "-1"),
        ("1e3", "1e3"),
        ("12.5E1", "12.5E1"),
        ("-12.4", "-12.4"),
        ("true", "True"),
        ("null", "None"),
        ("[12]", "[12]"),
        ('"12..4"', "'12..4'"),
    ],
)
def test_bad_eno(raw, shown):
    text = json.dumps(dialogue()).replace('"eno": 1,', f'"eno": {raw},')
    err = refusal(text.encode())
    assert err.field == "propositions[0].eno"
    assert err.message == (
        f"{shown} is not an event number such as 3 or 12.4 (digits, optionally dotted, at most 20 characters)"
    )


def test_fractional_sno_still_refused():
    text = json.dumps(dialogue()).replace('"sno": 2,', '"sno": 2.0,')
    err = refusal(text.encode())
    assert err.field == "propositions[0].labels[1].sno" and err.message == "must be a whole number, not 2.0"

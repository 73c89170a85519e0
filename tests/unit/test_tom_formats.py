"""The Common-ToM question CSV, agent answer JSONL and the context window."""

import csv
import gzip
import io
from pathlib import Path

import pytest

from app.errors import InputError
from app.kinds.tom.formats import COLUMNS, parse_answers_jsonl, parse_questions_csv, window, write_questions_csv

FIXTURE = Path(__file__).parents[1] / "fixtures" / "tom" / "questions.csv"
Q = "At the time indicated by 🛑, is it the case that {chain} it is {cert} true that the van is free?"


def row(**over):
    """A valid record whose context has 3 lines (so the next record starts 3 lines later)."""
    cells = {
        "sno": "2",
        "eno": "1",
        "belief_A": "CT+",
        "belief_B": "PS",
        "belief_Q": "PS",
        "cg_A": "JA",
        "cg_B": "JA",
        "order": "2",
        "question": Q.format(chain="A believes that B believes", cert="possibly"),
        "answer": "Yes",
        "context_type": "test",
        "cid": "c1",
        "annotator": "me",
        "context": "A: Is the van free?\nB: I think so. 🛑\nA: Good.",
    }
    cells.update(over)
    return cells


def to_csv(rows, columns=COLUMNS, id_header=None, ids=None):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(([id_header] if id_header is not None else []) + list(columns))
    for i, r in enumerate(rows):
        w.writerow(([ids[i] if ids else str(i)] if id_header is not None else []) + [r.get(c, "") for c in columns])
    return out.getvalue().encode()


def refusal(data):
    with pytest.raises(InputError) as err:
        parse_questions_csv(data)
    return err.value


# --- good files -------------------------------------------------------------------------


def test_fixture_parses():
    qs = parse_questions_csv(FIXTURE.read_bytes())
    assert len(qs) == 108 and len({q.question_id for q in qs}) == 108
    q = qs[0]
    assert q.question_id == "trip-1:4:1:A:CT+" and q.line == 2
    assert (q.sno, q.eno, q.order, q.chain, q.belief_Q) == (4, "1", 1, ("A",), "CT+")
    assert q.proposition == "a train leaves at seven on Saturday"
    assert q.utterances[3] == ("B", "There's one at seven, but I'm not sure it runs at weekends.")
    assert len(q.utterances) == 18 and all("🛑" not in t for _, t in q.utterances)
    assert qs[1].line == 2 + 18  # the context of record 1 spans 18 physical lines
    assert {q.answer for q in qs} == {"Yes", "No"}


def test_gzipped_equals_plain():
    plain = FIXTURE.read_bytes()
    assert parse_questions_csv(gzip.compress(plain)) == parse_questions_csv(plain)


def test_round_trip():
    qs = parse_questions_csv(FIXTURE.read_bytes())
    assert write_questions_csv(qs) == FIXTURE.read_bytes()


@pytest.mark.parametrize("header", ["", "id", "question_id"])
def test_id_column_variants(header):
    qs = parse_questions_csv(
        to_csv([row(), row(sno="1", context="A: Free? 🛑\nB: Yes.")], id_header=header, ids=["17", "18"])
    )
    assert [q.question_id for q in qs] == ["17", "18"]


def test_without_id_column_ids_come_from_content():
    qs = parse_questions_csv(to_csv([row(), row()]))
    assert [q.question_id for q in qs] == ["c1:2:1:AB:PS", "c1:2:1:AB:PS~2"]
    assert [q.line for q in qs] == [2, 5]


def test_answers_are_normalised_and_disagreement_is_kept():
    qs = parse_questions_csv(to_csv([row(answer="true"), row(answer=" FALSE "), row(answer="no")]))
    assert [q.answer for q in qs] == ["Yes", "No", "No"]
    assert qs[1].rule_answer() == "Yes"  # kept: the checker reports it, the parser does not


def test_crlf_and_bom_and_vs16():
    data = to_csv([row(context="A: Free?\nB: Yes. 🛑\ufe0f\nA: Good.")]).replace(b"\n", b"\r\n")
    (q,) = parse_questions_csv(b"\xef\xbb\xbf" + data)
    assert q.utterances == [("A", "Free?"), ("B", "Yes."), ("A", "Good.")]


# --- refusals: (line, field) ------------------------------------------------------------
# Record 1 starts on line 2 and spans 3 lines, so record 2 starts on line 5.


@pytest.mark.parametrize("data", [b"", b"\n\n"])
def test_empty_file(data):
    err = refusal(data)
    assert err.line == 1 and "empty" in err.message


def test_header_only():
    err = refusal(to_csv([]))
    assert err.line == 2 and "no questions" in err.message


def test_truncated_gzip():
    err = refusal(gzip.compress(FIXTURE.read_bytes())[:-200])
    assert "gzip" in err.message and "truncated" in err.message


def test_corrupt_gzip():
    data = bytearray(gzip.compress(FIXTURE.read_bytes()))
    data[-6] ^= 0xFF  # damage the stored CRC/length
    err = refusal(bytes(data))
    assert "gzip" in err.message and "corrupt" in err.message


def test_not_utf8():
    data = to_csv([row(), row(annotator="X")]).replace(b",X,", b",\xff,")
    err = refusal(data)
    assert err.line == 5 and "UTF-8" in err.message


def test_unknown_and_missing_columns():
    err = refusal(to_csv([row()], columns=COLUMNS + ("speaker",)))
    assert (err.line, err.field) == (1, "speaker") and "unknown column" in err.message
    err = refusal(to_csv([row()], columns=tuple(c for c in COLUMNS if c != "cg_B")))
    assert (err.line, err.field) == (1, "cg_B") and "missing column" in err.message
    err = refusal(to_csv([row()], columns=("id",) + COLUMNS, id_header="id"))
    assert (err.line, err.field) == (1, "id")


def test_wrong_number_of_cells():
    data = to_csv([row(), row()]) + b"1,2,CT+\n"
    err = refusal(data)
    assert (err.line, err.field) == (8, "belief_B") and "3 cells" in err.message


def test_broken_quoting():
    data = to_csv([row()]) + b'1,"2"x,3\n'
    err = refusal(data)
    assert err.line == 5 and "malformed CSV" in err.message


@pytest.mark.parametrize(
    "field, value",
    [
        ("belief_A", "CT"),
        ("belief_B", "maybe"),
        ("belief_Q", "NB"),
        ("cg_A", "JJ"),
        ("cg_B", ""),
        ("order", "4"),
        ("answer", "perhaps"),
        ("sno", "two"),
        ("eno", "1.x"),
        ("order", "x"),
    ],
)
def test_bad_values(field, value):
    err = refusal(to_csv([row(), row(**{field: value})]))
    assert (err.line, err.field) == (5, field)


@pytest.mark.parametrize("sno", ["0", "4"])
def test_sno_outside_context(sno):
    err = refusal(to_csv([row(), row(sno=sno)]))
    assert (err.line, err.field) == (5, "sno") and "outside" in err.message


@pytest.mark.parametrize(
    "context",
    [
        "A: Is the van free? 🛑\nB: I think so.\nA: Good.",  # on the wrong line
        "A: Is the van free?\nB: I think so.\nA: Good.",  # missing
        "A: Is the van free? 🛑\nB: I think so. 🛑\nA: Good.",  # twice
    ],
)
def test_stop_sign_not_on_sno(context):
    err = refusal(to_csv([row(), row(context=context)]))
    assert (err.line, err.field) == (5, "context") and "🛑" in err.message


def test_context_line_without_speaker():
    err = refusal(to_csv([row(), row(context="A: Free?\nI think so. 🛑")]))
    assert (err.line, err.field) == (5, "context")


def test_duplicate_question_id():
    err = refusal(to_csv([row(), row()], id_header="question_id", ids=["q1", "q1"]))
    assert (err.line, err.field) == (5, "question_id") and "duplicate" in err.message


def test_question_not_in_template():
    err = refusal(to_csv([row(), row(question="Does A think the van is free?")]))
    assert (err.line, err.field) == (5, "question")


def test_order_does_not_match_question():
    err = refusal(to_csv([row(), row(order="3")]))
    assert (err.line, err.field) == (5, "order")


def test_belief_q_does_not_match_question():
    err = refusal(to_csv([row(), row(belief_Q="CT+")]))
    assert (err.line, err.field) == (5, "belief_Q")


def test_error_message_names_line_and_field():
    err = refusal(to_csv([row(), row(cg_A="XX")]))
    assert str(err).startswith("line 5, field 'cg_A': ")


# --- window -----------------------------------------------------------------------------

UTTS = [("A" if i % 2 else "B", f"u{i}") for i in range(1, 21)]


def test_window_middle():
    w = window(UTTS, 10)
    assert [u["index"] for u in w] == list(range(5, 16))
    assert [u["index"] for u in w if u["target"]] == [10]
    assert w[5] == {"index": 10, "speaker": "B", "text": "u10", "target": True}


def test_window_clipped_at_edges():
    assert [u["index"] for u in window(UTTS, 1)] == [1, 2, 3, 4, 5, 6]
    assert [u["index"] for u in window(UTTS, 3)] == list(range(1, 9))
    assert [u["index"] for u in window(UTTS, 20)] == list(range(15, 21))
    assert [u["index"] for u in window(UTTS[:3], 2)] == [1, 2, 3]
    with pytest.raises(ValueError):
        window(UTTS, 21)


# --- agent answers ----------------------------------------------------------------------

KNOWN = {"q1", "q2", "7"}


def test_answers_jsonl():
    data = b'{"question_id": "q1", "answer": "Yes"}\n\n{"question_id": "q2", "answer": "no"}\n{"question_id": 7, "answer": false}\n'
    assert parse_answers_jsonl(data, KNOWN) == {"q1": "Yes", "q2": "No", "7": "No"}


@pytest.mark.parametrize(
    "line2, field, words",
    [
        ('{"question_id": "q2", "answer": ', None, "JSON"),
        ('["q2", "Yes"]', None, "object"),
        ('{"answer": "Yes"}', "question_id", "missing"),
        ('{"question_id": "q2"}', "answer", "missing"),
        ('{"question_id": "q2", "answer": "maybe"}', "answer", "Yes or No"),
        ('{"question_id": "q9", "answer": "Yes"}', "question_id", "unknown"),
        ('{"question_id": "q1", "answer": "No"}', "question_id", "duplicate"),
    ],
)
def test_answers_jsonl_refusals(line2, field, words):
    data = ('{"question_id": "q1", "answer": "Yes"}\n\n' + line2 + "\n").encode()
    with pytest.raises(InputError) as err:
        parse_answers_jsonl(data, KNOWN)
    assert (err.value.line, err.value.field) == (3, field) and words in err.value.message


def test_stop_sign_inside_a_line():
    err = refusal(to_csv([row(), row(context="A: Free?\nB: I 🛑 think so.\nA: Good.")]))
    assert (err.line, err.field) == (5, "context") and "end its line" in err.message


# --- event numbers (eno) ----------------------------------------------------------------

DOTTED = Path(__file__).parents[1] / "fixtures" / "tom" / "dotted_enos.csv"


def test_dotted_enos_are_kept_as_written():
    """The released files number events like 12.4; 12.1, 12.4 and 12.10 are three events."""
    qs = parse_questions_csv(DOTTED.read_bytes())
    assert len(qs) == 42 and len({q.question_id for q in qs}) == 42
    assert {(q.cid, q.eno) for q in qs} == {
        ("call-7", "12.1"),
        ("call-7", "12.4"),
        ("call-7", "12.10"),
        ("call-8", "3"),
        ("call-8", "12.4"),
    }
    ids = {q.question_id for q in qs}
    assert {
        "call-7:12:12.1:A:CT+",
        "call-7:12:12.10:A:CT+",
        "call-7:12:12.4:A:CT+",
        "call-7:13:12.1:A:CT+",
        "call-8:12:12.4:A:CT+",
        "call-8:3:3:A:CT+",
    } <= ids
    assert all(isinstance(q.eno, str) for q in qs)
    # Written back, the text survives: 12.10 is not 12.1.
    again = parse_questions_csv(write_questions_csv(qs))
    assert [(q.question_id, q.eno) for q in again] == [(q.question_id, q.eno) for q in qs]


def test_eno_spaces_dropped_and_whole_numbers_kept():
    qs = parse_questions_csv(to_csv([row(eno=" 12.4 "), row(eno="3", sno="3", context="A: a\nB: b\nA: c 🛑")]))
    assert [q.eno for q in qs] == ["12.4", "3"]
    assert [q.question_id for q in qs] == ["c1:2:12.4:AB:PS", "c1:3:3:AB:PS"]


@pytest.mark.parametrize("eno", ["", "twelve", "-1", "+3", "1e3", "12.", ".4", "12..4", "12,4", "1" * 21])
def test_bad_eno(eno):
    err = refusal(to_csv([row(), row(eno=eno)]))
    assert (err.line, err.field) == (5, "eno")
    assert err.message == (
        f"{eno!r} is not an event number such as 3 or 12.4 (digits, optionally dotted, at most 20 characters)"
    )

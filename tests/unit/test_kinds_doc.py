"""docs/kinds.md lists every member of the kind interface (`TaskKind`), so a lab writing a kind
learns of each from the docs, and a member added to the interface without a line there fails."""

from pathlib import Path

from app.kinds.base import TaskKind

DOC = Path(__file__).resolve().parents[2] / "docs" / "kinds.md"


def test_every_member_of_the_kind_interface_is_in_the_docs():
    text = DOC.read_text(encoding="utf-8")
    members = [n for n in vars(TaskKind) if not n.startswith("_")]
    assert len(members) > 40  # the interface itself, not an empty class
    missing = [n for n in members if f"`{n}`" not in text and f"`{n}(" not in text]
    assert not missing, f"docs/kinds.md does not name these TaskKind members: {missing}"

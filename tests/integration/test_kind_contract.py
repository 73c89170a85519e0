"""The kind contract (tests/kind_contract.py) for every installed kind, found through the
registry: a new kind, a lab's own included, is held to it without editing this file."""

from app.kinds import all_kinds
from tests.kind_contract import KindContract

for _name in all_kinds():
    _cls = f"TestKindContract_{_name}"
    globals()[_cls] = type(_cls, (KindContract,), {"kind_name": _name})

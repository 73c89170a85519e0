"""Task kinds: one package per evaluation protocol, each declaring a `TaskKind`.

The core never branches on a kind's name; it asks the registry.
"""

from __future__ import annotations

import importlib

from app.kinds.base import ItemSpec, TaskKind

# Packages that declare a kind; each exposes `KIND`.
KIND_MODULES = ["app.kinds.tom", "app.kinds.navigation"]

_registry: dict[str, TaskKind] = {}


def all_kinds() -> dict[str, TaskKind]:
    if not _registry:
        for mod in KIND_MODULES:
            kind = importlib.import_module(mod).KIND
            _registry[kind.name] = kind
    return _registry


def get_kind(name: str) -> TaskKind:
    try:
        return all_kinds()[name]
    except KeyError:
        raise KeyError(f"unknown task kind {name!r}") from None


__all__ = ["ItemSpec", "TaskKind", "all_kinds", "get_kind"]

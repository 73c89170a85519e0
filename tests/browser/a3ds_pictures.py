"""Waiting for an A3DS item's pictures, drawn by the server, to have loaded."""

from __future__ import annotations


def pictures_loaded(root: str = "document") -> str:
    """A predicate for wait_for_function. It needs at least one picture: `[].every` is true, so
    without that a wait begun while the consent page was still up passed at once, and the next
    key reached the page before the item (CI, test_csp)."""
    return (
        "() => { const i = [...(" + root + ").querySelectorAll('.a3ds-scene img')];"
        " return i.length > 0 && i.every(e => e.complete && e.naturalWidth > 0); }"
    )

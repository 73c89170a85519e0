"""Crowd platforms behind one interface (app/crowd/base.py): entry parameters, completion,
and what a platform can do besides (approve and reject, bonus). The core asks this registry;
adding a platform is one module here and one line in PLATFORMS (docs/crowd.md)."""

from __future__ import annotations

from collections.abc import Mapping

from app.crowd.base import CrowdPlatform, Entry
from app.crowd.direct import Direct
from app.crowd.mturk import MTurk
from app.crowd.prolific import Prolific

# In the order a link's parameters are tried: the first platform whose worker parameter the
# link carries takes it.
PLATFORMS: tuple[CrowdPlatform, ...] = (MTurk(), Prolific(), Direct())
_BY_NAME = {p.name: p for p in PLATFORMS}
# A worker whose platform is not known (an old session, an imported annotator): the defaults.
UNKNOWN = CrowdPlatform()


def platform(name: str | None) -> CrowdPlatform:
    """The platform of this name; the plain defaults for one not known."""
    return _BY_NAME.get(name or "", UNKNOWN)


def identify(params: Mapping[str, str]) -> Entry | None:
    """Who the link's parameters name, on the first platform that recognises them."""
    for p in PLATFORMS:
        entry = p.identify(params)
        if entry is not None:
            return entry
    return None


def is_preview(params: Mapping[str, str]) -> bool:
    """Whether a platform shows this link as a preview (nothing is entered)."""
    return any(p.is_preview(params) for p in PLATFORMS)


def framers() -> str:
    """The sites that may frame the crowd's pages and receive their forms (space-separated)."""
    return " ".join(dict.fromkeys(site for p in PLATFORMS for site in p.framers))


def missing_worker_message() -> str:
    """What a link without any platform's worker id is told."""
    named = [f"{p.label or 'a lab'}'s link ({', '.join((p.worker_param, *p.other_params))})" for p in PLATFORMS]
    return f"This link is missing the worker's id: open it from {', '.join(named[:-1])} or {named[-1]}."

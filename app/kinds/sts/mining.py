"""Scenario mining: where in a recording the agent takes over (the paper's section 3.1-3.2).

A scenario is a recording, a takeover point (the number of the recording's actions forced on
the agent: its context), a continuation length (how many actions the agent then takes alone),
the instruction, a category and free tags. The bulk rules of issue 11:

- "first step": takeover 0, the agent acts from the start (no context).
- "mission given": the step at which the instruction is given. A BabyAI mission comes with the
  first observation, before any action, so this is step 0 too: the same as "first step" here.
  (A simulator where the instruction arrives mid-episode would say so through `mission_step`.)
- "before success": k steps before the recording's success, i.e. takeover = success step - k,
  for recordings that succeed (the expert's); k must be 1..success step.

Each scenario is a plain dict (`make_scenario`), ready to store:
{"recording": id, "takeover": int, "continuation": int, "instruction": str,
 "category": str, "tags": [str]}.
"""

from __future__ import annotations

from app.kinds.sts.env import CATEGORIES, Simulator, get_simulator
from app.kinds.sts.recordings import Outcome, Replayable, RecordingError, check

RULES: tuple[str, ...] = ("first step", "mission given", "before success")
MAX_CONTINUATION = 1000
MAX_TAGS = 20
MAX_TAG_LENGTH = 64


def mission_step(recording: Replayable) -> int:
    """The step at which the recording's instruction is given: 0 in BabyAI (see above)."""
    return 0


def takeover_point(
    recording: Replayable,
    rule: str,
    k: int | None = None,
    simulator: Simulator | None = None,
    *,
    outcome: Outcome | None = None,
) -> int:
    """The takeover step the rule gives for this recording. RecordingError naming the
    recording's line and the field ("rule", "k", "actions") when the rule does not apply.
    `outcome`: the recording's `check` when already known (saves a replay)."""
    line = recording.line
    if rule == "first step":
        return 0
    if rule == "mission given":
        return mission_step(recording)
    if rule != "before success":
        raise RecordingError(f"unknown rule {rule!r}: use one of {', '.join(RULES)}", line=line, field="rule")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise RecordingError(f"k must be a whole number of steps, at least 1, not {k!r}", line=line, field="k")
    success = (outcome or check(recording, simulator)).success
    if success is None:
        raise RecordingError(
            "the recording never succeeds, so it has no step before success", line=line, field="actions"
        )
    if k > success:
        raise RecordingError(
            f"k = {k} is more than the {success} steps to the recording's success", line=line, field="k"
        )
    return success - k


def make_scenario(
    recording: Replayable,
    takeover: int,
    continuation: int,
    *,
    category: str | None = None,
    tags=(),
    simulator: Simulator | None = None,
    outcome: Outcome | None = None,
) -> dict:
    """A scenario of `recording`: its first `takeover` actions forced, then `continuation` actions
    of the agent's own. Checks the recording replays and that the takeover step is inside it and
    before its episode ended (there must be something left to do). The category defaults to the
    level's family. `outcome` as in `takeover_point`."""
    sim = simulator or get_simulator()
    line = recording.line
    if recording.id is None:
        raise RecordingError("the recording has no id to refer to", line=line, field="id")
    if isinstance(takeover, bool) or not isinstance(takeover, int) or takeover < 0:
        raise RecordingError(
            f"the takeover step must be a whole number from 0, not {takeover!r}", line=line, field="takeover"
        )
    n = len(recording.actions)
    if takeover > n:
        raise RecordingError(
            f"takeover step {takeover} is beyond the recording, which has {n} actions", line=line, field="takeover"
        )
    end = (outcome or check(recording, sim)).end  # a recording's episode can only end at its last action
    if end is not None and takeover >= end:
        raise RecordingError(
            f"takeover step {takeover} is where the recording's episode ended "
            f"(step {end}): nothing is left to continue",
            line=line,
            field="takeover",
        )
    if isinstance(continuation, bool) or not isinstance(continuation, int) or not 1 <= continuation <= MAX_CONTINUATION:
        raise RecordingError(
            f"the continuation length must be 1-{MAX_CONTINUATION} steps, not {continuation!r}",
            line=line,
            field="continuation",
        )
    if category is None:
        category = sim.category_of(recording.level, recording.mission)
    if not isinstance(category, str) or not category.strip() or len(category) > MAX_TAG_LENGTH:
        raise RecordingError(
            f"category must be a non-empty text of at most {MAX_TAG_LENGTH} characters", line=line, field="category"
        )
    tags = list(tags)
    if len(tags) > MAX_TAGS or not all(isinstance(t, str) and t.strip() and len(t) <= MAX_TAG_LENGTH for t in tags):
        raise RecordingError(
            f"tags must be at most {MAX_TAGS} non-empty texts of at most {MAX_TAG_LENGTH} characters",
            line=line,
            field="tags",
        )
    return {
        "recording": recording.id,
        "takeover": takeover,
        "continuation": continuation,
        "instruction": recording.mission,
        "category": category.strip(),
        "tags": list(dict.fromkeys(t.strip() for t in tags)),
    }


RULE_TAG = "rule:"
UNKNOWN = "unknown"  # a recording's success step not known (tags_now keeps what it cannot check)


def rule_holds(rule: str, takeover: int, success_step: int | None | str = UNKNOWN) -> bool | None:
    """Whether `rule` gives (for "before success": with some k >= 1) this takeover step on a
    recording whose success step is `success_step` (None: it never succeeds). None when it
    cannot be told: an unknown rule, or "before success" with the success step UNKNOWN."""
    if rule in ("first step", "mission given"):  # both step 0 in BabyAI (mission_step)
        return takeover == 0
    if rule == "before success":
        if success_step == UNKNOWN:
            return None
        return success_step is not None and 0 <= takeover < success_step
    return None


def tags_now(tags, takeover: int | None, success_step: int | None | str = UNKNOWN) -> list[str]:
    """A scenario's tags as true of it now: a "rule:..." tag from mining is dropped when the
    scenario's takeover point (moved since it was mined) is not one the rule gives. Tags that
    cannot be checked are kept."""
    out = []
    for t in tags or []:
        if (
            isinstance(t, str)
            and t.startswith(RULE_TAG)
            and isinstance(takeover, int)
            and rule_holds(t[len(RULE_TAG) :], takeover, success_step) is False
        ):
            continue
        out.append(t)
    return out


def mine(
    recordings: list[Replayable],
    rule: str,
    continuation: int,
    *,
    k: int | None = None,
    tags=(),
    simulator: Simulator | None = None,
    skip_inapplicable: bool = False,
) -> list[dict]:
    """One scenario per recording by a bulk rule, tagged with the rule ("rule:before success").
    With `skip_inapplicable`, recordings the rule does not apply to (for "before success": no
    success, or fewer than k steps to it) are left out instead of refused."""
    sim = simulator or get_simulator()
    out = []
    for rec in recordings:
        outcome = check(rec, sim)  # once per recording: it validates and gives the outcome
        if (
            skip_inapplicable
            and rule == "before success"
            and (outcome.success is None or (isinstance(k, int) and k > outcome.success))
        ):
            continue
        takeover = takeover_point(rec, rule, k, sim, outcome=outcome)
        out.append(
            make_scenario(rec, takeover, continuation, tags=[*tags, f"rule:{rule}"], simulator=sim, outcome=outcome)
        )
    return out


__all__ = ["CATEGORIES", "RULES", "make_scenario", "mine", "mission_step", "rule_holds", "tags_now", "takeover_point"]

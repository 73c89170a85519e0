"""The `sts.validate` job: load an uploaded policy and run it on real BabyAI observations.

As workers/navigation/validate.py: both formats load in a sandboxed process of their own
(workers/sandbox.py: limits on CPU time, memory and the time a call may take; no files, no
network), safetensors weights are first checked tensor by tensor against their config
(policy.build), and each check stops at the first problem with a verdict that names it
("missing method act()", "act() returned shape [8, 6], expected [8, 7]", "act() raised
RuntimeError", "the model ran past its CPU time limit"). A verdict never repeats the model's
own text. The interface is written out in docs/kinds/sts-policies.md.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from app.kinds.sts.env import ACTIONS, get_simulator
from app.kinds.sts.observations import VOCAB_VERSION
from app.kinds.sts.recordings import expert_recording, replay
from workers.validation import Invalid, call_checked, check_interface, one_role
from workers.sts.loading import LOADER
from workers.sts.policy import observation_tensors

INTERFACE = ("vocab_version", "act")
# A few levels of different families and mission lengths; two states of one expert episode
# each (the first step, and halfway to success): every upload is tried on the same batch.
LEVELS = ("BabyAI-GoToLocal-v0", "BabyAI-PickupLoc-v0", "BabyAI-OpenDoor-v0", "BabyAI-PutNextLocal-v0")
_SEED = 5
# How far apart the same observation's probabilities may be, alone and in the batch (float32
# arithmetic on other shapes differs in the last bits; a batch-dependent model by far more).
_TOLERANCE = 1e-4


@functools.lru_cache(maxsize=1)
def observations() -> dict:
    """The test batch, as rollout.batch_observations gives it."""
    sim = get_simulator()
    obs = []
    for level in LEVELS:
        rec = expert_recording(level, _SEED, simulator=sim)
        steps = replay(rec, sim, frames=False).steps
        obs += [steps[0].observation, steps[len(rec.actions) // 2].observation]
    return {
        "image": np.stack([o["image"] for o in obs]).astype(np.uint8),
        "direction": np.array([o["direction"] for o in obs], dtype=np.int64),
        "mission": [o["mission"] for o in obs],
    }


def _shape(t: torch.Tensor) -> str:
    return "[" + ", ".join(str(int(n)) for n in t.shape) + "]"


def _logits(model, image, direction, mission) -> torch.Tensor:
    b = image.shape[0]
    out = call_checked(model, "act", image, direction, mission)
    if not isinstance(out, torch.Tensor):
        raise Invalid(f"act() returned {type(out).__name__}, expected a tensor of logits [{b}, {len(ACTIONS)}]")
    if tuple(out.shape) != (b, len(ACTIONS)):
        raise Invalid(
            f"act() returned shape {_shape(out)}, expected [{b}, {len(ACTIONS)}] (logits over "
            f"minigrid's {len(ACTIONS)} actions)"
        )
    if not out.is_floating_point():
        raise Invalid(f"act() returned dtype {out.dtype}, expected a floating-point tensor")
    if bool(torch.isnan(out).any()):
        raise Invalid("act() returned NaN")
    if not bool(torch.isfinite(out).all()):
        raise Invalid("act() returned an infinite logit")
    return out.float()


def check_policy(model) -> str:
    """The checks, in order; the verdict for a model that passes them all."""
    check_interface(model, INTERFACE, "a policy", "docs/kinds/sts-policies.md")
    if call_checked(model, "vocab_version") != VOCAB_VERSION:  # its text is the model's: not repeated
        raise Invalid(
            f"vocab_version() does not return {VOCAB_VERSION!r}, the mission vocabulary this "
            "platform encodes (docs/kinds/sts-policies.md)"
        )
    image, direction, mission = observation_tensors(observations())
    b = image.shape[0]
    logits = _logits(model, image, direction, mission)
    probs = torch.softmax(logits.double(), -1)
    again = torch.softmax(_logits(model, image, direction, mission).double(), -1)
    if not torch.allclose(again, probs, atol=_TOLERANCE, rtol=0):
        raise Invalid(
            "act() answered the same observations differently the second time: a policy must be "
            "deterministic (the platform samples its actions from the probabilities)"
        )
    # Alone, each observation's mission carries no padding: the answer must be the same.
    for i in range(b):
        length = max(1, int((mission[i] != 0).sum()))
        alone = _logits(model, image[i : i + 1], direction[i : i + 1], mission[i : i + 1, :length])
        if not torch.allclose(torch.softmax(alone.double(), -1), probs[i : i + 1], atol=_TOLERANCE, rtol=0):
            raise Invalid(
                f"act() answered observation {i} differently alone than in a batch of {b}: a policy's "
                "answer must not depend on the other observations or on the missions' padding"
            )
    return f"policy: act() ran on {b} observations from {len(LEVELS)} BabyAI levels, alone and batched"


validate_bytes, run_validation = one_role("STS", "policy", LOADER, check_policy)

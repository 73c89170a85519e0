"""The built-in STS policy architecture an agent may upload as safetensors weights plus a
config (docs/kinds/sts-policies.md): what the config must hold. No torch here (the web side
checks it at upload; the weights' tensor names and shapes are checked by the validation job,
workers/sts/loading.py)."""

from __future__ import annotations

from app.agents.configs import check_architecture, only_fields, written_by
from app.errors import InputError
from app.kinds.sts.env import ACTIONS
from app.kinds.sts.observations import COLOURS, N_DIRECTIONS, OBJECTS, STATES, VIEW, VOCAB_VERSION, WORDS

# The built-in architecture (workers/sts/policy.py) and the integer sizes its config needs,
# each capped: far above what BabyAI needs, far below a memory bomb (the head alone is
# channels * 49 * hidden weights: 256 * 49 * 1024 = 12.8M at the caps).
ARCHITECTURES = {"film-cnn-gru": ("policy", ("embed", "channels", "hidden"))}
MAX_SIZES = {"embed": 256, "channels": 256, "hidden": 1024}
FIELDS = ("architecture", "vocab_version", *MAX_SIZES)


def check_config(role: str, config: object) -> dict:
    """The config of the built-in policy; each problem names its field."""
    config = check_architecture(role, config, ARCHITECTURES, MAX_SIZES, written_by("policy", "sts-policy"))
    if config.get("vocab_version") != VOCAB_VERSION:
        raise InputError(
            f"vocab_version {config.get('vocab_version')!r} does not match {VOCAB_VERSION}, "
            "the mission vocabulary this platform encodes",
            field="config.vocab_version",
        )
    return only_fields(config, FIELDS)


def expected_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """The state_dict of film-cnn-gru (workers/sts/policy.py) for a config, name -> shape, in
    the module's order (a test keeps the two equal): what the weights of an upload must hold."""
    e, c, h = int(config["embed"]), int(config["channels"]), int(config["hidden"])
    return {
        "objects.weight": (len(OBJECTS), e),
        "colours.weight": (len(COLOURS), e),
        "states.weight": (len(STATES), e),
        "words.weight": (len(WORDS), e),
        "gru.weight_ih_l0": (3 * h, e),
        "gru.weight_hh_l0": (3 * h, h),
        "gru.bias_ih_l0": (3 * h,),
        "gru.bias_hh_l0": (3 * h,),
        "conv1.weight": (c, e, 3, 3),
        "conv1.bias": (c,),
        "conv2.weight": (c, c, 3, 3),
        "conv2.bias": (c,),
        "film1.weight": (2 * c, h),
        "film1.bias": (2 * c,),
        "film2.weight": (2 * c, h),
        "film2.bias": (2 * c,),
        "direction.weight": (N_DIRECTIONS, e),
        "head.0.weight": (h, c * VIEW * VIEW + e),
        "head.0.bias": (h,),
        "head.2.weight": (h, h),
        "head.2.bias": (h,),
        "head.4.weight": (len(ACTIONS), h),
        "head.4.bias": (len(ACTIONS),),
    }

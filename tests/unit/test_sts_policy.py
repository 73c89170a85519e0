"""STS policies (docs/kinds/sts-policies.md): the mission vocabulary, the built-in architecture
and its config, and the behavioural-cloning baseline (`proctor train sts-policy`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from app.errors import InputError
from app.kinds.sts import architectures
from app.kinds.sts.env import LEVELS, BabyAISimulator
from app.kinds.sts.observations import MAX_TOKENS, UNK, VOCAB_VERSION, WORDS, encode_missions, tokenize
from workers.sts.policy import FilmPolicy, TorchPolicy, build
from workers.sts.train import (
    HELD_OUT_SEEDS,
    action_accuracy,
    demonstrations,
    episode_jobs,
    load_policy,
    success_rate,
    train_policy,
)

SIM = BabyAISimulator()
CONFIG = {"architecture": "film-cnn-gru", "vocab_version": VOCAB_VERSION, "embed": 8, "channels": 8, "hidden": 16}


def test_the_vocabulary_covers_every_mission_babyai_writes():
    missions = {SIM.reset(level, seed).mission for level in LEVELS for seed in range(8)}
    unknown = {w for m in missions for w in tokenize(m) if w not in WORDS}
    assert unknown == set()
    assert len(missions) > 100  # the scan saw many missions, not a handful
    # every word is used by some level (none is dead weight in the embedding)
    seen = {w for m in missions for w in tokenize(m)}
    assert set(WORDS) - seen == {"<pad>", "<unk>"}
    # the version pins the list: reordering it would silently change every upload's input
    assert VOCAB_VERSION == "proctor.sts.vocab/1"
    assert WORDS[:2] == ("<pad>", "<unk>") and len(WORDS) == 34 and len(set(WORDS)) == 34


def test_missions_are_word_ids_padded_on_the_right():
    ids = encode_missions(["pick up the red ball, then go to a door", "open the DOOR", "go to the zebra"])
    assert ids.dtype == np.int64 and ids.shape == (3, 10)
    assert ids[0].tolist() == [WORDS.index(w) for w in "pick up the red ball then go to a door".split()]
    assert ids[1].tolist() == [WORDS.index("open"), WORDS.index("the"), WORDS.index("door")] + [0] * 7
    assert ids[2, :4].tolist() == [WORDS.index("go"), WORDS.index("to"), WORDS.index("the"), UNK]
    assert encode_missions([""]).tolist() == [[0]]  # never zero-width
    assert encode_missions(["go " * 200]).shape == (1, MAX_TOKENS)


def test_the_config_check_names_the_field():
    assert architectures.check_config("policy", dict(CONFIG)) == CONFIG
    bad = [
        ([], "config"),
        ({**CONFIG, "architecture": "transformer"}, "config.architecture"),
        ({**CONFIG, "vocab_version": "proctor.sts.vocab/0"}, "config.vocab_version"),
        ({**CONFIG, "hidden": 0}, "config.hidden"),
        ({**CONFIG, "hidden": 1025}, "config.hidden"),
        ({**CONFIG, "channels": 257}, "config.channels"),
        ({**CONFIG, "embed": True}, "config.embed"),
        ({**CONFIG, "embed": "8"}, "config.embed"),
        ({k: v for k, v in CONFIG.items() if k != "channels"}, "config.channels"),
        ({**CONFIG, "hiden": 16}, "config.hiden"),
    ]
    for config, field in bad:
        with pytest.raises(InputError) as refused:
            architectures.check_config("policy", config)
        assert refused.value.field == field, (config, str(refused.value))
    with pytest.raises(InputError, match="hidden must be an integer from 1 to 1024, got 1025"):
        architectures.check_config("policy", {**CONFIG, "hidden": 1025})


@pytest.mark.parametrize("sizes", [(8, 8, 16), (3, 5, 7), (32, 64, 128)])
def test_the_torch_free_shapes_are_the_modules(sizes):
    e, c, h = sizes
    config = {**CONFIG, "embed": e, "channels": c, "hidden": h}
    model = FilmPolicy(e, c, h)
    assert list(architectures.expected_shapes(config).items()) == [
        (k, tuple(v.shape)) for k, v in model.state_dict().items()
    ]
    assert model.config() == config


def test_weights_that_do_not_fit_the_config_are_named():
    state = FilmPolicy(8, 8, 16).state_dict()
    cases = [
        (
            {**CONFIG, "hidden": 32},
            state,
            "tensor 'gru.weight_ih_l0' has shape [48, 8], but the config (embed 8, channels 8, hidden 32) needs [96, 8]",
        ),
        (
            CONFIG,
            {k: v for k, v in state.items() if k != "head.4.bias"},
            "tensor 'head.4.bias' is missing (the config: embed 8, channels 8, hidden 16)",
        ),
        (
            CONFIG,
            {**state, "extra.weight": torch.zeros(2)},
            "tensor 'extra.weight' is not part of film-cnn-gru (the config: embed 8, channels 8, hidden 16)",
        ),
        (
            CONFIG,
            {**state, "conv1.bias": torch.zeros(8, dtype=torch.int64)},
            "tensor 'conv1.bias' has dtype torch.int64, expected a floating-point one",
        ),
        ({**CONFIG, "vocab_version": "x"}, state, "vocab_version must be 'proctor.sts.vocab/1'"),
    ]
    for config, weights, message in cases:
        with pytest.raises(ValueError) as refused:
            build(config, weights)
        assert str(refused.value) == message
    assert isinstance(build(CONFIG, state), FilmPolicy)


def test_an_answer_depends_on_neither_the_batch_nor_the_padding():
    torch.manual_seed(0)
    model = FilmPolicy(8, 8, 16).eval()
    scripted = torch.jit.script(model)
    rng = np.random.default_rng(0)
    image = torch.from_numpy(rng.integers(0, 6, (5, 7, 7, 3)).astype(np.uint8))
    direction = torch.tensor([0, 1, 2, 3, 1])
    mission = torch.from_numpy(
        encode_missions(
            [
                "go to the red ball",
                "open a door",
                "pick up the key",
                "put the box next to the grey ball",
                "go to the door",
            ]
        )
    )
    with torch.no_grad():
        batch = model.act(image, direction, mission)
        assert torch.allclose(scripted.act(image, direction, mission), batch, atol=1e-6)
        for i in range(5):
            n = int((mission[i] != 0).sum())
            assert torch.allclose(
                model.act(image[i : i + 1], direction[i : i + 1], mission[i : i + 1, :n]), batch[i : i + 1], atol=1e-5
            )
        # out-of-range indices are clamped, never an index error
        wild = model.act(torch.full((1, 7, 7, 3), 255, dtype=torch.uint8), torch.tensor([9]), torch.tensor([[99]]))
    assert torch.isfinite(wild).all() and scripted.vocab_version() == VOCAB_VERSION
    probs = TorchPolicy(model)(
        {
            "image": image.numpy(),
            "direction": direction.numpy(),
            "mission": [
                "go to the red ball",
                "open a door",
                "pick up the key",
                "put the box next to the grey ball",
                "go to the door",
            ],
        }
    )
    assert probs.shape == (5, 7) and np.allclose(probs.sum(1), 1.0)
    assert np.allclose(probs, torch.softmax(batch.double(), -1).numpy(), atol=1e-6)


def test_training_is_deterministic_with_a_seed():
    data = demonstrations(["BabyAI-GoToObj-v0"], range(6), SIM)
    assert data.episodes == 6 and len(data) == len(data.image) == len(data.mission) > 6
    one = train_policy(data, embed=4, channels=4, hidden=8, epochs=2, batch=16, seed=3)
    two = train_policy(data, embed=4, channels=4, hidden=8, epochs=2, batch=16, seed=3)
    other = train_policy(data, embed=4, channels=4, hidden=8, epochs=2, batch=16, seed=4)
    assert all(torch.equal(a, b) for a, b in zip(one.state_dict().values(), two.state_dict().values()))
    assert not all(torch.equal(a, b) for a, b in zip(one.state_dict().values(), other.state_dict().values()))


def test_the_cloned_policy_beats_the_random_one_on_held_out_episodes(tmp_path):
    """`proctor train sts-policy` end to end, tiny: a few hundred expert steps, seconds."""
    from app.cli import main as cli

    out = tmp_path / "models"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "sts-policy",
            "--levels",
            "GoToObj,GoToLocal",
            "--episodes",
            "40",
            "--held-out",
            "30",
            "--epochs",
            "12",
            "--embed",
            "16",
            "--channels",
            "16",
            "--hidden",
            "64",
            "--device",
            "cpu",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "policy-quality.json").read_text())
    assert 200 <= report["train_steps"] <= 600 and report["held_out"] == 30
    # The robust claims: it ranks the expert's action first far more often than the most common
    # action is right, and it completes far more held-out episodes than the random policy.
    assert report["action_accuracy"] > report["majority_action_accuracy"] + 0.03
    assert report["success_rate"]["episodes"] == report["random_success_rate"]["episodes"] == 60
    assert report["success_rate"]["success"] >= report["random_success_rate"]["success"] + 0.2
    assert (
        f"held-out success rate over 60 episodes, actions sampled: {report['success_rate']['success']:.1%}"
        in result.output
    )
    assert f"wrote {out / 'policy.safetensors'} and {out / 'policy.json'}" in result.output
    # the files are the upload format: the config passes the upload's check, the weights load
    config = json.loads((out / "policy.json").read_text())
    assert architectures.check_config("policy", config) == config
    model = load_policy(out / "policy.safetensors", config)
    assert set(load_file(out / "policy.safetensors")) == set(architectures.expected_shapes(config))
    # and that model is the one measured: its accuracy on the same held-out seeds
    test = demonstrations(["BabyAI-GoToObj-v0", "BabyAI-GoToLocal-v0"], range(HELD_OUT_SEEDS, HELD_OUT_SEEDS + 30), SIM)
    assert action_accuracy(model, test) == pytest.approx(report["action_accuracy"])


def test_the_command_refuses_an_unknown_level_and_a_missing_gpu(tmp_path):
    from app.cli import main as cli

    result = CliRunner().invoke(cli, ["train", "sts-policy", "--levels", "GoToMars", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "unknown level 'GoToMars'" in result.output
    if not torch.cuda.is_available():
        result = CliRunner().invoke(cli, ["train", "sts-policy", "--device", "cuda", "--out", str(tmp_path)])
        assert result.exit_code == 2 and "CUDA is not available here" in result.output
    assert not list(tmp_path.iterdir())


def test_success_rate_counts_whole_episodes_per_level():
    jobs = episode_jobs(["BabyAI-GoToObj-v0", "BabyAI-GoToLocal-v0"], range(3), SIM, seed=7)
    assert [(j.recording.level, j.recording.seed, j.takeover, j.seed) for j in jobs] == [
        ("BabyAI-GoToObj-v0", 0, 0, 7),
        ("BabyAI-GoToObj-v0", 1, 0, 8),
        ("BabyAI-GoToObj-v0", 2, 0, 9),
        ("BabyAI-GoToLocal-v0", 0, 0, 10),
        ("BabyAI-GoToLocal-v0", 1, 0, 11),
        ("BabyAI-GoToLocal-v0", 2, 0, 12),
    ]
    from app.kinds.sts.rollout import expert_policy

    rate = success_rate(expert_policy, jobs, SIM)
    assert rate == {"episodes": 6, "success": 1.0, "per_level": {"BabyAI-GoToObj-v0": 1.0, "BabyAI-GoToLocal-v0": 1.0}}

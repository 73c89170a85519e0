"""The built-in A3DS captioner's parts: its weights are what the config says (the upload check
relies on it), every built-in speaker's caption is in its vocabulary, and token ids decode to
text the documented way."""

from __future__ import annotations

import random

import pytest

from app.errors import InputError
from app.kinds.a3ds.architectures import check_config, decode, encode, expected_shapes, grammar_words
from app.kinds.a3ds.scenes import FEATURES, pair_differing_in
from app.kinds.a3ds.speakers import SPEAKERS, speak


@pytest.mark.parametrize("with_distractor", [False, True])
def test_the_weights_are_the_shapes_the_config_names(with_distractor):
    from workers.a3ds.captioner import Captioner

    model = Captioner(grammar_words(), embed=8, hidden=12, channels=4, with_distractor=with_distractor)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes == expected_shapes(model.config())
    assert check_config("captioner", model.config())["with_distractor"] is with_distractor


def test_every_speakers_caption_is_in_the_grammar_vocabulary_and_decodes_back():
    words, rng = grammar_words(), random.Random(0)
    for _ in range(200):
        pair = pair_differing_in(rng, rng.sample(FEATURES, rng.randint(1, 6)))
        for speaker in SPEAKERS:
            caption = speak(speaker, pair, 0)
            assert decode(encode(caption, words), words) == caption


def test_decoding_stops_at_the_end_skips_start_and_refuses_unknown_ids():
    words = ["<pad>", "<start>", "<end>", "red", "ball"]
    assert decode([1, 3, 4, 2, 3], words) == "red ball"
    assert decode([3, 0, 4], words) == "red"
    assert decode([2], words) == ""
    with pytest.raises(ValueError, match="outside the vocabulary"):
        decode([3, 5], words)
    with pytest.raises(InputError, match="captioner"):
        check_config("listener", {"architecture": "cnn-gru-captioner"})

"""What a kind need not state (issue 27): its item template's conventional path, its parts'
package, its model jobs' conventional places."""

from __future__ import annotations

from typing import ClassVar

import pytest

from app.kinds.a3ds import KIND as A3DS
from app.kinds.a3ds import ReferenceGame
from app.kinds.base import model_jobs, model_parts


class Captions(ReferenceGame):
    name: ClassVar[str] = "captions"
    item_template: ClassVar[str] = "kinds/captions/caption.html"


def test_a_kind_without_an_item_template_gets_its_folders_item_html():
    assert A3DS.item_template == "kinds/a3ds/item.html"
    # A kind that names its own keeps it.
    assert Captions.item_template == "kinds/captions/caption.html"


def test_a_kind_whose_folder_has_a_replay_item_html_gets_it():
    from tests.example_kind.proctor_wordcount import WordCount

    assert A3DS.replay_item_template == "kinds/a3ds/replay_item.html"
    # A kind whose folder has none keeps what it inherits: a subclass its parent's, a kind the
    # base's None (the replay lists the fields).
    assert Captions.replay_item_template == "kinds/a3ds/replay_item.html"
    assert WordCount.replay_item_template is None


def test_a_part_named_from_the_dot_is_found_in_the_kinds_package():
    from app.kinds.a3ds.architectures import check_config
    from app.kinds.a3ds.views import api, router

    assert A3DS.parts["check_artifact_config"] == ".architectures:check_config"
    assert A3DS._part("check_artifact_config") is check_config
    assert A3DS.routers() == [router, api]


def test_a_subclass_elsewhere_finds_the_parts_it_inherits_where_they_were_declared():
    # Captions is defined in this test module, not in app.kinds.a3ds: ".architectures" is the
    # package of the class that declared the part, not of the subclass.
    from app.kinds.a3ds.architectures import check_config

    assert Captions()._part("check_artifact_config") is check_config

    class Renamed(Captions):  # declares its own part: read against this module's package
        parts: ClassVar[dict[str, str | tuple[str, ...]]] = {"cli": "app.kinds.tom.cli:tom"}

    from app.kinds.tom.cli import tom

    assert Renamed().cli() is tom


def test_model_jobs_name_the_workers_functions():
    assert model_jobs("a3ds", "validate", "train") == {
        "validate": "workers.a3ds.validate:run_validation",
        "train": "workers.a3ds.train:run_train_job",
    }


def test_model_parts_name_the_conventional_modules_and_take_others():
    assert model_parts("a3ds", ".generation:CaptionerRuns", study_context=".generation:study_context") == {
        "agent_runs": ".generation:CaptionerRuns",
        "routers": (".views:router", ".views:api"),
        "cli": ".cli:a3ds",
        "train_commands": ".train:train_commands",
        "check_artifact_config": ".architectures:check_config",
        "study_context": ".generation:study_context",
    }
    assert (
        model_parts("navigation", ".generation:SpeakerRuns", train_commands=".cli:train_commands")["train_commands"]
        == ".cli:train_commands"
    )


def test_a_config_that_is_no_object_names_the_file_and_the_command_that_writes_it():
    from app.errors import InputError
    from app.kinds.a3ds.architectures import check_config as a3ds
    from app.kinds.hexagons.architectures import check_config as hexagons
    from app.kinds.sts.architectures import check_config as sts

    for check, role, said in (
        (a3ds, "captioner", "captioner.json, which `proctor train a3ds-captioner` writes beside captioner.safetensors"),
        (hexagons, "executor", "executor.json, which `proctor train hex-executor` writes beside executor.safetensors"),
        (sts, "policy", "policy.json, which `proctor train sts-policy` writes beside policy.safetensors"),
    ):
        with pytest.raises(InputError) as err:
            check(role, [])
        assert str(err.value).endswith(f"the config must be a JSON object ({said})")

"""What a kind need not state (issue 27): its item template's conventional path, its parts'
package, its model jobs' conventional places."""

from __future__ import annotations

from typing import ClassVar

from app.kinds.a3ds import KIND as A3DS
from app.kinds.a3ds import ReferenceGame
from app.kinds.base import model_jobs


class Captions(ReferenceGame):
    name: ClassVar[str] = "captions"
    item_template: ClassVar[str] = "kinds/captions/caption.html"


def test_a_kind_without_an_item_template_gets_its_folders_item_html():
    assert A3DS.item_template == "kinds/a3ds/item.html"
    # A kind that names its own keeps it.
    assert Captions.item_template == "kinds/captions/caption.html"


def test_a_part_named_from_the_dot_is_found_in_the_kinds_package():
    from app.kinds.a3ds.architectures import check_config
    from app.kinds.a3ds.views import api, router

    assert A3DS.parts["check_artifact_config"] == ".architectures:check_config"
    assert A3DS._part("check_artifact_config") is check_config
    assert A3DS.routers() == [router, api]


def test_model_jobs_name_the_workers_functions():
    assert model_jobs("a3ds", "validate", "train") == {
        "validate": "workers.a3ds.validate:run_validation",
        "train": "workers.a3ds.train:run_train_job",
    }

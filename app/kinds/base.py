"""The one interface every task kind implements (DESIGN.md section 5)."""

from __future__ import annotations

import importlib
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from app.errors import InputError


# A JSON object as the app stores it (payloads, references, responses, settings).
JSONDict = dict[str, Any]


@dataclass
class ItemSpec:
    """An item as an importer produces it, before it is stored."""

    external_id: str
    payload: JSONDict
    reference: JSONDict | None = None
    is_gold: bool = False
    source: str = "dataset"
    category: str = ""
    cluster: str = ""
    exclusion_group: str | None = None
    # The worker (user id) who wrote it, if one did: the assignment engine never gives it to them.
    author_id: int | None = None


@dataclass
class ImportResult:
    items: list[ItemSpec]
    # Kind settings derived from the upload (e.g. the random baseline's Yes rate).
    kind_settings: JSONDict = field(default_factory=dict)
    summary: JSONDict = field(default_factory=dict)
    # Study settings the upload suggests where the researcher left them blank: StudySettings
    # fields, plus "gold_per_bundle" (that many gold slots in every bundle, whatever its size).
    study_defaults: JSONDict = field(default_factory=dict)


@dataclass
class GoldResult:
    """A worker's answer on a gold item, as the automatic review rules see it."""

    item: str  # the item's external id
    score: float | None
    scores: JSONDict | None = None


# The jobs of a kind with models, by name: each is "workers.<kind>.<job>:<function>".
MODEL_JOBS = {"validate": "run_validation", "generate": "run_generation", "train": "run_train_job"}


def model_jobs(kind: str, *jobs: str) -> dict[str, str]:
    """A kind's TaskKind.jobs where its workers package holds them as MODEL_JOBS names them."""
    return {job: f"workers.{kind}.{job}:{MODEL_JOBS[job]}" for job in jobs}


def model_parts(kind: str, agent_runs: str, **more: str) -> dict[str, str | tuple[str, ...]]:
    """A kind's TaskKind.parts where its package is laid out as the built-in kinds with models
    are: pages and API in .views (router, api), its command group .cli:<kind>, train commands
    in .train, built-in architectures in .architectures; `more` adds parts or moves these."""
    return {
        "agent_runs": agent_runs,
        "routers": (".views:router", ".views:api"),
        "cli": f".cli:{kind}",
        "train_commands": ".train:train_commands",
        "check_artifact_config": ".architectures:check_config",
        **more,
    }


class TaskKind(ABC):
    """A protocol: what its items are, how a worker answers one, how answers are scored, and
    everything it adds to the platform (pages, API, commands, tables, jobs). A kind is found
    through the `proctor.kinds` entry-point group (docs/kinds.md); the core asks it, never
    names it. Every attribute below the abstract methods is optional."""

    name: ClassVar[str]
    title: ClassVar[str]
    # Jinja template that renders one item for the worker; a kind's own templates are found as
    # "kinds/<name>/<file>" (its package's templates/ folder). Unset: "kinds/<name>/item.html".
    item_template: ClassVar[str]
    Response: ClassVar[type[BaseModel]]
    category_label: ClassVar[str] = "category"
    # What the worker's pages call one item (its plural, where adding "s" is wrong), and how to
    # work it by keyboard.
    item_noun: ClassVar[str] = "Item"
    item_noun_plural: ClassVar[str] = ""
    keyboard_hint: ClassVar[str] = ""
    # Importers by format name: upload bytes -> items. The first is the default.
    item_formats: ClassVar[tuple[str, ...]] = ()
    # Template that shows all of a worker's answers on the admin's replay page; None: the
    # core's list, one card per answer (replay_item_template).
    replay_template: ClassVar[str | None] = None
    # Jinja template for one answer in the admin's replay (admin/replay.html gives it `a`: the
    # item's "payload", "public" payload, "reference", "response", "score", "scores",
    # "details" from replay_details): the item as the worker saw it, their answer and the right
    # one. Without it the replay lists the fields. Unset: "kinds/<name>/replay_item.html"
    # where the kind's templates/ folder has that file. replay_template, when set, replaces the
    # whole list instead (navigation: its maps).
    replay_item_template: ClassVar[str | None] = None
    # Where the kind sits in lists; the first kind is the one forms and the API default to.
    position: ClassVar[int] = 100

    # -- the new-study form and the study page --------------------------------------------
    # How the form names each upload format.
    format_labels: ClassVar[dict[str, str]] = {}
    # Options the importer takes from the form: name -> ("float" | "int", low, high) or ("text",).
    option_fields: ClassVar[dict[str, tuple[Any, ...]]] = {}
    # The form's fieldset for those options, and the instructions workers see by default.
    # Without a template, the form builds the fieldset from option_fields and option_labels
    # (a number within its bounds, yes/no/default for ("int", 0, 1), or a text field).
    options_template: ClassVar[str | None] = None
    option_labels: ClassVar[dict[str, str]] = {}
    # What the form says once the kind is chosen: what a study of it asks of workers, what to
    # upload, where the docs are.
    form_help: ClassVar[str] = ""
    default_instructions: ClassVar[str] = ""
    # The comprehension check a study of this kind may take as its default (the study page
    # offers it): [{"question", "options", "answer"}, ...]; empty: the researcher writes one.
    comprehension: ClassVar[list[dict[str, Any]]] = []
    # The new-study form's upload preview shows the worker's page in an iframe sandboxed to
    # "allow-scripts": an opaque origin, no cookies, no same-origin fetch. A page that asks the
    # server for what needs the researcher's session (a building's view, a scene's picture) says
    # so here and gets "allow-scripts allow-same-origin", which a script could escape.
    preview_needs_session: ClassVar[bool] = False
    # What the study page's agent-output import asks for (the file's shape); a kind whose
    # agents' outputs are its items (imports_outputs False) gets no such form, and the label is
    # said instead.
    outputs_label: ClassVar[str] = "Outputs (JSONL)"
    imports_outputs: ClassVar[bool] = True
    # What the study page's import of earlier human annotations asks for (import_annotations;
    # blank: the page offers no such import).
    prior_label: ClassVar[str] = ""
    # What a consistency cluster is in this kind's words, for the leaderboard's legend ("" to
    # say nothing beyond "share of clusters with every item right").
    cluster_help: ClassVar[str] = ""
    # What one consistency cluster is called ("proposition"), for an interval's "n = 12 ...".
    cluster_noun: ClassVar[str] = "cluster"
    # The leaderboard's lead (DESIGN.md section 7: each kind's page leads with its own primary
    # metric). `primary_table`: the key of the extra_leaderboard table that opens the page;
    # None: the generic table does (its metric `score_label`, titled `score_title`: what the
    # item score is, in the kind's words). `generic_table`: whether the generic table (score,
    # per category, consistency; agents, baselines, people, majority) means anything for the
    # kind, or only repeats what its own tables show better.
    primary_table: ClassVar[str | None] = None
    generic_table: ClassVar[bool] = True
    score_label: ClassVar[str] = "Accuracy"
    score_title: ClassVar[str] = "Accuracy: the share of items answered right"
    # What an item's right answer is, where the kind's words say more than "the right answer"
    # (the Dawid-Skene and majority table's help); "" for nothing more.
    right_answer: ClassVar[str] = ""
    # A section of the study page (e.g. generation runs), with study_context() as its context.
    study_template: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in vars(cls):
            return
        if not hasattr(cls, "item_template"):
            cls.item_template = f"kinds/{cls.name}/item.html"
        source = getattr(sys.modules.get(cls.__module__), "__file__", None)
        replay_item = source and Path(source).parent / "templates" / "replay_item.html"
        if "replay_item_template" not in vars(cls) and replay_item and replay_item.is_file():
            cls.replay_item_template = f"kinds/{cls.name}/replay_item.html"

    def primary_table_for(self, settings: JSONDict | None = None) -> str | None:
        """The table that opens the leaderboard of a study with these kind_settings:
        primary_table, unless a kind's mode leads with another (STS side by side: its ratings)."""
        return self.primary_table

    # -- what the kind adds to the platform -------------------------------------------------
    # The module whose import defines the kind's tables (on app.db.Base, so foreign keys to
    # the core's tables resolve); new tables are named "<kind>_...".
    models: ClassVar[str | None] = None
    # Background jobs, job name -> "module:function" taking (session, job, progress); each is
    # registered as "<kind>.<job name>". A job named "validate" checks an uploaded model.
    jobs: ClassVar[dict[str, str]] = {}
    # The queue each job waits in (app.jobs.QUEUES): "models" (the default: it runs uploaded or
    # trained models, may take hours and want the GPU) or "exports" (it only reads and writes
    # the database and blobs), so a long model job never holds up a researcher's export.
    job_queues: ClassVar[dict[str, str]] = {}
    # Roles of the models an agent of this kind may upload (docs/agents.md); () for none.
    artifact_roles: ClassVar[tuple[str, ...]] = ()
    # How the agents page describes such a model ("a navigation speaker (path to instruction)").
    artifact_help: ClassVar[str] = ""

    # Where the kind's optional parts live, each "module:name" (a module named from the dot,
    # ".views", is the kind's package's own), imported only when asked for
    # (so a worker process never loads the web code): "routers" (a tuple of FastAPI routers),
    # "cli" (its click group), "train_commands" (a function returning click commands),
    # "check_artifact_config" (a function (role, config) -> config), "agent_runs" (an
    # app.runs.component.AgentRuns class) and "study_context" (a function (session, study) ->
    # dict). The methods below read them; a kind may override a method instead.
    parts: ClassVar[dict[str, str | tuple[str, ...]]] = {}

    def _part(self, name: str) -> Any:
        """The declared part `name`, imported (a tuple: each of them); None when not declared."""
        path = self.parts.get(name)
        if path is None:
            return None
        # A path from the dot is the package of the class that declared it: a subclass made
        # elsewhere inherits the parts of the kind it extends.
        declared = next(c for c in type(self).__mro__ if name in vars(c).get("parts", {}))
        package = sys.modules[declared.__module__].__package__
        if isinstance(path, tuple):
            return [self._resolve(p, package) for p in path]
        return self._resolve(path, package)

    @staticmethod
    def _resolve(path: str, package: str | None) -> Any:
        module, _, attr = path.partition(":")
        return getattr(importlib.import_module(module, package=package), attr)

    def agent_runs(self) -> Any:
        """The kind's agent runs (app.runs.component.AgentRuns): what a run of its models over a
        study (or its own target) takes and stores; None for a kind without. The core gives
        every such kind the one runs API, page section and cancelling (docs/runs.md)."""
        runs = self._part("agent_runs")
        return runs() if runs is not None else None

    def routers(self) -> list[Any]:
        """FastAPI routers with the kind's pages and API routes (parts["routers"])."""
        return self._part("routers") or []

    # Earlier names of the kind's command group, still answered (hidden from the help) for a
    # release, so scripts written against them keep working.
    cli_aliases: ClassVar[tuple[str, ...]] = ()

    def cli(self) -> Any:
        """A click group added to `proctor` under the kind's name (`proctor <name> ...`), or
        None. One name per thing: the group is named as the kind (`cli_aliases` keeps old ones)."""
        return self._part("cli")

    def train_commands(self) -> list[Any]:
        """click commands added under `proctor train` (one per thing the kind can train)."""
        make = self._part("train_commands")
        return make() if make is not None else []

    def check_artifact_config(self, role: str, config: object) -> JSONDict:
        """The config of safetensors weights for one of the kind's built-in architectures;
        raise InputError naming the field. Kinds without built-in architectures refuse."""
        check = self._part("check_artifact_config")
        if check is None:
            raise InputError(
                f"{self.title} has no built-in architectures: upload a TorchScript archive", field="format"
            )
        result: JSONDict = check(role, config)
        return result

    def study_context(self, session: Any, study: Any) -> JSONDict:
        """Context for study_template."""
        context = self._part("study_context")
        return context(session, study) if context is not None else {}

    def preview_context(self, study: Any, item: Any) -> JSONDict:
        """Context the researcher's preview adds when it renders `item` with item_template
        (app.studies.preview): e.g. where a page that asks the server as the worker plays sends
        its requests instead of the crowd route, which needs a task. Nothing may be stored."""
        return {}

    @property
    def package_dir(self) -> Path:
        """The folder of the package that declares the kind."""
        module = importlib.import_module(type(self).__module__)
        return Path(str(module.__file__)).parent

    def _folder(self, *parts: str) -> Path | None:
        path = self.package_dir.joinpath(*parts)
        return path if path.is_dir() else None

    def templates_dir(self) -> Path | None:
        return self._folder("templates")

    def static_dir(self) -> Path | None:
        """Served at /static/kinds/<name>/."""
        return self._folder("static")

    def migrations_dir(self) -> Path | None:
        """The kind's Alembic revisions (a branch of its own, docs/kinds.md)."""
        return self._folder("migrations", "versions")

    def parse_response(
        self, data: JSONDict, payload: JSONDict | None = None, settings: JSONDict | None = None
    ) -> JSONDict:
        """Validate a response; `payload` is the item's (kinds that check a response against
        the item, e.g. a path against the building's graph, use it), `settings` the study's
        kind_settings (kinds whose questions a study configures, e.g. extra Likert items)."""
        try:
            return self.Response.model_validate(data).model_dump()
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(err["msg"], field=".".join(str(p) for p in err["loc"]) or None) from None

    def item_noun_for(self, settings: JSONDict | None = None) -> str:
        """The item noun of a study with these kind_settings ("Picture pair"): item_noun, unless
        a kind's mode names its items otherwise (Hexagons' description: "Target image")."""
        return self.item_noun

    def item_word(self, n: int = 2, settings: JSONDict | None = None) -> str:
        """The item noun within a sentence, for n items: "picture pair" (1), "picture pairs"."""
        noun = self.item_noun_for(settings)
        plural = self.item_noun_plural if noun == self.item_noun else ""
        return (noun if n == 1 else (plural or noun + "s")).lower()

    def keyboard_hint_for(self, settings: JSONDict | None = None) -> str:
        """How to work a study's items by keyboard; `settings` is the study's kind_settings
        (kinds whose keys differ by a study's mode, e.g. Hexagons' description). By default
        keyboard_hint, whatever the settings."""
        return self.keyboard_hint

    def public_payload(self, payload: JSONDict) -> JSONDict:
        """What a worker may see of an item: never the reference, source or agent."""
        return payload

    @abstractmethod
    def score(self, payload: JSONDict, reference: JSONDict | None, response: JSONDict) -> float | None:
        """A response's score against the item's reference (None when there is none)."""

    def score_details(self, payload: JSONDict, reference: JSONDict | None, response: JSONDict) -> JSONDict | None:
        """Metrics derived beside the score (stored in Annotation.scores), if the kind has any."""
        return None

    @abstractmethod
    def import_items(self, data: bytes, fmt: str, options: JSONDict) -> ImportResult:
        """Parse an upload into items; raise InputError (line, field) and store nothing."""

    @abstractmethod
    def import_agent_outputs(
        self, data: bytes, known_ids: set[str], payloads: dict[str, JSONDict] | None = None
    ) -> dict[str, JSONDict]:
        """Parse an agent's outputs: item external id -> response. `payloads` (external id ->
        item payload) is for kinds that check an output against its item (a listener's path
        against the instruction's building and start)."""

    def import_annotations(
        self, data: bytes, known_ids: set[str], payloads: dict[str, JSONDict] | None = None
    ) -> dict[str, dict[str, JSONDict]]:
        """People's answers from an earlier study: annotator id -> item external id -> response
        (the shape a worker's answer is stored in, so the kind's scorer reads it). Raise
        InputError (line, field) on the first bad record."""
        raise InputError(f"{self.title} studies do not import earlier annotations", field="file")

    def auto_review(self, gold: Sequence[GoldResult], settings: JSONDict | None = None) -> tuple[str | None, str]:
        """The automatic verdict on a worker from all their gold answers, taken when one of
        their tasks (bundles) ends (`settings`: the study's kind settings, e.g. a threshold): ("approved", reason) approves a worker still pending and
        never reviewed by an admin; (None, flag) leaves them to an admin, the flag ("" for
        none) shown first in the review queue. There is no automatic rejection."""
        return None, ""

    def replay_details(self, answer: JSONDict) -> JSONDict:
        """What replay_template shows about one answer beyond its stored fields (e.g. a map)."""
        return {}

    def agreement_value(self) -> str | None:
        """Response field whose value annotators agree on (for alpha/kappa), if any."""
        return None

    def straightline_value(self) -> str | None:
        """Categorical response field whose variety the review queue measures (a worker who
        gives one value to everything is straight-lining), if any; the agreement field unless
        a kind says otherwise."""
        return self.agreement_value()

    def label_value(self) -> str | None:
        """Categorical response field whose labels Dawid-Skene aggregates beside the per-item
        majority (app/leaderboards/annotators.py), if any; the agreement field unless a kind
        says otherwise. Unlike agreement_value() it feeds no running totals or alpha/kappa, so
        a kind may name its judgement here without changing those figures. An answer without
        the field (e.g. another page type of the kind) is left out."""
        return self.agreement_value()

    def baselines(self, session: Any, study: Any) -> list[JSONDict]:
        """Leaderboard rows computed without people or agents (e.g. a random baseline)."""
        return []

    # What the kind ranks its agents by, as people judge them (app/leaderboards/ranking.py's
    # Ranking: the agent of an item, the unit, how an answer's value in [0, 1] is taken, the
    # words of the settled table). None: the kind's items are not agents' outputs.
    ranking: ClassVar[Any] = None

    def ranking_for(self, settings: JSONDict | None = None) -> Any:
        """The Ranking of a study with these kind_settings (a kind's mode may rank nothing)."""
        return self.ranking

    def ranking_arrivals(self, session: Any, study: Any) -> dict[str, list[tuple[Any, Any, float]]] | None:
        """What the kind ranks its agents by, as people's judgements arrived: per agent,
        (arrival, unit, value in [0, 1]) in the order they arrived (app/leaderboards/
        sequential.py's Arrival; a unit's first value counts). The settled table and adaptive
        allocation (app/leaderboards/adaptive.py) read it; built by the core from
        ranking_for (app/leaderboards/ranking.py). None: the study ranks no agents, and
        cannot be allocated adaptively."""
        from app.leaderboards.ranking import arrivals

        ranking = self.ranking_for(getattr(study, "kind_settings", None))
        return None if ranking is None else arrivals(session, study, ranking)

    # Whether the kind has a pairwise (side-by-side) mode: two agents' outputs on one unit,
    # judged against each other (STS and navigation: docs/kinds/*.md, "Side by side"). The
    # kind declares a Pairing and stores its pairs as app/leaderboards/side_by_side.py says;
    # the verdict, which pair next and the ratings (pairwise.py) are the core's.
    pairwise: ClassVar[bool] = False

    def adaptive_for(self, settings: JSONDict | None = None) -> bool:
        """Whether a study with these kind_settings can be allocated adaptively: the kind ranks
        its agents by people's judgements (ranking_for), or sets its items' priorities
        itself (item_priorities: a kind overrides this to say so)."""
        return self.ranking_for(settings) is not None

    def item_priorities(self, session: Any, study: Any) -> dict[int, float] | None:
        """Each non-gold item's priority under adaptive allocation where the kind sets them
        itself (a pairwise study: the pairs whose agents' ratings are least separated first),
        item id -> priority (higher first); None (the default): the core's rule from
        ranking_arrivals (app/leaderboards/adaptive.py)."""
        return None

    def extra_leaderboard(self, session: Any, study: Any) -> JSONDict | None:
        """A kind's own leaderboard section, shown under the generic table, or None.

        {"tables": [{"key": str, "title": str, "note": str (optional),
                     "columns": [{"key": str, "label": str, "help": str}, ...],
                     "rows": [{column key: cell, ...}, ...]}, ...]}
        Every column carries "help": one short sentence saying what the number is, its unit or
        scale, and, where it has an interval, what is resampled for it (e.g. "Share (0-1) of
        ... with a 95% interval resampling scenarios."). The page shows it on hover (the
        header's title) and in "What the columns mean" under the table (a tap or the
        keyboard opens it); tests/integration/test_column_help.py fails a column without it.
        A column may carry "format": "g" to show its numbers as they are (a median of 4
        steps reads "4", not "4.000").
        A cell is a string, a number, None, an estimate {"n", "mean", "low", "high"}
        (rendered as the mean with its interval), or a word with its reason {"text",
        "reason"} (e.g. a d_z of "∞" or "—": app.leaderboards.rows.effect_size_cell, which
        every Cohen's d_z cell goes through). Optionally "figures": [{"title": str,
        "svg": Markup}, ...] (app.leaderboards.plot draws intervals and CDFs), shown above them."""
        return None

    def demo(self) -> dict[str, Any]:
        """`proctor demo` material, {} for none. The study's items as {"items": bytes, "format":
        str}, or {"build": fn(session, researcher, settings) -> Study}, which makes the study
        itself in the demo researcher's account (a draft; `settings` is the StudySettings), for
        a kind whose studies come from material of its own (recordings, suites, generated
        outputs). Optional beside either: "settings" (StudySettings fields), "setup":
        fn(session) run first, "simulate": fn(session, study, researcher) run once the study
        is live (agents, simulated annotators)."""
        return {}

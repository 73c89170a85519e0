"""The kinds' migration branches on a database from before kinds owned their data (core 0005):
existing rows are kept and carried over, on SQLite and PostgreSQL (issue 9)."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import create_engine, text

from app.cli import alembic_config, migrate_db
from tests.conftest import BACKENDS, _create_pg_database, _drop_pg_database


@pytest.fixture(params=BACKENDS)
def old_database(request, tmp_path):
    """An empty database at the last revision before the kinds' branches (0005)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
        yield url
    else:
        admin = request.getfixturevalue("pg_server")
        url = _create_pg_database(admin)
        yield url
        _drop_pg_database(admin, url)


def test_existing_jobs_and_tom_clusters_are_carried_into_the_kinds_branches(old_database):
    command.upgrade(alembic_config(old_database), "0005")
    eng = create_engine(old_database)
    with eng.begin() as c:
        c.execute(
            text(
                "INSERT INTO users (id, email, role, name, created_at) VALUES "
                "(1, 'r@example.org', 'researcher', 'r', CURRENT_TIMESTAMP)"
            )
        )
        for sid, kind in ((1, "tom"), (2, "navigation")):
            c.execute(
                text(
                    "INSERT INTO studies (id, slug, title, kind, owner_id, state, annotations_per_item, "
                    "bundle_size, gold_rate, lease_seconds, completion_code, redirect_url, consent_text, "
                    "instructions, payment, kind_settings, created_at) VALUES (:id, :slug, 'old', :kind, "
                    "1, 'live', 3, 10, 0.1, 900, 'C', '', '', '', '', '{}', CURRENT_TIMESTAMP)"
                ),
                {"id": sid, "slug": f"old-{sid}", "kind": kind},
            )
        items = [
            (1, 1, "q1", "call-7:13:2"),
            (2, 1, "q2", "call-7:13:5"),
            (3, 1, "q3", "call-7:14:5"),
            (4, 2, "p1", "house-1:7:0"),
        ]
        for iid, sid, ext, cluster in items:
            c.execute(
                text(
                    "INSERT INTO items (id, study_id, external_id, payload, is_gold, source, category, "
                    "cluster, position, n_active) VALUES (:id, :sid, :ext, '{}', false, 'dataset', '1', "
                    ":cluster, 0.5, 0)"
                ),
                {"id": iid, "sid": sid, "ext": ext, "cluster": cluster},
            )
        for jid, task, state in ((1, "generation", "running"), (2, "agent.validate", "queued"), (3, "export", "done")):
            c.execute(
                text(
                    "INSERT INTO jobs (id, task, state, params, done, total, log, result, "
                    "created_at) VALUES (:id, :task, :state, '{}', 0, 0, '', '{}', "
                    "CURRENT_TIMESTAMP)"
                ),
                {"id": jid, "task": task, "state": state},
            )
    migrate_db(old_database)
    with eng.connect() as c:
        heads = set(c.execute(text("SELECT version_num FROM alembic_version")).scalars())
        jobs = c.execute(text("SELECT id, task, state FROM jobs ORDER BY id")).all()
        clusters = c.execute(text("SELECT id, cluster FROM items ORDER BY id")).all()
    eng.dispose()
    assert {"nav0006", "tom0001"} <= heads
    # Jobs keep their state under the names their kind now registers them by.
    assert [tuple(j) for j in jobs] == [
        (1, "navigation.generate", "running"),
        (2, "navigation.validate", "queued"),
        (3, "export", "done"),
    ]
    # ToM questions about one proposition at two times now share a cluster; other kinds' stay.
    assert [tuple(r) for r in clusters] == [(1, "call-7:13"), (2, "call-7:13"), (3, "call-7:14"), (4, "house-1:7:0")]


def test_generation_runs_from_before_top_p_read_as_pure_sampling(old_database):
    """nav0002 adds generation_runs.top_p: a run stored at nav0001 is kept and reads 1.0 (pure
    sampling; named navigation_generation_runs since nav0006); the downgrade drops the column
    and keeps the run."""
    cfg = alembic_config(old_database)
    command.upgrade(cfg, "nav0001")
    eng = create_engine(old_database)
    with eng.begin() as c:
        c.execute(
            text(
                "INSERT INTO users (id, email, role, name, created_at) VALUES "
                "(1, 'r@example.org', 'researcher', 'r', CURRENT_TIMESTAMP)"
            )
        )
        c.execute(
            text(
                "INSERT INTO studies (id, slug, title, kind, owner_id, state, annotations_per_item, "
                "bundle_size, gold_rate, lease_seconds, completion_code, redirect_url, consent_text, "
                "instructions, payment, kind_settings, created_at) VALUES (1, 'nav', 'old', 'navigation', "
                "1, 'draft', 3, 10, 0.1, 900, 'C', '', '', '', '', '{}', CURRENT_TIMESTAMP)"
            )
        )
        c.execute(
            text(
                "INSERT INTO agents (id, owner_id, kind, name, version, description, created_at) "
                "VALUES (1, 1, 'navigation', 'speaker', '1', '', CURRENT_TIMESTAMP)"
            )
        )
        c.execute(
            text(
                "INSERT INTO agent_artifacts (id, agent_id, version, role, format, blob_key, config, "
                "size, sha256, state, verdict, created_at) VALUES (1, 1, 1, 'speaker', 'safetensors', "
                "'a/1', '{}', 1, 'x', 'valid', '', CURRENT_TIMESTAMP)"
            )
        )
        c.execute(
            text(
                "INSERT INTO generation_runs (id, study_id, owner_id, speaker_artifact_id, listener_artifact_ids, "
                "n, k, m, metric, design, max_len, seed, batch_size, paths, gamma, state, created_at) VALUES "
                "(7, 1, 1, 1, '[]', 10, 0, 3, 'ndtw', 'evaluation', 60, 4, 8, '[]', 0.25, 'done', "
                "CURRENT_TIMESTAMP)"
            )
        )
    migrate_db(old_database)
    with eng.connect() as c:
        heads = set(c.execute(text("SELECT version_num FROM alembic_version")).scalars())
        runs = c.execute(text("SELECT id, n, seed, gamma, state, top_p FROM navigation_generation_runs")).all()
    assert "nav0006" in heads and "nav0001" not in heads
    assert [tuple(r) for r in runs] == [(7, 10, 4, 0.25, "done", 1.0)]
    # A run stored after the upgrade without naming top_p reads 1.0 too (the server default).
    with eng.begin() as c:
        c.execute(
            text(
                "INSERT INTO navigation_generation_runs (id, study_id, owner_id, speaker_artifact_id, listener_artifact_ids, "
                "n, k, m, metric, design, max_len, seed, batch_size, paths, state, created_at) VALUES "
                "(8, 1, 1, 1, '[]', 5, 0, 3, 'ndtw', 'evaluation', 60, 0, 8, '[]', 'queued', CURRENT_TIMESTAMP)"
            )
        )
        assert c.execute(text("SELECT top_p FROM navigation_generation_runs WHERE id = 8")).scalar() == 1.0
    command.downgrade(cfg, "nav0001")
    with eng.connect() as c:
        columns = set(c.execute(text("SELECT * FROM generation_runs")).keys())
        ids = c.execute(text("SELECT id FROM generation_runs ORDER BY id")).scalars().all()
        heads = set(c.execute(text("SELECT version_num FROM alembic_version")).scalars())
    eng.dispose()
    assert "top_p" not in columns and ids == [7, 8] and "nav0001" in heads


def test_buildings_from_before_owners_have_none(old_database):
    """nav0003 adds environments.owner_id: a building stored at nav0002 is kept with no owner
    (admins only); the downgrade drops the column and keeps the building."""
    cfg = alembic_config(old_database)
    command.upgrade(cfg, "nav0002")
    eng = create_engine(old_database)
    with eng.begin() as c:
        c.execute(
            text(
                "INSERT INTO environments (id, scan, source, connectivity_key, n_viewpoints, panoramas, "
                "created_at) VALUES (3, 'grid', 'matterport', 'environments/grid/connectivity.json', 14, "
                '\'{"g00": "panoramas/grid/g00.ab.png"}\', CURRENT_TIMESTAMP)'
            )
        )
    migrate_db(old_database)
    with eng.connect() as c:
        heads = set(c.execute(text("SELECT version_num FROM alembic_version")).scalars())
        rows = c.execute(text("SELECT id, scan, n_viewpoints, owner_id FROM navigation_environments")).all()
    assert "nav0006" in heads and "nav0002" not in heads
    assert [tuple(r) for r in rows] == [(3, "grid", 14, None)]
    command.downgrade(cfg, "nav0002")
    with eng.connect() as c:
        columns = set(c.execute(text("SELECT * FROM environments")).keys())
        ids = c.execute(text("SELECT id FROM environments")).scalars().all()
    eng.dispose()
    assert "owner_id" not in columns and ids == [3]


def _sts_only(obj, name, type_, reflected, compare_to) -> bool:
    """Only the STS kind's tables (and what hangs on them) in the comparison."""
    table = obj if type_ == "table" else getattr(obj, "table", None)
    return (name if type_ == "table" else getattr(table, "name", "")).startswith("sts_")


def test_the_sts_tables_are_what_their_models_say_and_leave_with_their_branch(old_database):
    """sts0001 to sts0004 make exactly the tables of app/kinds/sts/models.py (columns, types,
    nullability, keys, indexes and unique constraints), and the branch's downgrade removes them
    and nothing else."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import inspect

    from app.models import load_models

    migrate_db(old_database)
    eng = create_engine(old_database)
    with eng.connect() as c:
        heads = set(c.execute(text("SELECT version_num FROM alembic_version")).scalars())
        ctx = MigrationContext.configure(c, opts={"compare_type": True, "include_object": _sts_only})
        diff = compare_metadata(ctx, load_models().metadata)
        tables = {t for t in inspect(c).get_table_names() if t.startswith("sts_")}
    assert "sts0005" in heads
    assert diff == [], diff
    assert tables == {t for t in load_models().metadata.tables if t.startswith("sts_")} and len(tables) == 8
    command.downgrade(alembic_config(old_database), "sts@base")
    with eng.connect() as c:
        left = set(inspect(c).get_table_names())
        heads = set(c.execute(text("SELECT version_num FROM alembic_version")).scalars())
    eng.dispose()
    assert not {t for t in left if t.startswith("sts_")} and {"users", "agents", "jobs"} <= left
    assert not {"sts0001", "sts0002", "sts0003", "sts0004", "sts0005"} & heads and "nav0006" in heads


def test_a_recordings_actor_grows_to_name_its_player(old_database):
    """sts0002 widens sts_recordings.actor for "human:<pseudonym>" (a play study's recordings):
    a recording from before is kept, and the downgrade cuts a play's actor back to "human"."""
    cfg = alembic_config(old_database)
    command.upgrade(cfg, "0005")
    command.upgrade(cfg, "sts0001")
    eng = create_engine(old_database)
    row = (
        "INSERT INTO sts_recordings (id, owner_id, external_id, level, seed, mission, actions, actor, "
        "n_actions, created_at) VALUES (:id, 1, :ext, 'BabyAI-GoToLocal-v0', 3, 'go to the red key', '[]', "
        ":actor, 0, CURRENT_TIMESTAMP)"
    )
    with eng.begin() as c:
        c.execute(
            text(
                "INSERT INTO users (id, email, role, name, created_at) VALUES "
                "(1, 'r@example.org', 'researcher', 'r', CURRENT_TIMESTAMP)"
            )
        )
        c.execute(text(row), {"id": 1, "ext": "old", "actor": "expert"})
    migrate_db(old_database)
    player = "human:w-0123456789abcdef"  # 24 characters: past the old column's 16
    with eng.begin() as c:
        c.execute(text(row), {"id": 2, "ext": "play:1:m1:w-0123456789abcdef", "actor": player})
        actors = c.execute(text("SELECT id, actor FROM sts_recordings ORDER BY id")).all()
    assert [tuple(r) for r in actors] == [(1, "expert"), (2, player)]
    command.downgrade(cfg, "sts0001")
    with eng.connect() as c:
        actors = c.execute(text("SELECT id, actor FROM sts_recordings ORDER BY id")).all()
    eng.dispose()
    assert [tuple(r) for r in actors] == [(1, "expert"), (2, "human")]


def test_generation_jobs_are_named_generate_and_keep_their_state(old_database):
    """nav0004 and sts0004: a kind's generation job is "<kind>.generate"; stored jobs keep their
    state under the new name, and the downgrades give the old names back."""
    cfg = alembic_config(old_database)
    command.upgrade(cfg, "nav0003")
    command.upgrade(cfg, "sts0003")
    eng = create_engine(old_database)
    with eng.begin() as c:
        for jid, task, state in (
            (1, "navigation.generation", "running"),
            (2, "sts.generation", "queued"),
            (3, "navigation.validate", "done"),
        ):
            c.execute(
                text(
                    "INSERT INTO jobs (id, task, state, params, done, total, log, result, "
                    "created_at) VALUES (:id, :task, :state, '{}', 0, 0, '', '{}', "
                    "CURRENT_TIMESTAMP)"
                ),
                {"id": jid, "task": task, "state": state},
            )
    migrate_db(old_database)
    with eng.connect() as c:
        got = [tuple(j) for j in c.execute(text("SELECT id, task, state FROM jobs ORDER BY id"))]
    assert got == [
        (1, "navigation.generate", "running"),
        (2, "sts.generate", "queued"),
        (3, "navigation.validate", "done"),
    ]
    from app.kinds import job_handlers

    assert {"navigation.generate", "sts.generate"} <= set(job_handlers())
    command.downgrade(cfg, "nav0003")
    command.downgrade(cfg, "sts0003")
    with eng.connect() as c:
        tasks = list(c.execute(text("SELECT task FROM jobs ORDER BY id")).scalars())
    eng.dispose()
    assert tasks == ["navigation.generation", "sts.generation", "navigation.validate"]


def test_runs_from_before_the_runs_table_become_agent_runs(old_database):
    """0016, nav0005 and sts0005: every generation run stored before agent_runs existed gets its
    row there, whichever branch migrates first: an A3DS job with its params, a navigation run
    with its speaker and listeners, an STS run with its suite version and agent."""
    from sqlalchemy.orm import Session

    from app import jobs
    from app.agents.models import AgentArtifact
    from app.kinds.navigation.models import GenerationRun as NavRun
    from app.kinds.sts import suites
    from app.kinds.sts.models import GenerationRun as StsRun
    from app.runs.models import AgentRun
    from app.studies import services
    from tests.conftest import create_tom_study, make_user

    migrate_db(old_database)
    eng = create_engine(old_database)
    with Session(eng) as s:
        owner = make_user(s, "researcher")
        study = create_tom_study(s, owner, live=False)
        a3 = jobs.create_job(
            s, "a3ds.generate", study_id=study.id, owner_id=owner.id, speaker="short", captioner="short", batch_size=4
        )
        nav_agent = services.register_agent(s, owner, "navigation", "old speaker")
        arts = [
            AgentArtifact(
                agent_id=nav_agent.id,
                version=v,
                role=role,
                format="safetensors",
                blob_key="artifacts/none",
                size=0,
                sha256="0" * 64,
            )
            for v, role in ((1, "speaker"), (2, "listener"), (3, "listener"))
        ]
        s.add_all(arts)
        s.flush()
        nav_job = jobs.create_job(s, "navigation.generate", study_id=study.id, owner_id=owner.id)
        nav = NavRun(
            study_id=study.id,
            owner_id=owner.id,
            speaker_artifact_id=arts[0].id,
            listener_artifact_ids=[arts[1].id, arts[2].id],
            n=4,
            k=2,
            m=1,
            metric="ndtw",
            design="evaluation",
            max_len=10,
            seed=3,
            batch_size=2,
            paths=[],
            job_id=nav_job.id,
        )
        suite = suites.create_suite(s, owner, "old suite")
        sts_agent = services.register_agent(s, owner, "sts", "old policy")
        sts_job = jobs.create_job(s, "sts.generate", owner_id=owner.id)
        sts = StsRun(
            version_id=suites.latest_version(s, suite).id,
            agent_id=sts_agent.id,
            owner_id=owner.id,
            job_id=sts_job.id,
            continuations=5,
            seed=1,
            batch_size=8,
        )
        s.add_all([nav, sts])
        s.commit()
        ids = {
            "a3": a3.id,
            "nav": nav_job.id,
            "sts": sts_job.id,
            "nav_run": nav.id,
            "sts_run": sts.id,
            "suite": suite.id,
            "study": study.id,
            "agent": sts_agent.id,
            "arts": [a.id for a in arts],
        }
    cfg = alembic_config(old_database)
    for branch_before in ("nav0004", "sts0004", "0015"):  # as the database was before
        command.downgrade(cfg, branch_before)
    with eng.connect() as c:
        assert "agent_runs" not in set(c.dialect.get_table_names(c))
    migrate_db(old_database)
    with Session(eng) as s:
        got = {r.job_id: r for r in s.query(AgentRun)}
    eng.dispose()
    assert set(got) == {ids["a3"], ids["nav"], ids["sts"]}
    a3r, navr, stsr = got[ids["a3"]], got[ids["nav"]], got[ids["sts"]]
    assert (a3r.kind, a3r.study_id, a3r.params["speaker"]) == ("a3ds", ids["study"], "short")
    assert (navr.kind, navr.artifact_ids, navr.params["generation_run"], navr.params["n"]) == (
        "navigation",
        ids["arts"],
        ids["nav_run"],
        4,
    )
    assert (stsr.kind, stsr.study_id, stsr.target, stsr.agent_id, stsr.params["continuations"]) == (
        "sts",
        None,
        {"suite_id": ids["suite"], "version": 1},
        ids["agent"],
        5,
    )


def _navigation_only(obj, name, type_, reflected, compare_to) -> bool:
    """Only the navigation kind's tables (and what hangs on them) in the comparison."""
    table = obj if type_ == "table" else getattr(obj, "table", None)
    return (name if type_ == "table" else getattr(table, "name", "")).startswith("navigation_")


def test_navigation_tables_take_the_kinds_name_with_their_rows(old_database):
    """nav0006 names the four navigation tables navigation_*: exactly what
    app/kinds/navigation/models.py says (columns, keys, indexes, unique constraints), every
    building, run, candidate and rollout kept with its id, a new row's id after the largest;
    the downgrade gives the old names back with the rows."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import inspect

    from app.models import load_models

    cfg = alembic_config(old_database)
    command.upgrade(cfg, "heads")
    command.downgrade(cfg, "nav0005")
    eng = create_engine(old_database)
    rows = {
        "users": "(id, email, role, name, created_at) VALUES (1, 'r@example.org', 'researcher', 'r', CURRENT_TIMESTAMP)",
        "studies": "(id, slug, title, kind, owner_id, state, annotations_per_item, bundle_size, gold_rate, "
        "lease_seconds, completion_code, redirect_url, consent_text, instructions, payment, kind_settings, "
        "created_at) VALUES (1, 'nav', 'old', 'navigation', 1, 'draft', 3, 10, 0.1, 900, 'C', '', '', '', '', "
        "'{}', CURRENT_TIMESTAMP)",
        "agents": "(id, owner_id, kind, name, version, description, created_at) "
        "VALUES (1, 1, 'navigation', 'speaker', '1', '', CURRENT_TIMESTAMP)",
        "agent_artifacts": "(id, agent_id, version, role, format, blob_key, config, size, sha256, state, verdict, "
        "created_at) VALUES (1, 1, 1, 'speaker', 'safetensors', 'a/1', '{}', 1, 'x', 'valid', '', CURRENT_TIMESTAMP)",
        "environments": "(id, scan, source, connectivity_key, n_viewpoints, panoramas, owner_id, created_at) "
        "VALUES (3, 'grid', 'matterport', 'environments/grid/connectivity.json', 14, '{}', 1, CURRENT_TIMESTAMP)",
        "generation_runs": "(id, study_id, owner_id, speaker_artifact_id, listener_artifact_ids, n, k, m, metric, "
        "design, max_len, seed, batch_size, top_p, paths, state, created_at) VALUES (7, 1, 1, 1, '[]', 2, 0, 1, "
        "'ndtw', 'evaluation', 60, 4, 8, 0.9, '[]', 'done', CURRENT_TIMESTAMP)",
        "generation_candidates": "(id, run_id, path_key, k, role, instruction, speaker_score, listener_score, "
        "chosen) VALUES (11, 7, 'grid:1', 0, 'inference', 'walk to the door', -3.5, 0.75, true)",
        "generation_rollouts": "(id, candidate_id, listener, m, path, ndtw, sdtw, success) "
        'VALUES (13, 11, 0, 0, \'["g00", "g01"]\', 0.75, 0.5, true)',
    }
    with eng.begin() as c:
        for table, values in rows.items():
            c.execute(text(f"INSERT INTO {table} {values}"))
    command.upgrade(cfg, "heads")
    with eng.connect() as c:
        tables = set(inspect(c).get_table_names())
        ctx = MigrationContext.configure(c, opts={"compare_type": True, "include_object": _navigation_only})
        diff = compare_metadata(ctx, load_models().metadata)
        kept = {
            t: c.execute(text(f"SELECT id FROM navigation_{t}")).scalars().all()
            for t in ("environments", "generation_runs", "generation_candidates", "generation_rollouts")
        }
        top_p, instruction = c.execute(
            text(
                "SELECT r.top_p, c.instruction FROM navigation_generation_runs r "
                "JOIN navigation_generation_candidates c ON c.run_id = r.id"
            )
        ).one()
    assert diff == [], diff
    assert not {"environments", "generation_runs", "generation_candidates", "generation_rollouts"} & tables
    assert kept == {
        "environments": [3],
        "generation_runs": [7],
        "generation_candidates": [11],
        "generation_rollouts": [13],
    }
    assert (top_p, instruction) == (0.9, "walk to the door")
    with eng.begin() as c:  # a new building's id follows the largest kept one
        c.execute(
            text(
                "INSERT INTO navigation_environments (scan, source, connectivity_key, n_viewpoints, created_at) "
                "VALUES ('house', 'generated', 'environments/house/connectivity.json', 5, CURRENT_TIMESTAMP)"
            )
        )
        new_id = c.execute(text("SELECT id FROM navigation_environments WHERE scan = 'house'")).scalar()
    assert new_id == 4
    command.downgrade(cfg, "nav0005")
    with eng.connect() as c:
        back = c.execute(text("SELECT id FROM generation_rollouts")).scalars().all()
        scans = c.execute(text("SELECT scan FROM environments ORDER BY id")).scalars().all()
        tables = set(inspect(c).get_table_names())
    eng.dispose()
    assert back == [13] and scans == ["grid", "house"]
    assert not {t for t in tables if t.startswith("navigation_")}

"""`proctor wordcount tally STUDY_ID`: run the tally job here and print it."""

from __future__ import annotations

import click


@click.group("wordcount")
def wordcount() -> None:
    """Word counting (example kind) tools."""


@wordcount.command("tally")
@click.argument("study_id", type=int)
def tally(study_id: int) -> None:
    """Tally each sentence's answers and print them (also stored for the study's page)."""
    from app.db import get_sessionmaker
    from app.jobs import Job, create_job, run_job
    from app.studies.models import Study
    from proctor_wordcount.jobs import tallies

    sm = get_sessionmaker()
    with sm() as s:
        study = s.get(Study, study_id)
        if study is None or study.kind != "wordcount":
            raise click.ClickException(f"no word-counting study {study_id}")
        job_id = create_job(s, "wordcount.tally", study_id=study_id).id
        s.commit()
    state = run_job(job_id)
    with sm() as s:
        if state != "done":
            raise click.ClickException(f"the tally failed: {s.get(Job, job_id).log.strip()}")
        for row in tallies(s, study_id):
            click.echo(f"{row.item}\t{row.right}/{row.answers} right")

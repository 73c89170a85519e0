"""The job "navigation.generate": a speaker's candidates for a run's paths, reranked by listeners.

Per batch of paths: the speaker's inference output (greedy) and N samples (pure ancestral
sampling, or nucleus sampling when the run's top_p is below 1), each with its log-probability
S(u | e*); when the run has listeners, each of the K listeners follows each candidate M
times (sampled) and every rollout is scored by nDTW and SDTW against the intended path
(rerank.follow_and_score: one batched call per batch); the candidate with the best mean of
the run's metric is chosen (the paper's eq. 13); without listeners the inference output is.
A path's candidates and rollouts are written in one transaction, so a worker killed mid-job
and restarted skips the paths it has stored and duplicates nothing. Between batches the job's
state is read: "cancelled" stops the run. At the end gamma is computed from the stored
candidates and the study's items are added (skipping external ids it already has).
"""

from __future__ import annotations

import inspect
import math

import torch
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import jobs
from app.kinds.navigation.models import Candidate, GenerationRun, Rollout
from app.agents.models import Agent, AgentArtifact, AgentOutput
from app.kinds import get_kind
from app.kinds.base import ItemSpec
from app.kinds.navigation.capability import (
    MAX_SPEAKER,
    CapabilityInput,
    CapabilityPath,
    Sample,
    Utterance,
    capability_items,
)
from app.kinds.navigation.environments import get_graph, get_semantics
from app.kinds.navigation.architectures import vocabulary_of
from app.kinds.navigation.generation import sampling_label
from app.studies import services
from app.studies.models import Item, Study
from workers.navigation.features import Vocabulary, World, stack_steps
from workers.navigation.listener import Ensemble, Listener
from workers.navigation.rerank import ScriptedListener, Worlds, follow_and_score, pick_device, stack_listeners
from workers.runs import Chunks
from workers.sandbox import SandboxedModel


def load_model(session: Session, artifact: AgentArtifact) -> torch.nn.Module:
    """The one way this job gets a model: the uploads' loader, which refuses artifacts that are
    not valid or whose blob no longer matches its checksum."""
    from workers.navigation.loading import load_artifact

    return load_artifact(session, artifact)


def takes_top_p(speaker) -> bool:
    """Whether the speaker's sample() has the optional `top_p` argument (docs/agents.md): the
    built-in speaker has; a TorchScript speaker scripted before nucleus sampling has not."""
    if isinstance(speaker, SandboxedModel):  # its argument names, as the sandboxed process read them
        return "top_p" in speaker.methods.get("sample", [])
    method = speaker.sample
    schema = getattr(method, "schema", None)  # a TorchScript method
    if schema is not None:
        return "top_p" in [a.name for a in schema.arguments]
    try:
        return "top_p" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _speaker_name(session: Session, artifact: AgentArtifact) -> str:
    agent = session.get(Agent, artifact.agent_id)
    name = (agent.name if agent else f"speaker-{artifact.id}").strip() or f"speaker-{artifact.id}"
    if name == "human":
        name = "human-speaker"
    return name[:MAX_SPEAKER]


def run_generation(session: Session, job: jobs.Job, progress: jobs.Progress) -> dict:
    run = session.get(GenerationRun, job.params["run_id"])
    if run is None:
        raise ValueError(f"no generation run {job.params['run_id']}")
    run.state = "running"
    session.commit()
    dev = pick_device()
    speaker_art = session.get(AgentArtifact, run.speaker_artifact_id)
    speaker = load_model(session, speaker_art)
    if not hasattr(speaker, "sample"):
        raise ValueError("the speaker artifact has no sample()")
    top_p = 1.0 if run.top_p is None else run.top_p
    if top_p < 1 and not takes_top_p(speaker):
        raise ValueError(
            f"the speaker artifact's sample() takes no top_p argument, so it cannot do nucleus "
            f"sampling (top_p = {top_p:g}): start the run with top_p 1 (pure sampling) or "
            "upload the speaker scripted with sample(..., top_p: float = 1.0) (docs/agents.md)"
        )
    speaker = speaker.to(dev).eval()
    speaker_vocab = Vocabulary(vocabulary_of(speaker, "speaker"))
    # Listener groups in the run's order: consecutive built-in listeners with one vocabulary are
    # stacked into one Ensemble (stepped together); a TorchScript listener runs on its own.
    groups: list = []
    for a in run.listener_artifact_ids:
        model = load_model(session, session.get(AgentArtifact, a))
        if isinstance(model, Listener):
            if groups and isinstance(groups[-1], list) and groups[-1][0].words == model.words:
                groups[-1].append(model)
            else:
                groups.append([model])
        else:
            groups.append(ScriptedListener(model))
    listeners = [(Ensemble(g) if isinstance(g, list) else g).to(dev) for g in groups] or None

    paths = run.paths
    keys = [f"{p['scan']}:{p['path_id']}" for p in paths]
    stored = set(session.scalars(select(Candidate.path_key).where(Candidate.run_id == run.id).distinct()))
    todo = [i for i, key in enumerate(keys) if key not in stored]
    progress(
        len(paths) - len(todo),
        len(paths),
        f"generation run {run.id}: {len(paths)} paths, {len(stored)} already stored; "
        f"N={run.n} samples ({sampling_label(top_p)}), K={run.k} listeners, M={run.m} rollouts, "
        f"metric {run.metric}, on {dev}",
    )
    worlds: dict[str, World] = {}
    for scan in sorted({paths[i]["scan"] for i in todo}):
        worlds[scan] = World.from_semantics(get_graph(scan), get_semantics(scan))
    table = Worlds(list(worlds.values()), dev) if (listeners and worlds) else None
    chunks = Chunks(todo, run.batch_size, progress, len(paths) - len(todo), len(paths), "paths")
    for batch in chunks:
        _generate_batch(
            session,
            run,
            [paths[i] for i in batch],
            [keys[i] for i in batch],
            speaker,
            speaker_vocab,
            listeners,
            worlds,
            table,
            seed=run.seed * 100003 + batch[0],
        )
    done = chunks.done
    if chunks.cancelled or progress.cancelled():
        return {"run": run.id, "cancelled": True, "paths_done": done}
    run.gamma = gamma(session, run)
    added = _add_items(session, run, speaker, speaker_vocab, worlds, _speaker_name(session, speaker_art))
    run.state = "done"
    session.commit()
    progress(
        done,
        None,
        f"done: gamma {run.gamma if run.gamma is None else round(run.gamma, 4)}, {added} items added to the study",
    )
    return {"run": run.id, "paths_done": done, "gamma": run.gamma, "items": added}


def _check_sample(tokens, logp, b: int, max_len: int) -> None:
    """What generation reads of sample() is what validation checked: integer ids [b, L] with L
    at most max_len, and [b] log-probabilities. A TorchScript speaker may answer otherwise here
    (issue 26, re-attack round 10: uint8 ids [B, 30000], within its answer cap, put
    30,000-word instructions in a study's items where max_len was 12). ValueError otherwise."""
    ok = (
        isinstance(tokens, torch.Tensor)
        and tokens.dim() == 2
        and tokens.shape[0] == b
        and tokens.shape[1] <= max_len
        and not tokens.is_floating_point()
        and tokens.dtype != torch.bool
    )
    if not ok:
        what = f"{list(tokens.shape)} {tokens.dtype}" if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise ValueError(
            f"the speaker's sample() answered tokens {what}, expected integer ids [{b}, L] with L at most "
            f"max_len = {max_len}"
        )
    if not isinstance(logp, torch.Tensor) or tuple(logp.shape) != (b,):
        what = list(logp.shape) if isinstance(logp, torch.Tensor) else type(logp).__name__
        raise ValueError(f"the speaker's sample() answered log-probabilities {what}, expected [{b}]")


def _generate_batch(
    session: Session,
    run: GenerationRun,
    paths: list[dict],
    keys: list[str],
    speaker,
    speaker_vocab: Vocabulary,
    listeners: list | None,
    worlds: dict[str, World],
    table: Worlds | None,
    seed: int,
) -> None:
    dev = table.device if table is not None else pick_device()
    feats, fmask = stack_steps([worlds[p["scan"]].step_features(p["path"], p["heading"]) for p in paths])
    feats, fmask = feats.to(dev), fmask.to(dev)
    b = len(paths)
    # texts[i][k], scores[i][k]: k = 0 the inference output, 1..N the samples
    texts: list[list[str]] = [[] for _ in range(b)]
    scores: list[list[float]] = [[] for _ in range(b)]
    top_p = 1.0 if run.top_p is None else run.top_p
    with torch.no_grad(), torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(seed)  # a batch re-run after a crash draws the same samples
        for greedy in [True] + [False] * run.n:
            if greedy or top_p >= 1:  # greedy or pure sampling: the five arguments every speaker takes
                tokens, logp = speaker.sample(feats, fmask, run.max_len, greedy, 1.0)
            else:
                tokens, logp = speaker.sample(feats, fmask, run.max_len, greedy, 1.0, top_p)
            _check_sample(tokens, logp, b, run.max_len)
            for i in range(b):
                texts[i].append(speaker_vocab.decode([int(t) for t in tokens[i].tolist()]))
                scores[i].append(float(logp[i]))
        rerank = None
        if listeners:
            gen = torch.Generator(device=dev).manual_seed(seed)
            starts, heads, refs, rows = [], [], [], []
            for i, p in enumerate(paths):
                idx = table.index(p["scan"], p["path"])
                for text in texts[i]:
                    rows.append(text)
                    starts.append(idx[0])
                    heads.append(p["heading"])
                    refs.append(idx)
            common = dict(
                rollouts=run.m, greedy=False, generator=gen, metric="ndtw", max_steps=max(len(x) for x in refs) * 2 + 2
            )
            r = stack_listeners(
                [
                    follow_and_score(
                        group,
                        table,
                        [Vocabulary(group.words).encode(t, run.max_len) for t in rows],
                        starts,
                        heads,
                        refs,
                        **common,
                    )
                    for group in listeners
                ]
            )  # each group reads the instructions with its own words
            ndtw = r.per_rollout.cpu()
            success = r.success.cpu()
            sdtw = ndtw * success
            per = ndtw if run.metric == "ndtw" else sdtw
            rerank = (per.mean(dim=(0, 2)), ndtw, sdtw, success, r.paths.cpu(), r.lengths.cpu())
    viewpoints = {}
    if table is not None:
        for scan, w in table.by_scan.items():
            off = table.offsets[scan]
            for j, v in enumerate(w.graph.viewpoints):
                viewpoints[off + j] = v
    per_path = 1 + run.n
    for i, key in enumerate(keys):
        # One transaction per path: all of its candidates and rollouts, or none.
        rows: list[Candidate] = []
        means = [None] * per_path
        if rerank is not None:
            means = [float(rerank[0][i * per_path + k]) for k in range(per_path)]
        best = 0
        if rerank is not None:
            best = max(range(per_path), key=lambda k: (means[k], -k))  # ties: the earlier one
        for k in range(per_path):
            if not math.isfinite(scores[i][k]):
                raise ValueError(f"{key}: the speaker's log-probability of candidate {k} is not finite")
            c = Candidate(
                run_id=run.id,
                path_key=key,
                k=k,
                role="inference" if k == 0 else "sample",
                instruction=texts[i][k],
                speaker_score=scores[i][k],
                listener_score=means[k],
                chosen=k == best,
            )
            rows.append(c)
        session.add_all(rows)
        session.flush()
        if rerank is not None:
            _, ndtw, sdtw, success, rpaths, rlens = rerank
            for k, c in enumerate(rows):
                col = i * per_path + k
                for li in range(ndtw.shape[0]):
                    for mm in range(run.m):
                        n_vp = int(rlens[li, col, mm])
                        walked = [viewpoints[int(x)] for x in rpaths[li, col, mm, :n_vp]]
                        session.add(
                            Rollout(
                                candidate_id=c.id,
                                listener=li,
                                m=mm,
                                path=walked,
                                ndtw=float(ndtw[li, col, mm]),
                                sdtw=float(sdtw[li, col, mm]),
                                success=bool(success[li, col, mm]),
                            )
                        )
        session.commit()


def gamma(session: Session, run: GenerationRun) -> float | None:
    """The share of paths where S(inference output) is above every sample's score. A sample
    with the inference output's words (spacing aside: its score differs only by batching noise)
    or exactly its score is a tie and counts half, as in the capability analysis
    (docs/kinds/navigation-capability.md); a sample scored strictly higher is a loss."""
    by_path: dict[str, dict[int, tuple[float, str]]] = {}
    for key, k, s, text in session.execute(
        select(Candidate.path_key, Candidate.k, Candidate.speaker_score, Candidate.instruction).where(
            Candidate.run_id == run.id
        )
    ):
        by_path.setdefault(key, {})[k] = (s, " ".join(text.split()))
    values = []
    for cands in by_path.values():
        if 0 not in cands or len(cands) < 2:
            continue
        greedy, words = cands[0]
        samples = [v for k, v in cands.items() if k]
        others = [s for s, t in samples if t != words]
        if others and max(others) > greedy:
            values.append(0.0)
        elif len(others) < len(samples) or (others and max(others) == greedy):
            values.append(0.5)
        else:
            values.append(1.0)
    return sum(values) / len(values) if values else None


def _score_references(
    speaker, vocab: Vocabulary, worlds: dict[str, World], paths: list[dict], max_len: int
) -> list[float]:
    """S(u* | e*) of each path's human reference (its first instruction)."""
    from workers.navigation.features import pad_batch

    dev = next(speaker.parameters()).device if hasattr(speaker, "parameters") else torch.device("cpu")
    out: list[float] = []
    for start in range(0, len(paths), 64):
        chunk = paths[start : start + 64]
        feats, fmask = stack_steps([worlds[p["scan"]].step_features(p["path"], p["heading"]) for p in chunk])
        tokens, tmask = pad_batch([vocab.encode(p["instructions"][0], max_len) for p in chunk])
        with torch.no_grad():
            s = speaker.score(feats.to(dev), fmask.to(dev), tokens.to(dev), tmask.to(dev))
        out.extend(float(x) for x in s)
    return out


def _add_items(
    session: Session, run: GenerationRun, speaker, vocab: Vocabulary, worlds: dict[str, World], name: str
) -> int:
    study = session.get(Study, run.study_id)
    cands: dict[str, list[Candidate]] = {}
    for c in session.scalars(select(Candidate).where(Candidate.run_id == run.id).order_by(Candidate.k)):
        cands.setdefault(c.path_key, []).append(c)
    paths = [p for p in run.paths if f"{p['scan']}:{p['path_id']}" in cands]
    if run.design == "capability":
        for p in paths:  # features for paths that were stored before a restart
            if p["scan"] not in worlds:
                worlds[p["scan"]] = World.from_semantics(get_graph(p["scan"]), get_semantics(p["scan"]))
        refs = _score_references(speaker, vocab, worlds, paths, 200)
        parsed = CapabilityInput(
            name,
            tuple(
                CapabilityPath(
                    path_id=p["path_id"],
                    scan=p["scan"],
                    path=tuple(p["path"]),
                    heading=p["heading"],
                    reference=Utterance(p["instructions"][0], ref),
                    inference=Utterance(cs[0].instruction, cs[0].speaker_score),
                    samples=tuple(Sample(c.instruction, c.speaker_score, candidate=c.k) for c in cs[1:]),
                )
                for p, ref in zip(paths, refs)
                for cs in [cands[f"{p['scan']}:{p['path_id']}"]]
            ),
        )
        specs = capability_items(parsed)
        settings = {**(study.kind_settings or {}), "design": "capability"}
    else:
        specs = []
        for p in paths:
            key = f"{p['scan']}:{p['path_id']}"
            c = next(c for c in cands[key] if c.chosen)
            specs.append(
                ItemSpec(
                    external_id=f"{name}:{p['path_id']}",
                    payload={
                        "instruction": c.instruction,
                        "scan": p["scan"],
                        "start": p["path"][0],
                        "heading": p["heading"],
                    },
                    reference={
                        "path": list(p["path"]),
                        "speaker_score": c.speaker_score,
                        "listener_score": c.listener_score,
                        "candidate": c.k,
                        "generation_run": run.id,
                    },
                    source="agent",
                    category=name,
                    cluster=key,
                    exclusion_group=key,
                )
            )
        settings = dict(study.kind_settings or {})
    speakers = list(settings.get("speakers", []))
    if name not in speakers:
        settings["speakers"] = speakers + [name]
    study.kind_settings = settings  # a new dict: JSON columns see reassignment, not mutation
    added = services.add_items(session, study, specs)
    session.flush()
    _listener_outputs(session, run, study, name, cands)
    return added


def _listener_outputs(
    session: Session, run: GenerationRun, study: Study, name: str, cands: dict[str, list[Candidate]]
) -> int:
    """Each listener's first rollout on each item's instruction becomes that listener agent's
    output on the item: once people follow the items, the navigation leaderboard's agreement
    table (human vs model listener paths, paper eq. 14) has both sides. Existing outputs are
    kept (a retried job adds nothing twice)."""
    if not run.listener_artifact_ids:
        return 0
    kind = get_kind(study.kind)
    by_candidate: dict[tuple[str, int], Candidate] = {(c.path_key, c.k): c for cs in cands.values() for c in cs}
    items = session.execute(
        select(Item.id, Item.external_id, Item.payload, Item.reference, Item.cluster).where(Item.study_id == study.id)
    ).all()
    agents: list[int] = []
    for aid in run.listener_artifact_ids:
        agent_id = session.get(AgentArtifact, aid).agent_id
        agents.append(agent_id if agent_id not in agents else -1)  # one output per agent and item
    have = set(
        session.execute(select(AgentOutput.agent_id, AgentOutput.item_id).where(AgentOutput.study_id == study.id)).all()
    )
    first: dict[int, list[Rollout]] = {}  # candidate id -> its listeners' first rollouts
    for ro in session.scalars(
        select(Rollout)
        .join(Candidate, Candidate.id == Rollout.candidate_id)
        .where(Candidate.run_id == run.id, Rollout.m == 0)
    ):
        first.setdefault(ro.candidate_id, []).append(ro)
    added = 0
    for item_id, ext, payload, reference, cluster in items:
        k = _candidate_of(ext, name, reference or {})
        cand = by_candidate.get((cluster, k)) if k is not None else None
        if cand is None:
            continue
        for ro in first.get(cand.id, ()):
            agent_id = agents[ro.listener] if ro.listener < len(agents) else -1
            if agent_id < 0 or (agent_id, item_id) in have:
                continue
            response = {"path": list(ro.path)}
            session.add(
                AgentOutput(
                    agent_id=agent_id,
                    study_id=study.id,
                    item_id=item_id,
                    response=response,
                    score=kind.score(payload, reference, response),
                )
            )
            have.add((agent_id, item_id))
            added += 1
    return added


def _candidate_of(external_id: str, name: str, reference: dict) -> int | None:
    """Which stored candidate an item of this run shows: evaluation items carry it in their
    reference; capability items name it in their id (inference = 0, sample k = k)."""
    if external_id.endswith(":inference") and external_id.startswith(f"{name}:"):
        return 0
    if ":sample:" in external_id and external_id.startswith(f"{name}:"):
        return int(external_id.rsplit(":", 1)[1])
    if "candidate" in reference and reference.get("role") is None:
        return int(reference["candidate"])
    return None

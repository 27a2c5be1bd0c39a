"""The survey in two steps: ``observe`` (transformers' side, slow, in parallel processes, stored by
:mod:`survey.store`) and ``judge`` (refpos's side, seconds, from the stored observations)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

#: where ``observe`` stores transformers' side and ``judge`` reads it
OBSERVATIONS = Path(tempfile.gettempdir()) / "refpos-survey-observations"


def environment(with_api: bool = True) -> dict[str, Any]:
    """The versions a run was made with (and the refpos function asked, ``with_api``)."""
    import torch

    from survey import adaptor, catalogue

    found = {"transformers": catalogue.transformers_version(), "torch": torch.__version__.split("+")[0]}
    return {**found, "api": adaptor.api()} if with_api else found


def quiet() -> None:
    """transformers' logging to errors, torch to one thread (each process of ``observe`` on one core)."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)


def chosen(names: list[str] | None) -> list[Any]:
    """The model types of the installed transformers named (all when ``names`` is None)."""
    from survey import catalogue

    types = catalogue.model_types()
    picked = types if names is None else [t for t in types if t.name in set(names)]
    missing = sorted(set(names or ()) - {t.name for t in picked})
    if missing:
        raise SystemExit(f"not model types of the installed transformers: {', '.join(missing)}")
    return picked


def _observe_one(name: str, directory: str) -> tuple[str, float, str]:
    """Worker of ``observe``: one model type observed and stored; ``(name, seconds, its row's cause)``."""
    from survey import catalogue, store
    from survey.run import observe_quietly

    quiet()
    started = time.perf_counter()
    seen = observe_quietly(catalogue.ModelType(name, ""))
    seen.row.seconds = time.perf_counter() - started
    store.save(seen, store.path_of(Path(directory), name))
    return name, seen.row.seconds, seen.row.cause


def observe_types(names: list[str] | None, directory: Path, jobs: int, again: bool = False) -> float:
    """Observe the model types (all when ``names`` is None) into ``directory`` with ``jobs`` processes.

    A model type already stored there is kept unless ``again`` (an interrupted run resumes). The model types the
    committed table shows refused by name come last: refpos's verdict on them needs no run of transformers.
    """
    import multiprocessing

    from survey import store, table

    picked = chosen(names)
    store.write_environment(directory, environment(with_api=False))
    started = time.perf_counter()
    refused = {r["model_type"] for r in table.load()["rows"] if r["status"] == "refused"}
    picked.sort(key=lambda t: t.name in refused)
    tasks = [(t.name, str(directory)) for t in picked if again or not store.path_of(directory, t.name).exists()]
    if jobs == 1:
        results = (_observe_one(*task) for task in tasks)
        pool = None
    else:
        pool = multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=50)
        results = pool.imap_unordered(_observe_task, tasks)
    try:
        for i, (name, seconds, cause) in enumerate(results):
            print(f"[{i + 1}/{len(tasks)}] {name} observed ({seconds:.1f} s) {cause[:120]}", flush=True)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    wall = time.perf_counter() - started
    store.add_timing(directory, len(tasks), wall, jobs)
    return wall


def _observe_task(task: tuple[str, str]) -> tuple[str, float, str]:
    return _observe_one(*task)


def judge_types(directory: Path) -> tuple[list[Any], float]:
    """Judge every observation stored in ``directory`` with the refpos on the path."""
    from survey import catalogue, store
    from survey.run import judge_quietly

    store.check_environment(directory, environment(with_api=False))
    started = time.perf_counter()
    rows = []
    for model_type in catalogue.model_types():
        path = store.path_of(directory, model_type.name)
        if not path.exists():
            continue
        seen = store.load(path)
        t0 = time.perf_counter()
        row = judge_quietly(seen)
        row.seconds = seen.row.seconds + time.perf_counter() - t0
        rows.append(row)
    return rows, time.perf_counter() - started

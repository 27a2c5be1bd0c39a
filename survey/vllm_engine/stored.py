"""The vLLM survey in two steps, as the transformers survey's (:mod:`survey.stored`): ``observe`` (vLLM's side, in
parallel processes, one :mod:`survey.store` file per architecture) and ``judge`` (refpos's side, from the files).

One directory per engine and release (:func:`default_directory`), with the versions in its ``environment.json``:
``judge`` refuses a directory observed with another vLLM, transformers or torch.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from survey import store, workers


def versions() -> dict[str, str]:
    """The installed vLLM, transformers and torch."""
    import torch
    import transformers

    from survey.vllm_engine.run import version

    return {"vllm": version(), "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}


def default_directory() -> Path:
    """Where ``observe`` stores vLLM's side and ``judge`` reads it: one directory per engine and release."""
    from survey.vllm_engine.run import version

    return Path(tempfile.gettempdir()) / f"refpos-survey-vllm-{version()}"


def chosen(names: list[str] | None) -> list[Any]:
    """The architectures of the installed vLLM's registry named (all when ``names`` is None)."""
    from survey.vllm_engine import configs

    every = configs.architectures()
    picked = every if names is None else [a for a in every if a.name in set(names)]
    missing = sorted(set(names or ()) - {a.name for a in picked})
    if missing:
        raise SystemExit(f"not architectures of the installed vLLM's registry: {', '.join(missing)}")
    return picked


def _start_worker() -> None:
    from survey import stored
    from survey.vllm_engine import engine

    stored.quiet()
    engine.start()


def _observe_one(task: tuple[Any, str]) -> tuple[str, float, str]:
    """Worker of ``observe``: one architecture observed and stored; ``(name, seconds, its row's cause)``."""
    from survey import stored
    from survey.vllm_engine.run import observe_quietly

    architecture, directory = task
    stored.quiet()  # the memory bound counted from what this worker holds now
    seen = observe_quietly(architecture)
    store.save(seen, store.path_of(Path(directory), architecture.name))
    return architecture.name, seen.row.seconds, seen.row.cause


def observe(names: list[str] | None, directory: Path, jobs: int, again: bool = False) -> float:
    """Observe the architectures (all when ``names`` is None) into ``directory`` with ``jobs`` processes; what is
    stored there already is kept unless ``again`` (an interrupted run resumes)."""
    from survey.vllm_engine import engine

    picked = chosen(names)
    store.write_environment(directory, versions())
    tasks = [(a, str(directory)) for a in picked if again or not store.path_of(directory, a.name).exists()]
    started = time.perf_counter()
    engine.fill_inspection_cache()
    lost: list[str] = []
    pool = None
    if jobs == 1:
        _start_worker()
        results: Any = (_observe_one(task) for task in tasks)
    else:
        pool = workers.PoolExecutor(jobs, tasks_per_worker=25, initializer=_start_worker)
        futures = {pool.submit(_observe_one, task): task[0].name for task in tasks}
        results = workers.completed(futures, lost, echo=True)
    try:
        for i, (name, seconds, cause) in enumerate(results):
            print(f"[{i + 1}/{len(tasks)}] {name} observed ({seconds:.1f} s) {cause[:120]}", flush=True)
    finally:
        if pool is not None:
            pool.shutdown()
    if lost:
        print(f"not observed, their process was lost (run observe again to resume): {', '.join(sorted(lost))}",
              flush=True)
    wall = time.perf_counter() - started
    store.add_timing(directory, len(tasks), wall, jobs)
    return wall


def judge(directory: Path) -> tuple[list[Any], float]:
    """Judge every architecture stored in ``directory`` with the refpos on the path."""
    from survey.vllm_engine import configs
    from survey.vllm_engine.run import judge as judge_one

    store.check_environment(directory, versions())
    started = time.perf_counter()
    rows = []
    for architecture in configs.architectures():
        path = store.path_of(directory, architecture.name)
        if not path.exists():
            continue
        seen = store.load(path)
        t0 = time.perf_counter()
        row = judge_one(seen)
        row.seconds = seen.row.seconds + time.perf_counter() - t0
        rows.append(row)
    return rows, time.perf_counter() - started

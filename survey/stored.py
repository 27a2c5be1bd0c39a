"""The survey in two steps: ``observe`` (transformers' side, slow, in parallel processes, stored by
:mod:`survey.store`) and ``judge`` (refpos's side, seconds, from the stored observations)."""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path
from typing import Any

from survey import table, workers

#: where ``observe`` stores transformers' side and ``judge`` reads it
OBSERVATIONS = Path(tempfile.gettempdir()) / "refpos-survey-observations"


def environment(with_api: bool = True) -> dict[str, Any]:
    """The versions a run was made with (and the refpos function asked, ``with_api``)."""
    import torch

    from survey import adaptor, catalogue

    found = {"transformers": catalogue.transformers_version(), "torch": torch.__version__.split("+")[0]}
    return {**found, "api": adaptor.api()} if with_api else found


#: the address space one observing process may take beyond what it holds once torch and transformers are imported
#: (GiB; ``SURVEY_MEMORY_GB``): a model that would take more for some case (a table built up to a large position)
#: fails that case with an error instead of the machine. Counted from the imports, not from zero: a build of torch
#: with CUDA maps several GiB of libraries before any model exists (about 8 GiB for torch 2.14.1's)
MEMORY_GB = 8


def quiet() -> None:
    """transformers' logging to errors, torch to one thread (each process of ``observe`` on one core), the
    process's memory bounded: :data:`MEMORY_GB` beyond what it has mapped now (its imports, and in a process that
    observes one model type after another, what the ones before left mapped). Called before each observation, so
    every model type has the same room, however many the process observed before it."""
    import os
    import resource

    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    limit = mapped_bytes() + int(float(os.environ.get("SURVEY_MEMORY_GB", MEMORY_GB)) * 2**30)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


def mapped_bytes() -> int:
    """The address space this process has mapped (Linux: ``/proc/self/statm``'s first field, in pages); 0 where it
    cannot be read."""
    import os

    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def chosen(names: list[str] | None) -> list[Any]:
    """The model types of the installed transformers named (all when ``names`` is None)."""
    from survey import catalogue

    types = catalogue.model_types()
    picked = types if names is None else [t for t in types if t.name in set(names)]
    missing = sorted(set(names or ()) - {t.name for t in picked})
    if missing:
        raise SystemExit(f"not model types of the installed transformers: {', '.join(missing)}")
    return picked


def _observe_one(model_type: Any) -> tuple[str, bytes, float, str]:
    """Worker of ``observe``: one model type observed; ``(name, its observation file's bytes, seconds, its
    row's cause)``. The bytes go back to the caller, which writes them: a worker on another machine needs no
    shared disk."""
    from survey import store
    from survey.run import observe_quietly

    quiet()
    started = time.perf_counter()
    seen = observe_quietly(model_type)
    seen.row.seconds = time.perf_counter() - started
    return model_type.name, store.to_bytes(seen), seen.row.seconds, seen.row.cause


def _towers_one(model_type: Any, directory: Path) -> tuple[str, bytes | None, float, str]:
    """Worker of ``observe --towers``: the stored observation of one model type with its composite's towers run
    again (:func:`survey.run.observe_towers`; its language model's run kept); ``(name, bytes, seconds, what was
    found)``, the bytes ``None`` for a model type with no language model's run (nothing to write back)."""
    from survey import catalogue, store
    from survey.run import observe_sequences, observe_towers

    quiet()
    started = time.perf_counter()
    seen = store.load(store.path_of(directory, model_type.name))
    sequences = bool(seen.config) and not seen.stacks  # its second sequence stacks (survey.sequence_towers)
    if seen.run is None and not sequences:  # run on pixels as a whole, or not run: no towers apart
        return model_type.name, None, time.perf_counter() - started, "no language model's run"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if seen.run is not None:
            seen.towers = observe_towers(catalogue.find(model_type.name).config(), seen.row)
        if sequences:
            seen.sequences = observe_sequences(catalogue.find(model_type.name), seen)
    found = ", ".join([f"{path} ({t.model or 'not run'})" for path, t in seen.towers.items()]
                      + [f"{path} on token ids ({t.model if t.run is not None else 'not run'})"
                         for path, t in seen.sequences.items()]) or "no tower"
    return model_type.name, store.to_bytes(seen), time.perf_counter() - started, found


def executor_for(jobs: int, dask: str | None = None) -> tuple[Any, Any]:
    """``(executor, closer)``: a ``concurrent.futures`` executor running ``jobs`` processes
    (:class:`survey.workers.PoolExecutor`: spawned, each replaced after 50 model types, since transformers' modules
    stay imported, and a killed one named), or the executor of the
    dask.distributed cluster at address ``dask`` (its workers need torch, transformers and this package); the
    closer ends what was started here."""
    if dask is not None:
        from distributed import Client

        client = Client(dask)
        executor = client.get_executor(pure=False)
        return executor, client.close
    pool = workers.PoolExecutor(jobs, tasks_per_worker=50)
    return pool, pool.shutdown


def observe_types(names: list[str] | None, directory: Path, jobs: int = 1, again: bool = False,
                  executor: Any = None, echo: bool = True, towers: bool = False) -> float:
    """Observe the model types (all when ``names`` is None) into ``directory``: in this process when ``jobs``
    is 1 and no ``executor`` is given, else on ``executor`` (any ``concurrent.futures.Executor``: processes,
    threads, a dask.distributed cluster's :func:`executor_for`) or ``jobs`` processes of this machine.

    A model type already stored there is kept unless ``again`` (an interrupted run resumes: each model type
    is written as soon as it comes back). The model types the committed table shows refused by name come
    last: refpos's verdict on them needs no run of transformers.

    ``towers``: only the towers of the model types stored already are run again (:mod:`survey.towers`), each
    stored observation's language model run kept (a change to how towers are observed needs no new text run).
    """
    from survey import store

    picked = chosen(names)
    store.write_environment(directory, environment(with_api=False))
    started = time.perf_counter()
    refused = {r["model_type"] for r in table.load()["rows"] if r["status"] == "refused"}
    picked.sort(key=lambda t: t.name in refused)
    if towers:
        tasks = [t for t in picked if store.path_of(directory, t.name).exists()]
        work = partial(_towers_one, directory=directory)
    else:
        tasks = [t for t in picked if again or not store.path_of(directory, t.name).exists()]
        work = _observe_one
    closer = None
    if executor is None and jobs > 1:
        executor, closer = executor_for(jobs)
    lost: list[str] = []
    try:
        if executor is None:
            done = (work(t) for t in tasks)
        else:
            futures = {executor.submit(work, t): t.name for t in tasks}
            done = workers.completed(futures, lost, echo)
        for i, (name, data, seconds, cause) in enumerate(done):
            if data is not None:
                store.write_bytes(data, store.path_of(directory, name))
            if echo:
                print(f"[{i + 1}/{len(tasks)}] {name} observed ({seconds:.1f} s) {cause[:160]}", flush=True)
    finally:
        if closer is not None:
            closer()
    if lost and echo:
        print(f"not observed, their process was lost (run observe again to resume): {', '.join(sorted(lost))}",
              flush=True)
    wall = time.perf_counter() - started
    store.add_timing(directory, len(tasks), wall, jobs)
    return wall


#: the cause of a row whose model type has no stored observation (the page counts such rows apart)
NOT_OBSERVED = table.NOT_OBSERVED


def judge_types(directory: Path, with_unobserved: bool = False) -> tuple[list[Any], float]:
    """Judge every observation stored in ``directory`` with the refpos on the path; ``with_unobserved``: a
    ``not reached`` row for each model type without one (:data:`NOT_OBSERVED`)."""
    from survey import catalogue, store
    from survey.run import Row, judge_quietly

    store.check_environment(directory, environment(with_api=False))
    started = time.perf_counter()
    rows = []
    for model_type in catalogue.model_types():
        path = store.path_of(directory, model_type.name)
        if not path.exists():
            if with_unobserved:
                rows.append(Row(model_type.name, "not reached", cause=f"{NOT_OBSERVED} (resume: python -m survey "
                                "observe, which keeps what is stored)"))
            continue
        seen = store.load(path)
        t0 = time.perf_counter()
        row = judge_quietly(seen)
        row.seconds = seen.row.seconds + time.perf_counter() - t0
        rows.append(row)
    return rows, time.perf_counter() - started

"""The survey's fixed sample, rerun on the installed (newest) release: every sampled model type comes out as its
committed table says; and the observation runs on a dask.distributed cluster.

The sample (:func:`survey.__main__.sample`) takes the first model type, by name, of every (encoding,
status) group of the installed release's ``survey/results/transformers-<version>.json``, so each way a model type
can come out is run. A row that differs means refpos or transformers changed since the table was written: rerun
``tox -e survey`` (or
``python -m survey sample --write`` and ``python -m survey render`` for the sample's rows alone).
A model type of the installed transformers that the table does not list fails here too, by name.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

from survey import catalogue, table
from survey.__main__ import installed_table, sample

COMMITTED = table.load(installed_table())


def test_every_installed_model_type_is_in_the_committed_table():
    new = table.new_types([t.name for t in catalogue.model_types()], COMMITTED)
    assert not new, f"new model types in transformers {catalogue.transformers_version()}: {new} (run tox -e survey)"


def test_the_sample_comes_out_as_committed(observation):
    from survey.run import judge_quietly

    names = sample(COMMITTED["rows"])
    assert len(names) >= 10
    rows = [judge_quietly(observation(name)) for name in names]
    committed = {r["model_type"]: r for r in COMMITTED["rows"]}
    differ = [f"{r.model_type}: committed {committed[r.model_type]['status']} {committed[r.model_type]['observed']}, "
              f"now {r.status} {r.observed} ({r.cause[:160]})" for r in rows
              if (r.status, r.observed) != (committed[r.model_type]["status"], committed[r.model_type]["observed"])]
    assert not differ, "\n".join(differ)


def test_observation_runs_on_a_dask_cluster_by_address_and_resumes(tmp_path, capsys):
    """Two workers of a local dask.distributed cluster, reached by its address as a remote one would be: each
    model type is observed there and written here; a second run finds them stored and observes none."""
    distributed = pytest.importorskip("distributed", reason="the cluster run needs dask[distributed]")
    from survey import store
    from survey.__main__ import main

    names = ["bloom", "gpt2"]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        assert main(["observe", *names, "--dir", str(tmp_path), "--dask", cluster.scheduler_address]) == 0
        assert sorted(p.name for p in tmp_path.glob("*.npz")) == [f"{n}.npz" for n in names]
        seen = store.load(store.path_of(tmp_path, "gpt2"))
        assert seen.row.model_type == "gpt2" and seen.run.cases and seen.engine == "transformers"
        assert main(["observe", *names, "--dir", str(tmp_path), "--dask", cluster.scheduler_address]) == 0
    assert [r["types"] for r in store.timings(tmp_path)] == [2, 0]
    assert "on the cluster at tcp://" in capsys.readouterr().out

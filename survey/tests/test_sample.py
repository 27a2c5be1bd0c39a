"""The survey's fixed sample, rerun: every sampled model type comes out as the committed table says.

The sample (:func:`survey.__main__.sample`) takes the first model type, by name, of every (encoding,
status) group of ``survey/results/survey.json``, so each way a model type can come out is run. A row that
differs means refpos or transformers changed since the table was written: rerun ``tox -e survey`` (or
``python -m survey sample --write`` and ``python -m survey render`` for the sample's rows alone).
A model type of the installed transformers that the table does not list fails here too, by name.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

from survey import catalogue, table
from survey.__main__ import run_types, sample

COMMITTED = table.load()


def test_every_installed_model_type_is_in_the_committed_table():
    new = table.new_types([t.name for t in catalogue.model_types()], COMMITTED)
    assert not new, f"new model types in transformers {catalogue.transformers_version()}: {new} (run tox -e survey)"


def test_the_sample_comes_out_as_committed():
    names = sample(COMMITTED["rows"])
    assert len(names) >= 10
    rows, _ = run_types(names, echo=False)
    committed = {r["model_type"]: r for r in COMMITTED["rows"]}
    differ = [f"{r.model_type}: committed {committed[r.model_type]['status']} {committed[r.model_type]['observed']}, "
              f"now {r.status} {r.observed} ({r.cause[:160]})" for r in rows
              if (r.status, r.observed) != (committed[r.model_type]["status"], committed[r.model_type]["observed"])]
    assert not differ, "\n".join(differ)

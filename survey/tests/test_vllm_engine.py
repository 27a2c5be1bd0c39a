"""The vLLM engine of the survey (:mod:`survey.vllm_engine`): a fixed sample of architectures comes out as stored
in ``survey/results/vllm.json``, a wrong claim is caught on vLLM's run, and the page's section and the
disagreements list are rendered from the stored rows (the last two need no vLLM)."""

from __future__ import annotations

import dataclasses

import pytest

from survey.vllm_engine import disagreements, table

STORED = table.load()
#: the sample: one architecture per encoding vLLM's run shows (RoPE, a learned table, ALiBi, MLA, none run)
SAMPLE = ("LlamaForCausalLM", "OPTForCausalLM", "BloomForCausalLM", "DeepseekV3ForCausalLM", "AliceAIForCausalLM")


def _row(architecture, model_type, status, cause="", notes=(), file="f.py"):
    return {"architecture": architecture, "model_type": model_type, "status": status, "cause": cause,
            "notes": list(notes), "file": file, "observed": ["rope"], "claimed": ["rope"], "max_error": None,
            "layers": "", "group": "text"}


def test_a_disagreement_is_a_model_type_exact_against_one_engine_and_wrong_against_the_other():
    vllm = [_row("A", "a", "wrong", "decoder layer 0: rotation: max |Δ| 0.1",
                 ["vLLM's run is exact against refpos's answer changed to layout = 'interleaved'"]),
            _row("B", "b", "exact"), _row("C", "c", "wrong"), _row("D", "d", "refused")]
    transformers = [_row("", "a", "exact"), _row("", "b", "exact"), _row("", "d", "exact")]
    found = disagreements.find(vllm, transformers)
    assert [d.model_type for d in found] == ["a"]  # c: transformers did not run it; d: refused, nothing compared
    assert "max |Δ| 0.1" in found[0].evidence and "interleaved" in found[0].evidence


def test_an_authors_record_names_an_engine():
    with pytest.raises(ValueError, match="agrees"):
        disagreements.Authors("neither", "x", "y")


def test_the_section_renders_counts_disagreements_and_rows():
    stored = {"meta": {"vllm": "0.34.0"}, "rows": [_row("A", "a", "wrong", "rotation"), _row("B", "b", "exact")]}
    lines = "\n".join(table.section(stored, [_row("", "a", "exact")]))
    assert "## A second engine: vLLM 0.34.0" in lines and "| wrong | 1 |" in lines
    assert "| `a` | `A` |" in lines and "undecided" in lines  # the disagreement, without an authors' record
    assert table.section({"meta": {}, "rows": []}) == []


def test_every_stored_disagreement_is_decided_by_the_authors_code():
    from survey import table as survey_table

    release = STORED["meta"].get("transformers")  # the transformers release installed beside vLLM
    transformers_rows = survey_table.load(survey_table.path_for(release) if release else None)["rows"]
    found = disagreements.find(STORED["rows"], transformers_rows)
    assert all(d.authors is not None for d in found), [d.model_type for d in found if d.authors is None]


# ------------------------------------------------------------------------------------------ with vLLM installed
@pytest.fixture(scope="module")
def observed():
    pytest.importorskip("torch", reason="the vLLM survey runs vLLM's model code: tox -e survey-vllm")
    pytest.importorskip("vllm.model_executor.models.registry", reason="vLLM: tox -e survey-vllm")
    from survey.vllm_engine import configs, engine, run

    engine.start()
    by_name = {a.name: a for a in configs.architectures()}
    return {name: run.observe_quietly(by_name[name]) for name in SAMPLE}


@pytest.mark.parametrize("architecture", SAMPLE)
def test_the_sample_comes_out_as_stored(observed, architecture):
    from survey.vllm_engine import run

    stored = {r["architecture"]: r for r in STORED["rows"]}
    row = run.judge(observed[architecture])
    assert (row.status, row.observed) == (stored[architecture]["status"], stored[architecture]["observed"]), row.cause


def test_a_wrong_theta_is_caught_on_vllms_run(observed):
    from survey import adaptor, compare

    seen = observed["LlamaForCausalLM"]
    resolution = adaptor.resolve(seen.config)
    assert not compare.compare(resolution, seen.run).mismatches
    wrong = dataclasses.replace(resolution, layers=tuple(
        dataclasses.replace(c, rope=dataclasses.replace(c.rope, theta=c.rope.theta * (1 + 1e-4)))
        for c in resolution.layers))
    assert compare.compare(wrong, seen.run).mismatches

"""The vLLM engine of the survey (:mod:`survey.vllm_engine`): a fixed sample of architectures comes out as stored
in ``survey/results/vllm.json``, a wrong claim is caught on vLLM's run, and the page's section and the
disagreements list are rendered from the stored rows (the last two need no vLLM)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from survey import adaptor, mutants
from survey.probe import POSITIONS, Applied, Call, Probe, Run, digest
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


def test_an_error_on_the_config_vllm_ran_is_a_disagreement_only_where_the_authors_code_is_recorded():
    """refpos raising on a config vLLM ran, while transformers' row is exact, is listed where a record says what the
    authors' code does with that config (GLM-4.1V's unstated rotary factor); any other error is not."""
    vllm = [_row("G", "glm4v", "error", "ValueError: mrope_section [8, 12, 12] sums to 32"),
            _row("U", "unrecorded", "error", "ValueError: x"),
            _row("L", "llama4_text", "error", "ValueError: another error than the record explains")]
    transformers = [_row("", "glm4v", "exact"), _row("", "unrecorded", "exact"), _row("", "llama4_text", "exact")]
    found = disagreements.find(vllm, transformers)
    assert [d.model_type for d in found] == ["glm4v"] and found[0].authors.agrees == "transformers"
    assert "mrope_section" in found[0].evidence and found[0].vllm_status == "error"


def test_an_authors_record_names_an_engine():
    with pytest.raises(ValueError, match="agrees"):
        disagreements.Authors("neither", "x", "y")


def test_the_section_renders_counts_disagreements_and_rows():
    stored = {"meta": {"vllm": "0.34.0"}, "rows": [_row("A", "a", "wrong", "rotation"), _row("B", "b", "exact")]}
    lines = "\n".join(table.section(stored, [_row("", "a", "exact")]))
    assert "## A second engine: vLLM 0.34.0" in lines and "| wrong | 1 |" in lines
    assert "| `a` | `A` |" in lines and "undecided" in lines  # the disagreement, without an authors' record
    assert table.section({"meta": {}, "rows": []}) == []


#: a small Llama config (half layout, θ = 10⁴): refpos's answer is every layer rotated alike
LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 2,
         "num_hidden_layers": 2, "rope_theta": 10000.0, "max_position_embeddings": 8192, "vocab_size": 100}


def _vllm_like_probe(config: dict, rotary_recorded: bool) -> Probe:
    """What vLLM's probe records for ``config`` when vLLM rotates exactly as refpos says (refpos's own rotation of
    random queries and keys): runs A (the probe positions), B (position 0), C (rotary modules the identity), E,
    and, where ``rotary_recorded``, each rotary module's input and output in run A."""
    import refpos

    resolution = adaptor.resolve(config)
    positions = np.asarray(POSITIONS, dtype=np.int64)
    hidden = np.random.default_rng(0).standard_normal((positions.size, config["hidden_size"]))

    def rotated(x: np.ndarray, at: np.ndarray, rope) -> np.ndarray:
        return refpos.to_numpy(refpos.apply_rope(x, at, rope))

    def run(at: np.ndarray | None, record: bool) -> Run:
        out = Run()
        for claim in resolution.layers:
            path, layer = f"model.layers.{claim.index}.self_attn.attn", ("model.layers", claim.index)
            # the projection's query and key: the same in every run (the layer reads the same hidden states)
            q, k = (np.random.default_rng(2 * claim.index + s).standard_normal((1, 2, positions.size,
                                                                                claim.rope.head_dim)) for s in (0, 1))
            q_out, k_out = (x if at is None else rotated(x, at, claim.rope) for x in (q, k))
            out.calls.append(Call(path, layer, q_out, k_out, None, {}, None))
            out.inputs[path], out.digests[path] = [hidden], [digest(hidden)]
            if at is None:
                out.neutralized[path] = ["rotary_emb"]
            if record:
                out.applied.append(Applied("RotaryEmbedding", [q, k], [q_out, k_out], layer,
                                           path.removesuffix(".attn")))
        return out
    run_a = run(positions, rotary_recorded)
    return Probe(positions, True, run_a, run(np.zeros_like(positions), False), run(None, False), None,
                 run(positions, False), {c.path: "Attention" for c in run_a.calls}, np.arange(positions.size),
                 engine="vllm")


def test_the_layout_is_seen_where_vllm_records_its_rotary_modules_input_and_output():
    """Run B is taken after vLLM's rotation at position 0, which regroups nothing: a claim that regroups the
    channels (deinterleaved) before a half rotation predicts the same query from it. The rotary module's own input
    and output tell the layouts apart."""
    resolution = adaptor.resolve(LLAMA)
    assert mutants.survivors(resolution, _vllm_like_probe(LLAMA, rotary_recorded=False))[1] == \
        ["layout deinterleaved"]  # the defect: without the map, a wrong layout is graded exact
    tried, survived = mutants.survivors(resolution, _vllm_like_probe(LLAMA, rotary_recorded=True))
    assert tried >= 7 and survived == []


def test_no_stored_row_lets_a_layout_or_an_alibi_key_mutant_survive():
    survived = {r["architecture"]: m for r in STORED["rows"] for m in r.get("survived", [])
                if m.startswith(("layout", "ALiBi keys"))}
    assert not survived, survived


def test_every_stored_disagreement_is_decided_by_the_authors_code():
    from survey import table as survey_table

    release = STORED["meta"].get("transformers")  # the transformers release installed beside vLLM
    transformers_rows = survey_table.load(survey_table.path_for(release) if release else None)["rows"]
    found = disagreements.find(STORED["rows"], transformers_rows)
    assert all(d.authors is not None for d in found), [d.model_type for d in found if d.authors is None]



def test_the_multimodal_llama4_shares_the_text_models_record():
    """vLLM's Llama4ForConditionalGeneration runs its text through Llama4ForCausalLM (rotating halves of q and k
    permuted at load, the NoPE layers scaled by the positions handed): the stored row is the same disagreement."""
    row = next(r for r in STORED["rows"] if r["architecture"] == "Llama4ForConditionalGeneration")
    assert row["model_type"] == "llama4"
    assert disagreements.AUTHORS["llama4"] is disagreements.AUTHORS["llama4_text"]
    assert "permute_qk_weight_for_rotary" in disagreements.AUTHORS["llama4"].finding

# ------------------------------------------------------------------------------------------ with vLLM installed
@pytest.fixture(scope="module")
def observed(vllm_observe):
    return {name: vllm_observe(name) for name in SAMPLE}


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


def test_vllms_rotary_modules_and_cases_are_recorded(observed):
    run = observed["LlamaForCausalLM"].run
    assert run.a.applied and all(a.layer is not None and a.before[0].shape == a.after[0].shape for a in run.a.applied)
    assert [c.name for c in run.cases if c.run is not None]  # the ids below the rotary cache's length, the packed ids


@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "BloomForCausalLM"])
def test_no_wrong_answer_survives_on_vllms_run(observed, architecture):
    from survey import adaptor, mutants

    seen = observed[architecture]
    tried, survived = mutants.survivors(adaptor.resolve(seen.config), seen.run)
    assert tried and survived == []


def test_a_rotary_module_one_architecture_changed_is_not_handed_to_the_next(vllm_observe):
    """vLLM's get_rope keeps one rotary module per geometry for the whole process, and some model classes change
    theirs after building it (Ernie 4.5 sets is_neox_style = False on Llama's): observed in the same process, Llama
    4's text model (the same geometry) was handed Ernie's adjacent-pair rotation. Each build starts from an empty
    cache, so Llama 4's row shows vLLM's own half rotation (of weights it permutes only when it loads them: the
    recorded disagreement), not an exact rotation borrowed from Ernie."""
    from survey.vllm_engine import run

    ernie = vllm_observe("Ernie4_5ForCausalLM")
    assert run.judge(ernie).status == "exact"  # Ernie's adjacent pairs, as refpos says
    llama4 = run.judge(vllm_observe("Llama4ForCausalLM"))
    assert llama4.status == "wrong" and "run A: rotation" in llama4.cause, llama4.cause


def test_a_config_class_vllm_registers_under_another_model_type_is_put_back(vllm_observe):
    """Reading DeepSeek-V3.2's config.json, vLLM sets model_type = "deepseek_v32" on transformers' DeepseekV3Config
    and registers that class for deepseek_v32 with AutoConfig: observed in the same process, every later DeepSeek-V3
    config said deepseek_v32 (refpos then asked for its indexer's index_head_dim) and DeepSeek-V3.2's own config
    class was gone. Each architecture's build puts both back."""
    from transformers import AutoConfig

    vllm_observe("DeepseekV32ForCausalLM")  # its config.json read, whether or not it builds
    assert AutoConfig.for_model("deepseek_v3").model_type == "deepseek_v3"
    assert type(AutoConfig.for_model("deepseek_v32")).__name__ == "DeepseekV32Config"
    seen = vllm_observe("Eagle3DeepseekV3ForCausalLM")
    assert seen.config["model_type"] == "deepseek_v3"


def test_a_layer_vllm_splits_into_blocks_is_numbered_as_the_configs_layer(vllm_observe):
    """vLLM builds Cosmos3 Edge's text model as Nemotron-H layers, an attention block then an MLP block for each
    layer its config counts: attention block 2i is the config's layer i, and the row compares every layer."""
    from survey.vllm_engine import run

    seen = vllm_observe("Cosmos3EdgeForConditionalGeneration")
    layers = seen.config["text_config"]["num_hidden_layers"]
    assert sorted({c.layer[1] for c in seen.run.a.calls}) == list(range(layers))
    row = run.judge(seen)
    assert row.status == "exact", row.cause


def test_clips_position_table_is_read_as_the_rows_it_was_built_for(vllm_observe):
    """vLLM's CLIPModel takes the token embeddings its runner computes first (engine.EMBEDS_FIRST), and holds its
    77 text positions in a VocabParallelEmbedding padded to 128 rows: the lookup is recorded with the table's own
    77 rows (probe.unpadded), the padding unread, and the row is exact."""
    from survey.vllm_engine import run

    seen = vllm_observe("CLIPModel")
    assert seen.run is not None, seen.row.cause
    tables = {lookup.table: lookup.rows for lookup in seen.run.a.lookups}
    assert tables["text_model.embeddings.position_embedding.weight"] == seen.config["text_config"][
        "max_position_embeddings"] == 77
    row = run.judge(seen)
    assert row.status == "exact", row.cause


def test_run_a_lies_in_the_rotary_cache_vllm_sizes_by_a_length_of_another_name(vllm_observe):
    """vLLM sizes DBRX's rotary cache by max_seq_len, a length survey.probe.POSITION_LIMITS does not name: run A's
    positions are chosen below the cache's rows (probe._Rows) and the row is exact."""
    from survey.vllm_engine import run

    seen = vllm_observe("DbrxForCausalLM")
    assert seen.run is not None, seen.row.cause
    assert 0 < max(seen.run.positions) < seen.config["max_seq_len"] <= 4001
    row = run.judge(seen)
    assert row.status == "exact", row.cause


def test_robertas_positions_are_stated_to_refpos_as_the_rows_vllm_reads(vllm_observe, monkeypatch):
    """vLLM's RoBERTa counts the positions it is handed from 0 and adds ``pad_token_id + 1``; transformers' (and
    refpos's ``row_ids``) take the table's rows as ids. The probe states vLLM's positions plus that offset, and the
    row is exact; stated as they were handed, refpos's rows are two off and the row is wrong."""
    from survey.vllm_engine import probe as vllm_probe
    from survey.vllm_engine import run

    seen = vllm_observe("RobertaModel")
    assert seen.run is not None, seen.row.cause
    (lookup,) = [lk for lk in seen.run.a.lookups if "position_embeddings" in lk.table]
    assert np.array_equal(np.asarray(lookup.indices).reshape(-1), seen.run.positions)
    assert any(note.startswith("ids stated to refpos: vLLM's positions + 2") for note in seen.row.notes)
    row = run.judge(seen)
    assert row.status == "exact" and row.mutants >= 1 and not row.survived, row.cause
    monkeypatch.setattr(vllm_probe, "OFFSET_BY_ENGINE", {})
    handed = vllm_observe("RobertaModel")
    assert run.judge(handed).status == "wrong"

"""The survey can fail where refpos was wrong and it was blind: wrong answers derived from refpos's are caught,
and the fixed answers come out exact.

* every mutant of llama's answer (survey.mutants) is graded wrong on its observation;
* HY-V4's layout: of a half, an interleaved and a deinterleaved claim only the one transformers runs is exact
  (the reference taken after the model's own apply function, which regroups the channels, graded two exact);
* Llama 4's temperature reads the token's slot (id 32767 in slot 5, slots past the 8192 floor): a scale read
  from the position ids is wrong, the same scale read from the slot exact;
* T5's bucket maps, the sinusoids of fairseq's, DistilBERT's, Canary's and CTRL's stacks and the learned tables
  of LED and Longformer (read over a padded sequence): each exact, each mutant caught;
* Falcon's ALiBi with ``alibi=True`` (not the class default) and BLOOM's read the attention mask's running
  count: read from the position ids it is wrong (gapped ids, a masked token), from the mask's count exact.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")

from survey import adaptor, mutants
from survey.claims import Resolution
from survey.compare import compare


def wrong(resolution: Resolution, probe) -> list[str]:
    return [r.cause for r in compare(resolution, probe).layers if r.status == "mismatch"]


def reading(resolution: Resolution, kind: str, use: str, sources: tuple[str, ...]) -> Resolution:
    return dataclasses.replace(resolution, layers=tuple(
        dataclasses.replace(c, reads={**c.reads, use: sources}) if c.kind == kind else c for c in resolution.layers))


def test_every_mutant_of_an_exact_answer_is_caught(observed):
    config, probe = observed("llama")
    resolution = adaptor.resolve(config)
    assert not wrong(resolution, probe)
    tried, survived = mutants.survivors(resolution, probe)
    assert tried >= 7 and survived == []  # a length the default rule does not read is no mutant
    names = [name for name, _ in mutants.mutants(resolution)]
    assert {"layout interleaved", "layout deinterleaved", "positions + 1", "max_position_embeddings +1"} <= set(names)


def test_the_layout_is_seen_where_the_channels_are_regrouped(observed):
    import transformers

    config, probe = observed("hy_v4")
    resolution = adaptor.resolve(config)
    exact = []
    for layout in ("half", "interleaved", "deinterleaved"):
        claims = tuple(dataclasses.replace(c, rope=dataclasses.replace(c.rope, layout=layout)) if c.kind == "rope"
                       else c for c in resolution.layers)
        if not wrong(dataclasses.replace(resolution, layers=claims), probe):
            exact.append(layout)
    regrouped = tuple(int(v) for v in transformers.__version__.split(".")[:2]) >= (5, 25)
    assert exact == (["deinterleaved"] if regrouped else ["half"])


def test_llama4_temperature_reads_the_slot(observed):
    config, probe = observed("llama4_text")
    resolution = adaptor.resolve(config)
    by_id = reading(resolution, "none", "scale", ("position_ids",))
    causes = wrong(by_id, probe)
    assert causes and any("scale reads cache_position" in cause for cause in causes)
    assert not wrong(reading(resolution, "none", "scale", ("cache_position",)), probe)


def test_llama4_floor_scale_off_by_one_is_caught_past_the_first_layer(observed):
    """The NoPE layers (the 4th and 8th) read their temperature at slots 8190 … 8192, decoded after a padded cache:
    the layers below ran on the step's rows alone, so their hidden states are run B's up to rounding
    (survey.rotation.INPUT_RTOL), and the scale's threshold ±1 is told apart there."""
    config, probe = observed("llama4_text")
    resolution = adaptor.resolve(config)
    assert not wrong(resolution, probe)
    tried, survived = mutants.survivors(resolution, probe)
    assert {"query scale floor_scale -1", "query scale floor_scale +1"} <= {n for n, _ in mutants.mutants(resolution)}
    assert tried >= 11 and survived == []


def test_hidden_states_alike_up_to_the_rounding_of_the_layers_below():
    from survey.rotation import INPUT_RTOL, rounded_alike

    rows = np.random.default_rng(0).standard_normal((1, 3, 16)).astype(np.float32)
    largest = np.abs(rows).max(axis=-1, keepdims=True)
    assert rounded_alike(rows + np.float32(0.5 * INPUT_RTOL) * largest, rows)
    assert not rounded_alike(rows + np.float32(4 * INPUT_RTOL) * largest, rows)
    assert not rounded_alike(rows[..., :2, :], rows)


@pytest.mark.parametrize("name", ["falcon[alibi=true]", "bloom"])
def test_alibi_reads_the_mask_count(observed, name):
    config, probe = observed(name)
    resolution = adaptor.resolve(config)
    assert wrong(reading(resolution, "alibi", "key", ("position_ids",)), probe)
    assert not wrong(reading(resolution, "alibi", "key", ("mask_cumsum",)), probe)


@pytest.mark.parametrize("name", ["t5", "fsmt", "distilbert[sinusoidal_pos_embds=true]", "canary_decoder", "ctrl",
                                  "led", "longformer"])
def test_every_mutant_of_a_bucket_map_or_an_input_encoding_is_caught(observed, name):
    """T5's bucket count and largest distance (a few tokens reach only the exact buckets of short distances: the
    function is also compared over a sweep of distances); a sinusoid read one row off (the claim's rows move with
    its offset); CTRL's table indexed by the position ids without an embedding call; LED's and Longformer's
    tables read past the tokens, over the padding to the attention window. Every layer is exact, none unseen."""
    config, probe = observed(name)
    resolution = adaptor.resolve(config)
    assert {r.status for r in compare(resolution, probe).layers} == {"exact"}
    tried, survived = mutants.survivors(resolution, probe)
    assert tried >= 2 and survived == []


def test_canary_decoders_input_sinusoid_is_claimed():
    """The 1-D sinusoid refpos adds at a text stack's input (``decoder.input``) is that stack's claim, not a note."""
    config = {"model_type": "canary_decoder", "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2}
    answer = adaptor.resolve(config)
    assert answer.refused is None and {c.kind for c in answer.layers} == {"sinusoidal"}
    assert not any("decoder.input" in note for note in answer.notes)
    assert np.asarray(answer.layers[0].params["sinusoid"](np.arange(3))).shape == (3, 32)


def test_the_slot_plus_one_is_told_from_the_slot_where_a_forward_had_no_ids(observed):
    """PaliGemma, given no ids, turns by the slot plus one: the case without ids tells the slot from it (the
    mutant is caught); where every forward is handed ids (vLLM's are), nothing can, and the mutant is not tried."""
    import copy

    config, probe = observed("paligemma")
    resolution = adaptor.resolve(config)
    fallback = dict(mutants.mutants(resolution))[f"rotation reads {mutants.FALLBACK}"]
    assert not wrong(resolution, probe)
    assert any("left padded, no ids" in cause for cause in wrong(fallback, probe))
    handed = copy.copy(probe)
    handed.cases = [case for case in probe.cases if case.position_ids is not None]
    assert not wrong(fallback, handed)  # every forward handed ids: no input tells them apart
    tried, survived = mutants.survivors(resolution, probe)
    tried_handed, survived_handed = mutants.survivors(resolution, handed)
    assert tried_handed == tried - 1 and survived == survived_handed == []


def test_a_count_of_the_mask_is_told_where_a_forward_had_no_ids_and_not_tried_where_every_one_had(observed):
    """OPT, given no ids, reads its table at the mask's count: the cases without ids tell it from BLOOM's and π0's
    counts (each mutant caught). Where every forward is handed ids (vLLM's are), nothing can: those two mutants
    change only what is read without ids, and are not tried. Reading the slot for the id is tried either way."""
    import copy

    config, probe = observed("opt")
    resolution = adaptor.resolve(config)
    named = dict(mutants.mutants(resolution))
    counts = [named[f"learned table rows read {count}"] for count in ("mask_cumsum", "mask_cumsum_minus_one")]
    slot = named[f"learned table rows read {mutants.SLOT_OR_ID}"]
    assert all(wrong(mutant, probe) for mutant in counts)
    handed = copy.copy(probe)
    handed.cases = [case for case in probe.cases if case.position_ids is not None]
    handed.own = None
    assert not any(wrong(mutant, handed) for mutant in counts)
    assert all(mutants.without_ids_only(resolution, mutant) for mutant in counts)
    assert not mutants.without_ids_only(resolution, slot) and wrong(slot, handed)
    tried, survived = mutants.survivors(resolution, probe)
    tried_handed, survived_handed = mutants.survivors(resolution, handed)
    assert tried_handed == tried - 2 and survived == survived_handed == []


def test_the_offset_of_a_table_whose_ids_are_its_rows_is_told_only_without_ids(observed):
    """RoBERTa's ids passed are its table's rows; it adds its offset only to the positions it counts itself. The
    offset ±1 is caught where a forward had no ids, and changes only what is read without them: where every forward
    is handed ids (vLLM's are), neither is tried."""
    import copy

    config, probe = observed("roberta")
    resolution = adaptor.resolve(config)
    named = dict(mutants.mutants(resolution))
    offsets = [named[f"learned table offset {step:+d}"] for step in (-1, 1)]
    assert all(wrong(mutant, probe) for mutant in offsets)
    assert all(mutants.without_ids_only(resolution, mutant) for mutant in offsets)
    handed = copy.copy(probe)
    handed.cases = [case for case in probe.cases if case.position_ids is not None]
    handed.own = None
    assert not any(wrong(mutant, handed) for mutant in offsets)
    counted = named[f"learned table rows read {mutants.UNCOUNTED}"]  # the count of its ids: read without ids too
    assert mutants.without_ids_only(resolution, counted)
    tried, survived = mutants.survivors(resolution, probe)
    tried_handed, survived_handed = mutants.survivors(resolution, handed)
    assert tried_handed == tried - 3 and survived == survived_handed == []


@pytest.mark.parametrize("name", ["m2m_100", "roberta"])
def test_a_count_of_the_input_ids_is_told_from_the_slot_by_padding_tokens(observed, name):
    """M2M100 and RoBERTa count their positions off the input ids, skipping the padding token: read at the slot,
    their tables agree on every case but the one whose tokens hold padding (passed without a mask), where the
    mutant is caught. Without that case it survives."""
    import copy

    config, probe = observed(name)
    resolution = adaptor.resolve(config)
    kind = {c.kind for c in resolution.layers if c.kind in ("learned", "sinusoidal")}.pop()
    slot = dict(mutants.mutants(resolution))[f"{kind} table rows read {mutants.UNCOUNTED}"]
    assert not wrong(resolution, probe)
    assert any(cause.startswith("padding tokens, no mask") for cause in wrong(slot, probe))
    unpadded = copy.copy(probe)
    unpadded.cases = [case for case in probe.cases if case.padding_token is None]
    assert not wrong(slot, unpadded)


def test_the_other_count_of_the_input_ids_is_caught_where_a_padding_token_is_decoded(observed):
    """Kosmos-2's text decoder and M2M100's decoder count their input ids as M2M100 does: the padding token decoded
    after a cache reads the padding row, where FSMT's count adds the cache's length; that mutant is caught on the
    step (M2M100's decoder decodes over its encoder's outputs). RoBERTa, an encoder, decodes nothing: the mutant is
    not tried, and the row's notes say so."""
    for name in ("kosmos_2_text_model", "m2m_100"):
        config, probe = observed(name)
        resolution = adaptor.resolve(config)
        other = dict(mutants.mutants(resolution))[f"sinusoidal table rows read {mutants.OTHER_COUNT}"]
        assert any(cause.startswith("decoding a padding token") for cause in wrong(other, probe)), name
        assert mutants.untried(resolution, probe) == []
    config, probe = observed("roberta")
    resolution = adaptor.resolve(config)
    (note,) = mutants.untried(resolution, probe)
    assert note.startswith(f"not tried: learned table rows read {mutants.OTHER_COUNT}")
    other = dict(mutants.mutants(resolution))[f"learned table rows read {mutants.OTHER_COUNT}"]
    assert not wrong(other, probe)  # what the survey would call a survivor, were it tried

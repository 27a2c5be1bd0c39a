"""Where positions come from, and the probes that set the sources apart (no torch needed)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

import refpos
from survey import cases, compare, sources


def test_each_source_reads_its_own_numbers():
    inputs = sources.Inputs(np.array([0, 5, 17, 4001]), np.arange(4), np.array([0, 1, 0, 1]), 4)
    assert inputs.read(("position_ids",)).tolist() == [0, 5, 17, 4001]
    assert inputs.read(("cache_position",)).tolist() == [0, 1, 2, 3]
    assert inputs.read(("mask_cumsum",)).tolist() == [0, 0, 0, 1]
    chosen = sources.Inputs(None, np.arange(4), None, 1)  # no ids passed: the slot; the last query only
    assert chosen.read(("position_ids", "cache_position")).tolist() == [3]
    assert chosen.read(("key_index",), "key").tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="sources"):
        inputs.read(("points",))


def test_a_record_that_states_nothing_reads_the_position_ids():
    assert sources.reads_of(SimpleNamespace()) == dict.fromkeys(sources.USES, ("position_ids",))
    stated = SimpleNamespace(reads=(("key", ("mask_cumsum",)),), query_scale=SimpleNamespace(reads=("cache_position",)))
    found = sources.reads_of(stated)
    assert found["key"] == ("mask_cumsum",) and found["scale"] == ("cache_position",)
    assert found["rotation"] == ("position_ids",)


def test_the_cases_cross_every_threshold_and_set_the_sources_apart():
    config = {"max_position_embeddings": 8192, "text_config": {"rope_parameters": {
        "original_max_position_embeddings": 4096}}, "floor_scale": 8192.0}
    assert cases.thresholds(config) == [4096, 8192]
    largest = [int(ids.max()) for _, ids in cases.threshold_ids(config)]
    assert largest == [4095, 4096, 4097, 8191, 8192, 8193, 16384, cases.LONG]
    assert all(ids.size == cases.CASE_TOKENS for _, ids in cases.threshold_ids(config))
    made = {case.name: case for case in cases.cases_for(config, np.array([0, 1, 2, 5, 17, 100, 999, 4001]), True)}
    decoding = made["decoding"]
    assert decoding.position_ids[-1] == cases.FAR_ID and decoding.slots[-1] == cases.PREFILL
    far = made["decoding at slot 8192"]
    assert far.slots[-far.queries:].tolist() == [8190, 8191, 8192]  # Llama 4's floor crossed by the slot
    assert far.position_ids[-far.queries:].tolist() != far.slots[-far.queries:].tolist()
    padded = sources.inputs_of(made["left padded"], None)
    inside = sources.inputs_of(made["masked inside"], None)
    for inputs in (padded, inside):
        assert len({tuple(x) for x in inputs.which([("position_ids",), ("cache_position",), ("mask_cumsum",)],
                                                   "key").values()}) == 3
    # a masked token inside: the mask's count is not the slot less a constant (the softmax would remove one)
    unmasked = inside.attention_mask.astype(bool)
    assert len(set((inside.slots - inside.read(("mask_cumsum",), "key"))[unmasked])) > 1
    assert made["packed"].attention_mask is None
    # no ids: the model builds them, from the record's later source (OPT's mask count) or from the slot
    unnamed = sources.inputs_of(made["left padded, no ids"], None)
    assert unnamed.read(("position_ids", "mask_count"), "key").tolist() == [-1, -1, 0, 1, 2, 3, 4, 5]
    assert unnamed.read(("position_ids", "slot_plus_one"), "key").tolist() == list(range(1, 9))
    for fallback in ((), ("cache_position",)):
        assert unnamed.read(("position_ids", *fallback), "key").tolist() == list(range(8))
    # RoBERTa's count of the input ids is read off the tokens, given the padding token; never the slot in its place
    counted = ("position_ids", "input_ids_cumsum")
    tokens = dataclasses.replace(unnamed, input_ids=np.array([1, 1, 5, 6, 7, 1, 8, 9]))
    assert tokens.read(counted, "query", padding_idx=1).tolist() == [-1, -1, 0, 1, 2, -1, 3, 4]
    for unread in (lambda: unnamed.read(counted, "query", padding_idx=1), lambda: tokens.read(counted, "query"),
                   lambda: tokens.read(counted, "key", padding_idx=1)):
        with pytest.raises(ValueError, match="none of"):
            unread()  # no tokens known; no padding token named; the keys' count is not read
    assert padded.read(("position_ids", "mask_count"), "key").tolist() == [0, 1, 2, 5, 17, 100, 999, 4001]


def test_one_bound_per_channel():
    """The derivation of survey.compare: each pair's bound grows with p·ω_j of its own pair. With one bound for
    every channel (the fastest pair's), the slowest pair of a θ = 1e6 model could carry a 30 % error of its
    frequency; with its own it cannot."""
    rope = refpos.RopeConfig(head_dim=128, theta=1e6)
    speeds = compare.channels(rope, 131072)
    p = np.array([131071])
    x = np.random.default_rng(0).standard_normal((1, 128))
    slowest = int(np.argmin(np.where(speeds.omega > 0, speeds.omega, np.inf)))
    pair = np.hypot(x[0, speeds.source[slowest]], x[0, speeds.partner[slowest]])
    error_of_30_percent = pair * 2 * abs(np.sin(0.15 * p[0] * speeds.omega[slowest]))  # |R(1.3 φ) x - R(φ) x|
    one_for_all = (3 * p[0] * speeds.omega.max() * compare.EPS32 + 1e-6) * 2 * np.abs(x).max()
    assert error_of_30_percent < one_for_all  # one bound for all channels lets it through
    assert error_of_30_percent > speeds.bound(x, p)[0, slowest] * 100  # the pair's own bound does not, by far
    assert np.allclose(np.sort(speeds.omega[:64]), np.sort(refpos.to_numpy(refpos.rope_frequencies(rope)[0])))


def test_the_outermost_component_decides_a_layer_list_s_stack():
    """An encoder–decoder model's BERT decoder lists its layers at ``decoder.bert.encoder.layer``: the decoder's
    (any component naming "encoder" made it the encoder's, and the row wrong)."""
    from survey.observed import role

    assert role("decoder.bert.encoder.layer") == "decoder"
    assert role("encoder.layer") == "encoder"
    assert role("model.encoder.layers") == "encoder"
    assert role("model.decoder.layers") == "decoder"
    assert role("model.encoder_decoder.encoder.layers") == "encoder"
    assert role("model.layers") == "decoder"


def test_a_rotation_at_a_negative_position_is_not_compared_and_says_so():
    """π0's prefix count and OPT's mask count put a masked token at −1, which refpos does not rotate: the case is
    not compared, by name; the same claim on ids, or on a case without padding, is compared."""
    from survey.claims import LayerClaim
    from survey.seen import Seen, unrotated

    rope = refpos.RopeConfig(head_dim=8, theta=1e4)
    made = {case.name: case for case in cases.cases_for({}, np.arange(8), True)}
    claim = LayerClaim("decoder", 0, "rope", rope=rope,
                       reads={"rotation": ("position_ids", "mask_cumsum_minus_one", "slot_plus_one")})
    unnamed = Seen("left padded, no ids", None, sources.inputs_of(made["left padded, no ids"], None),
                   made["left padded, no ids"])
    padded = Seen("left padded", None, sources.inputs_of(made["left padded"], None), made["left padded"])
    note = unrotated(claim, unnamed)
    assert note is not None and note.startswith("left padded, no ids: not compared") and "mask_cumsum_minus_one" in note
    assert unrotated(claim, padded) is None  # ids passed: read, and compared
    assert unrotated(dataclasses.replace(claim, reads={}), unnamed) is None  # the slot: compared


def test_what_a_model_kept_from_a_call_is_forgotten():
    """The Qwen2-VL family keeps the M-RoPE offsets it built (``rope_deltas``) for later calls: the survey forgets
    them around every case, as a fresh model has none; other attributes stay."""

    class Module:
        def __init__(self, **values):
            self.__dict__.update(values)

    inner, outer = Module(rope_deltas=np.array([[-2]]), theta=1e4), Module(rope_deltas=None)
    model = Module(modules=lambda: [outer, inner])
    cases._forget(model)
    assert inner.rope_deltas is None and outer.rope_deltas is None and inner.theta == 1e4


def test_the_map_at_the_apply_function_skips_a_negative_position_and_compares_the_rest():
    """:func:`survey.rotation.check_map` on the case without ids: a claim whose source puts the padding at −1 is
    not compared there (refpos does not rotate −1), by name; read from the slot, the same call is compared, exact
    on the true rotation and a mismatch on a rotation one place off."""
    from types import SimpleNamespace

    from survey.claims import LayerClaim
    from survey.records import Applied
    from survey.rotation import check_map
    from survey.seen import Seen

    rope = refpos.RopeConfig(head_dim=8, theta=1e4)
    case = next(case for case in cases.cases_for({}, np.arange(8), True) if case.name == "left padded, no ids")
    inputs = sources.inputs_of(case, None)
    slots = inputs.read(("cache_position",), "query")
    x = np.random.default_rng(0).standard_normal((1, 2, slots.size, 8))

    def seen_with(rotated_at: np.ndarray) -> Seen:
        after = refpos.to_numpy(refpos.apply_rope(x, rotated_at, rope))
        run = SimpleNamespace(applied=[Applied("apply_rotary_pos_emb", [x], [after], ("model.layers", 0))])
        return Seen(case.name, run, inputs, case)

    counted = LayerClaim("decoder", 0, "rope", rope=rope, reads={"rotation": ("position_ids", "mask_count")})
    skipped = check_map(counted, None, "model.layers", seen_with(slots))
    assert skipped.status == "exact" and "not compared" in skipped.cause and "mask_count" in skipped.cause
    by_slot = dataclasses.replace(counted, reads={})
    assert check_map(by_slot, None, "model.layers", seen_with(slots)).status == "exact"
    assert check_map(by_slot, None, "model.layers", seen_with(slots + 1)).status == "mismatch"

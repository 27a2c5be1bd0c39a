"""The decoding cases reach the models that hand ``use_cache`` on through ``**kwargs`` (LLaVA) and the
encoder–decoders (M2M100: the decoder's step over the encoder's outputs), and say why where they do not run
(an encoder–decoder's cache is not padded; an encoder decodes nothing)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the survey runs transformers' code: pip install torch transformers")
pytest.importorskip("transformers", reason="the survey runs transformers' code")


def decoding(seen):
    return {case.name: case for case in seen.run.cases if case.name.startswith("decoding")}


def test_a_composite_that_hands_use_cache_on_is_decoded(observation):
    cases = decoding(observation("llava"))
    assert cases["decoding"].run is not None and not cases["decoding"].error


def test_an_encoder_decoder_s_decoder_is_decoded_and_its_padded_cache_refused_by_name(observation):
    from survey.run import judge_quietly

    seen = observation("m2m_100")
    cases = decoding(seen)
    step = cases["decoding a padding token, no ids"]
    assert step.run is not None and step.run.lookups, step.error  # the decoder's table read at the step
    assert all(call.query.shape[-2] == 1 for call in step.run.calls)  # the decoder alone ran
    assert [c.error for name, c in cases.items() if name.startswith("decoding at slot")] == [
        "the survey pads no encoder–decoder's cache"]
    assert judge_quietly(seen).status == "exact"


def test_an_encoder_decodes_nothing_and_says_so(observation):
    cases = decoding(observation("bert"))
    assert cases and all(case.run is None and case.error == "the model returned no cache" for case in cases.values())

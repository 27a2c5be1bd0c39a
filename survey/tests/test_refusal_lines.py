"""A refusal is said once per reason, naming the layers that share it, not once per layer (no torch needed)."""

from __future__ import annotations

from types import SimpleNamespace

from survey.claims import refused_layers, without_repeats


def _record(stack: str, index: int, reason: str, kind: str = "refused") -> SimpleNamespace:
    return SimpleNamespace(stack=stack, index=index, reason=reason, kind=kind)


def test_layers_sharing_a_reason_are_named_together() -> None:
    records = [_record("encoder", 0, "X"), *[_record("decoder", i, "X") for i in range(6)],
               _record("decoder", 6, "Y"), _record("decoder", 7, "", kind="rope"), _record("decoder", 9, "Y")]
    assert refused_layers(records) == ["encoder layer 0 and decoder layers 0-5: X", "decoder layers 6, 9: Y"]


def test_a_key_repeating_a_layer_s_reason_is_dropped() -> None:
    lines = ["encoder layers 0-7: model_type: m: why; k: not modelled", "k: not modelled", "model_type: m: why",
             "other: kept", "other: kept"]
    assert without_repeats(lines) == ["encoder layers 0-7: model_type: m: why; k: not modelled", "other: kept"]

"""Anchors of the ``cross_attention`` rows (refpos.models.cross) against transformers 5.25's code (anchors env).

Each model is built small and run once; every call of its modeling module's ``eager_attention_forward`` from a
cross-attention module is recorded with the query and key it was handed, and the inputs of that module's
``q_proj`` and ``k_proj``. refpos says the cross-attention adds no positions: the query and key are the
projections of those inputs and nothing else. The float64 projection :math:`x W^\\top` predicts them within the
float32 bound of a length-:math:`n` dot product, :math:`\\gamma_n\\,(|x|\\,|W|^\\top)` with
:math:`\\gamma_n = n u / (1 - n u)`, :math:`u = 2^{-24}`; the wrong answer that the cross-attention rotates (its
queries at the tokens' positions, its keys at their indices, by the stack's own RoPE) lies far outside it. The
layers that cross-attend are counted against refpos's ``decoder.cross`` records.

Facts anchored (dia/modeling_dia.py: DiaDecoderLayer.forward, DiaCrossAttention.forward; blt/modeling_blt.py:
BltLocalDecoder.forward, BltLocalEncoder.forward, BltCrossAttention.forward): Dia runs one cross-attention in every
decoder layer; BLT's local decoder one before every layer (``cross_attn_all_layers``) or before layer 0 alone, its
local encoder one after every layer or after the last alone.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import refpos  # noqa: E402

U = 2.0 ** -24


def _config(cls_name: str, **values: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = getattr(transformers, cls_name)(**values)
    config._attn_implementation = "eager"
    return config


def _recorded(module_name: str, model: Any, run: Any) -> list[dict[str, Any]]:
    """Every cross-attention call of ``run()``: its module's name, the query and key handed to attention, and the
    float64 projections of its ``q_proj`` and ``k_proj`` inputs with their float32 bounds."""
    modeling = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
    names = {id(m): name for name, m in model.named_modules()}
    cross = {id(m) for name, m in model.named_modules() if "cross_att" in name and hasattr(m, "q_proj")}
    inputs: dict[tuple[int, str], Any] = {}
    calls: list[dict[str, Any]] = []
    hooks = []
    for m in model.modules():
        if id(m) in cross:
            for side in ("q_proj", "k_proj"):
                def keep(_: Any, args: tuple, owner: int = id(m), side: str = side) -> None:
                    inputs[(owner, side)] = args[0].detach().double()
                hooks.append(getattr(m, side).register_forward_pre_hook(keep))
    original = modeling.eager_attention_forward

    def eager(module: Any, query: Any, key: Any, *args: Any, **kwargs: Any) -> Any:
        if id(module) in cross:
            calls.append({"name": names[id(module)], "query": query.detach().double().numpy(),
                          "key": key.detach().double().numpy(),
                          **{side: _projected(module, side, inputs[(id(module), side)], query.shape[-1])
                             for side in ("q_proj", "k_proj")}})
        return original(module, query, key, *args, **kwargs)
    modeling.eager_attention_forward = eager
    try:
        with torch.no_grad():
            run()
    finally:
        modeling.eager_attention_forward = original
        for hook in hooks:
            hook.remove()
    return calls


def _projected(module: Any, side: str, x: Any, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``x W^T`` in float64 as (B, H, T, d), and its float32 bound γ_n |x| |W|^T."""
    weight = getattr(module, side).weight.detach().double()
    n = weight.shape[1]
    gamma = n * U / (1 - n * U)

    def heads(y: Any) -> np.ndarray:
        return y.reshape(*y.shape[:-1], -1, head_dim).transpose(-2, -3).numpy()
    return heads(x @ weight.T), gamma * heads(x.abs() @ weight.abs().T)


def _judge(calls: list[dict[str, Any]], rope: Any) -> tuple[float, float, float]:
    """(largest error of refpos's answer, its ratio to the bound, smallest ratio of the rotated answer's error)."""
    worst, ratio, wrong = 0.0, 0.0, np.inf
    for call in calls:
        for side, handed in (("q_proj", call["query"]), ("k_proj", call["key"])):
            predicted, bound = call[side]
            error = np.abs(predicted - handed)
            worst, ratio = max(worst, float(error.max())), max(ratio, float((error / bound).max()))
            t = predicted.shape[-2]
            rotated = refpos.to_numpy(refpos.apply_rope(predicted, np.arange(t), rope, frequencies=refpos.
                                                        rope_frequencies(rope, seq_len=t)))
            wrong = min(wrong, float((np.abs(rotated - handed) / bound).max()))
    return worst, ratio, wrong


def _records(config: Any) -> tuple[list[int], Any]:
    positions = refpos.model_positions(config.to_dict())
    assert positions.complete, positions.not_modelled
    return [r.index for r in positions.stack("decoder.cross")], positions.stack("decoder")[0].rope


def test_dia_decoder_cross_attention_has_no_positions():
    config = _config("DiaDecoderConfig", num_hidden_layers=3, hidden_size=32, intermediate_size=40,
                     num_attention_heads=2, num_key_value_heads=1, head_dim=16, cross_num_attention_heads=2,
                     cross_head_dim=16, cross_num_key_value_heads=2, cross_hidden_size=24, vocab_size=64,
                     num_channels=3, max_position_embeddings=64, pad_token_id=61, eos_token_id=60,
                     bos_token_id=62)
    torch.manual_seed(0)
    model = transformers.models.dia.modeling_dia.DiaDecoder(config).eval()
    ids = torch.randint(0, 64, (1, 7, 3))
    states = torch.randn(1, 5, 24)
    calls = _recorded("dia", model, lambda: model(input_ids=ids, position_ids=torch.arange(3, 10)[None],
                                                  encoder_hidden_states=states))
    layers, rope = _records(config)
    assert [int(c["name"].split(".")[1]) for c in calls] == layers == [0, 1, 2]
    worst, ratio, wrong = _judge(calls, rope)
    assert ratio <= 1.0 and wrong > 1e3, (worst, ratio, wrong)


BLT = {"num_hidden_layers": 3, "hidden_size": 32, "num_attention_heads": 2, "num_key_value_heads": 2,
       "intermediate_size": 40, "vocab_size": 64, "max_position_embeddings": 64, "hidden_size_global": 24,
       "cross_attn_k": 2}


@pytest.mark.parametrize("every", [True, False])
def test_blt_local_decoder_cross_attention_has_no_positions(every):
    config = _config("BltLocalDecoderConfig", **BLT, cross_attn_all_layers=every)
    torch.manual_seed(0)
    model = transformers.models.blt.modeling_blt.BltLocalDecoder(config).eval()
    embeds, patches = torch.randn(1, 8, 32), torch.randn(1, 3, 24)
    calls = _recorded("blt", model, lambda: model(inputs_embeds=embeds, patch_embeds=patches))
    layers, rope = _records(config)
    assert [int(c["name"].rsplit(".", 1)[1]) for c in calls] == layers == ([0, 1, 2] if every else [0])
    worst, ratio, wrong = _judge(calls, rope)
    assert ratio <= 1.0 and wrong > 1e3, (worst, ratio, wrong)


@pytest.mark.parametrize("every", [True, False])
def test_blt_local_encoder_cross_attention_has_no_positions(every):
    config = _config("BltLocalEncoderConfig", **BLT, cross_attn_all_layers=every)
    torch.manual_seed(0)
    model = transformers.models.blt.modeling_blt.BltLocalEncoder(config).eval()
    ids = torch.randint(0, 64, (1, 8))
    patch_ids = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2]])
    calls = _recorded("blt", model, lambda: model(input_ids=ids, num_patches=3, patch_ids=patch_ids))
    layers, rope = _records(config)
    # without cross_attn_all_layers the one module (cross_attn_layers.0) runs after the last layer
    assert len(calls) == len(layers) and layers == ([0, 1, 2] if every else [2])
    worst, ratio, wrong = _judge(calls, rope)
    assert ratio <= 1.0 and wrong > 1e3, (worst, ratio, wrong)

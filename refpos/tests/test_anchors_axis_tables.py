r"""refpos.encodings.axis_tables against transformers 5.25: the position each patch adds in Pix2Struct's,
Kosmos-2.5's, Gemma 4's and Gemma 4 unified's embedding modules, each module built from a small config with seeded
tables and fed indices with padding.

What is compared: the module's output with its pixel projection zeroed (its weight and bias zero, so the patches
add exactly nothing: Pix2Struct's ``0 + E_row[r] + E_col[c]``, Gemma 4's ``0 + (E_x[x] + E_y[y])``), and Gemma 4
unified's LayerNorm input (``pos_norm``'s, caught by a hook: its dense projection and second LayerNorm zeroed, the
LayerNorm of a zero row with a zero bias is zero). Tolerance: the kind's bound
(refpos/encodings/axis_tables_mistakes.py, module docstring), ``(2u + u²)(|a| + |b|)`` per entry at the dtype the
module ran in (float32, and float64 where the whole module is cast to it); a padding patch adds exactly zero. Every
catalogued mistake that the inputs can show lies outside the bound.
"""

from __future__ import annotations

import numpy as np
import pytest

from refpos.encodings.axis_tables import flattened_patch_indices, split_tables
from refpos.encodings.axis_tables_mistakes import (
    AXIS_TABLES_MISTAKES,
    AxisTableInputs,
    axis_table_inputs,
    identify_axis_tables,
)
from refpos.tests.kind_checks import U32, U64
from refpos.tests.kind_checks import transformers_object as _import

torch = pytest.importorskip("torch", reason="axis-table anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="axis-table anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

#: rows of each table, its width and the patches fed
P, D = 12, 8


def _patches_with_indices(rng: np.random.Generator) -> np.ndarray:
    """Pix2Struct's flattened patches ``(1, 3·4 + 2, 2 + 6)``: a 3 × 4 grid numbered from 1 (row, column), then two
    padding patches of zeros."""
    rows, cols = np.meshgrid(np.arange(1, 4), np.arange(1, 5), indexing="ij")
    numbered = np.stack([rows.ravel(), cols.ravel()], axis=1).astype(np.float64)
    pixels = rng.standard_normal((12, 6))
    patches = np.concatenate([numbered, pixels], axis=1)
    return np.concatenate([patches, np.zeros((2, 8))], axis=0)[None]


def _pix2struct_like(model: str, dtype: torch.dtype) -> tuple[np.ndarray, AxisTableInputs]:
    """The embedding's output with the projection zeroed, and refpos's inputs of the same call."""
    rng = np.random.default_rng(3)
    if model == "pix2struct":
        config = _import("pix2struct.configuration_pix2struct:Pix2StructVisionConfig")(
            hidden_size=D, patch_embed_hidden_size=6, seq_len=P, num_hidden_layers=1, num_attention_heads=2)
        module = _import("pix2struct.modeling_pix2struct:Pix2StructVisionEmbeddings")(config)
    else:
        config = _import("kosmos2_5.configuration_kosmos2_5:Kosmos2_5VisionConfig")(
            hidden_size=D, patch_embed_hidden_size=6, max_num_patches=P, num_hidden_layers=1, num_attention_heads=2)
        module = _import("kosmos2_5.modeling_kosmos2_5:Kosmos2_5VisionEmbeddings")(config)
    module = module.to(dtype).eval()
    with torch.no_grad():
        module.patch_projection.weight.zero_()
        module.patch_projection.bias.zero_()
        module.row_embedder.weight.copy_(torch.from_numpy(rng.standard_normal((P, D))))
        module.column_embedder.weight.copy_(torch.from_numpy(rng.standard_normal((P, D))))
        patches = _patches_with_indices(rng)
        out = module(torch.from_numpy(patches).to(dtype))
    tables = (module.row_embedder.weight.detach().double().numpy(),
              module.column_embedder.weight.detach().double().numpy())
    return out.detach().double().numpy(), axis_table_inputs(flattened_patch_indices(patches), *tables, "pix2struct")


#: Gemma 4's (x, y) ids: a 3 × 4 grid, a patch of one id −1 (the two padding rules differ there) and two padding
#: patches
GEMMA_IDS = np.array([[[x, y] for y in range(3) for x in range(4)] + [[-1, 5], [-1, -1], [-1, -1]]])


def _gemma4(dtype: torch.dtype) -> tuple[np.ndarray, AxisTableInputs]:
    rng = np.random.default_rng(4)
    config = _import("gemma4.configuration_gemma4:Gemma4VisionConfig")(
        hidden_size=D, patch_size=2, position_embedding_size=P, num_hidden_layers=1, num_attention_heads=2)
    module = _import("gemma4.modeling_gemma4:Gemma4VisionPatchEmbedder")(config).to(dtype).eval()
    with torch.no_grad():
        module.input_proj.weight.zero_()
        module.position_embedding_table.copy_(torch.from_numpy(rng.standard_normal((2, P, D))))
        ids = torch.from_numpy(GEMMA_IDS)
        out = module(torch.from_numpy(rng.random((1, ids.shape[1], 12))).to(dtype), ids, (ids == -1).all(dim=-1))
    stored = module.position_embedding_table.detach().double().numpy()
    return out.detach().double().numpy(), axis_table_inputs(GEMMA_IDS, *split_tables(stored, "gemma4"), "gemma4")


def _gemma4_unified(dtype: torch.dtype) -> tuple[np.ndarray, AxisTableInputs]:
    rng = np.random.default_rng(5)
    vision = _import("gemma4_unified.configuration_gemma4_unified:Gemma4UnifiedVisionConfig")(
        patch_size=2, pooling_kernel_size=1, mm_embed_dim=D, output_proj_dims=D, mm_posemb_size=P)
    text = _import("gemma4_unified.configuration_gemma4_unified:Gemma4UnifiedTextConfig")(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        head_dim=8, vocab_size=64)
    module = _import("gemma4_unified.modeling_gemma4_unified:Gemma4UnifiedVisionEmbedder")(vision, text)
    module = module.to(dtype).eval()
    seen = {}
    module.pos_norm.register_forward_hook(lambda _m, args, _out: seen.setdefault("input", args[0]))
    with torch.no_grad():
        module.patch_dense.weight.zero_()
        module.patch_dense.bias.zero_()
        module.pos_embedding.copy_(torch.from_numpy(rng.standard_normal((P, 2, D))))
        module(torch.from_numpy(rng.random((1, GEMMA_IDS.shape[1], 12))).to(dtype), torch.from_numpy(GEMMA_IDS))
    stored = module.pos_embedding.detach().double().numpy()
    return (seen["input"].detach().double().numpy(),
            axis_table_inputs(GEMMA_IDS, *split_tables(stored, "gemma4_unified"), "gemma4_unified"))


CASES = {"pix2struct": lambda dtype: _pix2struct_like("pix2struct", dtype),
         "kosmos_2_5": lambda dtype: _pix2struct_like("kosmos_2_5", dtype),
         "gemma4": _gemma4, "gemma4_unified": _gemma4_unified}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("model", CASES)
def test_the_module_adds_refpos_s_rows(model, dtype):
    """transformers' module adds refpos's rows within the kind's bound at the dtype it ran in; every mistake that
    these inputs show is outside that bound, and named."""
    out, inputs = CASES[model](getattr(torch, dtype))
    reference, bound = inputs.reference()
    bound = bound * (U64 / U32 if dtype == "float64" else 1.0)
    got = out.reshape(reference.shape)
    error = np.abs(got - reference)
    assert np.all(error <= bound), (model, dtype, float(error.max()), float((error - bound).max()))
    shown = []
    for mistake in AXIS_TABLES_MISTAKES:
        wrong = mistake.compute(inputs)
        if wrong is None:
            continue
        assert np.any(np.abs(wrong[0] - got) > bound), mistake.name
        assert identify_axis_tables(wrong[0], inputs) == mistake.name
        shown.append(mistake.name)
    assert identify_axis_tables(got, inputs) is None
    expected = {"axes_swapped", "index_plus_one", "tables_concatenated", "column_table_missing"}
    expected |= {"index_minus_one"} if model in ("pix2struct", "kosmos_2_5") else set()
    expected |= set() if model in ("pix2struct", "kosmos_2_5") else {"padding_read", "padding_rule_swapped"}
    assert expected <= set(shown), (model, shown)


def test_pix2struct_s_padding_patch_reads_row_0():
    """A padding patch of zeros reads row 0 of both tables in Pix2Struct (nothing marks it), unlike Gemma 4's −1."""
    out, inputs = CASES["pix2struct"](torch.float64)
    last = out.reshape(-1, D)[-1]
    assert np.array_equal(last, inputs.row_table[0] + inputs.column_table[0])


def test_gemma4_s_two_padding_rules():
    """At ids (−1, 5) Gemma 4 reads x row 0 and y row 5; Gemma 4 unified reads y row 5 alone."""
    out4, in4 = CASES["gemma4"](torch.float64)
    outu, inu = CASES["gemma4_unified"](torch.float64)
    at = 12  # the patch with one id −1
    assert np.array_equal(out4.reshape(-1, D)[at], in4.column_table[0] + in4.row_table[5])
    assert np.array_equal(outu.reshape(-1, D)[at], inu.row_table[5])

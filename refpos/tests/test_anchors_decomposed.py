r"""refpos.encodings.decomposed against the decomposed relative positions of transformers 5.25 (torch CPU).

Every model type of :data:`refpos.encodings.decomposed.DECOMPOSED_MODEL_TYPES`: its ``get_rel_pos`` (the table
resampled and read at the scaled coordinates) and its term (``get_decomposed_rel_pos``, SegGPT's
``add_decomposed_rel_pos``, ViTDet's ``add_decomposed_relative_positions``), for tables that need no
resampling, a shorter and a longer grid (the table resampled), and query and key grids of different sizes.

Tolerance. The rows: the 1-D linear resample's bound (:func:`refpos.encodings.resample_bounds.resample_error_bound`)
at the dtype of the run; the index: equal to ``index_arithmetic="float32"`` always, and to ``"exact"`` where
``q = k``. A term ``Σ_c q_c R_c`` over ``C`` channels moves by ``‖q‖₁·δR + (C + 1)·u·Σ_c |q_c R_c|`` (the rows'
error, then the sum of ``C`` products and its addition): :func:`refpos.encodings.decomposed.decomposed_error_bound`.
A float32 output of transformers is named nothing by :func:`refpos.encodings.decomposed_mistakes.identify_decomposed`.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest

from refpos.encodings.decomposed import (
    DECOMPOSED_MODEL_TYPES,
    add_decomposed_rel_pos,
    decomposed_error_bound,
    decomposed_rel_pos_index,
    decomposed_rel_pos_table,
    decomposed_rel_pos_terms,
)
from refpos.encodings.decomposed_mistakes import DecomposedInputs, identify_decomposed
from refpos.encodings.resample_bounds import resample_error_bound

torch = pytest.importorskip("torch", reason="decomposed anchors need torch (pip install 'refpos[anchors]')")
pytest.importorskip("transformers", reason="decomposed anchors need transformers (pip install 'refpos[anchors]')")

pytestmark = pytest.mark.anchors

DTYPES = {"float64": (torch.float64, 2.0**-53), "float32": (torch.float32, 2.0**-24)}
#: (table rows L, q, k): no resampling, a longer and a shorter grid than the table's, q ≠ k both ways
AXES = [(13, 7, 7), (13, 14, 14), (27, 5, 5), (9, 8, 3), (9, 3, 8), (31, 11, 16)]


def _attention_class(model_type: str) -> type:
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    name = DECOMPOSED_MODEL_TYPES[model_type]
    return getattr(module, name) if name[0].isupper() else module


def _get_rel_pos(model_type: str):
    owner = _attention_class(model_type)
    if isinstance(owner, type):
        return lambda q, k, table: owner.get_rel_pos(None, q, k, table)
    return owner.get_rel_pos  # ViTDet: a module function


def _row_bound(rows: int, q: int, k: int, table: np.ndarray, u: float) -> float:
    return resample_error_bound([rows], [2 * max(q, k) - 1], mode="linear", unit_roundoff=u,
                                magnitude=float(np.abs(table).max())) + u * float(np.abs(table).max())


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("rows", "q", "k"), AXES)
@pytest.mark.parametrize("model_type", list(DECOMPOSED_MODEL_TYPES))
def test_get_rel_pos_equals_transformers(model_type, rows, q, k, dtype):
    torch_dtype, u = DTYPES[dtype]
    table = torch.from_numpy(np.random.default_rng(rows + q).standard_normal((rows, 6))).to(torch_dtype)
    theirs = _get_rel_pos(model_type)(q, k, table).double().numpy()
    stored = table.double().numpy()
    ours = np.asarray(decomposed_rel_pos_table(q, k, stored, index_arithmetic="float32"))
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=_row_bound(rows, q, k, stored, u))


def test_the_float32_index_is_torchs_and_the_exact_one_agrees_where_q_equals_k():
    """torch's float32 coordinates (``arange · ratio``, truncated) against both rules, q, k ≤ 40."""
    get_rel_pos = _get_rel_pos("vitdet")
    differ = 0
    for q in range(1, 41):
        for k in range(1, 41):
            rows = 2 * max(q, k) - 1
            probe = torch.arange(rows, dtype=torch.float64)[:, None]  # row r holds r: the read row comes back
            theirs = get_rel_pos(q, k, probe)[..., 0].long().numpy()
            in_float32 = np.asarray(decomposed_rel_pos_index(q, k, index_arithmetic="float32"))
            np.testing.assert_array_equal(theirs, in_float32)
            exact = np.asarray(decomposed_rel_pos_index(q, k))
            if q == k:
                np.testing.assert_array_equal(theirs, exact)
            differ += int(not np.array_equal(theirs, exact))
    assert differ > 0  # q ≠ k: the float32 truncation reads the row before an exact integer somewhere


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("q_size", "k_size", "rows"), [((4, 6), (4, 6), (7, 11)), ((5, 3), (5, 3), (13, 13)),
                                                        ((6, 4), (3, 8), (11, 15))])
@pytest.mark.parametrize("model_type", list(DECOMPOSED_MODEL_TYPES))
def test_decomposed_term_equals_transformers(model_type, q_size, k_size, rows, dtype):
    torch_dtype, u = DTYPES[dtype]
    rng = np.random.default_rng(rows[0])
    channels = 6
    q = torch.from_numpy(rng.standard_normal((2, q_size[0] * q_size[1], channels))).to(torch_dtype)
    table_h = torch.from_numpy(rng.standard_normal((rows[0], channels))).to(torch_dtype)
    table_w = torch.from_numpy(rng.standard_normal((rows[1], channels))).to(torch_dtype)
    attn = torch.zeros(2, q_size[0] * q_size[1], k_size[0] * k_size[1], dtype=torch_dtype)
    owner = _attention_class(model_type)
    if not isinstance(owner, type):  # ViTDet: add to the logits
        theirs = owner.add_decomposed_relative_positions(attn, q, table_h, table_w, q_size, k_size)
    elif hasattr(owner, "get_decomposed_rel_pos"):  # SAM and its copies: the term
        me = SimpleNamespace(get_rel_pos=lambda a, b, t: owner.get_rel_pos(None, a, b, t))
        theirs = owner.get_decomposed_rel_pos(me, q, table_h, table_w, q_size, k_size).reshape(attn.shape)
    else:  # SegGPT: add to the logits
        me = SimpleNamespace(get_rel_pos=lambda a, b, t: owner.get_rel_pos(None, a, b, t))
        theirs = owner.add_decomposed_rel_pos(me, attn, q, table_h, table_w, q_size, k_size)
    arrays = [t.double().numpy() for t in (q, table_h, table_w)]
    ours = np.asarray(add_decomposed_rel_pos(np.zeros(attn.shape), *arrays, q_size, k_size, index_arithmetic="float32"))
    bound = decomposed_error_bound(*arrays, q_size, k_size, unit_roundoff=u)
    np.testing.assert_allclose(theirs.double().numpy(), ours, rtol=0, atol=bound)
    if dtype == "float32" and q_size == k_size:  # equal grids: the float32 index is the exact one
        inputs = DecomposedInputs(*arrays, q_size, k_size)
        assert identify_decomposed(theirs.double().numpy(), inputs) is None
    terms = np.asarray(decomposed_rel_pos_terms(*arrays, q_size, k_size, index_arithmetic="float32"))
    np.testing.assert_allclose(terms.reshape(ours.shape), ours, rtol=0, atol=0)


def test_every_model_type_has_its_function():
    for model_type in DECOMPOSED_MODEL_TYPES:
        owner = _attention_class(model_type)
        assert hasattr(owner, "get_rel_pos"), model_type

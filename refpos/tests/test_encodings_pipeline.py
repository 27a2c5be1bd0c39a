"""Every absolute and relative encoding through refpos.self_attention: wiring, invariances and cross-form equalities.

Tolerances: float64 pipelines of a few dozen O(1) terms; two evaluations of one quantity along different
paths (skew vs gather, shifted positions) agree to rtol 1e-12 / atol 1e-13 (``CLOSE``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import refpos
from refpos.backend import to_numpy
from refpos.core import repeat_kv
from refpos.encodings import LearnedAbsolute, NoPE, Sandwich, Shaw, Sinusoidal, TransformerXL, XPos, alibi_slopes

H, D, D_MODEL, T = 2, 4, 8, 6
CLOSE = {"rtol": 1e-12, "atol": 1e-13}


def _arrays(xp, seed: int = 0):
    rng = np.random.default_rng(seed)

    def a(*shape, scale=1.0):
        return xp.asarray(rng.standard_normal(shape) * scale)

    return a


# name -> (factory(xp) -> Encoding, causal, relative)
def _encodings():
    def shaw(form):
        return lambda xp: Shaw(_arrays(xp, 1)(7, D), _arrays(xp, 2)(7, D), 3, form=form)

    def txl(form):
        def make(xp):
            a = _arrays(xp, 3)
            return TransformerXL(a(6, H * D), a(H, D), a(H, D), form=form)
        return make

    return {
        "sinusoidal": (lambda xp: Sinusoidal(), False, False),
        "sinusoidal_concat_t2t": (lambda xp: Sinusoidal(layout="concat", spacing="tensor2tensor", offset=2),
                                  False, False),
        "learned": (lambda xp: LearnedAbsolute(_arrays(xp, 4)(T + 1000, D_MODEL), offset=1), False, False),
        "shaw": (shaw("direct"), False, True),
        "shaw_skewed": (shaw("skewed"), False, True),
        "shaw_skewed_causal": (shaw("skewed"), True, True),
        "txl": (txl("rel_shift"), True, True),
        "txl_direct": (txl("direct"), True, True),
        "t5": (lambda xp: refpos.encodings.T5(_arrays(xp, 5)(32, H)), False, True),
        "t5_causal": (lambda xp: refpos.encodings.T5(_arrays(xp, 5)(32, H), bidirectional=False), True, True),
        "alibi": (lambda xp: refpos.encodings.ALiBi(), True, True),
        "alibi_symmetric": (lambda xp: refpos.encodings.ALiBi(form="symmetric"), False, True),
        "alibi_key_index": (lambda xp: refpos.encodings.ALiBi(form="key_index"), True, True),
        "alibi_falcon": (lambda xp: refpos.encodings.ALiBi(before_scale=True), True, True),
        "kerple_log": (lambda xp: refpos.encodings.KERPLE(xp.asarray([0.5, 1.5]), xp.asarray([0.3, 0.9])), True, True),
        "kerple_power": (lambda xp: refpos.encodings.KERPLE(xp.asarray([0.5, 1.5]), xp.asarray([0.3, 1.9]),
                                                            kind="power"),
                         True, True),
        "fire": (lambda xp: refpos.encodings.FIRE(*(_arrays(xp, 6)(*s) for s in ((8,), (8,), (H, 8), (H,)))), True,
                 True),
        "sandwich": (lambda xp: Sandwich(D), True, True),
        "sandwich_bidirectional": (lambda xp: Sandwich(D, causal=False), False, True),
        "xpos": (lambda xp: XPos(), True, True),
        "cope": (lambda xp: refpos.encodings.CoPE(_arrays(xp, 7)(D, 5)), True, True),
    }


ENCODINGS = _encodings()
RELATIVE = [n for n, (_, _, rel) in ENCODINGS.items() if rel]
ABSOLUTE = [n for n, (_, _, rel) in ENCODINGS.items() if not rel]
CAUSAL = [n for n, (_, causal, _) in ENCODINGS.items() if causal]


def _weights(xp, n_kv_heads=None):
    a = _arrays(xp, 11)
    kv = H if n_kv_heads is None else n_kv_heads
    return refpos.AttentionWeights(w_q=a(D_MODEL, H * D, scale=0.5), w_k=a(D_MODEL, kv * D, scale=0.5),
                                   w_v=a(D_MODEL, kv * D), n_heads=H, n_kv_heads=n_kv_heads)


def _run(xp, name, x=None, positions=None, encoding=None, n_kv_heads=None):
    factory, causal, _ = ENCODINGS[name]
    x = _arrays(xp, 12)(T, D_MODEL) if x is None else x
    enc = factory(xp) if encoding is None else encoding
    return refpos.self_attention(x, _weights(xp, n_kv_heads), encoding=enc, positions=positions, causal=causal)


# ----------------------------------------------------------------------------------------- wiring


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_every_encoding_runs_through_its_hook(xp, name):
    out, trace = _run(xp, name)
    assert tuple(out.shape) == (T, H * D)
    assert bool(xp.all(xp.isfinite(out)))
    enc = ENCODINGS[name][0](xp)
    pos = xp.arange(T, dtype=xp.int64)
    q, k = trace.get("Q_rot", trace["Q"]), trace.get("K_rot", trace["K"])
    s = q @ xp.matrix_transpose(repeat_kv(k, H))  # (H, T, T)
    terms = enc.qk_terms(q[None, ...], k[None, ...], pos, pos)
    if terms is not None:
        s = s + terms[0, ...]
    bias = enc.bias(pos, pos, H)
    scale = enc.softmax_scale(D)
    if bias is not None and enc.bias_scaled:
        s = s + bias
    s = s * scale
    if bias is not None and not enc.bias_scaled:
        s = s + bias
    np.testing.assert_allclose(to_numpy(trace["logits"]), to_numpy(s), **CLOSE)
    hooks = {"P" in trace, "Q_rot" in trace, terms is not None, bias is not None}
    assert True in hooks, f"{name} acts at no hook"


def test_t5_logits_are_not_scaled(xp):
    _, trace = _run(xp, "t5")
    np.testing.assert_array_equal(to_numpy(trace["scaled"]), to_numpy(trace["S"]))
    np.testing.assert_allclose(to_numpy(trace["logits"]), to_numpy(trace["S"] + trace["B"]), **CLOSE)


@pytest.mark.parametrize("name", ABSOLUTE)
def test_absolute_encodings_add_their_table(xp, name):
    _, trace = _run(xp, name, positions=xp.arange(3, 3 + T, dtype=xp.int64))
    enc = ENCODINGS[name][0](xp)
    expected = enc.embed(xp.arange(3, 3 + T, dtype=xp.int64), D_MODEL, xp)
    np.testing.assert_array_equal(to_numpy(trace["P"]), to_numpy(expected))
    _, shifted = _run(xp, name, positions=xp.arange(T, dtype=xp.int64))
    assert np.abs(to_numpy(shifted["out"]) - to_numpy(trace["out"])).max() > 1e-3  # APE is not shift-invariant


# ----------------------------------------------------------------------------------------- invariances


@pytest.mark.parametrize("name", RELATIVE)
def test_relative_encodings_are_translation_invariant(xp, name):
    """Shifting all positions leaves the logits unchanged (the key-index ALiBi form: the probabilities,
    its logits move by a per-row constant; FIRE only while positions stay below L = 512). The functional
    forms are checked over random shifts by hypothesis in the spec suite; here the pipeline wiring."""
    _, base = _run(xp, name)
    key = "A" if name == "alibi_key_index" else "logits"
    for shift in (1, 37, 500):
        _, moved = _run(xp, name, positions=xp.arange(shift, shift + T, dtype=xp.int64))
        np.testing.assert_allclose(to_numpy(moved[key]), to_numpy(base[key]), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("name", CAUSAL)
def test_causal_encodings_are_prefix_consistent(xp, name):
    """f(X[:n])[i] = f(X)[i] for i < n."""
    x = _arrays(xp, 12)(T, D_MODEL)
    full, _ = _run(xp, name, x=x)
    for n in (1, 3):
        prefix, _ = _run(xp, name, x=x[:n, :])
        np.testing.assert_allclose(to_numpy(prefix), to_numpy(full)[:n], **CLOSE)


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_batched_positions_equal_per_row_runs(xp, name):
    """Positions (B, T) with different starts per row give each row's own result."""
    x = _arrays(xp, 13)(2, T, D_MODEL)
    starts = (0, 5)
    pos = xp.stack([xp.arange(s, s + T, dtype=xp.int64) for s in starts])
    out, _ = _run(xp, name, x=x, positions=pos)
    for b, s in enumerate(starts):
        row, _ = _run(xp, name, x=x[b, ...], positions=xp.arange(s, s + T, dtype=xp.int64))
        np.testing.assert_allclose(to_numpy(out)[b], to_numpy(row), **CLOSE)


@pytest.mark.parametrize("name", ["shaw", "txl_direct", "t5", "alibi", "kerple_log", "fire", "sandwich", "cope"])
def test_grouped_query_heads(xp, name):
    """One key/value head shared by both query heads (MQA) runs and matches repeated K/V weights."""
    out, _ = _run(xp, name, n_kv_heads=1)
    a = _arrays(xp, 11)
    w_q, w_k, w_v = a(D_MODEL, H * D, scale=0.5), a(D_MODEL, D, scale=0.5), a(D_MODEL, D)
    rep = refpos.AttentionWeights(w_q=w_q, w_k=xp.concat([w_k, w_k], axis=1), w_v=xp.concat([w_v, w_v], axis=1),
                                  n_heads=H)
    factory, causal, _ = ENCODINGS[name]
    expected, _ = refpos.self_attention(_arrays(xp, 12)(T, D_MODEL), rep, encoding=factory(xp), causal=causal)
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected), **CLOSE)


# ----------------------------------------------------------------------------------------- equal forms


@pytest.mark.parametrize(("a", "b", "key"), [
    ("shaw", "shaw_skewed", "logits"),
    ("txl", "txl_direct", "A"),
    ("alibi", "alibi_key_index", "A"),
])
def test_equal_forms(xp, a, b, key):
    """Skew ≡ gather (1e-12), rel_shift ≡ direct on the causal triangle, causal ≡ key-index ALiBi."""
    _, ta = _run(xp, a)
    _, tb = _run(xp, b)
    np.testing.assert_allclose(to_numpy(ta[key]), to_numpy(tb[key]), **CLOSE)
    np.testing.assert_allclose(to_numpy(ta["out"]), to_numpy(tb["out"]), **CLOSE)


def test_kerple_power_one_is_alibi(xp):
    """KERPLE power (r1 = ALiBi slopes, r2 = 1; eps below the smallest slope) ≡ causal ALiBi."""
    slopes = alibi_slopes(H, xp=xp)
    kerple = refpos.encodings.KERPLE(slopes, xp.ones(H, dtype=xp.float64), kind="power", eps=1e-3)
    out, _ = _run(xp, "alibi", encoding=kerple)
    expected, _ = _run(xp, "alibi")
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected), **CLOSE)


def test_falcon_alibi_is_alibi_with_slopes_over_sqrt_d(xp):
    """Bias before the scale ≡ slopes divided by √d (docs/diagnosis.md), via KERPLE power with r2 = 1."""
    slopes = alibi_slopes(H, xp=xp) / math.sqrt(D)
    kerple = refpos.encodings.KERPLE(slopes, xp.ones(H, dtype=xp.float64), kind="power", eps=1e-4)
    out, _ = _run(xp, "alibi_falcon")
    expected, _ = _run(xp, "alibi", encoding=kerple)
    np.testing.assert_allclose(to_numpy(out), to_numpy(expected), **CLOSE)


def test_shaw_k0_is_nope_plus_wv0(xp):
    a = _arrays(xp, 21)
    w_k, w_v = a(1, D), a(1, D)
    out, _ = _run(xp, "shaw", encoding=Shaw(w_k, w_v, 0))
    nope, _ = _run(xp, "shaw", encoding=NoPE())
    expected = to_numpy(nope) + np.tile(to_numpy(w_v)[0], H)
    np.testing.assert_allclose(to_numpy(out), expected, **CLOSE)


@pytest.mark.parametrize("name", ["t5", "txl", "cope", "kerple_log"])
def test_zero_parameters_are_nope(xp, name):
    """Zero T5 table (scale 1), zero TXL u, v, W_R, zero-initialised CoPE table, KERPLE r1 = eps → tiny."""
    zero = {
        "t5": refpos.encodings.T5(xp.zeros((32, H), dtype=xp.float64)),
        "txl": TransformerXL(*(xp.zeros(s, dtype=xp.float64) for s in ((6, H * D), (H, D), (H, D)))),
        "cope": refpos.encodings.CoPE(xp.zeros((D, 5), dtype=xp.float64)),
        "kerple_log": refpos.encodings.KERPLE(xp.zeros(H, dtype=xp.float64), xp.zeros(H, dtype=xp.float64), eps=1e-300),
    }[name]
    causal = ENCODINGS[name][1]
    x = _arrays(xp, 12)(T, D_MODEL)
    out, _ = refpos.self_attention(x, _weights(xp), encoding=zero, causal=causal)
    scale = 1.0 if name == "t5" else None
    nope, _ = refpos.self_attention(x, _weights(xp), causal=causal, scale=scale)
    np.testing.assert_allclose(to_numpy(out), to_numpy(nope), **CLOSE)


def test_xpos_with_infinite_scale_base_is_a_rotation(xp):
    """γ → ∞: no decay, q and k keep their norms (a pure interleaved rotation)."""
    _, trace = _run(xp, "xpos", encoding=XPos(scale_base=math.inf))
    for raw, rot in (("Q", "Q_rot"), ("K", "K_rot")):
        norms = np.linalg.norm(to_numpy(trace[raw]), axis=-1)
        np.testing.assert_allclose(np.linalg.norm(to_numpy(trace[rot]), axis=-1), norms, **CLOSE)

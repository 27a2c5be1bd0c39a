r"""refpos.encodings.sinusoid1d: the 1-D audio and time-series sinusoids — properties, bad input, the mistakes.

Each property is a function of the table it checks, run on refpos (it holds) and on a deliberately wrong table (it
fails).

Tolerance. Rows at positions up to 2000 in float64: two equal forms differ by the angle's rounding,
``≈ 2·2⁻⁵³·2000 ≈ 4e-13``, and a few ulps of 1: ``atol = 1e-12``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refpos.backend import to_numpy
from refpos.encodings.sinusoid1d import (
    padded_positions,
    padded_sinusoid,
    relative_positions,
    sinusoid_1d,
    standardized,
)
from refpos.encodings.sinusoid1d_mistakes import SINUSOID1D_MISTAKES, Sinusoid1dInputs, identify_sinusoid1d
from refpos.encodings.sinusoid1d_variants import SINUSOID_1D_VARIANTS, sinusoid1d_variant
from refpos.encodings.sinusoidal import sinusoidal, sinusoidal_frequencies
from refpos.tests.kind_checks import check_case, check_mistakes, check_port

ATOL = 1e-12
OPTIONS = st.fixed_dictionaries({"spacing": st.sampled_from(["paper", "tensor2tensor"]),
                                 "layout": st.sampled_from(["interleaved", "concat"]),
                                 "first": st.sampled_from(["sin", "cos"])})


def _np(a) -> np.ndarray:
    return np.asarray(to_numpy(a), dtype=np.float64)


def _pairs(table: np.ndarray, layout: str, first: str) -> tuple[np.ndarray, np.ndarray]:
    half = table.shape[-1] // 2
    u, v = (table[..., 0::2], table[..., 1::2]) if layout == "interleaved" else (table[..., :half], table[..., half:])
    return (u, v) if first == "sin" else (v, u)


def negative_rows_mirror(table_of, options: dict) -> None:
    """Row −r is row r with its sines negated (sin odd, cos even): the relative tables' two halves."""
    table = _np(table_of(relative_positions(40, 40, xp=np), options))  # rows 40 … −40
    sin, cos = _pairs(table, options["layout"], options["first"])
    np.testing.assert_allclose(sin[::-1], -sin, atol=ATOL)
    np.testing.assert_allclose(cos[::-1], cos, atol=ATOL)


@given(options=OPTIONS, quarter=st.integers(1, 16))
def test_relative_rows_mirror(xp, options, quarter):
    negative_rows_mirror(lambda p, o: sinusoid_1d(xp.asarray(p), 4 * quarter, **o), options)


def test_mirror_fails_when_the_sign_is_dropped():
    with pytest.raises(AssertionError):
        negative_rows_mirror(lambda p, o: sinusoid_1d(np.abs(p), 8, **o), {"spacing": "paper", "layout": "concat",
                                                                          "first": "sin"})


def rows_rotate(table_of, options: dict, dim: int) -> None:
    """Row p + r is row p turned by r·ω_k in every pair (the shift of any sinusoid)."""
    positions = np.arange(-30, 200)
    table = _np(table_of(positions, options))
    sin, cos = _pairs(table, options["layout"], options["first"])
    omega = _np(sinusoidal_frequencies(dim, spacing=options["spacing"], xp=np))
    for r in (1, 17):
        turn = r * omega
        np.testing.assert_allclose(sin[r:], sin[:-r] * np.cos(turn) + cos[:-r] * np.sin(turn), atol=ATOL)
        np.testing.assert_allclose(cos[r:], cos[:-r] * np.cos(turn) - sin[:-r] * np.sin(turn), atol=ATOL)


@given(options=OPTIONS, half=st.integers(1, 32))
def test_rows_are_rotations_of_each_other(xp, options, half):
    rows_rotate(lambda p, o: sinusoid_1d(xp.asarray(p), 2 * half, **o), options, 2 * half)


def test_rotation_fails_on_halves_swapped_in_one_row():
    def swapped_after_ten(p, o):
        table = _np(sinusoid_1d(p, 8, **o))
        table[p > 10] = np.roll(table[p > 10], 4, axis=-1)
        return table
    with pytest.raises(AssertionError):
        rows_rotate(swapped_after_ten, {"spacing": "paper", "layout": "concat", "first": "sin"}, 8)


@given(options=OPTIONS, half=st.integers(1, 32), positions=st.lists(st.integers(0, 5000), min_size=1, max_size=20))
def test_the_text_sinusoid_is_the_sin_first_case(xp, options, half, positions):
    """sinusoid_1d with first="sin", amplitude 1, non-negative positions is refpos.encodings.sinusoidal; first="cos"
    exchanges the pair; amplitude and frequency_scale multiply the table and the angles."""
    p = xp.asarray(np.array(positions))
    table = _np(sinusoid_1d(p, 2 * half, **options))
    text = _np(sinusoidal(p, 2 * half, layout=options["layout"], spacing=options["spacing"]))
    if options["first"] == "cos":
        u, v = _pairs(text, options["layout"], "sin")
        text = np.stack([v, u], -1).reshape(text.shape) if options["layout"] == "interleaved" else \
            np.concatenate([v, u], -1)
    np.testing.assert_allclose(table, text, atol=ATOL)
    scaled = _np(sinusoid_1d(p, 2 * half, **options, amplitude=0.5, frequency_scale=2.0))
    np.testing.assert_allclose(scaled, 0.5 * _np(sinusoid_1d(2 * p, 2 * half, **options)), atol=ATOL)


def padding_is_transparent(table_of) -> None:
    """A padded step reads the zero row; the real steps read the rows of the unpadded sequence, wherever the
    padding is (left, right, inside)."""
    padding_idx = 1
    for mask in ([1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 0, 1, 0, 1]):
        m = np.array([mask], dtype=bool)
        table = _np(table_of(m, padding_idx))
        alone = _np(table_of(np.ones((1, int(m.sum())), dtype=bool), padding_idx))
        np.testing.assert_array_equal(table[~m], 0.0)
        np.testing.assert_allclose(table[m], alone[0], atol=ATOL)


def test_fairseq_positions_come_from_the_mask(xp):
    padding_is_transparent(lambda m, pad: padded_sinusoid(xp.asarray(m), 16, pad))
    assert _np(padded_positions(xp.asarray(np.array([[0, 1, 1, 0, 1]])), 1, past=3)).tolist() == [[1, 5, 6, 1, 7]]


def test_padding_property_fails_on_positions_from_the_step_index():
    def index_positions(m, pad):
        return sinusoid_1d(pad + 1 + np.arange(m.shape[-1]) + 0 * m, 16, spacing="tensor2tensor", layout="concat") \
            * m[..., None]
    with pytest.raises(AssertionError):
        padding_is_transparent(index_positions)


@given(n=st.integers(2, 60), half=st.integers(1, 16))
def test_standardized_tables_have_mean_zero_and_deviation_a_tenth(xp, n, half):
    table = sinusoid_1d(xp.arange(n), 2 * half, spacing="paper", layout="interleaved")
    out = _np(standardized(table))
    assert abs(out.mean()) < 1e-15 * out.size
    np.testing.assert_allclose(out.std(ddof=1), 0.1, rtol=1e-12)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: sinusoid_1d([0], 5, spacing="paper", layout="concat"), "dim"),
    (lambda: sinusoid_1d([0], 4, spacing="fairseq", layout="concat"), "spacing"),
    (lambda: sinusoid_1d([0], 4, spacing="paper", layout="half"), "layout"),
    (lambda: sinusoid_1d([0], 4, spacing="paper", layout="concat", first="tan"), "first"),
    (lambda: sinusoid_1d([0.5], 4, spacing="paper", layout="concat"), "positions"),
    (lambda: sinusoid_1d([0], 4, spacing="paper", layout="concat", frequency_scale=0), "frequency_scale"),
    (lambda: sinusoid_1d([0], 4, spacing="paper", layout="concat", amplitude=float("nan")), "amplitude"),
    (lambda: relative_positions(-1, 2), "left"),
    (lambda: padded_positions(np.array([[2, 1]]), 1), "mask"),
    (lambda: padded_positions(np.array([[0.0, 1.0]]), 1), "mask"),
    (lambda: padded_positions(np.array([[0, 1]]), -1), "padding_idx"),
    (lambda: standardized(np.ones((3, 2))), "table"),
    (lambda: sinusoid1d_variant("bert"), "variant"),
    (lambda: SINUSOID_1D_VARIANTS["whisper"].build(8, left=2, right=2), "missing"),
    (lambda: SINUSOID_1D_VARIANTS["speecht5_scaled"].build(8, positions=[0]), "amplitude"),
])
def test_bad_input_is_refused_by_name(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


# ------------------------------------------------------------------------------------------- mistakes
_MASK = np.ones((2, 12), dtype=bool)
_MASK[0, 9:] = False
_MASK[1, :3] = False


def standard_inputs(name: str) -> Sinusoid1dInputs:
    variant = sinusoid1d_variant(name)
    if variant.positions == "given":
        extra = {"amplitude": 0.7} if variant.amplitude == "given" else {}
        if name == "timesfm":
            extra = {"base": 2500.0, "frequency_scale": 2.0}
        return Sinusoid1dInputs(name, 16, {"positions": np.arange(40), **extra})
    if variant.positions == "relative":
        return Sinusoid1dInputs(name, 16, {"left": 7, "right": 0 if name == "gemma4_audio" else 7})
    return Sinusoid1dInputs(name, 16, {"mask": _MASK, "padding_idx": 1})


def float32_port(inputs: Sinusoid1dInputs) -> np.ndarray:
    """The variant as a float32 library computes it (exp of float32 increments, float32 angles), independently."""
    f32, kw, d = np.float32, inputs.keywords(), inputs.dim
    p = inputs.positions().astype(f32)
    k = np.arange(d // 2, dtype=f32)
    if kw["spacing"] == "paper":
        omega = f32(1) / f32(kw["base"]) ** (f32(2) * k / f32(d))
    else:
        omega = np.exp(-k * f32(np.log(kw["base"]) / (d // 2 - 1)))
    angle = p[..., None] * (omega * f32(kw.get("frequency_scale", 1.0)))
    a, b = (np.sin(angle), np.cos(angle)) if kw["first"] == "sin" else (np.cos(angle), np.sin(angle))
    table = (np.stack([a, b], -1).reshape(*p.shape, d) if kw["layout"] == "interleaved" else
             np.concatenate([a, b], -1)) * f32(kw["amplitude"])
    if inputs.record.positions == "padded":
        table = np.where(np.asarray(inputs.inputs["mask"])[..., None], table, f32(0))
    if inputs.record.standardize:
        table = (table - table.mean()) / (table.std(ddof=1) * f32(10))
    return table


@pytest.mark.parametrize("name", list(SINUSOID_1D_VARIANTS))
def test_a_float32_port_is_within_the_bound_and_named_nothing(name):
    inputs = standard_inputs(name)
    check_port(float32_port(inputs), inputs, identify_sinusoid1d)


@pytest.mark.parametrize("name", list(SINUSOID_1D_VARIANTS))
def test_each_mistake_differs_beyond_the_bound_and_is_named(name):
    inputs = standard_inputs(name)
    assert len(check_mistakes(inputs, SINUSOID1D_MISTAKES, identify_sinusoid1d, margin=2)) >= 3


def test_every_mistake_applies_to_some_variant_and_every_variant_names_models():
    applied = {m.name for n in SINUSOID_1D_VARIANTS for m in SINUSOID1D_MISTAKES
               if m.compute(standard_inputs(n)) is not None}
    assert applied == {m.name for m in SINUSOID1D_MISTAKES}
    for variant in SINUSOID_1D_VARIANTS.values():
        assert variant.models and variant.source.startswith("transformers models/") and variant.description


def test_golden_cases_replay_certify_and_reject_a_swap():
    from refpos.golden.sinusoid1d_cases import sinusoid1d_cases

    cases = sinusoid1d_cases()
    assert len({c.id for c in cases}) == len(cases) == 6
    for case in cases:
        check_case(case, lambda a: np.roll(a, a.shape[-1] // 2, axis=-1))

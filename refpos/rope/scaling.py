r"""Inverse frequencies ``ω`` and attention factor ``A`` of every RoPE variant (docs/extrapolation.md#the-math).

Every variant is a rule ``(config, L) → (ω, A)``: it changes only the frequencies and the magnitude,
never the pairing (the layout, :mod:`refpos.rope.core`). Each rule is one record of the registry
(:data:`refpos.rope.rules.RULES`); :func:`rope_frequencies` looks the config's rule up and evaluates its
formulas in float64. Where an anchor's order of operations matters (YaRN, llama3, LongRoPE) the formulas keep
HF's, so that float64 values agree with the spec_tests/test_rope_vectors.py vectors to a few ulps. The
functions below the dispatch are the public names of single steps (the YaRN ramp, the NTK bases …).

``L`` (``seq_len``) is the current sequence length, HF's ``max(position_ids) + 1``. Only ``dynamic``
(transformers rule) and ``longrope`` depend on it; ``None`` means "not known": plain RoPE for dynamic,
the short factors for longrope (as HF at initialisation).

Examples
--------
>>> from refpos.rope.config import RopeConfig
>>> inv, a = rope_frequencies(RopeConfig(head_dim=8))
>>> [round(float(w), 12) for w in inv], a
([1.0, 0.1, 0.01, 0.001], 1.0)
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np

from refpos.backend import Array, array_namespace, get_xp
from refpos.bounds import SEQ_LEN
from refpos.rope.config import RopeConfig
from refpos.rope.rules import RULES, Float64
from refpos.rope.rules import ntk as ntk_rules
from refpos.rope.rules import plain as plain_rules
from refpos.rope.rules import yarn as yarn_rules
from refpos.validation import check_float


def check_rope_config(rope: object) -> RopeConfig:
    if not isinstance(rope, RopeConfig):
        raise TypeError(f"rope must be a refpos.RopeConfig, got {type(rope).__name__} "
                        "(build one with RopeConfig(...) or rope_config_from_params(dict))")
    return rope


def check_seq_len(seq_len: object) -> int | None:
    """A sequence length a caller gives: ``None`` (not known) or :data:`refpos.validation.SEQ_LEN` (``--seq-len``'s
    range and message)."""
    return None if seq_len is None else SEQ_LEN.check("seq_len", seq_len)


def rope_frequencies(
    rope: RopeConfig, *, seq_len: int | None = None, xp: ModuleType | None = None
) -> tuple[Array, float]:
    r"""Inverse frequencies ``ω`` (float64, shape ``(n_pairs,)``) and attention factor ``A``.

    Parameters
    ----------
    rope : RopeConfig
    seq_len : int, optional
        Current length ``L`` (HF: ``max(position_ids) + 1``); used by ``dynamic`` and ``longrope``.
    xp : namespace, optional
        Array namespace of the result (default: the current backend).

    Returns
    -------
    inv_freq : array ``(d/2,)`` (``(head_dim/2,)`` for proportional)
    attention_factor : float

    Notes
    -----
    ``ω`` and ``A`` are the rule's (:data:`refpos.rope.rules.RULES`); docs/extrapolation.md#the-rules tables
    them.

    Examples
    --------
    >>> from refpos.rope.config import RopeConfig
    >>> rope = RopeConfig(rope_type="dynamic", head_dim=128, factor=2.0, max_position_embeddings=4096)
    >>> float(rope_frequencies(rope, seq_len=4096)[0][1]), float(rope_frequencies(rope, seq_len=8192)[0][1])
    (0.8659643233600653, 0.8509942913412162)
    """
    return frequencies_at(check_rope_config(rope), check_seq_len(seq_len), xp)


def frequencies_at(rope: RopeConfig, seq_len: int | None, xp: ModuleType | None = None) -> tuple[Array, float]:
    """:func:`rope_frequencies` at a length refpos derived itself (``max(positions) + 1`` of positions already
    checked), so not checked again."""
    rule, ar = RULES[rope.rope_type], Float64(get_xp(xp))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # an overflow is refused just below
        resolved = rule.inv_freq(rope, seq_len, ar), float(rule.attention_factor(rope, seq_len, ar))
    return check_resolved(rope, *resolved)


def check_resolved(rope: RopeConfig, inv_freq: Array, factor: float) -> tuple[Array, float]:
    """``(inv_freq, factor)`` if every frequency is finite and the attention factor finite and > 0; else a
    ``ValueError`` naming the rule and the first value that is not (a ``short_factor`` of 1e-320 gives
    ``ω = inf``, a ``factor`` of 1e308 an overflowing base)."""
    xp = array_namespace(inv_freq)
    finite = xp.isfinite(inv_freq)
    if not bool(xp.all(finite)):
        j = int(xp.argmin(xp.astype(finite, xp.int8)))
        raise ValueError(f"rope_type {rope.rope_type!r} resolves the inverse frequency ω[{j}] to "
                         f"{float(inv_freq[j])!r}: every resolved frequency must be finite (a parameter of the rule "
                         "overflows float64 or divides by nearly 0)")
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"rope_type {rope.rope_type!r} resolves the attention factor to {factor!r}: it must be "
                         "finite and > 0")
    return inv_freq, factor


def attention_factor(rope: RopeConfig, seq_len: int | None = None) -> float:
    r"""The magnitude ``A`` multiplying cos and sin; 1 for rules that change only the frequencies.

    See docs/extrapolation.md#yarn and docs/extrapolation.md#longrope.

    yarn (HF order): explicit ``attention_factor``; else, when ``mscale`` and ``mscale_all_dim`` are
    both non-zero, :math:`\mathrm{mscale}(s, k_m) / \mathrm{mscale}(s, k_a)`; else
    :math:`0.1 \ln s + 1` (``mscale`` alone is ignored).
    longrope: ``short_mscale`` / ``long_mscale`` when given (Phi-3.5-MoE, transformers'
    ``PhimoeRotaryEmbedding.forward``): the long one exactly when ``L > L_0``, the short one otherwise
    (``L`` unknown included); else explicit ``attention_factor``; else
    :math:`\sqrt{1 + \ln s / \ln L_0}` for ``s > 1``, 1 otherwise.
    """
    rope = check_rope_config(rope)
    return float(RULES[rope.rope_type].attention_factor(rope, check_seq_len(seq_len), Float64(get_xp("numpy"))))


def softmax_multiplier(rope: RopeConfig) -> float:
    r"""DeepSeek MLA softmax-scale multiplier :math:`\mathrm{mscale}(s, k_a)^2` (docs/extrapolation.md#yarn).

    For a rule with a non-zero ``mscale_all_dim`` ``k_a`` (yarn); 1 otherwise. It multiplies every logit
    (``qk_head_dim^{-1/2}`` times it), separately from ``A``: DeepSeek-V3 1.8738542070926265,
    DeepSeek-V2-Lite 1.5896261651208736. :class:`refpos.rope.Rope` applies it when
    ``rope.softmax_mscale`` is set.
    """
    rope = check_rope_config(rope)
    if not rope.mscale_all_dim:
        return 1.0
    return mscale(rope.factor, rope.mscale_all_dim) ** 2


# ------------------------------------------------------------------------- single steps, by their public names
def base_inv_freq(theta: float, d: int, xp: ModuleType) -> Array:
    r"""Plain RoPE frequencies :math:`\omega_j = \theta^{-2j/d}`, ``j = 0 … d/2 − 1`` (docs/rope.md#the-math)."""
    return plain_rules.base_inv_freq(theta, d, Float64(xp))


def ntk_theta(rope: RopeConfig) -> float:
    r"""Static NTK-aware base :math:`\theta' = \theta\,\alpha^{d/(d-2)}`, ``α = factor``
    (docs/extrapolation.md#ntk-aware)."""
    return ntk_rules.ntk_theta(rope, Float64(get_xp("numpy")))


def vllm_ntk_inv_freq(rope: RopeConfig, xp: ModuleType | None = None) -> Array:
    r"""vLLM's ``"ntk"`` rope type, fixed and mixed forms (:func:`refpos.rope.rules.ntk.ntk_inv_freq`)."""
    return ntk_rules.ntk_inv_freq(rope, None, Float64(get_xp(xp)))


def dynamic_theta(rope: RopeConfig, seq_len: int | None) -> float:
    r"""Dynamic-NTK base at length ``L`` (docs/extrapolation.md#dynamic-ntk,
    :func:`refpos.rope.rules.ntk.dynamic_theta`).

    ``s = 1`` is plain RoPE only up to ``L_max``; beyond it the base still grows as
    :math:`\theta (L/L_\text{max})^{d/(d-2)}` (the formula and HF 5.24.0 agree: ``factor = 1`` does not
    give θ' = θ for ``L > L_max``; docs/extrapolation.md#dynamic-ntk).
    """
    return ntk_rules.dynamic_theta(check_rope_config(rope), check_seq_len(seq_len), Float64(get_xp("numpy")))


def yarn_pair_at(rotations: float, rope: RopeConfig) -> float:
    r"""Pair index whose wavelength fits ``rotations`` times into ``L_0`` (docs/extrapolation.md#yarn).

    .. math:: \mathrm{pair\_at}(n) = \frac{d \ln\bigl(L_0 / (2\pi n)\bigr)}{2 \ln\theta}
    """
    rotations = check_float("rotations", rotations, positive=True)  # ln(L_0 / (2π n)): n > 0
    return yarn_rules.yarn_pair_at(rotations, check_rope_config(rope), Float64(get_xp("numpy")))


def yarn_correction_range(rope: RopeConfig, *, truncate: bool | None = None) -> tuple[float, float]:
    """YaRN ramp bounds ``(lo, hi)`` in pair-index space, as HF computes them (docs/extrapolation.md#yarn;
    :func:`refpos.rope.rules.yarn.yarn_correction_range`). ``truncate`` overrides ``rope.truncate``."""
    return yarn_rules.yarn_correction_range(rope, Float64(get_xp("numpy")), truncate=truncate)


def yarn_ramp(rope: RopeConfig, xp: ModuleType | None = None, *, truncate: bool | None = None) -> Array:
    r"""YaRN interpolation weight per pair, ``0`` = keep ``ω_j``, ``1`` = use ``ω_j / s``
    (:func:`refpos.rope.rules.yarn.yarn_ramp`; ``truncate`` overrides ``rope.truncate``).

    .. math:: \gamma_j = \operatorname{clip}\Bigl(\frac{j - lo}{hi - lo}, 0, 1\Bigr)
    """
    return yarn_rules.yarn_ramp(rope, Float64(get_xp(xp)), truncate=truncate)


def mscale(scale: float, k: float = 1.0) -> float:
    r"""YaRN magnitude rule: :math:`0.1\,k\ln s + 1` for ``s > 1``, else 1 (docs/extrapolation.md#yarn)."""
    scale, k = check_float("scale", scale), check_float("k", k)  # a TypeError or ValueError naming them
    return float(yarn_rules.mscale(scale, k, Float64(get_xp("numpy"))))

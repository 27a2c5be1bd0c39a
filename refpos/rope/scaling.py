r"""Inverse frequencies ``ω`` and attention factor ``A`` of every RoPE variant (docs/extrapolation.md#the-math).

Every variant is a rule ``(config, L) → (ω, A)``: it changes only the frequencies and the magnitude,
never the pairing (the layout, :mod:`refpos.rope.core`). Everything is float64; where an anchor's order
of operations matters (YaRN, llama3, LongRoPE) it is HF's, so that float64 values agree with the
spec_tests/test_rope_vectors.py vectors to a few ulps.

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
import numbers
from types import ModuleType
from typing import Any

from refpos.backend import get_xp
from refpos.rope.config import RopeConfig
from refpos.validation import check_int

Array = Any


def check_rope_config(rope: object) -> RopeConfig:
    if not isinstance(rope, RopeConfig):
        raise TypeError(f"rope must be a refpos.RopeConfig, got {type(rope).__name__} "
                        "(build one with RopeConfig(...) or rope_config_from_params(dict))")
    return rope


def check_seq_len(seq_len: object) -> int | None:
    return None if seq_len is None else check_int("seq_len", seq_len, minimum=0)


def base_inv_freq(theta: float, d: int, xp: ModuleType) -> Array:
    r"""Plain RoPE frequencies :math:`\omega_j = \theta^{-2j/d}`, ``j = 0 … d/2 − 1`` (docs/rope.md#the-math)."""
    exponents = xp.arange(0, d, 2, dtype=xp.float64) / d  # (d/2,)
    return theta ** (-exponents)


def ntk_theta(rope: RopeConfig) -> float:
    r"""Static NTK-aware base :math:`\theta' = \theta\,\alpha^{d/(d-2)}`, ``α = factor``.

    See docs/extrapolation.md#ntk-aware.

    The lowest pair ``j = d/2 − 1`` is divided by exactly ``α``; ``j = 0`` keeps ``ω_0 = 1``.
    """
    d = rope.rotary_dim
    return _scaled_base(rope.theta, rope.factor, d)


def vllm_ntk_inv_freq(rope: RopeConfig, xp: ModuleType | None = None) -> Array:
    r"""vLLM's ``"ntk"`` rope type (``NTKScalingRotaryEmbedding._compute_inv_freq`` in
    ``vllm/model_executor/layers/rotary_embedding/ntk_scaling_rope.py``), fixed and mixed forms.

    Notes
    -----
    With ``s = factor``, ``d`` rotated channels and ``j = 0 … d/2 − 1``:

    .. math::
        \omega^\text{fixed}_j = \frac{(\theta s)^{-2j/d}}{s^{2/d}}, \qquad
        \omega^\text{mixed}_j = \frac{\theta^{-2j/d}}{\exp\bigl(a\,(j+1)^b\bigr)},
        \quad a = \frac{\ln s}{(d/2)^b}

    Both divide the lowest pair ``j = d/2 − 1`` by exactly ``s``; the fixed form also divides
    ``ω_0`` by ``s^{2/d}`` (the NTK-aware base keeps ``ω_0 = 1``). transformers has no such type.
    """
    xp = get_xp(xp)
    d, s = rope.rotary_dim, rope.factor
    if rope.ntk_rule == "vllm_fixed":
        return base_inv_freq(rope.theta * s, d, xp) / s ** (2 / d)
    b = rope.mixed_b
    a = math.log(s) / (d / 2) ** b
    pair_number = xp.arange(1, d // 2 + 1, dtype=xp.float64)  # j + 1, (d/2,)
    return base_inv_freq(rope.theta, d, xp) / xp.exp(a * pair_number**b)


def _scaled_base(theta: float, ratio: float, d: int) -> float:
    r"""``θ·ratio^{d/(d−2)}``; ``ValueError`` (naming ``factor``) when it overflows float64."""
    try:
        return theta * ratio ** (d / (d - 2))
    except OverflowError:
        raise ValueError(f"factor: the scaled base θ·{ratio}^(d/(d-2)) overflows float64") from None


def dynamic_theta(rope: RopeConfig, seq_len: int | None) -> float:
    r"""Dynamic-NTK base at length ``L`` (docs/extrapolation.md#dynamic-ntk).

    .. math:: \theta' = \theta\,\Bigl(\frac{s\,L_\text{eff}}{L_\text{max}} - (s - 1)\Bigr)^{d/(d-2)},
        \qquad L_\text{eff} = \max(L, L_\text{max})

    ``L = None`` (HF at initialisation) is ``L_max``: plain RoPE. ``dynamic_rule="vllm_static"`` uses
    ``L = s·L_max`` for every length: :math:`\theta(s^2 - s + 1)^{d/(d-2)}`.

    ``s = 1`` is plain RoPE only up to ``L_max``; beyond it the base still grows as
    :math:`\theta (L/L_\text{max})^{d/(d-2)}` (the formula and HF 5.24.0 agree: ``factor = 1`` does not
    give θ' = θ for ``L > L_max``; docs/extrapolation.md#dynamic-ntk).
    """
    d, s, l_max = rope.rotary_dim, rope.factor, rope.max_position_embeddings
    if rope.dynamic_rule == "vllm_static":
        seq_len = s * l_max
    l_eff = l_max if seq_len is None else max(seq_len, l_max)
    return _scaled_base(rope.theta, s * l_eff / l_max - (s - 1), d)


def yarn_pair_at(rotations: float, rope: RopeConfig) -> float:
    r"""Pair index whose wavelength fits ``rotations`` times into ``L_0`` (docs/extrapolation.md#yarn).

    .. math:: \mathrm{pair\_at}(n) = \frac{d \ln\bigl(L_0 / (2\pi n)\bigr)}{2 \ln\theta}
    """
    d, l0 = rope.rotary_dim, rope.original_max_position_embeddings
    return d * math.log(l0 / (rotations * 2 * math.pi)) / (2 * math.log(rope.theta))


def yarn_correction_range(rope: RopeConfig) -> tuple[float, float]:
    """YaRN ramp bounds ``(lo, hi)`` in pair-index space, as HF computes them (docs/extrapolation.md#yarn).

    ``lo = pair_at(beta_fast)``, ``hi = pair_at(beta_slow)``; with ``truncate`` floored / ceiled; then
    ``lo ≥ 0`` and ``hi ≤ d − 1`` (the upper clamp is ``d − 1``, not ``d/2 − 1``: bit parity with HF).
    """
    lo, hi = yarn_pair_at(rope.beta_fast, rope), yarn_pair_at(rope.beta_slow, rope)
    if rope.truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    return max(lo, 0), min(hi, rope.rotary_dim - 1)


def yarn_ramp(rope: RopeConfig, xp: ModuleType | None = None) -> Array:
    r"""YaRN interpolation weight per pair, ``0`` = keep ``ω_j``, ``1`` = use ``ω_j / s``.

    .. math:: \gamma_j = \operatorname{clip}\Bigl(\frac{j - lo}{hi - lo}, 0, 1\Bigr)

    ``lo == hi`` adds 0.001 to ``hi`` (HF, vLLM, the YaRN repo).
    """
    xp = get_xp(xp)
    lo, hi = yarn_correction_range(rope)
    if lo == hi:
        hi += 0.001
    j = xp.arange(rope.rotary_dim // 2, dtype=xp.float64)
    return xp.clip((j - lo) / (hi - lo), 0.0, 1.0)


def attention_factor(rope: RopeConfig, seq_len: int | None = None) -> float:
    r"""The magnitude ``A`` multiplying cos and sin; 1 for types other than yarn and longrope.

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
    seq_len = check_seq_len(seq_len)
    if rope.rope_type == "yarn":
        if rope.attention_factor is not None:
            return rope.attention_factor
        if rope.mscale and rope.mscale_all_dim:
            return mscale(rope.factor, rope.mscale) / mscale(rope.factor, rope.mscale_all_dim)
        return mscale(rope.factor)
    if rope.rope_type == "longrope":
        if rope.short_mscale is not None:
            use_long = bool(seq_len) and seq_len > rope.original_max_position_embeddings
            return rope.long_mscale if use_long else rope.short_mscale
        if rope.attention_factor is not None:
            return rope.attention_factor
        s = rope.factor
        if s <= 1:
            return 1.0
        return math.sqrt(1 + math.log(s) / math.log(rope.original_max_position_embeddings))
    return 1.0


def softmax_multiplier(rope: RopeConfig) -> float:
    r"""DeepSeek MLA softmax-scale multiplier :math:`\mathrm{mscale}(s, k_a)^2` (docs/extrapolation.md#yarn).

    For ``yarn`` with a non-zero ``mscale_all_dim`` ``k_a``; 1 otherwise. It multiplies every logit
    (``qk_head_dim^{-1/2}`` times it), separately from ``A``: DeepSeek-V3 1.8738542070926265,
    DeepSeek-V2-Lite 1.5896261651208736. :class:`refpos.Rope` applies it when
    ``rope.softmax_mscale`` is set.
    """
    rope = check_rope_config(rope)
    if rope.rope_type != "yarn" or not rope.mscale_all_dim:
        return 1.0
    return mscale(rope.factor, rope.mscale_all_dim) ** 2


def _yarn_inv(rope: RopeConfig, xp: ModuleType) -> Array:
    r"""YaRN "NTK-by-parts", HF order: :math:`\omega'_j = \frac{\gamma_j}{s\,\theta^{2j/d}}
    + \frac{1 - \gamma_j}{\theta^{2j/d}}`."""
    d = rope.rotary_dim
    pos_freqs = rope.theta ** (xp.arange(0, d, 2, dtype=xp.float64) / d)  # θ^(2j/d), (d/2,)
    keep = 1 - yarn_ramp(rope, xp)
    return (1 / (rope.factor * pos_freqs)) * (1 - keep) + (1 / pos_freqs) * keep


def _llama3_inv(rope: RopeConfig, xp: ModuleType) -> Array:
    r"""Llama 3.1 ``apply_scaling`` (docs/extrapolation.md#llama3), wavelengths :math:`\lambda_j = 2\pi/\omega_j`.

    .. math::
        \omega'_j = \begin{cases} \omega_j & \lambda_j < L_0/h \\ \omega_j / s & \lambda_j > L_0/l \\
        (1 - g_j)\,\omega_j / s + g_j\,\omega_j & \text{otherwise (inclusive band)} \end{cases},
        \quad g_j = \frac{L_0/\lambda_j - l}{h - l}

    ``l = h`` (Llama 4): the band holds only a wavelength equal to ``L_0/l``, where ``g`` is ``0/0``
    (transformers computes NaN there); refpos raises ``ValueError`` for that one case and otherwise
    computes the two outer bands, as transformers does.
    """
    w = base_inv_freq(rope.theta, rope.rotary_dim, xp)
    s, l0 = rope.factor, rope.original_max_position_embeddings
    low, high = rope.low_freq_factor, rope.high_freq_factor
    wavelen = 2 * math.pi / w
    low_freq_wavelen, high_freq_wavelen = l0 / low, l0 / high
    mid = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    if high == low:
        if bool(xp.any(mid)):
            raise ValueError("low_freq_factor == high_freq_factor and a wavelength equals "
                             "original_max_position_embeddings / low_freq_factor: the blend is 0/0 there")
        return xp.where(wavelen > low_freq_wavelen, w / s, w)
    g = (l0 / wavelen - low) / (high - low)
    blended = (1 - g) * w / s + g * w
    return xp.where(wavelen > low_freq_wavelen, w / s, xp.where(mid, blended, w))


def _longrope_inv(rope: RopeConfig, seq_len: int | None, xp: ModuleType) -> Array:
    r"""LongRoPE: :math:`\omega_j = 1 / (\lambda_j\,\theta^{2j/d})` with the long factors exactly when
    ``L > L_0`` (strict: ``L = L_0`` is short), the short ones otherwise (``L`` = None or 0 included)."""
    d = rope.rotary_dim
    use_long = bool(seq_len) and seq_len > rope.original_max_position_embeddings
    ext = xp.asarray(rope.long_factor if use_long else rope.short_factor, dtype=xp.float64)  # (d/2,)
    return 1 / (ext * rope.theta ** (xp.arange(0, d, 2, dtype=xp.float64) / d))


def _proportional_inv(rope: RopeConfig, xp: ModuleType) -> Array:
    r"""Proportional RoPE (docs/rope.md#partial-rotary): exponent denominator ``D = head_dim``, ``D/2`` frequencies,
    pairs ``j ≥ n_rot`` get ``ω_j = 0`` (identity), then ``ω / factor``.

    .. math:: \omega_j = \theta^{-2j/D} / s \;(j < n_\text{rot}), \qquad 0 \;(j \ge n_\text{rot})
    """
    n_rot, full = rope.rotary_dim // 2, rope.head_dim
    rotated = rope.theta ** (-(xp.arange(0, 2 * n_rot, 2, dtype=xp.float64) / full))  # (n_rot,)
    zeros = xp.zeros(full // 2 - n_rot, dtype=xp.float64)
    return xp.concat([rotated, zeros]) / rope.factor  # (D/2,)


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
    ======================  ================================================  =========================
    rope_type               ω                                                  A
    ======================  ================================================  =========================
    default                 :math:`\theta^{-2j/d}`                             1
    linear                  :math:`\theta^{-2j/d} / s`                         1
    ntk                     :math:`\theta'^{-2j/d}`, :func:`ntk_theta`;        1
                            vLLM forms: :func:`vllm_ntk_inv_freq`
    dynamic                 :math:`\theta'(L)^{-2j/d}`, :func:`dynamic_theta`  1
    yarn                    ramp blend, :func:`yarn_ramp`                      :func:`attention_factor`
    llama3                  three bands                                        1
    longrope                :math:`1/(\lambda_j\theta^{2j/d})`                 :func:`attention_factor`
    proportional            :math:`\theta^{-2j/D}/s`, zeros past ``n_rot``     1
    ======================  ================================================  =========================

    Examples
    --------
    >>> from refpos.rope.config import RopeConfig
    >>> rope = RopeConfig(rope_type="dynamic", head_dim=128, factor=2.0, max_position_embeddings=4096)
    >>> float(rope_frequencies(rope, seq_len=4096)[0][1]), float(rope_frequencies(rope, seq_len=8192)[0][1])
    (0.8659643233600653, 0.8509942913412162)
    """
    rope = check_rope_config(rope)
    seq_len = check_seq_len(seq_len)
    xp = get_xp(xp)
    kind, d = rope.rope_type, rope.rotary_dim
    if kind == "default":
        inv = base_inv_freq(rope.theta, d, xp)
    elif kind == "linear":
        inv = base_inv_freq(rope.theta, d, xp) / rope.factor
    elif kind == "ntk" and rope.ntk_rule == "aware":
        inv = base_inv_freq(ntk_theta(rope), d, xp)
    elif kind == "ntk":
        inv = vllm_ntk_inv_freq(rope, xp)
    elif kind == "dynamic":
        inv = base_inv_freq(dynamic_theta(rope, seq_len), d, xp)
    elif kind == "yarn":
        inv = _yarn_inv(rope, xp)
    elif kind == "llama3":
        inv = _llama3_inv(rope, xp)
    elif kind == "longrope":
        inv = _longrope_inv(rope, seq_len, xp)
    else:  # proportional
        inv = _proportional_inv(rope, xp)
    return inv, attention_factor(rope, seq_len)


def mscale(scale: float, k: float = 1.0) -> float:
    r"""YaRN magnitude rule: :math:`0.1\,k\ln s + 1` for ``s > 1``, else 1 (docs/extrapolation.md#yarn)."""
    if not isinstance(scale, numbers.Real) or not isinstance(k, numbers.Real):
        raise TypeError("mscale: scale and k must be real numbers")
    return 1.0 if scale <= 1 else 0.1 * k * math.log(scale) + 1.0

"""What every library adapter checks the same way before it calls its library.

The adapter contract (spec_tests/README.md) fixes argument rules that no library's own code states:
the keys of a rope dict (and that a ``None`` value means the key is unset), the width it rotates, the
ALiBi forms, and integer positions. An adapter calls these instead of repeating them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from refpos.encodings.alibi import FORMS as ALIBI_FORMS
from refpos.pairs import place_pairs, split_pairs
from refpos.rope.config import LAYOUTS, PLACEMENTS, ROPE_TYPES
from refpos.rope.params import PARAM_KEYS
from refpos.rope.vision import AXIAL_LAYOUTS, VISION_ROPES
from refpos.testing.adapter_layers import VISION_KEYS

#: the M-RoPE keys (docs/mrope.md): contract keys; an adapter that does not wire M-RoPE raises
#: NotImplementedError for them (:func:`check_rope_keys` with ``mrope=False``)
MROPE_KEYS = frozenset({"mrope_section", "mrope_interleaved"})
#: the keys a contract rope dict may carry (spec_tests/README.md, "RoPE configurations"): the fields of
#: refpos.RopeConfig, i.e. the head geometry, the M-RoPE keys and every key of every scaling rule of the registry
#: (refpos.rope.rules.PARAMETERS); any other key is bad input. Keys of other rope types (beta_fast, short_factor,
#: ...) are allowed on every type.
ROPE_KEYS = PARAM_KEYS


def is_mrope(rope: dict) -> bool:
    """Whether a contract rope dict asks for M-RoPE (``mrope_section`` set, docs/mrope.md)."""
    return rope.get("mrope_section") is not None


def adapter_info(name: str, dtype: str, description: str, *, native_layout: str = "half",
                 rope_types: list[str] | None = None, rope_layouts: list[str] | None = None,
                 rope_placements: list[str] | None = None) -> dict[str, Any]:
    """An adapter's ``INFO`` (spec_tests/README.md): what it is, the dtype it computes in, and the part of
    the RoPE input space it declares (a ``None`` list is left out: everything is drawn)."""
    info: dict[str, Any] = {"name": name, "dtype": dtype, "rope_layout": native_layout}
    for key, values in (("rope_types", rope_types), ("rope_layouts", rope_layouts),
                        ("rope_placements", rope_placements)):
        if values is not None:
            info[key] = list(values)
    info["description"] = description
    return info


def check_rope_keys(rope: dict, library: str, *, mrope: bool = False) -> None:
    """``ValueError`` naming the keys of ``rope`` the contract does not define. An M-RoPE dict
    (``mrope_section`` set) is ``NotImplementedError`` unless the adapter wires M-RoPE for this call
    (``mrope=True``): a per-adapter decision."""
    unknown = set(rope) - ROPE_KEYS
    if unknown:
        raise ValueError(f"unknown rope keys {sorted(unknown)}")
    if not mrope and rope.get("mrope_section") is not None:
        raise NotImplementedError(f"M-RoPE (mrope_section) is not wired for {library}")


def rope_settings(rope: dict, library: str, *, mrope: bool = False) -> dict:
    """``rope`` with its keys checked (:func:`check_rope_keys`) and ``None`` values dropped: a key set to
    ``None`` is unset, so ``rope.get(key, default)`` gives the contract's default."""
    check_rope_keys(rope, library, mrope=mrope)
    return {key: value for key, value in rope.items() if value is not None}


def kind_and_layout(rope: dict, library: str, layouts: tuple[str, ...]) -> tuple[str, str]:
    """``(rope_type, layout)`` of a settled rope dict (:func:`rope_settings`) for a library that rotates its
    first channels in ``layouts``; another contract layout, or the ``last`` placement, is
    ``NotImplementedError``. A rule, layout or placement the contract does not define (``"neox"``) is bad
    input, ``ValueError``, whatever the library supports."""
    kind, layout = rope.get("rope_type", "default"), rope.get("layout", "half")  # no layout: the contract's half
    for key, value, defined in (("rope_type", kind, ROPE_TYPES), ("layout", layout, LAYOUTS),
                                ("placement", rope.get("placement", "first"), PLACEMENTS)):
        if value not in defined:
            raise ValueError(f"{key} must be one of {defined}, got {value!r}")
    if layout not in layouts:
        raise NotImplementedError(f"{library} rotates the {' or '.join(layouts)} layout, not {layout!r}")
    if rope.get("placement", "first") == "last":
        raise NotImplementedError(f"{library} rotates the first channels, not the last")
    return kind, layout


def rotary_width(rope: dict) -> int:
    """The rotated channels: ``rotary_dim``, else ``int(head_dim · partial_rotary_factor)`` (factor 1 when
    absent), the resolution of transformers' ``_compute_default_rope_parameters``."""
    return int(rope.get("rotary_dim") or int(rope["head_dim"]) * rope.get("partial_rotary_factor", 1.0))


def alibi_form(form: str, supported: str, library: str) -> None:
    """``form`` must be a contract ALiBi form; a form the library does not build is ``NotImplementedError``
    (the suite reports a skip with the reason). Head counts are left to the library."""
    if form not in ALIBI_FORMS:
        raise ValueError(f"form must be one of {ALIBI_FORMS}, got {form!r}")
    if form != supported:
        raise NotImplementedError(f"{library} builds the {supported} ALiBi form only, not {form!r}")


def integer_positions(positions, *, reject_negative: bool) -> np.ndarray:
    """``positions`` as int64. ``reject_negative=False`` passes negative positions on to the library, so
    that what it does with them is what the suite sees (torchtune and keras-hub index from the end);
    ``True`` only where the library's kernel cannot take them at all."""
    pos = np.asarray(positions)
    if not np.issubdtype(pos.dtype, np.integer):
        raise TypeError(f"positions must be integers, got {pos.dtype}")
    if reject_negative and (pos < 0).any():
        raise ValueError("positions must be >= 0")
    return pos.astype(np.int64)


def rope_inputs(x: Any, positions: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(x, positions)`` of an ``apply_rope`` call as NumPy arrays, positions int64 and not negative: positions
    ``(T,)`` for every row of ``x``, or ``(B, T)`` for an ``x`` of ``(B, H, T, D)``; anything else is a
    ``ValueError`` naming both shapes (the kernels these adapters wrap take no other)."""
    pos = integer_positions(positions, reject_negative=True)
    x = np.asarray(x)
    if pos.ndim not in (1, 2) or pos.shape[-1] != x.shape[-2]:
        raise ValueError(f"positions must be (T,) or (B, T) with T = x.shape[-2], got {pos.shape} for x {x.shape}")
    if pos.ndim == 2 and not (x.ndim == 4 and pos.shape[0] == x.shape[0]):
        raise ValueError(f"(B, T) positions need x (B, H, T, D), got positions {pos.shape}, x {x.shape}")
    return x, pos


def vision_settings(rope: dict, positions) -> tuple[str, int, float, list[int], str, np.ndarray]:
    """The contract's checks of ``apply_vision_rope``'s arguments, made before any library runs:
    ``(form, head_dim, rope_theta, sections, layout, coordinates)``. A named form (Qwen2-VL, Pixtral,
    Llama 4) fixes two blocks of ``D/4`` pairs, one per coordinate (h, w), in its own layout (returned as
    ``None``); the axial form gives its sections (positive pair counts summing to ``D/2``, one coordinate each)
    and its layout. Coordinates are grid indices: integers ``>= 0``, ``(..., N, len(sections))``."""
    unknown = sorted(set(rope) - set(VISION_KEYS))
    if unknown:
        raise ValueError(f"unknown vision rope keys {unknown}; the keys are {VISION_KEYS}")
    form, d = rope.get("form"), rope.get("head_dim")
    if form not in VISION_ROPES:
        raise ValueError(f"form must be one of {VISION_ROPES}, got {form!r}")
    multiple = 2 if form == "axial" else 4  # the axial head holds its sections' pairs; a named form four blocks
    if not isinstance(d, (int, np.integer)) or d < multiple or d % multiple:
        raise ValueError(f"head_dim must be a positive multiple of {multiple}, got {d!r}")
    theta = float(rope.get("rope_theta", 10000.0))
    if not (math.isfinite(theta) and theta > 0):
        raise ValueError(f"rope_theta must be > 0 and finite, got {theta}")
    sections, layout = [int(d) // 4, int(d) // 4], None
    if form == "axial":
        sections, layout = [int(s) for s in rope.get("sections") or []], rope.get("layout") or "half"
        if min(sections, default=0) < 1 or sum(sections) != d // 2:
            raise ValueError(f"sections must be positive pair counts summing to {d // 2}, got {sections}")
        if layout not in AXIAL_LAYOUTS:
            raise ValueError(f"layout must be one of {AXIAL_LAYOUTS}, got {layout!r}")
    elif rope.get("sections") is not None or rope.get("layout") is not None:
        raise ValueError(f"sections and layout are the axial form's; the {form!r} form fixes its own")
    pos = integer_positions(positions, reject_negative=True)
    if pos.ndim < 2 or pos.shape[-1] != len(sections):
        raise ValueError(f"positions must be (..., N, {len(sections)}): one coordinate per axis, got {pos.shape}")
    return form, int(d), theta, sections, layout, pos


def attention_shapes(q: Any, k: Any, library: str, axes: str) -> tuple[int, int, int, int, int, int]:
    """``(B, H, T_q, d, H_kv, T_k)`` of contract ``q`` ``(..., H, T_q, d)`` and ``k`` ``(..., H_kv, T_k, d)``.

    ``B`` is the product of the leading axes ``...`` (1 for 3-D inputs ``(H, T, d)``: one batch of heads); a
    library whose attention takes 4-D arrays ``axes`` (e.g. ``"(b, n_h, s, h_d)"``) gets them through
    :func:`batch_of_heads`. Fewer than three axes, or leading axes of ``k`` other than ``q``'s, is ``ValueError``;
    so is ``H`` not a multiple of ``H_kv`` (GQA shares each key/value head by ``H / H_kv`` query heads).
    """
    q_shape, k_shape = np.shape(q), np.shape(k)
    if len(q_shape) < 3 or len(k_shape) != len(q_shape) or q_shape[:-3] != k_shape[:-3]:
        raise ValueError(f"q and k must be (..., H, T, d) with the same leading axes ({library}'s attention takes "
                         f"{axes}), got {q_shape} and {k_shape}")
    b = math.prod(q_shape[:-3])
    h, t_q, d = q_shape[-3:]
    h_kv, t_k = k_shape[-3], k_shape[-2]
    if h % h_kv:
        raise ValueError(f"q heads ({h}) must be a multiple of kv heads ({h_kv})")
    return b, h, t_q, d, h_kv, t_k


def batch_of_heads(attention: Callable[..., Any]) -> Callable[..., Any]:
    """An attention written for 4-D ``(B, H, T, d)`` arrays, called with the contract's ``(..., H, T, d)``.

    The leading axes of ``q``, ``k``, ``v`` become one batch axis (3-D inputs: a batch of one) and are restored on
    the output; a ``mask`` or ``bias`` with as many axes as ``q`` is broadcast over them and flattened the same
    way, a shorter one (``(T_q, T_k)``, ``(H, T_q, T_k)``) broadcasts as it is. Every other argument passes
    unchanged.
    """

    @functools.wraps(attention)
    def four_d(q: Any, k: Any, v: Any, bias: Any = None, mask: Any = None, *args: Any, **kwargs: Any) -> np.ndarray:
        q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
        lead = q.shape[:-3]
        attention_shapes(q, k, attention.__module__, "(B, H, T, d)")
        if v.ndim != q.ndim or v.shape[:-3] != lead:
            raise ValueError(f"v must be (..., H_kv, T_k, dv) with q's leading axes {lead}, got {v.shape}")

        def flat(a: Any) -> Any:
            if a is None or np.ndim(a) != q.ndim:
                return a
            a = np.broadcast_to(a, (*lead, *np.shape(a)[-3:]))
            return np.reshape(a, (-1, *a.shape[-3:]))

        out = attention(flat(q), flat(k), flat(v), flat(bias), flat(mask), *args, **kwargs)
        out = np.asarray(out)
        return np.reshape(out, (*lead, *out.shape[-3:]))

    return four_d


def pair_probe(t: int, head: int, width: int, layout: str) -> np.ndarray:
    """``(T, head)`` float32 with 1 in the first channel of each rotated pair and 0 elsewhere: a rotation turns
    each pair ``(1, 0)`` into ``(A·cos φ, A·sin φ)``, so rotating the probe reads the tables of a library that
    forms them inside its rotation (vLLM's and keras-hub's M-RoPE). ``width``: the rotated channels, first."""
    probe = np.zeros((t, head), dtype=np.float32)
    first, _ = split_pairs(probe[:, :width], layout)  # (T, m), a view
    first[...] = 1.0
    return probe


def probe_tables(rotated: np.ndarray, width: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin ``(..., T, width)`` in the layout's channel order from a rotated :func:`pair_probe`."""
    cos, sin = split_pairs(np.asarray(rotated, dtype=np.float64)[..., :width], layout, side="written")
    return place_pairs(cos, cos, layout), place_pairs(sin, sin, layout)


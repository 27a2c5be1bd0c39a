"""What the two lucidrains RoPE adapters (rotary-embedding-torch, x-transformers) share: both libraries
rotate interleaved pairs of the first ``dim`` channels and know only ``default`` and ``linear`` RoPE."""

from __future__ import annotations

#: contract keys; those of other rope types (beta_fast, short_factor, ...) do not change default/linear
CONTRACT_KEYS = {"rope_type", "rope_theta", "factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
                 "mscale", "mscale_all_dim", "attention_factor", "truncate", "low_freq_factor", "high_freq_factor",
                 "short_factor", "long_factor", "head_dim", "partial_rotary_factor", "rotary_dim",
                 "max_position_embeddings", "layout", "placement", "dynamic_rule", "softmax_mscale"}


def supported_rotary(rope: dict, library: str) -> tuple[str, int, float]:
    """``(rope_type, rotary_dim, linear factor)`` of a contract dict such a library can run.

    Unknown keys raise ``ValueError``; what the library cannot express raises ``NotImplementedError``
    (the suite turns that into a skip with the reason).
    """
    unknown = set(rope) - CONTRACT_KEYS
    if unknown:
        raise ValueError(f"unknown rope keys {sorted(unknown)}")
    kind = rope.get("rope_type", "default")
    if kind not in ("default", "linear"):
        raise NotImplementedError(f"rope_type {kind!r}: {library} has linear interpolation only")
    if rope.get("layout", "half") != "interleaved":  # a dict without "layout" means the contract default, half
        raise NotImplementedError(f"{library} rotates interleaved pairs only")
    if rope.get("placement", "first") != "first":
        raise NotImplementedError(f"{library} rotates the first channels")
    head_dim = int(rope["head_dim"])
    d = rope.get("rotary_dim") or int(head_dim * rope.get("partial_rotary_factor", 1.0))
    if d == 2:  # a finding: both constructors compute a rescale factor ** (dim / (dim - 2))
        raise NotImplementedError("RotaryEmbedding(dim=2) raises ZeroDivisionError (dim / (dim - 2))")
    factor = float(rope.get("factor", 1.0)) if kind == "linear" else 1.0
    return kind, d, factor

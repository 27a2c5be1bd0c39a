"""The adapter-contract dict and :class:`RopeConfig`: the keys a spec-suite adapter receives, and the parser.

The dict is a transformers v5 ``rope_parameters`` entry plus the head geometry (``head_dim``,
``rotary_dim`` / ``partial_rotary_factor``, ``layout``, ``placement``) and refpos's extensions; its inverse is
:meth:`RopeConfig.to_params`. spec_tests/README.md states the contract for adapters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from refpos.rope.config import RopeConfig

#: keys of the adapter-contract dict (a transformers v5 rope_parameters entry plus head geometry)
PARAM_KEYS = frozenset(
    {"rope_theta"} | {f.name for f in fields(RopeConfig) if f.compare and f.name != "theta"}
)


def rope_config_from_params(params: Mapping[str, Any]) -> RopeConfig:
    """Build a :class:`RopeConfig` from the adapter-contract dict.

    ``params`` holds the keys of a transformers v5 ``rope_parameters`` entry (``rope_type``,
    ``rope_theta``, ``factor``, ``original_max_position_embeddings``, ``beta_fast``, ``beta_slow``,
    ``mscale``, ``mscale_all_dim``, ``attention_factor``, ``truncate``, ``low_freq_factor``,
    ``high_freq_factor``, ``short_factor``, ``long_factor``) plus ``head_dim``,
    ``partial_rotary_factor`` or ``rotary_dim``, ``max_position_embeddings``, ``layout``, ``placement``
    and the refpos extensions ``dynamic_rule``, ``softmax_mscale``. A value ``None`` means "unset".

    Raises
    ------
    TypeError
        ``params`` is not a mapping.
    ValueError
        A key is unknown (listed), or a value is invalid (named by :class:`RopeConfig`).

    Examples
    --------
    >>> rope_config_from_params({"rope_type": "linear", "rope_theta": 1e6, "factor": 8.0, "head_dim": 256}).factor
    8.0
    """
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping (dict), got {type(params).__name__}")
    unknown = sorted(str(k) for k in params if k not in PARAM_KEYS)
    if unknown:
        raise ValueError(f"params: unknown keys {unknown}; known keys are {sorted(PARAM_KEYS)}")
    if "head_dim" not in params:
        raise ValueError("params: head_dim is required")
    kwargs = {("theta" if k == "rope_theta" else k): v for k, v in params.items() if v is not None}
    return RopeConfig(**kwargs)

"""The config values a formula variant reads (the ``config_keys`` of
:mod:`refpos.encodings.sincos2d_variants` and :mod:`refpos.encodings.sinusoid1d_variants`), read through a view.

A variant names each keyword's config key with the config class's default: one key
(``positional_encoding_temperature``), a pair read per axis (``"(temperature_height, temperature_width)"``:
DAB-DETR), a ratio of two keys (``"max_timescale / min_timescale"``: TimesFM) or a difference
(``"context_length - label_length"``: Autoformer's decoder). :func:`variant_values` reads
them all; each key counts as read.

Examples
--------
>>> from refpos.models.view import ConfigView
>>> view = ConfigView({"temperature_height": 20, "temperature_width": 30})
>>> variant_values(view, {"temperature": ("(temperature_height, temperature_width)", (20, 20))})
{'temperature': (20, 30)}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from refpos.models.view import ConfigView
from refpos.validation import check_float


def _number(view: ConfigView, key: str, default: Any) -> int | float | None:
    """The number at ``key`` (an int stays an int), ``None`` when absent without a default."""
    value = view.value(key, default)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return check_float(view.name(key), value)


def config_value(view: ConfigView, spec: str, default: Any) -> Any:
    """The value of one keyword: a key, a pair ``"(a, b)"`` or a ratio ``"a / b"`` (module docstring)."""
    if spec.startswith("(") and spec.endswith(")"):
        keys = [key.strip() for key in spec[1:-1].split(",")]
        defaults = default if isinstance(default, (list, tuple)) else [default] * len(keys)
        return tuple(_number(view, key, d) for key, d in zip(keys, defaults, strict=True))
    if " - " in spec:
        keys = [key.strip() for key in spec.split(" - ")]
        values = [_number(view, key, None) for key in keys]
        if any(value is None for value in values):
            raise ValueError(f"{' - '.join(view.name(key) for key in keys)}: the config must give each")
        return values[0] - sum(values[1:])
    if " / " in spec:
        top, bottom = (key.strip() for key in spec.split(" / "))
        if not view.has(top) and not view.has(bottom):
            return default
        numerator, denominator = _number(view, top, None), _number(view, bottom, None)
        if numerator is None or denominator is None or denominator == 0:
            raise ValueError(f"{view.name(top)} / {view.name(bottom)}: both must be given, the second non-zero")
        return numerator / denominator
    return _number(view, spec, default)


def variant_values(view: ConfigView, keys: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    """Every keyword of a variant's ``config_keys`` read from ``view`` (its class default when absent)."""
    return {name: config_value(view, spec, default) for name, (spec, default) in keys.items()}


def unmet(view: ConfigView, requires: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a variant's ``requires`` whose value in ``view`` is not the one the variant needs (a key absent
    from the config counts as met: the family row's switch states the class default)."""
    found = {key: view.value(key) for key in requires}
    return {key: value for key, value in found.items() if value is not None and value != requires[key]}


__all__ = ["config_value", "unmet", "variant_values"]

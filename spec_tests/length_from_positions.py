"""Adapters whose library takes the length ``L`` from the batch's positions (``INFO["seq_len"] = "positions"``).

Dynamic NTK and LongRoPE depend on the current length ``L``; the contract passes it as ``seq_len`` (``None``:
``max(positions) + 1``, transformers' rule). A library that has no such argument and reads ``L`` off the
positions it is given (a LongRoPE kernel picking its factors from the batch) declares so, and the suite calls
it accordingly: the ``seq_len`` of a call is dropped when it equals the batch's own length or when the rule
does not depend on ``L``, and otherwise the call is an unsupported example with that reason (never a call
that would silently use another length).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

#: the contract functions that take positions and a seq_len, and the names of their position arguments
TAKES_LENGTH = {"apply_rope": ("positions",), "rope_cos_sin": ("positions",), "apply_rope_complex": ("positions",),
                "rope_attention_logits": ("q_positions", "k_positions")}


def depends_on_length(rope: dict) -> bool:
    """Whether the rule's frequencies depend on ``L``: dynamic NTK (HF's rule) and LongRoPE."""
    kind = rope.get("rope_type") or "default"
    return kind == "longrope" or (kind == "dynamic" and rope.get("dynamic_rule") != "vllm_static")


def length_from_positions(name: str, func: Callable[..., Any], contract: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` called with ``seq_len`` dropped where the library's own length (from the positions) is the one
    asked for; ``NotImplementedError`` where it is not (``contract``: the reference function, for the signature)."""
    signature = inspect.signature(contract)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        seq_len = bound.arguments.pop("seq_len", None)
        if seq_len is not None and depends_on_length(bound.arguments["rope"]):
            own = 1 + max(int(np.max(bound.arguments[p])) for p in TAKES_LENGTH[name])
            if seq_len != own:
                raise NotImplementedError(f"the library takes L from the batch's positions (INFO['seq_len'] = "
                                          f"'positions', L = {own}); seq_len = {seq_len} cannot be asked for")
        return func(**bound.arguments)

    return wrapper

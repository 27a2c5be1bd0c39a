"""Every key a scaling rule may read, once: its type, default, meaning and check (:class:`Parameter`).

A key shared by several rules (``factor``, ``original_max_position_embeddings``, ``attention_factor``) is
one parameter, read by each rule that lists it. Each becomes a field of :class:`refpos.RopeConfig` (in this
order) and a key of the adapter contract (spec_tests/README.md); a rule's record names the ones it reads.
Names follow transformers' ``rope_parameters`` keys; ``in_config=False`` marks refpos's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from refpos.validation import MAX_EXACT_POSITION, check_bool, check_choice, check_float, check_int

#: dynamic NTK: transformers' per-call rule, or vLLM's single static base at L = factor·L_max
DYNAMIC_RULES = ("hf", "vllm_static")
#: static NTK: the NTK-aware base change (also Hunyuan's NTK-alpha), vLLM's fixed and mixed "ntk" forms
NTK_RULES = ("aware", "vllm_fixed", "vllm_mixed")


@dataclass(frozen=True)
class Parameter:
    """One key a scaling rule reads: a field of :class:`refpos.RopeConfig` and a key of the adapter contract.

    ``check(name, value)`` validates a value that is set (not ``None``) and returns it normalised; it
    raises ``TypeError``/``ValueError`` naming the key. ``in_config``: a key of a model's rope dict (read by
    the config resolver); otherwise refpos's own (set by refpos, the family table or the user). ``rare``: a key
    few configs set, listed in a resolution's provenance only when it is set.
    """

    name: str
    annotation: str
    default: Any
    doc: str
    check: Callable[[str, Any], Any]
    in_config: bool = True
    rare: bool = False


def positive(name: str, value: Any) -> float:
    return check_float(name, value, positive=True)


def non_negative(name: str, value: Any) -> float:
    return check_float(name, value, minimum=0.0)


def length(name: str, value: Any) -> int:
    return check_int(name, value, minimum=1, maximum=MAX_EXACT_POSITION)  # a position float64 holds exactly


def positive_list(name: str, value: Any) -> tuple[float, ...]:
    """A list of numbers > 0 (its length is the rule's check)."""
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
        raise TypeError(f"{name} must be a list of numbers, got {type(value).__name__}")
    return tuple(check_float(f"{name}[{i}]", v, positive=True) for i, v in enumerate(value))


def unit_interval(name: str, value: Any) -> float:
    value = check_float(name, value, minimum=0.0)
    if value > 1:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return value


def _parameters(*items: Parameter) -> Mapping[str, Parameter]:
    return MappingProxyType({p.name: p for p in items})


#: name -> parameter, in the order of :class:`refpos.RopeConfig`'s fields
PARAMETERS: Mapping[str, Parameter] = _parameters(
    Parameter("factor", "float | None", None, "the scale s (the rule says whether it must be >= 1 and how an "
              "absent one is filled in)", positive),
    Parameter("original_max_position_embeddings", "int | None", None, "the pre-training length L_0", length),
    Parameter("beta_fast", "float", 32.0, "YaRN ramp: turns within L_0 above which a pair keeps its frequency",
              positive),
    Parameter("beta_slow", "float", 1.0, "YaRN ramp: turns within L_0 below which a pair is divided by s "
              "(beta_fast >= beta_slow; equal: the ramp is widened by 0.001, as in transformers)", positive),
    Parameter("mscale", "float | None", None, "YaRN (DeepSeek) magnitude key; used only with mscale_all_dim",
              non_negative),
    Parameter("mscale_all_dim", "float | None", None, "YaRN (DeepSeek) magnitude key; used only with mscale",
              non_negative),
    Parameter("attention_factor", "float | None", None, "an explicit A: replaces the rule's formula", positive),
    Parameter("truncate", "bool", True, "YaRN: floor/ceil the correction range (False: gpt-oss)", check_bool),
    Parameter("low_freq_factor", "float | None", None, "llama3 band factor l (0 < l <= h)", positive),
    Parameter("high_freq_factor", "float | None", None, "llama3 band factor h (equal factors: the blended band "
              "is empty, as Llama 4 ships them)", positive),
    Parameter("short_factor", "tuple[float, ...] | None", None, "LongRoPE per-pair divisors for L <= L_0 "
              "(d/2 numbers)", positive_list),
    Parameter("long_factor", "tuple[float, ...] | None", None, "LongRoPE per-pair divisors for L > L_0 "
              "(d/2 numbers)", positive_list),
    Parameter("dynamic_rule", "str", "hf", f"dynamic NTK: {DYNAMIC_RULES[0]!r} (transformers, at the current "
              f"length) or {DYNAMIC_RULES[1]!r} (vLLM, the base at L = s·L_max)",
              lambda name, value: check_choice(name, value, DYNAMIC_RULES), in_config=False),
    Parameter("softmax_mscale", "bool", False, "YaRN: multiply the softmax scale by mscale(s, mscale_all_dim)² "
              "(DeepSeek MLA)", check_bool, in_config=False),
    Parameter("ntk_rule", "str | None", None, f"static NTK: one of {NTK_RULES} (default 'aware' for ntk)",
              lambda name, value: check_choice(name, value, NTK_RULES), in_config=False, rare=True),
    Parameter("mixed_b", "float | None", None, "vLLM's mixed NTK form: the exponent b > 0", positive, rare=True),
    Parameter("short_mscale", "float | None", None, "LongRoPE: the attention factor for L <= L_0 (Phi-3.5-MoE; "
              "with long_mscale)", positive, in_config=False, rare=True),
    Parameter("long_mscale", "float | None", None, "LongRoPE: the attention factor for L > L_0 (Phi-3.5-MoE; "
              "with short_mscale)", positive, in_config=False, rare=True),
    Parameter("extrapolation_factor", "float | None", None, "log-space YaRN (Grok): the weight e in [0, 1] of the "
              "kept frequency where the ramp keeps it (default 1)", unit_interval, rare=True),
)

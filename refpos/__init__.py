"""refpos: a float64 reference and spec test suite for Transformer positional encodings.

Every encoding plugs into one attention pipeline (:func:`self_attention`) through the hooks of
:class:`Encoding`; every function that takes arrays works on NumPy, CuPy and array-api-strict arrays
(:mod:`refpos.backend`).

Public API
----------
The rule: ``refpos.__all__`` holds only what a first program needs, and names every subpackage as the
way in to the rest. A first program runs attention with an encoding (:func:`self_attention` and its
:class:`AttentionWeights`, :func:`attention`, :class:`Encoding`), rotates with RoPE (:func:`apply_rope`,
:class:`RopeConfig`, :func:`rope_config_from_params`, :func:`rope_frequencies`, :func:`rope_cos_sin`),
resolves a model's config.json (:func:`model_positions`), chooses the array library and reads the result
back (:func:`set_backend`, :func:`use_backend`, :func:`to_numpy`), and redoes the worked example
(:func:`worked_example`). Everything else is public in its subpackage, whose own ``__all__`` lists it:

* :mod:`refpos.encodings` — every encoding other than RoPE: its class (``ALiBi``, ``T5``, ``NoPE``, …)
  and its functions (``alibi_slopes``, ``t5_bucket``, …);
* :mod:`refpos.rope` — RoPE beyond the essentials: ``Rope``, ``DroPE``, the other forms, the scaling rules;
* :mod:`refpos.models` — reading a config.json: ``from_hf_config``, ``hf_layers``, ``ModelPositions``, …;
* :mod:`refpos.core` — softmax's masks, chunked attention, the heads of grouped-query attention;
* :mod:`refpos.pipeline` — the attention layer and the worked example's text;
* :mod:`refpos.backend` — the array libraries (``BACKENDS``, ``get_xp``, ``array_namespace``, …);
* :mod:`refpos.check` — ``check_*``: compare a candidate with the reference and name its mistake;
* :mod:`refpos.golden` — tolerances, comparison and the manifest of golden outputs;
* :mod:`refpos.testing` — the Hypothesis strategies and profiles, the reference adapter.

A subpackage re-exports no name that is also one of its modules (``refpos.core.softmax`` is the module,
so the function is ``refpos.core.softmax.softmax``; likewise ``refpos.encodings.sinusoidal.sinusoidal``
and ``refpos.encodings.xpos.xpos``). Names in these ``__all__`` lists keep their meaning and signature.
The other modules (``refpos.tools``, ``refpos.cli``, the modules of each subpackage beyond its
``__all__``, and any name that starts with ``_``) are importable and documented, but internal: they may
move between releases. docs/api.md lists the front door and each subpackage's names.

Deprecated aliases: each name of :data:`MOVED` (a name of a subpackage, ``refpos.alibi_slopes``, or a
module of one, ``refpos.adapter`` for ``refpos.testing.adapter``) resolves as ``refpos.<name>`` to the object
at its home, with a :class:`DeprecationWarning` that names the home, until refpos 0.2. A module alias works in
the import statement forms too (``import refpos.adapter``, ``from refpos.adapter import X``, and the modules
that left ``refpos.rope``: ``import refpos.rope.layers``), through a finder on ``sys.meta_path`` that warns
the same way. No alias is in ``__all__`` nor in ``dir(refpos)``.

The layers, each importing only from those before it: :mod:`refpos.backend`, :mod:`refpos.validation`,
:mod:`refpos.bounds`, :mod:`refpos.parallel`, :mod:`refpos.encoding` → :mod:`refpos.core` (attention),
:mod:`refpos.encodings`, :mod:`refpos.rope` → :mod:`refpos.models` (a model's config.json) → :mod:`refpos.pipeline` →
:mod:`refpos.golden` → :mod:`refpos.check` → :mod:`refpos.testing`, :mod:`refpos.tools` → :mod:`refpos.cli`
(the only code that parses arguments or prints). The front door imports layers 0-4; :mod:`refpos.golden`,
:mod:`refpos.check` and :mod:`refpos.testing` are imported when first used (``refpos.check``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import pkgutil
import sys
import types
import warnings
from typing import Any

from refpos import backend as backend  # the module: the home of the backend names
from refpos.backend import set_backend, to_numpy, use_backend
from refpos.core.attention import attention
from refpos.encoding import Encoding
from refpos.models import model_positions
from refpos.pipeline.layer import AttentionWeights, self_attention
from refpos.pipeline.worked_example import worked_example
from refpos.rope import RopeConfig, apply_rope, rope_config_from_params, rope_cos_sin, rope_frequencies

__version__ = "0.1.0"

#: the subpackages named by the front door; those of layers 5+ are imported on first use
SUBPACKAGES = ("backend", "check", "core", "encodings", "golden", "models", "pipeline", "rope", "testing")

__all__ = [
    "AttentionWeights",
    "Encoding",
    "RopeConfig",
    "__version__",
    "apply_rope",
    "attention",
    "model_positions",
    "rope_config_from_params",
    "rope_cos_sin",
    "rope_frequencies",
    "self_attention",
    "set_backend",
    "to_numpy",
    "use_backend",
    "worked_example",
    *SUBPACKAGES,
]


def _homes(home: str, *names: str) -> dict[str, str]:
    """``{name: "home.name"}``: names that moved, each to the same name in ``home``."""
    return {name: f"{home}.{name}" for name in names}


#: the one table of deprecated aliases: ``refpos.<old name>`` -> the dotted path of the same object
#: (``pkgutil.resolve_name`` reads it); each resolves with a DeprecationWarning until refpos 0.2
MOVED: dict[str, str] = {
    **_homes("refpos.backend", "BACKENDS", "array_namespace", "backend_name", "get_xp"),
    **_homes(
        "refpos.core",
        "causal_mask", "chunked_attention", "chunked_causal_mask", "merge_heads", "repeat_kv",
        "sliding_window_mask", "split_heads",
    ),
    **_homes("refpos.core.softmax", "softmax"),
    **_homes(
        "refpos.encodings",
        "ALiBi", "CoPE", "DeBERTa", "DistanceBias", "FIRE", "KERPLE", "LearnedAbsolute", "NoPE", "Sandwich",
        "Shaw", "Sinusoidal", "T5", "TransformerXL", "XPos",
        "alibi_bias", "alibi_bias_from_positions", "alibi_slopes",
        "cope_gates", "cope_logits", "cope_position_logits", "cope_positions",
        "deberta_attention_logits", "deberta_c2p_terms", "deberta_log_buckets", "deberta_p2c_terms",
        "deberta_position_projection", "deberta_relative_index",
        "distance_bias", "relative_positions", "fire_bias", "fire_features", "kerple_bias", "learned_lookup",
        "sandwich_bias", "shaw_index", "shaw_key_terms", "shaw_value_terms", "skew", "unskew",
        "interleaved_to_concat_permutation", "sinusoidal_frequencies", "sinusoidal_shift_matrix",
        "t5_bias", "t5_bucket", "txl_position_scores", "txl_position_table", "txl_rel_shift", "txl_scores",
    ),
    **_homes("refpos.encodings.sinusoidal", "sinusoidal"),
    **_homes("refpos.encodings.xpos", "xpos"),
    **_homes(
        "refpos.models",
        "ModelPositions", "UnknownFamilyWarning", "from_hf_config", "hf_layer", "hf_layer_types", "hf_layers",
    ),
    **_homes("refpos.pipeline", "explain_text"),
    **_homes(
        "refpos.rope",
        "DroPE", "DynamicNTKState", "Rope", "apply_rope_complex", "half_to_interleaved_permutation",
        "interleaved_to_half_permutation", "permute_qk_heads", "rms_norm", "rope_rotation_matrix",
        "softmax_multiplier",
    ),
    # modules of subpackages, by their top-level names (and those of refpos.rope that moved to refpos.models)
    "absolute": "refpos.encodings.sinusoidal",
    "adapter": "refpos.testing.adapter",
    "alibi": "refpos.encodings.alibi",
    "bench": "refpos.tools.bench",
    "certify": "refpos.golden.certify",
    "chunked": "refpos.core.chunked",
    "cope": "refpos.encodings.cope",
    "diagnosis": "refpos.check.diagnosis",
    "diagnosis_tables": "refpos.check.tables",
    "golden_cases": "refpos.golden.cases",
    "golden_cli": "refpos.golden.generate",
    "golden_rope": "refpos.golden.rope_cases",
    "golden_scenarios": "refpos.golden.scenarios",
    "heads": "refpos.core.heads",
    "hypothesis_profiles": "refpos.testing.profiles",
    "measure": "refpos.tools.measure",
    "npy": "refpos.golden.npy",
    "plots": "refpos.tools.plots",
    "relative": "refpos.encodings.shaw",
    "strategies": "refpos.testing.strategies",
    "t5": "refpos.encodings.t5",
    "tolerance": "refpos.golden.tolerance",
    "txl": "refpos.encodings.txl",
    **{f"rope.{name}": f"refpos.models.{name}" for name in (
        "families", "hf", "hf_files", "hf_resolver", "layers", "mm_positions", "mrope_hf", "position_keys")},
    "rope.cli": "refpos.cli.rope",
}


def deprecation_message(name: str) -> str:
    """What ``refpos.<name>`` warns: the alias is deprecated, and where the object lives."""
    return f"refpos.{name} is a deprecated alias of {MOVED[name]}: import it from there"


def __getattr__(name: str) -> Any:
    """A subpackage on first use; a name of :data:`MOVED` from its home, with a DeprecationWarning."""
    if name in SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in MOVED and "." not in name:
        if name in _IMPORTED:  # the lookup of ``import refpos.<name> as x``, whose import has just warned
            _IMPORTED.discard(name)
        else:
            warnings.warn(deprecation_message(name), DeprecationWarning, stacklevel=2)
        return pkgutil.resolve_name(MOVED[name])
    raise AttributeError(f"module 'refpos' has no attribute {name!r}")


def moved_module(name: str) -> str | None:
    """The module ``import refpos.<name>`` loads for an alias of :data:`MOVED`: its home when that is a module,
    the home's module when the home is a function named like its module (``refpos.core.softmax.softmax``), else
    ``None`` (a name, not a module: ``from refpos import alibi_slopes`` is its form)."""
    home = MOVED.get(name)
    if home is None:
        return None
    parent, _, last = home.rpartition(".")
    for candidate in (home, parent if last == name.rpartition(".")[2] == parent.rpartition(".")[2] else None):
        if candidate is None:
            continue
        try:
            if importlib.util.find_spec(candidate) is not None:
                return candidate
        except ModuleNotFoundError:  # its parent is a module, not a package
            continue
    return None


def _caller_level() -> int:
    """The ``stacklevel``, from the caller of this function, of the first frame outside the import machinery and
    this module: the import statement. (``warnings.warn`` itself skips the frames of ``importlib._bootstrap``
    when it counts, so they are not counted here.)"""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and (frame.f_code.co_filename == __file__
                                        or frame.f_code.co_filename.startswith("<frozen importlib")):
        frame = frame.f_back
        level += not frame.f_code.co_filename.startswith("<frozen importlib")
    return level


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The import statement forms of the module aliases of :data:`MOVED` (``import refpos.adapter``, ``from
    refpos.adapter import X``, ``import refpos.rope.layers``): each loads the module at its home, with the
    DeprecationWarning that names it. The module keeps its own ``__name__`` and ``__spec__``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        name = fullname.removeprefix(f"{__name__}.")
        home = moved_module(name) if fullname.startswith(f"{__name__}.") else None
        if home is None:
            return None
        warnings.warn(deprecation_message(name), DeprecationWarning, stacklevel=_caller_level())
        return importlib.util.spec_from_loader(fullname, self, origin=home)

    def create_module(self, spec: Any) -> Any:
        module = importlib.import_module(spec.origin)
        spec.loader_state = module.__spec__  # the import system sets __spec__ to the alias's: put it back
        return module

    def exec_module(self, module: Any) -> None:
        module.__spec__ = module.__spec__.loader_state


#: module aliases the import system has just loaded (it binds each on refpos next): their next lookup, the
#: ``as`` of the same import statement, does not warn a second time
_IMPORTED: set[str] = set()


class _Refpos(types.ModuleType):
    """refpos itself: an import of an alias binds nothing here, so every later ``refpos.<alias>`` still goes
    through ``__getattr__`` and warns (and no alias shows in ``dir(refpos)``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in MOVED:
            _IMPORTED.add(name)
            return
        super().__setattr__(name, value)


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())
sys.modules[__name__].__class__ = _Refpos


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

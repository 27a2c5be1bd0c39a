"""A *call file*: the JSON naming the adapter-contract function a candidate is the output of, and its arguments.

``refpos check <kind> --call CALL.json --candidate Y.npy`` reads one::

    {"function": "window_bias",
     "args": {"form": "beit", "window": [7, 7], "table": {"npy": "table.npy"}, "table_window": [5, 5]}}

``function`` is one of the functions the kind's target takes (the contract's: ``spec_tests/README.md`` lists
their signatures; and a few of refpos's own, docs/diagnosis.md#the-catalogue-vision-and-audio-kinds); ``args`` its
keyword arguments, each a JSON value or ``{"npy": "FILE.npy"}`` (an object whose one key is ``npy``): an array
read from a ``.npy`` file beside the call file. The files are read through the call file's directory, opened once
(:mod:`refpos.directory`): a path with a ``..`` component, an absolute path or a symlink on the way is refused,
and a ``.npy`` file by the strict reader (:mod:`refpos.golden.files.npy`: never unpickled).

A golden case's ``call`` entry (``{"function", "args": [{"value"} | {"input"}], "returns"}``) names the same
functions with positional arguments; :func:`case_arguments` turns it into the same keyword arguments.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from refpos.check.shared.arrays import Unusable
from refpos.directory import Directory
from refpos.golden.files.npy import MAX_HEADER_BYTES, parse_npy
from refpos.inputs import MAX_JSON_BYTES, InputError, max_npy_bytes, parse_json

#: the keys of a call file
CALL_KEYS = ("function", "args")


def _is_array(value: Any) -> bool:
    """Whether an argument names a ``.npy`` file: an object whose one key is ``npy``."""
    return isinstance(value, dict) and set(value) == {"npy"}


def _array(directory: Directory, value: Mapping[str, Any], where: str) -> Any:
    """The array of ``{"npy": FILE}``, read through ``directory``."""
    rel = value["npy"]
    if not isinstance(rel, str):
        raise Unusable(f"{where}: an array argument is {{\"npy\": \"FILE.npy\"}}, got {dict(value)!r}")
    if os.path.isabs(rel):
        raise Unusable(f"{where}: {rel!r} must be a path relative to the call file's directory")
    data = directory.read_bytes(rel, what=".npy file", max_bytes=max_npy_bytes() + MAX_HEADER_BYTES + 12)
    return parse_npy(data, directory.name(rel))


def read_call(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """``(function, keyword arguments)`` of the call file ``path``, its ``.npy`` arguments read (module
    docstring); :class:`~refpos.check.shared.arrays.Unusable` naming what is wrong."""
    path = Path(path)
    try:
        with Directory(path.parent) as directory:
            text = directory.read_bytes(path.name, what="call file", max_bytes=MAX_JSON_BYTES)
            try:
                call = parse_json(text.decode("utf-8-sig"), str(path))
            except UnicodeDecodeError as exc:
                raise Unusable(f"{path}: not UTF-8 text (byte {exc.start})") from None
            if not isinstance(call, dict) or set(call) != set(CALL_KEYS):
                raise Unusable(f"{path}: a call file is {{\"function\": NAME, \"args\": {{...}}}}, got keys "
                               f"{sorted(call) if isinstance(call, dict) else type(call).__name__}")
            function, args = call["function"], call["args"]
            if not isinstance(function, str) or not isinstance(args, dict):
                raise Unusable(f"{path}: \"function\" must be a name and \"args\" an object of keyword arguments")
            arguments = {name: _array(directory, value, f"{path}: args.{name}") if _is_array(value) else value
                         for name, value in args.items()}
    except InputError as exc:
        raise Unusable(str(exc).splitlines()[0]) from None
    return function, arguments


def case_arguments(call: Mapping[str, Any], inputs: Mapping[str, Any], signature: Callable[..., Any],
                   parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A golden case's positional ``call`` arguments as the keyword arguments of ``signature`` (a function with
    the contract function's parameters): ``{"value": v}`` is ``v``, ``{"input": name}`` the case's input array,
    ``{"param": name}`` the entry ``name`` of the case's ``parameters`` (a vision RoPE case's ``rope`` dict)."""
    parameters = parameters or {}
    values = [inputs[a["input"]] if "input" in a else parameters.get(a["param"]) if "param" in a else a.get("value")
              for a in call.get("args", [])]
    return dict(inspect.signature(signature).bind(*values).arguments)


__all__ = ["CALL_KEYS", "case_arguments", "read_call"]

"""What the hostile tests share: a call bounded in time, the one-line exit 2 of the command line, a manifest
edited in place, and a small golden directory of one model (refpos/tests/test_hostile_*.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from refpos.cli import main
from refpos.golden.cases.rope import model_cases
from refpos.golden.files import manifest as golden
from refpos.golden.generate import model_source

#: a small RoPE model: three cases (frequencies, cos-sin, apply) of a few kilobytes
MODEL = {"model_type": "llama", "rope_theta": 10000.0, "head_dim": 8, "hidden_size": 32, "num_attention_heads": 4,
         "max_position_embeddings": 64}


def bounded(call: Callable[[], Any], seconds: float = 20.0) -> Any:
    """``call()`` in a thread; fail (instead of hanging the suite) if it has not returned in ``seconds``."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the test thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s (blocked on a FIFO? an unbounded loop?)"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def exit_2(argv: list[str], capsys: Any) -> str:
    """``refpos ARGV`` exits 2 with one line on stderr and no traceback; that line."""
    code = bounded(lambda: main(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def edit_manifest(root: Path, change: Callable[[dict], Any]) -> dict:
    """``change(manifest)`` applied to ``root/manifest.json`` in place; the changed manifest."""
    path = root / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf8"))
    change(manifest)
    path.write_text(json.dumps(manifest), encoding="utf8")
    return manifest


def write_model(root: Path, config: dict = MODEL, name: str = "toy", positions: list[int] | None = None) -> Path:
    """A golden directory of ``config``'s cases at ``positions`` (as ``refpos golden model`` writes it)."""
    positions = [0, 1, 7, 40] if positions is None else positions
    cases = model_cases(config, name, positions=np.asarray(positions))
    golden.write_cases(root, cases, title=name, certify=False, source=model_source(config, name, positions, None))
    return root

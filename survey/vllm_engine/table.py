"""The vLLM survey's stored table (``survey/results/vllm.json``) and its section of ``docs/survey.md``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "survey" / "results" / "vllm.json"


def load(path: Path = TABLE) -> dict[str, Any]:
    if not path.is_file():
        return {"meta": {}, "rows": []}
    return json.loads(path.read_text(encoding="utf-8"))


def save(table: dict[str, Any], path: Path = TABLE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

"""Propose family-table rows for learned absolute positions, and check each against transformers.

For every model type of transformers' config mapping that the family table does not know, the script reads
its modeling file for a learned position table (``nn.Embedding(config.max_position_embeddings, …)`` or
``…n_positions…``) and for the fairseq / RoBERTa offset (``create_position_ids_from_input_ids``: positions
from ``padding_idx + 1``). A proposal is printed only when it holds on the model itself: a tiny model built
from the config class's defaults runs a forward pass of 10 tokens, a hook on its position table records the
rows it reads, and those rows and the table's length must be what refpos resolves with the proposed row.

It proposes; a person reads the modeling file the row cites and adds the row to
refpos/models/data/families.toml (refpos/tests/test_anchors_models.py holds the families of each encoding
against transformers, and the survey compares every model type).

Usage (an environment with torch and transformers; refpos importable)::

    python scripts/propose_families.py > proposals.toml
"""

from __future__ import annotations

import dataclasses
import re
import sys
import warnings
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoModel
from transformers.models.auto.configuration_auto import CONFIG_MAPPING, model_type_to_module_name

from refpos.models import families
from refpos.models.facts import StackFacts
from refpos.models.kinds.absolute import LearnedFacts
from refpos.models.positions import model_positions

MODELS = Path(transformers.__file__).parent / "models"
TABLE = re.compile(r"(\w+) = nn\.Embedding\(\s*config\.(max_position_embeddings|n_positions)")
SMALL = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
         "vocab_size": 64, "pad_token_id": 1, "embedding_size": 16, "max_position_embeddings": 40}


def proposal(model_type: str) -> tuple[str, families.Family] | None:
    """A learned-table row read off the modeling file, or None."""
    module = model_type_to_module_name(model_type)
    files = sorted((MODELS / module).glob("modeling_*.py"))
    if len(files) != 1:
        return None
    text = files[0].read_text(encoding="utf8")
    found = TABLE.search(text)
    if found is None or "rotary" in text.lower() or "alibi" in text:
        return None
    offset = {"offset_key": "pad_token_id"} if "def create_position_ids_from_input_ids" in text else {}
    owner = re.findall(r"\nclass (\w+)\(nn\.Module\):(?:(?!\nclass ).)*?" + re.escape(found.group(0)), text, re.S)
    source = f"{module}/{files[0].name}: {owner[-1] if owner else 'forward'}"
    learned = LearnedFacts(table=(found.group(2),), **offset)
    row = families.Family(model_type, source, positions=StackFacts("learned", (("learned", learned),)),
                          stacks="encoder")
    return found.group(1), row


def rows_read(model_type: str, table_name: str) -> tuple[list[int], int] | None:
    """The rows a tiny model's position table reads in a forward pass of 10 tokens, and its length."""
    config = AutoConfig.for_model(model_type, **SMALL)
    model = AutoModel.from_config(config).eval()
    table = next((m for name, m in model.named_modules() if name.endswith(table_name)), None)
    if table is None:
        return None
    seen: list[list[int]] = []
    table.register_forward_hook(lambda module, args, out: seen.append(args[0].reshape(-1).tolist()))
    ids = torch.arange(2, 12)[None, :] % (config.vocab_size - 2) + 2  # no padding token
    with torch.no_grad():
        model(input_ids=ids)
    return (seen[0], table.num_embeddings) if seen else None


def main() -> int:
    warnings.simplefilter("ignore")
    for model_type in sorted(CONFIG_MAPPING.keys()):
        if families.family_of(model_type) is not None:
            continue
        try:
            found = proposal(model_type)
            if found is None:
                continue
            table_name, row = found
            measured = rows_read(model_type, table_name)
            config = AutoConfig.for_model(model_type, **SMALL).to_dict()
            families.FAMILIES[model_type] = row  # resolve with the proposed row
            layer = model_positions(config).layers[0]
        except Exception as exc:  # a family this script cannot build: say so, propose nothing
            print(f"# {model_type}: not checked ({type(exc).__name__}: {str(exc)[:80]})")
            continue
        finally:
            families.FAMILIES.pop(model_type, None)
        if measured is None or layer.kind != "learned" or layer.rows(range(10)).tolist() != measured[0] \
                or layer.table_size != measured[1]:
            print(f"# {model_type}: the proposal does not hold on the model ({measured})")
            continue
        learned = row.positions.facts_of("learned")
        facts = {k: v for k, v in dataclasses.asdict(learned).items() if v != getattr(LearnedFacts(), k)}
        facts["table"] = learned.table[0]
        print(f'\n[family.{model_type}]\nsource = "{row.source}"\nstacks = "encoder"\nencoding = "learned"\n'
              "learned = {" + ", ".join(f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}"
                                        for k, v in facts.items()) + "}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

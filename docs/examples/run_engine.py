"""Run my_rope on the golden input of the Llama-3.2-1B case; save its output and two classic mistakes."""
import json

import my_rope
import numpy as np

manifest = json.load(open("goldens/manifest.json"))
case = next(c for c in manifest["cases"] if c["id"] == "rope/llama-3.2-1b/apply")
x = np.load("goldens/" + case["inputs"]["x"]["file"])                      # (7, 64) float64
positions = np.load("goldens/" + case["inputs"]["positions"]["file"])      # (7,) int64
rope = case["parameters"]["rope"]                                          # the resolved RoPE dict
np.save("x.npy", x)
np.save("positions.npy", positions)
np.save("candidate.npy", my_rope.apply_rope(x, positions, rope))           # float32 result

# the classic mistakes: interleaved pairs on half-split weights, and rope_scaling read but not applied
np.save("candidate_meta.npy", my_rope.apply_rope(x, positions, {**rope, "layout": "interleaved"}))
plain = {k: v for k, v in rope.items() if k not in ("factor", "low_freq_factor", "high_freq_factor",
                                                    "original_max_position_embeddings")}
np.save("candidate_unscaled.npy", my_rope.apply_rope(x, positions, {**plain, "rope_type": "default"}))

"""One attention layer with a positional encoding plugged in at its hook
(:mod:`refpos.pipeline.layer`), and the worked example computed through it
(:mod:`refpos.pipeline.worked_example`).

``__all__`` is this package's public API; :func:`~refpos.pipeline.worked_example.worked_example` shares its
module's name and stays there (the front door exports it as :func:`refpos.worked_example`).
"""

from refpos.pipeline.layer import AttentionWeights, self_attention
from refpos.pipeline.worked_example import explain_text

__all__ = ["AttentionWeights", "explain_text", "self_attention"]

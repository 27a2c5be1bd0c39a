"""One attention layer with a positional encoding plugged in at its hook
(:mod:`refpos.pipeline.layer`), and the worked example computed through it
(:mod:`refpos.pipeline.worked_example`)."""

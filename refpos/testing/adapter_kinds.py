"""The adapter contract's functions of the vision and audio encoding kinds, gathered for the reference adapter
(:mod:`refpos.testing.adapter` re-exports every name of :data:`__all__`): one module per kind beside this one
(``adapter_<kind>.py``), NumPy in and out."""

from refpos.testing.adapter_axis_tables import axis_table_positions
from refpos.testing.adapter_bias_table import window_bias
from refpos.testing.adapter_box_tables import box_positions
from refpos.testing.adapter_conv_position import conv_positions, stacked_conv_positions
from refpos.testing.adapter_fourier import fourier_features, perceiver_fourier_features
from refpos.testing.adapter_grid import add_decomposed_rel_pos, interpolate, resample_position_table
from refpos.testing.adapter_layout_bias import layout_bias
from refpos.testing.adapter_shaw_key import shaw_key_terms
from refpos.testing.adapter_sincos2d import sincos_2d_grid, sine_coordinates, sine_position_map
from refpos.testing.adapter_sinusoid1d import padded_sinusoid, sinusoid_1d
from refpos.testing.adapter_tiled_grid import tiled_input_positions

__all__ = ["add_decomposed_rel_pos", "axis_table_positions", "box_positions", "conv_positions", "fourier_features",
           "interpolate", "layout_bias", "padded_sinusoid", "perceiver_fourier_features", "resample_position_table",
           "shaw_key_terms", "sincos_2d_grid", "sine_coordinates", "sine_position_map", "sinusoid_1d",
           "stacked_conv_positions", "tiled_input_positions", "window_bias"]

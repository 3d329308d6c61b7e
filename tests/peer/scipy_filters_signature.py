"""scipy_signature (stencilpipe.ndfilters behind scipy's signatures) with generic_filter1d,
which has scipy's signature already: for the ported complex and generic_filter1d cases."""

from scipy_signature import *  # noqa: F403
from scipy_signature import _ni_support  # noqa: F401

from stencilpipe.ndfilters import generic_filter1d  # noqa: F401

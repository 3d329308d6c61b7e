"""Kernels the example configs use, written as a user writes them."""

import stencilpipe as sp


@sp.stencil
def smooth(x):
    """The 3x3 mean of seed 004, in integer arithmetic."""
    return (x[-1, -1] + x[-1, 0] + x[-1, 1] +
            x[ 0, -1] + x[ 0, 0] + x[ 0, 1] +
            x[ 1, -1] + x[ 1, 0] + x[ 1, 1]) // 9

"""The kernel the benchmarks time: seed 004's 3x3 mean, as a stencilpipe user writes it."""

import stencilpipe as sp


@sp.stencil
def smooth(x):
    return (x[-1, -1] + x[-1, 0] + x[-1, 1] +
            x[ 0, -1] + x[ 0, 0] + x[ 0, 1] +
            x[ 1, -1] + x[ 1, 0] + x[ 1, 1]) // 9  # fmt: skip

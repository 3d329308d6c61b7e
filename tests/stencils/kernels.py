"""Kernels the stencil tests share, written as users write them."""

import stencilpipe as sp


@sp.stencil
def smooth(x):
    return (x[-1, -1] + x[-1, 0] + x[-1, 1] +
            x[ 0, -1] + x[ 0, 0] + x[ 0, 1] +
            x[ 1, -1] + x[ 1, 0] + x[ 1, 1]) // 9


@sp.stencil
def lopsided(x):
    # Asymmetric halo ((0, 1), (2, 1)); negative results exercise saturation.
    return 3 * x[1, 0] - x[0, -2] + x[0, 1] // 2 - x[0, 0]


@sp.stencil
def volume(v):
    return v[-1, 0, 0] + v[0, 1, 1] - v[0, 0, -2] + v[1, -1, 0] * 0.5


@sp.stencil
def diff(a, b):
    return a[0, 0] - b[0, 1]


@sp.stencil
def thresh(x, t):
    if x[0, 0] > t:
        return x[0, 0] - t
    return x[-1, 0] + t


@sp.stencil(neighborhood=((-2, 2), (-1, 1)))
def declared_window(x):
    total = 0
    for i in range(-2, 3):
        for j in range(-1, 2):
            total += x[i, j] * (i + 3)
    return total / 15

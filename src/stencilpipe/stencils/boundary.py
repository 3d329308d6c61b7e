"""Boundary modes: how an index that falls outside the array is folded back in.

The names and meanings are scipy.ndimage's, for any distance outside the array
(frames smaller than the halo included)::

    reflect   d c b a | a b c d | d c b a     (numpy's "symmetric")
    mirror    d c b   | a b c d | c b a       (numpy's "reflect")
    nearest   a a a a | a b c d | d d d d     (numpy's "edge")
    wrap      a b c d | a b c d | a b c d     (numpy's "wrap")
    constant  k k k k | a b c d | k k k k     (k = cval; numpy's "constant")

:func:`fold` is plain Python; each code generator compiles it for its target
(``numba.njit`` or ``numba.cuda.jit(device=True)``) and calls it on the border
only, so the interior never pays for it.
"""

from __future__ import annotations

from typing import Literal, get_args

from ..errors import BoundaryError

__all__ = ["MODES", "MODE_CODES", "Mode", "validate_mode", "fold", "NUMPY_PAD_MODES"]

#: A boundary mode's name, for type checkers.
Mode = Literal["reflect", "constant", "nearest", "mirror", "wrap"]
MODES: tuple[Mode, ...] = get_args(Mode)


def validate_mode(mode: str) -> str:
    """Return ``mode`` if it is a known boundary mode, else raise :class:`BoundaryError`."""
    if mode not in MODES:
        raise BoundaryError(
            f"unknown boundary mode {mode!r}; expected one of {', '.join(MODES)} "
            "(scipy.ndimage's names)"
        )
    return mode


#: The code of each mode in compiled code: the kernels take the mode as an argument, so
#: one compiled kernel serves every mode (a kernel compiled per mode cost a user's script
#: over the five modes five compiles of about a second each).
REFLECT, MIRROR, NEAREST, WRAP, CONSTANT = 0, 1, 2, 3, 4
MODE_CODES = {
    "reflect": REFLECT,
    "mirror": MIRROR,
    "nearest": NEAREST,
    "wrap": WRAP,
    "constant": CONSTANT,
}


def fold(j, n, mode):
    """Index ``j`` of an axis of ``n`` folded into it by the mode of code ``mode``
    (:data:`MODE_CODES`); -1 under ``constant``, where the read is ``cval``.

    The result is inside at once, for any distance outside: most reads of a border
    point are inside (a 3x3 kernel's corner point has 4 of its 9 inside), and ``%``
    costs a division. (Special cases for indices just outside measured slower: 1.34
    ms against 0.90 ms for a 3x3 mean.)
    """
    if 0 <= j < n:
        return j
    if mode == CONSTANT:
        return -1
    if mode == NEAREST:
        return 0 if j < 0 else n - 1
    if mode == WRAP:
        return j % n
    if mode == MIRROR:
        if n == 1:
            return 0
        period = 2 * n - 2
        j = j % period
        return period - j if j >= n else j
    period = 2 * n
    j = j % period
    return period - 1 - j if j >= n else j


#: ``numpy.pad``'s name of each mode (the table above).
NUMPY_PAD_MODES = {
    "reflect": "symmetric",
    "mirror": "reflect",
    "nearest": "edge",
    "wrap": "wrap",
    "constant": "constant",
}

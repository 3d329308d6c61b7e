"""Which per-point kernels a block of code asks a stencil for.

A filter made again shares its compiled kernels with every stencil of the same source
(``Stencil.from_source``), so what a test's stencil holds may have been compiled by another
test in the same process: to say that a call runs a window loop and not the per-point
kernel, record what the call asks for instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from stencilpipe.stencils import Stencil


@contextlib.contextmanager
def kernels_asked(stencil: Stencil, target: str = "cpu") -> Iterator[list[tuple]]:
    """Yield a list that gets the ``(in_dtypes, out_dtype, mode)`` of every kernel of
    ``stencil``'s source asked for on ``target`` inside the block."""
    asked: list[tuple] = []
    original = Stencil.compiled

    def compiled(self, in_dtypes, out_dtype, mode, target_asked="cpu"):
        if self._compiled is stencil._compiled and target_asked == target:
            asked.append((in_dtypes, out_dtype, mode))
        return original(self, in_dtypes, out_dtype, mode, target_asked)

    Stencil.compiled = compiled
    try:
        yield asked
    finally:
        Stencil.compiled = original

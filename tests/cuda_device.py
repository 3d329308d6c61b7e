"""What the real-GPU test modules share: CuPy, and their marks (skipped, saying why, where
CuPy or a CUDA device is missing)."""

from __future__ import annotations

from typing import Any

import pytest


def cupy_and_marks() -> tuple[Any, list[pytest.MarkDecorator]]:
    """The ``cupy`` module (the calling module is skipped without it) and its ``pytestmark``."""
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        count = 0
    return cupy, [pytest.mark.gpu, pytest.mark.skipif(count == 0, reason="no CUDA device")]

"""Fixtures for the I/O tests: a synchronous scheduler and a small PNG stack."""

from __future__ import annotations

from pathlib import Path

import dask
import numpy as np
import pytest
from io_samples import write_pngs


@pytest.fixture(autouse=True)
def synchronous_dask():
    """Deterministic tests: one thread runs every task, in order."""
    with dask.config.set(scheduler="synchronous"):
        yield


@pytest.fixture
def pngs(tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    """``in/img_{1,2,3,10,11}.png``: frames in natural order."""
    names = ["img_1", "img_2", "img_3", "img_10", "img_11"]
    return tmp_path / "in", write_pngs(tmp_path / "in", names)

"""Fixtures for every test (here, not in tests/: pytest's doctest collection of tests/ met
tests/cluster/conftest.py under the same module name)."""

import pytest

from stencilpipe.stencils import threads


@pytest.fixture(autouse=True)
def _threads_whatever_the_size(monkeypatch):
    """Split every call over the threads, however small (users' calls below
    ``threads.PARALLEL_FROM`` elements run in their own thread): the tests' arrays are
    small, and what they check on several threads (rows split mid-frame, races) must
    still run there. ``test_threads.py`` checks the threshold itself."""
    monkeypatch.setattr(threads, "PARALLEL_FROM", 0)

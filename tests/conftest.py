"""Suite-wide set-up: Dask workers started by the tests (in this process or in the
processes they start) keep their scratch space in a folder of this session, removed at
its end, not in the shared ``/tmp/dask-scratch-space``."""

import os
import shutil
import tempfile

import pytest

_SCRATCH = tempfile.mkdtemp(prefix="stencilpipe-tests-dask-")
# Read by dask.config when dask is imported, here and in every process a test starts.
os.environ["DASK_TEMPORARY_DIRECTORY"] = _SCRATCH


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    shutil.rmtree(_SCRATCH, ignore_errors=True)

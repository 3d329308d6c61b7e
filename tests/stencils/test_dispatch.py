"""The backends receive kernels, not Stencil, and array types dispatch through a registry."""

import ast
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe.stencils import dispatch
from stencilpipe.stencils.gufunc import apply_numpy

PACKAGE = Path(sp.__file__).parent / "stencils"


def imported_modules(path):
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.add(node.module)
    return names


def test_backends_do_not_import_the_stencil_class():
    """No import circle: only the front (stencil, chain, the package) imports .stencil."""
    importers = {path.name for path in PACKAGE.glob("*.py") if "stencil" in imported_modules(path)}
    assert importers <= {"__init__.py", "chain.py"}, importers


class Tagged:
    """A minimal array type of some other library: NumPy data with a tag."""

    def __init__(self, data, tag):
        self.data, self.tag = np.asarray(data), tag
        self.shape, self.ndim, self.dtype = self.data.shape, self.data.ndim, self.data.dtype


def run_tagged(kernel, arrays, scalars, *, out, mode, cval):
    plain = [a.data if isinstance(a, Tagged) else a for a in arrays]
    result = apply_numpy(kernel, plain, scalars, out=None, mode=mode, cval=cval)
    return Tagged(result, arrays[0].tag)


@pytest.fixture
def tagged_backend(monkeypatch):
    monkeypatch.setattr(dispatch, "_BACKENDS", list(dispatch._BACKENDS))
    dispatch.register(dispatch.Backend("tagged", lambda a: isinstance(a, Tagged), run_tagged))


def test_a_registered_backend_runs_its_arrays(tagged_backend):
    x = np.random.default_rng(3).random((2, 12, 13))
    got = sp.library.maximum(3, boundary="nearest")(Tagged(x, "mine"))
    assert isinstance(got, Tagged) and got.tag == "mine"
    want = np.stack([ndi.maximum_filter(f, 3, mode="nearest") for f in x])
    np.testing.assert_array_equal(got.data, want)
    # The built-in backends still run theirs.
    np.testing.assert_array_equal(sp.library.maximum(3, boundary="nearest")(x), want)


def test_lazy_backends_refuse_out():
    x = da.zeros((2, 8, 8), chunks=(1, 8, 8))
    with pytest.raises(TypeError, match="out= is not supported for dask arrays"):
        sp.library.mean(3)(x, out=np.empty((2, 8, 8)))

"""Zarr stacks read at the planned chunks: one task per chunk reads its region of the store,
no store-sized chunks read and merged (issue 18: a rechunk-merge task held more than its
worker could)."""

import dask.array as da
import numpy as np
import scipy.ndimage as ndi
import zarr

from stencilpipe import ndfilters
from stencilpipe.io.metadata import arrange
from stencilpipe.io.zarrio import read_arranged, zarr_node


def _store(path, shape, chunks, names=None):
    data = np.random.default_rng(0).integers(0, 4000, shape, dtype=np.uint16)
    array = zarr.create_array(
        str(path), shape=shape, chunks=chunks, dtype=data.dtype, dimension_names=names
    )
    array[...] = data
    return data


def _read(path, chunks):
    node, metadata = zarr_node(str(path))
    return read_arranged(node, arrange(metadata, node.shape), chunks)


def _rechunk_layers(array):
    return [name for name in array.__dask_graph__().layers if name.startswith("rechunk")]


def test_frames_are_read_at_the_planned_chunks_not_merged(tmp_path):
    # Store chunks that cut frames and do not line up with the planned ones.
    data = _store(tmp_path / "in.zarr", (30, 64, 48), (7, 32, 32))
    stack = _read(tmp_path / "in.zarr", (4, 64, 48))
    assert _rechunk_layers(stack) == []
    assert stack.chunks == ((4,) * 7 + (2,), (64,), (48,))
    assert len(stack.__dask_graph__()) == 8 + 1  # a task per chunk and the store itself
    smoothed = ndfilters.uniform_filter(stack, size=3, axes=(1, 2))
    want = ndi.uniform_filter(data, size=3, axes=(1, 2))
    np.testing.assert_array_equal(smoothed.compute(), want)


def test_axes_dropped_and_reordered_are_read_at_the_planned_chunks(tmp_path):
    # z, c, y, x with one z plane is stored so; the stack is c, y, x (c first, z dropped).
    data = _store(tmp_path / "in.zarr", (1, 6, 40, 30), (1, 4, 16, 16), names=("z", "c", "y", "x"))
    node, metadata = zarr_node(str(tmp_path / "in.zarr"))
    plan = arrange(metadata, node.shape)
    stack = read_arranged(node, plan, (2, 40, 30))
    assert _rechunk_layers(stack) == []
    assert stack.chunks == ((2, 2, 2), (40,), (30,))
    np.testing.assert_array_equal(stack.compute(), plan.apply(data))


def test_merged_frame_axes_are_rechunked_as_before(tmp_path):
    # Two frame axes of unknown kind become one: their chunks cannot be read as they are.
    data = _store(tmp_path / "in.zarr", (3, 5, 16, 16), (2, 2, 16, 16), names=("i", "i", "y", "x"))
    node, metadata = zarr_node(str(tmp_path / "in.zarr"))
    plan = arrange(metadata, node.shape)
    assert plan.shape == (15, 16, 16)
    stack = read_arranged(node, plan, (4, 16, 16))
    assert stack.chunks[0] == (4, 4, 4, 3)
    np.testing.assert_array_equal(stack.compute(), data.reshape(15, 16, 16))


def test_a_chain_at_the_planned_chunks_equals_scipy(tmp_path):
    data = _store(tmp_path / "in.zarr", (12, 50, 40), (5, 25, 40))
    stack = _read(tmp_path / "in.zarr", (3, 50, 40))
    assert _rechunk_layers(stack) == []
    got = ndfilters.sobel(ndfilters.gaussian_filter(stack.astype(np.float32), 1.0, axes=(1, 2)), 2)
    want = ndi.sobel(ndi.gaussian_filter(data.astype(np.float32), 1.0, axes=(1, 2)), 2)
    np.testing.assert_allclose(got.compute(), want, rtol=1e-5, atol=1e-3)
    assert isinstance(got, da.Array)


def test_imread_of_a_zarr_store_reads_at_the_chunks_asked_for(tmp_path):
    import stencilpipe as sp

    data = _store(tmp_path / "in.zarr", (30, 64, 48), (7, 32, 32))
    stack = sp.imread(str(tmp_path / "in.zarr"), chunks=(5, 64, 48))
    assert _rechunk_layers(stack) == []
    assert stack.chunks == ((5,) * 6, (64,), (48,))
    np.testing.assert_array_equal(stack.compute(), data)

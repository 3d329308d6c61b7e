"""Zarr and OME-Zarr stores: open one as frames, write frames into one (Zarr v3).

Reading takes a plain array, or an OME-NGFF image's first (full-resolution) level; its
channel axis ``c`` goes last and the axes before ``y, x`` become the frames. Writing makes
one Zarr v3 array chunked like the Dask array; for ``.ome.zarr`` it sits at ``s0`` under a
group with NGFF 0.5 ``multiscales`` metadata (axes ``t[, c], y, x``). Each block task
writes its own chunk (zarr's local store writes every chunk file atomically) and then the
chunk's provenance record (:mod:`stencilpipe.io.provenance`); a rerun computes only the
frame blocks that miss a chunk or whose chunks' records or bytes do not hold.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
import zarr
from dask.delayed import Delayed

from ..errors import ImageStackError
from .atomic import is_full
from .errors import NoSpaceLeft, TargetError
from .plan import frame_blocks, lazy_report, select_blocks, to_numpy
from .provenance import DAMAGED, KEPT, NEW, STALE, Provenance, judge, record_path, write_record

__all__ = ["open_zarr", "save_zarr"]

_CODECS = {
    "zstd": zarr.codecs.ZstdCodec,
    "zlib": zarr.codecs.GzipCodec,
    "gzip": zarr.codecs.GzipCodec,
    "blosc": zarr.codecs.BloscCodec,
}
_LEVEL = "s0"
#: The array attribute that records which write made the array.
_RUN = "stencilpipe_run"


def open_zarr(path: str) -> da.Array:
    """A Zarr array, or an OME-Zarr image's first level, as ``(frames, y, x[, c])``.

    The channel axis is the one NGFF metadata types ``channel`` (or, for a plain array,
    the last of four); it goes last, and is dropped when it has one channel. The axes
    before ``y, x`` become the frames.
    """
    try:
        node = zarr.open(path, mode="r")
    except Exception as exc:
        raise ImageStackError(f"{path}: not a readable Zarr store ({exc})") from None
    if isinstance(node, zarr.Group):
        attrs = node.attrs.asdict()
        multiscales = attrs.get("ome", attrs).get("multiscales")
        if not multiscales:
            arrays = ", ".join(sorted(node.array_keys())) or "none"
            raise ImageStackError(
                f"{path}: a Zarr group without OME-NGFF 'multiscales' metadata; open one of "
                f"its arrays instead (arrays: {arrays})"
            )
        image = multiscales[0]
        node = node[image["datasets"][0]["path"]]
        kinds = [a.get("type") if isinstance(a, dict) else a for a in image.get("axes", [])]
        channel = next((i for i, k in enumerate(kinds) if k in ("channel", "c")), None)
    elif node.ndim <= 4:
        channel = 3 if node.ndim == 4 else None
    else:
        raise ImageStackError(
            f"{path}: cannot tell frames from channels in a {node.ndim}-d array without "
            "OME-NGFF axes (expected (y, x), (frames, y, x) or (frames, y, x, c))"
        )
    array = da.from_zarr(node)
    if channel is not None:
        array = da.moveaxis(array, channel, -1)
        if array.shape[-1] == 1:
            array, channel = array[..., 0], None
    frame_ndim = 2 if channel is None else 3
    if array.ndim < frame_ndim:
        raise ImageStackError(f"{path}: a {array.ndim}-d array holds no 2-D frames")
    return array.reshape((-1, *array.shape[array.ndim - frame_ndim :]))


@dataclass(frozen=True)
class _Layout:
    """The array a write makes: where it goes, its shape, chunks, axes and codecs."""

    store: str
    ome: bool
    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[int, ...]
    axes: tuple[str, ...]
    compressors: Any

    @property
    def location(self) -> str:
        return os.path.join(self.store, _LEVEL) if self.ome else self.store


def save_zarr(
    array: da.Array,
    store: str,
    *,
    ome: bool,
    overwrite: bool,
    compression: str | None,
    provenance: Provenance,
    inputs: list[list[list]],
    run: str,
) -> Delayed:
    """Plan writing frames ``array`` into the Zarr store ``store``; a delayed WriteReport.

    ``inputs`` is the identity of each frame's inputs, ``run`` the write's id.
    """
    axes = ("t", "y", "x", "c")[: array.ndim]
    if ome and array.ndim == 4:
        array, axes = array.transpose(0, 3, 1, 2), ("t", "c", "y", "x")
    array = array.rechunk(tuple(max(c) for c in array.chunks))  # zarr needs regular chunks
    chunks = tuple(c[0] for c in array.chunks)
    layout = _Layout(store, ome, array.shape, array.dtype, chunks, axes, _compressors(compression))
    existing = None if overwrite else _open_array(layout.location)
    if existing is None and not overwrite and os.path.exists(store) and os.listdir(store):
        raise TargetError(
            f"{store} exists but holds no array that this write can resume; pass "
            "overwrite=True to replace it, or choose another target"
        )
    fits = existing is None or (existing.shape, existing.dtype, existing.chunks) == (
        layout.shape,
        layout.dtype,
        layout.chunks,
    )
    if not fits and existing.attrs.get(_RUN) is None:  # not ours: never replaced unasked
        raise TargetError(
            f"{store} already holds an array of shape {existing.shape}, dtype "
            f"{existing.dtype}, chunks {existing.chunks}, not {layout.shape} {layout.dtype} "
            f"{layout.chunks}; pass overwrite=True to replace it"
        )
    blocks = frame_blocks(array.chunks[0])
    block_inputs = [_union(inputs[i] for i in frames) for frames in blocks]
    owner = {frame: b for b, frames in enumerate(blocks) for frame in frames}
    if existing is None:
        verdicts = [NEW] * len(blocks)
    elif not fits:  # another write of stencilpipe's, of another layout: all of it is stale
        verdicts = [STALE] * len(blocks)
    else:
        verdicts = _judge_blocks(existing, layout, len(blocks), provenance, block_inputs)
    todo = [b for b, verdict in enumerate(verdicts) if verdict != KEPT]
    written = sum(len(blocks[b]) for b in todo)
    recomputed = tuple(
        sum(len(blocks[b]) for b in todo if verdicts[b] == kind) for kind in (STALE, DAMAGED)
    )
    if not todo:
        return lazy_report(None, store, (), 0, array.shape[0])
    ready = dask.delayed(_create, pure=True)(layout, run=run, create=not fits or existing is None)
    sub = select_blocks(array, todo)
    frames = np.concatenate([np.asarray(blocks[b]) for b in todo])
    index = [da.from_array(frames, chunks=(sub.chunks[0],))]
    index += [da.arange(n, chunks=(c,)) for n, c in zip(array.shape[1:], chunks[1:], strict=True)]
    identities = np.empty(len(frames), dtype=object)  # per frame: its block's inputs
    for i, frame in enumerate(frames):
        identities[i] = block_inputs[owner[frame]]
    letters = "tabc"[: array.ndim]
    status = da.blockwise(
        _write_block,
        letters,
        sub,
        letters,
        da.from_array(identities, chunks=(sub.chunks[0],)),
        "t",
        *itertools.chain.from_iterable(zip(index, letters, strict=True)),
        ready=ready,
        layout=layout,
        provenance=provenance,
        run=run,
        adjust_chunks=dict.fromkeys(letters, 1),
        dtype=np.int64,
        meta=np.empty((0,) * array.ndim, np.int64),
    )
    return lazy_report(status, store, (store,), written, array.shape[0] - written, recomputed)


def _union(identities: Any) -> list[list]:
    """The input identities of several frames, each once, in order."""
    seen: dict[tuple, list] = {}
    for identity in identities:
        for each in identity:
            seen.setdefault(tuple(each), list(each))
    return list(seen.values())


def _open_array(location: str) -> zarr.Array | None:
    try:
        return zarr.open_array(location, mode="r")
    except (OSError, zarr.errors.BaseZarrError):
        return None


def _chunk_path(array: zarr.Array, layout: _Layout, coords: tuple[int, ...]) -> str:
    return os.path.join(layout.location, array.metadata.encode_chunk_key(coords))


def _judge_blocks(
    array: zarr.Array,
    layout: _Layout,
    blocks: int,
    provenance: Provenance,
    inputs: list[list[list]],
) -> list[str]:
    """The verdict on each frame block: the worst of its chunks' (see ``judge``)."""
    grid = [range(-(-n // c)) for n, c in zip(array.shape[1:], array.chunks[1:], strict=True)]
    owners, paths = [], []
    for block in range(blocks):
        for rest in itertools.product(*grid):
            owners.append(block)
            paths.append(_chunk_path(array, layout, (block, *rest)))
    records = [record_path(layout.store, os.path.relpath(p, layout.store)) for p in paths]
    found = judge(paths, records, provenance, [inputs[b] for b in owners])
    per_block: list[set[str]] = [set() for _ in range(blocks)]
    for block, verdict in zip(owners, found, strict=True):
        per_block[block].add(verdict)
    return [next((v for v in (DAMAGED, STALE, NEW) if v in seen), KEPT) for seen in per_block]


def _create(layout: _Layout, *, run: str, create: bool) -> None:
    """Runs once, before any block task: make the store (replacing any old one).

    The array records ``run``, so that when a cluster runs this task again (its worker
    died) it leaves the array, and the chunks written since, as they are.
    """
    made = _open_array(layout.location) if create else None
    if not create or (made is not None and made.attrs.get(_RUN) == run):
        return
    options: dict[str, Any] = dict(
        shape=layout.shape,
        dtype=layout.dtype,
        chunks=layout.chunks,
        compressors=layout.compressors,
        dimension_names=list(layout.axes),
        attributes={_RUN: run},
    )
    if not layout.ome:
        zarr.create_array(layout.store, overwrite=True, zarr_format=3, **options)
        return
    group = zarr.open_group(layout.store, mode="w", zarr_format=3)
    kinds = {"t": "time", "c": "channel", "y": "space", "x": "space"}
    group.attrs["ome"] = {
        "version": "0.5",
        "multiscales": [
            {
                "name": os.path.basename(layout.store.rstrip("/" + os.sep)).removesuffix(
                    ".ome.zarr"
                ),
                "axes": [{"name": a, "type": kinds[a]} for a in layout.axes],
                "datasets": [
                    {
                        "path": _LEVEL,
                        "coordinateTransformations": [
                            {"type": "scale", "scale": [1.0] * len(layout.axes)}
                        ],
                    }
                ],
            }
        ],
    }
    group.create_array(_LEVEL, **options)


def _compressors(compression: str | None) -> Any:
    if compression is None:
        return "auto"
    if compression not in _CODECS:
        raise TargetError(
            f"unknown Zarr compression {compression!r}: use one of {', '.join(_CODECS)}"
        )
    return _CODECS[compression]()


def _write_block(
    block: Any,
    inputs: np.ndarray,
    *index: np.ndarray,
    ready: None,
    layout: _Layout,
    provenance: Provenance,
    run: str,
) -> np.ndarray:
    """Write one chunk (one block of the regular chunking), then its provenance record."""
    region = tuple(slice(int(ix[0]), int(ix[-1]) + 1) for ix in index)
    target = zarr.open_array(layout.location, mode="r+").with_config({"write_empty_chunks": True})
    try:
        target[region] = to_numpy(block)
    except OSError as exc:
        if is_full(exc):
            raise NoSpaceLeft(layout.store) from None
        raise
    coords = tuple(int(ix[0]) // c for ix, c in zip(index, layout.chunks, strict=True))
    path = _chunk_path(target, layout, coords)
    with open(path, "rb") as fh:
        data = fh.read()
    write_record(
        layout.store,
        os.path.relpath(path, layout.store),
        data,
        provenance=provenance,
        inputs=inputs[0],
        run=run,
    )
    return np.full((1,) * len(index), block.nbytes, np.int64)

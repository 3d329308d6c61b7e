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
import math
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import dask
import dask.array as da
import numcodecs
import numpy as np
import zarr
from dask.array.core import normalize_chunks
from dask.delayed import Delayed

from ..errors import ImageStackError
from .atomic import BATCH, is_full
from .errors import NoSpaceLeft, TargetError
from .metadata import AXIS_KINDS, Arrangement, Metadata, canonical_order
from .ngff import ngff_attributes, ngff_metadata
from .plan import flushed, frame_blocks, lazy_report, select_blocks, to_numpy
from .provenance import (
    DAMAGED,
    KEPT,
    NEW,
    STALE,
    Provenance,
    file_digest,
    write_record,
)
from .remote import RemoteDirectory, judge_outputs
from .storage import is_url

__all__ = ["read_arranged", "save_zarr", "zarr_node"]

_CODECS = {
    "zstd": zarr.codecs.ZstdCodec,
    "zlib": zarr.codecs.GzipCodec,
    "gzip": zarr.codecs.GzipCodec,
    "blosc": zarr.codecs.BloscCodec,
}
#: The same codecs for Zarr 2 (numcodecs').
_CODECS_V2 = {
    "zstd": numcodecs.Zstd,
    "zlib": numcodecs.Zlib,
    "gzip": numcodecs.GZip,
    "blosc": numcodecs.Blosc,
}
_LEVEL = "s0"
#: The axes of a plain array, by its number of dimensions.
_PLAIN = {2: "yx", 3: "iyx", 4: "iyxs"}
#: The array attribute that records which write made the array.
_RUN = "stencilpipe_run"


def read_arranged(node: zarr.Array, plan: Arrangement, chunks: tuple[int, ...]) -> da.Array:
    """``node`` arranged by ``plan``, in ``chunks`` (of the arranged array).

    Where the arrangement only drops axes of length 1 and reorders the others, each task
    reads its own chunk's region of the store: no store-sized chunks are read and merged
    (Dask's rechunk-merge tasks), so a task holds only what it was sized for. Frame axes
    merged into one (or a frame axis added) are read at the store's chunks and rechunked.
    """
    picked = [n for i, n in enumerate(node.shape) if i in plan.keep]
    order = plan.order[: len(picked)]
    if len(plan.shape) != len(picked) or [picked[i] for i in order] != list(plan.shape):
        return plan.apply(da.from_zarr(node)).rechunk(chunks)
    normal = normalize_chunks(chunks, plan.shape, dtype=node.dtype)
    at_picked: list[Any] = [None] * len(picked)
    for axis, source in enumerate(order):
        at_picked[source] = normal[axis]
    kept = iter(at_picked)
    stored = tuple(next(kept) if i in plan.keep else (1,) for i in range(node.ndim))
    return plan.apply(da.from_zarr(node, chunks=stored))


def zarr_node(
    path: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[zarr.Array, Metadata]:
    """A Zarr array, or an OME-Zarr image's first level, and its metadata.

    An OME-Zarr image's axes, scale and units come from its ``multiscales`` metadata, its
    channel names from ``omero``; a plain array's axes from its dimension names when they
    are axis letters, else it is ``(y, x)``, ``(frames, y, x)`` or ``(frames, y, x, c)``.
    """
    options = {"storage_options": dict(storage_options)} if is_url(path) else {}
    try:
        node = zarr.open(path, mode="r", **options)
    except Exception as exc:
        raise ImageStackError(f"{path}: not a readable Zarr store ({exc})") from None
    if isinstance(node, zarr.Group):
        attrs = node.attrs.asdict()
        ome = attrs.get("ome", attrs)
        if not ome.get("multiscales"):
            arrays = ", ".join(sorted(node.array_keys())) or "none"
            raise ImageStackError(
                f"{path}: a Zarr group without OME-NGFF 'multiscales' metadata; open one of "
                f"its arrays instead (arrays: {arrays})"
            )
        image = ome["multiscales"][0]
        node = node[image["datasets"][0]["path"]]
        metadata = ngff_metadata(image, ome.get("omero"), node.ndim)
    else:
        names = getattr(node.metadata, "dimension_names", None) or ()
        if len(names) == node.ndim and all(n in AXIS_KINDS for n in names):
            metadata = Metadata("".join(names))
        elif node.ndim < 2:
            raise ImageStackError(f"{path}: a {node.ndim}-d array holds no 2-D frames")
        elif node.ndim in _PLAIN:
            metadata = Metadata(_PLAIN[node.ndim])
        else:
            raise ImageStackError(
                f"{path}: cannot tell frames from channels in a {node.ndim}-d array without "
                "OME-NGFF axes (expected (y, x), (frames, y, x) or (frames, y, x, c))"
            )
    if not metadata.axes.endswith(("yx", "yxs")) or len(metadata.axes) != node.ndim:
        raise ImageStackError(
            f"{path}: unsupported axes {metadata.axes!r} for an array of shape {node.shape} "
            "(the last two must be y, x)"
        )
    return node, metadata


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
    metadata: Metadata | None = None
    levels: int = 1
    remote: RemoteDirectory | None = None
    zarr_format: int = 3
    sharded: bool = False

    @property
    def stored_chunks(self) -> dict[str, tuple[int, ...]]:
        """How zarr stores the array: one object per Dask block (``chunks``), or, sharded,
        one shard per block holding one chunk per 2-D frame."""
        if not self.sharded:
            return {"chunks": self.chunks}
        return {"shards": self.chunks, "chunks": (1,) * (len(self.chunks) - 2) + self.chunks[-2:]}

    @property
    def options(self) -> dict[str, Any]:
        """What zarr's ``open_*`` and ``create_*`` take to reach the store."""
        return {"storage_options": self.remote.storage_options} if self.remote else {}

    @property
    def about(self) -> Metadata:
        """The axes with their scale, units and channel names."""
        return self.metadata or Metadata("".join(self.axes))

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
    metadata: Metadata,
    levels: int = 1,
    remote: RemoteDirectory | None = None,
    zarr_format: int = 3,
    shards: bool = False,
    durability: str = BATCH,
) -> Delayed:
    """Plan writing ``array`` into the Zarr store ``store``; a delayed WriteReport.

    ``inputs`` is the identity of the inputs of each step along the first axis, ``run``
    the write's id, ``metadata`` the array's axes. An OME-Zarr image gets ``levels``
    levels, each half the size of the one before in y and x (every other pixel, as
    ome-zarr-py's default ``nearest`` scaler), its channels (RGB samples included) on a
    ``c`` axis before the spatial ones, and its axes, scale, units and channel names as
    NGFF metadata (0.5 in Zarr v3, 0.4 in ``zarr_format=2``). With ``shards``, each
    block is one shard (one object) of one chunk per 2-D frame: few objects, small reads.
    A store on disk is flushed once its chunks are written, as ``durability`` asks
    (:data:`~stencilpipe.io.atomic.DURABILITY`: chunks are never fsync'd one by one).
    """
    if zarr_format not in (2, 3):
        raise TargetError(f"zarr_format={zarr_format!r}: write Zarr 2 or 3")
    if shards and zarr_format != 3:
        raise TargetError("shards=True needs zarr_format=3 (Zarr 2 has no sharding)")
    if ome and metadata.axes.endswith("s"):
        if "c" in metadata.axes:
            raise TargetError(
                f"cannot write axes {metadata.axes!r} as OME-Zarr: it has channels and RGB "
                "samples, and NGFF has one channel axis"
            )
        order = canonical_order(metadata.axes.replace("s", "c"))
        array = array.transpose(order)
        metadata = replace(metadata, axes=metadata.axes.replace("s", "c")).transposed(order)
    array = array.rechunk(tuple(max(c) for c in array.chunks))  # zarr needs regular chunks
    chunks = tuple(c[0] for c in array.chunks)
    layout = _Layout(
        store,
        ome,
        array.shape,
        array.dtype,
        chunks,
        tuple(metadata.axes),
        _compressors(compression, zarr_format),
        metadata,
        levels,
        remote,
        zarr_format,
        shards,
    )
    existing = None if overwrite else _open_array(layout.location, layout)
    if existing is None and not overwrite and _holds_anything(layout):
        raise TargetError(
            f"{store} exists but holds no array that this write can resume; pass "
            "overwrite=True to replace it, or choose another target"
        )
    fits = existing is None or (
        existing.shape,
        existing.dtype,
        existing.shards or existing.chunks,
        existing.shards is not None,
        existing.metadata.zarr_format,
    ) == (layout.shape, layout.dtype, layout.chunks, layout.sharded, layout.zarr_format)
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
    planes = math.prod(array.shape[1 : metadata.axes.index("y")])  # per step of the first axis
    if not todo:
        return lazy_report(None, store, (), 0, array.shape[0] * planes)
    ready = dask.delayed(_create, pure=True)(layout, run=run, create=not fits or existing is None)
    sub = select_blocks(array, todo)
    frames = np.concatenate([np.asarray(blocks[b]) for b in todo])
    index = [da.from_array(frames, chunks=(sub.chunks[0],))]
    index += [da.arange(n, chunks=(c,)) for n, c in zip(array.shape[1:], chunks[1:], strict=True)]
    identities = np.empty(len(frames), dtype=object)  # per frame: its block's inputs
    for i, frame in enumerate(frames):
        identities[i] = block_inputs[owner[frame]]
    letters = "t" + string.ascii_lowercase[: array.ndim - 1]  # "t": the frame blocks
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
    if levels > 1:  # the lower levels follow from the whole first: written again in full
        # As one graph of plain delayed keys: a Dask array handed to a delayed function is
        # computed in a subgraph of its own, which would run the creation task twice.
        status = dask.delayed(_with_levels, pure=True)(
            status.to_delayed(optimize_graph=False).ravel().tolist(),
            [_write_level(array, layout, level, ready) for level in range(1, levels)],
        )
    report = lazy_report(
        status,
        store,
        (store,),
        written * planes,
        (array.shape[0] - written) * planes,
        tuple(n * planes for n in recomputed),
    )
    return report if remote else dask.delayed(flushed, pure=False)(report, store, durability)


def _with_levels(status: list[np.ndarray], levels: list) -> np.ndarray:
    """The first level's status (bytes per block), once the lower levels are written."""
    return np.concatenate([np.ravel(block) for block in status])


def _level_location(layout: _Layout, level: int) -> str:
    return os.path.join(layout.store, f"s{level}")


def _write_level(array: da.Array, layout: _Layout, level: int, ready: Delayed) -> Delayed:
    """Write level ``level`` (every ``2**level``-th pixel of ``array`` in y and x)."""
    step = 2**level
    lower = array[(..., slice(None, None, step), slice(None, None, step))]
    lower = lower.rechunk(_level_chunks(layout, level))
    return (
        lower.map_blocks(
            _put,
            location=_level_location(layout, level),
            layout=layout,
            ready=ready,
            dtype=lower.dtype,
        )
        .to_delayed(optimize_graph=False)
        .ravel()
        .tolist()
    )


def _level_chunks(layout: _Layout, level: int) -> tuple[int, ...]:
    step = 2**level
    return (*layout.chunks[:-2], *(max(1, -(-c // step)) for c in layout.chunks[-2:]))


def _level_shape(layout: _Layout, level: int) -> tuple[int, ...]:
    step = 2**level
    return (*layout.shape[:-2], *(-(-n // step) for n in layout.shape[-2:]))


def _put(
    block: np.ndarray, *, location: str, layout: _Layout, ready: None, block_info: Any = None
) -> np.ndarray:
    """Write one block of a lower level where it belongs (its chunk, whole)."""
    region = tuple(slice(*where) for where in block_info[0]["array-location"])
    zarr.open_array(location, mode="r+", **layout.options)[region] = to_numpy(block)
    return np.zeros((0,) * block.ndim, block.dtype)


def _union(identities: Any) -> list[list]:
    """The input identities of several frames, each once, in order."""
    seen: dict[tuple, list] = {}
    for identity in identities:
        for each in identity:
            seen.setdefault(tuple(each), list(each))
    return list(seen.values())


def _open_array(location: str, layout: _Layout) -> zarr.Array | None:
    try:
        return zarr.open_array(location, mode="r", **layout.options)
    except (OSError, zarr.errors.BaseZarrError):
        return None


def _holds_anything(layout: _Layout) -> bool:
    """Whether the store's place holds anything (a store there is not to be replaced)."""
    if layout.remote:
        fs = layout.remote.fs
        fs.invalidate_cache()
        where = layout.remote.path_of(layout.store)
        return bool(fs.exists(where) and fs.ls(where))
    return os.path.exists(layout.store) and bool(os.listdir(layout.store))


def _key(path: str, layout: _Layout) -> str:
    """The name of a file of the store, relative to the store."""
    return path[len(layout.store.rstrip("/" + os.sep)) + 1 :]


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
    grid = [range(-(-n // c)) for n, c in zip(array.shape[1:], layout.chunks[1:], strict=True)]
    owners, paths = [], []
    for block in range(blocks):
        for rest in itertools.product(*grid):
            owners.append(block)
            paths.append(_chunk_path(array, layout, (block, *rest)))
    identities = [inputs[b] for b in owners]
    names = [_key(p, layout) for p in paths]
    found = judge_outputs(layout.store, paths, names, provenance, identities, remote=layout.remote)
    per_block: list[set[str]] = [set() for _ in range(blocks)]
    for block, verdict in zip(owners, found, strict=True):
        per_block[block].add(verdict)
    return [next((v for v in (DAMAGED, STALE, NEW) if v in seen), KEPT) for seen in per_block]


def _create(layout: _Layout, *, run: str, create: bool) -> None:
    """Runs once, before any block task: make the store (replacing any old one).

    The array records ``run``, so that when a cluster runs this task again (its worker
    died) it leaves the array, and the chunks written since, as they are.
    """
    made = _open_array(layout.location, layout) if create else None
    if not create or (made is not None and made.attrs.get(_RUN) == run):
        return
    options: dict[str, Any] = dict(
        shape=layout.shape,
        dtype=layout.dtype,
        compressors=layout.compressors,
        attributes={_RUN: run},
    )
    if layout.zarr_format == 3:  # Zarr 2 has no dimension names
        options["dimension_names"] = list(layout.axes)
    if not layout.ome:
        zarr.create_array(
            layout.store,
            overwrite=True,
            zarr_format=layout.zarr_format,
            **options,
            **layout.stored_chunks,
            **layout.options,
        )
        return
    group = zarr.open_group(
        layout.store, mode="w", zarr_format=layout.zarr_format, **layout.options
    )
    step = dict(zip(layout.axes, layout.about.scale, strict=True))
    scales = [
        [step[a] * (2**level if a in "yx" else 1) for a in layout.axes]
        for level in range(layout.levels)
    ]
    name = os.path.basename(layout.store.rstrip("/" + os.sep)).removesuffix(".ome.zarr")
    group.attrs.update(
        ngff_attributes(
            layout.about,
            name,
            [(f"s{level}", scale) for level, scale in enumerate(scales)],
            layout.dtype,
            version="0.5" if layout.zarr_format == 3 else "0.4",
        )
    )
    group.create_array(_LEVEL, **options, **layout.stored_chunks)
    for level in range(1, layout.levels):
        group.create_array(
            f"s{level}",
            **(options | {"shape": _level_shape(layout, level),
                          "chunks": _level_chunks(layout, level)}),
        )  # fmt: skip


def _compressors(compression: str | None, zarr_format: int = 3) -> Any:
    if compression is None:
        return "auto"
    if compression not in _CODECS:
        raise TargetError(
            f"unknown Zarr compression {compression!r}: use one of {', '.join(_CODECS)}"
        )
    return (_CODECS if zarr_format == 3 else _CODECS_V2)[compression]()


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
    target = zarr.open_array(layout.location, mode="r+", **layout.options)
    target = target.with_config({"write_empty_chunks": True})
    try:
        target[region] = to_numpy(block)
    except OSError as exc:
        if is_full(exc):
            raise NoSpaceLeft(layout.store) from None
        raise
    coords = tuple(int(ix[0]) // c for ix, c in zip(index, layout.chunks, strict=True))
    path = _chunk_path(target, layout, coords)
    if layout.remote:
        data = layout.remote.fs.cat_file(layout.remote.path_of(path))
        layout.remote.write_record(_key(path, layout), data, provenance, inputs[0])
    else:
        with open(path, "rb") as fh:
            output = file_digest(fh)
        write_record(
            layout.store,
            _key(path, layout),
            output,
            provenance=provenance,
            inputs=inputs[0],
            run=run,
        )
    return np.full((1,) * len(index), block.nbytes, np.int64)

"""What an opened stack is (:class:`StackInfo`), and the registry that finds it again.

:func:`~stencilpipe.io.imread` registers each array it returns under the array's
``.name``. Every array computed from it keeps that name among the layers of its task
graph, so the writer can still tell where its frames came from: their names (to mirror
them in the output) and the input files (never to be overwritten).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Set
from dataclasses import dataclass

import dask.array as da
import numpy as np
from dask.utils import format_bytes

from ..errors import ImageStackError
from .metadata import Metadata
from .tiffmeta import TiffTags

__all__ = ["StackInfo", "all_inputs", "frame_inputs", "inputs_of", "register", "source_names"]


@dataclass(frozen=True)
class StackInfo:
    """An image stack as opened from its headers, before any pixel is read.

    Attributes
    ----------
    source : str
        The path, directory or glob as given.
    kind : str
        ``"files"`` (one frame per file), ``"tiff"`` (the pages of one TIFF file) or
        ``"zarr"`` (a Zarr array or OME-Zarr image).
    files : tuple of str
        The files read, in frame order (for ``"tiff"`` and ``"zarr"``, the one path).
    frame_names : tuple of str or None
        Each frame's file name without its extension, for ``"files"`` stacks.
    shape : tuple of int
        The shape of the array :func:`~stencilpipe.io.imread` returns: ``(frames, y, x)``,
        ``(frames, y, x, c)`` for colour, or one axis per letter of ``metadata.axes``
        (such as ``(t, c, z, y, x)`` for an OME-TIFF).
    dtype : numpy.dtype
    chunks : tuple of tuple of int
        The Dask chunks of the array.
    bad_files : tuple of (str, str)
        ``(path, reason)`` for each file left out by ``skip_bad=True``.
    stamps : tuple of (int, int)
        ``(size, mtime_ns)`` of each of ``files`` when it was opened (for ``"zarr"``, the
        total size and latest ``mtime_ns`` of the store's files): the inputs' identity
        that provenance records hold.
    metadata : Metadata, optional
        The axes, physical sizes, units and channel names (see :attr:`axes` and the rest).
    file_tags : tuple of TiffTags or None
        For TIFF inputs, each file's resolution tags and ImageDescription (in ``files``
        order), which TIFF outputs keep.
    """

    source: str
    kind: str
    files: tuple[str, ...]
    frame_names: tuple[str, ...] | None
    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[tuple[int, ...], ...]
    bad_files: tuple[tuple[str, str], ...] = ()
    stamps: tuple[tuple[int, int], ...] = ()
    metadata: Metadata | None = None
    file_tags: tuple[TiffTags | None, ...] = ()

    @property
    def axes(self) -> str:
        """One letter per axis: ``t`` time, ``c`` channel, ``z, y, x``, ``s`` the samples of
        RGB(A) pixels, ``i`` frames of unknown kind (see :mod:`stencilpipe.io.metadata`)."""
        if self.metadata is not None:
            return self.metadata.axes
        return "iyxs"[: len(self.shape)]

    @property
    def scale(self) -> tuple[float, ...]:
        """The physical size of one step along each axis (1.0 where unknown)."""
        return self.metadata.scale if self.metadata else (1.0,) * len(self.shape)

    @property
    def units(self) -> tuple[str | None, ...]:
        """The unit of each axis's step (such as ``"micrometer"``; None where unknown)."""
        return self.metadata.units if self.metadata else (None,) * len(self.shape)

    @property
    def channel_names(self) -> tuple[str, ...]:
        """The names of the channels of the ``c`` axis, when the source names them."""
        return self.metadata.channel_names if self.metadata else ()

    @property
    def frame_shape(self) -> tuple[int, ...]:
        """The shape of one frame: ``(y, x)`` or ``(y, x, samples)``."""
        return self.shape[self.axes.index("y") :]

    def filtered_axes(self, ndim: int) -> str:
        """The axes that a stage of ``ndim`` core dimensions filters: the last ``ndim``
        before any RGB samples (``"yx"``, or ``"zyx"``; frames of unknown kind count as z).

        Raises
        ------
        ImageStackError
            When those axes would take in time points or channels (a 3-D stage on a stack
            with no z), which are never filtered across.

        Examples
        --------
        >>> info = StackInfo("x", "tiff", ("x",), None, (2, 3, 8, 9), np.dtype("u1"), (),
        ...                  metadata=Metadata("tcyx"))
        >>> info.filtered_axes(2)
        'yx'
        >>> info.filtered_axes(3)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        stencilpipe.errors.ImageStackError: x: a 3-D stage would filter across the c axis...
        """
        spatial = self.axes.removesuffix("s")
        filtered = spatial[-ndim:]
        mixed = [a for a in filtered if a in "tc"]
        if mixed:
            raise ImageStackError(
                f"{self.source}: a {ndim}-D stage would filter across the {mixed[0]} axis of "
                f"this stack (axes {self.axes}, no z): use 2-D stages, or a stack with a z axis"
            )
        return filtered

    @property
    def frames(self) -> int:
        """How many frames (2-D planes) the stack has: the product of the axes before y."""
        return math.prod(self.shape[: self.axes.index("y")])

    @property
    def nbytes(self) -> int:
        """Size of the whole stack in memory, in bytes."""
        return math.prod(self.shape) * self.dtype.itemsize

    def summary(self) -> str:
        """A few aligned lines for people (what ``str(info)`` gives)."""
        colour = f"colour ({self.shape[-1]} channels)" if self.axes.endswith("s") else "gray"
        blocks = math.prod(len(c) for c in self.chunks)
        largest = tuple(max(c) for c in self.chunks)
        origin = {"tiff": "pages of one TIFF file", "zarr": "a Zarr store"}.get(
            self.kind, _count(len(self.files), "file")
        )
        lines = [
            f"source   {self.source} ({origin})",
            f"frames   {self.frames}",
            f"shape    {self.shape} {self.dtype}, {colour}",
            f"axes     {self.metadata.summary() if self.metadata else self.axes}",
            f"size     {format_bytes(self.nbytes)}",
            f"chunks   {_count(blocks, 'chunk')} of up to {largest}",
        ]
        if self.channel_names:
            lines.append(f"channels {', '.join(self.channel_names)}")
        if self.bad_files:
            lines.append(f"skipped  {_count(len(self.bad_files), 'bad file')}:")
            lines += [f"  {os.path.basename(path)}: {why}" for path, why in self.bad_files]
        return "\n".join(lines)

    __str__ = summary

    def as_dict(self) -> dict:
        """The description as JSON-serialisable data (what ``inspect --json`` prints)."""
        about = {
            "source": self.source,
            "kind": self.kind,
            "frames": self.frames,
            "shape": list(self.shape),
            "dtype": str(self.dtype),
            "bytes": self.nbytes,
            "chunks": [list(c) for c in self.chunks],
            "files": len(self.files),
            "bad_files": [{"file": path, "error": why} for path, why in self.bad_files],
        }
        meta = self.metadata or Metadata(self.axes)
        return about | meta.as_dict()


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


_REGISTRY: dict[str, StackInfo] = {}


def register(array: da.Array, info: StackInfo) -> None:
    """Remember that ``array`` (by its name) is the stack ``info`` describes."""
    _REGISTRY[array.name] = info


def inputs_of(array: da.Array) -> list[StackInfo]:
    """The registered stacks that ``array`` is computed from (found in its graph's layers).

    A registered array that another one in the graph is built on (a stack read again at
    other chunks, on the same Zarr read) is that same stack: only the outer one counts.
    """
    graph = array.dask
    found = [name for name in graph.layers if name in _REGISTRY]
    beneath: set[str] = set()
    for name in found:
        if name not in beneath:
            beneath |= _below(graph.dependencies, name)
    return [_REGISTRY[name] for name in found if name not in beneath]


def _below(dependencies: Mapping[str, Set[str]], name: str) -> set[str]:
    """The layers that layer ``name`` depends on, directly or not."""
    seen: set[str] = set()
    todo = list(dependencies.get(name, ()))
    while todo:
        layer = todo.pop()
        if layer not in seen:
            seen.add(layer)
            todo.extend(dependencies.get(layer, ()))
    return seen


def frame_inputs(infos: list[StackInfo], frames: int) -> list[list[list]]:
    """The identity ``[[path, size, mtime_ns], ...]`` of the inputs of each of ``frames`` frames.

    A frame of a stack of files comes from its own file; otherwise (the pages of one TIFF,
    a Zarr store, several stacks) every frame is taken to come from every input file.
    """
    if len(infos) == 1 and infos[0].kind == "files" and infos[0].frames == frames:
        return [[[path, *stamp]] for path, stamp in zip(infos[0].files, infos[0].stamps)]
    return [all_inputs(infos)] * frames


def all_inputs(infos: list[StackInfo]) -> list[list]:
    """The identity ``[[path, size, mtime_ns], ...]`` of every input file of ``infos``."""
    return [[path, *stamp] for info in infos for path, stamp in zip(info.files, info.stamps)]


def source_names(array: da.Array) -> list[str] | None:
    """The frame names of the stack that ``array`` is computed from, when there is one.

    The names come back when exactly one set of named input frames is found in the
    array's task graph and it has as many frames as ``array`` (a transform that reorders
    frames without changing their number still gets the input order: pass ``names=`` to
    :func:`~stencilpipe.io.imsave` then). Arrays that were persisted lose their graph,
    and with it their names.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from PIL import Image
    >>> from stencilpipe.io import imread
    >>> folder = tempfile.mkdtemp()
    >>> for name in ["img_10", "img_2"]:
    ...     Image.fromarray(np.zeros((4, 5), np.uint8)).save(os.path.join(folder, name + ".png"))
    >>> source_names(imread(folder) + 1)
    ['img_2', 'img_10']
    """
    candidates = {
        info.frame_names
        for info in inputs_of(array)
        if info.frame_names is not None and info.frames == array.shape[0]
    }
    return list(candidates.pop()) if len(candidates) == 1 else None

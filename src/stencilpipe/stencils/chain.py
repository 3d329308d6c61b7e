"""Chains of stencils: ``chain(a, b, c)(x) == c(b(a(x)))``, as one pass over each chunk.

On a Dask array the chain exchanges halos once, with the sum of its stages'
halos, and runs every stage on the chunk in the worker that holds it. Each
stage still applies its own boundary mode at the true array edges, exactly as
the stages applied one after another would (a chunk at the edge starts at the
edge). A chain that mixes ``wrap`` with other modes needs different halo kinds
per stage, so it runs stage by stage.

On a NumPy array (or chunk) the stages are fused (:mod:`.fused`): one pass
over row strips, each stage's intermediate kept in a cache-sized buffer, and
separable stages (mean, gaussian) split into their 1-D passes. The result is
bit for bit that of the stages one after another. ``fuse=False`` runs them one
after another instead; so do chains with a ``wrap`` stage, 1-D chains, and
chunks that are not NumPy arrays (CuPy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from ..errors import KernelError
from .channels import AUTO, per_channel, resolve_channel_axis
from .dask_apply import is_dask_array, map_stencil_blocks
from .dtypes import check_dtype, result_dtype
from .fused import run_passes
from .gufunc import check_out, overlaps
from .stencil import Stencil
from .threads import single_threaded

if TYPE_CHECKING:
    import dask.array as da

__all__ = ["Chain", "chain"]


class Chain:
    """Stencils applied one after another; see :func:`chain`.

    Attributes
    ----------
    stages : tuple of Stencil
    ndim : int
        Core dimensions, common to every stage.
    halo : tuple of (int, int)
        The sum of the stages' halos: what one output element depends on.
    """

    def __init__(self, stages: tuple[Stencil, ...], *, fuse: bool = True):
        if not stages:
            raise KernelError("chain() needs at least one stencil")
        for stage in stages:
            info = stage.info
            if len(info.array_params) != 1 or len(info.scalar_defaults) != len(info.scalar_params):
                raise KernelError(
                    f"chain(): stage {stage.name!r} must read exactly one array and need no scalar "
                    "arguments; bind scalars with a closure or a default value"
                )
        ndims = {stage.ndim for stage in stages}
        if len(ndims) != 1:
            raise KernelError(
                f"chain(): stages read different numbers of dimensions "
                f"({', '.join(f'{s.name}: {s.ndim}' for s in stages)})"
            )
        self.stages = stages
        self.fuse = fuse
        self.ndim = ndims.pop()
        self.halo = tuple(
            (sum(s.halo[d][0] for s in stages), sum(s.halo[d][1] for s in stages))
            for d in range(self.ndim)
        )

    @property
    def name(self) -> str:
        return " -> ".join(stage.name for stage in self.stages)

    def __repr__(self) -> str:
        return f"<Chain {self.name} halo={self.halo}>"

    def __dask_tokenize__(self) -> tuple:
        from dask.base import tokenize

        return ("Chain", self.fuse, *(tokenize(stage) for stage in self.stages))

    def _fusable(self, block: Any) -> bool:
        return (
            self.fuse
            and isinstance(block, np.ndarray)
            and block.ndim >= self.ndim >= 2
            and all(stage.boundary != "wrap" for stage in self.stages)
        )

    def _run_stages(self, block: Any, out: Any = None) -> Any:
        if self._fusable(block):
            return self._run_fused(block, out)
        *first, last = self.stages
        for stage in first:
            block = stage(block, channel_axis=None)
        return last(block, out=out, channel_axis=None)

    def _dtypes(self, dtype: Any) -> list[np.dtype]:
        """The input dtype of each stage, then the chain's output dtype."""
        dtypes = [check_dtype(dtype, f"{self.name}: input")]
        for stage in self.stages:
            dtypes.append(result_dtype([dtypes[-1]], stage.dtype))
        return dtypes

    def _run_fused(self, block: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        """All stages in one pass over row strips (see :mod:`.fused`) into ``out``."""
        dtypes = self._dtypes(block.dtype)
        if out is not None:  # the last stage stores out='s dtype, as a stencil's call does
            dtypes[-1] = check_out(self.name, out, block.shape)
        core = block.shape[block.ndim - self.ndim :]
        frames = np.ascontiguousarray(block).reshape(-1, *core)
        passes = []
        for stage, dtype, out_dtype in zip(self.stages, dtypes, dtypes[1:]):
            passes += stage.strip_passes(dtype, out_dtype, stage.boundary, stage.cval, frames.shape)
        if out is None:
            out = np.empty(block.shape, dtypes[-1])
        # Strips of out= are written while later strips still read the input: an out= that
        # overlaps it, or that cannot be viewed as frames, gets the result copied in.
        if out.flags.c_contiguous and not overlaps(out, frames):
            run_passes(passes, frames, out.reshape(frames.shape))
        else:
            result = np.empty(frames.shape, dtypes[-1])
            run_passes(passes, frames, result)
            out[...] = result.reshape(out.shape)
        return out

    def _run_stages_on_block(self, block: Any) -> Any:
        with single_threaded():
            return self._run_stages(block)

    @overload
    def __call__(
        self,
        array: npt.NDArray[Any],
        *,
        out: npt.NDArray[Any] | None = ...,
        channel_axis: int | None = ...,
    ) -> npt.NDArray[Any]: ...

    @overload
    def __call__(
        self, array: da.Array, *, out: None = ..., channel_axis: int | None = ...
    ) -> da.Array: ...

    @overload
    def __call__(  # arrays of other libraries: their own type back
        self, array: Any, *, out: Any = ..., channel_axis: int | None = ...
    ) -> Any: ...

    def __call__(self, array: Any, *, out: Any = None, channel_axis: Any = AUTO) -> Any:
        """Apply every stage to ``array`` (NumPy, Dask, or on the GPU).

        Parameters
        ----------
        array : array
            The input.
        out : array, optional
            Where to write the result (not for Dask arrays); it may overlap ``array``.
        channel_axis : int or None, optional
            An axis of colour channels, never filtered across, as for a
            :class:`~stencilpipe.Stencil` call (by default found as there).
        """
        axis = resolve_channel_axis([array], channel_axis, self.name)
        if axis is not None:
            return per_channel(
                lambda moved, target: self(moved[0], out=target, channel_axis=None),
                [array],
                out,
                axis,
                self.ndim,
                self.name,
            )
        if not is_dask_array(array):
            return self._run_stages(array, out)
        if out is not None:
            raise TypeError(
                f"{self.name}: out= is not supported for dask arrays (results are lazy)"
            )
        dtype = self._dtypes(array.dtype)[-1]
        wraps = {stage.boundary == "wrap" for stage in self.stages}
        if len(wraps) > 1:
            for stage in self.stages:
                array = stage(array, channel_axis=None)
            return array
        return map_stencil_blocks(
            self._run_stages_on_block,
            [array],
            self.halo,
            wrap=wraps.pop(),
            dtype=dtype,
            name="_".join(stage.name for stage in self.stages),
        )


def chain(*stages: Stencil, fuse: bool = True) -> Chain:
    """Apply ``stages`` one after another, as one pass over each chunk of a Dask array.

    Parameters
    ----------
    *stages : Stencil
        Stencils of one array input each, with the same number of core dimensions.
    fuse : bool
        Run the stages over row strips with cache-resident intermediates (the default),
        or one after another over whole chunks; the results are the same.

    Returns
    -------
    Chain
        Callable on NumPy and Dask arrays; ``chain(a, b)(x)`` equals ``b(a(x))``.

    Examples
    --------
    >>> import numpy as np, stencilpipe as sp
    >>> blur_then_edges = sp.chain(sp.library.gaussian(1.0), sp.library.sobel(0))
    >>> blur_then_edges.halo
    ((5, 5), (5, 5))
    """
    return Chain(tuple(stages), fuse=fuse)

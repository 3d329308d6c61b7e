"""What the backends receive: the protocols of a kernel, of its passes, and of their code.

The backends (:mod:`.gufunc` for NumPy, :mod:`.dask_apply`, :mod:`.cuda_apply`,
:mod:`.fused`, :mod:`.chain`) need a kernel's shape (``name``, ``ndim``,
``halo``, ``dtype``), its code for one specialisation (``compiled``) and, on
the CPU, the passes it may run instead (``strip_passes``). They import these
protocols, never :class:`~stencilpipe.Stencil` itself, so a new kind of
filter is one class that every backend runs: :class:`~stencilpipe.Stencil`
is one, and the window filters of :mod:`.windows` are passes of it.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

__all__ = ["Kernel", "PassKernel", "RowKernel"]


class RowKernel(Protocol):
    """Compiled CPU code over ``(batch, *core)`` arrays: rows as :func:`.codegen_cpu.work_rows`
    counts them."""

    @property
    def ready(self) -> bool:
        """Whether it has run (and so compiled) in this process."""

    def run(self, *args: Any, start: int, stop: int) -> None:
        """Compute rows ``[start, stop)`` in this thread."""

    def __call__(self, *args: Any, rows: int) -> None:
        """Compute all ``rows``, split over threads."""

    def compile(self, args: list[Any]) -> None:
        """Compile for the types of ``args`` (with ``start, stop``) without running."""


class PassKernel(Protocol):
    """One pass of a fused run (:class:`.fused.Pass`): one array in, one out, no scalars."""

    @property
    def name(self) -> str:
        """The kernel's name (task names, messages)."""

    @property
    def dtype(self) -> np.dtype | None:
        """The dtype it passes on; None: its input's (or the call's output's, last)."""

    @property
    def halo(self) -> tuple[tuple[int, int], ...]:
        """Elements read before and after each element, per core axis."""

    def compiled(
        self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str
    ) -> RowKernel:
        """The code for one input dtype, output dtype and boundary mode."""


class Kernel(PassKernel, Protocol):
    """A stencil as the backends see it (:class:`~stencilpipe.Stencil` is one)."""

    passes: dict[Any, tuple[PassKernel, ...]] | None

    @property
    def ndim(self) -> int:
        """Core dimensions."""

    @property
    def signature(self) -> str:
        """The gufunc signature, e.g. ``"(n,m)->(n,m)"``."""

    def __call__(self, *args: Any, **options: Any) -> Any:
        """Apply the kernel (the call a Dask task makes on its blocks)."""

    def compiled(
        self,
        in_dtypes: tuple[np.dtype, ...],
        out_dtype: np.dtype,
        mode: str,
        target: str = "cpu",
    ) -> Any:
        """The code of one specialisation for ``target`` ('cpu': a :class:`RowKernel`)."""

    def pass_kernels(
        self,
        in_dtype: np.dtype,
        mode: str,
        out_dtype: np.dtype | None = None,
        shape: tuple[int, ...] | None = None,
    ) -> tuple[PassKernel, ...]:
        """The kernels the CPU runs one after another for this call, which writes an
        array of ``shape`` (``(self,)``: itself)."""

    def strip_passes(
        self,
        in_dtype: np.dtype,
        out_dtype: np.dtype,
        mode: str,
        cval: Any,
        shape: tuple[int, ...] | None = None,
    ) -> list[Any]:
        """The passes (:class:`.fused.Pass`) the CPU runs for this call, which writes an
        array of ``shape``."""

    def with_options(self, **options: Any) -> Kernel:
        """A copy with other ``boundary``, ``cval`` or ``dtype``."""

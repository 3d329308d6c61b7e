"""The :func:`stencil` decorator and the :class:`Stencil` it returns.

This file reads like the compiler's driver: analyse the kernel once at
decoration; at each call, bind the arguments, pick the specialisation for the
incoming dtypes and boundary mode (generating and compiling it on first use),
and run it with gufunc semantics.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import linecache
import math
import pickle
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from ..errors import KernelError
from .analysis import KernelInfo, analyse_kernel, kernel_env
from .boundary import MODE_CODES, Mode, validate_mode
from .channels import AUTO, per_channel, resolve_channel_axis
from .codegen_cpu import cpu_module_source
from .compile_lock import compile_lock
from .dispatch import backend_for
from .dtypes import check_dtype
from .foreign import is_foreign, like, to_native
from .fused import Pass
from .gufunc import fill_values
from .kernel import PassKernel
from .modules import compiled_marker, generator_fingerprint, load_module, mark_compiled
from .rewrite import resolve_free_names
from .threads import run_rows

if TYPE_CHECKING:
    import dask.array as da

__all__ = ["CompiledKernel", "Stencil", "stencil"]

_CORE_DIM_NAMES = "nmklpqrstuvw"


#: Calls writing fewer elements than this run a stencil's ``'small'`` passes (see
#: :class:`Stencil`), until the stencil has written :data:`SMALL_WORK` elements in them,
#: unless its kernel written out costs no compile (loaded, or in Numba's disk cache).
#: Those passes are loops compiled once per dtype, where the kernel written out for each
#: weights or window compiles for one to four seconds (on a machine's first use: Numba
#: caches it on disk) and runs 1.4-4.7x faster (1 thread, uint16, small / written out ms:
#: 512x512 gaussian sigma 1.5 1.16 / 0.74, 3x3 correlation 0.56 / 0.39, rank of a 3x3
#: box 0.71 / 0.19; 1023x1023 4.31 / 2.56, 2.23 / 1.36, 2.73 / 0.58). So a script's
#: first calls on small arrays do not wait for compiles, and a filter used on much data
#: still moves to its fastest code.
SMALL_CALL = 1 << 20

#: Rows a multiple of this many bytes apart fall in the same sets of the CPU's L1 cache
#: (the size of one of its ways).
CACHE_WAY = 4096


def rows_share_sets(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether the rows of float or 16-bit integer arrays of ``shape`` (batch, ..., row)
    and ``dtype`` lie a multiple of :data:`CACHE_WAY` bytes apart, so that a window of more
    rows than the cache has ways evicts its own rows: a 2048x2048 float32 frame's 17-row
    pass took 2.8x the time of a 2000x2000 one's. 16-bit rows since their pairs add in
    int32 (:func:`.dtypes.converted_accumulator`): 2048x2048 uint16 ``correlate1d`` across
    rows, 1 thread, in place / ring of rows (:data:`ACROSS_ROWS`) ms: 13 rows 13.1 / 16.4,
    15 19.1 / 17.6, 17 16.0-18.4 / 14.3-14.7, 33 52 / 28, 65 85-110 / 45. Not 8-bit rows
    (4096-wide uint8, 13 rows 12.1 / 16.6, 17 14.1 / 15.0, 65 51 / 47)."""
    integers = dtype.kind in "iu" and dtype.itemsize == 2
    floats = dtype.kind == "f"
    return (floats or integers) and len(shape) > 2 and shape[-1] * dtype.itemsize % CACHE_WAY == 0


#: Windows of more rows than this run across rows that share cache sets
#: (:func:`rows_share_sets`) as :class:`~.correlate_passes.CorrelatePass`, which copies
#: them into a ring of rows first: scipy's ``correlate1d`` in ndfilters, the library's
#: float passes across rows (mean, gaussian). Written out, a kernel reads each row in
#: place: 1 thread, ms, written out / ring, 2048x2048 float32 13 rows 7.2 / 7.2, 17
#: 10.2 / 6.3, 25 20.6 / 8.1, 65 60 / 24; float64 13 29.6 / 17.9, 65 178 / 34. On rows
#: that do not share sets (2000x2000) the kernel written out is 1.4-2.6x faster.
ACROSS_ROWS = 12


#: Elements a stencil writes in small calls (see :data:`SMALL_CALL`) before its small calls
#: too run its kernel written out: when the time the slower loops have lost (0.5-2 ns an
#: element, above) is about what compiling that kernel costs (1-3 s), as a renter buys once
#: the rent paid reaches the price, so a process never spends much more than twice the
#: better of the two choices. About 4000 frames of 512x512.
SMALL_WORK = 1 << 30


@dataclass
class _Specialisations:
    """What a stencil compiled, shared with its copies (:meth:`Stencil.with_options`)."""

    #: (target, in_dtypes, out_dtype): the generated module and its line map.
    modules: dict[tuple, tuple[Any, dict]] = field(default_factory=dict)
    #: (target, in_dtypes, out_dtype, mode): the kernel of that module under that mode.
    kernels: dict[tuple, CompiledKernel] = field(default_factory=dict)
    #: Elements written by small calls through ``'small'`` passes (see :data:`SMALL_WORK`).
    small_work: int = 0
    #: (in_dtypes, out_dtype): whether the CPU module was compiled on this machine before.
    on_disk: dict[tuple, bool] = field(default_factory=dict)
    #: (in_dtypes, out_dtype): the file that says so (see :meth:`Stencil._marker`).
    markers: dict[tuple, Path | None] = field(default_factory=dict)


class Stencil:
    """A neighbourhood kernel compiled per dtype, applied with NumPy gufunc semantics.

    Made by :func:`stencil`; see there for the options.

    Attributes
    ----------
    name : str
        The kernel's name.
    ndim : int
        Number of core dimensions; leading dimensions beyond them are batch dimensions.
    halo : tuple of (int, int)
        Elements needed before and after each point, per core dimension.
    signature : str
        The gufunc signature, e.g. ``"(n,m)->(n,m)"``.
    boundary : str
        Default boundary mode.
    cval : float
        Fill value of the ``constant`` mode.
    dtype : numpy.dtype or None
        Output dtype; None means the input's.
    passes : dict or None
        For a separable filter (the library's mean and gaussian), its 1-D passes, one
        per axis, which the CPU runs instead of the 2-D kernel under reflect, mirror and
        nearest (see :meth:`strip_passes`): a tuple of stencils per input dtype that has
        passes of its own, and under the key None for the others; under the key
        ``'constant'``, the passes of constant mode, each padding with ``cval`` as scipy
        does (sobel), and which the GPU runs too; under the key ``'cpu'``, passes the
        CPU runs under every mode (:mod:`.windows`: big minima, maxima and medians); under
        the key ``'small'``, passes the CPU runs under every mode for calls that write
        fewer than :data:`SMALL_CALL` elements, until :data:`SMALL_WORK` elements
        (:mod:`.correlate_passes`); under the key ``'shared_sets'``, passes the CPU runs
        under every mode where the rows share cache sets (:func:`rows_share_sets`). Each
        pass is a
        :class:`.kernel.PassKernel`. None for other stencils.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        boundary: str = "reflect",
        cval: float = 0.0,
        dtype: Any = None,
        neighborhood: tuple[tuple[int, int], ...] | None = None,
        _info: KernelInfo | None = None,
        _compiled: _Specialisations | None = None,
        _passes: dict[Any, tuple[PassKernel, ...]] | None = None,
    ):
        self.func = func
        self.info = _info if _info is not None else analyse_kernel(func, neighborhood)
        self.neighborhood = neighborhood
        self.boundary = validate_mode(boundary)
        self.cval = cval
        self.dtype = None if dtype is None else check_dtype(dtype, f"dtype= of {self.info.name!r}")
        self._compiled = _Specialisations() if _compiled is None else _compiled
        self.passes = _passes
        self._recipe: tuple | None = None
        functools.update_wrapper(self, func, updated=())

    # -- description -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.info.name

    @property
    def ndim(self) -> int:
        return self.info.ndim

    @property
    def halo(self) -> tuple[tuple[int, int], ...]:
        return self.info.halo

    @property
    def signature(self) -> str:
        core = "(" + ",".join(_CORE_DIM_NAMES[: self.ndim]) + ")"
        inputs = [core] * len(self.info.array_params) + ["()"] * len(self.info.scalar_params)
        return f"{','.join(inputs)}->{core}"

    def __repr__(self) -> str:
        return (
            f"<Stencil {self.name} {self.signature} halo={self.halo} boundary={self.boundary!r}"
            + (f" dtype={self.dtype}" if self.dtype is not None else "")
            + ">"
        )

    def with_options(self, **options: Any) -> Stencil:
        """A copy with other ``boundary``, ``cval`` or ``dtype``; compiled code is shared."""
        unknown = set(options) - {"boundary", "cval", "dtype"}
        if unknown:
            raise TypeError(f"with_options() got unknown option(s): {', '.join(sorted(unknown))}")
        merged = {"boundary": self.boundary, "cval": self.cval, "dtype": self.dtype, **options}
        copy = Stencil(
            self.func,
            neighborhood=self.neighborhood,
            _info=self.info,
            _compiled=self._compiled,
            _passes=self.passes,
            **merged,
        )
        copy._recipe = self._recipe
        return copy

    def __dask_tokenize__(self) -> tuple:
        """Deterministic identity for Dask task names: the kernel's code, its constants, options."""
        from dask.base import tokenize

        env = kernel_env(self.func)
        constants = {name: env[name] for name in sorted(self.info.free_names) if name in env}
        body = "\n".join(ast.dump(statement) for statement in self.info.body)
        return (
            "Stencil",
            self.name,
            body,
            tokenize(constants),
            self.boundary,
            self.cval,
            str(self.dtype),
        )

    @classmethod
    def from_source(
        cls,
        name: str,
        source: str,
        namespace: dict[str, Any] | None = None,
        *,
        module: str = __name__,
        **options: Any,
    ) -> Stencil:
        """The stencil of the kernel ``name`` that ``source`` defines (a generated kernel).

        The source stays readable (``inspect.getsource``), and the stencil pickles, with
        plain :mod:`pickle` too, as this source, ``namespace`` and its options.

        Parameters
        ----------
        name : str
            The kernel function that ``source`` defines.
        source : str
            Python source; ``np`` is NumPy in it.
        namespace : dict, optional
            Further globals of the source (picklable constants).
        module : str
            The module the kernel says it comes from (``__module__``).
        **options
            ``boundary``, ``cval``, ``dtype``, ``neighborhood`` as for :func:`stencil`.
        """
        namespace = dict(namespace or {})
        digest = hashlib.sha256(source.encode()).hexdigest()
        neighborhood = options.get("neighborhood")
        key = (name, digest, module, neighborhood, _namespace_key(namespace))
        with compile_lock:  # compile() and the analysis share CPython's unsafe ast state
            generated = _generated.pop(key, None)
            if generated is None:
                filename = f"<{module} {name} {digest[:12]}>"
                linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
                scope = {"np": np, "__name__": module, **namespace}
                exec(compile(source, filename, "exec"), scope)
                made = cls(scope[name], **options)
                _generated[key] = made.func, made.info, made._compiled
                if len(_generated) > _GENERATED_KEPT:
                    del _generated[next(iter(_generated))]
            else:
                _generated[key] = generated  # most recently used: evicted last
                func, info, compiled = generated
                made = cls(func, _info=info, _compiled=compiled, **options)
        made._recipe = (name, source, namespace, module)
        return made

    # -- pickling: compiled code stays behind, each process compiles (and disk-caches) its own --
    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickle by reference what can be found again by name, by source what was generated.

        A stencil defined at the top of an importable module is that module's attribute; a
        copy of it (:meth:`with_options`), or one decorated from a module-level function,
        is that plus its options; one made by :meth:`from_source` (the library's filters)
        is its source. Others (closures, kernels of ``__main__``) pickle their state, which
        cloudpickle (Dask's) can ship.
        """
        options = {"boundary": self.boundary, "cval": self.cval, "dtype": self.dtype}
        if self._recipe is not None:
            return _from_recipe, (self._recipe, options, self.neighborhood, self.passes)
        module = getattr(self.func, "__module__", None)
        found = _find(module, getattr(self.func, "__qualname__", ""))
        if found is self:
            return self.__qualname__
        if isinstance(found, Stencil) and found.func is self.func:
            return _with_options, (found, options, self.passes)
        if found is self.func:
            return _decorated, (self.func, options, self.neighborhood, self.passes)
        return super().__reduce_ex__(protocol)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_compiled"] = _Specialisations()
        return state

    # -- calling -----------------------------------------------------------------------------
    @overload
    def __call__(
        self,
        *args: npt.NDArray[Any] | float,
        out: npt.NDArray[Any] | None = ...,
        boundary: Mode | None = ...,
        cval: float | None = ...,
        channel_axis: int | None = ...,
    ) -> npt.NDArray[Any]: ...

    @overload
    def __call__(
        self,
        x: da.Array,
        /,
        *args: da.Array | npt.NDArray[Any] | float,
        out: None = ...,
        boundary: Mode | None = ...,
        cval: float | None = ...,
        channel_axis: int | None = ...,
    ) -> da.Array: ...

    @overload
    def __call__(  # arrays of other libraries (CuPy, PyTorch, ...): their own type back
        self,
        *args: Any,
        out: Any = ...,
        boundary: Mode | None = ...,
        cval: float | None = ...,
        channel_axis: int | None = ...,
    ) -> Any: ...

    def __call__(
        self,
        *args: Any,
        out: Any = None,
        boundary: Mode | None = None,
        cval: Any = None,
        channel_axis: Any = AUTO,
    ) -> Any:
        """Apply the kernel; see :func:`stencil` for the semantics.

        ``channel_axis`` (int or None), as in scikit-image, names an axis of colour
        channels, which is never filtered across: it is a batch axis. Left out, a Dask
        stack read from RGB/RGBA files has its trailing axis as channel axis, and other
        arrays have none (a NumPy ``(h, w, 3)`` frame is an image 3 wide); see
        :mod:`stencilpipe.stencils.channels`.
        """
        arrays, scalars = self._bind(args)
        foreign = next((a for a in [*arrays, out] if is_foreign(a)), None)
        if foreign is not None:
            native = [to_native(a) for a in arrays]
            result = self(
                *native,
                *scalars,
                out=to_native(out),
                boundary=boundary,
                cval=cval,
                channel_axis=channel_axis,
            )
            return out if out is not None else like(result, foreign)
        axis = resolve_channel_axis(arrays, channel_axis, self.name)
        if axis is not None:

            def run(moved: list[Any], target: Any) -> Any:
                options = dict(out=target, boundary=boundary, cval=cval, channel_axis=None)
                return self(*moved, *scalars, **options)

            return per_channel(run, arrays, out, axis, self.ndim, self.name)
        mode = self.boundary if boundary is None else validate_mode(boundary)
        fill = self.cval if cval is None else cval
        backend = backend_for(arrays)
        if backend.lazy and out is not None:
            raise TypeError(
                f"{self.name}: out= is not supported for {backend.name} arrays (results are lazy)"
            )
        return backend.apply(self, arrays, scalars, out=out, mode=mode, cval=fill)

    def _bind(self, args: tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
        info = self.info
        n_arrays = len(info.array_params)
        expected = list(info.array_params) + list(info.scalar_params)
        required = n_arrays + len([p for p in info.scalar_params if p not in info.scalar_defaults])
        if not required <= len(args) <= len(expected):
            raise TypeError(
                f"{self.name}({', '.join(expected)}) takes {required} to {len(expected)} "
                f"arguments, got {len(args)}"
            )
        scalars = list(args[n_arrays:]) + [
            info.scalar_defaults[p] for p in info.scalar_params[len(args) - n_arrays :]
        ]
        for name, value in zip(info.scalar_params, scalars):
            if np.ndim(value) != 0 or not isinstance(value, (int, float, bool, np.generic)):
                raise TypeError(
                    f"{self.name}: scalar parameter {name!r} must be a number, "
                    f"got {type(value).__name__}"
                )
        return list(args[:n_arrays]), scalars

    def compiled(
        self,
        in_dtypes: tuple[np.dtype, ...],
        out_dtype: np.dtype,
        mode: str,
        target: str = "cpu",
    ) -> CompiledKernel:
        """The compiled kernel of one specialisation, generated on first use.

        Parameters
        ----------
        in_dtypes : tuple of numpy.dtype
            One per array parameter.
        out_dtype : numpy.dtype
            The output's dtype.
        mode : str
            Boundary mode.
        target : {'cpu', 'cuda'}
            The code generator: :mod:`.codegen_cpu`, or :mod:`.codegen_cuda`
            (imported only when asked for).
        """
        key = (target, in_dtypes, out_dtype, mode)
        kernels = self._compiled.kernels
        kernel = kernels.get(key)
        if kernel is None:
            with compile_lock:  # generated once, however many threads ask at once
                kernel = kernels.get(key)
                if kernel is None:
                    module, lines = self._compiled.modules.get(key[:3]) or self._generate(*key[:3])
                    marker = self._marker(in_dtypes, out_dtype) if target == "cpu" else None
                    code = MODE_CODES[mode]
                    kernel = CompiledKernel(self, module, lines, in_dtypes, code, marker)
                    kernels[key] = kernel
        return kernel

    def _at_hand(self, in_dtype: np.dtype, out_dtype: np.dtype | None) -> bool:
        """Whether the CPU kernel from ``in_dtype`` into ``out_dtype`` costs no compile: loaded
        in this process, or in Numba's disk cache (compiled on this machine before)."""
        if out_dtype is None:
            return False
        key = ((in_dtype,), out_dtype)
        if ("cpu", *key) in self._compiled.modules:
            return True
        on_disk = self._compiled.on_disk.get(key)
        if on_disk is None:
            marker = self._marker(*key)
            on_disk = marker is not None and marker.exists()
            self._compiled.on_disk[key] = on_disk
        return on_disk

    def _marker(self, in_dtypes: tuple, out_dtype: np.dtype) -> Path | None:
        """The file that says this CPU specialisation was compiled on this machine
        (:func:`.modules.compiled_marker`), named by a digest of what its source is
        generated from (1.5-3 ms), where generating the source takes 13-50 ms (a 13-weight
        correlation's to a 27-point generic_filter's), which a call that only asks whether
        it could load the kernel should not pay. None when the module cannot be cached on
        disk (it holds a user's objects). Made once per specialisation."""
        key = (in_dtypes, out_dtype)
        if key not in self._compiled.markers:
            self._compiled.markers[key] = self._new_marker(in_dtypes, out_dtype)
        return self._compiled.markers[key]

    def _new_marker(self, in_dtypes: tuple, out_dtype: np.dtype) -> Path | None:
        prelude, injected = resolve_free_names(self.info, kernel_env(self.func))
        if injected:
            return None
        info = self.info
        shape = (info.array_params, info.scalar_params, info.scalar_defaults, info.halo)
        parts = [generator_fingerprint(), self.name, ast.dump(ast.Module(list(info.body), []))]
        parts += [repr(shape), prelude, repr(in_dtypes), repr(out_dtype)]
        return compiled_marker(hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32])

    def _generate(self, target: str, in_dtypes: tuple, out_dtype: np.dtype) -> tuple[Any, dict]:
        """Generate and load the module of one specialisation, which serves every boundary
        mode (``compile_lock`` held): the module and its line map, kept for the other modes."""
        if target == "cuda":
            from .codegen_cuda import cuda_module_source as module_source
        else:
            module_source = cpu_module_source
        env = kernel_env(self.func)
        prelude, injected = resolve_free_names(self.info, env)
        generated = module_source(self.info, env, in_dtypes, out_dtype, prelude, cache=not injected)
        module = load_module(f"{self.name}_{target}", generated.source, injected)
        self._compiled.modules[target, in_dtypes, out_dtype] = module, generated.line_map
        return module, generated.line_map

    def pass_kernels(
        self,
        in_dtype: np.dtype,
        mode: str,
        out_dtype: np.dtype | None = None,
        shape: tuple[int, ...] | None = None,
    ) -> tuple[PassKernel, ...]:
        """The kernels the CPU runs, one after another, for input ``in_dtype`` under ``mode``
        into ``out_dtype``, for a call writing an array of ``shape`` (``(batch, *core)``; None:
        any): ``(self,)`` or those of :attr:`passes` (see :meth:`strip_passes`). Small calls
        take the ``'small'`` passes while the kernel costs a compile (see
        :data:`SMALL_CALL`); calls whose rows share cache sets (:func:`rows_share_sets`)
        the ``'shared_sets'`` passes.

        Passes of an input dtype that end in an integer (a mean's exact integer sums,
        divided and rounded) serve integer outputs only: a float output keeps the fraction.
        """
        passes = self.passes or {}
        small, shared = passes.get("small"), passes.get("shared_sets")
        if shape is not None and small is not None and math.prod(shape) < SMALL_CALL:
            if self._compiled.small_work < SMALL_WORK and not self._at_hand(in_dtype, out_dtype):
                return small
        if shape is not None and shared is not None and rows_share_sets(shape, in_dtype):
            return shared
        cpu = passes.get("cpu")
        if cpu is not None:
            return cpu
        if mode == "wrap":  # whole-frame passes (see strip_passes) pay for big windows only
            return (self,)
        if mode == "constant":
            return passes.get("constant", (self,))
        own = passes.get(in_dtype)
        if own and out_dtype is not None and out_dtype.kind == "f":
            if np.dtype(own[-1].dtype or in_dtype).kind in "iu":
                own = None
        return own or passes.get(None) or (self,)

    def strip_passes(
        self,
        in_dtype: np.dtype,
        out_dtype: np.dtype,
        mode: str,
        cval: Any,
        shape: tuple[int, ...] | None = None,
    ) -> list[Pass]:
        """This stencil as passes of :func:`~stencilpipe.stencils.fused.run_passes`.

        A separable filter (one with :attr:`passes`) gives its 1-D passes, when ``mode``
        folds indices into the array (reflect, mirror, nearest): the folded reads of a
        pass along one axis are then those of the whole filter. Under ``constant`` it
        gives the passes of ``passes['constant']`` where it has them (each pass pads
        with ``cval``, as scipy's sobel does), else one pass; under ``wrap``, or when the
        stencil reads several arrays or scalars, it is one pass. ``passes['cpu']``, where
        a stencil has them, are run under every mode (the window filters of
        :mod:`.windows`); under ``wrap`` each over whole frames, since a strip of rows
        cannot wrap (see :func:`~stencilpipe.stencils.fused.run_passes`). A call writing
        an array of ``shape`` with fewer than :data:`SMALL_CALL` elements runs
        ``passes['small']`` where the stencil has them, until it has written
        :data:`SMALL_WORK` elements in them (see :meth:`pass_kernels`). A pass that is a
        stencil with passes of its own gives those in its place (the library's float
        passes across rows that share cache sets run over a ring of rows).
        """
        kernels = self.pass_kernels(in_dtype, mode, out_dtype, shape)
        if shape is not None and kernels is (self.passes or {}).get("small"):
            self._compiled.small_work += math.prod(shape)  # racy between threads: rough
        passes, dtype = [], in_dtype
        for k, kernel in enumerate(kernels):
            next_dtype = out_dtype if k == len(kernels) - 1 else (kernel.dtype or dtype)
            if isinstance(kernel, Stencil) and kernel is not self and kernel.passes:
                passes += kernel.strip_passes(dtype, next_dtype, mode, cval, shape)
            else:
                (fill,) = fill_values(cval, [dtype], self.name)
                compiled = kernel.compiled((dtype,), next_dtype, mode)
                passes.append(Pass(compiled, kernel.halo[0], next_dtype, fill))
            dtype = next_dtype
        return passes

    def precompile(self, dtype: Any) -> np.dtype:
        """Compile the CPU kernel(s) a call on input ``dtype`` runs, without running them;
        return the output dtype. Raises the :class:`KernelError` a first call would raise.

        A separable filter compiles its passes (see :meth:`strip_passes`), not the 2-D
        kernel that the CPU then never runs.
        """
        dtype = check_dtype(dtype, f"{self.name}: input")
        out_dtype = self.dtype or dtype
        frame = np.empty((1,) * (self.ndim + 1), dtype)
        if self.passes:
            for step in self.strip_passes(dtype, out_dtype, self.boundary, self.cval):
                target = np.empty_like(frame, step.out_dtype)
                step.kernel.compile([frame, target, step.cval, 0, 1])
                frame = target
            return out_dtype
        in_dtypes = (dtype,) * len(self.info.array_params)
        args = [frame] * len(in_dtypes) + [np.empty_like(frame, out_dtype)]
        args += [self.info.scalar_defaults.get(name, 0) for name in self.info.scalar_params]
        args += fill_values(self.cval, list(in_dtypes), self.name) + [0, 1]
        self.compiled(in_dtypes, out_dtype, self.boundary).compile(args)
        return out_dtype

    def generated_source(self, dtype: Any, *, boundary: str | None = None) -> str:
        """The CPU source generated for input ``dtype`` (for reading and debugging)."""
        dtype = check_dtype(dtype, "the input")
        in_dtypes = (dtype,) * len(self.info.array_params)
        out_dtype = self.dtype or dtype
        kernel = self.compiled(in_dtypes, out_dtype, validate_mode(boundary or self.boundary))
        return kernel.source


def _find(module: str | None, qualname: str) -> Any:
    """The object ``module.qualname`` names, if the module is loaded and not ``__main__``
    (whose objects another process cannot import)."""
    if module in (None, "__main__") or module not in sys.modules or "<locals>" in qualname:
        return None
    found: Any = sys.modules[module]
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


def _with_passes(made: Stencil, passes: dict | None) -> Stencil:
    made.passes = passes
    return made


#: Stencils of module-level functions unpickled in this process, by what they were
#: unpickled from: every Dask task unpickles its own copy of its stencils, and a fresh copy
#: analyses its kernel and generates and loads its code again (0.3 s a kernel, per task).
#: Stencils are immutable once made, so such copies share one. (Generated stencils share
#: their code through ``_generated`` instead.)
_unpickled: dict[str, Stencil] = {}
_UNPICKLED_KEPT = 256

#: What :meth:`Stencil.from_source` made of a source before (its function, analysis and
#: compiled code), so that a filter made again, as ``library.mean(3)(frame)`` in a loop
#: does, costs no new module: generating and loading one took 15-50 ms per call.
_generated: dict[tuple, tuple[Callable, KernelInfo, _Specialisations]] = {}
_GENERATED_KEPT = 256


def _namespace_key(namespace: dict[str, Any]) -> tuple:
    """A generated kernel's globals as a key: constants by value, callables (a user's
    function in ``generic_filter``) by identity, since a function defined again under its
    name is another function. The key's stencil holds them, so no identity is reused."""
    return tuple(
        (name, id(value) if callable(value) else pickle.dumps(value))
        for name, value in sorted(namespace.items())
    )


def _shared(make: Callable[..., Stencil], *args: Any) -> Stencil:
    """``make(*args)``, or the stencil it made before from equal arguments."""
    from dask.base import tokenize

    key = tokenize(make.__name__, *args)
    made = _unpickled.get(key)
    if made is None:
        with compile_lock:  # one stencil per key, however many tasks unpickle at once
            made = _unpickled.get(key)
            if made is None:
                made = _unpickled[key] = make(*args)
                if len(_unpickled) > _UNPICKLED_KEPT:
                    del _unpickled[next(iter(_unpickled))]
    return made


def _from_recipe(recipe: tuple, options: dict, neighborhood: Any, passes: dict | None) -> Stencil:
    """Unpickle a stencil of :meth:`Stencil.from_source`: its source finds the code
    compiled for it before in ``_generated``, the one place that keeps it, so the copy
    shares it with the stencil it was pickled from whenever that is still alive."""
    name, source, namespace, module = recipe
    made = Stencil.from_source(
        name, source, namespace, module=module, neighborhood=neighborhood, **options
    )
    return _with_passes(made, passes)


def _with_options(original: Stencil, options: dict, passes: dict | None) -> Stencil:
    """Unpickle a copy of a module-level stencil."""
    return _with_passes(original.with_options(**options), passes)


def _decorated(func: Callable, options: dict, neighborhood: Any, passes: dict | None) -> Stencil:
    """Unpickle a stencil of a module-level function."""
    return _shared(_made_decorated, func, options, neighborhood, passes)


def _made_decorated(
    func: Callable, options: dict, neighborhood: Any, passes: dict | None
) -> Stencil:
    return _with_passes(Stencil(func, neighborhood=neighborhood, **options), passes)


class CompiledKernel:
    """A generated module's ``apply`` under one boundary mode, with Numba's compile errors
    turned into :class:`KernelError`.

    The CPU loop nest is called as ``kernel(*args, rows=n)`` (split over
    threads), which passes ``apply`` the mode's code (:attr:`mode`) after ``args``;
    other targets launch ``kernel.apply`` themselves, with :attr:`mode`, inside
    ``with kernel.errors_translated():``. Once compiled, it creates ``marker`` (see
    :meth:`Stencil._marker`), where one is given.
    """

    def __init__(
        self,
        stencil: Stencil,
        module,
        line_map: dict[int, int],
        in_dtypes,
        mode: int,
        marker: Path | None = None,
    ):
        self.stencil = stencil
        self.marker = marker
        self.apply = module.apply
        self.mode = mode
        self.path = module.__file__
        with open(self.path) as handle:
            self.source = handle.read()
        self.line_map = line_map
        self.in_dtypes = in_dtypes
        self._ran = False

    @contextlib.contextmanager
    def errors_translated(self) -> Iterator[None]:
        """Re-raise Numba's compile errors as a :class:`KernelError` naming the kernel's line."""
        from numba.core.errors import NumbaError

        try:
            yield
        except NumbaError as exc:
            raise self._translate(exc) from None

    def compile(self, args: list[Any]) -> None:
        """Compile for the types of ``args`` (as :meth:`__call__` takes them, with start, stop)."""
        import numba

        *args, start, stop = args
        with self.errors_translated():
            self.apply.compile(tuple(numba.typeof(a) for a in [*args, self.mode, start, stop]))
        self._mark()

    def __call__(self, *args: Any, rows: int) -> None:
        """Run the CPU loop nest over ``rows`` rows; the first call compiles, in this thread."""
        if self._ran:
            out = args[len(self.stencil.info.array_params)]
            run_rows(self.apply, (*args, self.mode), rows, elements=out.size)
            return
        self.run(*args, start=0, stop=rows)

    @property
    def ready(self) -> bool:
        """True once :meth:`run` has run (and so compiled) in this process."""
        return self._ran

    def run(self, *args: Any, start: int, stop: int) -> None:
        """Run the CPU loop nest over rows ``[start, stop)`` in this thread."""
        if self._ran:  # not Numba's ``signatures``, which costs ~10 us per call
            self.apply(*args, self.mode, start, stop)
            return
        with self.errors_translated():
            self.apply(*args, self.mode, start, stop)
        self._ran = True
        self._mark()

    def _mark(self) -> None:
        if self.marker is not None:
            mark_compiled(self.marker)

    def _translate(self, exc: Exception) -> KernelError:
        info = self.stencil.info
        text = str(exc)
        lines = [int(n) for n in re.findall(re.escape(self.path) + r'", line (\d+)', text)]
        lines += [int(n) for n in re.findall(re.escape(self.path) + r" \((\d+)\)", text)]
        kernel_lines = [self.line_map[n] for n in lines if n in self.line_map]
        where = (
            info.where()
            if not kernel_lines
            else f"{info.filename}:{info.lineno + kernel_lines[0] - 1}"
        )
        reason = next(
            (
                line.strip()
                for line in text.splitlines()
                if line.strip() and not line.startswith("Failed in") and "pipeline" not in line
            ),
            type(exc).__name__,
        )
        dtypes = ", ".join(str(d) for d in self.in_dtypes)
        return KernelError(
            f"kernel {info.name!r} ({where}) does not compile for {dtypes} input: {reason}. "
            "Kernels may use arithmetic, comparisons, if/else, for-loops over range, math and "
            "numpy scalar functions; see the generated code with .generated_source(dtype)"
        )


@overload
def stencil(
    func: Callable[..., Any],
    *,
    boundary: Mode = ...,
    cval: float = ...,
    dtype: npt.DTypeLike = ...,
    neighborhood: tuple[tuple[int, int], ...] | None = ...,
) -> Stencil: ...


@overload
def stencil(
    func: None = ...,
    *,
    boundary: Mode = ...,
    cval: float = ...,
    dtype: npt.DTypeLike = ...,
    neighborhood: tuple[tuple[int, int], ...] | None = ...,
) -> Callable[[Callable[..., Any]], Stencil]: ...


def stencil(
    func: Callable[..., Any] | None = None,
    *,
    boundary: Mode = "reflect",
    cval: float = 0.0,
    dtype: npt.DTypeLike | None = None,
    neighborhood: tuple[tuple[int, int], ...] | None = None,
) -> Stencil | Callable[[Callable[..., Any]], Stencil]:
    """Turn a kernel written with relative indexing into a compiled, array-generic function.

    Parameters
    ----------
    func : callable
        The kernel. Its leading parameters are arrays read at offsets relative
        to the current element (``x[-1, 0]``), its trailing parameters scalars.
        It returns the new value of the element.
    boundary : {'reflect', 'constant', 'nearest', 'mirror', 'wrap'}
        How elements outside the array are read, as in scipy.ndimage.
    cval : scalar
        Value outside the array for ``boundary='constant'``.
    dtype : dtype, optional
        Output dtype; default the (common) input dtype. Integer outputs
        saturate; float results stored as integers are rounded to nearest.
    neighborhood : tuple of (int, int), optional
        Range of offsets per dimension, needed only when offsets are
        computed in a way the halo cannot be inferred from.

    Returns
    -------
    Stencil
        Call it as ``f(*arrays, *scalars, out=None, boundary=None, cval=None,
        channel_axis=AUTO)``. Core dimensions are the last ``f.ndim``; leading ones
        are batch dimensions and broadcast. ``channel_axis`` (an int, or None for none)
        names an axis that is never filtered across, as scikit-image's; by default it is
        the trailing colour axis of a stack read from RGB(A) files, and none otherwise
        (a NumPy ``(h, w, 3)`` array is an image 3 pixels wide). ``out`` may overlap the
        inputs. It returns ``out`` (allocated if not given).

    Examples
    --------
    >>> import numpy as np, stencilpipe as sp
    >>> @sp.stencil
    ... def smooth(x):
    ...     return (x[-1, 0] + x[0, -1] + x[0, 0] + x[0, 1] + x[1, 0]) // 5
    >>> smooth.halo, smooth.signature
    (((1, 1), (1, 1)), '(n,m)->(n,m)')
    >>> smooth(np.full((3, 4), 7, dtype=np.uint8))
    array([[7, 7, 7, 7],
           [7, 7, 7, 7],
           [7, 7, 7, 7]], dtype=uint8)
    """

    def decorate(kernel: Callable[..., Any]) -> Stencil:
        return Stencil(kernel, boundary=boundary, cval=cval, dtype=dtype, neighborhood=neighborhood)

    return decorate if func is None else decorate(func)

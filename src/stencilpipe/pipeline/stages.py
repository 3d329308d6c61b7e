"""Build the stencils a config names: library filters and morphology
(:data:`stencilpipe.ndmorph.STAGES`) by name, users' kernels by import path."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from .. import library, ndmorph
from ..errors import ConfigError, StencilpipeError
from ..stencils import Chain, Stencil, chain, stencil
from .config import PipelineConfig

__all__ = ["build_chain", "load_user_stencil"]


#: The stencil files loaded in this process, by path.
_FILE_MODULES: dict[Path, ModuleType] = {}


def _module_from_file(path: Path) -> ModuleType:
    """Run the stencil file ``path`` as a module, once per process.

    The module is in ``sys.modules`` only while it runs. Worker processes cannot import it
    by name, so what it defines must not pickle as a reference to it: out of
    ``sys.modules``, its stencils and functions pickle by value (as cloudpickle, Dask's
    pickler, ships what it cannot find by name).
    """
    path = path.resolve()
    if path not in _FILE_MODULES:
        name = f"_stencilpipe_user_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # while it runs, as an import would (dataclasses need it)
        try:
            spec.loader.exec_module(module)
        finally:
            del sys.modules[name]
        _FILE_MODULES[path] = module
    return _FILE_MODULES[path]


def load_user_stencil(reference: str, base_dir: Path) -> Stencil:
    """The ``@stencil`` that ``module:name`` or ``file.py:name`` refers to.

    A module that cannot be imported is looked for as ``<module>.py`` beside
    the config file. A plain function is decorated with :func:`stencil`.
    """
    module_name, _, attribute = reference.rpartition(":")
    candidate = base_dir / (module_name if module_name.endswith(".py") else f"{module_name}.py")
    try:
        if module_name.endswith(".py") or (candidate.exists() and module_name not in sys.modules):
            if not candidate.exists():
                raise ConfigError(f"stencil file {candidate} does not exist")
            module = _module_from_file(candidate)
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"cannot import {module_name!r} ({exc}); give an importable module or a .py file "
            "beside the config"
        ) from None
    except StencilpipeError:
        raise  # e.g. a kernel refused at decoration: its own message says what and where
    except SyntaxError as exc:
        raise ConfigError(f"{exc.filename}:{exc.lineno}: SyntaxError: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed while it was imported
        raise ConfigError(
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    kernel = getattr(module, attribute, None)
    if kernel is None:
        raise ConfigError(f"{module_name!r} has no attribute {attribute!r}")
    if isinstance(kernel, Stencil):
        return kernel
    if callable(kernel):
        return stencil(kernel)
    raise ConfigError(f"{reference!r} is a {type(kernel).__name__}, not a stencil")


def _build_stage(name: str, params: Any, config: PipelineConfig) -> Stencil | tuple[Stencil, ...]:
    """The stencil (or, for morphology, the stencils in order) of one stage."""
    if name == "stencil":
        reference = params if isinstance(params, str) else params["path"]
        options = (
            {} if isinstance(params, str) else {k: v for k, v in params.items() if k != "path"}
        )
        kernel = load_user_stencil(reference, config.base_dir)
        return kernel.with_options(
            boundary=options.get("boundary", config.boundary),
            **({"cval": options["cval"]} if "cval" in options else {}),
        )
    factory = cast("Callable[..., Stencil]", library.FILTERS.get(name) or ndmorph.STAGES[name])
    if any(p.kind is p.VAR_KEYWORD for p in inspect.signature(factory).parameters.values()):
        params = {"boundary": config.boundary, **params}  # stages that take the boundary options
    return factory(**params)


def build_chain(config: PipelineConfig) -> Chain:
    """The config's stages as one :class:`~stencilpipe.Chain`.

    Raises
    ------
    ConfigError
        Naming the stage (``stages.2.stencil: ...``) that cannot be built.
    """
    stencils: list[Stencil] = []
    for index, (name, params) in enumerate(config.stage_specs()):
        try:
            made = _build_stage(name, params, config)
            stencils.extend(made if isinstance(made, tuple) else [made])
        except (StencilpipeError, ValueError, TypeError) as exc:
            raise ConfigError(f"stages.{index}.{name}: {exc}") from None
    try:
        return chain(*stencils, fuse=config.fuse)
    except StencilpipeError as exc:
        raise ConfigError(f"stages: {exc}") from None

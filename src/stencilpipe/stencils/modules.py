"""Load generated source as a real module file, so Numba can cache it on disk.

Numba's ``cache=True`` needs a source file: each specialisation is written to
``<cache dir>/<kernel>_<hash>.py`` (atomically; the hash covers the source and
the runtime helpers it imports) and imported from there. A later process that
generates the same source finds the file and Numba's compiled code beside it;
processes filling the directory at once read and write that code under a file lock
(:mod:`.compile_lock`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from .compile_lock import compile_lock, lock_cache_files

__all__ = ["cache_dir", "compiled_marker", "generator_fingerprint", "load_module", "mark_compiled"]


def cache_dir() -> Path:
    """Where generated modules live: ``$STENCILPIPE_CACHE_DIR`` or the user cache."""
    configured = os.environ.get("STENCILPIPE_CACHE_DIR")
    if configured:
        root = Path(configured)
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stencilpipe"
    path = root / "kernels"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        path = Path(tempfile.gettempdir()) / f"stencilpipe-{os.getuid()}" / "kernels"
        path.mkdir(parents=True, exist_ok=True)
    return path


@cache
def _runtime_fingerprint() -> str:
    """Hash of the helper modules generated code imports, so editing them invalidates caches."""
    import numba

    from . import boundary, order, store

    digest = hashlib.sha256(numba.__version__.encode())
    for module in (boundary, order, store):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_module(name: str, source: str, injected: dict[str, Any] | None = None) -> ModuleType:
    """Write ``source`` to the cache directory (once) and import it.

    Parameters
    ----------
    name : str
        Readable stem of the file name (the kernel's name).
    source : str
        Module source.
    injected : dict, optional
        Objects placed in the module's namespace before it runs, for names the
        source uses but cannot define itself.
    """
    with compile_lock:  # exec compiles; and two threads must not load one module twice
        return _load_module(name, source, injected)


@cache
def generator_fingerprint() -> str:
    """Hash of the code that generates kernels' source (this package's modules) and of
    Numba's version: what a source generated before by another process depended on."""
    import numba

    digest = hashlib.sha256(numba.__version__.encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def compiled_marker(key: str) -> Path:
    """The file that says the module of ``key`` (a digest of what its source is generated
    from) has been compiled on this machine, so Numba's disk cache holds its code."""
    return cache_dir() / "compiled" / key


def mark_compiled(marker: Path) -> None:
    """Create ``marker`` (see :func:`compiled_marker`); a cache that cannot be written only
    loses the shortcut."""
    try:
        marker.parent.mkdir(exist_ok=True)
        marker.touch()
    except OSError:
        pass


def _load_module(name: str, source: str, injected: dict[str, Any] | None) -> ModuleType:
    digest = hashlib.sha256((_runtime_fingerprint() + source).encode()).hexdigest()[:20]
    module_name = f"_stencilpipe_gen_{name}_{digest}"
    if module_name in sys.modules and not injected:
        return sys.modules[module_name]
    path = cache_dir() / f"{module_name}.py"
    if not path.exists() or path.read_text() != source:
        _write_atomically(path, source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(injected or {})
    spec.loader.exec_module(module)
    lock_cache_files(module)
    if not injected:
        sys.modules[module_name] = module
    return module

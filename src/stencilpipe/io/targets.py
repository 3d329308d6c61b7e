"""Where a write goes: parse the target, name each output file, refuse unsafe targets."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from .errors import TargetError
from .stackinfo import StackInfo
from .storage import is_url

__all__ = ["Target", "check_directory", "check_inputs", "output_paths", "parse_target"]

_DEFAULT_PATTERN = "*.tif"
_OME_TIFF = (".ome.tif", ".ome.tiff")


@dataclass(frozen=True)
class Target:
    """A parsed target: a Zarr store, one OME-TIFF file (``pattern`` its name), or a
    directory and a file-name pattern."""

    given: str
    directory: str
    pattern: str
    zarr: bool
    ome: bool
    ome_tiff: bool = False

    def __post_init__(self) -> None:
        # Absolute: the tasks that write may run in workers started in another directory.
        if not self.remote:
            object.__setattr__(self, "directory", os.path.abspath(self.directory))

    @property
    def remote(self) -> bool:
        """Whether the target is a URL (object storage), not a local path."""
        return is_url(self.directory)

    @property
    def extension(self) -> str:
        """The file extension of the outputs, such as ``".tif"``."""
        return os.path.splitext(self.pattern)[1]


def parse_target(target: str | os.PathLike[str]) -> Target:
    """Parse ``"out/"``, ``"out/*.png"``, ``"out/f_{:05d}.tif"``, ``"out.ome.zarr"`` or
    ``"out.ome.tif"`` (one multi-page OME-TIFF file).

    Examples
    --------
    >>> target = parse_target("out/frame_{:05d}.png")
    >>> target.pattern, target.directory == os.path.abspath("out")
    ('frame_{:05d}.png', True)
    >>> parse_target("out/").pattern
    '*.tif'
    """
    given = os.fspath(target)
    if ".." in PurePath(given).parts:
        raise TargetError(
            f"refusing target {given!r}: it contains '..'; pass the directory it means "
            "(for example as an absolute path)"
        )
    path = given.rstrip("/" + os.sep) or given
    if path.endswith(".zarr"):
        return Target(given, path, "", True, path.endswith(".ome.zarr"))
    folder, name = os.path.split(path)
    if name.lower().endswith(_OME_TIFF):
        return Target(given, folder or ".", name, False, True, ome_tiff=True)
    is_pattern = any(c in name for c in "*{") or bool(os.path.splitext(name)[1])
    if given.endswith(("/", os.sep)) or not is_pattern or not is_url(path) and os.path.isdir(path):
        return Target(given, path, _DEFAULT_PATTERN, False, False)
    return Target(given, folder or ".", name, False, False)


def check_directory(target: Target) -> None:
    """Refuse a target whose directory cannot be made because a file is in the way."""
    if target.remote:
        return  # object storage has no directories to be in the way
    existing = target.directory
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise TargetError(f"cannot write to {target.given}: {existing} is a file, not a directory")


def output_paths(target: Target, names: Sequence[str]) -> list[str]:
    """One output path per frame name: ``*`` takes the name, ``{}`` the frame index.

    A pattern without either names a single file, which takes a one-frame array.
    """
    pattern = target.pattern
    if "{" in pattern:
        try:
            files = [pattern.format(i, name=name) for i, name in enumerate(names)]
        except (IndexError, KeyError, ValueError) as exc:
            raise TargetError(
                f"bad pattern {pattern!r} ({exc}): use '{{}}' or '{{:05d}}' for the frame "
                "index, '{name}' or '*' for the frame name"
            ) from None
    elif "*" in pattern:
        files = [pattern.replace("*", name) for name in names]
    elif len(names) == 1:
        files = [pattern]
    else:
        raise TargetError(
            f"{target.given} names one file, but the array has {len(names)} frames; use a "
            f"pattern such as {os.path.join(target.directory, '*' + target.extension)}"
        )
    for name in files:
        if os.path.basename(name) != name or name in (".", "..") or name.startswith("."):
            raise TargetError(
                f"refusing output file name {name!r}: it must stay in the "
                f"target directory and not be hidden"
            )
    twice = [name for name, n in Counter(files).items() if n > 1]
    if twice:
        raise TargetError(
            f"{len(twice)} output names occur more than once (e.g. {twice[0]!r}); "
            "pass distinct names= or use an index pattern such as 'out/frame_{:05d}.tif'"
        )
    return [os.path.join(target.directory, name) for name in files]


def _real(path: str, folders: dict[str, str]) -> str:
    """``os.path.realpath(path)`` with each folder resolved once (in ``folders``): a
    realpath checks every component of every path, 20,000 times over for 20,000 files."""
    if os.path.islink(path):
        return os.path.realpath(path)
    folder, name = os.path.split(path)
    if folder not in folders:
        folders[folder] = os.path.realpath(folder or os.curdir)
    return os.path.join(folders[folder], name)


def check_inputs(target: Target, outputs: Sequence[str], inputs: Sequence[StackInfo]) -> None:
    """Refuse a target that is, or lies inside, a directory of input files or a Zarr input,
    and any output that is an input file."""
    where = os.path.realpath(target.directory)
    folders: dict[str, str] = {}
    for info in inputs:
        sources = {_real(f, folders) for f in info.files}
        if info.kind == "files":
            guarded = {os.path.dirname(f) for f in sources}
        elif info.kind == "zarr":
            guarded = {os.path.realpath(info.files[0])}
        else:
            guarded = set()
        for folder in sorted(guarded):
            if where == folder or where.startswith(folder + os.sep):
                inside = "" if where == folder else "inside "
                raise TargetError(
                    f"refusing to write to {target.given}: it is {inside}{folder}, which "
                    f"holds the input {info.source}; choose a directory outside it"
                )
        for path in outputs:
            if _real(path, folders) in sources:
                raise TargetError(f"refusing to overwrite the input file {path}")

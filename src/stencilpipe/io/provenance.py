"""Provenance records: what made each output, so that a rerun keeps only what is still right.

Every output file (every chunk of a Zarr store) gets a small JSON record in
``<output>/.stencilpipe/records/``, written atomically by the task that wrote the output,
just after it (as Snakemake keeps one metadata file per output in ``.snakemake/``). One
record per output means no file is ever shared by concurrent writer tasks, on any host, and
a run killed half-way leaves a record for each output it finished. A record holds:

- ``key``: a digest of everything that made the output (the stages, their parameters and
  boundary, the kernels' code and constants, the dtypes, the output format, the stencilpipe
  version), computed once on the client;
- ``inputs``: the identity (path, size, ``mtime_ns``) of the input files the output came from;
- ``output``: the output's size and CRC-32 (:func:`digest`);
- ``about``: the same provenance, readable, for people.

A rerun keeps an output only when its record has the same key and inputs and its bytes
still verify (:func:`judge`); otherwise the output is recomputed, as ``stale`` (made by
something else) or ``damaged`` (its bytes changed, or it is truncated).

The checksum finds outputs that a crash left damaged (zero-filled, truncated, half
written), not forged ones: CRC-32 (zlib's, computed by libdeflate through imagecodecs at
several GB/s) does that at a fraction of a disk's speed, where BLAKE2b (about 1 GB/s on
one core) cost a run as much time as its writes. A record that holds another checksum
(BLAKE2b, before this version) is judged stale, so its output is recomputed once.
"""

from __future__ import annotations

import json
import mmap
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

from dask.base import tokenize
from imagecodecs import deflate_crc32

from .. import __version__
from .atomic import BATCH, write_atomic
from .lock import state_dir

__all__ = [
    "DAMAGED",
    "KEPT",
    "NEW",
    "STALE",
    "Provenance",
    "checksum",
    "digest",
    "file_digest",
    "judge",
    "record_of",
    "record_path",
    "records_dir",
    "verifies",
    "write_record",
]

#: What :func:`judge` says of an output.
NEW, KEPT, STALE, DAMAGED = "new", "kept", "stale", "damaged"
_RECORDS = "records"
_PIECE = 1 << 23  # bytes read at a time when verifying an output


@dataclass(frozen=True)
class Provenance:
    """What makes a write's outputs: a digest (``key``) and its readable form (``about``).

    Examples
    --------
    >>> a = Provenance.of({"stages": [["mean", {"size": 3}]]})
    >>> a == Provenance.of({"stages": [["mean", {"size": 3}]]})
    True
    >>> a.key == Provenance.of({"stages": [["mean", {"size": 5}]]}).key
    False
    """

    key: str
    about: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, about: dict[str, Any], *identity: Any) -> Provenance:
        """The provenance described by ``about`` (JSON-able), digested with ``identity``
        (objects Dask tokenizes deterministically, such as stencils and chains)."""
        about = {"stencilpipe": __version__, **about}
        return cls(tokenize(json.dumps(about, sort_keys=True, default=str), *identity), about)

    def with_format(self, extension: str, compression: str | None) -> Provenance:
        """This provenance, written as ``extension`` files with ``compression``."""
        about = {**self.about, "format": extension, "compression": compression}
        return Provenance(tokenize(self.key, extension, compression), about)


#: The name of the checksum in records (the field of ``output`` that holds it).
CHECKSUM = "crc32"


def checksum(data: bytes | memoryview) -> str:
    """CRC-32 of ``data`` (zlib's: ``zlib.crc32`` gives the same number), as 8 hex digits.

    Examples
    --------
    >>> checksum(b"hello")
    '3610a686'
    """
    return f"{deflate_crc32(cast(bytes, data)):08x}"  # any buffer (the stubs say bytes)


def digest(data: bytes | memoryview) -> dict[str, Any]:
    """What a record holds of an output whose bytes are ``data``: its size and checksum."""
    return {"size": len(data), CHECKSUM: checksum(data)}


def verifies(expected: Any, size: int, crc: Callable[[], str]) -> bool | None:
    """Whether an output of ``size`` bytes matches ``expected`` (a record's ``output``);
    ``crc()`` computes its checksum, only when the size matches. None: the record holds
    no checksum of this kind (an older version's), so it says nothing of the output."""
    if not isinstance(expected, dict) or CHECKSUM not in expected:
        return None
    return expected.get("size") == size and expected[CHECKSUM] == crc()


def file_digest(fh: BinaryIO) -> dict[str, Any]:
    """:func:`digest` of the file open as ``fh`` (readable, its writes flushed): what a
    writer that encodes straight into its file records, instead of encoding into memory
    first (two more frame-sized copies, into fresh pages).

    A file of :data:`_MAPPED_SIZES` is mapped rather than read. Only a file this run has
    just written is: one truncated by another process while mapped would kill this one
    (SIGBUS), so outputs found on disk are verified by reading (:func:`_file_checksum`).
    """
    size = os.fstat(fh.fileno()).st_size
    if size in _MAPPED_SIZES and hasattr(mmap, "MAP_SHARED"):
        flags, prot = mmap.MAP_SHARED | _POPULATE, mmap.PROT_READ
        with mmap.mmap(fh.fileno(), size, flags=flags, prot=prot) as mapped:
            return {"size": size, CHECKSUM: f"{deflate_crc32(mapped):08x}"}
    fh.seek(0)
    size, crc = _crc_of(fh)
    return {"size": size, CHECKSUM: crc}


#: Each thread's buffer that :func:`_crc_of` reads into, kept from file to file.
_BUFFER = threading.local()

#: Sizes of the files :func:`file_digest` maps instead of reading: mapped (and its pages
#: populated at once), a 4 MiB file in the page cache takes 0.25 ms against 0.43 ms read
#: into a buffer; small files read faster, and huge ones are not mapped whole.
_MAPPED_SIZES = range(1 << 20, 1 << 28)
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux only


def _crc_of(fh: BinaryIO) -> tuple[int, str]:
    """Size and CRC-32 of what is left to read of ``fh``, read in pieces into a buffer
    this thread reuses."""
    buffer = getattr(_BUFFER, "view", None)
    if buffer is None:
        buffer = _BUFFER.view = memoryview(bytearray(_PIECE))
    size = value = 0
    while count := fh.readinto(buffer):  # type: ignore[attr-defined]
        value = deflate_crc32(cast(bytes, buffer[:count]), value)
        size += count
    return size, f"{value:08x}"


def _file_checksum(path: str) -> str:
    with open(path, "rb", buffering=0) as fh:
        return _crc_of(fh)[1]


def records_dir(directory: str | os.PathLike[str]) -> Path:
    """The folder of the provenance records of the output ``directory``."""
    return state_dir(directory) / _RECORDS


def record_path(directory: str | os.PathLike[str], name: str) -> Path:
    """The record of the output ``name`` (a file name, or a Zarr chunk key) of ``directory``."""
    return records_dir(directory) / (name.replace("/", "%") + ".json")


def write_record(
    directory: str,
    name: str,
    output: Mapping[str, Any],
    *,
    provenance: Provenance,
    inputs: Sequence[Sequence[Any]],
    run: str,
    durability: str = BATCH,
) -> None:
    """Record that output ``name`` of ``directory`` is ``output`` (its :func:`digest` or
    :func:`file_digest`) and what made it.

    ``durability`` is :func:`~stencilpipe.io.atomic.write_atomic`'s, as for the output.
    """
    path = record_path(directory, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = record_of(output, provenance, inputs)
    write_atomic(path, lambda fh: fh.write(text), run=run, durability=durability)


def record_of(output: Mapping[str, Any], provenance: Provenance, inputs: Sequence[Any]) -> bytes:
    """The record (JSON) of an output whose :func:`digest` is ``output``, made by
    ``provenance`` from ``inputs`` (``[path, size, mtime_ns]`` each)."""
    record = {
        "key": provenance.key,
        "inputs": [list(each) for each in inputs],
        "output": dict(output),
        "about": provenance.about,
    }
    return json.dumps(record, default=str).encode()


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text())
        return record if isinstance(record, dict) else None
    except (OSError, ValueError):
        return None


def _judge_one(
    output: str,
    record: Path,
    key: str,
    inputs: Sequence[Sequence[Any]],
    intact: Callable[[str], bool],
) -> str:
    try:
        size = os.stat(output).st_size
    except FileNotFoundError:
        return NEW
    found = _read_record(record) or {}
    if found and (found.get("key") != key or found.get("inputs") != [list(i) for i in inputs]):
        return STALE
    holds = verifies(found.get("output"), size, lambda: _file_checksum(output))
    if holds is None:  # no record (killed before it), or one of an older version
        return STALE if intact(output) else DAMAGED
    return KEPT if holds else DAMAGED


def judge(
    outputs: Sequence[str],
    records: Sequence[Path],
    provenance: Provenance,
    inputs: Sequence[Sequence[Sequence[Any]]],
    *,
    intact: Callable[[str], bool] = lambda path: True,
) -> list[str]:
    """Say of each output whether it is :data:`NEW` (missing), :data:`KEPT`, :data:`STALE`
    or :data:`DAMAGED`, given its record, this write's provenance and its inputs.

    ``intact(path)`` tells a damaged output without a record (truncated by an older crash,
    or by a copy) from a stale one. The outputs are read (to verify their checksums) on a
    few threads: reading and the checksum release the GIL. Missing outputs (all of them, on
    a first run) are told apart first, without a thread.
    """
    verdicts = [NEW] * len(outputs)
    present = [i for i, output in enumerate(outputs) if os.path.exists(output)]
    if present:
        with ThreadPoolExecutor(min(8, os.cpu_count() or 1, len(present))) as pool:
            found = pool.map(
                lambda i: _judge_one(outputs[i], records[i], provenance.key, inputs[i], intact),
                present,
            )
            for i, verdict in zip(present, found, strict=True):
                verdicts[i] = verdict
    return verdicts

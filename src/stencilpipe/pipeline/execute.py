"""Compute a planned write on a cluster, block by block, and end clearly on run-level faults.

A block of frames that fails (a kernel error, an unreadable input) fails only its own
outputs; the rest go on. Two faults end the whole run instead, in one line, with every
finished output kept for a rerun to resume from:

- the output's file system is full (:class:`~stencilpipe.io.errors.NoSpaceLeft` from any
  block): the blocks not yet started are cancelled;
- no worker is left (every worker and its nanny died) for ``cluster.timeout`` seconds.

Once every block is done, each worker flushes the output's file system (one flush per host
instead of an fsync per file: :mod:`stencilpipe.io.atomic`), unless the write's durability is
``none``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from ..errors import ClusterError
from ..io import PendingWrite
from ..io.atomic import BATCH, NONE, flush
from ..io.errors import NoSpaceLeft

__all__ = ["NoWorkersLeft", "Outcome", "execute", "execute_here", "progress_bar"]

#: Seconds between two looks at the cluster while blocks are running.
POLL = 0.5


class NoWorkersLeft(ClusterError):
    """Every worker of the cluster is gone, and none came back in time."""


@dataclass
class Outcome:
    """What computing a write gave: its report, and each failed block's files and error."""

    report: Any
    failed: list[tuple[tuple[str, ...], str]]


def progress_bar(console: Console) -> Progress:
    """The bar that :func:`execute` advances, printed on ``console``."""
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


class _Blocks:
    """The blocks of a write being computed: their results, failures and progress."""

    def __init__(self, write: Any, output: str, frames: int, bar: Progress | None) -> None:
        self.write, self.output, self.frames, self.bar = write, output, frames, bar
        self.files = isinstance(write, PendingWrite)
        if self.files:
            write.discard_outdated()
        self.delayed = write.blocks() if self.files else [write]
        self.block_files: Sequence[tuple[str, ...]] = write.block_files if self.files else [()]
        self.results: dict[int, Any] = {}
        self.failed: list[tuple[tuple[str, ...], str]] = []
        self.task = bar.add_task("frames", total=frames) if bar is not None else None
        if bar is not None and self.files:
            bar.update(self.task, completed=frames - len(write.files))

    def collect(self, index: int, result: Callable[[], Any]) -> None:
        """Keep block ``index``'s ``result()``, or its failure; NoSpaceLeft ends the write."""
        try:
            self.results[index] = result()
        except NoSpaceLeft:
            self.no_space()
        except Exception as exc:  # noqa: BLE001 - this block's frames failed, the rest go on
            self.failed.append((self.block_files[index], one_line(exc)))
        if self.bar is not None:
            self.bar.advance(self.task, len(self.block_files[index]) if self.files else self.frames)

    def no_space(self) -> None:
        """Raise NoSpaceLeft for the output, saying how many outputs were written."""
        written = sum(len(self.block_files[i]) for i in self.results) + (
            self.frames - len(self.write.files) if self.files else 0
        )
        raise NoSpaceLeft(
            self.output,
            f" ({written} of {self.frames} outputs written; free space and rerun to resume)",
        ) from None

    @property
    def directory(self) -> str:
        """Where the write goes: the files' directory, else the output (a store, a file)."""
        return self.write.directory if self.files else self.output

    def outcome(self) -> Outcome:
        if not self.files:
            return Outcome(self.results.get(0), self.failed)
        done = [self.results.get(i) for i in range(len(self.delayed))]
        return Outcome(self.write.partial_report(done), self.failed)


def execute(
    client: Any,
    write: PendingWrite | Any,
    *,
    output: str,
    frames: int,
    timeout: float,
    bar: Progress | None = None,
    durability: str = BATCH,
) -> Outcome:
    """Compute ``write`` (a :class:`~stencilpipe.io.PendingWrite`, or a Zarr store's delayed
    report, written as a whole) on ``client``; flush what it wrote as ``durability``
    (:data:`~stencilpipe.io.atomic.DURABILITY`) asks.

    Raises
    ------
    NoSpaceLeft
        When the output's file system is full: ``N of M outputs written``.
    NoWorkersLeft
        When the cluster had workers and has had none for ``timeout`` seconds.
    """
    blocks = _Blocks(write, output, frames, bar)
    futures = client.compute(blocks.delayed)
    watch = _Watch(client, timeout)
    pending = {future: index for index, future in enumerate(futures)}
    while pending:
        done = _wait_some(list(pending))
        for future in done:
            try:
                blocks.collect(pending.pop(future), future.result)
            except NoSpaceLeft:
                client.cancel(list(pending))
                raise
        if not done:
            watch.check(client, pending)
    if futures:
        if blocks.files:  # every block is done: the temp files of workers lost mid-write go
            client.compute(write.finish()).result()
        if durability != NONE:  # one flush per host that wrote, not an fsync per file
            client.run(_flush, blocks.directory)
    return blocks.outcome()


def execute_here(
    write: PendingWrite | Any,
    *,
    output: str,
    frames: int,
    threads: int,
    bar: Progress | None = None,
    durability: str = BATCH,
) -> Outcome:
    """Compute ``write`` as :func:`execute` does (``durability`` as there), on ``threads``
    threads of this process
    (Dask's threaded scheduler): no cluster to start, no task or frame to send anywhere.

    The blocks run as one graph; when one fails, those not finished then run again one by
    one, so that each failure is its own block's.

    Raises
    ------
    NoSpaceLeft
        When the output's file system is full: ``N of M outputs written``.
    """
    import dask
    from dask.callbacks import Callback

    blocks = _Blocks(write, output, frames, bar)
    index = {block.key: i for i, block in enumerate(blocks.delayed)}

    def finished(key: Any, result: Any, *_: Any) -> None:
        if key in index:
            blocks.collect(index[key], lambda: result)

    # The pool is this call's own: a failure returns only once the tasks running are done.
    # Given as the scheduler, it also spares Dask its look for a distributed Client (an
    # import of distributed that a run on threads does not need).
    with ThreadPoolExecutor(threads) as pool:
        try:
            with Callback(posttask=finished):
                dask.compute(*blocks.delayed, scheduler=pool)
        except NoSpaceLeft:
            blocks.no_space()
        except Exception:  # noqa: BLE001 - a block failed: the rest, one at a time
            for i, block in enumerate(blocks.delayed):
                if i not in blocks.results:
                    again = functools.partial(block.compute, scheduler=pool)
                    blocks.collect(i, again)
    if blocks.delayed:
        if blocks.files:  # the temp files of failed blocks go, then one flush (finish's)
            write.finish().compute(scheduler=dask.get)
        elif durability != NONE:
            _flush(blocks.directory)
    return blocks.outcome()


def _flush(output: str) -> None:
    """Flush what this host wrote into ``output`` (a directory, a Zarr store or a file such
    as an OME-TIFF), if it sees it."""
    directory = output if os.path.isdir(output) else os.path.dirname(output)
    if os.path.isdir(directory):
        flush(directory)


def _wait_some(futures: list[Any]) -> list[Any]:
    """The futures that finish within :data:`POLL` seconds (maybe none)."""
    from distributed import wait

    try:
        return list(wait(futures, timeout=POLL, return_when="FIRST_COMPLETED").done)
    except TimeoutError:
        return []


class _Watch:
    """Tells when a cluster that had workers has had none for ``timeout`` seconds."""

    def __init__(self, client: Any, timeout: float) -> None:
        self.timeout = timeout
        self.had_workers = bool(client.nthreads())
        self.empty_since: float | None = None

    def check(self, client: Any, pending: dict[Any, int]) -> None:
        if client.nthreads():
            self.had_workers, self.empty_since = True, None
            return
        if not self.had_workers:  # a batch system may start the workers minutes from now
            return
        now = time.monotonic()
        self.empty_since = self.empty_since or now
        if now - self.empty_since >= self.timeout:
            client.cancel(list(pending))
            raise NoWorkersLeft(
                f"no workers left on {client.scheduler.address}; finished outputs are kept, "
                "rerun to resume"
            )


def remove_leftovers(write: Any, *, durable: bool = True) -> None:
    """Remove, from this machine, the temporary files that ``write`` left (workers killed
    mid-write): the last clean-up of a run that ended early.

    Unless ``durable``, the outputs finished are not flushed to the disk: an interrupted run
    ends at once, instead of waiting for a flush of the whole file system (everything any
    process wrote to it). A crash before the operating system writes them back can then
    lose them; a rerun finds them by their checksums and writes them again.
    """
    if isinstance(write, PendingWrite) and write.status is not None:
        if os.path.isdir(write.directory):
            import dask

            write.finish(None if durable else NONE).compute(scheduler=dask.get)

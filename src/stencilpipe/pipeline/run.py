"""Plan a pipeline into one Dask graph, run it on a cluster, and summarise the run."""

from __future__ import annotations

import contextlib
import contextvars
import gc
import inspect
import logging
import math
import os
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from dask.utils import parse_bytes
from rich.console import Console
from rich.table import Table

from ..backends import choose_backend, to_backend
from ..cluster import connect, dashboard_link
from ..cluster.connect import left_to_us, scheduler_address
from ..errors import ConfigError, ImageStackError, KernelError
from ..io import PendingWrite, TargetError, WriteReport, imread, plan_write
from ..io.lock import Locks
from ..io.provenance import Provenance
from ..io.read import reopen
from ..io.stackinfo import inputs_of
from ..io.targets import parse_target
from ..io.write import LockOutput
from ..stencils import Chain
from .config import PipelineConfig
from .execute import Outcome, execute, execute_here, progress_bar, remove_leftovers
from .sizing import Estimate, estimate, frames_per_chunk
from .stages import build_chain

__all__ = ["Failure", "Plan", "RunSummary", "plan", "provenance", "run"]

#: One line per phase of a run, with its timing (the CLI's ``--log-file`` writes them).
log = logging.getLogger("stencilpipe.run")


#: Shows the name of each phase as it starts on the progress display (None: its frames
#: start, the phase line goes), if there is one.
_SHOW_PHASE: contextvars.ContextVar[Callable[[str | None], None] | None] = contextvars.ContextVar(
    "show_phase", default=None
)


def _show(name: str | None) -> None:
    show = _SHOW_PHASE.get()
    if show is not None:
        show(name)


@contextlib.contextmanager
def _phase(name: str) -> Iterator[None]:
    log.info("%s: start", name)
    _show(name)
    start = time.perf_counter()
    try:
        yield
    finally:
        log.info("%s: end (%.3f s)", name, time.perf_counter() - start)


@dataclass(frozen=True)
class Plan:
    """The lazy pieces of a run: input stack, its description, the backend, result and write."""

    config: PipelineConfig
    backend: str
    stack: Any
    info: Any
    result: Any
    write: Any
    halo: tuple[tuple[int, int], ...] = ()
    workers: Workers | None = None

    def report(self) -> Any:
        """The whole write as one delayed :class:`~stencilpipe.io.WriteReport`."""
        return self.write.report() if isinstance(self.write, PendingWrite) else self.write

    def describe(self) -> str:
        """What would run, for ``--dry-run``."""
        stages = " -> ".join(f"{name}({params})" for name, params in self.config.stage_specs())
        return (
            f"input:   {self.config.input}: {self.info.frames} frames "
            f"{tuple(self.stack.shape)} {self.stack.dtype}, chunks {self.stack.chunksize}\n"
            f"stages:  {stages} (on {self.backend}, {'fused' if self.config.fuse else 'unfused'})\n"
            f"output:  {self.config.output} "
            f"({'resume' if self.config.resume else 'overwrite'})\n"
            f"graph:   {len(self.report().__dask_graph__())} tasks"
        )

    def estimate(self) -> Estimate:
        """Chunks, tasks, halo overhead and peak memory per worker (``--dry-run``)."""
        workers = self.workers or Workers(None, None)
        return estimate(
            self.stack,
            self.result,
            len(self.report().__dask_graph__()),
            self.halo,
            threads_per_worker=workers.threads,
            memory_limit=workers.memory_limit,
        )


@dataclass(frozen=True)
class Workers:
    """What ``chunks: auto`` sizes chunks for: the smallest memory limit of a worker (None:
    unknown or unlimited), the threads of a worker (tasks it runs at once) and, for a
    cluster that runs already, the threads of all its workers."""

    memory_limit: int | None
    threads: int | None
    total_threads: int | None = None

    @classmethod
    def expected(
        cls, config: PipelineConfig, frames: int, nbytes: int, *, ask: bool = True
    ) -> Workers:
        """The workers a run of ``frames`` frames (``nbytes`` bytes of input) of ``config``
        will have, as far as the config tells: this process (a small run,
        :func:`in_process`), the embedded cluster's share of this machine's memory
        (LocalCluster's ``memory_limit='auto'``), a batch job's ``memory`` over its
        ``processes``; an existing scheduler's workers as they are now when ``ask``
        (connecting within ``cluster.timeout``), else unknown.

        Raises
        ------
        ClusterError
            When ``ask`` and the scheduler cannot be reached.
        """
        cluster = config.cluster
        if cluster.jobqueue:
            processes = int(cluster.job.get("processes", 1))
            memory = cluster.job.get("memory")
            limit = parse_bytes(memory) // processes if memory else None
            return cls(limit, max(1, int(cluster.job.get("cores", 1)) // processes))
        if scheduler_address(cluster):
            if not ask:
                return cls(None, None)
            with connect(cluster) as client:
                return cls.of_client(client)
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if in_process(config, frames, nbytes, None):
            return cls(total, planned_threads(config))
        return cls(total // cluster.n_workers, cluster.threads_per_worker)

    def chunk_like(self, planned: Workers | None, threads: int, config: PipelineConfig) -> bool:
        """Whether these workers, with ``threads`` threads in all, get the chunks that
        ``chunks: auto`` made for the ``planned`` ones (what :meth:`expected` said of
        ``config``'s cluster): the same threads in all, and per worker the same memory
        limit and threads."""
        planned = planned or Workers(None, None)
        each = (self.memory_limit, self.threads) == (planned.memory_limit, planned.threads)
        return each and threads == (planned.total_threads or planned_threads(config))

    @classmethod
    def of_client(cls, client: Any) -> Workers:
        """The workers a connected cluster has now."""
        workers = list(client.scheduler_info()["workers"].values())
        if not workers:
            return cls(None, None)
        limits = [w["memory_limit"] for w in workers if w.get("memory_limit")]  # 0: none
        threads = [w.get("nthreads", 1) for w in workers]
        return cls(min(limits, default=None), max(threads), sum(threads))


#: Chunks per worker thread that ``chunks: auto`` aims for, so that the last chunks do not
#: leave most workers idle and a bad frame fails few others with it. 8, not 4: 200 frames
#: of 4 MiB on 2 threads ran in 1.8 s instead of 2.4 s (smaller blocks to read into, fill
#: and free; the last chunk's wait shorter).
CHUNKS_PER_THREAD = 8

#: The first chunk of each thread holds 1/FIRST_CHUNK_SHARE of the frames of the others
#: (file outputs), so that a run of many frames finishes its first chunks, and moves its
#: bar of frames, early: 20,000 frames of 64x64 on 2 threads come in chunks of 1,250, of
#: which the first took seconds to finish.
FIRST_CHUNK_SHARE = 8


def _auto_frames(stack: Any, out_dtype: Any, threads: int, workers: Workers) -> int | None:
    """Frames per chunk for ``chunks: auto`` where the reader's own choice will not do:
    fewer, so that every one of ``threads`` gets :data:`CHUNKS_PER_THREAD` chunks (small
    stacks), and so that a worker's tasks fit its memory (:mod:`.sizing`); None to keep
    the reader's (see :func:`_first_chunks_small` for the first chunks)."""
    now = max(stack.chunks[0])
    per_chunk = now
    if stack.numblocks[0] < CHUNKS_PER_THREAD * threads:
        per_chunk = max(1, -(-stack.shape[0] // (CHUNKS_PER_THREAD * threads)))
    frame = math.prod(stack.shape[1:])
    fits = frames_per_chunk(
        frame * stack.dtype.itemsize,
        frame * np.dtype(out_dtype).itemsize,
        workers.memory_limit,
        workers.threads or 1,
    )
    per_chunk = min(per_chunk, fits or per_chunk)
    return per_chunk if per_chunk < now else None


def _first_chunks_small(frames: int, per_chunk: int, threads: int) -> tuple[int, ...]:
    """Chunk sizes along the frames: ``per_chunk`` frames each, but for the first chunk of
    each of ``threads``, of 1/:data:`FIRST_CHUNK_SHARE` of that.

    Examples
    --------
    >>> _first_chunks_small(20_000, 1250, 2)[:4], len(_first_chunks_small(20_000, 1250, 2))
    ((156, 156, 1250, 1250), 18)
    >>> _first_chunks_small(10, 4, 2)
    (4, 4, 2)
    """
    first = per_chunk // FIRST_CHUNK_SHARE
    head = [first] * min(threads, frames // max(first, 1)) if first else []
    left = frames - sum(head)
    return (
        *head,
        *[per_chunk] * (left // per_chunk),
        *([left % per_chunk] if left % per_chunk else []),
    )


def _writes_files(output: str) -> bool:
    """Whether ``output`` is a target of one file per frame (not a store, not one file)."""
    try:
        target = parse_target(output)
    except TargetError:  # plan_write says why
        return False
    return not (target.zarr or target.ome_tiff)


def planned_threads(config: PipelineConfig) -> int:
    """Worker threads the configured cluster is expected to have (for ``chunks: auto``)."""
    cluster = config.cluster
    if cluster.jobqueue:
        jobs = cluster.adapt.maximum if cluster.adapt else cluster.jobs
        return jobs * int(cluster.job.get("cores", 1))
    return cluster.n_workers * cluster.threads_per_worker


def provenance(
    config: PipelineConfig, pipeline: Chain, info: Any, result: Any, backend: str
) -> Provenance:
    """What makes the outputs of ``config``: the stages with their parameters and boundary,
    the kernels (code and constants, through the chain's Dask token), the dtypes, the
    backend. The chunking and the inputs' identity are not part of it (the chunks do not
    change the values; the inputs are recorded per output)."""
    kernels = {}
    for (name, _), stage in zip(config.stage_specs(), pipeline.stages):
        if name == "stencil":
            with contextlib.suppress(OSError, TypeError):
                kernels[stage.name] = inspect.getsource(stage.func)
    about = {
        "stages": config.stage_specs(),
        "boundary": config.boundary,
        "kernels": kernels,
        "dtype": {"input": str(info.dtype), "output": str(result.dtype)},
        "frame_shape": list(info.shape[1:]),
        "backend": backend,
    }
    return Provenance.of(about, pipeline)


def plan(
    config: PipelineConfig,
    *,
    only: Collection[str] | None = None,
    threads: int | None = None,
    lock: LockOutput | None = None,
    workers: Workers | None = None,
    ask_workers: bool = True,
) -> Plan:
    """Build the whole run as one lazy graph; reads headers only, computes nothing.

    ``only`` limits the write to these output files (the others count as kept);
    ``threads`` is the cluster's number of worker threads and ``workers`` what one worker
    has (default: what the config says, :meth:`Workers.expected`, asking an existing
    scheduler when ``ask_workers``), for ``chunks: auto``; ``lock`` (see
    :func:`~stencilpipe.io.plan_write`) locks the output once it is validated.
    """
    # An int is frames per chunk (whole frames): chunked so when read, so that a bad
    # frame fails only its own chunk.
    chunks = {0: config.chunks} if isinstance(config.chunks, int) else config.chunks
    with _phase(f"read headers of {config.input}"):
        stack = imread(
            config.input,
            chunks=None if chunks == "auto" else chunks,
            skip_bad=config.skip_bad,
            storage_options=config.storage_options,
        )
    (info,) = inputs_of(stack)
    with _phase("build stages"):
        pipeline = build_chain(config)
        try:  # a 3-D stage needs a z axis: it must not filter across time or channels
            info.filtered_axes(pipeline.ndim)
        except ImageStackError as exc:
            raise ConfigError(f"stages: {exc}") from None
    for stage in pipeline.stages:
        log.info("stage %s: halo %s, boundary %s", stage.name, stage.halo, stage.boundary)
    with _phase("compile stages"):
        # A kernel that does not compile fails here, in one line, not in every task; and the
        # workers on this machine then load the compiled code from the disk cache.
        dtype = info.dtype
        for index, ((name, _), stage) in enumerate(zip(config.stage_specs(), pipeline.stages)):
            try:
                dtype = stage.precompile(dtype)
            except KernelError as exc:
                raise ConfigError(f"stages.{index}.{name}: {exc}") from None
    workers = workers or Workers.expected(config, stack.shape[0], stack.nbytes, ask=ask_workers)
    if chunks == "auto":
        threads = threads or workers.total_threads or planned_threads(config)
        per_chunk = _auto_frames(stack, dtype, threads, workers)
        if per_chunk is not None:
            log.info("chunks: %d frames each", per_chunk)
            sizes: int | tuple[int, ...] = per_chunk
            if _writes_files(config.output):  # a Zarr store needs chunks of one size
                sizes = _first_chunks_small(stack.shape[0], per_chunk, threads)
            stack = reopen(stack, {0: sizes})
            (info,) = inputs_of(stack)
    backend = choose_backend(config.backend, info.frame_shape[:2])
    # One move to the backend after reading, one back before writing, whatever the stages.
    # A colour stack's channels are a batch axis: the reader marks them (stencils.channels).
    on_backend = pipeline(to_backend(stack, backend))
    result = to_backend(on_backend, "numpy") if backend != "numpy" else on_backend
    write = plan_write(
        result,
        config.output,
        overwrite=not config.resume,
        compression=config.compression,
        only=only,
        provenance=provenance(config, pipeline, info, result, backend),
        lock=lock,
        levels=config.levels,
        zarr_format=config.zarr_format,
        shards=config.zarr_shards,
        storage_options=config.storage_options,
        durability=config.durability,
    )
    return Plan(config, backend, stack, info, result, write, pipeline.halo, workers)


@dataclass(frozen=True)
class Failure:
    """An output that was not written, and why (``Type: message``)."""

    file: str
    error: str

    def __str__(self) -> str:
        return f"{os.path.basename(self.file) or self.file}: {self.error}"


@dataclass
class RunSummary:
    """What a run did, for people (``table()``), programs (``as_dict()``) and exit codes
    (``failures``).

    ``written`` counts every frame written, ``recomputed_stale`` and ``recomputed_damaged``
    among them those whose output existed but was made by another computation (or from
    other inputs), or did not verify; ``kept`` the frames whose output was kept.
    """

    frames: int
    bytes_in: int
    bytes_out: int
    seconds: float
    output: str
    written: int
    kept: int
    dashboard: str | None
    recomputed_stale: int = 0
    recomputed_damaged: int = 0
    failures: list[Failure] = field(default_factory=list)
    workers_lost: int = 0

    @property
    def skipped(self) -> int:
        """Frames kept by resume (the name of older versions)."""
        return self.kept

    @property
    def frames_per_second(self) -> float:
        return self.written / self.seconds if self.seconds else 0.0

    @property
    def megabytes_per_second(self) -> float:
        return (self.bytes_in + self.bytes_out) / 1e6 / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-serialisable data (what ``--json`` prints)."""
        return {
            "frames": self.frames,
            "written": self.written,
            "kept": self.kept,
            "recomputed": {"stale": self.recomputed_stale, "damaged": self.recomputed_damaged},
            "failures": [{"file": f.file, "error": f.error} for f in self.failures],
            "output": self.output,
            "seconds": self.seconds,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "workers_lost": self.workers_lost,
            "dashboard": self.dashboard,
        }

    def _throughput(self) -> str:
        """Frames and bytes per second of what was written; a run that wrote nothing has
        none to show (every output kept by resume, or every frame failed)."""
        if self.written:
            return f"{self.frames_per_second:.1f} frames/s, {self.megabytes_per_second:.1f} MB/s"
        if self.kept == self.frames:
            return f"nothing to compute: all {self.frames} outputs kept by resume"
        return "nothing written"

    def table(self) -> Table:
        table = Table(title="stencilpipe run", show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column()
        recomputed = ((self.recomputed_stale, "stale"), (self.recomputed_damaged, "damaged"))
        again = [f"{count} as {kind}" for count, kind in recomputed if count]
        rows = [
            (
                "frames",
                f"{self.frames} ({self.written} written, {self.kept} kept by resume)"
                + (f"; recomputed {', '.join(again)}" if again else ""),
            ),
            ("bytes in / out", f"{self.bytes_in / 1e6:.1f} MB / {self.bytes_out / 1e6:.1f} MB"),
            ("time", f"{self.seconds:.2f} s"),
            ("throughput", self._throughput()),
            ("output", self.output),
            (
                "workers lost",
                f"{self.workers_lost} (their tasks were recomputed)"
                if self.workers_lost
                else "none",
            ),
            ("failures", f"{len(self.failures)} (listed below)" if self.failures else "none"),
        ]
        for name, value in rows:
            table.add_row(name, value)
        return table


def _check_report_path(report: str, work: Plan) -> None:
    inputs = {os.path.realpath(f) for f in work.info.files}
    folders = {os.path.dirname(f) for f in inputs} if work.info.kind == "files" else set()
    where = os.path.realpath(report)
    if where in inputs or os.path.dirname(where) in folders:
        raise TargetError(
            f"refusing to write the report {report} over or among the input files; "
            "choose a path outside the input directory"
        )


def run(
    config: PipelineConfig,
    *,
    console: Console | None = None,
    report: str | None = None,
    progress: bool = True,
    wait: bool = False,
) -> RunSummary:
    """Run ``config`` on its cluster, with the dashboard link, a progress bar and a summary.

    Parameters
    ----------
    config : PipelineConfig
        The validated configuration.
    console : rich.console.Console, optional
        Where all of the run's human output goes (default: stdout).
    report : str, optional
        Path of an HTML Dask performance report to save.
    progress : bool
        Show a progress bar.
    wait : bool
        When another run holds the output's lock, wait for it to end instead of raising
        :class:`~stencilpipe.io.errors.OutputBusy`.

    Raises
    ------
    OutputBusy
        Another run is writing to the output (and ``wait`` is False).
    NoSpaceLeft
        The output's file system filled up; the outputs finished are kept.
    NoWorkersLeft
        Every worker was lost for ``cluster.timeout`` seconds; the outputs finished are kept.
    """
    console = console or Console()
    bar = progress_bar(console) if progress else None
    with Locks(wait=wait) as locks, bar or contextlib.nullcontext(), _phases_on(bar):
        # An existing scheduler's workers are asked once connected (_compute), not here.
        with _collector_paused():
            work = plan(config, lock=locks.take, ask_workers=False)
        if report:
            _check_report_path(report, work)
        try:
            summary = _compute(config, work, locks, console, report, bar)
        except BaseException as exc:  # a run that ends early: a finished one cleaned up already
            # Ctrl-C asks to stop now: no wait for a flush of the whole file system.
            remove_leftovers(work.write, durable=not isinstance(exc, KeyboardInterrupt))
            raise
    log.info(
        "summary: %d written, %d kept, %d recomputed as stale, %d as damaged, %d failed, "
        "%.2f s, output %s",
        summary.written,
        summary.kept,
        summary.recomputed_stale,
        summary.recomputed_damaged,
        len(summary.failures),
        summary.seconds,
        summary.output,
    )
    console.print(summary.table())
    for failure in summary.failures:
        console.print(f"failed: {failure}", soft_wrap=True, markup=False, highlight=False)
    return summary


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (the CLI pauses it for its imports too).

    Planning makes objects that stay for the whole run (a header per file, the kernels and
    the registries Numba loads with them, the graph), and the collector walks every object
    each time it runs: 20,000 files, from process start to the bar of frames, 2.4-2.6 s
    with it and 1.9-2.1 s without. What the block leaves is collected once it runs again.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


#: Up to these frames, or these bytes of input whatever its frames, a run whose cluster is
#: left to stencilpipe (``left_to_us``) computes on threads of its own process: a cluster's
#: start, stop and task traffic cost more than its processes win below them. Measured by
#: ``benchmarks/startup.py`` on 2 cores: 256x256 frames paid on the cluster from 2,000
#: frames (128 MiB) on; 64x64 frames never did up to 20,000 (80 MiB: 36 s on threads, 49.5 s
#: on the cluster); 2048x2048 frames ran faster on threads at 200 and 1,000 frames.
IN_PROCESS_FRAMES = 2000
IN_PROCESS_BYTES = 128 * 2**20


def in_process(config: PipelineConfig, frames: int, nbytes: int, report: str | None) -> bool:
    """Whether a run of ``frames`` frames, ``nbytes`` bytes of input, computes on threads
    of this process, with no cluster (and so no dashboard or performance report)."""
    small = frames <= IN_PROCESS_FRAMES or nbytes <= IN_PROCESS_BYTES
    return report is None and small and left_to_us(config.cluster)


@contextlib.contextmanager
def _phases_on(bar: Any) -> Iterator[None]:
    """Show each phase of the run before its frames (reading headers, loading kernels,
    starting the cluster) on the progress display ``bar``, from the run's start: a run of
    20,000 files spends seconds there before its first frame."""
    if bar is None:
        yield
        return
    task = bar.add_task("start", total=None)

    def show(name: str | None) -> None:
        if name is None:
            bar.update(task, visible=False)
        else:
            bar.update(task, description=name, visible=True)

    shown = _SHOW_PHASE.set(show)
    try:
        yield
    finally:
        _SHOW_PHASE.reset(shown)


def _compute(
    config: PipelineConfig,
    work: Plan,
    locks: Locks,
    console: Console,
    report: str | None,
    bar: Any,
) -> RunSummary:
    """Compute the planned ``work`` on this process's threads or the configured cluster,
    advancing ``bar`` (a progress display, or None); summarise what it did."""
    if in_process(config, work.info.frames, work.info.nbytes, report):
        threads = planned_threads(config)
        log.info("cluster: none, %d threads of this process", threads)
        console.print(f"[bold]threads:[/bold] {threads} in this process (a small run: no cluster)")
        start = time.perf_counter()
        outcome = _computed(_Compute(None, config, work.info.frames, bar), work, locks, console)
        return _summary(config, work, outcome, time.perf_counter() - start, None, 0)

    from distributed import performance_report  # sets up distributed's logging, adjusted below

    cluster = config.cluster
    # The embedded cluster silences distributed's log lines only while it runs: those of
    # workers in this process (processes: false) could still come as it stops.
    logging.getLogger("distributed").setLevel(cluster.log_level.upper())
    log.info("cluster: %s", cluster.address or cluster.jobqueue or "embedded LocalCluster")
    _show("connect to the cluster" if cluster.address else "start the cluster")
    with connect(config.cluster) as client:
        log.info("dashboard: %s", client.dashboard_link)
        threads = sum(client.nthreads().values())
        workers = Workers.of_client(client)
        if config.chunks == "auto" and not workers.chunk_like(work.workers, threads, config):
            # Chunks for the workers there are: balanced over their threads, each task
            # within a worker's memory.
            work = plan(config, threads=threads or None, lock=locks.take, workers=workers)
        dashboard = dashboard_link(client)
        if dashboard:
            console.print(f"[bold]dashboard:[/bold] {dashboard}")
        workers_before = set(client.scheduler_info()["workers"])
        start = time.perf_counter()
        recording = performance_report(filename=report) if report else contextlib.nullcontext()
        with recording:
            compute = _Compute(client, config, work.info.frames, bar)
            outcome = _computed(compute, work, locks, console)
        seconds = time.perf_counter() - start
        # A worker that died was replaced (by its Nanny) under a new address.
        lost = len(workers_before - set(client.scheduler_info()["workers"]))
    return _summary(config, work, outcome, seconds, dashboard, lost)


def _computed(compute: _Compute, work: Plan, locks: Locks, console: Console) -> Outcome:
    """What ``compute`` makes of the planned write (failed blocks retried frame by frame),
    advancing its progress bar (``compute.bar``) if it has one."""
    with _phase(f"compute and write {work.info.frames} frames"):
        _show(None)  # the bar of frames says it from now on
        return _retry_frame_by_frame(compute, compute.config, compute(work.write), locks, console)


def _summary(
    config: PipelineConfig,
    work: Plan,
    outcome: Outcome,
    seconds: float,
    dashboard: str | None,
    lost: int,
) -> RunSummary:
    written = outcome.report
    frames_written = written.frames_written if written else 0
    return RunSummary(
        frames=work.info.frames,
        bytes_in=work.info.nbytes * frames_written // max(work.info.frames, 1),
        bytes_out=written.bytes_written if written else 0,
        seconds=seconds,
        output=config.output,
        written=frames_written,
        kept=written.frames_skipped if written else work.info.frames - frames_written,
        dashboard=dashboard,
        recomputed_stale=written.frames_stale if written else 0,
        recomputed_damaged=written.frames_damaged if written else 0,
        failures=[
            Failure(file, error)
            for files, error in outcome.failed
            for file in (files or (config.output,))
        ],
        workers_lost=lost,
    )


@dataclass
class _Compute:
    """Computes a planned write on ``client`` (see :func:`~.execute.execute`), or, without
    one, on threads of this process (:func:`~.execute.execute_here`)."""

    client: Any
    config: PipelineConfig
    frames: int
    bar: Any

    def __call__(self, write: Any) -> Outcome:
        options = dict(
            output=self.config.output,
            frames=self.frames,
            bar=self.bar,
            durability=self.config.durability,
        )
        if self.client is None:
            return execute_here(write, threads=planned_threads(self.config), **options)
        return execute(self.client, write, timeout=self.config.cluster.timeout, **options)


def _retry_frame_by_frame(
    compute: _Compute, config: PipelineConfig, outcome: Outcome, locks: Locks, console: Console
) -> Outcome:
    """Compute the frames of failed multi-frame blocks again, one frame per chunk.

    A block fails as a whole when any of its frames does; this finds out which frames
    it was, and writes the others. Input files that turned unreadable since the run
    started are left out of the retry (their frames fail, with the reason).
    """
    shared = {f for files, _ in outcome.failed if len(files) > 1 for f in files}
    if not shared:
        return outcome
    console.print(f"retrying the {len(shared)} frames of failed chunks one frame at a time")
    log.info("retry: %d frames of failed chunks, one frame per chunk", len(shared))
    retry = plan(
        config.model_copy(update={"chunks": 1, "skip_bad": True}),
        only=shared,
        lock=locks.take,
        ask_workers=False,
    )
    _show(None)  # planned again: the bar of frames goes on
    again = compute(retry.write)
    first = outcome.report
    report = WriteReport(
        first.target,
        first.frames_written + again.report.frames_written,
        first.frames_skipped,
        first.bytes_written + again.report.bytes_written,
        first.files + again.report.files,
        first.frames_stale,
        first.frames_damaged,
    )
    unread = {Path(path).stem: (path, why) for path, why in retry.info.bad_files}
    gone = [
        ((f,), f"BadImageFile: {unread[Path(f).stem][0]}: {unread[Path(f).stem][1]}")
        for f in sorted(shared - set(retry.write.files))
        if Path(f).stem in unread
    ]
    kept = [(files, error) for files, error in outcome.failed if len(files) <= 1]
    return Outcome(report, kept + again.failed + gone)

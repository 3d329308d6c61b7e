"""Plan a pipeline into one Dask graph, run it on a cluster, and summarise the run."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from ..backends import choose_backend, to_backend
from ..cluster import connect
from ..errors import ConfigError, KernelError
from ..io import PendingWrite, TargetError, WriteReport, imread, plan_write
from ..io.stackinfo import inputs_of
from .config import PipelineConfig
from .stages import build_chain

__all__ = ["Plan", "RunSummary", "plan", "run"]

#: One line per phase of a run, with its timing (the CLI's ``--log-file`` writes them).
log = logging.getLogger("stencilpipe.run")


@contextlib.contextmanager
def _phase(name: str) -> Iterator[None]:
    log.info("%s: start", name)
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


#: Chunks per worker thread that ``chunks: auto`` aims for, so that the last chunks do not
#: leave most workers idle and a bad frame fails few others with it.
CHUNKS_PER_THREAD = 4


def _balanced(stack: Any, config: PipelineConfig, threads: int) -> Any:
    """``stack``, opened again with fewer frames per chunk if it has too few chunks for
    ``threads`` (only small stacks do, so the second header scan is cheap)."""
    if stack.numblocks[0] >= CHUNKS_PER_THREAD * threads:
        return stack
    per_chunk = max(1, -(-stack.shape[0] // (CHUNKS_PER_THREAD * threads)))
    return imread(config.input, chunks={0: per_chunk}, skip_bad=config.skip_bad)


def planned_threads(config: PipelineConfig) -> int:
    """Worker threads the configured cluster is expected to have (for ``chunks: auto``)."""
    cluster = config.cluster
    if cluster.jobqueue:
        return cluster.jobs * int(cluster.job.get("cores", 1))
    return cluster.n_workers * cluster.threads_per_worker


def plan(
    config: PipelineConfig,
    *,
    only: Collection[str] | None = None,
    threads: int | None = None,
) -> Plan:
    """Build the whole run as one lazy graph; reads headers only, computes nothing.

    ``only`` limits the write to these output files (the others count as kept);
    ``threads`` is the cluster's number of worker threads, when known, for ``chunks: auto``.
    """
    # An int is frames per chunk (whole frames): chunked so when read, so that a bad
    # frame fails only its own chunk.
    chunks = {0: config.chunks} if isinstance(config.chunks, int) else config.chunks
    with _phase(f"read headers of {config.input}"):
        stack = imread(
            config.input, chunks=None if chunks == "auto" else chunks, skip_bad=config.skip_bad
        )
        if chunks == "auto":
            stack = _balanced(stack, config, threads or planned_threads(config))
    (info,) = inputs_of(stack)
    with _phase("build stages"):
        pipeline = build_chain(config)
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
    backend = choose_backend(config.backend, info.shape[1:3])
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
    )
    return Plan(config, backend, stack, info, result, write)


@dataclass
class RunSummary:
    """What a run did, for people (``table()``) and for exit codes (``failures``)."""

    frames: int
    bytes_in: int
    bytes_out: int
    seconds: float
    output: str
    written: int
    skipped: int
    dashboard: str | None
    failures: list[str] = field(default_factory=list)
    workers_lost: int = 0

    @property
    def frames_per_second(self) -> float:
        return self.written / self.seconds if self.seconds else 0.0

    @property
    def megabytes_per_second(self) -> float:
        return (self.bytes_in + self.bytes_out) / 1e6 / self.seconds if self.seconds else 0.0

    def table(self) -> Table:
        table = Table(title="stencilpipe run", show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column()
        rows = [
            ("frames", f"{self.frames} ({self.written} written, {self.skipped} kept by resume)"),
            ("bytes in / out", f"{self.bytes_in / 1e6:.1f} MB / {self.bytes_out / 1e6:.1f} MB"),
            ("time", f"{self.seconds:.2f} s"),
            (
                "throughput",
                f"{self.frames_per_second:.1f} frames/s, {self.megabytes_per_second:.1f} MB/s",
            ),
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


def run(
    config: PipelineConfig, *, console: Console | None = None, report: str | None = None
) -> RunSummary:
    """Run ``config`` on its cluster, with the dashboard link, a progress bar and a summary.

    Parameters
    ----------
    config : PipelineConfig
        The validated configuration.
    console : rich.console.Console, optional
        Where to print progress and the summary (default: stdout).
    report : str, optional
        Path of an HTML Dask performance report to save.
    """
    from distributed import performance_report, progress

    console = console or Console()
    work = plan(config)
    if report:
        inputs = {os.path.realpath(f) for f in work.info.files}
        folders = {os.path.dirname(f) for f in inputs} if work.info.kind == "files" else set()
        where = os.path.realpath(report)
        if where in inputs or os.path.dirname(where) in folders:
            raise TargetError(
                f"refusing to write the report {report} over or among the input files; "
                "choose a path outside the input directory"
            )
    cluster = config.cluster
    log.info("cluster: %s", cluster.address or cluster.jobqueue or "embedded LocalCluster")
    with connect(config.cluster) as client:
        log.info("dashboard: %s", client.dashboard_link)
        threads = sum(client.nthreads().values())
        if config.chunks == "auto" and threads and threads != planned_threads(config):
            # A scheduler that already runs: balance the chunks over the threads it has.
            work = plan(config, threads=threads)
        console.print(f"[bold]dashboard:[/bold] {client.dashboard_link}")
        workers_before = set(client.scheduler_info()["workers"])
        start = time.perf_counter()
        recording = performance_report(filename=report) if report else contextlib.nullcontext()
        with recording, _phase(f"compute and write {work.info.frames} frames"):
            outcome = _execute(client, work.write, progress)
            outcome = _retry_frame_by_frame(client, config, outcome, progress, console)
        seconds = time.perf_counter() - start
        # A worker that died was replaced (by its Nanny) under a new address.
        lost = len(workers_before - set(client.scheduler_info()["workers"]))
    written = outcome.report
    frames_written = written.frames_written if written else 0
    summary = RunSummary(
        frames=work.info.frames,
        bytes_in=work.info.nbytes * frames_written // max(work.info.frames, 1),
        bytes_out=written.bytes_written if written else 0,
        seconds=seconds,
        output=config.output,
        written=frames_written,
        skipped=written.frames_skipped if written else work.info.frames - frames_written,
        dashboard=client.dashboard_link,
        failures=outcome.failures,
        workers_lost=lost,
    )
    log.info(
        "summary: %d written, %d kept, %d failed, %.2f s, output %s",
        summary.written,
        summary.skipped,
        len(summary.failures),
        summary.seconds,
        summary.output,
    )
    console.print(summary.table())
    for failure in summary.failures:
        console.print(f"failed: {failure}", soft_wrap=True, markup=False, highlight=False)
    return summary


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


@dataclass
class _Outcome:
    """What computing a write gave: its report, and each failed block's files and error."""

    report: Any
    failed: list[tuple[tuple[str, ...], str]]

    @property
    def failures(self) -> list[str]:
        return [
            f"{', '.join(os.path.basename(f) for f in files)}: {error}"
            for files, error in self.failed
        ]


def _execute(client: Any, write: PendingWrite | Any, progress: Any) -> _Outcome:
    """Compute the write; a failing block of frames fails only its own files.

    The report is the :class:`~stencilpipe.io.WriteReport` of what was written (None when
    a Zarr write failed as a whole).
    """
    if not isinstance(write, PendingWrite):  # a Zarr store: written as a whole
        future = client.compute(write)
        progress(future, notebook=False)
        try:
            return _Outcome(future.result(), [])
        except Exception as exc:  # noqa: BLE001 - reported as the run's failure, exit code 1
            return _Outcome(None, [((), _one_line(exc))])
    futures = client.compute(write.blocks())
    if futures:
        progress(futures, notebook=False)
    results, failed = [], []
    for future, files in zip(futures, write.block_files):
        try:
            results.append(future.result())
        except Exception as exc:  # noqa: BLE001 - this block's frames failed, the rest go on
            results.append(None)
            failed.append((files, _one_line(exc)))
    client.compute(write.finish()).result()  # every block is done: lost workers' temp files go
    return _Outcome(write.partial_report(results), failed)


def _retry_frame_by_frame(
    client: Any, config: PipelineConfig, outcome: _Outcome, progress: Any, console: Console
) -> _Outcome:
    """Compute the frames of failed multi-frame blocks again, one frame per chunk.

    A block fails as a whole when any of its frames does; this finds out which frames
    it was, and writes the others.
    """
    shared = {f for files, _ in outcome.failed if len(files) > 1 for f in files}
    if not shared:
        return outcome
    console.print(f"retrying the {len(shared)} frames of failed chunks one frame at a time")
    log.info("retry: %d frames of failed chunks, one frame per chunk", len(shared))
    retry = plan(config.model_copy(update={"chunks": 1}), only=shared)
    again = _execute(client, retry.write, progress)
    first = outcome.report
    report = WriteReport(
        first.target,
        first.frames_written + again.report.frames_written,
        first.frames_skipped,
        first.bytes_written + again.report.bytes_written,
        first.files + again.report.files,
    )
    kept = [(files, error) for files, error in outcome.failed if len(files) <= 1]
    return _Outcome(report, kept + again.failed)

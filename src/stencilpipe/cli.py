"""The ``stencilpipe`` command: run, apply, inspect, validate, filters, demo.

Exit codes: 0 success, 1 some frames failed (listed), 2 usage, config or input
error. Errors are one line; ``--debug`` shows the traceback. ``--json`` prints one
JSON object on stdout, also when the command fails. Colours and progress bars go
only to a terminal, and no colours under ``NO_COLOR``.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import gc
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from .filter_table import Filter

EXIT_FAILED_FRAMES = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: Where the ``--json`` flag of the running command is kept (see :func:`_json_flag`).
_JSON = "stencilpipe.json"


def _colour() -> bool | None:
    """click's ``color``: none under NO_COLOR (https://no-color.org), else only on a terminal."""
    return False if os.environ.get("NO_COLOR") else None


def _fail(message: str, code: int) -> None:
    """Say ``message`` on stderr (and as ``{"error": ...}`` on stdout under --json); exit."""
    if click.get_current_context().meta.get(_JSON):
        click.echo(json.dumps({"error": message.removeprefix("error: ")}))
    click.secho(message, fg="red", err=True, color=_colour())
    sys.exit(code)


def _friendly_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn stencilpipe's errors into one line on stderr and exit code 2 (unless --debug)."""

    @functools.wraps(command)
    def wrapper(*args: Any, debug: bool = False, log_file: str | None = None, **kwargs: Any) -> Any:
        from .errors import StencilpipeError

        if log_file:
            _log_to(logging.FileHandler(log_file))
        try:
            return command(*args, **kwargs)
        except StencilpipeError as exc:
            if debug:
                raise
            _fail(f"error: {exc}", EXIT_USAGE)
        except KeyboardInterrupt:
            if debug:
                raise
            _fail("interrupted: finished outputs are kept; rerun to resume", EXIT_INTERRUPTED)

    wrapper = click.option(
        "--log-file",
        type=click.Path(dir_okay=False),
        help="Append one line per phase to this file.",
    )(wrapper)
    return click.option("--debug", is_flag=True, help="Show tracebacks.")(wrapper)


def _json_flag(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--json``: one JSON object on stdout instead of text (``json_output``)."""

    def remember(ctx: click.Context, _: click.Parameter, value: bool) -> bool:
        ctx.meta[_JSON] = value
        return value

    return click.option(
        "--json",
        "json_output",
        is_flag=True,
        callback=remember,
        is_eager=True,
        help="Print one JSON object on stdout, and nothing else (also on failure).",
    )(command)


def _log_to(handler: logging.Handler) -> None:
    """Send stencilpipe's log lines (phases with timings) to ``handler``."""
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("stencilpipe")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """The options that ``run`` and ``apply`` share."""

    address: str | None
    workers: int | None
    gpu: bool
    skip_bad: bool
    no_dashboard: bool
    overwrite: bool
    wait: bool
    report: str | None
    json_output: bool
    quiet: bool

    def overrides(self) -> list[str]:
        """The config keys these options set, as ``--set`` would."""
        result = ["backend=cupy", "cluster.gpu=true"] if self.gpu else []
        if self.skip_bad:
            result.append("skip_bad=true")
        if self.address:
            result.append(f"cluster.address={self.address}")
        if self.workers:
            result.append(f"cluster.n_workers={self.workers}")
        if self.no_dashboard:
            result.append("cluster.dashboard_address=null")
        if self.overwrite:
            result.append("resume=false")
        return result


_RUN_OPTIONS = [
    click.option("--address", help="Address of a running Dask scheduler."),
    click.option("--workers", type=click.IntRange(min=1), help="Workers of the embedded cluster."),
    click.option(
        "--gpu", is_flag=True, help="Run on GPUs: CuPy chunks on a dask-cuda LocalCUDACluster."
    ),
    click.option(
        "--skip-bad", is_flag=True, help="Leave out unreadable or mismatched input files."
    ),
    click.option(
        "--no-dashboard", is_flag=True, help="Start the embedded cluster without a dashboard."
    ),
    click.option(
        "--overwrite", is_flag=True, help="Recompute every output, even those resume would keep."
    ),
    click.option("--wait", is_flag=True, help="Wait for another run writing to the output to end."),
    click.option(
        "--report", type=click.Path(dir_okay=False), help="Save Dask's performance report (HTML)."
    ),
    _json_flag,
    click.option(
        "-q", "--quiet", is_flag=True, help="Print nothing on stdout (failures go to stderr)."
    ),
    click.option(
        "-v", "--verbose", is_flag=True, help="Print each phase of the run, timed, on stderr."
    ),
]


def _run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The options of ``run`` and ``apply``, handed to ``command`` as ``options``."""
    fields = [f.name for f in dataclasses.fields(RunOptions)]

    @functools.wraps(command)
    def wrapper(*args: Any, verbose: bool, **kwargs: Any) -> Any:
        if verbose:
            _log_to(logging.StreamHandler(sys.stderr))
        options = RunOptions(**{name: kwargs.pop(name) for name in fields})
        return command(*args, options=options, **kwargs)

    for option in reversed(_RUN_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def _run_config(config: Any, options: RunOptions) -> None:
    """Run ``config``; its summary as text (or JSON); exit 1 when frames failed."""
    from rich.console import Console

    from .pipeline.run import run

    # Rich writes colours and cursor moves only to a terminal, and no colours under NO_COLOR.
    console = Console(quiet=options.quiet or options.json_output)
    gc.enable()  # a run's computation makes garbage to collect (see _pause_gc)
    summary = run(
        config,
        console=console,
        report=os.path.abspath(options.report) if options.report else config.report,
        # A bar redraws itself: only on a terminal, and only for a person reading it.
        progress=console.is_terminal and not console.quiet,
        wait=options.wait,
    )
    if "distributed" not in sys.modules:  # its clients and loops close as they are collected
        # At exit the interpreter collects over every module's objects once more (0.3-0.6 s
        # after a small run); frozen, they are left to the end of the process.
        atexit.register(gc.freeze)
    if options.json_output:
        click.echo(json.dumps(summary.as_dict()))
    if summary.failures:
        if options.quiet and not options.json_output:  # quiet, but not about what failed
            for failure in summary.failures:
                click.echo(f"failed: {failure}", err=True)
        sys.exit(EXIT_FAILED_FRAMES)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="stencilpipe", prog_name="stencilpipe")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Neighbourhood filters over image stacks, on a laptop or a Dask cluster."""
    # tifffile logs a warning for a corrupt file before raising; our one-line error says it.
    logging.getLogger("tifffile").setLevel(logging.CRITICAL)
    _pause_gc(ctx)


def _pause_gc(ctx: click.Context) -> None:
    """No garbage collection while the command imports its libraries (until a run starts
    computing, or the command ends).

    Imports make objects that all stay, and the collector walks them hundreds of times:
    0.2 s of a small run's 1.5 s.
    """
    if gc.isenabled():
        gc.disable()
        ctx.call_on_close(gc.enable)


def _plan_dict(work: Any) -> dict[str, Any]:
    """What ``--dry-run --json`` prints: the planned run."""
    config = work.config
    return {
        "input": config.input,
        "frames": work.info.frames,
        "shape": list(work.stack.shape),
        "dtype": str(work.stack.dtype),
        "stages": [{name: params} for name, params in config.stage_specs()],
        "backend": work.backend,
        "fused": config.fuse,
        "output": config.output,
        "resume": config.resume,
    }


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config key (a relative path resolves against the working directory).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Validate and plan, compute nothing: chunks, tasks, halo overhead, memory per worker.",
)
@click.option(
    "--job-script",
    is_flag=True,
    help="Print the batch script of cluster.jobqueue's jobs; submit nothing.",
)
@_run_options
@_friendly_errors
def run(
    config: str,
    overrides: tuple[str, ...],
    dry_run: bool,
    job_script: bool,
    options: RunOptions,
) -> None:
    """Run the pipeline described by the YAML file CONFIG.

    Relative paths in CONFIG resolve against CONFIG's folder.
    """
    from .cluster.connect import job_script as batch_script
    from .pipeline.config import load_config
    from .pipeline.run import plan

    settings = load_config(config, [*overrides, *options.overrides()])
    if job_script:
        script = batch_script(settings.cluster)
        click.echo(json.dumps({"job_script": script}) if options.json_output else script)
    elif dry_run:
        work = plan(settings)
        estimate = work.estimate()
        if options.json_output:
            click.echo(json.dumps(_plan_dict(work) | {"estimate": estimate.as_dict()}))
        else:
            click.echo("\n".join([work.describe(), *estimate.lines()]))
    else:
        _run_config(settings, options)


def _parse_stages(text: str) -> list[Any]:
    """``mean:size=3,sobel:axis=0`` -> ``[{"mean": {"size": 3}}, {"sobel": {"axis": 0}}]``."""
    import yaml

    stages: list[Any] = []
    for item in filter(None, text.split(",")):
        name, *assignments = item.split(":")
        params = {}
        for assignment in assignments:
            key, sep, value = assignment.partition("=")
            if not sep:
                raise click.BadParameter(f"{assignment!r} in {item!r}: expected key=value")
            params[key] = yaml.safe_load(value)
        stages.append({name: params})
    return stages


@main.command()
@click.argument("stages")
@click.argument("input_path", metavar="INPUT")
@click.argument("output")
@click.option(
    "--boundary", default="reflect", show_default=True, help="Boundary mode of every stage."
)
@_run_options
@_friendly_errors
def apply(stages: str, input_path: str, output: str, boundary: str, options: RunOptions) -> None:
    """Apply STAGES (e.g. mean:size=3,sobel:axis=0) to the images INPUT, writing OUTPUT."""
    from pathlib import Path

    from .pipeline.config import apply_overrides, parse_config

    data = {
        "input": input_path,
        "output": output,
        "stages": _parse_stages(stages),
        "boundary": boundary,
    }
    data = apply_overrides(data, options.overrides())
    _run_config(parse_config(data, source="command line", base_dir=Path.cwd()), options)


@main.command(name="inspect")
@click.argument("input_path", metavar="INPUT")
@_json_flag
@_friendly_errors
def inspect_command(input_path: str, json_output: bool) -> None:
    """Describe the image stack INPUT: frames, shape, dtype, size, chunks, axes, scale,
    units, channel names, bad files."""
    from .io import inspect

    info = inspect(input_path, skip_bad=True)
    click.echo(json.dumps(info.as_dict()) if json_output else info.summary())


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config key (a relative path resolves against the working directory).",
)
@_json_flag
@_friendly_errors
def validate(config: str, overrides: tuple[str, ...], json_output: bool) -> None:
    """Check the config file CONFIG (keys, types, stages) without running it.

    Says where its relative paths resolve: against CONFIG's folder.
    """
    from .pipeline.config import load_config
    from .pipeline.stages import build_chain

    settings = load_config(config, list(overrides))
    pipeline = build_chain(settings)
    if json_output:
        result = {
            "config": config,
            "valid": True,
            "stages": pipeline.name,
            "halo": list(pipeline.halo),
            "input": settings.input,
            "output": settings.output,
        }
        click.echo(json.dumps(result))
        return
    click.echo(f"{config}: valid; stages {pipeline.name}, halo {pipeline.halo}")
    click.echo(f"input:  {settings.input}\noutput: {settings.output}")


@main.command()
@_json_flag
def filters(json_output: bool) -> None:
    """List the built-in filters and their parameters."""
    from .filter_table import FILTERS  # a table: importing the filters costs a second

    if json_output:
        listed = [
            {"name": f.name, "parameters": list(f.parameters), "summary": f.summary}
            for f in FILTERS
        ]
        click.echo(json.dumps({"filters": listed}))
        return
    for f in FILTERS:
        click.echo(f"{f.name}{f.signature}\n    {f.summary}")


def filter_entries() -> list[Filter]:
    """The built-in filters as their registries describe them now (``library.FILTERS``,
    ``ndmorph.STAGES``): what :mod:`stencilpipe.filter_table` must hold."""
    import inspect as pyinspect

    from . import library, ndmorph
    from .filter_table import Filter

    listed = []
    for name, factory in {**library.FILTERS, **ndmorph.STAGES}.items():
        signature = pyinspect.signature(factory)
        text = str(signature).replace("**options: 'Any'", "boundary, cval, dtype")
        listed.append(
            Filter(
                name,
                text.replace("'", ""),
                tuple(p for p in signature.parameters if p != "options"),
                (factory.__doc__ or "").strip().splitlines()[0],
            )
        )
    return listed


@main.command()
@click.option(
    "--workdir",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where data/sample and out/sample are made.",
)
@click.option("--frames", default=48, show_default=True, type=click.IntRange(min=1))
@_friendly_errors
def demo(workdir: str, frames: int) -> None:
    """Make a sample stack from scikit-image's images and run configs/demo.yaml on it."""
    from .demo import run_demo

    run_demo(workdir, frames)


if __name__ == "__main__":  # pragma: no cover
    main()

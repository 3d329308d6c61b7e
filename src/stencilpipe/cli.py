"""The ``stencilpipe`` command: run, apply, inspect, validate, filters, demo.

Exit codes: 0 success, 1 some frames failed (listed), 2 usage, config or input
error. Errors are one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

EXIT_FAILED_FRAMES = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _friendly_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn stencilpipe's errors into one line on stderr and exit code 2 (unless --debug)."""

    @functools.wraps(command)
    def wrapper(*args: Any, debug: bool = False, log_file: str | None = None, **kwargs: Any) -> Any:
        from .errors import StencilpipeError

        if log_file:
            _log_to(log_file)
        try:
            return command(*args, **kwargs)
        except StencilpipeError as exc:
            if debug:
                raise
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(EXIT_USAGE)
        except KeyboardInterrupt:
            if debug:
                raise
            click.secho("interrupted: finished outputs are kept; rerun to resume", err=True)
            sys.exit(EXIT_INTERRUPTED)

    wrapper = click.option(
        "--log-file",
        type=click.Path(dir_okay=False),
        help="Append one line per phase to this file.",
    )(wrapper)
    return click.option("--debug", is_flag=True, help="Show tracebacks.")(wrapper)


def _log_to(path: str) -> None:
    """Send stencilpipe's log lines (phases with timings) to ``path``."""
    import logging

    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("stencilpipe")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def _cluster_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--skip-bad", is_flag=True, help="Leave out unreadable or mismatched input files."
    )(command)
    command = click.option(
        "--gpu", is_flag=True, help="Run on GPUs: CuPy chunks on a dask-cuda LocalCUDACluster."
    )(command)
    command = click.option("--address", help="Address of a running Dask scheduler.")(command)
    command = click.option(
        "--workers", type=click.IntRange(min=1), help="Workers of the embedded cluster."
    )(command)
    return command


def _overrides(
    address: str | None, workers: int | None, gpu: bool = False, skip_bad: bool = False
) -> list[str]:
    result = ["backend=cupy", "cluster.gpu=true"] if gpu else []
    if skip_bad:
        result.append("skip_bad=true")
    if address:
        result.append(f"cluster.address={address}")
    if workers:
        result.append(f"cluster.n_workers={workers}")
    return result


def _run_config(config: Any, report: str | None) -> None:
    from .pipeline.run import run

    summary = run(config, report=report)
    if summary.failures:
        sys.exit(EXIT_FAILED_FRAMES)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="stencilpipe")
def main() -> None:
    """Neighbourhood filters over image stacks, on a laptop or a Dask cluster."""
    import logging

    # tifffile logs a warning for a corrupt file before raising; our one-line error says it.
    logging.getLogger("tifffile").setLevel(logging.CRITICAL)


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config key."
)
@_cluster_options
@click.option("--dry-run", is_flag=True, help="Validate and plan, compute nothing.")
@click.option(
    "--job-script",
    is_flag=True,
    help="Print the batch script of cluster.jobqueue's jobs; submit nothing.",
)
@click.option(
    "--report", type=click.Path(dir_okay=False), help="Save Dask's performance report (HTML)."
)
@_friendly_errors
def run(
    config: str,
    overrides: tuple[str, ...],
    address: str | None,
    workers: int | None,
    gpu: bool,
    skip_bad: bool,
    dry_run: bool,
    job_script: bool,
    report: str | None,
) -> None:
    """Run the pipeline described by the YAML file CONFIG."""
    from .cluster.connect import job_script as batch_script
    from .pipeline.config import load_config
    from .pipeline.run import plan

    settings = load_config(config, [*overrides, *_overrides(address, workers, gpu, skip_bad)])
    if job_script:
        click.echo(batch_script(settings.cluster))
        return
    if dry_run:
        click.echo(plan(settings).describe())
        return
    _run_config(settings, report)


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
@_cluster_options
@click.option(
    "--report", type=click.Path(dir_okay=False), help="Save Dask's performance report (HTML)."
)
@_friendly_errors
def apply(
    stages: str,
    input_path: str,
    output: str,
    boundary: str,
    address: str | None,
    workers: int | None,
    gpu: bool,
    skip_bad: bool,
    report: str | None,
) -> None:
    """Apply STAGES (e.g. mean:size=3,sobel:axis=0) to the images INPUT, writing OUTPUT."""
    from pathlib import Path

    from .pipeline.config import apply_overrides, parse_config

    data = {
        "input": input_path,
        "output": output,
        "stages": _parse_stages(stages),
        "boundary": boundary,
    }
    data = apply_overrides(data, _overrides(address, workers, gpu, skip_bad))
    _run_config(parse_config(data, source="command line", base_dir=Path.cwd()), report)


@main.command(name="inspect")
@click.argument("input_path", metavar="INPUT")
@_friendly_errors
def inspect_command(input_path: str) -> None:
    """Describe the image stack INPUT: frames, shape, dtype, size, chunks, bad files."""
    from .io import inspect

    click.echo(inspect(input_path, skip_bad=True).summary())


@main.command()
@click.argument("config", type=click.Path(dir_okay=False))
@click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config key."
)
@_friendly_errors
def validate(config: str, overrides: tuple[str, ...]) -> None:
    """Check the config file CONFIG (keys, types, stages) without running it."""
    from .pipeline.config import load_config
    from .pipeline.stages import build_chain

    settings = load_config(config, list(overrides))
    pipeline = build_chain(settings)
    click.echo(f"{config}: valid; stages {pipeline.name}, halo {pipeline.halo}")


@main.command()
def filters() -> None:
    """List the built-in filters and their parameters."""
    import inspect as pyinspect

    from . import library

    for name, factory in library.FILTERS.items():
        signature = str(pyinspect.signature(factory)).replace(
            "**options: 'Any'", "boundary, cval, dtype"
        )
        summary = (factory.__doc__ or "").strip().splitlines()[0]
        click.echo(f"{name}{signature.replace(chr(39), '')}\n    {summary}")


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

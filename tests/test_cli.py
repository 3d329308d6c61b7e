"""The stencilpipe command, end to end, on real image directories (subprocesses, real clusters)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tifffile
from click.testing import CliRunner
from PIL import Image
from scipy import ndimage as ndi

from stencilpipe import library
from stencilpipe.cli import main

FRAMES = 6


def oracle(frame: np.ndarray) -> np.ndarray:
    """mean:size=3 then sobel:axis=0 with stencilpipe's documented uint8 rules, from scipy."""
    mean = np.rint(ndi.uniform_filter(frame.astype(np.float64), 3)).astype(np.uint8)
    return np.clip(ndi.sobel(mean.astype(np.int64), axis=0), 0, 255).astype(np.uint8)


@pytest.fixture
def pngs(tmp_path):
    """A directory of 8-bit PNGs written by Pillow."""
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(0)
    frames = {}
    for index in range(FRAMES):
        frame = rng.integers(0, 256, (48, 64), dtype=np.uint8)
        Image.fromarray(frame).save(folder / f"img_{index}.png")
        frames[f"img_{index}"] = frame
    return folder, frames


def cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "stencilpipe", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def write_config(tmp_path, **extra):
    text = textwrap.dedent(
        """\
        input: in/*.png
        output: out/
        stages:
          - mean: {size: 3}
          - sobel: {axis: 0}
        cluster: {n_workers: 2, threads_per_worker: 2}
        """
    ) + "".join(f"{k}: {v}\n" for k, v in extra.items())
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_run_on_two_worker_processes_matches_scipy_and_resumes(tmp_path, pngs):
    _, frames = pngs
    config = write_config(tmp_path)
    first = cli("run", config, "--report", "report.html", "--log-file", "run.log", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "dashboard:" in first.stdout and "http://127.0.0.1:" in first.stdout
    assert f"{FRAMES} written" in first.stdout and "frames/s" in first.stdout
    assert (tmp_path / "report.html").stat().st_size > 0
    log = (tmp_path / "run.log").read_text()
    for phase in (
        f"read headers of {tmp_path / 'in'}/*.png: end",
        "stage mean: halo",
        "stage sobel: halo",
        f"compute and write {FRAMES} frames: end",
        "summary: 6 written",
    ):
        assert phase in log
    outputs = {name: tmp_path / "out" / f"{name}.tif" for name in frames}
    for name, frame in frames.items():
        np.testing.assert_array_equal(tifffile.imread(outputs[name]), oracle(frame))

    removed = ["img_1", "img_4"]
    before = {
        name: path.stat().st_mtime_ns for name, path in outputs.items() if name not in removed
    }
    for name in removed:
        outputs[name].unlink()
    second = cli("run", config, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"2 written, {FRAMES - 2} kept by resume" in second.stdout
    assert {name: outputs[name].stat().st_mtime_ns for name in before} == before
    for name in removed:
        np.testing.assert_array_equal(tifffile.imread(outputs[name]), oracle(frames[name]))


def test_apply_writes_the_same_as_the_config(tmp_path, pngs):
    _, frames = pngs
    result = cli(
        "apply", "mean:size=3,sobel:axis=0", "in/*.png", "applied/", "--workers", "1", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    for name, frame in frames.items():
        np.testing.assert_array_equal(
            tifffile.imread(tmp_path / "applied" / f"{name}.tif"), oracle(frame)
        )


def test_dry_run_plans_without_writing(tmp_path, pngs):
    result = cli("run", write_config(tmp_path), "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"{FRAMES} frames" in result.stdout and "mean" in result.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "missing.yaml"], "missing.yaml: cannot read the config file"),
        (["apply", "mean:size=3", "nothing/*.png", "out/"], "nothing/*.png"),
        (["apply", "blur:size=3", "in/*.png", "out/"], "unknown stage 'blur'"),
        (
            ["apply", "mean:size=3", "in/*.png", "out/", "--address", "tcp://127.0.0.1:9"],
            "cannot reach",
        ),
        (["apply", "mean:size=3", "in/*.png", "in/"], "in"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(tmp_path, pngs, args, message):
    before = sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "in").iterdir())
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "in").iterdir()) == before


def test_debug_shows_the_traceback(tmp_path):
    result = cli("run", "missing.yaml", "--debug", cwd=tmp_path)
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_inspect_validate_filters(tmp_path, pngs):
    runner = CliRunner()
    inspected = runner.invoke(main, ["inspect", str(tmp_path / "in")])
    assert (
        inspected.exit_code == 0
        and f"frames   {FRAMES}" in inspected.output
        and "uint8" in inspected.output
    )
    os.chdir(tmp_path)
    validated = runner.invoke(main, ["validate", str(write_config(tmp_path))])
    assert validated.exit_code == 0 and "valid" in validated.output
    listed = runner.invoke(main, ["filters"])
    assert listed.exit_code == 0
    for name in library.FILTERS:
        assert f"\n{name}(" in "\n" + listed.output


def test_inspect_and_filters_as_json(pngs):
    folder, frames = pngs
    runner = CliRunner()
    inspected = runner.invoke(main, ["inspect", str(folder), "--json"])
    assert inspected.exit_code == 0, inspected.output
    stack = json.loads(inspected.output)
    assert stack["frames"] == stack["files"] == FRAMES and stack["dtype"] == "uint8"
    assert stack["shape"] == [FRAMES, 48, 64] and stack["bytes"] == FRAMES * 48 * 64
    assert stack["bad_files"] == []
    listed = json.loads(runner.invoke(main, ["filters", "--json"]).output)
    from stencilpipe import ndmorph

    assert [f["name"] for f in listed["filters"]] == [*library.FILTERS, *ndmorph.STAGES]
    gaussian = next(f for f in listed["filters"] if f["name"] == "gaussian")
    assert gaussian["parameters"][0] == "sigma" and gaussian["summary"]


def test_the_filter_table_is_what_the_registries_say_and_filters_needs_no_numba():
    """``stencilpipe filters`` answers from a table (importing the filters costs a second):
    it must equal what library.FILTERS and ndmorph.STAGES say (rewrite it with
    ``python -m stencilpipe.filter_table``), and the command imports neither Numba nor
    Dask."""
    from stencilpipe.cli import filter_entries
    from stencilpipe.filter_table import FILTERS

    assert FILTERS == tuple(filter_entries())
    probe = (
        "import sys; from click.testing import CliRunner; from stencilpipe.cli import main; "
        "out = CliRunner().invoke(main, ['filters']).output; "
        "print(sorted({'numba', 'dask', 'numpy'} & set(sys.modules)), "
        "sum(line.startswith('    ') for line in out.splitlines()))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.stdout.split() == ["[]", str(len(FILTERS))], result.stderr


def stack_with_a_bad_frame(folder):
    """Three zlib TIFFs of one 64x64 uint8 frame in ``folder``; ``img_1.tif``'s pixels are
    garbage under intact headers, so it fails only when read. Returns the frame."""
    folder.mkdir()
    frame = np.random.default_rng(1).integers(0, 256, (64, 64), dtype=np.uint8)
    for index in range(3):
        tifffile.imwrite(folder / f"img_{index}.tif", frame, compression="zlib")
    broken = folder / "img_1.tif"
    data = bytearray(broken.read_bytes())
    with tifffile.TiffFile(broken) as tif:
        offset = tif.pages[0].dataoffsets[0]
    data[offset + 2 : offset + 40] = b"\xff" * 38
    broken.write_bytes(bytes(data))
    return frame


def test_a_frame_that_fails_during_the_run_fails_only_its_own_output(tmp_path):
    frame = stack_with_a_bad_frame(tmp_path / "in")
    config = tmp_path / "run.yaml"
    config.write_text("input: in/*.tif\noutput: out/\nstages: [{mean: {size: 3}}]\nchunks: 1\n")
    result = cli("run", config, "--workers", "1", cwd=tmp_path)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "failed: img_1.tif: BadImageFile" in result.stdout
    written = sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("."))
    assert written == ["img_0.tif", "img_2.tif"]
    for name in ("img_0.tif", "img_2.tif"):  # the frames that could be read were written
        want = np.rint(ndi.uniform_filter(frame.astype(np.float64), 3)).astype(np.uint8)
        np.testing.assert_array_equal(tifffile.imread(tmp_path / "out" / name), want)


@pytest.mark.skipif(
    __import__("stencilpipe.backends").backends.gpu_status() is None, reason="a GPU is present"
)
def test_gpu_without_a_gpu_fails_at_start_with_one_line(tmp_path, pngs):
    result = cli("apply", "mean:size=3", "in/*.png", "out/", "--gpu", cwd=tmp_path)
    assert result.returncode == 2 and "backend 'cupy' needs a GPU" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()

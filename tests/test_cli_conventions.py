"""The stencilpipe command follows the conventions of command-line tools: --version, -q, -v,
--json, no escape codes or carriage returns off a terminal, NO_COLOR, --overwrite, --wait."""

import importlib.metadata
import importlib.resources
import json
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import tifffile

import stencilpipe
from stencilpipe.io.lock import lock_output
from test_cli import (  # noqa: F401 - pngs: a fixture
    FRAMES,
    cli,
    oracle,
    pngs,
    stack_with_a_bad_frame,
    write_config,
)

APPLY = ("apply", "mean:size=3,sobel:axis=0", "in/*.png", "out/", "--workers", "1")

#: SGR sequences that set a colour (foreground, background; 8, 16, 256 or 24-bit colours).
COLOUR = re.compile(rb"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")


def json_of(result):
    """The one JSON object that is the whole of ``result.stdout``."""
    value = json.loads(result.stdout)
    assert isinstance(value, dict)
    return value


def check_outputs(folder, frames):
    for name, frame in frames.items():
        np.testing.assert_array_equal(tifffile.imread(folder / f"{name}.tif"), oracle(frame))


def test_version_comes_from_the_installed_metadata():
    installed = importlib.metadata.version("stencilpipe")
    assert stencilpipe.__version__ == installed
    result = cli("--version", cwd=".")
    assert result.returncode == 0 and result.stdout == f"stencilpipe, version {installed}\n"
    # A source tree that is not installed still imports, with a version that says so.
    not_installed = (
        "import importlib.metadata as m\n"
        "def missing(name):\n"
        "    raise m.PackageNotFoundError(name)\n"
        "m.version = missing\n"
        "import stencilpipe\n"
        "print(stencilpipe.__version__)\n"
    )
    result = subprocess.run([sys.executable, "-c", not_installed], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "0+unknown\n", result.stderr
    assert importlib.resources.files("stencilpipe").joinpath("py.typed").is_file()


def test_json_quiet_and_overwrite_on_apply_and_run(tmp_path, pngs):  # noqa: F811
    _, frames = pngs
    first = cli(*APPLY, "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    summary = json_of(first)
    assert summary["frames"] == summary["written"] == FRAMES and summary["kept"] == 0
    assert summary["recomputed"] == {"stale": 0, "damaged": 0} and summary["failures"] == []
    assert summary["output"] == f"{tmp_path}/out/" and summary["seconds"] > 0
    check_outputs(tmp_path / "out", frames)

    quiet = cli(*APPLY, "-q", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stdout == "", quiet.stdout + quiet.stderr

    again = json_of(cli(*APPLY, "--json", cwd=tmp_path))
    assert again["written"] == 0 and again["kept"] == FRAMES
    overwritten = json_of(cli(*APPLY, "--json", "--overwrite", cwd=tmp_path))
    assert overwritten["written"] == FRAMES and overwritten["kept"] == 0
    check_outputs(tmp_path / "out", frames)

    config = write_config(tmp_path)  # the same stages, written to out/: all kept
    ran = json_of(cli("run", config, "--json", cwd=tmp_path))
    assert ran["kept"] == FRAMES and ran["written"] == 0
    rerun = json_of(cli("run", config, "--json", "--overwrite", cwd=tmp_path))
    assert rerun["written"] == FRAMES and rerun["kept"] == 0


def test_json_on_failure_is_still_one_object(tmp_path):
    stack_with_a_bad_frame(tmp_path / "in")
    failed = cli("apply", "mean:size=3", "in/", "out/", "--workers", "1", "--json", cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    summary = json_of(failed)
    assert summary["written"] == 2
    (failure,) = summary["failures"]
    assert failure["file"].endswith("img_1.tif") and "BadImageFile" in failure["error"]

    quiet = cli("apply", "mean:size=3", "in/", "out/", "--overwrite", "-q", cwd=tmp_path)
    assert quiet.returncode == 1 and quiet.stdout == ""
    assert quiet.stderr.startswith("failed: img_1.tif: BadImageFile"), quiet.stderr

    refused = cli("apply", "blur:size=3", "in/", "out/", "--json", cwd=tmp_path)
    assert refused.returncode == 2
    assert json_of(refused) == {
        "error": "command line: stages.0: unknown stage 'blur'; expected one of: mean, gaussian, "
        "sobel, laplace, minimum, maximum, median, binary_erosion, binary_dilation, "
        "binary_opening, binary_closing, grey_erosion, grey_dilation, grey_opening, "
        "grey_closing, stencil"
    }
    assert refused.stderr.startswith("error: command line: stages.0: unknown stage 'blur'")


def test_verbose_prints_the_phases_on_stderr(tmp_path, pngs):  # noqa: F811
    result = cli(*APPLY, "-v", "-q", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "", result.stderr
    for phase in ("read headers of", "compile stages: end", f"compute and write {FRAMES} frames"):
        assert phase in result.stderr


def test_no_escape_codes_or_carriage_returns_off_a_terminal(tmp_path, pngs):  # noqa: F811
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["TERM"] = "xterm-256color"
    for args in (APPLY, ("run", "missing.yaml")):
        result = subprocess.run(
            [sys.executable, "-m", "stencilpipe", *args],
            cwd=tmp_path,
            capture_output=True,
            env=env,
            timeout=300,
        )
        assert result.returncode in (0, 2), result.stderr
        for stream in (result.stdout, result.stderr):
            assert b"\x1b" not in stream and b"\r" not in stream, stream


def on_a_terminal(args, cwd, **env):
    """Run the command with stdout and stderr on a pseudo-terminal; its exit code and bytes."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "stencilpipe", *args],
        cwd=cwd,
        stdout=terminal,
        stderr=terminal,
        env={**{k: v for k, v in os.environ.items() if k != "NO_COLOR"}, **env},
    )
    os.close(terminal)
    output = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: the process has ended
            break
        if not chunk:
            break
        output += chunk
    os.close(controller)
    return process.wait(timeout=300), output


def test_colours_on_a_terminal_and_none_under_no_color(tmp_path, pngs):  # noqa: F811
    code, coloured = on_a_terminal(("run", "missing.yaml"), tmp_path, TERM="xterm-256color")
    assert code == 2 and COLOUR.search(coloured), coloured
    for args, expected in ((APPLY, 0), (("run", "missing.yaml"), 2)):
        code, plain = on_a_terminal(args, tmp_path, TERM="xterm-256color", NO_COLOR="1")
        assert code == expected and not COLOUR.search(plain), plain
        assert b"error: missing.yaml" in plain if expected else b"6 written" in plain


def test_wait_waits_for_the_run_that_holds_the_output(tmp_path, pngs):  # noqa: F811
    _, frames = pngs
    (tmp_path / "out").mkdir()
    with lock_output(tmp_path / "out", "out/"):
        refused = cli(*APPLY, cwd=tmp_path)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "out/ is being written by another stencilpipe run" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        waiting = subprocess.Popen(
            [sys.executable, "-m", "stencilpipe", *APPLY, "--wait", "--json"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(5)  # time to reach the lock; not an assertion on timing
        assert waiting.poll() is None and not list((tmp_path / "out").glob("*.tif"))
    stdout, stderr = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, stderr
    assert json.loads(stdout)["written"] == FRAMES
    check_outputs(tmp_path / "out", frames)


def test_no_dashboard_prints_no_link(tmp_path, pngs):  # noqa: F811
    _, frames = pngs
    text = cli(*APPLY, "--no-dashboard", cwd=tmp_path)
    assert text.returncode == 0 and f"{FRAMES} written" in text.stdout, text.stderr
    assert "dashboard:" not in text.stdout and text.stderr == ""
    summary = json_of(cli(*APPLY, "--no-dashboard", "--json", "--overwrite", cwd=tmp_path))
    assert summary["dashboard"] is None and summary["written"] == FRAMES
    check_outputs(tmp_path / "out", frames)


def test_demo_runs_from_the_repository_root_and_its_config_names_the_demo_stack(tmp_path):
    root = Path(__file__).resolve().parents[1]
    made = cli("demo", "--workdir", tmp_path, "--frames", "2", cwd=root)
    assert made.returncode == 0, made.stdout + made.stderr
    outputs = sorted(p.name for p in (tmp_path / "out" / "sample").glob("*.tif"))
    assert outputs == ["frame_000.tif", "frame_001.tif"]
    assert (tmp_path / "out" / "preview.png").stat().st_size > 0
    # `stencilpipe run configs/demo.yaml` reads the stack that `stencilpipe demo` makes.
    validated = json_of(cli("validate", root / "configs" / "demo.yaml", "--json", cwd=tmp_path))
    assert validated["input"] == f"{root}/data/sample/*.tif"

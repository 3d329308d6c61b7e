"""Every bad input the command line can get, in one table, each with the message it gets.

Each case builds its inputs in a fresh directory (``in/`` holds three good 32x40 uint8 PNGs,
``a.png``, ``b.png``, ``c.png``, to start with), runs the ``stencilpipe`` command there and
asserts:

* exit code 2;
* stderr is one line, ``error: <message>``, where the message names the file or key and the
  reason (re.fullmatch against the case's pattern), and there is no traceback anywhere.
  Usage errors that click reports itself keep click's format (its usage lines, then
  ``Error: <message>``);
* nothing in the directory changed: every file keeps its bytes and its mtime, and nothing
  was created (no output, no temporary file, no directory).

Cases that stencilpipe gets wrong today are strict xfails whose reason says what happens
now; the pattern states what should happen.

``python tests/test_bad_inputs.py`` runs every case and prints the table as Markdown
(bad input -> command -> message -> exit code) with the messages as they are now.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import tifffile
from PIL import Image

# -- inputs ------------------------------------------------------------------------------------

SHAPE = (32, 40)


def frame(i: int, dtype=np.uint8, shape=SHAPE) -> np.ndarray:
    """A deterministic frame; frame ``i`` differs from frame ``i + 1``."""
    values = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) * 7 + i * 13
    return (values % (np.iinfo(dtype).max + 1)).astype(dtype)


def good_inputs(root: Path) -> None:
    """``in/a.png``, ``in/b.png``, ``in/c.png``: three good 8-bit gray frames (Pillow)."""
    (root / "in").mkdir()
    for i, name in enumerate("abc"):
        Image.fromarray(frame(i)).save(root / "in" / f"{name}.png")


def add(name: str, make: Callable[[Path], None]) -> Callable[[Path], None]:
    """A setup that adds ``in/<name>``, made by ``make``, beside the good frames."""

    def setup(root: Path) -> None:
        make(root / "in" / name)

    return setup


def zero_bytes(path: Path) -> None:
    path.write_bytes(b"")


def text_file(path: Path) -> None:
    path.write_text("frame list, not a frame\n")


def corrupt_tiff(path: Path) -> None:
    path.write_bytes(b"II*\0" + b"\xff" * 60)


def corrupt_png(path: Path) -> None:
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 60)


def truncated_tiff(path: Path) -> None:
    tifffile.imwrite(path, frame(0))  # 1280 bytes of pixels after the header
    path.write_bytes(path.read_bytes()[:600])


def truncated_png(path: Path) -> None:
    Image.fromarray(frame(0)).save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def truncated_jpeg(path: Path) -> None:
    Image.fromarray(frame(0)).save(path, format="JPEG")
    path.write_bytes(path.read_bytes()[:-20])


def absurd_tiff(path: Path) -> None:
    """A compressed TIFF whose header claims an image 2**30 pixels wide (32 GiB per frame)."""
    tifffile.imwrite(path, frame(0), compression="zlib")
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages[0].tags["ImageWidth"].overwrite(2**30)


def other_shape(path: Path) -> None:
    Image.fromarray(frame(0, np.uint8, (32, 41))).save(path)


def other_dtype(path: Path) -> None:
    Image.fromarray(frame(0, np.uint16)).save(path)


def colour(path: Path) -> None:
    Image.fromarray(frame(0, np.uint8, (*SHAPE, 3))).save(path)


def five_pages(path: Path) -> None:
    tifffile.imwrite(path, np.stack([frame(i) for i in range(5)]))


def empty_directory(root: Path) -> None:
    (root / "empty").mkdir()


def hidden_only(root: Path) -> None:
    (root / "hidden").mkdir()
    Image.fromarray(frame(0)).save(root / "hidden" / ".a.png")
    (root / "hidden" / "sub").mkdir()


def lone_corrupt_tiff(root: Path) -> None:
    corrupt_tiff(root / "lone.tif")


def broken_zarr(root: Path) -> None:
    (root / "broken.zarr").mkdir()
    (root / "broken.zarr" / "zarr.json").write_text("{")


def unreadable(root: Path) -> None:
    path = root / "in" / "locked.png"
    Image.fromarray(frame(0)).save(path)
    path.chmod(0)


def regular_file(name: str) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        (root / name).write_text("a file, not a directory\n")

    return setup


GOOD_CONFIG = "input: in/*.png\noutput: out/\nstages:\n  - mean: {size: 3}\n"


def config(text: str) -> Callable[[Path], None]:
    """A setup that writes ``run.yaml``."""

    def setup(root: Path) -> None:
        (root / "run.yaml").write_text(text)

    return setup


def with_stage(stage: str, extra: str = "") -> str:
    """GOOD_CONFIG with its one stage replaced (line 4 of the file), and ``extra`` lines."""
    return GOOD_CONFIG.replace("mean: {size: 3}", stage) + extra


def kernels(source: str, stage: str) -> Callable[[Path], None]:
    """A setup that writes ``kernels.py`` and a ``run.yaml`` whose stage is ``stage``."""

    def setup(root: Path) -> None:
        (root / "kernels.py").write_text(textwrap.dedent(source))
        config(with_stage(stage))(root)

    return setup


def nothing(root: Path) -> None:
    pass


KERNELS = """\
    import stencilpipe as sp

    CONSTANT = 3


    @sp.stencil
    def smooth(x):
        return (x[0, -1] + x[0, 0] + x[0, 1]) // 3


    @sp.stencil
    def broken(x):
        return x[0, 0] + "one"
    """  # broken's return is line 13

# -- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    what: str  # the bad input, for the table
    setup: Callable[[Path], None]
    args: tuple[str, ...]
    message: str  # the pattern the message must match as a whole (re.fullmatch)
    usage: bool = False  # a usage error that click reports (usage lines, then Error: ...)
    xfail: str | None = None  # what goes wrong today, for a strict xfail


def apply(*args: str) -> tuple[str, ...]:
    return ("apply", "mean:size=3", *args)


ONE_BAD = r"1 of 4 files in in/ cannot be read: "  # a message naming one bad file of four
HINT = r"; pass .+ to leave them out"  # how to go on without them: test_skip_bad_hint_...

CASES = [
    # ---- images ------------------------------------------------------------------------------
    Case(
        "zero-byte",
        "a zero-byte image among good ones",
        add("empty.png", zero_bytes),
        apply("in/", "out/"),
        rf"{ONE_BAD}empty\.png: empty file \(0 bytes\){HINT}",
    ),
    Case(
        "corrupt-tiff",
        "a TIFF whose header is garbage",
        add("corrupt.tif", corrupt_tiff),
        apply("in/", "out/"),
        rf"{ONE_BAD}corrupt\.tif: corrupt TIFF \(.+\){HINT}",
    ),
    Case(
        "corrupt-png",
        "a PNG whose header is garbage",
        add("corrupt.png", corrupt_png),
        apply("in/", "out/"),
        rf"{ONE_BAD}corrupt\.png: corrupt PNG \(its header cannot be parsed\){HINT}",
    ),
    Case(
        "truncated-tiff",
        "a TIFF cut short",
        add("trunc.tif", truncated_tiff),
        apply("in/", "out/"),
        rf"{ONE_BAD}trunc\.tif: truncated \(needs \d+ bytes, has 600\){HINT}",
    ),
    Case(
        "truncated-png",
        "a PNG cut short",
        add("trunc.png", truncated_png),
        apply("in/", "out/"),
        rf"{ONE_BAD}trunc\.png: truncated \(the PNG end marker is missing\){HINT}",
    ),
    Case(
        "truncated-jpeg",
        "a JPEG cut short",
        add("trunc.jpg", truncated_jpeg),
        apply("in/", "out/"),
        rf"{ONE_BAD}trunc\.jpg: truncated \(the JPEG end marker is missing\){HINT}",
    ),
    Case(
        "text-file",
        "a text file in the directory",
        add("notes.txt", text_file),
        apply("in/", "out/"),
        rf"{ONE_BAD}notes\.txt: not an image{HINT}",
    ),
    Case(
        "text-as-png",
        "a text file named .png",
        add("fake.png", text_file),
        apply("in/", "out/"),
        rf"{ONE_BAD}fake\.png: not an image{HINT}",
    ),
    Case(
        "absurd-tiff",
        "a TIFF whose header claims 32 x 2**30 pixels",
        add("absurd.tif", absurd_tiff),
        apply("in/", "out/"),
        rf"{ONE_BAD}absurd\.tif: header claims 32\.00 GiB per frame \(shape \(32, 1073741824\)\), "
        rf"more than 16\.00 GiB: the file is corrupt{HINT}",
    ),
    Case(
        "mixed-shapes",
        "one frame 32x41 among 32x40",
        add("wide.png", other_shape),
        apply("in/", "out/"),
        rf"{ONE_BAD}wide\.png: shape \(32, 41\) differs from \(32, 40\) of the other 3 files{HINT}",
    ),
    Case(
        "mixed-dtypes",
        "one 16-bit frame among 8-bit",
        add("deep.png", other_dtype),
        apply("in/", "out/"),
        rf"{ONE_BAD}deep\.png: dtype uint16 differs from uint8 of the other 3 files{HINT}",
    ),
    Case(
        "colour-among-gray",
        "one RGB frame among gray",
        add("rgb.png", colour),
        apply("in/", "out/"),
        rf"{ONE_BAD}rgb\.png: colour \(32, 40, 3\) among gray \(32, 40\) \(the other 3 files\){HINT}",
    ),
    Case(
        "multi-page-tiff",
        "a 5-page TIFF among single frames",
        add("five.tif", five_pages),
        apply("in/", "out/"),
        rf"{ONE_BAD}five\.tif: holds 5 frames, and a stack of files takes one frame per file "
        rf"\(open this file on its own to read its frames\){HINT}",
    ),
    Case(
        "unreadable",
        "an unreadable file (chmod 000)",
        unreadable,
        apply("in/", "out/"),
        rf"1 of 4 files in in/ cannot be read: locked\.png: cannot be opened \(Permission denied\){HINT}",
    ),
    Case(
        "lone-corrupt-tiff",
        "INPUT is one corrupt TIFF file",
        lone_corrupt_tiff,
        apply("lone.tif", "out/"),
        r"(?:/\S+/)?lone\.tif: corrupt TIFF \(.+\)",
    ),
    Case(
        "broken-zarr",
        "INPUT is a Zarr store with broken metadata",
        broken_zarr,
        apply("broken.zarr", "out/"),
        r"(?:/\S+/)?broken\.zarr: not a readable Zarr store \(.+\)",
    ),
    # ---- where the inputs are ----------------------------------------------------------------
    Case(
        "empty-directory",
        "an empty directory",
        empty_directory,
        apply("empty/", "out/"),
        r"directory empty/ holds no files",
    ),
    Case(
        "hidden-only",
        "a directory of hidden files and subdirectories only",
        hidden_only,
        apply("hidden/", "out/"),
        r"directory hidden/ holds no files",
    ),
    Case(
        "missing-path",
        "a path that does not exist",
        nothing,
        apply("missing/", "out/"),
        r"no such file or directory: missing/",
    ),
    Case(
        "glob-no-match",
        "a glob that matches nothing",
        nothing,
        apply("in/*.tif", "out/"),
        r"no files match 'in/\*\.tif'",
    ),
    Case(
        "glob-missing-directory",
        "a glob in a directory that does not exist",
        nothing,
        apply("nowhere/*.png", "out/"),
        r"no files match 'nowhere/\*\.png' \(directory nowhere does not exist\)",
    ),
    # ---- where the outputs go ----------------------------------------------------------------
    Case(
        "output-is-input",
        "OUTPUT is the input directory",
        nothing,
        apply("in/", "in/"),
        r"refusing to write to in/: it is (?:/\S+/)?in, which holds the input in/; "
        r"choose a directory outside it",
    ),
    Case(
        "output-inside-input",
        "OUTPUT is inside the input directory",
        nothing,
        apply("in/*.png", "in/filtered/"),
        r"refusing to write to in/filtered/: it is inside (?:/\S+/)?in, which holds the input "
        r"in/\*\.png; choose a directory outside it",
    ),
    Case(
        "output-hidden-name",
        "an OUTPUT pattern that makes hidden files",
        nothing,
        apply("in/", "out/.*.tif"),
        r"refusing output file name '\.a\.tif': it must stay in the target directory and not "
        r"be hidden",
    ),
    Case(
        "output-one-file",
        "OUTPUT names one file for 3 frames",
        nothing,
        apply("in/", "out/result.tif"),
        r"out/result\.tif names one file, but the array has 3 frames; use a pattern such as "
        r"(?:/\S+/)?out/\*\.tif",
    ),
    Case(
        "output-bad-pattern",
        "an OUTPUT pattern with an unknown field",
        nothing,
        apply("in/", "out/{frame}.tif"),
        r"bad pattern '\{frame\}\.tif' \('frame'\): use '\{\}' or '\{:05d\}' for the frame "
        r"index, '\{name\}' or '\*' for the frame name",
    ),
    Case(
        "output-unknown-format",
        "an OUTPUT format stencilpipe does not write",
        nothing,
        apply("in/", "out/*.bmp"),
        r"cannot write '\.bmp': use \.tif, \.tiff, \.png",
    ),
    Case(
        "output-format-cannot-hold",
        "float32 results to PNG",
        nothing,
        ("apply", "sobel:axis=0:dtype=float32", "in/", "out/*.png"),
        r"PNG cannot hold float32 frames of shape \(32, 40\) \(it takes uint8 or uint16 gray, "
        r"uint8 gray\+alpha, RGB or RGBA, or bool\); write \.tif instead",
    ),
    Case(
        "output-under-a-file",
        "OUTPUT below a path that is a regular file",
        regular_file("notes.txt"),
        apply("in/", "notes.txt/out/"),
        r".*notes\.txt.*[Nn]ot a directory.*",
    ),
    Case(
        "report-over-input",
        "--report naming an input file",
        nothing,
        apply("in/", "out/", "--report", "in/a.png"),
        r"(?=.*in/a\.png)(?=.*input).*",
    ),
    Case(
        "report-inside-input",
        "--report into the input directory",
        nothing,
        apply("in/", "out/", "--report", "in/report.html"),
        r"(?=.*in/report\.html)(?=.*input).*",
    ),
    # ---- the config file ---------------------------------------------------------------------
    Case(
        "config-missing",
        "a config file that does not exist",
        nothing,
        ("run", "missing.yaml"),
        r"missing\.yaml: cannot read the config file \(No such file or directory\)",
    ),
    Case(
        "config-is-directory",
        "a config path that is a directory",
        nothing,
        ("run", "in"),
        r"Invalid value for 'CONFIG': File 'in' is a directory\.",
        usage=True,
    ),
    Case(
        "config-not-yaml",
        "a config file that is not YAML",
        config("input: [in/*.png\noutput: out/\n"),
        ("run", "run.yaml"),
        r"run\.yaml:2: not valid YAML \(expected ',' or '\]', but got ':'\)",
    ),
    Case(
        "config-not-mapping",
        "a config file that is a list",
        config("- input\n- output\n"),
        ("run", "run.yaml"),
        r"run\.yaml: a pipeline config is a mapping of keys \(input, output, stages, \.\.\.\)",
    ),
    Case(
        "config-empty",
        "an empty config file",
        config(""),
        ("run", "run.yaml"),
        r"run\.yaml: a pipeline config is a mapping of keys \(input, output, stages, \.\.\.\)",
    ),
    Case(
        "config-unknown-key",
        "an unknown config key",
        config(GOOD_CONFIG + "workers: 4\n"),
        ("run", "run.yaml"),
        r"run\.yaml:5: workers: unknown key; expected one of: input, output, stages, .+",
    ),
    Case(
        "config-misspelled-key",
        "a misspelled config key",
        config(GOOD_CONFIG + "boundry: nearest\n"),
        ("run", "run.yaml"),
        r"run\.yaml:5: boundry: unknown key; did you mean 'boundary'\?",
    ),
    Case(
        "config-misspelled-stage",
        "a misspelled stage name",
        config(with_stage("gausian: {sigma: 1}")),
        ("run", "run.yaml"),
        r"run\.yaml:4: stages\.0: unknown stage 'gausian'; did you mean 'gaussian'\?",
    ),
    Case(
        "cval-nan-integer",
        "cval=nan on integer frames",
        nothing,
        ("apply", "mean:size=3:cval=nan", "in/", "out/", "--boundary", "constant"),
        r"mean: cval=nan needs a float input, but the input dtype is uint8, which has no NaN; "
        r"give a number of its range, or convert the input with \.astype",
    ),
    Case(
        "config-unknown-nested-key",
        "an unknown key under cluster:",
        config(GOOD_CONFIG + "cluster: {n_workers: 2, gpus: 1}\n"),
        ("run", "run.yaml"),
        r"run\.yaml:5: cluster\.gpus: unknown key; did you mean 'gpu'\?",
    ),
    Case(
        "config-missing-key",
        "a config without output:",
        config("input: in/*.png\nstages: [laplace]\n"),
        ("run", "run.yaml"),
        r"run\.yaml:1: output: Field required",
    ),
    Case(
        "config-unknown-stage",
        "an unknown stage",
        config(with_stage("blur: {size: 3}")),
        ("run", "run.yaml"),
        r"run\.yaml:4: stages\.0: unknown stage 'blur'; expected one of: mean, gaussian, sobel, "
        r"laplace, minimum, maximum, median, binary_erosion, binary_dilation, binary_opening, "
        r"binary_closing, grey_erosion, grey_dilation, grey_opening, grey_closing, stencil",
    ),
    Case(
        "config-wrong-type",
        "a parameter of the wrong type",
        config(with_stage("gaussian: {sigma: big}")),
        ("run", "run.yaml"),
        r"run\.yaml:4: stages\.0\.gaussian\.sigma: Input should be a valid number, unable to "
        r"parse string as a number",
    ),
    Case(
        "config-unknown-parameter",
        "an unknown stage parameter",
        config(with_stage("mean: {size: 3, radius: 2}")),
        ("run", "run.yaml"),
        r"run\.yaml:4: stages\.0\.mean\.radius: unknown key; expected one of: size, ndim, "
        r"boundary, cval, dtype",
    ),
    Case(
        "config-bad-value",
        "a parameter out of range",
        config(with_stage("gaussian: {sigma: -1}")),
        ("run", "run.yaml"),
        r"stages\.0\.gaussian: sigma must be positive, got -1\.0",
    ),
    Case(
        "config-bad-boundary",
        "an unknown boundary mode",
        config(GOOD_CONFIG + "boundary: bounce\n"),
        ("run", "run.yaml"),
        r"run\.yaml:5: boundary: Input should be 'reflect', 'constant', 'nearest', 'mirror' or "
        r"'wrap'",
    ),
    Case(
        "config-zero-workers",
        "cluster: {n_workers: 0}",
        config(GOOD_CONFIG + "cluster: {n_workers: 0}\n"),
        ("run", "run.yaml"),
        r"run\.yaml:5: cluster\.n_workers: Input should be greater than 0",
    ),
    Case(
        "config-no-stages",
        "an empty list of stages",
        config("input: in/*.png\noutput: out/\nstages: []\n"),
        ("run", "run.yaml"),
        r"run\.yaml:3: stages: List should have at least 1 item after validation, not 0",
    ),
    Case(
        "config-bad-compression",
        "an unknown compression",
        config(GOOD_CONFIG + "compression: squash\n"),
        ("run", "run.yaml"),
        r"cannot write uint8 frames of shape \(32, 40\) as TIFF with compression='squash': .+",
    ),
    Case(
        "set-malformed",
        "--set without =",
        config(GOOD_CONFIG),
        ("run", "run.yaml", "--set", "resume"),
        r"--set 'resume': expected key=value, e\.g\. --set cluster\.n_workers=4",
    ),
    Case(
        "set-wrong-type",
        "--set with a value of the wrong type",
        config(GOOD_CONFIG),
        ("run", "run.yaml", "--set", "cluster.n_workers=two"),
        r"run\.yaml:1: cluster\.n_workers: Input should be a valid integer, unable to parse "
        r"string as an integer",
    ),
    # ---- stages on the command line ----------------------------------------------------------
    Case(
        "apply-unknown-stage",
        "apply: an unknown stage",
        nothing,
        ("apply", "blur:size=3", "in/", "out/"),
        r"command line: stages\.0: unknown stage 'blur'; expected one of: mean, gaussian, "
        r"sobel, laplace, minimum, maximum, median, binary_erosion, binary_dilation, "
        r"binary_opening, binary_closing, grey_erosion, grey_dilation, grey_opening, "
        r"grey_closing, stencil",
    ),
    Case(
        "apply-wrong-type",
        "apply: a parameter of the wrong type",
        nothing,
        ("apply", "mean:size=big", "in/", "out/"),
        r"command line: stages\.0\.mean\.size: Input should be a valid integer, unable to parse "
        r"string as an integer",
    ),
    Case(
        "apply-unknown-parameter",
        "apply: an unknown parameter",
        nothing,
        ("apply", "mean:radius=3", "in/", "out/"),
        r"command line: stages\.0\.mean\.radius: unknown key; expected one of: size, ndim, "
        r"boundary, cval, dtype",
    ),
    Case(
        "apply-malformed",
        "apply: a parameter without =",
        nothing,
        ("apply", "mean:size", "in/", "out/"),
        r"Invalid value: 'size' in 'mean:size': expected key=value",
        usage=True,
    ),
    Case(
        "apply-bad-boundary",
        "apply: an unknown --boundary",
        nothing,
        apply("in/", "out/", "--boundary", "bounce"),
        r"command line: boundary: Input should be 'reflect', 'constant', 'nearest', 'mirror' "
        r"or 'wrap'",
    ),
    Case(
        "apply-zero-workers",
        "apply: --workers 0",
        nothing,
        apply("in/", "out/", "--workers", "0"),
        r"Invalid value for '--workers': 0 is not in the range x>=1\.",
        usage=True,
    ),
    Case(
        "apply-missing-argument",
        "apply without OUTPUT",
        nothing,
        ("apply", "mean:size=3", "in/"),
        r"Missing argument 'OUTPUT'\.",
        usage=True,
    ),
    # ---- users' kernels ----------------------------------------------------------------------
    Case(
        "stencil-file-missing",
        "a stencil file that does not exist",
        config(with_stage("stencil: nofile.py:smooth")),
        ("run", "run.yaml"),
        r"stages\.0\.stencil: stencil file (?:/\S+/)?nofile\.py does not exist",
    ),
    Case(
        "stencil-name-missing",
        "a stencil name the file lacks",
        kernels(KERNELS, "stencil: kernels.py:nothere"),
        ("run", "run.yaml"),
        r"stages\.0\.stencil: 'kernels\.py' has no attribute 'nothere'",
    ),
    Case(
        "stencil-not-a-kernel",
        "a stencil reference to a constant",
        kernels(KERNELS, "stencil: kernels.py:CONSTANT"),
        ("run", "run.yaml"),
        r"stages\.0\.stencil: 'kernels\.py:CONSTANT' is a int, not a stencil",
    ),
    Case(
        "stencil-no-name",
        "a stencil reference without :name",
        kernels(KERNELS, "stencil: kernels.py"),
        ("run", "run.yaml"),
        r".*stages\.0\.stencil: .*'kernels\.py'.*file\.py:name.*",
    ),
    Case(
        "stencil-module-missing",
        "a stencil module that cannot be imported",
        config(with_stage("stencil: no_such_module_here:smooth")),
        ("run", "run.yaml"),
        r"stages\.0\.stencil: cannot import 'no_such_module_here' \(No module named "
        r"'no_such_module_here'\); give an importable module or a \.py file beside the config",
    ),
    Case(
        "stencil-syntax-error",
        "a stencil file with a syntax error",
        kernels("def smooth(x)\n    return x[0, 0]\n", "stencil: kernels.py:smooth"),
        ("run", "run.yaml"),
        r"stages\.0\.stencil: .*kernels\.py.*\b1\b.*expected ':'.*",
    ),
    Case(
        "stencil-import-raises",
        "a stencil file that raises when imported",
        kernels("import stencilpipe as sp\nSCALE = 1 / 0\n", "stencil: kernels.py:smooth"),
        ("run", "run.yaml"),
        r"stages\.0\.stencil: .*kernels\.py.*ZeroDivisionError.*",
    ),
    Case(
        "stencil-import-missing-module",
        "a stencil file that imports a missing module",
        kernels("import stencilpipe_no_such_module\n", "stencil: kernels.py:smooth"),
        ("run", "run.yaml"),
        r"stages\.0\.stencil: cannot import 'kernels\.py' \(No module named "
        r"'stencilpipe_no_such_module'\); give an importable module or a \.py file beside the "
        r"config",
    ),
    Case(
        "kernel-not-analysable",
        "a kernel indexed by a variable",
        kernels(
            """\
            import stencilpipe as sp


            @sp.stencil
            def shifty(x, k):
                return x[k, 0]
            """,
            "stencil: kernels.py:shifty",
        ),
        ("run", "run.yaml"),
        r"stages\.0\.stencil: kernel 'shifty' \((?:/\S+/)?kernels\.py:6\): the offset in `x\[k, 0\]` "
        r"is not a constant, so the halo cannot be inferred; .+",
    ),
    Case(
        "kernel-does-not-compile",
        'a kernel that fails typing (x[0, 0] + "one")',
        kernels(KERNELS, "stencil: kernels.py:broken"),
        ("run", "run.yaml"),
        r"stages\.0\.stencil: kernel 'broken' \((?:/\S+/)?kernels\.py:13\) does not compile for "
        r"uint8 input: .+",
    ),
    # ---- the cluster -------------------------------------------------------------------------
    Case(
        "unreachable-scheduler",
        "a scheduler address nobody listens on",
        config(GOOD_CONFIG + "cluster: {address: 'tcp://127.0.0.1:9', timeout: 2}\n"),
        ("run", "run.yaml"),
        r"cannot reach the Dask scheduler at tcp://127\.0\.0\.1:9 within 2 s \(.+\); check "
        r"the address, or leave cluster\.address empty to run on an embedded cluster",
    ),
    Case(
        "malformed-address",
        "--address that is not an address",
        nothing,
        apply("in/", "out/", "--address", "nonsense://nowhere"),
        r".*nonsense://nowhere.*unknown address scheme.*",
    ),
]

# -- running a case ----------------------------------------------------------------------------
#
# ``python -m stencilpipe`` spends ~2 s of CPU importing Numba, Dask and the library before it
# looks at its arguments; sixty cases would spend two minutes on that alone. So each case runs
# in a child forked from one process that has done the imports (a "zygote", started once per
# test session): the child changes into the case's directory, points fds 0/1/2 at /dev/null
# and two files, and runs ``runpy.run_module("stencilpipe", run_name="__main__")`` -- what
# ``python -m stencilpipe`` runs -- then exits like the interpreter (atexit handlers, the exit
# code of SystemExit, a traceback and 1 for anything else). STENCILPIPE_TEST_FRESH=1 runs every
# case in a fresh ``python -m stencilpipe`` instead; test_the_zygote_answers_like_python_m
# checks that both give the same answers.

ENV = {"COLUMNS": "200", "NO_COLOR": "1", "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "3s"}

_ZYGOTE = r"""
import atexit, json, os, runpy, sys, time, traceback
import distributed, stencilpipe.cli, stencilpipe.io, stencilpipe.pipeline.config
import stencilpipe.pipeline.run, stencilpipe.pipeline.stages  # what the command imports
requests, replies = sys.stdin, sys.stdout
for line in requests:
    job = json.loads(line)
    replies.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(job["cwd"])
            for fd, (path, flags) in enumerate(
                [(os.devnull, os.O_RDONLY)]
                + [(job[k], os.O_WRONLY | os.O_CREAT | os.O_TRUNC) for k in ("out", "err")]
            ):
                os.dup2(os.open(path, flags, 0o644), fd)
            sys.stdin = open(0, closefd=False)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            sys.argv = ["stencilpipe", *job["args"]]
            try:
                runpy.run_module("stencilpipe", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as exc:
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
            except BaseException:
                traceback.print_exc()
                code = 1
            atexit._run_exitfuncs()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + job["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            done, status = os.waitpid(pid, 0)
            break
        time.sleep(0.02)
    replies.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
    replies.flush()
"""


class Zygote:
    """One process that has imported stencilpipe, forking a child per command."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **ENV},
        )

    def run(self, args, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
        out, err = cwd.parent / f".{cwd.name}.stdout", cwd.parent / f".{cwd.name}.stderr"
        job = {"args": list(args), "cwd": str(cwd), "out": str(out), "err": str(err)}
        self.process.stdin.write(json.dumps({**job, "timeout": timeout}) + "\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        if not reply:
            raise RuntimeError("the zygote process died")
        result = subprocess.CompletedProcess(
            args, json.loads(reply)["rc"], out.read_text(), err.read_text()
        )
        out.unlink()
        err.unlink()
        return result

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


def run_fresh(args, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -m stencilpipe ARGS`` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "stencilpipe", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **ENV},
    )


@pytest.fixture(scope="module")
def run_cli():
    if os.environ.get("STENCILPIPE_TEST_FRESH"):
        yield run_fresh
        return
    zygote = Zygote()
    try:
        yield zygote.run
    finally:
        zygote.close()


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int, int]]:
    """Every path under ``root``: (bytes, or None for a directory; mode; mtime in ns)."""
    state = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        data = path.read_bytes() if path.is_file() else None
        state[str(path.relative_to(root))] = (data, stat.st_mode, stat.st_mtime_ns)
    return state


def message_of(result: subprocess.CompletedProcess, usage: bool, root: Path | None = None) -> str:
    """The message of a refusal, with the case's folder (where relative paths resolve, so
    that messages name files absolutely) left out of the paths it names."""
    lines = result.stderr.strip().splitlines()
    if not lines:
        return ""
    message = lines[-1].removeprefix("Error: ") if usage else lines[0].removeprefix("error: ")
    return message.replace(f"{root}{os.sep}", "") if root else message


def _skip_reason(case: Case, root: Path) -> str | None:
    if case.id == "unreadable" and os.access(root / "in" / "locked.png", os.R_OK):
        return "chmod 000 does not stop this user from reading files (tests run as root)"
    return None


def _param(case: Case):
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.id, marks=marks)


def check(case: Case, result: subprocess.CompletedProcess, root: Path) -> None:
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 2, shown
    assert "Traceback" not in result.stderr + result.stdout, shown
    lines = result.stderr.strip().splitlines()
    if case.usage:
        assert lines and lines[0].startswith("Usage: ") and lines[-1].startswith("Error: "), shown
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), shown
    assert re.fullmatch(case.message, message_of(result, case.usage, root)), shown


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_input_gets_one_line_and_exit_code_2(tmp_path, case, run_cli):
    good_inputs(tmp_path)
    case.setup(tmp_path)
    reason = _skip_reason(case, tmp_path)
    if reason:
        pytest.skip(reason)
    before = snapshot(tmp_path)
    result = run_cli(case.args, tmp_path)
    try:
        check(case, result, tmp_path)
    finally:
        assert snapshot(tmp_path) == before, "an input changed, or something was written"


def test_skip_bad_hint_names_an_option_of_the_command(tmp_path, run_cli):
    """The message names the command's --skip-bad, and --skip-bad leaves the bad file out."""
    good_inputs(tmp_path)
    text_file(tmp_path / "in" / "notes.txt")
    result = run_cli(apply("in/", "out/"), tmp_path)
    assert result.returncode == 2
    assert "--skip-bad" in result.stderr, result.stderr
    retry = run_cli(apply("in/", "out/", "--skip-bad"), tmp_path)
    assert retry.returncode == 0, retry.stderr
    assert sorted(p.name for p in (tmp_path / "out").glob("*.tif")) == ["a.tif", "b.tif", "c.tif"]


@pytest.mark.parametrize("case_id", ["zero-byte", "config-unknown-key", "apply-zero-workers"])
def test_the_zygote_answers_like_python_m(tmp_path, case_id, run_cli):
    """The forked runner gives what a fresh ``python -m stencilpipe`` gives."""
    (case,) = [c for c in CASES if c.id == case_id]
    answers = []
    for runner, folder in ((run_cli, "forked"), (run_fresh, "fresh")):
        root = tmp_path / folder
        root.mkdir()
        good_inputs(root)
        case.setup(root)
        result = runner(case.args, root)
        answers.append((result.returncode, result.stdout, result.stderr.replace(str(root), "")))
    assert answers[0] == answers[1]
    check(case, result, root)


def test_the_readme_table_lists_every_case():
    """README.md shows the table (``python tests/test_bad_inputs.py`` prints it afresh)."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    missing = [case.what for case in CASES if f"| {case.what} |" not in readme]
    assert not missing, f"cases missing from README's bad-input table: {missing}"


def markdown_table() -> str:
    """Run every case; return the table (bad input -> command -> message -> exit code)."""
    import tempfile

    zygote = Zygote()
    rows = ["| bad input | command | message (stderr) | exit code |", "|---|---|---|---:|"]
    try:
        for case in CASES:
            with tempfile.TemporaryDirectory() as folder:
                root = Path(folder)
                good_inputs(root)
                case.setup(root)
                reason = _skip_reason(case, root)
                if reason:
                    rows.append(f"| {case.what} | | (not run: {reason}) | |")
                    continue
                result = zygote.run(case.args, root)
                lines = result.stderr.strip().splitlines() or ["(nothing)"]
                if case.usage:
                    message = lines[-1]
                elif len(lines) == 1:
                    message = lines[0]
                else:
                    message = " / ".join(line.strip() for line in lines[-2:])
                message = message.replace(f"{folder}{os.sep}", "").replace(folder, "…")
                message = message.replace("|", "\\|")
                command = "stencilpipe " + " ".join(case.args).replace("|", "\\|")
                now = " (xfail: should be 2, one line)" if case.xfail else ""
                rows.append(
                    f"| {case.what} | `{command}` | `{message}` | {result.returncode}{now} |"
                )
    finally:
        zygote.close()
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())

"""notebooks/quickstart.ipynb runs top to bottom in a real Jupyter kernel and does what it says.

The kernel is a ``python3`` spec that the fixture writes with ipykernel (``ipykernel
install --prefix``) into a temporary directory put first on ``JUPYTER_PATH``: it names this
interpreter, so the notebook runs with the same packages as the tests on any machine,
whatever kernel specs it has. Outputs are checked against scipy (and against the same
stages applied frame by frame with NumPy), read back with tifffile.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi

import stencilpipe as sp

nbformat = pytest.importorskip("nbformat", reason="the test extra installs nbformat")
nbclient = pytest.importorskip("nbclient", reason="the test extra installs nbclient")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "quickstart.ipynb"
FRAMES = 8
DASHBOARD = re.compile(r"http://127\.0\.0\.1:\d+/status")


def _outputs(cell) -> list[dict]:
    return cell.get("outputs", []) if cell.cell_type == "code" else []


def _texts(output: dict) -> list[str]:
    """Every text an output carries: stream text, text/plain, text/html."""
    texts = [output.get("text", "")]
    data = output.get("data", {})
    texts += [data.get(kind, "") for kind in ("text/plain", "text/html")]
    return [t if isinstance(t, str) else "".join(t) for t in texts]


def execute(workdir: Path, jupyter: Path):
    """Run the notebook in a fresh kernel, working in ``workdir``; return it with outputs."""
    from ipykernel.kernelspec import install
    from jupyter_client.kernelspec import KernelSpecManager

    # Our own "python3" spec, first on JUPYTER_PATH: whatever specs the machine has, the
    # kernel runs this interpreter (ipykernel writes sys.executable into it).
    install(prefix=str(jupyter), kernel_name="python3")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(jupyter / "share" / "jupyter"))
        patch.setenv("QUICKSTART_DIR", str(workdir))  # the kernel inherits the environment
        spec = KernelSpecManager().get_kernel_spec("python3")
        assert spec.argv[0] == sys.executable, spec.argv
        client = nbclient.NotebookClient(
            notebook,
            timeout=300,
            kernel_name="python3",
            resources={"metadata": {"path": str(workdir)}},
        )
        client.execute()  # raises CellExecutionError, with the cell and its error, on one
    return notebook


def test_quickstart_runs_shows_the_dashboard_and_writes_what_scipy_computes(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    notebook = execute(workdir, tmp_path / "jupyter")
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]

    # every cell ran, none raised or printed a traceback
    assert code and all(cell.execution_count for cell in code)
    errors = [o for cell in code for o in _outputs(cell) if o.output_type == "error"]
    assert not errors, errors
    stderr = "".join(o.get("text", "") for c in code for o in _outputs(c) if o.get("name") == "stderr")
    assert "Traceback" not in stderr, stderr

    # the Client widget links the dashboard, on 127.0.0.1
    (cell,) = [c for c in code if "Client(cluster)" in c.source]
    html = [o["data"]["text/html"] for o in _outputs(cell) if "text/html" in o.get("data", {})]
    assert html and DASHBOARD.search("".join(html)), _outputs(cell)

    # before / after shown as an image
    images = [o["data"]["image/png"] for c in code for o in _outputs(c) if "image/png" in o.get("data", {})]
    assert images and len(images[0]) > 1000

    # the frames written, read back with tifffile, equal scipy's
    inputs = sorted((workdir / "in").glob("*.tif"))
    assert len(inputs) == FRAMES
    for kind in ("smooth", "edges"):
        folder = workdir / "out" / kind
        files = sorted(p.name for p in folder.iterdir() if p.name != ".stencilpipe")
        assert files == [p.name for p in inputs], (kind, files)  # nothing partial, no temp file
    printed = "".join(t for c in code for o in _outputs(c) for t in _texts(o))
    assert printed.count(f"wrote {FRAMES} frames") == 2, printed

    gaussian = sp.library.gaussian(1.0, dtype="float32")
    sobel = sp.library.sobel(axis=0)
    for path in inputs:
        frame = tifffile.imread(path)
        assert frame.dtype == np.uint8 and frame.shape == (512, 512)

        smoothed = tifffile.imread(workdir / "out" / "smooth" / path.name)
        box_sum = ndi.correlate(frame.astype(np.int64), np.ones((3, 3), np.int64), mode="reflect")
        assert smoothed.dtype == np.uint8
        np.testing.assert_array_equal(smoothed, (box_sum // 9).astype(np.uint8))

        edges = tifffile.imread(workdir / "out" / "edges" / path.name)
        assert edges.dtype == np.float32
        blurred = ndi.gaussian_filter(frame.astype(np.float64), 1.0, mode="reflect", truncate=4.0)
        want = ndi.sobel(blurred, axis=0, mode="reflect")
        np.testing.assert_allclose(edges, want, rtol=1e-5, atol=5e-3)
        # and exactly what the same two stages give frame by frame, in NumPy, in this process
        np.testing.assert_array_equal(edges, sobel(gaussian(frame)))

"""A real headless Chromium opens a LocalCluster's dashboard while a stencil pipeline runs.

The browser opens ``/status`` first; then the pipeline starts: the write a run computes (a
stencil over a Dask stack, written with ``sp.imsave``), submitted with ``client.compute``, so
its tasks stream in while the page watches. Its last frame is held back by a
``distributed.Event`` until the page has been checked, so the run is still going while the
browser looks at it, whatever the speed of the machine. The page's Bokeh documents are read
from JavaScript (their ColumnDataSources carry the task names shown by the task stream and
the progress bars), a screenshot is kept (``tmp_path`` and ``test-artifacts/dashboard.png``),
then the last frame is let go and the outputs are checked against scipy.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them); skipped,
saying so, when they are not there.
"""

from __future__ import annotations

import re
import shutil
import time
import uuid
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi

import stencilpipe as sp
from chromium import chromium_paths, headless_chromium

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
FRAMES = 16
SHAPE = (256, 256)


@sp.stencil
def smooth_for_dashboard(x):
    return (x[-1, 0] + x[0, -1] + 4 * x[0, 0] + x[0, 1] + x[1, 0]) // 8


def oracle(frame: np.ndarray) -> np.ndarray:
    weights = np.array([[0, 1, 0], [1, 4, 1], [0, 1, 0]], np.int64)
    return (ndi.correlate(frame.astype(np.int64), weights, mode="reflect") // 8).astype(np.uint8)


def hold_last_frame(block: np.ndarray, event: str, block_info=None) -> np.ndarray:
    """Pass blocks through; the last one waits until the test sets ``event``."""
    from distributed import Event

    info = block_info[0]
    if info["chunk-location"][0] == info["num-chunks"][0] - 1:
        # Longer than any wait of the test (which sets the event when done, or fails):
        # released early, the held frame would be written before the test sees it held.
        Event(event).wait(timeout=900)
    return block


# Every string in the page's Bokeh data sources (task names, worker addresses, labels...).
PAGE_STRINGS = """
const found = new Set();
for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
  const models = doc.all_models || doc._all_models || [];
  for (const model of (models.values ? models.values() : models)) {
    const data = model && model.data;
    if (!data || typeof data !== "object") continue;
    const columns = data instanceof Map ? [...data.values()] : Object.values(data);
    for (const column of columns) {
      if (!column || typeof column === "string" || column.length === undefined) continue;
      for (const value of Array.from(column).slice(0, 5000)) {
        if (typeof value === "string") found.add(value);
      }
    }
  }
}
return [...found];
"""

RENDERED = (
    "return !!(window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents[0].roots().length > 0)"
)


def _task_prefixes(dask_scheduler) -> list[str]:
    return list(dask_scheduler.task_prefixes)


def _missing(prefixes: set[str], names) -> set[str]:
    """The prefixes not among ``names``; the progress bars cut long ones to ``abc...``."""
    names = set(names)
    cut = [name[:-3] for name in names if name.endswith("...")]
    return {p for p in prefixes if p not in names and not any(p.startswith(c) for c in cut)}


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.25)


def test_status_page_shows_the_running_pipelines_tasks(tmp_path):
    from distributed import Client, Event, LocalCluster

    chromium_paths()  # skip before starting anything
    rng = np.random.default_rng(7)
    frames = rng.integers(0, 256, (FRAMES, *SHAPE), dtype=np.uint8)
    out = tmp_path / "out"
    event = f"stencilpipe-dashboard-{uuid.uuid4().hex}"

    cluster = LocalCluster(
        n_workers=2,
        # Two threads each: the worker that holds the last frame still runs the frames
        # queued behind it (under load, work stealing can leave them there).
        threads_per_worker=2,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )
    client = Client(cluster)
    driver = None
    try:
        driver = headless_chromium(tmp_path / "chromium-profile")
        driver.set_page_load_timeout(60)
        status = client.dashboard_link
        assert status.startswith("http://127.0.0.1:") and status.endswith("/status")
        driver.get(status)
        _wait(lambda: driver.execute_script(RENDERED), 60, "Bokeh to render /status")

        # The page is up: start the pipeline, so its tasks stream in while the page watches.
        stack = da.from_array(frames, chunks=(1, *SHAPE))
        held = stack.map_blocks(hold_last_frame, event=event, dtype=stack.dtype)
        write = sp.imsave(smooth_for_dashboard(held), out, compute=False)
        future = client.compute(write)
        # running: every frame but the held one written, the held one still to come
        _wait(
            lambda: out.is_dir() and len(list(out.glob("*.tif"))) == FRAMES - 1,
            300,  # the full suite on 2 busy cores can take minutes to get here
            "the frames before the held one",
        )
        # The scheduler's task prefixes (a fresh cluster: all of them this pipeline's) must
        # all be on the page, the write tasks' among them.
        prefixes = set(client.run_on_scheduler(_task_prefixes))
        assert any("write" in prefix for prefix in prefixes), prefixes
        _wait(
            lambda: not _missing(prefixes, driver.execute_script(PAGE_STRINGS)),
            60,
            f"the task prefixes {sorted(prefixes)} on the page",
        )
        time.sleep(2)  # let the plots draw what their sources hold
        names = set(driver.execute_script(PAGE_STRINGS))
        shot = tmp_path / "dashboard.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copyfile(shot, ARTIFACTS / "dashboard.png")
        assert "Dask" in driver.title or "Status" in driver.title, driver.title
        assert not future.done()  # all of this while the pipeline was still running

        Event(event, client=client).set()
        report = future.result(timeout=120)
    finally:
        if driver is not None:
            driver.quit()
        Event(event, client=client).set()
        client.close()
        cluster.close()

    assert report.frames_written == FRAMES
    assert not _missing(prefixes, names)
    for index in range(FRAMES):
        written = tifffile.imread(out / f"{index:05d}.tif")
        np.testing.assert_array_equal(written, oracle(frames[index]))

    # Last, so that everything above is checked whatever happens here.
    if not any("smooth_for_dashboard" in name for name in names):
        tasks = sorted(n for n in names if re.fullmatch(r"[A-Za-z_][\w.-]*", n))
        pytest.xfail(
            "the dashboard's task names do not carry the stencil's name "
            f"('smooth_for_dashboard'); names on the page: {tasks}"
        )

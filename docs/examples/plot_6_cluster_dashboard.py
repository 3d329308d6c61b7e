"""
A cluster and its dashboard
===========================

Stencils pickle without their compiled code, so they travel to Dask workers, which compile
(or load from the disk cache) on first use. Here a small embedded ``LocalCluster``; on a real
one, pass its address to ``Client`` (or ``--address`` to the command line). The dashboard
link is where Dask's own pages show the tasks as they run; below, the same task stream drawn
from ``distributed.get_task_stream``.
"""

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from dask.utils import key_split
from distributed import Client, LocalCluster, get_task_stream
from skimage import data

import stencilpipe as sp

cluster = LocalCluster(
    n_workers=1,
    threads_per_worker=2,
    processes=False,  # worker threads in this process: quick to start for a small example
    protocol="tcp",
    host="127.0.0.1",
    dashboard_address="127.0.0.1:0",
)
client = Client(cluster)
print("dashboard:", client.dashboard_link)

# %%
# Sixteen frames in chunks of two, a median then a gaussian on each chunk.

frames = np.stack([np.roll(data.camera()[::2, ::2], 8 * i, axis=1) for i in range(16)])
stack = da.from_array(frames, chunks=(2, 256, 256))
denoise = sp.chain(sp.library.median(5), sp.library.gaussian(1.5))

with get_task_stream(client) as stream:
    result = client.compute(denoise(stack)).result()
assert np.array_equal(result, denoise(frames))

# %%
# The task stream: one bar per task, one row per worker thread, coloured by the kind of task
# (the dashboard's ``/status`` page draws the same while a computation runs). The first task
# of each kind on a worker also compiles its kernels, or loads them from the disk cache.

computing = [
    (f"{task['worker']} {task['thread']}", key_split(task["key"]), part)
    for task in stream.data
    for part in task["startstops"]
    if part["action"] == "compute"
]
threads = sorted({thread for thread, _, _ in computing})
kinds = sorted({kind for _, kind, _ in computing})
start = min(part["start"] for _, _, part in computing)
fig, (timeline, pictures) = plt.subplots(
    1, 2, figsize=(10, 3.2), layout="constrained", width_ratios=(2, 1)
)
for thread, kind, part in computing:
    timeline.barh(
        threads.index(thread),
        part["stop"] - part["start"],
        left=part["start"] - start,
        color=f"C{kinds.index(kind)}",
        edgecolor="white",
        label=kind,
    )
handles, labels = timeline.get_legend_handles_labels()
unique = dict(zip(labels, handles))
fig.legend(unique.values(), unique.keys(), loc="outside lower center", ncols=len(unique))
timeline.set_yticks(range(len(threads)), [f"thread {i}" for i in range(len(threads))])
timeline.set_xlabel("seconds")
timeline.set_title(f"{len(computing)} tasks on {len(threads)} threads")
pictures.imshow(np.hstack([frames[0], result[0]]), cmap="gray")
pictures.set_title("frame 0, before and after")
pictures.set_axis_off()
plt.show()

# %%
# The dashboard's ``/status`` page after the run: the task stream, the progress bars of each
# kind of task, the memory and the processing per worker.

# sphinx_gallery_start_ignore
# Hidden on the site's page (which shows its picture): where Chromium, its driver and selenium
# are installed, as in CI, a headless Chromium takes the picture of the page.
import importlib.util  # noqa: E402
import io  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

browser = shutil.which("chromium") or shutil.which("chromium-browser")
if browser and shutil.which("chromedriver") and importlib.util.find_spec("selenium"):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.wait import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        driver.get(client.dashboard_link)
        WebDriverWait(driver, 60).until(
            lambda d: d.execute_script(
                "return !!(window.Bokeh && Bokeh.documents.length"
                " && Bokeh.documents[0].roots().length)"
            )
        )
        time.sleep(3)  # the plots draw on their first periodic update after the render
        screenshot = plt.imread(io.BytesIO(driver.get_screenshot_as_png()))
    finally:
        driver.quit()
    fig, ax = plt.subplots(figsize=(10, 6.5), layout="constrained")
    ax.imshow(screenshot)
    ax.set_axis_off()
    plt.show()
# sphinx_gallery_end_ignore

client.close()
cluster.close()

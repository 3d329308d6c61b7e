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

denoise(frames[:1])  # compile once here: the worker threads share this process's kernels
with get_task_stream(client) as stream:
    result = client.compute(denoise(stack)).result()
assert np.array_equal(result, denoise(frames))

# %%
# The task stream: one bar per task, one row per worker thread, coloured by the kind of task
# (the dashboard's ``/status`` page draws the same while a computation runs).

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
timeline.legend(unique.values(), unique.keys(), fontsize=8, loc="upper right")
timeline.set_yticks(range(len(threads)), [f"thread {i}" for i in range(len(threads))])
timeline.set_xlabel("seconds")
timeline.set_title(f"{len(computing)} tasks on {len(threads)} threads")
pictures.imshow(np.hstack([frames[0], result[0]]), cmap="gray")
pictures.set_title("frame 0, before and after")
pictures.set_axis_off()
plt.show()

client.close()
cluster.close()
